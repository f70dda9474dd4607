/*-------------------------------------------------------------------------
 *
 * train.c
 *	  Synchronous data-parallel minibatch training (sync mode allreduce).
 *
 * Every rank holds a full replica.  An epoch has the same number of steps
 * on every rank: steps = ceil(max over ranks of local rows / batch_size),
 * and a rank uses ceil(local rows / steps) rows per step, so every rank is
 * busy every step and each row is seen once per epoch.  Each step the
 * ranks sum their gradients and their row counts in one all-reduce and
 * divide by the global count, so the update is the gradient of the mean
 * loss over the global minibatch: with batch_size at least every slice,
 * training is full-batch gradient descent and gives the same model for
 * any number of ranks (up to float rounding).
 *
 * Data stay in memory: the slice is read once and iterated over.  A slice
 * that did not fit the memory budget was spilled (stream.c): its epochs
 * draw rows from a window of blocks in a new order each epoch, and a step
 * larger than a block computes its gradient in chunks of a block.
 *
 * Full-batch training (one step an epoch over every training row, in any
 * sync mode but async) sums the gradient over the training rows in the
 * order they are stored, in chunks of EVAL_ROWS, as L-BFGS does: the same
 * chunks in memory and streamed (a spill's blocks hold the rows in that
 * order), so the model is the same either way, not merely close
 * (full_gradient).
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "protocol.h"
#include "sync.h"
#include "worker.h"



/*
 * A spilled slice's rows have no indices: its lists hold one of these
 * instead, and their counts are the blocks' (train_evaluate streams them).
 */
#define STREAM_TRAIN_ROWS	(-1)
#define STREAM_VAL_ROWS		(-2)

/* full_gradient's chunk being filled */
typedef struct FullBatch
{
	const DmlNet *net;
	DmlWork    *work;
	float	   *grads;
	float	   *Xb;				/* (EVAL_ROWS, d) */
	float	   *yb;
	int			B;
	int			chunks;
	float		scale;
	double		loss;
} FullBatch;

static void
full_chunk(FullBatch *fb)
{
	fb->loss += fb->chunks++ == 0 ?
		dml_net_gradient(fb->net, fb->work, fb->grads, fb->Xb, fb->yb, fb->B, fb->scale) :
		dml_net_forward_backward_scaled(fb->net, fb->work, fb->grads, fb->Xb, fb->yb, fb->B, fb->scale);
	fb->B = 0;
}

/* rows in memory, or a spilled block's: the training ones into chunks */
static void
full_rows(const Dataset *v, void *arg)
{
	FullBatch  *fb = arg;

	for (int64_t i = 0; i < v->n; i++)
	{
		if (v->val[i])
			continue;
		memcpy(fb->Xb + (size_t) fb->B * v->d, v->X + (size_t) i * v->d, sizeof(float) * v->d);
		fb->yb[fb->B++] = v->y[i];
		if (fb->B == EVAL_ROWS)
			full_chunk(fb);
	}
}

/*
 * full_gradient
 *		grads = scale times the gradient over every training row of this
 *		rank, in stored order and chunks of EVAL_ROWS; returns the loss sum.
 */
static double
full_gradient(Dataset *ds, const DmlNet *net, DmlWork *work, float *grads,
			  float *Xb, float *yb, float scale)
{
	FullBatch	fb = {net, work, grads, Xb, yb, 0, 0, scale, 0};

	if (ds->spill)
		stream_scan(ds->spill, 0, full_rows, &fb);
	else
		full_rows(ds, &fb);
	if (fb.B > 0 || fb.chunks == 0)
		full_chunk(&fb);
	return fb.loss;
}

/* indices of the training and validation rows */
void
train_split_rows(const Dataset *ds, int **train, int *ntrain, int **val, int *nval)
{
	if (ds->spill)
	{
		int64_t		nt,
					nv;

		stream_counts(ds->spill, &nt, &nv);
		*train = malloc(sizeof(int));
		*val = malloc(sizeof(int));
		if (!*train || !*val)
			worker_fail("out of memory");
		(*train)[0] = STREAM_TRAIN_ROWS;
		(*val)[0] = STREAM_VAL_ROWS;
		*ntrain = (int) nt;
		*nval = (int) nv;
		return;
	}
	*train = malloc(sizeof(int) * (ds->n ? ds->n : 1));
	*val = malloc(sizeof(int) * (ds->n ? ds->n : 1));
	*ntrain = *nval = 0;
	for (int64_t i = 0; i < ds->n; i++)
	{
		if (ds->val[i])
			(*val)[(*nval)++] = (int) i;
		else
			(*train)[(*ntrain)++] = (int) i;
	}
}

/*
 * copy rows idx[0..B) into Xb, yb; idx[B..avail) are the rows wanted next,
 * which the gather prefetches (kernels/common.c)
 */
static void
gather(const Dataset *ds, const int *idx, int B, int avail, float *Xb, float *yb)
{
	if (ds->rows8)
		dml_rows8_gather(ds->rows8, ds->y, ds->d, idx, B, avail, Xb, yb);
	else
		dml_gather_rows(ds->X, ds->y, ds->d, idx, B, avail, Xb, yb);
}

/*
 * Rows that Newton's method left as row panels (ds->panel_rows): whether
 * row r lies in them, and rows idx[0..B) gathered from where they lie,
 * rows or panel lanes, with their targets
 */
static inline bool
in_panels(const Dataset *ds, int64_t r)
{
	return r >= ds->panel_row0 && r < ds->panel_row0 + ds->panel_rows;
}

static void
gather_panels(const Dataset *ds, const int *idx, int B, float *Xb, float *yb)
{
	int			d = ds->d;

	for (int k = 0; k < B; k++)
	{
		int64_t		r = idx[k];

		if (in_panels(ds, r))
		{
			const float *x = dml_panel_row(ds->X + (size_t) ds->panel_row0 * d,
										   r - ds->panel_row0, d);

			for (int c = 0; c < d; c++)
				Xb[(size_t) k * d + c] = x[(size_t) c * DML_PANEL];
		}
		else
			memcpy(Xb + (size_t) k * d, ds->X + (size_t) r * d, sizeof(float) * d);
		yb[k] = ds->y[r];
	}
}

/*
 * Of rows idx[0..B), how many at the start are whole panels in order (a
 * multiple of DML_PANEL) that a one-output linear model's logits take
 * where they lie (dml_panel_dot)
 */
static int
panel_run_rows(const DmlModel *m, const Dataset *ds, const int *idx, int B)
{
	int			n = 0;

	if (m->net.nlayers != 1 || m->net.sizes[1] != 1 || !in_panels(ds, idx[0]) ||
		(idx[0] - ds->panel_row0) % DML_PANEL != 0)
		return 0;
	while (n < B && idx[n] == idx[0] + n && in_panels(ds, idx[n]))
		n++;
	return n / DML_PANEL * DML_PANEL;
}

/* only the targets of rows idx[0..B): the rows themselves are read where they lie */
static void
gather_targets(const Dataset *ds, const int *idx, int B, float *yb)
{
	for (int k = 0; k < B; k++)
		yb[k] = ds->y[idx[k]];
}

