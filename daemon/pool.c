/*
 * pool.c - map, touch and pin the memory pools (in parallel: see pin_pool).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "alloc.h"
#include "pool.h"
#include "scrub.h"

#define HUGEPAGE_2M  (2ull << 20)
/* Pin in steps so progress can be reported during multi-GiB pools, and so
 * several threads can share the work. */
#define PIN_STEP     (256ull << 20)
/* Faulting pages in is CPU work (zeroing, page tables): one thread per
 * online CPU, up to this many. */
#define PIN_THREADS_MAX 8
#define CAP_IPC_LOCK_BIT 14
/* glibc's <sys/mman.h> has MFD_HUGETLB but not the size bits (linux/memfd.h,
 * whose other names clash with glibc's): 2 MiB is 21 << MFD_HUGE_SHIFT (26). */
#ifndef MFD_HUGE_2MB
#define MFD_HUGE_2MB (21u << 26)
#endif
#define THP_SHMEM "/sys/kernel/mm/transparent_hugepage/shmem_enabled"
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23	/* Linux 5.14 */
#endif

/*
 * Raw system calls, because AddressSanitizer turns mlock() into a no-op and
 * the sanitized daemon that the tests run must pin for real.
 *
 * How: one mlock2(MLOCK_ONFAULT) over the whole pool (the RLIMIT_MEMLOCK
 * check, no page touched yet), then MADV_POPULATE_WRITE on disjoint steps
 * from several threads; each page faulted in is locked as it arrives.
 * Populating runs under the mm's read lock, so the threads do not wait for
 * each other; mlock() in steps from several threads would (each mlock takes
 * the write lock to mark its step, behind the other threads' faulting).
 * Kernels without MADV_POPULATE_WRITE get mlock() in steps, one thread.
 */
static int lock_on_fault(void *addr, size_t len)
{
	return (int)syscall(SYS_mlock2, addr, len, MLOCK_ONFAULT);
}

static int populate(void *addr, size_t len)
{
	return (int)syscall(SYS_madvise, addr, len, MADV_POPULATE_WRITE);
}

static int pin(void *addr, size_t len)
{
	return (int)syscall(SYS_mlock, addr, len);
}

static uint64_t round_up(uint64_t v, uint64_t to)
{
	return (v + to - 1) / to * to;
}

/* CAP_IPC_LOCK lifts RLIMIT_MEMLOCK; read it from /proc rather than pull in
 * libcap for one bit. */
static int have_cap_ipc_lock(void)
{
	char line[256];
	unsigned long long eff = 0;
	int found = 0;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof line, f)) {
		if (sscanf(line, "CapEff: %llx", &eff) == 1) {
			found = 1;
			break;
		}
	}
	fclose(f);
	return found && (eff >> CAP_IPC_LOCK_BIT) & 1;
}

static uint64_t pool_pinned_bytes(const struct config_pool *pc)
{
	/* Worst case of what pool_open will lock: hugepage-rounded size. */
	if (pc->hugepages != CONFIG_HUGEPAGES_OFF)
		return round_up(pc->size, HUGEPAGE_2M);
	return round_up(pc->size, (uint64_t)sysconf(_SC_PAGESIZE));
}

int pool_check_memlock(const struct config *cfg, char *err, size_t errlen)
{
	struct rlimit rl;
	uint64_t need = 0;

	for (size_t i = 0; i < cfg->npools; i++)
		need += pool_pinned_bytes(&cfg->pools[i]);
	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0) {
		int e = errno; /* before the message is formatted */

		snprintf(err, errlen, "getrlimit(RLIMIT_MEMLOCK): %s", strerror(e));
		return -e;
	}
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need || have_cap_ipc_lock())
		return 0;
	snprintf(err, errlen,
		 "pools need %" PRIu64 " bytes of locked memory but RLIMIT_MEMLOCK is %" PRIu64
		 " bytes; raise it (systemd: LimitMEMLOCK=infinity in rmemd.service; shell: "
		 "ulimit -l unlimited) or make the pools smaller",
		 need, (uint64_t)rl.rlim_cur);
	return -ENOMEM;
}

/*
 * The pool's memory is a memfd mapped MAP_SHARED, not anonymous memory: a
 * file descriptor outlives the process that mapped it when systemd's fd store
 * keeps it, and with it every byte (docs/architecture.md, "Restart without
 * loss").  MFD_HUGETLB gives the same 2 MiB pages as MAP_HUGETLB did.
 */
