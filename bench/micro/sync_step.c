/*-------------------------------------------------------------------------
 *
 * sync_step.c
 *	  dml's all-reduce step (workers/sync.c, sync_step in sync mode
 *	  allreduce: the gradient buffer summed over the ranks, compressed or
 *	  not) against a raw in-place MPI_Allreduce of the same buffer, timed
 *	  alternately in the same run.
 *
 *	  mpirun -np N sync_step [-n FLOATS]... [-i ITERS] [-r ROUNDS]
 *
 *	  Each round times ITERS raw calls, then ITERS dml steps of each
 *	  compression (none, fp16, topk 0.01), then ITERS steps through shared
 *	  memory (sync_bind: two fences and the sum of this rank's 1/W of the
 *	  coordinates, what replaces the all-reduce when every rank is on one
 *	  host; each step first writes the rank's gradient slot, as training
 *	  does, and that write is timed too); the figure is the median over
 *	  rounds of the slowest rank's mean.  Bandwidths as nccl-tests defines
 *	  them for the uncompressed buffer: algbw = bytes / time, busbw = algbw
 *	  * 2(n-1)/n.  Prints one JSON line per buffer size and method.
 *
 *	  The optimizer step is not part of it (the step's row count is 0; the
 *	  shared-memory step calls the stub below), so what is timed is
 *	  synchronization alone.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "sync.h"

/* what sync.c and comm.c need from the rest of dml-worker */
int			worker_rank = 0;
int			worker_world = 1;
char		worker_host[256] = "bench";

void
worker_fail_at(const char *file, int line, const char *fmt,...)
{
	va_list		ap;

	va_start(ap, fmt);
	fprintf(stderr, "sync_step: %s:%d: ", file, line);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	MPI_Abort(MPI_COMM_WORLD, 2);
	exit(2);
}

void
worker_abort(int code)
{
	MPI_Abort(MPI_COMM_WORLD, code);
	exit(code);
}

/* the optimizer step is not what this measures (kernels/optim.c) */
void
optim_step(DmlOptimState *st, const DmlOptim *o, float *params, const float *grads)
{
	(void) st;
	(void) o;
	(void) params;
	(void) grads;
}

#define NMETHODS 5
#define SHM 4					/* the shared-memory method */

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

/* the slowest rank's mean seconds per call of what */
static double
slowest(double t)
{
	MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return t;
}