/*
 * train_eval_outputs
 *		Metrics of B rows from the model's logits (out, overwritten with its
 *		outputs) and targets (yb, overwritten with their own units): the CPU
 *		evaluation and the GPU's (train_gpu.c) share it.
 */
void
train_eval_outputs(const DmlModel *m, float *out, float *yb, int B, DmlMetrics *met)
{
	const DmlNet *net = &m->net;
	int			K = net->sizes[net->nlayers];

	dml_net_output(net, out, B);
	if (net->loss == DML_LOSS_MSE)
		for (int b = 0; b < B; b++)
		{
			out[(size_t) b * K] = out[(size_t) b * K] * m->out_scale[0] + m->out_mean[0];
			yb[b] = yb[b] * m->out_scale[0] + m->out_mean[0];
		}
	dml_metrics_add(met, out, yb, B);
}

/* one batch of the metrics from its logits (copied into out) */
static void
eval_logits(const DmlModel *m, const float *logits, float *yb, int B, float *out,
			DmlMetrics *met)
{
	memcpy(out, logits, sizeof(float) * B * m->net.sizes[m->net.nlayers]);
	train_eval_outputs(m, out, yb, B, met);
}

/* one batch of the metrics on the CPU */
static void
eval_batch(const DmlModel *m, DmlWork *work, float *Xb, float *yb, int B, float *out,
		   DmlMetrics *met)
{
	eval_logits(m, dml_net_forward(&m->net, work, Xb, B), yb, B, out, met);
}

typedef struct EvalScan
{
	const DmlModel *m;
	DmlWork    *work;
	DmlMetrics *met;
	int			want_val;
	int			B;
	float	   *Xb,
			   *yb,
			   *out;
} EvalScan;

/* a spilled block's held-out (or training) rows into the evaluation batches */
static void
eval_block(const Dataset *v, void *arg)
{
	EvalScan   *es = arg;

	for (int64_t i = 0; i < v->n; i++)
	{
		if ((v->val[i] != 0) != es->want_val)
			continue;
		memcpy(es->Xb + (size_t) es->B * v->d, v->X + (size_t) i * v->d, sizeof(float) * v->d);
		es->yb[es->B++] = v->y[i];
		if (es->B == EVAL_ROWS)
		{
			eval_batch(es->m, es->work, es->Xb, es->yb, es->B, es->out, es->met);
			es->B = 0;
		}
	}
}

/*
 * Metrics of the model over rows idx on every rank (reduced), in the
 * target's own units.
 */
void
train_evaluate(const DmlModel *m, DmlWork *work, const Dataset *ds, const int *idx, int n,
		 DmlMetrics *met)
{
	const DmlNet *net = &m->net;
	int			K = net->sizes[net->nlayers];
	float	   *Xb = dml_malloc_lines((size_t) EVAL_ROWS * ds->d, sizeof(float));
	float	   *yb = malloc(sizeof(float) * EVAL_ROWS);
	float	   *out = malloc(sizeof(float) * EVAL_ROWS * K);

	dml_metrics_reset(met);
	if (train_gpu_evaluate(m, ds, idx, n, met))
	{
		/* a GPU training's rows are still on the device: the passes ran there */
	}
	else if (ds->spill)
	{
		EvalScan	es = {m, work, met, idx[0] == STREAM_VAL_ROWS, 0, Xb, yb, out};

		if (n > 0)
			stream_scan(ds->spill, 0, eval_block, &es);
		if (es.B > 0)
			eval_batch(m, work, Xb, yb, es.B, out, met);
	}
	else
		for (int lo = 0; lo < n; lo += EVAL_ROWS)
		{
			int			B = n - lo < EVAL_ROWS ? n - lo : EVAL_ROWS;
			int			np = ds->panel_rows > 0 ? panel_run_rows(m, ds, idx + lo, B) : 0;

			if (np > 0)
			{
				/* a logistic regression's rows left as panels: its logits from them */
				gather_targets(ds, idx + lo, np, yb);
				dml_panel_dot(Xb, ds->X + (size_t) idx[lo] * ds->d, np / DML_PANEL, ds->d,
							  m->net.params);
				eval_logits(m, Xb, yb, np, out, met);
				if (np < B)
				{
					gather_panels(ds, idx + lo + np, B - np, Xb, yb);
					eval_batch(m, work, Xb, yb, B - np, out, met);
				}
			}
			else if (ds->panel_rows > 0)
			{
				gather_panels(ds, idx + lo, B, Xb, yb);
				eval_batch(m, work, Xb, yb, B, out, met);
			}
			else if (dml_net_rows_applies(&m->net, work, B))
			{
				/* softmax: the rows read where they lie */
				gather_targets(ds, idx + lo, B, yb);
				eval_logits(m, dml_net_forward_rows(&m->net, work, ds->X, ds->rows8, idx + lo, B,
													n - lo),
							yb, B, out, met);
			}
			else
			{
				gather(ds, idx + lo, B, n - lo, Xb, yb);
				eval_batch(m, work, Xb, yb, B, out, met);
			}
		}
	comm_allreduce_double(met->v, met->nvalues);
	free(Xb);
	free(yb);
	free(out);
}

/*
 * Checkpoint payload: int32 epoch, uint32 blob length, model blob, int32
 * step count, then both optimizer state vectors (nparams floats each).
 */
void
train_send_checkpoint(const DmlModel *m, const DmlOptimState *o, int epoch)
{
	size_t		blen = dml_model_serialized_size(m);
	size_t		len = 4 + 4 + blen + 4 + 2 * o->n * sizeof(float);
	unsigned char *buf = malloc(len);
	unsigned char *p = buf;
	int32_t		e = epoch;
	uint32_t	b = (uint32_t) blen;
	int32_t		t = o->t;

	memcpy(p, &e, 4);
	memcpy(p + 4, &b, 4);
	dml_model_serialize(m, p + 8);
	p += 8 + blen;
	memcpy(p, &t, 4);
	p += 4;
	memcpy(p, o->s1, o->n * sizeof(float));
	memcpy(p + o->n * sizeof(float), o->s2, o->n * sizeof(float));
	control_send(DML_MSG_CHECKPOINT, buf, len, NULL, 0);
	free(buf);
}

/* rank 0 has the checkpoint (it came with the job), every rank gets its params and state; returns its epoch */
int
train_resume(const WorkerSpec *spec, DmlModel *m, DmlOptimState *o)
{
	int32_t		hdr[2] = {0, 0};	/* epoch, ok */
	float	   *buf = malloc(sizeof(float) * (m->net.nparams + 2 * o->n) + 4);

	if (worker_rank == 0 && spec->attached_len > 8)
	{
		const unsigned char *data = spec->attached;
		size_t		len = spec->attached_len;
		uint32_t	blen;
		DmlModel	saved;
		char		err[256];

		memcpy(&hdr[0], data, 4);
		memcpy(&blen, data + 4, 4);
		if (8 + (size_t) blen + 4 + 2 * o->n * sizeof(float) == len &&
			dml_model_parse(&saved, data + 8, blen, err, sizeof(err)) == DML_OK &&
			saved.net.nparams == m->net.nparams)
		{
			int32_t		t;

			memcpy(buf, saved.net.params, sizeof(float) * m->net.nparams);
			memcpy(&t, data + 8 + blen, 4);
			memcpy(buf + m->net.nparams, data + 12 + blen, 2 * o->n * sizeof(float));
			memcpy(buf + m->net.nparams + 2 * o->n, &t, 4);
			dml_model_free(&saved);
			hdr[1] = 1;
		}
	}
	comm_bcast(hdr, sizeof(hdr), 0);
	if (!hdr[1])
		worker_fail("the checkpoint that came with the job does not match it");
	comm_bcast(buf, sizeof(float) * (m->net.nparams + 2 * o->n) + 4, 0);
	memcpy(m->net.params, buf, sizeof(float) * m->net.nparams);
	memcpy(o->s1, buf + m->net.nparams, o->n * sizeof(float));
	memcpy(o->s2, buf + m->net.nparams + o->n, o->n * sizeof(float));
	memcpy(&o->t, buf + m->net.nparams + 2 * o->n, 4);
	free(buf);
	return hdr[0];
}