static int make_memfd(const struct config_pool *pc, uint64_t size, unsigned hflags)
{
	char name[CONFIG_NAME_MAX + 16];
	int fd;

	snprintf(name, sizeof name, "rmem-pool-%s", pc->name);
	fd = memfd_create(name, MFD_CLOEXEC | hflags);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

/* Maps fd whole; MAP_FAILED with errno set on failure. */
static void *map_fd(int fd, uint64_t size)
{
	/* No MAP_NORESERVE: a hugetlb mapping must fail here, at mmap, when the
	 * hugepages are not there, not later as SIGBUS or ENOMEM while pinning. */
	return mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
}

/* A new memfd of the pool's size, hugepages as pc says; *fd and the mapping. */
static void *map_pool(const struct config_pool *pc, uint64_t *size, uint32_t *page_size,
		      int *fd, char *err, size_t errlen)
{
	void *p;
	int e;

	if (pc->hugepages != CONFIG_HUGEPAGES_OFF) {
		*size = round_up(pc->size, HUGEPAGE_2M);
		*fd = make_memfd(pc, *size, MFD_HUGETLB | MFD_HUGE_2MB);
		p = *fd >= 0 ? map_fd(*fd, *size) : MAP_FAILED;
		if (p != MAP_FAILED) {
			*page_size = (uint32_t)HUGEPAGE_2M;
			return p;
		}
		e = *fd >= 0 ? errno : -*fd;
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		if (pc->hugepages == CONFIG_HUGEPAGES_ON) {
			snprintf(err, errlen,
				 "pool %s: %" PRIu64 " bytes of 2 MiB hugepages: %s "
				 "(vm.nr_hugepages too low? or set hugepages = \"auto\")",
				 pc->name, *size, strerror(e));
			return NULL;
		}
	}
	*page_size = (uint32_t)sysconf(_SC_PAGESIZE);
	*size = round_up(pc->size, *page_size);
	*fd = make_memfd(pc, *size, 0);
	if (*fd < 0) {
		snprintf(err, errlen, "pool %s: memfd_create %" PRIu64 " bytes: %s", pc->name,
			 *size, strerror(-*fd));
		*fd = -1;
		return NULL;
	}
	p = map_fd(*fd, *size);
	if (p == MAP_FAILED) {
		e = errno;
		snprintf(err, errlen, "pool %s: mmap %" PRIu64 " bytes: %s", pc->name, *size,
			 strerror(e));
		close(*fd);
		*fd = -1;
		return NULL;
	}
	return p;
}

/* Steps of PIN_STEP bytes, handed out to whichever thread asks next. */
struct pin_job {
	const struct pool *p;
	int (*fault_in)(void *addr, size_t len);	/* populate, or pin */
	atomic_uint_fast64_t next_step;
	atomic_uint_fast64_t done;	/* bytes pinned */
	atomic_int err;			/* the first errno; 0 while all is well */
};

/* Pins the next step; false when none is left or a step failed. */
static bool pin_next(struct pin_job *j)
{
	uint64_t off = atomic_fetch_add(&j->next_step, 1) * PIN_STEP;
	uint64_t len;

	if (off >= j->p->size || atomic_load(&j->err))
		return false;
	len = j->p->size - off < PIN_STEP ? j->p->size - off : PIN_STEP;
	if (j->fault_in(j->p->base + off, len) < 0) {
		int none = 0;

		atomic_compare_exchange_strong(&j->err, &none, errno);
		return false;
	}
	atomic_fetch_add(&j->done, len);
	return true;
}

static void *pin_worker(void *arg)
{
	while (pin_next(arg))
		;
	return NULL;
}

static unsigned pin_threads(uint64_t size)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t steps = (size + PIN_STEP - 1) / PIN_STEP;
	uint64_t n = cpus > 0 ? (uint64_t)cpus : 1;

	n = n < PIN_THREADS_MAX ? n : PIN_THREADS_MAX;
	return (unsigned)(n < steps ? n : steps);
}

/* Locks the pool on fault and finds out whether populating works here; falls
 * back to mlock() in steps (j->fault_in = pin) when it does not. */
static int pin_prepare(struct pin_job *j)
{
	if (lock_on_fault(j->p->base, j->p->size) < 0) {
		if (errno != ENOSYS && errno != EINVAL)
			return -errno;
		j->fault_in = pin;
		return 0;
	}
	j->fault_in = populate;
	if (populate(j->p->base, j->p->page_size) < 0) {
		if (errno != EINVAL)
			return -errno;
		j->fault_in = pin;
	}
	return 0;
}

