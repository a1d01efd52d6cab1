/*
 * test_etcd_client.c - the etcd client (common/etcd_client.h) against a
 * real etcd: every call, failover past a dead endpoint, the errors etcd
 * gives, and watch (history, stop, compaction).  Run by
 * tests/func/test_etcd_client.sh, which starts etcd and passes its
 * endpoints:
 *
 *   test_etcd_client http://127.0.0.1:P1,http://127.0.0.1:P2,...
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>

#include "etcd_client.h"
#include "tap.h"

#define S(x) x, sizeof(x) - 1

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A port nothing listens on: connecting there is refused at once. */
#define DEAD "http://127.0.0.1:1"

static void calls(struct etcd_client *c)
{
	struct etcd_range r;
	struct etcd_kv kv;
	int64_t lease, ttl, n;
	bool created;
	int rc;

	rc = etcd_lease_grant(c, 5, &lease, &ttl);
	ok(rc == 0 && lease > 0 && ttl == 5, "lease grant past a dead first endpoint (%d, ttl %"
	   PRId64 ")", rc, ttl);
	ok(strcmp(etcd_client_endpoint(c), DEAD) != 0, "the client moved on to %s",
	   etcd_client_endpoint(c));
	rc = etcd_put(c, S("/t/a"), S("1"), lease);
	ok(rc == 0, "put /t/a under the lease (%d)", rc);
	rc = etcd_put(c, S("/t/b"), S("2"), 0);
	ok(rc == 0, "put /t/b (%d)", rc);
	rc = etcd_put(c, S("/u"), S("3"), 0);
	ok(rc == 0, "put /u (%d)", rc);
	rc = etcd_range(c, S("/t/a"), false, &r);
	ok(rc == 0 && r.nkvs == 1 && r.kvs[0].lease == lease && !strcmp((char *)r.kvs[0].value, "1"),
	   "range of one key: its value and lease (%d)", rc);
	etcd_range_free(&r);
	rc = etcd_range(c, S("/t/"), true, &r);
	ok(rc == 0 && r.nkvs == 2 && r.count == 2 && !strcmp((char *)r.kvs[1].key, "/t/b"),
	   "range of a prefix: /t/a and /t/b, not /u (%d, %zu)", rc, r.nkvs);
	etcd_range_free(&r);
	rc = etcd_create(c, S("/t/n"), S("first"), lease, &created, &kv);
	ok(rc == 0 && created && !kv.key, "create-if-absent: created (%d)", rc);
	rc = etcd_create(c, S("/t/n"), S("second"), 0, &created, &kv);
	ok(rc == 0 && !created && kv.key && !strcmp((char *)kv.value, "first") && kv.lease == lease,
	   "create-if-absent again: not created, the winner's value and lease back (%d)", rc);
	etcd_kv_free(&kv);
	rc = etcd_lease_keepalive(c, lease, &ttl);
	ok(rc == 0 && ttl == 5, "keepalive (%d, ttl %" PRId64 ")", rc, ttl);
	rc = etcd_lease_revoke(c, lease);
	ok(rc == 0, "revoke (%d)", rc);
	rc = etcd_range(c, S("/t/"), true, &r);
	ok(rc == 0 && r.nkvs == 1 && !strcmp((char *)r.kvs[0].key, "/t/b"),
	   "the lease's keys went with it (%d, %zu left)", rc, r.nkvs);
	etcd_range_free(&r);
	rc = etcd_lease_keepalive(c, lease, &ttl);
	ok(rc == 0 && ttl == 0, "keepalive of a revoked lease: TTL 0 (%d)", rc);
	rc = etcd_lease_revoke(c, lease);
	ok(rc == -ENOENT, "revoke again: ENOENT (%d: %s)", rc, etcd_client_error(c));
	rc = etcd_put(c, S("/t/z"), S("x"), lease);
	ok(rc == -ENOENT, "put under a revoked lease: ENOENT (%d)", rc);
	rc = etcd_delete(c, S("/"), true, &n);
	ok(rc == 0 && n == 2, "delete of the prefix / (%d, %" PRId64 " keys)", rc, n);
}

