/*
 * cpustat.c - see cpustat.h.
 */
#include "cpustat.h"

#include <dirent.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>

struct cpustat cpustat_self(void)
{
	struct timespec ts;
	struct rusage ru;
	struct cpustat st = { .cpu_s = -1 };

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0)
		st.cpu_s = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		st.switches = (double)ru.ru_nvcsw + (double)ru.ru_nivcsw;
	return st;
}

struct cpustat cpustat_pid(int pid)
{
	struct cpustat st = { .cpu_s = -1 };
	unsigned long long ns_sum = 0, runs = 0;
	char path[64];
	struct dirent *d;
	DIR *dir;

	if (pid <= 0)
		return st;
	snprintf(path, sizeof path, "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		return st;
	while ((d = readdir(dir))) {
		unsigned long long ns, wait_ns, n;
		FILE *f;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "/proc/%d/task/%.16s/schedstat", pid, d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue; /* the thread ended meanwhile */
		if (fscanf(f, "%llu %llu %llu", &ns, &wait_ns, &n) == 3) {
			ns_sum += ns;
			runs += n;
		}
		fclose(f);
	}
	closedir(dir);
	st.cpu_s = (double)ns_sum / 1e9;
	st.switches = (double)runs;
	return st;
}

struct cpustat cpustat_delta(struct cpustat before, struct cpustat after)
{
	struct cpustat d = { .cpu_s = -1 };

	if (before.cpu_s < 0 || after.cpu_s < 0 || after.cpu_s < before.cpu_s)
		return d;
	d.cpu_s = after.cpu_s - before.cpu_s;
	d.switches = after.switches - before.switches;
	return d;
}
