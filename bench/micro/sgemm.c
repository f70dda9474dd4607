/*-------------------------------------------------------------------------
 *
 * sgemm.c
 *	  OpenBLAS sgemm throughput (GFLOP/s = 2MNK / seconds) at given shapes.
 *
 *	  sgemm [-t THREADS] [-s SECONDS] [MxNxK ...]
 *	  sgemm_dml -k dml|amx [-s SECONDS] [MxNxK ...]
 *
 *	  C[M,N] = A[M,K] * B[K,N], row-major, no transposes.  The default shapes
 *	  are those of an MLP 784-256-128-10 step at batch 256 (forward
 *	  X*W^T, weight gradient dY^T*X, input gradient dY*W), one at batch 64,
 *	  and a large square for the machine's peak.  Threads default to 1
 *	  (openblas_set_num_threads; OPENBLAS_NUM_THREADS is read too early to
 *	  set from here).  Each shape runs for about SECONDS (default 0.5) after
 *	  a warm-up; best and median call times are reported.  sgemm_dml is
 *	  the same program linked with dml's kernels: with -k dml it times
 *	  dml_gemm (kernels/gemm.h, the dense layers' own product on AVX-512)
 *	  at the same shapes, single-threaded, instead of OpenBLAS; a shape it
 *	  does not take (no AVX-512, or past its sizes) is said so and left out
 *	  of the JSON lines.  -k amx: the same on AMX's tiles where the CPU
 *	  has them (kernels/gemm_amx.h, as dml-worker's layers run).
 *
 *-------------------------------------------------------------------------
 */
#include <cblas.h>
#include <stdbool.h>
#ifdef SGEMM_DML
#include "kernels.h"
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SGEMM_MAX_SHAPES	64
#define SGEMM_MAX_CALLS		100000

typedef struct GemmShape
{
	int			m;
	int			n;
	int			k;
	const char *what;
} GemmShape;

static const GemmShape default_shapes[] = {
	{256, 256, 784, "mlp fwd 1 (b256)"},
	{256, 784, 256, "mlp dW 1 (b256)"},
	{256, 128, 256, "mlp fwd 2 (b256)"},
	{128, 256, 256, "mlp dW 2 (b256)"},
	{256, 256, 128, "mlp dX 2 (b256)"},
	{256, 10, 128, "mlp fwd 3 (b256)"},
	{64, 256, 784, "mlp fwd 1 (b64)"},
	{256, 784, 64, "mlp dW 1 (b64)"},
	{2048, 2048, 2048, "large square"},
};

/* seconds on a monotonic clock */
static double
now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ascending order of doubles, for qsort */
static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

/* a float array of n values in [-1,1) from a fixed seed */
static float *
random_matrix(size_t n, unsigned *seed)
{
	float	   *p = malloc(n * sizeof(float));

	if (p == NULL)
	{
		fprintf(stderr, "sgemm: out of memory for %zu floats\n", n);
		exit(1);
	}
	for (size_t i = 0; i < n; i++)
		p[i] = (float) rand_r(seed) / RAND_MAX * 2.0f - 1.0f;
	return p;
}

/* whether dml_gemm, not cblas_sgemm, is timed (-k dml) */
static int	use_dml = 0;

/*
 * C = A B, row-major, on the chosen kernel; false where dml_gemm does not
 * take the shape (no AVX-512, or C or B past what it takes: sgemm's then)
 */
static bool
product(const GemmShape *s, const float *a, const float *b, float *c)
{
#ifdef SGEMM_DML
	if (use_dml)
		return dml_gemm(false, false, s->m, s->n, s->k, a, s->k, b, s->n, false, c, s->n);
#endif
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->m, s->n, s->k,
				1.0f, a, s->k, b, s->n, 0.0f, c, s->n);
	return true;
}

/* time one shape; best and median seconds per call */
static void
time_shape(const GemmShape *s, double budget, double *best, double *median,
		   int *calls)
{
	unsigned	seed = 12345;
	float	   *a = random_matrix((size_t) s->m * s->k, &seed);
	float	   *b = random_matrix((size_t) s->k * s->n, &seed);
	float	   *c = random_matrix((size_t) s->m * s->n, &seed);
	double	   *times = malloc(SGEMM_MAX_CALLS * sizeof(double));
	double		start;
	int			ncalls = 0;

	/* warm-up: threads started, caches and pages touched (none where not taken) */
	if (product(s, a, b, c))
	{
		start = now_seconds();
		while (ncalls < SGEMM_MAX_CALLS &&
			   (ncalls < 3 || now_seconds() - start < budget))
		{
			double		t0 = now_seconds();

			product(s, a, b, c);
			times[ncalls++] = now_seconds() - t0;
		}
		qsort(times, ncalls, sizeof(double), cmp_double);
		*best = times[0];
		*median = times[ncalls / 2];
	}
	*calls = ncalls;
	free(times);
	free(a);
	free(b);
	free(c);
}