static void unreachable(void)
{
	struct etcd_client *c;
	char why[128];
	int64_t id, ttl, t0;
	int rc;

	rc = etcd_client_new(DEAD ",http://127.0.0.1:2", NULL, 300, &c, why, sizeof why);
	ok(rc == 0, "a client over two dead endpoints (%d)", rc);
	if (rc < 0)
		return;
	t0 = now_ms();
	rc = etcd_lease_grant(c, 5, &id, &ttl);
	ok(rc == -EHOSTUNREACH, "no endpoint answers: EHOSTUNREACH (%d: %s)", rc,
	   etcd_client_error(c));
	ok(now_ms() - t0 < 1000, "refused at once, not after timeouts (%" PRId64 " ms)",
	   now_ms() - t0);
	etcd_client_free(c);
	rc = etcd_client_new("localhost:2379", NULL, 300, &c, why, sizeof why);
	ok(rc == -EINVAL && !c, "a bad endpoint list is refused: %s", why);
}

/* ---- patience: a member that is slow for a while ------------------------------------ */

/* A listener that accepts nothing for slow_ms (connections wait in its
 * backlog and time out, as on a starved member), then answers one lease
 * grant: a member that came back. */
struct slowsrv {
	int fd, slow_ms;
};

static void *slow_member(void *arg)
{
	struct slowsrv *v = arg;
	static const char body[] = "{\"header\":{\"revision\":\"1\"},\"ID\":\"7\",\"TTL\":\"5\"}";
	char req[4096], head[128];
	struct timespec t = { v->slow_ms / 1000, (v->slow_ms % 1000) * 1000000L };
	int a;

	nanosleep(&t, NULL);
	snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
		 "Content-Length: %zu\r\nConnection: close\r\n\r\n", sizeof body - 1);
	/* Every request in the backlog is answered, those the client gave up
	 * on too (their sends fail quietly), until the test shuts it down. */
	while ((a = accept(v->fd, NULL, NULL)) >= 0) {
		ssize_t n = recv(a, req, sizeof req - 1, 0);

		if (n > 0) {
			req[n] = '\0';
			if (strstr(req, "\r\n\r\n") &&
			    send(a, head, strlen(head), MSG_NOSIGNAL) > 0)
				send(a, body, sizeof body - 1, MSG_NOSIGNAL);
		}
		close(a);
	}
	return NULL;
}

static void patience(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof sa;
	struct slowsrv v = { .slow_ms = 900 };
	struct etcd_client *c;
	char list[128], why[128];
	int64_t id, ttl, t0, dt;
	pthread_t th;
	int rc;

	v.fd = socket(AF_INET, SOCK_STREAM, 0);
	if (v.fd < 0 || bind(v.fd, (struct sockaddr *)&sa, sizeof sa) ||
	    listen(v.fd, 16) || getsockname(v.fd, (struct sockaddr *)&sa, &sl)) {
		ok(0, "a listener for the slow member: %s", strerror(errno));
		return;
	}
	snprintf(list, sizeof list, "http://127.0.0.1:%u", ntohs(sa.sin_port));

	/* Without patience: one try, a timeout, -EHOSTUNREACH. */
	rc = etcd_client_new(list, NULL, 200, &c, why, sizeof why);
	t0 = now_ms();
	rc = rc ? rc : etcd_lease_grant(c, 5, &id, &ttl);
	dt = now_ms() - t0;
	ok(rc == -EHOSTUNREACH && dt < 800, "a member that does not answer, no patience:"
	   " -EHOSTUNREACH after one 200 ms try (%d, %" PRId64 " ms)", rc, dt);
	etcd_client_free(c);

	/* With patience: tried again until it answers. */
	pthread_create(&th, NULL, slow_member, &v);
	rc = etcd_client_new(list, NULL, 200, &c, why, sizeof why);
	if (!rc)
		etcd_client_set_patience(c, 5000);
	t0 = now_ms();
	rc = rc ? rc : etcd_lease_grant(c, 5, &id, &ttl);
	dt = now_ms() - t0;
	ok(rc == 0 && id == 7 && dt >= 600, "the same member slow for 900 ms, patience 5 s: the"
	   " call goes round again and has its answer (%d, id %" PRId64 ", %" PRId64 " ms)", rc,
	   id, dt);
	etcd_client_free(c);
	shutdown(v.fd, SHUT_RDWR);
	close(v.fd);
	pthread_join(th, NULL);

	/* Patience never waits on members that refuse. */
	rc = etcd_client_new(DEAD ",http://127.0.0.1:2", NULL, 300, &c, why, sizeof why);
	if (!rc)
		etcd_client_set_patience(c, 5000);
	t0 = now_ms();
	rc = rc ? rc : etcd_lease_grant(c, 5, &id, &ttl);
	dt = now_ms() - t0;
	ok(rc == -EHOSTUNREACH && dt < 1000, "two members that refuse, patience 5 s:"
	   " -EHOSTUNREACH at once (%d, %" PRId64 " ms)", rc, dt);
	etcd_client_free(c);
}

