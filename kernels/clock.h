/*-------------------------------------------------------------------------
 *
 * clock.h
 *	  The one monotonic clock of dml's programs (workers, kernels, tools):
 *	  CLOCK_MONOTONIC, never set back, in nanoseconds or seconds; and the
 *	  process's CPU time, for benchmarks on a machine others share.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_CLOCK_H
#define DML_CLOCK_H

#include <stdint.h>
#include <time.h>

/* nanoseconds on the monotonic clock */
static inline int64_t
dml_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* seconds on the monotonic clock */
static inline double
dml_clock_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* seconds of CPU time this process has used, all its threads */
static inline double
dml_clock_cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif							/* DML_CLOCK_H */