/* parse options, time each shape, print the table and JSON lines */
int
main(int argc, char **argv)
{
	GemmShape	shapes[SGEMM_MAX_SHAPES];
	int			nshapes = 0;
	int			nthreads = 1;
	double		budget = 0.5;
	double		best[SGEMM_MAX_SHAPES],
				median[SGEMM_MAX_SHAPES];
	int			calls[SGEMM_MAX_SHAPES];

	for (int i = 1; i < argc; i++)
	{
		GemmShape	s = {0, 0, 0, "given"};

		if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
			nthreads = atoi(argv[++i]);
		else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc)
			budget = atof(argv[++i]);
#ifdef SGEMM_DML
		else if (strcmp(argv[i], "-k") == 0 && i + 1 < argc && strcmp(argv[i + 1], "dml") == 0)
			use_dml = 1, i++;
		else if (strcmp(argv[i], "-k") == 0 && i + 1 < argc && strcmp(argv[i + 1], "amx") == 0)
		{
			use_dml = 1, i++;
			if (!dml_set_amx(true))
				fprintf(stderr, "sgemm: no AMX here: dml's AVX-512 product instead\n");
		}
#endif
		else if (nshapes < SGEMM_MAX_SHAPES &&
				 sscanf(argv[i], "%dx%dx%d", &s.m, &s.n, &s.k) == 3 &&
				 s.m > 0 && s.n > 0 && s.k > 0)
			shapes[nshapes++] = s;
		else
		{
			fprintf(stderr, "usage: %s [-t THREADS] [-s SECONDS] [MxNxK ...]\n", argv[0]);
			return 2;
		}
	}
	if (nthreads < 1 || budget <= 0)
	{
		fprintf(stderr, "sgemm: -t must be at least 1 and -s positive\n");
		return 2;
	}
	if (nshapes == 0)
	{
		nshapes = sizeof(default_shapes) / sizeof(default_shapes[0]);
		memcpy(shapes, default_shapes, sizeof(default_shapes));
	}
	openblas_set_num_threads(nthreads);

	if (use_dml)
		printf("sgemm: dml_gemm (kernels/gemm.h), 1 thread\n");
	else
		printf("sgemm: %s, %d thread%s\n", openblas_get_config(), nthreads,
			   nthreads == 1 ? "" : "s");
	printf("%6s %6s %6s %8s %10s %10s %10s  %s\n", "M", "N", "K", "calls",
		   "best_us", "GFLOP/s", "med GF/s", "");
	for (int i = 0; i < nshapes; i++)
	{
		const GemmShape *s = &shapes[i];
		double		flops = 2.0 * s->m * s->n * s->k;

		time_shape(s, budget, &best[i], &median[i], &calls[i]);
		if (calls[i] == 0)
		{
			printf("%6d %6d %6d  not taken by dml_gemm (sgemm runs it)  %s\n", s->m, s->n, s->k, s->what);
			continue;
		}
		printf("%6d %6d %6d %8d %10.1f %10.2f %10.2f  %s\n", s->m, s->n, s->k,
			   calls[i], best[i] * 1e6, flops / best[i] / 1e9,
			   flops / median[i] / 1e9, s->what);
		fflush(stdout);
	}
	for (int i = 0; i < nshapes; i++)
	{
		const GemmShape *s = &shapes[i];
		double		flops = 2.0 * s->m * s->n * s->k;

		if (calls[i] == 0)
			continue;
		printf("{\"bench\": \"sgemm\", \"kernel\": \"%s\", \"m\": %d, \"n\": %d, \"k\": %d, "
			   "\"threads\": %d, \"calls\": %d, \"best_s\": %.9f, "
			   "\"gflops\": %.3f, \"median_gflops\": %.3f}\n",
			   use_dml ? "dml" : "openblas", s->m, s->n, s->k, use_dml ? 1 : nthreads, calls[i],
			   best[i], flops / best[i] / 1e9, flops / median[i] / 1e9);
	}
	return 0;
}