/*
 * train_shuffle
 *		The order of epoch's rows: each epoch shuffles the order the
 *		previous one left, so the order is part of the data position.  A
 *		run resumed after epoch e calls this for epochs 1..e first, and
 *		goes on exactly as a run that was never interrupted.
 */
void
train_shuffle(DmlRng *rng, int *idx, int n, uint64_t seed, int epoch)
{
	dml_rng_seed(rng, seed * 1000003u + (uint64_t) epoch * 7919u + (uint64_t) worker_rank);
	dml_shuffle(idx, n, rng);
}

/*
 * train_plan_steps
 *		Every rank's training rows, and the steps per epoch they imply:
 *		ceil(max rows / batch_size), the same on every rank.
 */
void
train_plan_steps(StepPlan *plan, int ntrain, int batch_size)
{
	plan->rows = calloc(worker_world, sizeof(int64_t));
	if (plan->rows == NULL)
		worker_fail("out of memory");
	plan->rows[worker_rank] = ntrain;
	comm_allgather_i64(plan->rows);
	plan->steps = 1;
	for (int r = 0; r < worker_world; r++)
		if ((plan->rows[r] + batch_size - 1) / batch_size > plan->steps)
			plan->steps = (int) ((plan->rows[r] + batch_size - 1) / batch_size);
}

/*
 * train_report_step
 *		Rank 0, after a step: tell the coordinator where it is within the
 *		epoch (dml.progress's step), at most every DML_STEP_REPORT_S.
 */
void
train_report_step(int epoch, int step, int steps)
{
	static double last = 0;
	double		now;
	DmlStep		st;

	if (worker_rank != 0)
		return;
	now = dml_clock_seconds();
	/* (the epoch's own PROGRESS message says when it is done) */
	if (now - last < DML_STEP_REPORT_S)
		return;
	last = now;
	st.epoch = epoch;
	st.step = step;
	st.steps = steps;
	control_send(DML_MSG_STEP, &st, sizeof(st), NULL, 0);
}

/* rows rank takes per step: ceil(its rows / steps) */
int
train_step_rows(const StepPlan *plan, int rank)
{
	return (int) ((plan->rows[rank] + plan->steps - 1) / plan->steps);
}

/* rows rank takes in step s (0 once its rows are done), known to every rank */
static int
step_rows_at(const StepPlan *plan, int rank, int s)
{
	int64_t		br = train_step_rows(plan, rank);
	int64_t		left = plan->rows[rank] - (int64_t) s * br;

	return (int) (left <= 0 ? 0 : (left < br ? left : br));
}

/* rows in the global minibatch of step s, known to every rank */
int64_t
train_step_total(const StepPlan *plan, int s)
{
	int64_t		total = 0;

	for (int r = 0; r < worker_world; r++)
		total += step_rows_at(plan, r, s);
	return total;
}

/* the epoch bookkeeping of a training loop, before its first epoch */
void
train_log_init(EpochLog *log, const DmlNet *net, const WorkerSpec *spec, int nval)
{
	memset(log, 0, sizeof(*log));
	log->best_loss = INFINITY;
	log->lr_scale = 1.0f;
	log->staleness = NAN;
	log->nval_total = nval;
	comm_allreduce_double(&log->nval_total, 1);
	log->across_mark = comm_job_bytes_across();
	if (dml_metrics_init(&log->met, net->loss, spec->classification ? spec->nclasses : 1) != DML_OK)
		worker_fail("out of memory");
}

/* the parameters just evaluated on the validation rows, and the figures */
static void
keep_evaluation(TrainResult *res, const DmlModel *m, const DmlMetrics *met)
{
	size_t		np = m->net.nparams;

	if (res->eval_params == NULL)
	{
		res->eval_params = malloc(sizeof(float) * (np ? np : 1));
		res->eval_values = malloc(sizeof(double) * (met->nvalues ? met->nvalues : 1));
		if (res->eval_params == NULL || res->eval_values == NULL)
			worker_fail("out of memory");
	}
	memcpy(res->eval_params, m->net.params, sizeof(float) * np);
	memcpy(res->eval_values, met->v, sizeof(double) * met->nvalues);
	res->eval_nvalues = met->nvalues;
}

void
train_forget_evaluation(TrainResult *res)
{
	free(res->eval_params);
	free(res->eval_values);
	res->eval_params = NULL;
	res->eval_values = NULL;
	res->eval_nvalues = 0;
}

/*
 * train_log_epoch
 *		After an epoch's steps (sums: loss sum and rows of this rank): reduce
 *		the figures, evaluate the validation rows with the parameters in
 *		res->model, report progress, keep the best replica for early
 *		stopping.  *checkpoint says whether rank 0 owes a checkpoint now;
 *		returns true when early stopping ends the training.
 */
