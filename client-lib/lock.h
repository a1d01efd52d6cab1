/*
 * lock.h - the client's lock: a fair (ticket) lock, so that threads get the
 * client in the order they asked for it and a thread calling in a loop
 * cannot starve another (one spinning on rmem_cas() while the other must
 * release the remote lock, say).  The mutex inside is held only to take a
 * ticket or pass the turn, never across a call's I/O.
 */
#ifndef RMEM_LOCK_H
#define RMEM_LOCK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct fair_lock {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t next_ticket, serving;
	uint32_t waiting;
};

/* 0 or a negative errno. */
int lock_init(struct fair_lock *l);
/* No thread may hold or wait for it. */
void lock_fini(struct fair_lock *l);

/* Waits for the turn. */
void lock_hold(struct fair_lock *l);
/* Takes the lock only when nobody holds it or waits for it: true then. */
bool lock_try(struct fair_lock *l);
void lock_release(struct fair_lock *l);

#endif /* RMEM_LOCK_H */
