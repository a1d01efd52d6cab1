/*
 * test_hostile_metrics.c - scrapers that crawl cannot hold /metrics (issue 30, item 7)
 *
 * listen.metrics takes at most 16 connections (metrics_int.h).  As an
 * attacker would, against a daemon with limits.metrics_timeout_ms 1000:
 * 16 connections dribble a request that never ends, one byte every 200 ms
 * (each byte would restart an idle timeout); a scrape meanwhile is
 * answered, and every dribbler is dropped at its deadline counted from its
 * accept, not from its last byte.  Then, with a page larger than what the
 * kernel buffers towards a client with SO_RCVBUF 1 and an MSS of 88 (64
 * tenants and 16 pools, about 46 KB), 16 connections take their reply a
 * byte at a time: a scrape meanwhile is still answered at once, and the
 * daemon lets go of all of them by the reply deadline.  Last, the real
 * default: on a daemon without the key a dribbler is dropped after 10 s.
 *
 * On the code before (bufferevent timeouts that restart at every byte,
 * 10 s, and a cap that closes a newcomer when all 16 are being answered):
 * the dribblers stay open for as long as they dribble, and the scrape among
 * the slow readers is closed at once.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "tap.h"

#define CAP 16                /* daemon/metrics_int.h's METRICS_MAX_CONNS */
#define DEADLINE_MS 1000      /* limits.metrics_timeout_ms of the first daemons */
#define DEFAULT_MS 10000      /* its default */
#define SLACK_MS 1500         /* a busy 2-core machine */
#define DRIBBLE_MS 200        /* a byte this often: an idle timeout never fires */
#define WAIT_MS 5000

static char dir[] = "/tmp/test_hostile_metrics.XXXXXX";
static struct harness_key keys[] = {
	{ .name = "t.key", .secret = "secret of the many small tenants\n", .mode = 0600 },
};

static const char dribble[] = "GET /metrics HTTP/1.0\r\nX-Slow: "
			      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
			      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

/* A TCP connection to the metrics port of d; rcvbuf > 0: that SO_RCVBUF
 * and an MSS of 88 set before connect, so that the kernel buffers as
 * little of the reply as it can.  The fd or a negative errno. */
static int metrics_connect(const struct rmemd *d, int rcvbuf)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST };
	struct addrinfo *ai;
	int fd, mss = 88, rc = 0;

	if (!rcvbuf)
		return raw_connect(d->addr, d->metrics_port);
	if (getaddrinfo(d->addr, NULL, &hints, &ai) != 0)
		return -EINVAL;
	if (ai->ai_family == AF_INET)
		((struct sockaddr_in *)ai->ai_addr)->sin_port = htons(d->metrics_port);
	else
		((struct sockaddr_in6 *)ai->ai_addr)->sin6_port = htons(d->metrics_port);
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf) < 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, sizeof mss) < 0 ||
	    connect(fd, ai->ai_addr, ai->ai_addrlen) < 0)
		rc = -errno;
	freeaddrinfo(ai);
	if (rc < 0)
		close_fd(fd);
	return rc < 0 ? rc : fd;
}

/* True when the daemon has closed fd (EOF or a reset), reading what came. */
static bool peer_closed(int fd, size_t *got, size_t at_most)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char buf[4096];
	ssize_t n;

	if (poll(&pfd, 1, 0) != 1)
		return false;
	n = recv(fd, buf, at_most < sizeof buf ? at_most : sizeof buf, MSG_DONTWAIT);
	if (n > 0 && got)
		*got += (size_t)n;
	return n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
}

/* The page of GET /metrics, or NULL; *ms how long it took. */
static char *scrape(const struct rmemd *d, int *status, uint64_t *ms)
{
	uint64_t t0 = now_ms();
	char *text;
	int rc = metrics_request(d, "GET", "/metrics", WAIT_MS, &text, status);

	*ms = now_ms() - t0;
	return rc == 0 ? text : NULL;
}

/* ---- requests that never end ------------------------------------------------ */

/*
 * n dribblers: a byte each every DRIBBLE_MS; with scrape, one GET after
 * half the deadline (it sheds the oldest dribbler).  Each dribbler's life,
 * from connect to the daemon's close, into life_ms (-1: still open when the
 * test gave up, at 4 deadlines).
 */