bool
train_log_epoch(EpochLog *log, TrainResult *res, const WorkerSpec *spec, const Dataset *ds,
				DmlWork *work, const int *val_idx, int nval, int epoch, double sums[2],
				double t0, double bytes0, bool *checkpoint)
{
	DmlModel   *m = &res->model;
	DmlProgress p;

	memset(&p, 0, sizeof(p));
	p.epoch = epoch;
	p.loss = sums[0] / sums[1];
	if (m->net.loss == DML_LOSS_MSE)
		p.loss *= (double) m->out_scale[0] * m->out_scale[0];
	p.rows = sums[1];
	p.val_loss = NAN;
	p.val_metric = NAN;
	p.staleness = log->staleness;
	p.train_seconds = dml_clock_seconds() - t0;
	log->train_time += p.train_seconds;
	log->rows_done += sums[1];
	if (log->nval_total > 0)
	{
		train_evaluate(m, work, ds, val_idx, nval, &log->met);
		keep_evaluation(res, m, &log->met);
		p.val_loss = dml_metrics_loss(&log->met);
		p.val_metric = dml_metrics_score(&log->met);
	}
	p.seconds = dml_clock_seconds() - t0;
	p.bytes_sent = comm_job_bytes() - bytes0;
	p.bytes_across = comm_job_bytes_across() - log->across_mark;
	log->across_mark = comm_job_bytes_across();
	res->epochs_run = epoch;
	res->final_loss = p.loss;
	if (!isfinite(p.loss))
		worker_user_error("2200H|Lower learning_rate, or use optimizer => 'adam'.|"
						  "training diverged at epoch %d: the loss is not finite", epoch);
	if (worker_rank == 0)
		control_send(DML_MSG_PROGRESS, &p, sizeof(p), NULL, 0);
	*checkpoint = worker_rank == 0 &&
		((spec->checkpoint_every > 0 && epoch % spec->checkpoint_every == 0 && epoch < spec->epochs) ||
		 (spec->checkpoint_last && epoch == spec->epochs));

	/*
	 * Stopping when the loss no longer improves: the validation loss when
	 * rows are held out (patience), else the training loss (converged).
	 * An epoch counts as an improvement when it beats the best loss by
	 * tolerance of it; the best replica seen is kept and restored.  The
	 * plateau schedule cuts the learning rate by gamma when the same loss
	 * has not improved for step_size epochs (Keras's ReduceLROnPlateau
	 * beside EarlyStopping): a smaller step often finds a lower loss
	 * before patience runs out.  Every rank sees the same reduced figures,
	 * so every rank cuts at the same epoch.
	 */
	if (spec->patience > 0 || spec->schedule == DML_SCHED_PLATEAU)
	{
		size_t		np = m->net.nparams;
		double		watched = log->nval_total > 0 ? p.val_loss : p.loss;
		bool		improved = false;

		if (watched < log->best_loss)
		{
			improved = watched < log->best_loss - spec->tolerance * fabs(log->best_loss) ||
				!isfinite(log->best_loss);
			log->best_loss = watched;
			if (spec->patience > 0)
			{
				log->best_epoch = epoch;
				if (log->best == NULL && (log->best = malloc(sizeof(float) * np)) == NULL)
					worker_fail("out of memory");
				memcpy(log->best, m->net.params, sizeof(float) * np);
			}
		}
		log->bad_epochs = improved ? 0 : log->bad_epochs + 1;
		log->stalled = improved ? 0 : log->stalled + 1;
		if (spec->patience > 0 && log->bad_epochs >= spec->patience)
		{
			res->stopped = log->nval_total > 0 ? DML_STOP_PATIENCE : DML_STOP_CONVERGED;
			return true;
		}
		if (spec->schedule == DML_SCHED_PLATEAU && log->stalled >= (spec->step_size > 0 ? spec->step_size : 1))
		{
			log->lr_scale *= (float) spec->gamma;
			log->stalled = 0;
		}
	}
	return false;
}

/*
 * train_out_of_time
 *		Whether the time budget (max_seconds, from start on rank 0's clock)
 *		is spent.  Rank 0 decides and every data rank learns its answer, so
 *		all stop at the same step: a collective, called only when the job
 *		has a budget.
 */
bool
train_out_of_time(const WorkerSpec *spec, double start)
{
	int			over;

	if (spec->max_seconds <= 0)
		return false;
	over = worker_rank == 0 && dml_clock_seconds() - start >= spec->max_seconds;
	comm_bcast(&over, sizeof(over), 0);
	return over != 0;
}

/* the budget is spent after step (1-based) of epoch: say so once */
void
train_note_out_of_time(const WorkerSpec *spec, TrainResult *res, int epoch, int step)
{
	char		msg[160];
	int			n;

	res->out_of_time = true;
	if (worker_rank != 0)
		return;
	n = snprintf(msg, sizeof(msg), "training stopped at epoch %d, step %d: max_seconds (%g s) spent",
				 epoch, step, spec->max_seconds);
	control_send(DML_MSG_LOG, msg, (size_t) n, NULL, 0);
}

/* after the last epoch: the best replica back, the rates, memory freed */
void
train_log_finish(EpochLog *log, TrainResult *res)
{
	if (log->best != NULL)
	{
		memcpy(res->model.net.params, log->best, sizeof(float) * res->model.net.nparams);
		res->best_epoch = log->best_epoch;
	}
	if (res->stopped == DML_STOP_NONE)
		res->stopped = DML_STOP_MAX_EPOCHS;
	res->train_seconds = log->train_time;
	res->rows_per_second = log->train_time > 0 ? log->rows_done / log->train_time : 0;
	free(log->best);
	dml_metrics_free(&log->met);
}

/*
 * The straggler test hook: "rank:ms" delays that worker by ms every step;
 * "*:ms:p" delays each worker by ms in a step with probability p (drawn
 * independently per worker and step, seeded by the job's seed).
 */
typedef struct Straggler
{
	int			ms;				/* 0: this rank is never delayed */
	double		p;				/* probability per step */
	DmlRng		rng;
} Straggler;

static void
straggler_init(Straggler *st, const WorkerSpec *spec)
{
	int			rank,
				ms;
	double		p;

	memset(st, 0, sizeof(*st));
	if (spec->straggler == NULL)
		return;
	if (sscanf(spec->straggler, "*:%d:%lf", &ms, &p) == 2)
	{
		st->ms = ms;
		st->p = p;
		dml_rng_seed(&st->rng, spec->seed * 7777u + (uint64_t) worker_rank * 131u + 17u);
	}
	else if (sscanf(spec->straggler, "%d:%d", &rank, &ms) == 2 && rank == worker_rank)
	{
		st->ms = ms;
		st->p = 1.0;
	}
}

static void
straggler_step(Straggler *st)
{
	if (st->ms > 0 && (st->p >= 1.0 || dml_rng_uniform(&st->rng) < st->p))
		usleep((useconds_t) st->ms * 1000);
}

/* what the synchronization did, for the result */
static void
sync_facts(TrainResult *res, const Sync *sy)
{
	res->has_sync = true;
	res->allreduce = sy->mode == DML_SYNC_ALLREDUCE && sy->W > 1 ?
		(sy->hierarchical ? 3 : sy->shared ? 2 : 1) : 0;
	res->consensus = sy->mode == DML_SYNC_GOSSIP ? sy->consensus : NAN;
	res->balance = sy->bal_rows > 0;
	res->balance_steps = sy->bal_moved_steps;
	res->balance_rows = sy->bal_moved_rows;
	res->chunks_taken = sy->claimed ? sy->chunks_taken : -1;
	res->servers = sy->S;
	if (sy->S > 0)
	{
		res->server_stale = malloc(sizeof(int64_t) * sy->S);
		if (res->server_stale == NULL)
			worker_fail("out of memory");
		memcpy(res->server_stale, sy->server_stale, sizeof(int64_t) * sy->S);
	}
}

/* a tiled block's rows: a multiple of the widest vector's lanes */
#define TILE_ROWS 16

/*
 * train_block_rows
 *		Rows a block of the block shuffle (options "shuffle"), or 0 for the
 *		row-by-row shuffle.  A block is about DML_SHUFFLE_BLOCK_BYTES of
 *		rows, at most a step's rows.  "auto" takes blocks where the rows are
 *		narrow (a block holds four or more: a wider row streams well on its
 *		own), the job's training rows (all ranks') pass
 *		DML_SHUFFLE_AUTO_BYTES (beyond the caches, where reading a random
 *		row at a time costs several times streaming them) and the epochs
 *		are at least three (the layout costs about two epochs' random
 *		reads, and each epoch then saves about one).  A spill streams its
 *		own order, a full batch needs none, and a resident worker
 *		(dml_tune) keeps its rows in loaded order for the next trial.
 *		With tiles (train_iterative) a block is a multiple of TILE_ROWS
 *		rows, so that a step's vectors of rows are whole.
 */
