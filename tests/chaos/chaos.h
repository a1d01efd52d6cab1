/*
 * chaos.h - the pieces of the chaos test (tests/chaos/test_chaos.c): client
 * processes that allocate, write, read back and verify while the driver
 * kills, freezes and thaws them, and garbage connections to the daemon.
 */
#ifndef RMEM_TESTS_CHAOS_H
#define RMEM_TESTS_CHAOS_H

#include <stdbool.h>
#include <stdint.h>

/* One step of splitmix64: the driver's and each client's random numbers. */
static inline uint64_t chaos_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A number in [lo, hi]. */
static inline uint64_t chaos_between(uint64_t *state, uint64_t lo, uint64_t hi)
{
	return lo + chaos_rand(state) % (hi - lo + 1);
}

/* ---- client processes (client.c) -------------------------------------------- */

/* Named regions are "chaos/<creator's seed>/<n>"; their bytes are
 * fill_random() of chaos_name_seed(name).  FNV-1a. */
#define CHAOS_NAME_PREFIX "chaos/"
static inline uint64_t chaos_name_seed(const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *name; name++)
		h = (h ^ (uint8_t)*name) * 0x100000001b3ull;
	return h;
}

struct chaos_client_arg {
	const char *endpoint;
	uint64_t seed;
	int stop_fd;       /* read end of the driver's stop pipe: EOF means finish */
	/* The file where every client appends, one a line, the names it created
	 * and filled (chaos_name()), for the others to adopt. */
	const char *names_path;
	/* The file where the driver appends, one a line, the seed of every
	 * client it killed (after it was dead). */
	const char *killed_path;
};

/* What a client that finished (was not killed) writes to its pipe. */
struct chaos_report {
	uint64_t ops;            /* calls that succeeded */
	uint64_t verified;       /* bytes read back and found as written */
	uint64_t mismatches;     /* reads that did not return what was written */
	uint64_t foreign;        /* a fresh region not all zero, or an old session's
				    region still readable after a reconnect */
	uint64_t resets;         /* -ECONNRESET: the session was gone (lease) */
	uint64_t reconnects;     /* connections made after the first */
	uint64_t connect_fails;  /* connection attempts that failed (and were retried) */
	uint64_t enomem;         /* allocations refused for want of memory */
	uint64_t errors;         /* any other failure */
	uint64_t named_created;  /* named regions created, filled and recorded */
	uint64_t named_adopted;  /* another client's names opened read-only and verified */
	uint64_t named_orphans;  /* of those, names whose creator was killed before the open */
	uint64_t named_unlinked; /* of those, unlinked by this client */
	uint64_t named_gone;     /* -ENOENT: another client had unlinked it first */
	int last_error;          /* the last of those, a negative errno */
};

/* The body of a client process (child_spawn()): loops until stop_fd reads EOF,
 * then writes one struct chaos_report to wfd.  Returns the exit status. */
int chaos_client_main(int wfd, void *arg);

/* ---- garbage connections (garbage.c) ---------------------------------------- */

struct chaos_target {
	uint16_t port;             /* the daemon's TCP port */
	const char *admin_path;    /* its Unix socket */
};

enum chaos_garbage_kind {
	GARBAGE_RANDOM,        /* random bytes, then close */
	GARBAGE_TRUNCATED,     /* a valid header, part of its payload, close */
	GARBAGE_STALLED,       /* part of a frame, then silence, connection kept open */
	GARBAGE_AFTER_HELLO,   /* a session, then bytes that break the protocol */
	GARBAGE_WALK_AWAY,     /* a session allocates, never reads a reply, closes */
	GARBAGE_SHORT_WRITE,   /* a WRITE whose data stops early, close */
	GARBAGE_ADMIN,         /* random bytes or a listing on the Unix socket */
	GARBAGE_KINDS
};

/*
 * Opens one garbage connection of the given kind.  0, with *open_fd the
 * connection left open (GARBAGE_STALLED: close it later) or -1; or a negative
 * errno when it could not connect.
 */
int chaos_garbage(const struct chaos_target *t, enum chaos_garbage_kind kind, uint64_t *rng,
		  int *open_fd);

#endif /* RMEM_TESTS_CHAOS_H */