/* ---- watch ------------------------------------------------------------------------ */

struct seen {
	int puts, deletes, created, canceled;
	int64_t compact_revision, last_revision;
	int want;          /* events to stop after */
	int64_t stop_at;   /* now_ms() when stop() says yes; 0: never */
};

static int on_message(void *arg, const struct etcd_watch_msg *m)
{
	struct seen *s = arg;

	s->created += m->created;
	if (m->canceled) {
		s->canceled++;
		s->compact_revision = m->compact_revision;
		return 1;
	}
	for (size_t i = 0; i < m->nevents; i++) {
		if (m->events[i].type == ETCD_EVENT_PUT)
			s->puts++;
		else
			s->deletes++;
		s->last_revision = m->events[i].kv.mod_revision;
	}
	return s->want && s->puts + s->deletes >= s->want;
}

static bool should_stop(void *arg)
{
	struct seen *s = arg;

	return s->stop_at && now_ms() >= s->stop_at;
}

static void watch(struct etcd_client *c)
{
	struct seen s = { 0 };
	struct etcd_watch_ops ops = { .message = on_message, .stop = should_stop, .arg = &s };
	struct etcd_range r;
	char *reply, body[64];
	size_t len;
	int64_t start, n, t0;
	int rc;

	rc = etcd_range(c, S("/w/"), true, &r);
	start = r.header.revision + 1;
	etcd_range_free(&r);
	rc |= etcd_put(c, S("/w/1"), S("a"), 0) | etcd_put(c, S("/w/2"), S("b"), 0) |
	      etcd_put(c, S("/x"), S("c"), 0) | etcd_delete(c, S("/w/1"), false, &n);
	ok(rc == 0, "three puts and a delete to watch (%d)", rc);
	s.want = 3;
	s.stop_at = now_ms() + 10000;
	rc = etcd_watch(c, S("/w/"), true, start, &ops);
	ok(rc == 0 && s.created == 1 && s.puts == 2 && s.deletes == 1,
	   "watch of /w/ from revision %" PRId64 ": created, 2 puts and 1 delete, not /x "
	   "(%d: %d %d %d)", start, rc, s.created, s.puts, s.deletes);

	memset(&s, 0, sizeof s);
	s.stop_at = now_ms() + 1000;
	t0 = now_ms();
	rc = etcd_watch(c, S("/quiet/"), true, 0, &ops);
	ok(rc == 0 && s.created == 1 && now_ms() - t0 < 3500,
	   "a quiet watch stops when asked (%d, after %" PRId64 " ms)", rc, now_ms() - t0);

	/* Compact the history past start: a watch from before it is canceled. */
	rc = etcd_put(c, S("/w/3"), S("d"), 0);
	rc |= etcd_range(c, S("/w/3"), false, &r);
	snprintf(body, sizeof body, "{\"revision\":\"%" PRId64 "\"}", r.header.revision);
	etcd_range_free(&r);
	rc |= etcd_call(c, "/v3/kv/compaction", body, &reply, &len);
	free(reply);
	ok(rc == 0, "history compacted (%d)", rc);
	memset(&s, 0, sizeof s);
	s.stop_at = now_ms() + 10000;
	rc = etcd_watch(c, S("/w/"), true, start, &ops);
	ok(rc == 0 && s.canceled == 1 && s.compact_revision > start,
	   "a watch from a compacted revision is canceled with compact_revision %" PRId64
	   " (%d)", s.compact_revision, rc);
	etcd_delete(c, S("/"), true, &n);
}

int main(int argc, char **argv)
{
	struct etcd_client *c;
	char list[1024], why[128];
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: test_etcd_client ENDPOINTS\n");
		return 2;
	}
	snprintf(list, sizeof list, "%s,%s", DEAD, argv[1]);
	rc = etcd_client_new(list, NULL, 1000, &c, why, sizeof why);
	ok(rc == 0, "a client over %s (%d %s)", list, rc, rc ? why : "");
	if (rc < 0)
		return tap_done();
	calls(c);
	watch(c);
	etcd_client_free(c);
	unreachable();
	patience();
	return tap_done();
}
