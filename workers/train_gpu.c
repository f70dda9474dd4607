/*-------------------------------------------------------------------------
 *
 * train_gpu.c
 *	  The allreduce training loop of train.c on CUDA devices, one rank per
 *	  GPU, gradients summed by NCCL.
 *
 * The slice is copied to device memory once.  Each epoch the shuffled row
 * order goes to the device in one copy; each step gathers its minibatch on
 * the device, runs forward and backward, all-reduces the gradients with
 * NCCL on the network's stream and applies the optimizer, all enqueued
 * without waiting.  The host synchronizes once per epoch, when it reads
 * the summed loss, and polls NCCL's asynchronous errors every
 * POLL_STEPS steps: a failed peer ends the job instead of hanging it.
 *
 * Rows per step are known on every rank without communication (each rank
 * knows every rank's row count), so the scale of the summed gradient is
 * computed on the host, as the CPU loop does.
 *
 * The host has little to do while the device computes an epoch, and the
 * device nothing to do while the host works between epochs, so the host
 * draws the next epoch's row order (the same shuffles in the same order as
 * ever) into pinned memory once the epoch's steps are enqueued, and its
 * copy follows them on the stream.  The device's context is made while the
 * worker loads its rows (dml_gpu_warm_start), and a job of one rank makes
 * no NCCL communicator: it has nothing to sum.
 *
 * A slice spilled to disk (stream.c) never goes to the device whole: each
 * step's rows are drawn from the epoch's stream on the host, as the CPU
 * loop draws them, a chunk of at most a block's rows at a time, into one
 * of two pinned buffers, and copied to the step's rows on the device on
 * the network's stream; an event per buffer says when its copy is done,
 * so the host fills one buffer while the device copies the other and
 * computes.
 *
 * The metrics run on the device too while the slice is there: each
 * epoch's validation, and the final model's figures (final_result, after
 * train_gpu returns: the slice stays on the device until
 * train_gpu_release).  A network of its own, in plain FP32 even when the
 * training used TF32, takes the model's parameters and forwards the rows
 * EVAL_GPU_ROWS at a time; the logits come back to pinned host memory and
 * train_eval_outputs turns them into metrics, as the CPU's evaluation
 * does.  Where the device cannot hold that network, the CPU evaluates.
 *
 *-------------------------------------------------------------------------
 */
#ifdef DML_HAVE_CUDA

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "cuda_kernels.h"
#include "worker.h"

#define POLL_STEPS	64			/* NCCL error polls */
#define NCCL_TIMEOUT_S	300.0	/* a collective that takes this long has hung */

