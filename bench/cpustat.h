/*
 * cpustat.h - CPU time and scheduling counts of this process and of another
 * local one, for CPU cost per MiB the way perftest --cpu_util reports it
 * (rmem-perf and its libfabric peer, bench/peers/fi_rma.c).
 */
#ifndef RMEM_BENCH_CPUSTAT_H
#define RMEM_BENCH_CPUSTAT_H

/* A reading: CPU seconds, and how often the threads were scheduled in
 * (context switches: mostly wake-ups).  cpu_s < 0: not available. */
struct cpustat {
	double cpu_s;
	double switches;
};

/* This process, every thread: CLOCK_PROCESS_CPUTIME_ID and getrusage. */
struct cpustat cpustat_self(void);

/* Process pid, every thread: the run time (ns) and run count in
 * /proc/PID/task/TID/schedstat, where /proc/PID/stat counts in clock ticks,
 * too coarse for a one-second run.  cpu_s -1 when pid <= 0 or unreadable. */
struct cpustat cpustat_pid(int pid);

/* after - before; cpu_s -1 when either is unavailable. */
struct cpustat cpustat_delta(struct cpustat before, struct cpustat after);

#endif /* RMEM_BENCH_CPUSTAT_H */
