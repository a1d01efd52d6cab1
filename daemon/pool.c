/*
 * pool.c - map, touch and pin the memory pools.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "alloc.h"
#include "pool.h"

#define HUGEPAGE_2M  (2ull << 20)
/* Pin in steps so progress can be reported during multi-GiB pools. */
#define PIN_STEP     (256ull << 20)
#define CAP_IPC_LOCK_BIT 14

/* The raw system call, because AddressSanitizer turns mlock() into a no-op
 * and the sanitized daemon that the tests run must pin for real. */
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
		snprintf(err, errlen, "getrlimit(RLIMIT_MEMLOCK): %s", strerror(errno));
		return -errno;
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

static void *map_pool(const struct config_pool *pc, uint64_t *size, uint32_t *page_size,
		      char *err, size_t errlen)
{
	const int prot = PROT_READ | PROT_WRITE;
	/* No MAP_NORESERVE: a hugetlb mapping must fail here, at mmap, when the
	 * hugepages are not there, not later as SIGBUS or ENOMEM while pinning. */
	const int flags = MAP_PRIVATE | MAP_ANONYMOUS;
	void *p;

	if (pc->hugepages != CONFIG_HUGEPAGES_OFF) {
		*size = round_up(pc->size, HUGEPAGE_2M);
		p = mmap(NULL, *size, prot, flags | MAP_HUGETLB | (21 << MAP_HUGE_SHIFT), -1, 0);
		if (p != MAP_FAILED) {
			*page_size = (uint32_t)HUGEPAGE_2M;
			return p;
		}
		if (pc->hugepages == CONFIG_HUGEPAGES_ON) {
			snprintf(err, errlen,
				 "pool %s: %" PRIu64 " bytes of 2 MiB hugepages: %s "
				 "(vm.nr_hugepages too low? or set hugepages = \"auto\")",
				 pc->name, *size, strerror(errno));
			return NULL;
		}
	}
	*page_size = (uint32_t)sysconf(_SC_PAGESIZE);
	*size = round_up(pc->size, *page_size);
	p = mmap(NULL, *size, prot, flags, -1, 0);
	if (p == MAP_FAILED) {
		snprintf(err, errlen, "pool %s: mmap %" PRIu64 " bytes: %s", pc->name, *size,
			 strerror(errno));
		return NULL;
	}
	return p;
}

int pool_open(struct pool *p, const struct config_pool *pc, uint32_t index,
	      pool_progress_fn progress, void *arg, char *err, size_t errlen)
{
	int rc;

	memset(p, 0, sizeof *p);
	snprintf(p->name, sizeof p->name, "%s", pc->name);
	p->index = index;
	p->base = map_pool(pc, &p->size, &p->page_size, err, errlen);
	if (!p->base)
		return -ENOMEM;
	/* Pool bytes must not leak into a forked child nor into core dumps:
	 * they are other people's data. */
	madvise(p->base, p->size, MADV_DONTFORK);
	madvise(p->base, p->size, MADV_DONTDUMP);
	/* mlock faults every page in, so the pool is touched and pinned at start
	 * and never page-faults on the data path. */
	for (uint64_t done = 0; done < p->size; done += PIN_STEP) {
		uint64_t step = p->size - done < PIN_STEP ? p->size - done : PIN_STEP;

		if (pin(p->base + done, step) < 0) {
			rc = -errno;
			snprintf(err, errlen,
				 "pool %s: mlock %" PRIu64 " bytes: %s (LimitMEMLOCK, or memory)",
				 p->name, p->size, strerror(errno));
			goto fail;
		}
		if (progress)
			progress(arg, p, done + step, p->size);
	}
	p->alloc = alloc_new(p->size, pc->alignment);
	if (!p->alloc) {
		rc = -errno;
		snprintf(err, errlen, "pool %s: allocator: %s", p->name, strerror(errno));
		goto fail;
	}
	return 0;
fail:
	pool_close(p);
	return rc;
}

void pool_close(struct pool *p)
{
	if (!p)
		return;
	alloc_free(p->alloc);
	if (p->base)
		munmap(p->base, p->size);
	p->alloc = NULL;
	p->base = NULL;
}