static void dribblers(const struct rmemd *d, int n, int deadline_ms, bool with_scrape,
		      int64_t *life_ms)
{
	int fds[CAP];
	size_t sent[CAP] = { 0 };
	uint64_t t0 = now_ms(), started[CAP], next = t0, give_up = t0 + 4 * (uint64_t)deadline_ms;
	bool scraped = !with_scrape;
	int open = 0;

	for (int i = 0; i < n; i++) {
		fds[i] = metrics_connect(d, 0);
		started[i] = now_ms();
		life_ms[i] = -1;
		open += fds[i] >= 0;
	}
	ok(open == n, "%d connections dribble a request, a byte every %d ms", n, DRIBBLE_MS);
	while (open && now_ms() < give_up) {
		if (now_ms() >= next) {
			for (int i = 0; i < n; i++)
				if (fds[i] >= 0 && sent[i] < sizeof dribble - 1 &&
				    send(fds[i], dribble + sent[i], 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1)
					sent[i]++;
			next += DRIBBLE_MS;
		}
		if (!scraped && now_ms() >= t0 + (uint64_t)deadline_ms / 2) {
			uint64_t ms;
			int status = 0;
			char *page = scrape(d, &status, &ms);

			ok(page && status == 200 && ms < (uint64_t)deadline_ms / 2,
			   "a scrape among %d dribblers is answered at once (%d, %llu ms)", n,
			   status, (unsigned long long)ms);
			free(page);
			scraped = true;
		}
		for (int i = 0; i < n; i++)
			if (fds[i] >= 0 && peer_closed(fds[i], NULL, 1)) {
				life_ms[i] = (int64_t)(now_ms() - started[i]);
				close(fds[i]);
				fds[i] = -1;
				open--;
			}
		sleep_ms(10);
	}
	for (int i = 0; i < n; i++)
		close_fd(fds[i]);
}

static void request_deadline(const struct rmemd *d)
{
	int64_t life[CAP], max = 0;
	int early = 0, held = 0;

	dribblers(d, CAP, DEADLINE_MS, true, life);
	for (int i = 0; i < CAP; i++) {
		held += life[i] < 0;
		early += life[i] >= 0 && life[i] < DEADLINE_MS - 50;
		if (life[i] > max)
			max = life[i];
	}
	ok(!held && max <= DEADLINE_MS + SLACK_MS,
	   "every dribbler is dropped by its request deadline: %d still open after %d ms, "
	   "the longest lived %lld ms (deadline %d)", held, 4 * DEADLINE_MS, (long long)max,
	   DEADLINE_MS);
	ok(early <= 1, "none before it but the one the scrape shed (%d)", early);
}

/* ---- replies taken a byte at a time -------------------------------------------- */

static void reply_deadline(const struct rmemd *d)
{
	static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
	int fds[CAP], open = 0, status = 0, answering = 0;
	size_t got[CAP] = { 0 };
	uint64_t t0, ms, until;
	char *page;

	page = scrape(d, &status, &ms);
	ok(page && strlen(page) > 44000, "the page is larger than the kernel buffers (%zu bytes)",
	   page ? strlen(page) : 0);
	free(page);
	t0 = now_ms();
	for (int i = 0; i < CAP; i++) {
		fds[i] = metrics_connect(d, 1);
		if (fds[i] >= 0 && send(fds[i], req, sizeof req - 1, MSG_NOSIGNAL) != sizeof req - 1) {
			close(fds[i]);
			fds[i] = -1;
		}
		open += fds[i] >= 0;
	}
	ok(open == CAP, "%d connections with SO_RCVBUF 1 and an MSS of 88 send their GET", open);
	/* Each is being answered once its first byte is in. */
	until = t0 + (uint64_t)DEADLINE_MS / 2;
	while (answering < open && now_ms() < until) {
		answering = 0;
		for (int i = 0; i < CAP; i++) {
			if (fds[i] >= 0 && !got[i])
				peer_closed(fds[i], &got[i], 1);
			answering += fds[i] >= 0 && got[i];
		}
		sleep_ms(5);
	}
	ok(answering == open, "all %d are being answered (%llu ms)", answering,
	   (unsigned long long)(now_ms() - t0));
	page = scrape(d, &status, &ms);
	ok(page && status == 200 && now_ms() - t0 < DEADLINE_MS,
	   "a scrape while %d replies crawl is answered at once (%d, %llu ms)", CAP, status,
	   (unsigned long long)ms);
	free(page);
	/* They read on, a byte every 100 ms, past the reply deadline. */
	until = t0 + DEADLINE_MS + SLACK_MS;
	while (now_ms() < until) {
		for (int i = 0; i < CAP; i++)
			if (fds[i] >= 0 && peer_closed(fds[i], &got[i], 1)) {
				close(fds[i]);
				fds[i] = -1;
			}
		sleep_ms(100);
	}
	page = scrape(d, &status, &ms);
	ok(page && status == 200 && metrics_sample(page, "rmem_metrics_connections") == 1,
	   "past the reply deadline the daemon holds none of them: "
	   "rmem_metrics_connections %g (this scrape's)",
	   page ? metrics_sample(page, "rmem_metrics_connections") : -1);
	free(page);
	for (int i = 0; i < CAP; i++)
		close_fd(fds[i]);
}

/* ---- the default ------------------------------------------------------------------- */

static void default_deadline(void)
{
	struct rmemd d;
	struct rmemd_opts o;
	int64_t life = -1;
	int rc = harness_opts(&o, "64M", NULL);

	o.metrics = true;
	rc = rc < 0 ? rc : rmemd_start_opts(&d, &o);
	if (!ok(rc == 0, "a daemon with the default limits.metrics_timeout_ms (%d)", rc))
		return;
	dribblers(&d, 1, DEFAULT_MS, false, &life);
	ok(life >= DEFAULT_MS - 50 && life <= DEFAULT_MS + SLACK_MS,
	   "its dribbler is dropped at the default deadline: after %lld ms (%d)",
	   (long long)life, DEFAULT_MS);
	ok(rmemd_stop(&d) == 0, "that daemon exits 0 on SIGTERM");
	rmemd_cleanup(&d);
}

int main(void)
{
	static char extra[16384];
	struct rmemd d;
	struct rmemd_opts o;
	size_t len;
	int rc;

	if (harness_keys_make(dir, keys, 1) < 0)
		return ok(0, "cannot write the key file in %s", dir), tap_done();
	/* The longest names there may be, to make the page as large as it gets. */
	len = (size_t)snprintf(extra, sizeof extra,
			       "limits = { metrics_timeout_ms = %d; };\ntenants = (", DEADLINE_MS);
	for (int i = 0; i < 64 && len < sizeof extra; i++)
		len += (size_t)snprintf(extra + len, sizeof extra - len,
					"%s{ name = \"tenant%02d_xxxxxxxxxxxxxxxxxxxxxx\"; "
					"secret_file = \"%s\"; }", i ? ",\n" : "", i, keys[0].path);
	for (int i = 0; i < 15 && len < sizeof extra; i++)
		len += (size_t)snprintf(extra + len, sizeof extra - len, "%s{ name = "
					"\"pool%02d_xxxxxxxxxxxxxxxxxxxxxxxx\"; size = \"1M\"; "
					"hugepages = \"off\"; }", i ? ",\n" : ");\nmore_pools = (", i);
	if (len + 3 >= sizeof extra)
		return ok(0, "the config fits in %zu bytes", sizeof extra), tap_done();
	strcat(extra, ");");
	rc = harness_opts(&o, "64M", extra);
	o.metrics = true;
	rc = rc < 0 ? rc : rmemd_start_opts(&d, &o);
	if (rc == -ENOENT)
		tap_skip_all("no rmemd in $RMEM_BUILD");
	if (!ok(rc == 0, "rmemd starts with limits.metrics_timeout_ms %d, 64 tenants (%d)",
		DEADLINE_MS, rc))
		return harness_keys_remove(dir, keys, 1), tap_done();
	request_deadline(&d);
	reply_deadline(&d);
	ok(rmemd_stop(&d) == 0, "rmemd exits 0 on SIGTERM");
	rmemd_cleanup(&d);
	default_deadline();
	harness_keys_remove(dir, keys, 1);
	return tap_done();
}
