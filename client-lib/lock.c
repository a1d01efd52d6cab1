/*
 * lock.c - see lock.h.
 */
#include "lock.h"

int lock_init(struct fair_lock *l)
{
	int err = pthread_mutex_init(&l->mu, NULL);

	if (err)
		return -err;
	err = pthread_cond_init(&l->cv, NULL);
	if (err) {
		pthread_mutex_destroy(&l->mu);
		return -err;
	}
	l->next_ticket = l->serving = 0;
	l->waiting = 0;
	return 0;
}

void lock_fini(struct fair_lock *l)
{
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->mu);
}

void lock_hold(struct fair_lock *l)
{
	uint64_t ticket;

	pthread_mutex_lock(&l->mu);
	ticket = l->next_ticket++;
	while (ticket != l->serving) {
		l->waiting++;
		pthread_cond_wait(&l->cv, &l->mu);
		l->waiting--;
	}
	pthread_mutex_unlock(&l->mu);
}

bool lock_try(struct fair_lock *l)
{
	bool free_now;

	pthread_mutex_lock(&l->mu);
	free_now = l->next_ticket == l->serving;
	if (free_now)
		l->next_ticket++;
	pthread_mutex_unlock(&l->mu);
	return free_now;
}

void lock_release(struct fair_lock *l)
{
	pthread_mutex_lock(&l->mu);
	l->serving++;
	if (l->waiting)
		pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
}