/*
 * Faults in and locks [base, base + size), one step at a time, with one
 * thread per CPU; this thread works too and reports the progress, so the
 * callback only ever runs here.  Helpers that cannot be started leave more
 * work to the others.  Workers block every signal: a signal during start-up
 * goes to this thread, as it did before there were workers.
 */
static int pin_pool(struct pool *p, bool lazy, pool_progress_fn progress, void *arg)
{
	struct pin_job j = { .p = p };
	pthread_t tid[PIN_THREADS_MAX];
	unsigned started = 0, want;
	uint64_t shown = 0;
	sigset_t all, old;
	int rc = pin_prepare(&j);

	if (rc < 0)
		return rc;
	/* Locked on fault: what is faulted in later is locked as it comes. */
	p->on_fault = lazy && j.fault_in == populate;
	if (p->on_fault)
		return 0;
	want = j.fault_in == populate ? pin_threads(p->size) : 1;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	while (started + 1 < want && pthread_create(&tid[started], NULL, pin_worker, &j) == 0)
		started++;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	while (pin_next(&j)) {
		shown = atomic_load(&j.done);
		if (progress)
			progress(arg, p, shown, p->size);
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	if (atomic_load(&j.err))
		return -atomic_load(&j.err);
	if (progress && shown != p->size)
		progress(arg, p, p->size, p->size);
	return 0;
}

void pool_thp_policy(char *word, size_t len)
{
	char line[128], *l, *r;
	FILE *f = fopen(THP_SHMEM, "re");

	word[0] = '\0';
	if (!f)
		return;
	if (fgets(line, sizeof line, f) && (l = strchr(line, '[')) && (r = strchr(l, ']'))) {
		*r = '\0';
		snprintf(word, len, "%s", l + 1);
	}
	fclose(f);
}

/* Whether the kernel backs an advised shared mapping with 2 MiB pages. */
static bool thp_allowed(void)
{
	char w[32];

	pool_thp_policy(w, sizeof w);
	return !strcmp(w, "advise") || !strcmp(w, "always") || !strcmp(w, "within_size") ||
	       !strcmp(w, "force");
}

/* Everything after the mapping, the same for a new pool and an adopted one. */
static int finish_open(struct pool *p, const struct config_pool *pc, bool lazy,
		       pool_progress_fn progress, void *arg, char *err, size_t errlen)
{
	int rc;

	/* Pool bytes must not leak into a forked child nor into core dumps:
	 * they are other people's data. */
	madvise(p->base, p->size, MADV_DONTFORK);
	madvise(p->base, p->size, MADV_DONTDUMP);
	/* Transparent 2 MiB pages for a pool of 4 KiB ones, where the kernel's
	 * shmem_enabled allows it: a restart's cost is then what clients hold,
	 * not the pool.  The old process's exit tears down one entry per page
	 * of the locked mapping, and the scrub faults the free part back in;
	 * measured (make bench-restart, 16 MiB held, host): a 4 GiB pool was
	 * READY 0.287 s after the signal with 4 KiB pages, 0.018 s with THP
	 * (64 MiB: 0.023 / 0.016), its scrub 1073 ms against 182. */
	if (p->page_size != HUGEPAGE_2M)
		p->thp = madvise(p->base, p->size, MADV_HUGEPAGE) == 0 && thp_allowed();
	/* Every page is faulted in and locked now, so the pool never
	 * page-faults on the data path; an adopted pool only what is held, the
	 * rest by its scrub (pool_populate, pool_scrub). */
	rc = pin_pool(p, lazy, progress, arg);
	if (rc < 0) {
		snprintf(err, errlen,
			 "pool %s: mlock %" PRIu64 " bytes: %s (LimitMEMLOCK, or memory)",
			 p->name, p->size, strerror(-rc));
		return rc;
	}
	p->alloc = alloc_new(p->size, pc->alignment);
	if (!p->alloc) {
		rc = -errno;
		snprintf(err, errlen, "pool %s: allocator: %s", p->name, strerror(errno));
		return rc;
	}
	return 0;
}

int pool_open(struct pool *p, const struct config_pool *pc, uint32_t index,
	      pool_progress_fn progress, void *arg, char *err, size_t errlen)
{
	int rc;

	memset(p, 0, sizeof *p);
	p->fd = -1;
	snprintf(p->name, sizeof p->name, "%s", pc->name);
	p->index = index;
	p->base = map_pool(pc, &p->size, &p->page_size, &p->fd, err, errlen);
	if (!p->base)
		return -ENOMEM;
	rc = finish_open(p, pc, false, progress, arg, err, errlen);
	if (rc < 0)
		pool_close(p);
	return rc;
}

int pool_adopt(struct pool *p, const struct config_pool *pc, uint32_t index, int fd,
	       uint64_t kept_size, pool_progress_fn progress, void *arg, char *err, size_t errlen)
{
	struct stat st;
	uint64_t kept;
	int rc;

	memset(p, 0, sizeof *p);
	p->fd = -1;
	snprintf(p->name, sizeof p->name, "%s", pc->name);
	p->index = index;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		snprintf(err, errlen, "pool %s: fstat: %s", pc->name, strerror(-rc));
		return rc;
	}
	/* hugetlbfs reports its page size as the block size. */
	p->page_size = st.st_blksize >= (blksize_t)HUGEPAGE_2M ? (uint32_t)HUGEPAGE_2M
							      : (uint32_t)sysconf(_SC_PAGESIZE);
	p->size = round_up(pc->size, p->page_size);
	kept = round_up(kept_size, p->page_size);
	/* Every kept byte must be there, and the config may only ask for as
	 * much or more.  A memfd larger than what is kept is a growth that a
	 * crash cut short before the header said so (persist.c): nothing past
	 * the kept size was ever handed out, so the config's size is mapped. */
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size < kept || p->size < kept ||
	    (p->page_size == HUGEPAGE_2M && pc->hugepages == CONFIG_HUGEPAGES_OFF) ||
	    (p->page_size != HUGEPAGE_2M && pc->hugepages == CONFIG_HUGEPAGES_ON)) {
		snprintf(err, errlen,
			 "pool %s: kept memfd is %" PRIu64 " bytes of %u-byte pages, %" PRIu64
			 " of them kept; the config asks for %" PRIu64 " bytes (hugepages %s)",
			 pc->name, (uint64_t)st.st_size, p->page_size, kept, pc->size,
			 pc->hugepages == CONFIG_HUGEPAGES_OFF ? "off" :
			 pc->hugepages == CONFIG_HUGEPAGES_ON ? "on" : "auto");
		return -EINVAL;
	}
	/* A larger size: the file grows, every kept byte where it was.  The
	 * new tail is holes until touched, and zero. */
	if ((uint64_t)st.st_size < p->size && ftruncate(fd, (off_t)p->size) < 0) {
		rc = -errno;
		snprintf(err, errlen, "pool %s: growing the kept memfd to %" PRIu64 " bytes: %s",
			 pc->name, p->size, strerror(-rc));
		return rc;
	}
	p->base = map_fd(fd, p->size);
	if (p->base == MAP_FAILED) {
		rc = -errno;
		p->base = NULL;
		snprintf(err, errlen, "pool %s: mmap kept memfd: %s", pc->name, strerror(-rc));
		return rc;
	}
	rc = finish_open(p, pc, true, progress, arg, err, errlen);
	if (rc < 0) {
		pool_close(p);
		return rc;
	}
	p->fd = fd;
	return 0;
}

int pool_populate(struct pool *p, uint64_t off, uint64_t len)
{
	uint64_t a = off / p->page_size * p->page_size;
	uint64_t b = round_up(off + len, p->page_size);

	if (!p->on_fault || !len)
		return 0;
	return populate(p->base + a, b - a) < 0 ? -errno : 0;
}

void pool_scrub(struct pool *p, const struct scrub_span *sp, size_t n)
{
	p->scrub = scrub_start(p->base, p->page_size, sp, n);
	if (!p->scrub)
		scrub_zero_now(p->base, sp, n);
}

void pool_take(struct pool *p, uint64_t off, uint64_t len)
{
	scrub_take(p->scrub, off, len);
}

void pool_close(struct pool *p)
{
	if (!p)
		return;
	/* Before the bytes go: the worker may be writing them. */
	scrub_stop(p->scrub);
	p->scrub = NULL;
	alloc_free(p->alloc);
	if (p->base)
		munmap(p->base, p->size);
	if (p->fd >= 0)
		close(p->fd);
	p->alloc = NULL;
	p->base = NULL;
	p->fd = -1;
}
