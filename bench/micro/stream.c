/*-------------------------------------------------------------------------
 *
 * stream.c
 *	  STREAM-like memory bandwidth: copy, scale, add and triad on double
 *	  arrays, with 1 and 2 OpenMP threads (or the counts given).
 *
 *	  stream [-n ELEMENTS] [-r REPS] [THREADS...]
 *
 *	  Bytes are counted as STREAM counts them (copy and scale move two
 *	  arrays, add and triad three; write-allocate traffic not counted), and
 *	  the best of REPS runs is reported.  The arrays should be several times
 *	  the last-level cache: the default, 2^24 doubles, is 128 MiB each.
 *	  One JSON line per thread count follows the table.
 *
 *-------------------------------------------------------------------------
 */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STREAM_DEFAULT_N	(1L << 24)
#define STREAM_DEFAULT_REPS	10
#define STREAM_MAX_THREADS	256

enum
{
	K_COPY, K_SCALE, K_ADD, K_TRIAD, K_COUNT
};

static const char *const kernel_names[K_COUNT] = {"copy", "scale", "add", "triad"};
static const int kernel_arrays[K_COUNT] = {2, 2, 3, 3};

/* seconds on a monotonic clock */
static double
now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* run the four kernels reps times with nthreads; best seconds into best[] */
static void
stream_run(double *a, double *b, double *c, long n, int reps, int nthreads,
		   double best[K_COUNT])
{
	const double s = 3.0;

	omp_set_num_threads(nthreads);
	/* first touch by the threads that will use the pages */
#pragma omp parallel for schedule(static)
	for (long i = 0; i < n; i++)
	{
		a[i] = 1.0;
		b[i] = 2.0;
		c[i] = 0.0;
	}
	for (int k = 0; k < K_COUNT; k++)
		best[k] = DBL_MAX;

	for (int r = 0; r < reps; r++)
	{
		double		t[K_COUNT + 1];

		t[0] = now_seconds();
#pragma omp parallel for schedule(static)
		for (long i = 0; i < n; i++)
			c[i] = a[i];
		t[1] = now_seconds();
#pragma omp parallel for schedule(static)
		for (long i = 0; i < n; i++)
			b[i] = s * c[i];
		t[2] = now_seconds();
#pragma omp parallel for schedule(static)
		for (long i = 0; i < n; i++)
			c[i] = a[i] + b[i];
		t[3] = now_seconds();
#pragma omp parallel for schedule(static)
		for (long i = 0; i < n; i++)
			a[i] = b[i] + s * c[i];
		t[4] = now_seconds();
		/* the first repetition warms up: it is not counted */
		if (r == 0 && reps > 1)
			continue;
		for (int k = 0; k < K_COUNT; k++)
			if (t[k + 1] - t[k] < best[k])
				best[k] = t[k + 1] - t[k];
	}
}

/* check the arrays hold what the kernels must have left (as STREAM does) */
static int
stream_check(const double *a, const double *b, const double *c, long n, int reps)
{
	double		ea = 1.0,
				eb = 2.0,
				ec = 0.0;

	for (int r = 0; r < reps; r++)
	{
		ec = ea;
		eb = 3.0 * ec;
		ec = ea + eb;
		ea = eb + 3.0 * ec;
	}
	for (long i = 0; i < n; i += n / 1024 + 1)
		if (fabs(a[i] - ea) > 1e-8 * fabs(ea) || fabs(b[i] - eb) > 1e-8 * fabs(eb) ||
			fabs(c[i] - ec) > 1e-8 * fabs(ec))
			return 0;
	return 1;
}

/* parse options, run each thread count, print the table and JSON lines */
int
main(int argc, char **argv)
{
	long		n = STREAM_DEFAULT_N;
	int			reps = STREAM_DEFAULT_REPS;
	int			threads[STREAM_MAX_THREADS];
	int			nthreadcounts = 0;
	double	   *a,
			   *b,
			   *c;
	double		results[STREAM_MAX_THREADS][K_COUNT];
	int			ok = 1;

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
			n = atol(argv[++i]);
		else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (argv[i][0] != '-' && nthreadcounts < STREAM_MAX_THREADS &&
				 atoi(argv[i]) > 0)
			threads[nthreadcounts++] = atoi(argv[i]);
		else
		{
			fprintf(stderr, "usage: %s [-n ELEMENTS] [-r REPS] [THREADS...]\n", argv[0]);
			return 2;
		}
	}
	if (n < 1024 || reps < 1)
	{
		fprintf(stderr, "stream: -n must be at least 1024 and -r at least 1\n");
		return 2;
	}
	if (nthreadcounts == 0)
	{
		threads[nthreadcounts++] = 1;
		threads[nthreadcounts++] = 2;
	}

	a = aligned_alloc(64, ((n * sizeof(double) + 63) / 64) * 64);
	b = aligned_alloc(64, ((n * sizeof(double) + 63) / 64) * 64);
	c = aligned_alloc(64, ((n * sizeof(double) + 63) / 64) * 64);
	if (!a || !b || !c)
	{
		fprintf(stderr, "stream: out of memory for 3 x %ld doubles\n", n);
		return 1;
	}

	printf("stream: %ld doubles per array (%.1f MiB each), best of %d\n",
		   n, n * sizeof(double) / 1048576.0, reps > 1 ? reps - 1 : 1);
	printf("%8s %10s %10s %10s %10s   (GB/s, 1 GB = 1e9 B)\n",
		   "threads", "copy", "scale", "add", "triad");
	for (int t = 0; t < nthreadcounts; t++)
	{
		double		best[K_COUNT];

		stream_run(a, b, c, n, reps, threads[t], best);
		if (!stream_check(a, b, c, n, reps))
			ok = 0;
		printf("%8d", threads[t]);
		for (int k = 0; k < K_COUNT; k++)
		{
			results[t][k] = kernel_arrays[k] * sizeof(double) * (double) n / best[k] / 1e9;
			printf(" %10.2f", results[t][k]);
		}
		printf("\n");
	}
	for (int t = 0; t < nthreadcounts; t++)
	{
		printf("{\"bench\": \"stream\", \"threads\": %d, \"elements\": %ld",
			   threads[t], n);
		for (int k = 0; k < K_COUNT; k++)
			printf(", \"%s_gbs\": %.3f", kernel_names[k], results[t][k]);
		printf(", \"valid\": %s}\n", ok ? "true" : "false");
	}
	if (!ok)
		fprintf(stderr, "stream: result check FAILED\n");
	free(a);
	free(b);
	free(c);
	return ok ? 0 : 1;
}