static int
train_block_rows(const Dataset *ds, const WorkerSpec *spec, int64_t all_rows, int b,
				 int epochs, bool full, bool tiles)
{
	size_t		row = sizeof(float) * ((size_t) ds->d + 1);
	int			c = (int) ((DML_SHUFFLE_BLOCK_BYTES + row - 1) / row);

	if (spec->shuffle == DML_SHUFFLE_ROWS || ds->spill || full || spec->resident ||
		ds->Xd != NULL)
		return 0;
	/* tiles: whole vectors of 16 rows a block (48 rows, not 49, at 20 features) */
	if (tiles && c >= TILE_ROWS)
		c -= c % TILE_ROWS;
	if (c > b)
		c = b;
	if (c < 2)
		return 0;
	if (spec->shuffle == DML_SHUFFLE_BLOCKS)
		return c;
	if (c < 4 || epochs < 3 || (double) all_rows * row < DML_SHUFFLE_AUTO_BYTES)
		return 0;
	return c;
}

/*
 * train_layout_blocks
 *		The block shuffle's layout: the rank's training rows moved to the
 *		front of ds in a seeded random order (Fisher-Yates on the rows
 *		themselves), its validation rows after them in their order, and
 *		train_idx and val_idx made the identity on them.  In place: only
 *		the validation rows are held aside meanwhile.
 *
 *		With the rows in random order, a block of consecutive rows is a
 *		uniform random sample of the rank's training rows, so an epoch
 *		that takes blocks in a shuffled order draws minibatches just as
 *		the row shuffle does: the first epoch's partition into minibatches
 *		is a uniformly random one, and every epoch visits every row once.
 *		What differs is only that the rows of one block share a minibatch
 *		in every epoch.
 */
static void
train_layout_blocks(Dataset *ds, int *train_idx, int ntrain, int *val_idx, int nval,
					uint64_t seed)
{
	int			d = ds->d;
	size_t		rb = sizeof(float) * (size_t) d;
	float	   *vx = malloc(rb * (size_t) (nval ? nval : 1));
	float	   *vy = malloc(sizeof(float) * (size_t) (nval ? nval : 1));
	float	   *tmp = malloc(rb ? rb : 1);
	int			js[64];
	DmlRng		rng;
	/* the byte rows (prepare_data's), if any, move with the rows */
	uint8_t    *X8 = ds->X8,
			   *v8 = X8 ? malloc((size_t) d * (nval ? nval : 1)) : NULL;

	if (!vx || !vy || !tmp || (X8 && !v8))
		worker_fail("out of memory");
	for (int k = 0; k < nval; k++)
	{
		memcpy(vx + (size_t) k * d, ds->X + (size_t) val_idx[k] * d, rb);
		vy[k] = ds->y[val_idx[k]];
		if (X8)
			memcpy(v8 + (size_t) k * d, X8 + (size_t) val_idx[k] * d, d);
	}
	/* train_idx ascends, so a row moves only towards the front */
	for (int k = 0; k < ntrain; k++)
		if (train_idx[k] != k)
		{
			memcpy(ds->X + (size_t) k * d, ds->X + (size_t) train_idx[k] * d, rb);
			ds->y[k] = ds->y[train_idx[k]];
			if (X8)
				memcpy(X8 + (size_t) k * d, X8 + (size_t) train_idx[k] * d, d);
		}
	/* Fisher-Yates, 64 swaps at a time: their random rows asked for first */
	dml_rng_seed(&rng, (seed ^ 0xB10C5EEDull) * 1000003u + (uint64_t) worker_rank);
	for (int hi = ntrain - 1; hi > 0; hi -= 64)
	{
		int			cnt = hi < 64 ? hi : 64;

		for (int t = 0; t < cnt; t++)
		{
			const float *r;

			js[t] = (int) (dml_rng_next(&rng) % (uint64_t) (hi - t + 1));
			r = ds->X + (size_t) js[t] * d;
			__builtin_prefetch(r, 1, 1);
			__builtin_prefetch(r + d - 1, 1, 1);
			/* and its label (and byte row), whose misses were the pass's slowest loads */
			__builtin_prefetch(ds->y + js[t], 1, 1);
			if (X8)
			{
				__builtin_prefetch(X8 + (size_t) js[t] * d, 1, 1);
				__builtin_prefetch(X8 + (size_t) js[t] * d + d - 1, 1, 1);
			}
		}
		for (int t = 0; t < cnt; t++)
		{
			int			i = hi - t,
						j = js[t];
			float		yt;

			if (i == j)
				continue;
			memcpy(tmp, ds->X + (size_t) i * d, rb);
			memcpy(ds->X + (size_t) i * d, ds->X + (size_t) j * d, rb);
			memcpy(ds->X + (size_t) j * d, tmp, rb);
			for (int c = 0; X8 && c < d; c++)
			{
				uint8_t		u = X8[(size_t) i * d + c];

				X8[(size_t) i * d + c] = X8[(size_t) j * d + c];
				X8[(size_t) j * d + c] = u;
			}
			yt = ds->y[i];
			ds->y[i] = ds->y[j];
			ds->y[j] = yt;
		}
	}
	if (nval > 0)
	{
		memcpy(ds->X + (size_t) ntrain * d, vx, rb * (size_t) nval);
		if (X8)
			memcpy(X8 + (size_t) ntrain * d, v8, (size_t) d * nval);
		memcpy(ds->y + ntrain, vy, sizeof(float) * (size_t) nval);
	}
	for (int k = 0; k < ntrain; k++)
	{
		train_idx[k] = k;
		ds->val[k] = 0;
	}
	for (int k = 0; k < nval; k++)
	{
		val_idx[k] = ntrain + k;
		ds->val[ntrain + k] = 1;
	}
	free(vx);
	free(vy);
	free(tmp);
	free(v8);
}

/*
 * epoch_order
 *		Epoch's order of the rank's n training rows: the row shuffle into
 *		idx (c = 0), or blocks of c consecutive rows (the last one shorter)
 *		in an order that each epoch shuffles from the last, as
 *		train_shuffle does the rows, into bo.  The block order's rows are
 *		written into idx as well only where a step reads them by index
 *		(with_idx): the gather takes them a block at a time.
 */
static void
epoch_order(DmlRng *rng, int *idx, int n, int c, int *blocks, uint64_t seed, int epoch,
			DmlBlockOrder *bo, bool with_idx)
{
	int			nb,
				k = 0;

	if (c == 0)
	{
		train_shuffle(rng, idx, n, seed, epoch);
		return;
	}
	nb = (n + c - 1) / c;
	train_shuffle(rng, blocks, nb, seed, epoch);
	dml_block_order_init(bo, blocks, nb, c, n);
	for (int q = 0; q < nb && with_idx; q++)
	{
		int			lo = blocks[q] * c,
					hi = lo + c < n ? lo + c : n;

		for (int r = lo; r < hi; r++)
			idx[k++] = r;
	}
}

