/*
 * metrics.h - rmemd's Prometheus endpoint: GET /metrics on listen.metrics,
 * served by metrics_http.c on the daemon's own loop, in the text
 * exposition format 0.0.4.  Beside listen.c at the top of the daemon: it
 * only reads (srv->counters, which the modules below bump, and the figures
 * they keep: pools, regions, names, tenants); nothing calls into it but
 * main.c.  The list of metrics is in rmemd(8), METRICS.
 */
#ifndef RMEMD_METRICS_H
#define RMEMD_METRICS_H

#include <stddef.h>

struct evbuffer;
struct server;

/* Listens on srv->cfg.listen_metrics (nothing when it is ""), srv->metrics.
 * On failure returns a negative errno with "listen.metrics: ..." in err and
 * nothing left open. */
int metrics_open(struct server *srv, char *err, size_t errlen);
/* Closes it, and every scrape in progress.  Accepts srv->metrics NULL. */
void metrics_close(struct server *srv);

/* The page, appended to out: 0, or -ENOMEM. */
int metrics_write(const struct server *srv, struct evbuffer *out);

#endif /* RMEMD_METRICS_H */
