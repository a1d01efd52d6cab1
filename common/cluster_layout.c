/*
 * cluster_layout.c - see cluster_layout.h.  jansson, as cluster_name.c.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cluster_json.h"
#include "cluster_layout.h"

static const char *const state_names[] = { "healthy", "stale", "lost" };

static bool layout_ok(const struct cluster_layout *l)
{
	if (l->k < 1 || l->k > 16 || l->r < 1 || l->r > 4 || l->size > INT64_MAX ||
	    l->chunk > INT64_MAX || l->layout_gen > INT64_MAX)
		return false;
	for (unsigned i = 0; i < l->k + l->r; i++) {
		const struct cluster_piece *p = &l->pieces[i];

		if (!cluster_id_ok(p->server, sizeof p->server) || p->region > INT64_MAX ||
		    p->generation > INT64_MAX || p->made > INT64_MAX || p->made < 1 ||
		    (unsigned)p->state > PIECE_LOST)
			return false;
	}
	return true;
}

int cluster_layout_encode(const struct cluster_layout *l, char **out)
{
	json_t *o, *arr;
	char red[8];

	*out = NULL;
	if (!layout_ok(l))
		return -EINVAL;
	snprintf(red, sizeof red, "%u+%u", l->k, l->r);
	arr = json_array();
	for (unsigned i = 0; arr && i < l->k + l->r; i++) {
		const struct cluster_piece *p = &l->pieces[i];

		if (json_array_append_new(arr, json_pack("{s:s, s:I, s:I, s:I, s:s}", "server",
							 p->server, "region", (json_int_t)p->region,
							 "generation", (json_int_t)p->generation,
							 "made", (json_int_t)p->made,
							 "state", state_names[p->state])) < 0) {
			json_decref(arr);
			arr = NULL;
		}
	}
	if (!arr)
		return -ENOMEM;
	o = json_pack("{s:s, s:I, s:I, s:I, s:o}", "redundancy", red, "size", (json_int_t)l->size,
		      "chunk", (json_int_t)l->chunk, "layout_gen", (json_int_t)l->layout_gen,
		      "pieces", arr);
	return cluster_json_dump(o, out);
}

/* "K+R" exactly as the encoder writes it (no sign, space or zero ahead). */
static int parse_red(const char *s, unsigned *k, unsigned *r)
{
	char back[8];

	if (sscanf(s, "%2u+%2u", k, r) != 2 || *k > 99 || *r > 99)
		return -EPROTO;
	snprintf(back, sizeof back, "%u+%u", *k, *r);
	return strcmp(back, s) ? -EPROTO : 0;
}

static int piece_decode(const json_t *o, struct cluster_piece *p)
{
	char state[16];
	int rc = json_is_object(o) ? 0 : -EPROTO;

	if (rc == 0)
		rc = cluster_json_get_text(o, "server", p->server, sizeof p->server);
	if (rc == 0)
		rc = cluster_json_get_num(o, "region", &p->region);
	if (rc == 0)
		rc = cluster_json_get_num(o, "generation", &p->generation);
	if (rc == 0)
		rc = cluster_json_get_num(o, "made", &p->made);
	if (rc == 0)
		rc = cluster_json_get_text(o, "state", state, sizeof state);
	if (rc == 0) {
		rc = -EPROTO;
		for (unsigned s = 0; s <= PIECE_LOST; s++)
			if (!strcmp(state, state_names[s])) {
				p->state = (enum cluster_piece_state)s;
				rc = 0;
			}
	}
	return rc;
}

int cluster_layout_decode(const char *text, size_t len, struct cluster_layout *l)
{
	json_error_t e;
	json_t *o = text ? json_loadb(text, len, JSON_REJECT_DUPLICATES, &e) : NULL;
	json_t *arr = json_is_object(o) ? json_object_get(o, "pieces") : NULL;
	char red[8];
	int rc = json_is_array(arr) ? 0 : -EPROTO;

	memset(l, 0, sizeof *l);
	if (rc == 0)
		rc = cluster_json_get_text(o, "redundancy", red, sizeof red);
	if (rc == 0)
		rc = parse_red(red, &l->k, &l->r);
	if (rc == 0)
		rc = cluster_json_get_num(o, "size", &l->size);
	if (rc == 0)
		rc = cluster_json_get_num(o, "chunk", &l->chunk);
	if (rc == 0)
		rc = cluster_json_get_num(o, "layout_gen", &l->layout_gen);
	if (rc == 0 && (l->k + l->r > CLUSTER_LAYOUT_PIECES_MAX ||
			json_array_size(arr) != (size_t)(l->k + l->r)))
		rc = -EPROTO;
	for (unsigned i = 0; rc == 0 && i < l->k + l->r; i++)
		rc = piece_decode(json_array_get(arr, i), &l->pieces[i]);
	if (rc == 0 && !layout_ok(l))
		rc = -EPROTO;
	if (rc < 0)
		memset(l, 0, sizeof *l);
	json_decref(o);
	return rc;
}

/* ---- pieces' names ------------------------------------------------------------------ */

int cluster_piece_name(const char *base, uint64_t made, unsigned i, char *out, size_t out_len)
{
	int n = snprintf(out, out_len, "%s~%llu.%u", base, (unsigned long long)made, i);

	return n < 0 || (size_t)n >= out_len ? -ENAMETOOLONG : 0;
}

/* The decimal number in [p, end) without a leading zero, at most max:
 * whether it is one. */
static bool decimal(const char *p, const char *end, uint64_t max, uint64_t *v)
{
	*v = 0;
	if (p == end || (*p == '0' && end - p > 1))
		return false;
	for (; p < end; p++) {
		if (*p < '0' || *p > '9' || *v > (max - (uint64_t)(*p - '0')) / 10)
			return false;
		*v = *v * 10 + (uint64_t)(*p - '0');
	}
	return true;
}

bool cluster_piece_split(const char *name, size_t len, size_t *base_len, uint64_t *made,
			 unsigned *i)
{
	const char *end = name + len, *t = NULL, *dot;
	uint64_t m, x;

	for (const char *p = name; p < end; p++)
		if (*p == '~')
			t = p;
	if (!t || t == name)
		return false;
	dot = memchr(t, '.', (size_t)(end - t));
	if (!dot || !decimal(t + 1, dot, INT64_MAX, &m) || m < 1 ||
	    !decimal(dot + 1, end, CLUSTER_LAYOUT_PIECES_MAX - 1, &x))
		return false;
	*base_len = (size_t)(t - name);
	*made = m;
	*i = (unsigned)x;
	return true;
}