/*
 * Softmax's rows, read in place by every step, as the bytes prepare_data
 * found them to be (an image's pixels, small counts or flags): a step then
 * reads a quarter of the bytes from memory, which is what bounds its
 * forward pass, and the kernels rebuild each float32 input bit for bit, so
 * the training is the same.  An MLP's steps gather their minibatch
 * (gathers: the row shuffle) from the bytes the same way
 * (dml_rows8_gather).  Where one rank's rows are not bytes, every rank
 * reads float32 rows.
 */
static void
rows8_attach(Dataset *ds, const DmlModel *m, const DmlWork *work, int b, bool gathers)
{
	DmlRows8   *r8 = NULL;
	/* every rank or none (a collective), so that the metrics say what all did */
	double		all = ds->X8 != NULL &&
		(dml_net_rows_applies(&m->net, work, b) ||
		 (m->net.nlayers > 1 && gathers && dml_rows8_gather_applies())) &&
		(r8 = malloc(sizeof(DmlRows8))) != NULL;

	ds->rows8 = NULL;
	comm_allreduce_double(&all, 1);
	if (all < worker_world)
	{
		free(r8);
		return;
	}
	r8->X8 = ds->X8;
	r8->mean = m->in_mean;
	r8->scale = m->in_scale;
	r8->div = ds->div8;
	r8->rdiv = 1.0f / ds->div8;
	ds->rows8 = r8;
}

static void
rows8_detach(Dataset *ds)
{
	free(ds->rows8);
	ds->rows8 = NULL;
}

/*
 * balance (sync.c): this rank's rows of step s, from pos of the epoch's
 * order, into the step's region par (of the segment), after the rows of
 * the ranks before it
 */
static void
balance_gather(const Dataset *ds, const StepPlan *plan, const DmlBlockOrder *bo, int block_rows,
			   const int *train_idx, int pos, int s, const Sync *sy, int par)
{
	int			B = step_rows_at(plan, worker_rank, s),
				off = 0;
	float	   *X,
			   *y;

	for (int r = 0; r < worker_rank; r++)
		off += step_rows_at(plan, r, s);
	X = sy->bal_X[par] + (size_t) off * ds->d;
	y = sy->bal_y[par] + off;
	if (B > 0 && block_rows > 0)
		dml_gather_blocks(ds->X, ds->y, ds->d, bo, pos, B, X, y);
	else if (B > 0)
		gather(ds, train_idx + pos, B, (int) plan->rows[worker_rank] - pos, X, y);
}

/*
 * train_iterative
 *		SGD, momentum, Nesterov or Adam over minibatches, synchronized by
 *		the job's sync mode (sync.c), with validation, early stopping,
 *		progress and checkpoints.
 *
 *		Every mode but async runs the same steps per epoch on every rank.
 *		In async a rank steps through its rows (wrapping around) until the
 *		servers have received an epoch's worth of rows from all ranks, so a
 *		fast rank does more of the epoch than a slow one.
 */
