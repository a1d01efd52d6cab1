/*
 * keepalive.c - keeps a client's lease with the daemon alive without the
 * application's help.
 *
 * The daemon ends a session that sends nothing on its stream for its lease
 * (HELLO's lease_ms): keys die, regions go back to the pools.  An application
 * may well be silent that long (thinking, or moving data only over RDMA,
 * which the daemon's stream never sees), so each client with a lease has one
 * thread that sends a PING whenever nothing has gone out for a third of the
 * lease.
 *
 * The thread takes the client's lock like any call, but politely: only when
 * it is free, so it never makes an application call wait while there is
 * time.  When a call keeps the client busy past two thirds of the lease (a
 * long rmem_poll on RDMA completions, say) the thread queues behind it
 * (the lock is fair, so it gets its turn right after).  A call that waits
 * long on RDMA completions pings by itself meanwhile (eng_lease_poke), so
 * that even one call longer than the lease keeps it.
 *
 * The thread knows the client only as its lock and its engine, and uses the
 * engine's calls, never the client's innards.  Once the stream is
 * broken there is nothing left to keep alive, and the thread ends; calls
 * then fail with -ECONNRESET by themselves.  Unless the client may resume
 * (opts.resume_ms): then the thread resumes it first (eng_recover, the
 * client's reclaim.c behind the engine's hook), and ends only when that
 * fails.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "keepalive.h"

/* Checks while the lock is busy come this many times per interval. */
#define BUSY_RETRIES 8

struct keepalive {
	struct fair_lock *lock;
	struct engine *e;
	pthread_t thread;
	pthread_mutex_t mu;    /* guards stop and pinging; cv wakes the thread to stop */
	pthread_cond_t cv;     /* on CLOCK_MONOTONIC */
	bool stop;
	bool pinging;          /* a PING is on its way: the thread waits on the socket */
	int64_t interval_ms;   /* lease_ms / 3, >= 1 */
	int64_t seen_send_ms;  /* the engine's last send when the thread last had the client */
	pid_t pid;             /* the process the thread runs in */
};

/* Unless the thread is being stopped, marks a PING as on its way: true then. */
static bool ping_begin(struct keepalive *ka)
{
	bool go;

	pthread_mutex_lock(&ka->mu);
	go = !ka->stop;
	ka->pinging = go;
	pthread_mutex_unlock(&ka->mu);
	return go;
}

static void ping_end(struct keepalive *ka)
{
	pthread_mutex_lock(&ka->mu);
	ka->pinging = false;
	pthread_mutex_unlock(&ka->mu);
}

/* PING and its reply.  0, or a negative errno (the stream is then broken). */
static int ping_locked(struct keepalive *ka)
{
	int err;

	if (!ping_begin(ka))
		return 0;
	err = eng_ping(ka->e);
	ping_end(ka);
	return err;
}

/* The resume, marked as a PING is, so that keepalive_stop() can cut it
 * short (eng_shutdown). */
static void recover_locked(struct keepalive *ka)
{
	if (!ping_begin(ka))
		return;
	eng_recover(ka->e);
	ping_end(ka);
}

/*
 * One look: pings when the stream has been quiet for an interval.  Returns
 * when to look next, or -1 when the stream is broken and there will never be
 * anything to do.
 */
static int64_t keepalive_look(struct keepalive *ka)
{
	struct engine *e = ka->e;
	int64_t next;

	if (!lock_try(ka->lock)) {
		/* A call runs; it is likely sending itself.  Wait for it only
		 * once the lease could really be in danger: two intervals after
		 * the last send we know of. */
		if (clock_mono_ms() < ka->seen_send_ms + 2 * ka->interval_ms)
			return clock_mono_ms() + ka->interval_ms / BUSY_RETRIES + 1;
		lock_hold(ka->lock);
	}
	/* Posts the application left queued (engine.c's send queue) go out
	 * with the PING, or now: they count as the lease's traffic too. */
	if (!eng_broken(e) && clock_mono_ms() - eng_last_send_ms(e) >= ka->interval_ms)
		ping_locked(ka);
	else if (!eng_broken(e))
		eng_flush(e);
	/* A lost connection is resumed here when the client may (opts.
	 * resume_ms), even while the application is idle: a restarted daemon
	 * keeps the session only for its lease. */
	if (eng_broken(e))
		recover_locked(ka);
	ka->seen_send_ms = eng_last_send_ms(e);
	next = eng_broken(e) ? -1 : eng_last_send_ms(e) + ka->interval_ms;
	lock_release(ka->lock);
	return next;
}

