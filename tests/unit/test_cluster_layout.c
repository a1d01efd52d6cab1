/*
 * test_cluster_layout.c - a redundant named region's record in etcd
 * (common/cluster_layout.c): a layout round-trips; the plain name record
 * and the layout never pass for each other (an older reader refuses a
 * layout rather than taking one piece for the region); every malformed
 * field is -EPROTO; out-of-range values are refused by the encoder; a
 * piece's name is made and split one way only ("<base>~<made>.<i>").
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_layout.h"
#include "cluster_name.h"
#include "tap.h"

#define S(x) x, strlen(x)

static const char *good = "{\"redundancy\":\"2+1\",\"size\":5000,\"chunk\":4096,\"layout_gen\":1,"
			  "\"pieces\":[{\"server\":\"s0\",\"region\":7,\"generation\":3,\"made\":1,\"state\":\"healthy\"},"
			  "{\"server\":\"s1\",\"region\":8,\"generation\":4,\"made\":1,\"state\":\"stale\"},"
			  "{\"server\":\"s2\",\"region\":9,\"generation\":5,\"made\":2,\"state\":\"lost\"}]}";

int main(void)
{
	struct cluster_layout l, back;
	struct cluster_name n;
	char *out = NULL;

	memset(&l, 0, sizeof l);
	l.k = 4;
	l.r = 2;
	l.size = 1 << 20;
	l.chunk = 4096;
	l.layout_gen = 1;
	for (unsigned i = 0; i < 6; i++) {
		l.pieces[i].server[0] = 's';
		l.pieces[i].server[1] = (char)('0' + i);
		l.pieces[i].region = 100 + i;
		l.pieces[i].generation = 1000 + i;
		l.pieces[i].made = 1;
		l.pieces[i].state = i == 5 ? PIECE_LOST : PIECE_HEALTHY;
	}
	ok(cluster_layout_encode(&l, &out) == 0 && cluster_layout_decode(out, strlen(out), &back) == 0 &&
		   !memcmp(&l, &back, sizeof l),
	   "a 4+2 layout round-trips");
	ok(out && cluster_name_decode(out, strlen(out), &n) == -EPROTO,
	   "a plain name reader refuses a layout (-EPROTO)");
	free(out);
	ok(cluster_layout_decode(S(good), &back) == 0 && back.k == 2 && back.r == 1 &&
		   back.pieces[1].state == PIECE_STALE && back.pieces[2].state == PIECE_LOST &&
		   back.pieces[2].region == 9 && back.pieces[2].made == 2,
	   "a 2+1 layout as written decodes, states and all");
	ok(cluster_layout_decode(S("{\"server\":\"s1\",\"region\":1,\"size\":5,\"generation\":0}"),
				 &back) == -EPROTO,
	   "a plain name record is not a layout");
	{
		static const char *bad[] = {
			"{\"redundancy\":\"2+1\",\"size\":1,\"chunk\":4096,\"layout_gen\":1,\"pieces\":[]}",
			"{\"redundancy\":\"0+1\",\"size\":1,\"chunk\":4096,\"layout_gen\":1,\"pieces\":[]}",
			"{\"redundancy\":\"2+ 1\",\"size\":1,\"chunk\":4096,\"layout_gen\":1,\"pieces\":[]}",
			"{\"redundancy\":\"1+1\",\"size\":1,\"chunk\":4096,\"layout_gen\":1,\"pieces\":"
			"[{\"server\":\"s0\",\"region\":1,\"generation\":1,\"made\":1,\"state\":\"healthy\"},"
			"{\"server\":\"s1\",\"region\":1,\"generation\":1,\"made\":1,\"state\":\"dead\"}]}",
			"{\"redundancy\":\"1+1\",\"size\":1,\"chunk\":4096,\"layout_gen\":1,\"pieces\":"
			"[{\"server\":\"s/0\",\"region\":1,\"generation\":1,\"made\":1,\"state\":\"healthy\"},"
			"{\"server\":\"s1\",\"region\":1,\"generation\":1,\"made\":1,\"state\":\"healthy\"}]}",
			"{\"redundancy\":\"1+1\",\"size\":-1,\"chunk\":4096,\"layout_gen\":1,\"pieces\":"
			"[{\"server\":\"s0\",\"region\":1,\"generation\":1,\"made\":1,\"state\":\"healthy\"},"
			"{\"server\":\"s1\",\"region\":1,\"generation\":1,\"made\":1,\"state\":\"healthy\"}]}",
			"[1]",
			"",
		};
		int all = 1;

		for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
			if (cluster_layout_decode(S(bad[i]), &back) != -EPROTO) {
				diag("accepted: %s", bad[i]);
				all = 0;
			}
		ok(all, "no pieces, 0+1, \"2+ 1\", an unknown state, a bad server id, a negative size,"
		   " not an object, nothing: each -EPROTO");
	}
	l.k = 17;
	ok(cluster_layout_encode(&l, &out) == -EINVAL && !out, "the encoder refuses K = 17");
	l.k = 4;
	l.pieces[3].region = (uint64_t)INT64_MAX + 1;
	ok(cluster_layout_encode(&l, &out) == -EINVAL && !out, "and a region id >= 2^63");

	/* Pieces' names: what librmem makes, rmemd accepts as a piece. */
	{
		char name[32];
		size_t base;
		uint64_t made;
		unsigned i;
		static const char *notpiece[] = {
			"backup", "~1.0", "a~0.1", "a~01.1", "a~1.01", "a~1.20", "a~1.", "a~.1",
			"a~1", "a~1.2.3", "a~1.2x", "a~+1.2", "a~ 1.2", "a~9223372036854775808.1",
			"a~1.2~", "a~1.99999999999",
		};
		int all = 1;

		ok(cluster_piece_name("team/db", 12, 3, name, sizeof name) == 0 &&
			   !strcmp(name, "team/db~12.3") &&
			   cluster_piece_split(S(name), &base, &made, &i) && base == 7 && made == 12 &&
			   i == 3,
		   "a piece's name round-trips: %s", name);
		ok(cluster_piece_name("abcdefghij", 1, 0, name, 14) == -ENAMETOOLONG &&
			   cluster_piece_name("abcdefghij", 1, 0, name, 15) == 0,
		   "cluster_piece_name: -ENAMETOOLONG when it does not fit, with its NUL");
		ok(cluster_piece_split(S("a~b~9223372036854775807.19"), &base, &made, &i) &&
			   base == 3 && made == INT64_MAX && i == 19,
		   "the last '~' splits; made up to 2^63-1, i up to 19");
		for (size_t x = 0; x < sizeof notpiece / sizeof notpiece[0]; x++)
			if (cluster_piece_split(S(notpiece[x]), &base, &made, &i)) {
				diag("split: %s", notpiece[x]);
				all = 0;
			}
		ok(all, "no base, made 0, leading zeros, i past 19, missing parts, signs, spaces, "
		   "made past 2^63-1, trailing bytes: none is a piece's name");
	}
	return tap_done();
}