void
train_iterative(Dataset *ds, const WorkerSpec *spec, TrainResult *res)
{
	DmlModel   *m = &res->model;
	DmlNet	   *net = &m->net;
	size_t		np = net->nparams;
	int		   *train_idx,
			   *val_idx;
	int			ntrain,
				nval;
	StepPlan	plan;
	int			b;
	DmlWork		work;
	float	   *grads = dml_malloc_lines(np, sizeof(float));
	float	   *Xb,
			   *yb;
	DmlOptimState	opt;
	EpochLog	log;
	DmlRng		rng;
	Sync		sy;
	int			first_epoch = 1;
	Straggler	straggler;
	int64_t		all_rows = 0;
	int			epochs = spec->epochs;
	double		start;
	/* this training's products on AMX: the count's rise (a resident job trains again) */
	long		amx_before = dml_amx_products();
	/* lockstep modes check the budget every step; the others between epochs */
	bool		step_budget = spec->max_seconds > 0 &&
		(spec->sync == DML_SYNC_ALLREDUCE || spec->sync == DML_SYNC_AVERAGE ||
		 spec->sync == DML_SYNC_GOSSIP);
	/* a spilled slice: each epoch's rows from the stream, a step in chunks */
	StreamEpoch *se = NULL;
	int			chunk;
	bool		full;
	/* the block shuffle (options "shuffle"): rows a block, the blocks' order */
	int			block_rows;
	int		   *blocks = NULL;
	DmlBlockOrder bo;
	bool		with_idx;
	/*
	 * tiles: the block shuffle's blocks laid out a feature at a time for
	 * a one-output net of narrow rows, each step's rows read where they
	 * lie as runs of their blocks (kernels.h's DmlTileRun).  Its steps
	 * copy no rows, and a vector of 16 rows of a feature is one
	 * multiply-add where a row-major row needs a transposing sum
	 * (bench/SPEED-NOTES.md).  Not with balance (sync.c), whose steps
	 * gather rows for every rank.  The rows go back to rows after the
	 * epochs, for the evaluation of the training rows and what follows.
	 */
	bool		tiles;
	DmlTileRun *runs = NULL;
	double		layout_seconds = 0;
	/* balance (sync.c): every rank's rows of the step, this step */
	int		   *held = NULL;

	train_split_rows(ds, &train_idx, &ntrain, &val_idx, &nval);
	train_plan_steps(&plan, ntrain, spec->batch_size);
	b = train_step_rows(&plan, worker_rank);
	chunk = b;
	if (ds->spill)
	{
		se = stream_epoch_new(ds->spill, spec->window);
		if (chunk > stream_block_rows(ds->spill))
			chunk = stream_block_rows(ds->spill);
	}
	/* full batch: the gradient in stored order, the same streamed or not */
	full = spec->sync != DML_SYNC_ASYNC && plan.steps == 1 && b >= ntrain && ntrain > 0;
	if (full)
		chunk = EVAL_ROWS;
	if (dml_work_alloc(&work, net, chunk > EVAL_ROWS ? chunk : EVAL_ROWS) != DML_OK)
		worker_fail("out of memory for activations of %d rows", chunk);
	work.class_weight = ds->class_weight;
	Xb = dml_malloc_lines((size_t) (chunk ? chunk : 1) * ds->d, sizeof(float));
	yb = malloc(sizeof(float) * (chunk ? chunk : 1));
	if (!grads || !Xb || !yb)
		worker_fail("out of memory");
	for (int r = 0; r < worker_world; r++)
		all_rows += plan.rows[r];
	/* a budget of optimizer steps, not a data-size-blind count of epochs */
	if (spec->max_steps > 0 && (int64_t) epochs * plan.steps > spec->max_steps)
		epochs = (int) ((spec->max_steps + plan.steps - 1) / plan.steps);
	tiles = !spec->balance && dml_net_tile_applies(net, &work, b);
	block_rows = train_block_rows(ds, spec, all_rows, b, epochs, full, tiles);
	tiles = tiles && block_rows > 0;
	if (block_rows > 0)
	{
		blocks = malloc(sizeof(int) * (size_t) (ntrain / block_rows + 1));
		if (blocks == NULL)
			worker_fail("out of memory");
		for (int q = 0; q <= ntrain / block_rows; q++)
			blocks[q] = q;
		layout_seconds = dml_clock_seconds();
		train_layout_blocks(ds, train_idx, ntrain, val_idx, nval, (uint64_t) spec->seed);
		if (tiles)
		{
			runs = malloc(sizeof(DmlTileRun) * (size_t) (b / block_rows + 3));
			if (runs == NULL || !dml_tile_blocks(ds->X, ds->d, block_rows, ntrain, true))
				worker_fail("out of memory");
		}
		layout_seconds = dml_clock_seconds() - layout_seconds;
		res->shuffle_block = block_rows;
	}
	/* only softmax's rows read in place want the block order's row indices */
	with_idx = block_rows > 0 && dml_net_rows_applies(net, &work, b);
	rows8_attach(ds, m, &work, b, !full && block_rows == 0);
	res->byte_rows = ds->rows8 ? (int) ds->div8 : 0;
	straggler_init(&straggler, spec);

	dml_net_init(net, spec->seed);
	opt.kind = (DmlOptimizer) spec->optimizer;
	opt.n = np;
	opt.s1 = dml_calloc_lines(np, sizeof(float));
	opt.s2 = dml_calloc_lines(np, sizeof(float));
	opt.t = 0;
	if (spec->resume)
		first_epoch = train_resume(spec, m, &opt) + 1;
	/* in memory each epoch shuffles the last one's order; a stream's orders stand alone */
	for (int e = 1; e < first_epoch && se == NULL; e++)
		epoch_order(&rng, train_idx, ntrain, block_rows, blocks, spec->seed, e, &bo, with_idx);
	sync_init(&sy, spec, np);
	sync_start(&sy, net->params, &opt, all_rows);
	{
		/*
		 * A synchronous all-reduce's gathered steps may share each step's
		 * rows by the ranks' speed (sync.c, "Balance"); sync_bind says
		 * whether they do (one host, a sharded step).  Every rank alike.
		 */
		double		all = spec->balance && spec->sync == DML_SYNC_ALLREDUCE &&
			worker_world > 1 && !full && se == NULL && !dml_net_rows_applies(net, &work, b);
		/* a step's rows, all ranks': the first step's, the most */
		int			rows = (int) train_step_total(&plan, 0);

		comm_allreduce_double(&all, 1);
		if (all == worker_world)
			sync_balance_want(&sy, rows, ds->d);
		sync_bind(&sy, spec, &net->params, &grads, &opt);
		if (sync_wants_ready(&sy))
		{
			/* the layers' parameters, which the backward pass finishes last first */
			size_t		from[DML_MAX_LAYERS];

			for (int l = 0; l < net->nlayers; l++)
				from[l] = dml_net_weight_offset(net, l);
			sync_ready_layers(&sy, from, net->nlayers);
		}
		if (sy.bal_X[0] != NULL)
		{
			/* a rank computes up to the whole step's rows */
			dml_work_free(&work);
			if (dml_work_alloc(&work, net, rows > EVAL_ROWS ? rows : EVAL_ROWS) != DML_OK)
				worker_fail("out of memory for activations of %d rows", rows);
			work.class_weight = ds->class_weight;
			held = malloc(sizeof(int) * worker_world);
			if (held == NULL)
				worker_fail("out of memory");
		}
	}
	train_log_init(&log, net, spec, nval);
	/* the training's time counts the block shuffle's layout */
	log.train_time += layout_seconds;
	start = dml_clock_seconds();

	for (int epoch = first_epoch; epoch <= epochs && !res->out_of_time; epoch++)
	{
		double		t0 = dml_clock_seconds();
		double		bytes0 = comm_job_bytes();
		float		lr = lr_at_epoch(spec->schedule, (float) spec->learning_rate, epoch - 1,
									 epochs, spec->step_size, (float) spec->gamma) * log.lr_scale;
		double		sums[2] = {0, 0};
		bool		checkpoint,
					stop;
		bool		async = sy.mode == DML_SYNC_ASYNC;
		int			pos = 0;
		float	   *own = net->params;

		maybe_inject_fault(spec, epoch, NULL);
		if (se && !full)
			stream_epoch_begin(se, spec->seed, epoch);
		else if (!se)
			epoch_order(&rng, train_idx, ntrain, block_rows, blocks, spec->seed, epoch, &bo,
						with_idx);

		for (int s = 0; async ? !sy.epoch_done : s < plan.steps; s++)
		{
			int			B = ntrain - pos < b ? ntrain - pos : b;
			int64_t		total = async ? B : train_step_total(&plan, s);

			if (B < 0)
				B = 0;
			if (held != NULL)
			{
				/*
				 * balance: its share of every rank's rows of the step, then
				 * its own rows of the next step into the other region
				 * (sync.c); an epoch's first step puts its rows in first
				 */
				int			par = s & 1,
							lo,
							n;
				double		tb;

				if (s == 0)
				{
					balance_gather(ds, &plan, &bo, block_rows, train_idx, 0, 0, &sy, 0);
					sync_balance_fence(&sy);
				}
				for (int r = 0; r < worker_world; r++)
					held[r] = step_rows_at(&plan, r, s);
				n = sync_balance_split(&sy, held, &lo);
				tb = dml_clock_seconds();
				if (n > 0)
					sums[0] += dml_net_gradient(net, &work, grads,
												sy.bal_X[par] + (size_t) lo * ds->d,
												sy.bal_y[par] + lo, n,
												sync_grad_scale(&sy, n, total));
				else
					memset(grads, 0, sizeof(float) * np);
				sums[1] += n;
				/* (a straggler's delay is part of its time: the cut moves rows off it) */
				straggler_step(&straggler);
				sync_balance_took(&sy, dml_clock_seconds() - tb, n);
				if (s + 1 < plan.steps)
					balance_gather(ds, &plan, &bo, block_rows, train_idx, pos + B, s + 1, &sy,
								   par ^ 1);
			}
			else if (B > 0 && full)
			{
				sums[0] += full_gradient(ds, net, &work, grads, Xb, yb,
										 sync_grad_scale(&sy, B, total));
				sums[1] += B;
			}
			else if (B > 0 && se)
			{
				float		scale = sync_grad_scale(&sy, B, total);

				for (int done = 0; done < B;)
				{
					int			c = B - done < chunk ? B - done : chunk;

					if (stream_epoch_take(se, c, Xb, yb) != c)
						worker_fail("the spill gave fewer rows than its blocks hold");
					sums[0] += done == 0 ?
						dml_net_gradient(net, &work, grads, Xb, yb, c, scale) :
						dml_net_forward_backward_scaled(net, &work, grads, Xb, yb, c, scale);
					done += c;
				}
				sums[1] += B;
			}
			else if (B > 0 && dml_net_rows_applies(net, &work, B))
			{
				/* softmax: the rows read in place, only their labels gathered */
				const int  *ix = train_idx + pos;

				gather_targets(ds, ix, B, yb);
				sums[0] += dml_net_gradient_rows(net, &work, grads, ds->X, ds->rows8, ix, B,
												 ntrain - pos,
												 yb, sync_grad_scale(&sy, B, total));
				sums[1] += B;
			}
			else if (B > 0 && tiles)
			{
				int			nr = dml_block_runs(ds->X, ds->y, ds->d, &bo, pos, B, runs, yb);

				sums[0] += dml_net_gradient_tiles(net, &work, grads, runs, nr, yb, B,
												  sync_grad_scale(&sy, B, total));
				sums[1] += B;
			}
			else if (B > 0)
			{
				if (block_rows > 0)
					dml_gather_blocks(ds->X, ds->y, ds->d, &bo, pos, B, Xb, yb);
				else
					gather(ds, train_idx + pos, B, ntrain - pos, Xb, yb);
				/* the synchronization may step each layer as its gradient is done */
				if (sync_wants_ready(&sy))
				{
					work.ready = sync_ready;
					work.ready_arg = &sy;
				}
				sums[0] += dml_net_gradient(net, &work, grads, Xb, yb, B,
											sync_grad_scale(&sy, B, total));
				work.ready = NULL;
				sums[1] += B;
			}
			else
				memset(grads, 0, sizeof(float) * np);
			pos += B;
			if (async && pos >= ntrain)
			{
				pos = 0;
				if (se)
					stream_epoch_begin(se, spec->seed, epoch);	/* around again */
			}
			if (held == NULL)
				straggler_step(&straggler);
			if (step_budget && s < plan.steps - 1 && train_out_of_time(spec, start))
				train_note_out_of_time(spec, res, epoch, s + 1);
			sync_step(&sy, spec, net->params, grads, &opt, lr, B, total,
					  !async && (s == plan.steps - 1 || res->out_of_time));
			train_report_step(epoch, s + 1 < plan.steps ? s + 1 : plan.steps, plan.steps);
			if (res->out_of_time)
				break;
		}
		{
			/* gossip evaluates the replicas' average */
			const float *eval = sync_epoch_end(&sy, net->params, &log.staleness);

			comm_allreduce_double(sums, 2);
			net->params = (float *) eval;
			stop = train_log_epoch(&log, res, spec, ds, &work, val_idx, nval, epoch, sums, t0,
								   bytes0, &checkpoint);
			net->params = own;
		}
		if (!res->out_of_time && epoch < spec->epochs && !stop &&
			train_out_of_time(spec, start))
			train_note_out_of_time(spec, res, epoch, async ? 0 : plan.steps);
		if (checkpoint && !res->out_of_time)
		{
			sync_gather_state(&sy, &opt);
			train_send_checkpoint(m, &opt, epoch);
		}
		if (stop)
			break;
	}
	sync_finish(&sy, net->params);
	sync_unbind(&sy, &net->params, &grads, &opt);
	res->amx = dml_amx_products() > amx_before;
	if (tiles && !dml_tile_blocks(ds->X, ds->d, block_rows, ntrain, false))
		worker_fail("out of memory");
	train_log_finish(&log, res);
	sync_facts(res, &sy);
	sync_free(&sy);
	stream_epoch_free(se);
	rows8_detach(ds);
	dml_work_free(&work);
	free(grads);
	free(Xb);
	free(yb);
	free(opt.s1);
	free(opt.s2);
	free(blocks);
	free(runs);
	free(held);
	free(train_idx);
	free(val_idx);
	free(plan.rows);
}