#define gpuCheck(call) \
	do { int st_ = (call); \
		 if (st_ != DML_OK) \
			 worker_fail("%s failed on GPU %d: %s", #call, device, errbuf); } while (0)

#define cudaRtCheck(call) \
	do { cudaError_t e_ = (call); \
		 if (e_ != cudaSuccess) \
			 worker_fail("%s failed on GPU %d: %s", #call, device, cudaGetErrorString(e_)); } while (0)

#define EVAL_GPU_ROWS 4096		/* rows per forward pass of the device's metrics */

/* the device's evaluation: the slice on the device, and a network for it */
typedef struct GpuEval
{
	const Dataset *ds;			/* whose rows X_dev holds */
	int			device;
	float	   *X_dev;			/* (ds->n, ds->d), owned from train_gpu's end */
	float	   *y_dev;
	DmlGpuNet	g;				/* FP32, EVAL_GPU_ROWS rows */
	float	   *Xb;				/* (EVAL_GPU_ROWS, d) gathered rows */
	int		   *idx_dev;		/* (cap) the rows to evaluate */
	float	   *logits;			/* (cap, K) pinned host memory */
	float	   *yb;				/* (EVAL_ROWS) host targets of one batch */
	int			cap;
} GpuEval;

static GpuEval *gpu_eval = NULL;

/* free what gpu_eval_open allocated; the slice too when owns_slice */
static void
gpu_eval_free(GpuEval *ev, bool owns_slice)
{
	cudaSetDevice(ev->device);
	if (ev->g.slab)
		dml_gpu_net_free(&ev->g);
	cudaFree(ev->Xb);
	cudaFree(ev->idx_dev);
	cudaFreeHost(ev->logits);
	free(ev->yb);
	if (owns_slice)
	{
		cudaFree(ev->X_dev);
		cudaFree(ev->y_dev);
	}
	free(ev);
}

/*
 * gpu_eval_open
 *		The device's evaluation of net's shape over the slice at X_dev, or
 *		NULL where the device lacks the memory for it (the CPU evaluates).
 */
static GpuEval *
gpu_eval_open(const Dataset *ds, const DmlNet *net, int device, float *X_dev, float *y_dev)
{
	GpuEval    *ev = calloc(1, sizeof(GpuEval));
	char		errbuf[512];

	if (ev == NULL)
		return NULL;
	ev->ds = ds;
	ev->device = device;
	ev->X_dev = X_dev;
	ev->y_dev = y_dev;
	ev->yb = malloc(sizeof(float) * EVAL_ROWS);
	if (ev->yb == NULL ||
		dml_gpu_net_alloc(&ev->g, net, EVAL_GPU_ROWS, DML_OPT_SGD, device, 0,
						  errbuf, sizeof(errbuf)) != DML_OK ||
		cudaMalloc((void **) &ev->Xb, sizeof(float) * EVAL_GPU_ROWS * (size_t) ds->d) != cudaSuccess)
	{
		cudaGetLastError();
		gpu_eval_free(ev, false);
		return NULL;
	}
	return ev;
}

/*
 * train_gpu_evaluate
 *		train_evaluate's forward passes on the device, while a GPU
 *		training's slice is there: false (nothing done) otherwise.  Adds to
 *		met (reset by the caller) what the CPU would: train_eval_outputs,
 *		EVAL_ROWS rows at a time.
 */
bool
train_gpu_evaluate(const DmlModel *m, const Dataset *ds, const int *idx, int n, DmlMetrics *met)
{
	GpuEval    *ev = gpu_eval;
	int			K = m->net.sizes[m->net.nlayers];
	int			device;
	char		errbuf[1024] = "";

	if (ev == NULL || ev->ds != ds)
		return false;
	if (n == 0)
		return true;
	device = ev->device;
	cudaRtCheck(cudaSetDevice(device));
	if (n > ev->cap)
	{
		/* (a failed allocation ends the worker) */
		cudaFree(ev->idx_dev);
		cudaFreeHost(ev->logits);
		cudaRtCheck(cudaMalloc((void **) &ev->idx_dev, sizeof(int) * (size_t) n));
		cudaRtCheck(cudaMallocHost((void **) &ev->logits, sizeof(float) * (size_t) n * K));
		ev->cap = n;
	}
	gpuCheck(dml_gpu_net_upload(&ev->g, m->net.params, errbuf, sizeof(errbuf)));
	cudaRtCheck(cudaMemcpyAsync(ev->idx_dev, idx, sizeof(int) * (size_t) n,
								cudaMemcpyHostToDevice, ev->g.stream));
	for (int lo = 0; lo < n; lo += EVAL_GPU_ROWS)
	{
		int			B = n - lo < EVAL_GPU_ROWS ? n - lo : EVAL_GPU_ROWS;
		const float *logits;

		if (gather_rows_cuda(ev->Xb, ev->X_dev, ev->idx_dev + lo, B, ds->d, ev->g.stream) != DML_OK)
			worker_fail("gathering rows to evaluate on GPU %d: %s", device, dml_cuda_last_error());
		gpuCheck(dml_gpu_net_forward(&ev->g, &logits, ev->Xb, B, errbuf, sizeof(errbuf)));
		cudaRtCheck(cudaMemcpyAsync(ev->logits + (size_t) lo * K, logits, sizeof(float) * (size_t) B * K,
									cudaMemcpyDeviceToHost, ev->g.stream));
	}
	cudaRtCheck(cudaStreamSynchronize(ev->g.stream));
	for (int lo = 0; lo < n; lo += EVAL_ROWS)
	{
		int			B = n - lo < EVAL_ROWS ? n - lo : EVAL_ROWS;

		for (int i = 0; i < B; i++)
			ev->yb[i] = ds->y[idx[lo + i]];
		train_eval_outputs(m, ev->logits + (size_t) lo * K, ev->yb, B, met);
	}
	return true;
}

/* the end of a GPU training's metrics: its slice leaves the device */
void
train_gpu_release(void)
{
	if (gpu_eval)
		gpu_eval_free(gpu_eval, true);
	gpu_eval = NULL;
}

/*
 * send_order
 *		epoch's row order (train_shuffle of the last one, in train_idx) to
 *		idx_dev, after what the stream holds.  idx_host is pinned, and the
 *		copy reads it when the stream reaches it: the host next writes it an
 *		epoch later, after the stream has been waited for.
 */
static void
send_order(DmlRng *rng, int *train_idx, int ntrain, uint64_t seed, int epoch, int *idx_host,
		   int *idx_dev, cudaStream_t stream, int device)
{
	train_shuffle(rng, train_idx, ntrain, seed, epoch);
	memcpy(idx_host, train_idx, sizeof(int) * ntrain);
	cudaRtCheck(cudaMemcpyAsync(idx_dev, idx_host, sizeof(int) * ntrain, cudaMemcpyHostToDevice,
								stream));
}

/*
 * train_gpu
 *		As train_iterative, on device `device`.
 */
void
train_gpu(Dataset *ds, const WorkerSpec *spec, TrainResult *res, int device)
{
	DmlModel   *m = &res->model;
	DmlNet	   *net = &m->net;
	size_t		np = net->nparams;
	char		errbuf[1024] = "";
	int		   *train_idx,
			   *val_idx;
	int			ntrain,
				nval;
	StepPlan	plan;
	int			b;
	DmlGpuNet	g;
	DmlOptim gopt;
	DmlNccl    *nccl = NULL;
	unsigned char id[DML_NCCL_ID_BYTES];
	float	   *X_dev = NULL,
			   *y_dev = NULL,
			   *Xb,
			   *yb;
	int		   *idx_dev,
			   *idx_host = NULL;	/* pinned: the order the stream copies next */
	DmlOptimState	opt;
	EpochLog	log;
	DmlWork		work;
	DmlRng		rng;
	int			first_epoch = 1;
	double		start;
	/* a spilled slice: the epoch's stream, and two pinned host buffers of chunk rows */
	StreamEpoch *se = NULL;
	int			chunk = 0,
				nchunks = 0;
	float	   *hX[2] = {NULL, NULL},
			   *hy[2] = {NULL, NULL};
	cudaEvent_t copied[2];

	train_split_rows(ds, &train_idx, &ntrain, &val_idx, &nval);

	train_plan_steps(&plan, ntrain, spec->batch_size);
	b = train_step_rows(&plan, worker_rank);

	dml_gpu_warm_wait();
	cudaRtCheck(cudaSetDevice(device));
	dml_net_init(net, spec->seed);
	gpuCheck(dml_gpu_net_alloc(&g, net, b > 0 ? b : 1, (DmlOptimizer) spec->optimizer,
							   device, spec->tf32, errbuf, sizeof(errbuf)));

	if (ds->spill)
	{
		se = stream_epoch_new(ds->spill, spec->window);
		chunk = b < stream_block_rows(ds->spill) ? b : stream_block_rows(ds->spill);
		if (chunk < 1)
			chunk = 1;
		for (int k = 0; k < 2; k++)
		{
			cudaRtCheck(cudaMallocHost((void **) &hX[k], sizeof(float) * (size_t) chunk * ds->d));
			cudaRtCheck(cudaMallocHost((void **) &hy[k], sizeof(float) * (size_t) chunk));
			cudaRtCheck(cudaEventCreateWithFlags(&copied[k], cudaEventDisableTiming));
		}
		idx_dev = NULL;
	}
	else
	{
		/* the slice, once; row order per epoch */
		gpuCheck(dml_gpu_upload(&X_dev, ds->X, (size_t) (ds->n ? ds->n : 1) * ds->d,
								"training rows", errbuf, sizeof(errbuf)));
		gpuCheck(dml_gpu_upload(&y_dev, ds->y, (size_t) (ds->n ? ds->n : 1),
								"training targets", errbuf, sizeof(errbuf)));
		cudaRtCheck(cudaMalloc((void **) &idx_dev, sizeof(int) * (ntrain ? ntrain : 1)));
		cudaRtCheck(cudaMallocHost((void **) &idx_host, sizeof(int) * (ntrain ? ntrain : 1)));
	}
	cudaRtCheck(cudaMalloc((void **) &Xb, sizeof(float) * (size_t) (b ? b : 1) * ds->d));
	cudaRtCheck(cudaMalloc((void **) &yb, sizeof(float) * (b ? b : 1)));
	/* the metrics' network takes what training leaves, or the CPU evaluates */
	train_gpu_release();
	if (se == NULL)
		gpu_eval = gpu_eval_open(ds, net, device, X_dev, y_dev);

	/* NCCL between ranks: rank 0's id through MPI */
	if (worker_world > 1)
	{
		if (worker_rank == 0)
			gpuCheck(dml_nccl_unique_id(id, errbuf, sizeof(errbuf)));
		comm_bcast(id, sizeof(id), 0);
		gpuCheck(dml_nccl_init(&nccl, id, worker_world, worker_rank, device, NCCL_TIMEOUT_S,
							   errbuf, sizeof(errbuf)));
	}

	opt.kind = (DmlOptimizer) spec->optimizer;
	opt.n = np;
	opt.s1 = calloc(np, sizeof(float));
	opt.s2 = calloc(np, sizeof(float));
	opt.t = 0;
	if (spec->resume)
	{
		first_epoch = train_resume(spec, m, &opt) + 1;
		if (g.opt_m)
			cudaRtCheck(cudaMemcpy(g.opt_m, opt.s1, sizeof(float) * np, cudaMemcpyHostToDevice));
		if (g.opt_v)
			cudaRtCheck(cudaMemcpy(g.opt_v, opt.s2, sizeof(float) * np, cudaMemcpyHostToDevice));
		g.step = opt.t;
	}
	/* in memory each epoch shuffles the last one's order; a stream's orders stand alone */
	for (int e = 1; e < first_epoch && se == NULL; e++)
		train_shuffle(&rng, train_idx, ntrain, spec->seed, e);
	if (se == NULL && first_epoch <= spec->epochs)
		send_order(&rng, train_idx, ntrain, spec->seed, first_epoch, idx_host, idx_dev, g.stream,
				   device);
	gpuCheck(dml_gpu_net_upload(&g, net->params, errbuf, sizeof(errbuf)));

	gopt.kind = opt.kind;
	gopt.momentum = (float) spec->momentum;
	gopt.beta1 = (float) spec->beta1;
	gopt.beta2 = (float) spec->beta2;
	gopt.eps = (float) spec->eps;
	gopt.weight_decay = (float) spec->weight_decay;

	if (dml_work_alloc(&work, net, EVAL_ROWS) != DML_OK)
		worker_fail("out of memory");
	train_log_init(&log, net, spec, nval);
	start = dml_clock_seconds();

	/* the device runs ahead of the host: the time budget is checked between epochs */
	for (int epoch = first_epoch; epoch <= spec->epochs && !res->out_of_time; epoch++)
	{
		double		t0 = dml_clock_seconds();
		double		bytes0 = comm_job_bytes();
		double		sums[2] = {0, (double) ntrain};
		bool		checkpoint,
					stop;

		maybe_inject_fault(spec, epoch, NULL);
		gopt.lr = lr_at_epoch(spec->schedule, (float) spec->learning_rate, epoch - 1,
							  spec->epochs, spec->step_size, (float) spec->gamma) * log.lr_scale;
		if (se)
			stream_epoch_begin(se, spec->seed, epoch);

		for (int s = 0; s < plan.steps; s++)
		{
			int			lo = s * b;
			int			B = ntrain - lo < b ? ntrain - lo : b;
			int64_t		total = train_step_total(&plan, s);

			if (B < 0)
				B = 0;
			gpuCheck(dml_gpu_net_zero_grads(&g, errbuf, sizeof(errbuf)));
			if (B > 0 && se)
			{
				/* the step's rows from the stream, a chunk per pinned buffer */
				for (int done = 0; done < B;)
				{
					int			c = B - done < chunk ? B - done : chunk;
					int			k = nchunks++ % 2;

					/* the copy that last read this buffer is done */
					cudaRtCheck(cudaEventSynchronize(copied[k]));
					if (stream_epoch_take(se, c, hX[k], hy[k]) != c)
						worker_fail("the spill gave fewer rows than its blocks hold");
					cudaRtCheck(cudaMemcpyAsync(Xb + (size_t) done * ds->d, hX[k],
												sizeof(float) * (size_t) c * ds->d,
												cudaMemcpyHostToDevice, g.stream));
					cudaRtCheck(cudaMemcpyAsync(yb + done, hy[k], sizeof(float) * (size_t) c,
												cudaMemcpyHostToDevice, g.stream));
					cudaRtCheck(cudaEventRecord(copied[k], g.stream));
					done += c;
				}
				gpuCheck(dml_gpu_net_forward_backward(&g, Xb, yb, B, errbuf, sizeof(errbuf)));
			}
			else if (B > 0)
			{
				if (gather_rows_cuda(Xb, X_dev, idx_dev + lo, B, ds->d, g.stream) != DML_OK ||
					gather_rows_cuda(yb, y_dev, idx_dev + lo, B, 1, g.stream) != DML_OK)
					worker_fail("gathering a minibatch on GPU %d: %s", device, dml_cuda_last_error());
				gpuCheck(dml_gpu_net_forward_backward(&g, Xb, yb, B, errbuf, sizeof(errbuf)));
			}
			if (worker_world > 1)
				gpuCheck(dml_nccl_allreduce_sum(nccl, g.grads, np, g.stream, errbuf, sizeof(errbuf)));
			if (total > 0)
				gpuCheck(dml_gpu_net_step(&g, &gopt, 1.0f / (float) total, errbuf, sizeof(errbuf)));
			if (nccl && s % POLL_STEPS == POLL_STEPS - 1)
				gpuCheck(dml_nccl_poll(nccl, errbuf, sizeof(errbuf)));
			train_report_step(epoch, s + 1, plan.steps);
		}
		/* the next epoch's order, while the device works through this one's */
		if (se == NULL && epoch < spec->epochs)
			send_order(&rng, train_idx, ntrain, spec->seed, epoch + 1, idx_host, idx_dev, g.stream,
					   device);
		if (nccl)
			gpuCheck(dml_nccl_wait(nccl, g.stream, NCCL_TIMEOUT_S, errbuf, sizeof(errbuf)));
		gpuCheck(dml_gpu_net_take_loss(&g, &sums[0], errbuf, sizeof(errbuf)));
		comm_allreduce_double(sums, 2);
		if (worker_world > 1)
			/* what NCCL moved: a ring all-reduce of the gradients per step */
			comm_count_bytes((double) plan.steps * np * sizeof(float));

		/* the host copy of the parameters is what validation and checkpoints read */
		if (log.nval_total > 0 || (spec->checkpoint_every > 0 && epoch % spec->checkpoint_every == 0))
			gpuCheck(dml_gpu_net_download(&g, net->params, errbuf, sizeof(errbuf)));
		stop = train_log_epoch(&log, res, spec, ds, &work, val_idx, nval, epoch, sums, t0,
							   bytes0, &checkpoint);
		if (!stop && epoch < spec->epochs && train_out_of_time(spec, start))
			train_note_out_of_time(spec, res, epoch, plan.steps);
		if (checkpoint && !res->out_of_time)
		{
			if (g.opt_m)
				cudaRtCheck(cudaMemcpy(opt.s1, g.opt_m, sizeof(float) * np, cudaMemcpyDeviceToHost));
			if (g.opt_v)
				cudaRtCheck(cudaMemcpy(opt.s2, g.opt_v, sizeof(float) * np, cudaMemcpyDeviceToHost));
			opt.t = g.step;
			train_send_checkpoint(m, &opt, epoch);
		}
		if (stop)
			break;
	}
	gpuCheck(dml_gpu_net_download(&g, net->params, errbuf, sizeof(errbuf)));
	train_log_finish(&log, res);

	dml_nccl_destroy(nccl);
	dml_gpu_net_free(&g);
	if (gpu_eval == NULL)
	{
		/* else the slice stays for final_result's metrics (train_gpu_release) */
		cudaFree(X_dev);
		cudaFree(y_dev);
	}
	cudaFree(idx_dev);
	cudaFreeHost(idx_host);
	cudaFree(Xb);
	cudaFree(yb);
	if (se)
	{
		for (int k = 0; k < 2; k++)
		{
			cudaFreeHost(hX[k]);
			cudaFreeHost(hy[k]);
			cudaEventDestroy(copied[k]);
		}
		stream_epoch_free(se);
	}
	dml_work_free(&work);
	free(opt.s1);
	free(opt.s2);
	free(plan.rows);
	free(train_idx);
	free(val_idx);
}

#endif							/* DML_HAVE_CUDA */
