/*
 * redund_prog.h - what the C programs of the redundancy and repair tests
 * share (tests/func/test_redund_life.c, test_repair.c, test_repair_hostile.c,
 * test_drain.c):
 * the script that runs them (tests/lib/redund_hook.sh) is their hook, their
 * clients are librmem's etcd:// ones, their bytes a pattern.
 *
 * Depends on tap.h (diag, tap_skip_all) and librmem.  Not thread-safe but
 * for pattern(): hook calls and assertions come from the main thread.
 *
 *   base_url = redund_env("run by tests/func/test_x.sh");
 *   if (run_hook("kill %d", srv[0])) ...
 */
#ifndef RMEM_TESTS_REDUND_PROG_H
#define RMEM_TESTS_REDUND_PROG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rmem.h>

/*
 * The script's environment: RMEM_CLUSTER_URL (etcd://H:P,H:P,H:P/NAME),
 * returned, and RMEM_CLUSTER_HOOK (the script's "--hook DIR"), kept for the
 * calls below.  Without either the program skips as a whole, saying why.
 */
const char *redund_env(const char *why);

/* The hook run with the command that fmt makes (system(3)): its status,
 * 0 when it succeeded. */
__attribute__((format(printf, 1, 2)))
int run_hook(const char *fmt, ...);
/* The hook's first line of output, without its newline, into out (len
 * bytes): 0, or -1 when it printed nothing or failed. */
__attribute__((format(printf, 3, 4)))
int hook_line(char *out, size_t len, const char *fmt, ...);
/* The hook's first line for the command what, as a number, or -1. */
long hook_num(const char *what);
/* The hook's "pieces NAME": the index of the server of each piece of name,
 * in order, into srv (room for max): how many, 0 when it failed. */
int pieces_of(const char *name, int *srv, int max);

/* The same len bytes for the same seed, every run (xorshift). */
void pattern(unsigned char *b, uint64_t len, unsigned seed);

/* rmem_connect of url with those options' resume_ms and timeout_ms: the
 * client, or NULL with *rc its error. */
rmem_client *connect_url(const char *url, int resume_ms, int timeout_ms, int *rc);

/* ---- whole regions -------------------------------------------------------------- */

/* Every byte of r against want, in reads of 1 MiB (the first wrong one said). */
bool reads_back(rmem_client *c, const struct rmem_region *r, const unsigned char *want,
		uint64_t len, int *rc);
/* Every byte of b written to r, in writes of 4 MiB. */
bool write_all(rmem_client *c, const struct rmem_region *r, const unsigned char *b, uint64_t len,
	       int *rc);
/* A named region made in c, filled with b and closed. */
bool make_named(rmem_client *c, const char *name, const unsigned char *b, uint64_t len);
/* Opened read-only in c, every byte checked against b, closed. */
bool named_reads(rmem_client *c, const char *name, const unsigned char *b, uint64_t len);

#endif /* RMEM_TESTS_REDUND_PROG_H */