/*
 * final_result
 *		What the training did, over every rank: the figures in out, and in
 *		met (initialized here; the caller frees it) the metrics of the model
 *		on the validation rows, else the training rows.
 */
void
final_result(Dataset *ds, const WorkerSpec *spec, const DmlModel *m, const TrainResult *res,
			 DmlResult *out, DmlMetrics *met)
{
	int		   *train_idx,
			   *val_idx;
	int			ntrain,
				nval;
	double		counts[4];
	DmlWork		work;

	if (dml_metrics_init(met, m->net.loss, spec->classification ? spec->nclasses : 1) != DML_OK)
		worker_fail("out of memory");
	train_split_rows(ds, &train_idx, &ntrain, &val_idx, &nval);
	counts[0] = ntrain;
	counts[1] = nval;
	/*
	 * The last epoch's validation evaluated these very parameters on these
	 * rows (no best epoch restored, no replicas averaged since): its
	 * figures are the model's, and a second pass over the validation rows
	 * would only repeat them.  Every rank must agree (train_evaluate is a
	 * collective).
	 */
	counts[2] = res->eval_params != NULL && res->eval_nvalues == met->nvalues &&
		memcmp(res->eval_params, m->net.params, sizeof(float) * m->net.nparams) == 0;
	counts[3] = (double) res->chunks_taken;
	comm_allreduce_double(counts, 4);
	memset(out, 0, sizeof(*out));
	out->on_validation = counts[1] > 0;
	if (dml_work_alloc(&work, &m->net, EVAL_ROWS) != DML_OK)
		worker_fail("out of memory");
	if (out->on_validation && counts[2] == worker_world)
		memcpy(met->v, res->eval_values, sizeof(double) * met->nvalues);
	else
		train_evaluate(m, &work, ds, out->on_validation ? val_idx : train_idx,
					   out->on_validation ? nval : ntrain, met);
	out->epochs = res->epochs_run;
	out->workers = worker_world;
	out->servers = res->servers;
	out->load_block = strcmp(ds->load_path, "block") == 0;
	out->has_sync = res->has_sync;
	out->shuffle_block = res->shuffle_block;
	out->byte_rows = res->byte_rows;
	out->amx = res->amx;
	out->allreduce = res->allreduce;
	out->balance = res->balance;
	out->balance_steps = (double) res->balance_steps;
	out->balance_rows = (double) res->balance_rows;
	out->chunks_taken = counts[3];
	out->newton = res->newton;
	out->newton_sampled = res->newton_sampled;
	out->newton_full = res->newton_full;
	out->newton_again = res->newton_again;
	out->newton_panels = res->newton_panels;
	out->newton_precise = res->newton_precise;
	out->out_of_time = res->out_of_time;
	out->stopped = res->out_of_time ? DML_STOP_MAX_TIME : res->stopped;
	out->best_epoch = res->best_epoch > 0 ? res->best_epoch : res->epochs_run;
	out->metrics_loss = met->loss;
	out->metrics_k = met->K;
	out->nmetrics = (uint32_t) met->nvalues;
	out->train_rows = counts[0];
	out->validation_rows = counts[1];
	out->final_loss = isfinite(res->final_loss) ? res->final_loss : 0.0;
	out->rows_per_second = res->rows_per_second;
	out->train_seconds = res->train_seconds;
	out->load_seconds = ds->load_seconds;
	out->weight_decay = spec->weight_decay;
	out->bytes_sent = comm_job_bytes();
	out->consensus = res->has_sync ? res->consensus : NAN;
	{
		/* the memory the ranks held, and what they spilled */
		double		sums[6] = {ds->spill ? 1 : 0, ds->spill ? (double) stream_bytes(ds->spill) : 0, 0, 0,
		ds->spill_restart == SPILL_REUSED, ds->spill_restart > SPILL_REUSED};

		if (ds->spill)
			stream_read_figures(ds->spill, &sums[2], &sums[3]);
		comm_allreduce_double(sums, 6);
		out->spill_reused = (int32_t) sums[4];
		out->spill_recreated = (int32_t) sums[5];
		out->streamed = (int32_t) sums[0];
		out->spill_bytes = sums[1];
		out->spill_read_bytes = sums[2];
		out->spill_read_seconds = sums[3];
		out->memory = (double) spec->memory;
		out->window = spec->window;
		out->spill_format = ds->wide ? DML_SPILL_FLOAT32 : spec->spill_format;
	}
	dml_work_free(&work);
	free(train_idx);
	free(val_idx);
}