static void *keepalive_main(void *arg)
{
	struct keepalive *ka = arg;
	int64_t due = ka->seen_send_ms + ka->interval_ms;

	pthread_mutex_lock(&ka->mu);
	while (!ka->stop) {
		int64_t now = clock_mono_ms();
		struct timespec until;

		if (now < due) {
			until.tv_sec = due / 1000;
			until.tv_nsec = (due % 1000) * 1000000;
			pthread_cond_timedwait(&ka->cv, &ka->mu, &until);
			continue;
		}
		pthread_mutex_unlock(&ka->mu);
		due = keepalive_look(ka);
		pthread_mutex_lock(&ka->mu);
		if (due < 0)
			break;
	}
	pthread_mutex_unlock(&ka->mu);
	return NULL;
}

static void keepalive_free(struct keepalive *ka)
{
	pthread_cond_destroy(&ka->cv);
	pthread_mutex_destroy(&ka->mu);
	free(ka);
}

static int keepalive_new(struct keepalive **out, uint32_t lease_ms)
{
	struct keepalive *ka = calloc(1, sizeof *ka);
	pthread_condattr_t attr;
	int err;

	if (!ka)
		return -ENOMEM;
	err = pthread_condattr_init(&attr);
	if (err)
		goto fail_alloc;
	err = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	if (!err)
		err = pthread_cond_init(&ka->cv, &attr);
	pthread_condattr_destroy(&attr);
	if (err)
		goto fail_alloc;
	err = pthread_mutex_init(&ka->mu, NULL);
	if (err) {
		pthread_cond_destroy(&ka->cv);
		goto fail_alloc;
	}
	ka->interval_ms = lease_ms / 3 ? lease_ms / 3 : 1;
	ka->seen_send_ms = clock_mono_ms(); /* HELLO has just gone out */
	ka->pid = getpid();
	*out = ka;
	return 0;
fail_alloc:
	free(ka);
	return -err;
}

int keepalive_start(struct keepalive **out, struct fair_lock *lock, struct engine *e,
		    uint32_t lease_ms)
{
	struct keepalive *ka;
	sigset_t all, old;
	int err;

	*out = NULL;
	if (!lease_ms)
		return 0;
	err = keepalive_new(&ka, lease_ms);
	if (err)
		return err;
	ka->lock = lock;
	ka->e = e;
	/* The thread inherits a full signal mask: the application's signals
	 * keep going to the application's own threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&ka->thread, NULL, keepalive_main, ka);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		keepalive_free(ka);
		return -err;
	}
	*out = ka;
	return 0;
}

void keepalive_stop(struct keepalive *ka)
{
	if (!ka)
		return;
	/* In a child of fork() the thread does not exist (and its lock may
	 * have been copied held): there is nothing to stop or join. */
	if (ka->pid != getpid()) {
		free(ka);
		return;
	}
	pthread_mutex_lock(&ka->mu);
	ka->stop = true;
	/* A PING to a daemon that no longer answers would hold us here for
	 * timeout_ms, or for ever: the session ends now anyway. */
	if (ka->pinging)
		eng_shutdown(ka->e);
	pthread_cond_signal(&ka->cv);
	pthread_mutex_unlock(&ka->mu);
	pthread_join(ka->thread, NULL);
	keepalive_free(ka);
}