int
main(int argc, char **argv)
{
	size_t		sizes[16];
	int			nsizes = 0,
				iters = 200,
				rounds = 7;
	const char *methods[] = {"raw MPI_Allreduce", "dml allreduce", "dml allreduce fp16",
	"dml allreduce topk 0.01", "dml shared memory"};
	const char *comp[] = {NULL, "none", "fp16", "topk", "none"};

	comm_init(&argc, &argv);
	for (int a = 1; a < argc; a++)
	{
		if (strcmp(argv[a], "-n") == 0 && a + 1 < argc && nsizes < 16)
			sizes[nsizes++] = strtoul(argv[++a], NULL, 10);
		else if (strcmp(argv[a], "-i") == 0 && a + 1 < argc)
			iters = atoi(argv[++a]);
		else if (strcmp(argv[a], "-r") == 0 && a + 1 < argc)
			rounds = atoi(argv[++a]);
		else
		{
			if (worker_rank == 0)
				fprintf(stderr, "usage: sync_step [-n FLOATS]... [-i ITERS] [-r ROUNDS]\n");
			comm_finalize();
			return 2;
		}
	}
	if (nsizes == 0)
	{
		sizes[nsizes++] = 7850;		/* softmax 784-10 */
		sizes[nsizes++] = 235146;	/* MLP 784-256-128-10 */
	}

	for (int z = 0; z < nsizes; z++)
	{
		size_t		n = sizes[z];
		float	   *buf = malloc(sizeof(float) * n);
		float	   *params = calloc(n, sizeof(float));
		double	   *t[NMETHODS];
		Sync		sy[NMETHODS];
		WorkerSpec	spec;
		DmlOptimState	opt,
					shm_opt;
		float	   *shm_params = calloc(n, sizeof(float)),
				   *shm_grads = calloc(n, sizeof(float));

		memset(&spec, 0, sizeof(spec));
		memset(&opt, 0, sizeof(opt));
		spec.sync = DML_SYNC_ALLREDUCE;
		spec.topk_ratio = 0.01;
		spec.average_every = 1;
		for (int m = 1; m < NMETHODS; m++)
		{
			spec.compression = (DmlCompression) dml_job_parse(DML_NAMES_COMPRESSION, comp[m]);
			sync_init(&sy[m], &spec, n);
		}
		spec.shared_memory = 1;
		memset(&shm_opt, 0, sizeof(shm_opt));
		shm_opt.n = n;
		shm_opt.s1 = calloc(n, sizeof(float));
		shm_opt.s2 = calloc(n, sizeof(float));
		sync_bind(&sy[SHM], &spec, &shm_params, &shm_grads, &shm_opt);
		if (sy[SHM].shm == NULL && worker_rank == 0)
			fprintf(stderr, "sync_step: the ranks share no memory; \"%s\" is MPI\n", methods[SHM]);
		for (int m = 0; m < NMETHODS; m++)
			t[m] = malloc(sizeof(double) * rounds);
		for (int r = -1; r < rounds; r++)	/* round -1 warms up */
			for (int m = 0; m < NMETHODS; m++)
			{
				double		t0;

				for (size_t i = 0; i < n; i++)
					buf[i] = (float) ((i * 7 + worker_rank) % 13) * 1e-3f;
				MPI_Barrier(MPI_COMM_WORLD);
				t0 = MPI_Wtime();
				for (int k = 0; k < iters; k++)
				{
					if (m == 0)
						MPI_Allreduce(MPI_IN_PLACE, buf, (int) n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
					else if (m == SHM)
					{
						/*
						 * as in training, each step's gradient was just written by
						 * its rank (MPI_Allreduce writes its buffer in place too)
						 */
						memcpy(shm_grads, buf, sizeof(float) * n);
						sync_step(&sy[m], &spec, shm_params, shm_grads, &shm_opt, 0.0f, 1, 1, false);
					}
					else
						sync_step(&sy[m], &spec, params, buf, &opt, 0.0f, 0, 0, false);
				}
				t0 = slowest((MPI_Wtime() - t0) / iters);
				if (r >= 0)
					t[m][r] = t0;
			}
		for (int m = 0; m < NMETHODS; m++)
		{
			double		med;

			qsort(t[m], rounds, sizeof(double), cmp_double);
			med = t[m][rounds / 2];
			if (worker_rank == 0)
			{
				double		algbw = sizeof(float) * n / med * 1e-9;

				printf("{\"bench\": \"sync_step\", \"ranks\": %d, \"floats\": %zu, \"bytes\": %zu, "
					   "\"method\": \"%s\", \"time_s\": %.9g, \"algbw_gbs\": %.4g, \"busbw_gbs\": %.4g, "
					   "\"vs_raw\": %.4g}\n",
					   worker_world, n, sizeof(float) * n, methods[m], med, algbw,
					   algbw * 2.0 * (worker_world - 1) / worker_world,
					   med / t[0][rounds / 2]);
			}
		}
		for (int m = 0; m < NMETHODS; m++)
			free(t[m]);
		sync_unbind(&sy[SHM], &shm_params, &shm_grads, &shm_opt);
		for (int m = 1; m < NMETHODS; m++)
			sync_free(&sy[m]);
		free(shm_opt.s1);
		free(shm_opt.s2);
		free(shm_params);
		free(shm_grads);
		free(buf);
		free(params);
	}
	comm_finalize();
	return 0;
}
