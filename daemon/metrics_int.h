/*
 * metrics_int.h - what metrics.c (the page) and metrics_http.c (the HTTP
 * side of listen.metrics) share; nothing else includes it.
 */
#ifndef RMEMD_METRICS_INT_H
#define RMEMD_METRICS_INT_H

#include <stddef.h>
#include <stdint.h>

struct evconnlistener;
struct server;
struct metrics_conn;

/*
 * Connections open at once on listen.metrics: past this many a new one
 * sheds the oldest that has not sent its request yet (or, when every one is
 * being answered, the oldest of those), so that neither idle connections
 * nor slow readers can hold the daemon's fds or the way in for a real
 * scrape.
 */
#define METRICS_MAX_CONNS 16

struct metrics {
	struct server *srv;
	struct evconnlistener *lev;
	struct metrics_conn *first, *last;  /* oldest first */
	uint32_t nconns;
	uint64_t shed;                      /* connections closed by the cap */
	char start_time[32];                /* process_start_time_seconds, as written */
};

/* process_start_time_seconds as text into out ("" when unknown). */
void metrics_start_time(char *out, size_t len);

#endif /* RMEMD_METRICS_INT_H */
