/*-------------------------------------------------------------------------
 *
 * epoch.c
 *	  One in-memory minibatch epoch of a single-layer net, taken apart:
 *	  the row gather, the forward-loss-gradient pass and the Adam step,
 *	  each timed over a whole epoch, for the path before the fused kernel
 *	  (a plain gather, then sgemm, loss and backward passes: the kernels'
 *	  reference path, DmlWork.unfused) and after (the gather with
 *	  prefetch, and the fused pass for one-output nets: softmax keeps the
 *	  reference path, so only its gather differs), alternated rep by rep.
 *
 *	  epoch [-r REPS] [-b BATCH] [-c BLOCK_ROWS [-I | -T]] [-S] [-s ISA] [SHAPE...]
 *
 *	  -S keeps sgemm for the skinny layers; -s caps the instruction set of
 *	  dml's own kernels (512, 256, or 0: none, OpenBLAS in their place).

 *	  With -c, the after path takes its rows in blocks of BLOCK_ROWS
 *	  consecutive rows in a shuffled order (options "shuffle": "blocks"),
 *	  gathered a block at a time (dml_gather_blocks, as workers/train.c);
 *	  with -I as well, by the rows' indices (dml_gather_rows, as before).
 *	  With -T instead, before is that gather and the fused pass, and after
 *	  the same blocks' rows read where they lie, laid out as tiles (a block
 *	  a feature at a time: one-output nets of narrow rows, as workers/train.c
 *	  lays them out), the same model to float32 rounding.
 *
 *	  SHAPE is ROWSxCOLSxK:LOSS with LOSS bce, softmax or mse, for example
 *	  1000000x20x1:bce (synth_1m's logistic regression, the default) and
 *	  60000x784x10:softmax (Fashion-MNIST's softmax regression).  The data
 *	  are seeded random numbers; the row order is a seeded shuffle per
 *	  epoch, as workers/train.c's.  Medians of REPS epochs, and the STREAM
 *	  floor is not taken here (bench/micro/stream gives it).
 *
 *-------------------------------------------------------------------------
 */
#include "kernels.h"
#include "clock.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_REPS 64
/* a step's runs in the block order: at most B / c + 3 */
#define MAX_RUNS (B / block_rows + 3)

/* -c C: the after path takes blocks of C consecutive rows in a shuffled order */
static int block_rows = 0;
/* -I: the block shuffle's rows gathered by their indices (before dml_gather_blocks) */
static int block_index = 0;
/*
 * -T: before is the block shuffle's gather and fused pass, after the same
 * blocks read where they lie from a copy of the rows laid out as tiles
 * (dml_tile_blocks, dml_block_runs, dml_net_gradient_tiles)
 */
static int tiled = 0;
static float *Xtiles = NULL;

/* the gather before prefetch (workers/train.c until the fused kernel) */
static void
gather_plain(const float *X, const float *y, int d, const int *idx, int B,
			 float *Xb, float *yb)
{
	for (int b = 0; b < B; b++)
	{
		memcpy(Xb + (size_t) b * d, X + (size_t) idx[b] * d, sizeof(float) * d);
		yb[b] = y[idx[b]];
	}
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return x < y ? -1 : x > y;
}

static double
median(double *v, int n)
{
	qsort(v, n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* parts of one epoch, seconds: gather, gradient, optimizer, whole */
typedef struct Parts
{
	double		gather[MAX_REPS],
				grad[MAX_REPS],
				optim[MAX_REPS],
				whole[MAX_REPS],
				cpu[MAX_REPS];
} Parts;

/* this process's CPU seconds: what the epoch cost, less time others had the core */
static double
cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static void
one_epoch(int fused, int rep, DmlNet *net, DmlWork *work, const float *X, const float *y,
		  int n, int d, int *idx, int B, float *Xb, float *yb, float *grads,
		  DmlOptimState *st, const DmlOptim *o, Parts *p, double *loss)
{
	DmlRng		rng;
	int		   *bl = NULL;
	DmlBlockOrder bo;
	/* -T's after path: a step's runs of the tiled copy */
	DmlTileRun *runs = tiled && fused ? malloc(sizeof(DmlTileRun) * MAX_RUNS) : NULL;
	double		tg = 0,
				tf = 0,
				to = 0,
				t0,
				c0;

	work->unfused = !fused && !tiled;
	/* from the identity each time, so both paths see the same order in a rep */
	for (int i = 0; i < n; i++)
		idx[i] = i;
	t0 = dml_clock_seconds();
	c0 = cpu_seconds();
	dml_rng_seed(&rng, 1000003u + (uint64_t) rep * 7919u);
	if ((fused || tiled) && block_rows > 0)
	{
		/* as workers/train.c's epoch_order (the rows are random already) */
		int			nb = (n + block_rows - 1) / block_rows,
					k = 0;

		bl = malloc(sizeof(int) * nb);
		for (int q = 0; q < nb; q++)
			bl[q] = q;
		dml_shuffle(bl, nb, &rng);
		dml_block_order_init(&bo, bl, nb, block_rows, n);
		for (int q = 0; q < nb && block_index; q++)
			for (int r = bl[q] * block_rows; r < n && r < (bl[q] + 1) * block_rows; r++)
				idx[k++] = r;
	}
	else
		dml_shuffle(idx, n, &rng);
	*loss = 0;
	for (int pos = 0; pos < n; pos += B)
	{
		int			c = n - pos < B ? n - pos : B;
		double		a = dml_clock_seconds(),
					m,
					e;

		int			nr = 0;

		/* the tiles' runs stand where the other paths gather their rows */
		if (runs)
			nr = dml_block_runs(Xtiles, y, d, &bo, pos, c, runs, yb);
		else if (bl && !block_index)
			dml_gather_blocks(X, y, d, &bo, pos, c, Xb, yb);
		else if (fused)
			dml_gather_rows(X, y, d, idx + pos, c, n - pos, Xb, yb);
		else
			gather_plain(X, y, d, idx + pos, c, Xb, yb);
		m = dml_clock_seconds();
		*loss += runs ? dml_net_gradient_tiles(net, work, grads, runs, nr, yb, c, 1.0f / c) :
			dml_net_gradient(net, work, grads, Xb, yb, c, 1.0f / c);
		e = dml_clock_seconds();
		optim_step(st, o, net->params, grads);
		to += dml_clock_seconds() - e;
		tg += m - a;
		tf += e - m;
	}
	p->whole[rep] = dml_clock_seconds() - t0;
	free(bl);
	free(runs);
	p->cpu[rep] = cpu_seconds() - c0;
	p->gather[rep] = tg;
	p->grad[rep] = tf;
	p->optim[rep] = to;
}

static int
run_shape(const char *shape, int reps, int B)
{
	long		n;
	int			d,
				K;
	char		lossname[16];
	DmlLoss		loss;
	DmlNet		net[2];
	DmlWork		work;
	DmlOptim	o = {0};
	DmlOptimState st[2];
	float	   *X,
			   *y,
			   *Xb,
			   *yb,
			   *grads;
	int		   *idx;
	DmlRng		rng;
	Parts		p[2];
	double		losses[2] = {0, 0};
	int			sizes[2];
	size_t		xbytes,
				ybytes;
	bool		narrow;

	if (sscanf(shape, "%ldx%dx%d:%15s", &n, &d, &K, lossname) != 4 || n < 1 || d < 1 || K < 1)
	{
		fprintf(stderr, "epoch: bad shape %s (ROWSxCOLSxK:LOSS)\n", shape);
		return 1;
	}
	loss = strcmp(lossname, "bce") == 0 ? DML_LOSS_BCE :
		strcmp(lossname, "softmax") == 0 ? DML_LOSS_SOFTMAX : DML_LOSS_MSE;
	sizes[0] = d;
	sizes[1] = K;
	xbytes = sizeof(float) * n * d;
	ybytes = sizeof(float) * n * (loss == DML_LOSS_MSE ? K : 1);
	/* the worker's memory for its rows (workers/load.c): 2 MB pages where they are narrow */
	narrow = sizeof(float) * ((size_t) d + 1) * 4 <= 4096;
	X = narrow ? dml_big_realloc(NULL, 0, xbytes) : malloc(xbytes);
	y = narrow ? dml_big_realloc(NULL, 0, ybytes) : malloc(ybytes);
	/* the step's arrays on cache lines, as the worker's (workers/train.c) */
	Xb = dml_malloc_lines((size_t) B * d, sizeof(float));
	yb = malloc(sizeof(float) * B * (loss == DML_LOSS_MSE ? K : 1));
	idx = malloc(sizeof(int) * n);
	if (!X || !y || !Xb || !yb || !idx)
		return 1;
	dml_rng_seed(&rng, 42);
	for (long i = 0; i < n * d; i++)
		X[i] = (float) dml_rng_normal(&rng);
	for (long i = 0; i < n; i++)
	{
		double		s = X[i * d] - 0.5 * X[i * d + 1];

		idx[i] = (int) i;
		if (loss == DML_LOSS_BCE)
			y[i] = s + 0.5 * dml_rng_normal(&rng) > 0;
		else if (loss == DML_LOSS_SOFTMAX)
			y[i] = (float) (dml_rng_next(&rng) % K);
		else
			for (int k = 0; k < K; k++)
				y[i * K + k] = (float) (s + dml_rng_normal(&rng));
	}
	o.kind = DML_OPT_ADAM;
	o.lr = 0.001f;
	o.beta1 = 0.9f;
	o.beta2 = 0.999f;
	o.eps = 1e-8f;
	for (int f = 0; f < 2; f++)
	{
		if (dml_net_alloc(&net[f], 1, sizes, DML_ACT_IDENTITY, loss) != DML_OK)
			return 1;
		dml_net_init(&net[f], 7);
		st[f].kind = DML_OPT_ADAM;
		st[f].n = net[f].nparams;
		st[f].t = 0;
		st[f].s1 = dml_calloc_lines(net[f].nparams, sizeof(float));
		st[f].s2 = dml_calloc_lines(net[f].nparams, sizeof(float));
	}
	grads = dml_malloc_lines(net[0].nparams, sizeof(float));
	if (dml_work_alloc(&work, &net[0], B) != DML_OK || !grads)
		return 1;
	if (tiled)
	{
		if (!dml_net_tile_applies(&net[0], &work, B))
		{
			fprintf(stderr, "epoch: -T takes one-output nets of up to 32 inputs on AVX2 or AVX-512 (%s)\n",
					shape);
			return 1;
		}
		Xtiles = dml_big_realloc(NULL, 0, xbytes);
		if (Xtiles == NULL)
			return 1;
		memcpy(Xtiles, X, xbytes);
		if (!dml_tile_blocks(Xtiles, d, block_rows, (int) n, true))
			return 1;
	}

	/* a warm-up epoch each, then the reps alternated */
	for (int rep = 0; rep <= reps; rep++)
		for (int f = 0; f < 2; f++)
			one_epoch(f, rep == 0 ? 0 : rep - 1, &net[f], &work, X, y, (int) n, d, idx, B, Xb, yb,
					  grads, &st[f], &o, &p[f], &losses[f]);

	printf("%s, batch %d, %d reps (medians, ms per epoch):\n", shape, B, reps);
	printf("  %-8s %9s %9s %9s %9s %9s\n", "path", "gather", "gradient", "adam", "epoch", "epoch cpu");
	for (int f = 0; f < 2; f++)
		printf("  %-8s %9.2f %9.2f %9.2f %9.2f %9.2f\n", f ? "after" : "before",
			   1e3 * median(p[f].gather, reps), 1e3 * median(p[f].grad, reps),
			   1e3 * median(p[f].optim, reps), 1e3 * median(p[f].whole, reps),
			   1e3 * median(p[f].cpu, reps));
	{
		double		maxdiff = 0;

		for (size_t i = 0; i < net[0].nparams; i++)
		{
			double		dd = fabs((double) net[0].params[i] - net[1].params[i]);

			if (dd > maxdiff)
				maxdiff = dd;
		}
		printf("  last epoch's loss: before %.9g, after %.9g; max |param difference| %.3g after %d epochs each\n",
			   losses[0] / n, losses[1] / n, maxdiff, reps + 1);
	}
	printf("{\"shape\": \"%s\", \"batch\": %d, \"reps\": %d, "
		   "\"before\": {\"gather\": %g, \"gradient\": %g, \"adam\": %g, \"epoch\": %g, \"cpu\": %g}, "
		   "\"after\": {\"gather\": %g, \"gradient\": %g, \"adam\": %g, \"epoch\": %g, \"cpu\": %g}}\n",
		   shape, B, reps,
		   median(p[0].gather, reps), median(p[0].grad, reps), median(p[0].optim, reps), median(p[0].whole, reps), median(p[0].cpu, reps),
		   median(p[1].gather, reps), median(p[1].grad, reps), median(p[1].optim, reps), median(p[1].whole, reps), median(p[1].cpu, reps));
	dml_work_free(&work);
	for (int f = 0; f < 2; f++)
	{
		dml_net_free(&net[f]);
		free(st[f].s1);
		free(st[f].s2);
	}
	if (Xtiles)
		dml_big_free(Xtiles, xbytes);
	Xtiles = NULL;
	if (narrow)
	{
		dml_big_free(X, xbytes);
		dml_big_free(y, ybytes);
	}
	else
	{
		free(X);
		free(y);
	}
	free(Xb);
	free(yb);
	free(idx);
	free(grads);
	return 0;
}

int
main(int argc, char **argv)
{
	int			reps = 5,
				B = 256,
				i = 1,
				rc = 0;

	for (; i < argc && argv[i][0] == '-'; i++)
	{
		if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (strcmp(argv[i], "-b") == 0 && i + 1 < argc)
			B = atoi(argv[++i]);
		else if (strcmp(argv[i], "-c") == 0 && i + 1 < argc)
			block_rows = atoi(argv[++i]);
		else if (strcmp(argv[i], "-S") == 0)
			dml_set_skinny(false);
		else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc)
			dml_set_simd(atoi(argv[++i]));
		else if (strcmp(argv[i], "-I") == 0)
			block_index = 1;
		else if (strcmp(argv[i], "-T") == 0)
			tiled = 1;
		else
		{
			fprintf(stderr, "usage: epoch [-r REPS] [-b BATCH] [-c BLOCK_ROWS [-I | -T]] [-S] [-s 512|256|0] [ROWSxCOLSxK:LOSS...]\n");
			return 2;
		}
	}
	if (reps < 1 || reps > MAX_REPS || B < 1 || (tiled && block_rows < 1))
		return 2;
	if (i == argc)
		rc |= run_shape("1000000x20x1:bce", reps, B);
	for (; i < argc; i++)
		rc |= run_shape(argv[i], reps, B);
	return rc;
}
