/*-------------------------------------------------------------------------
 *
 * lbfgs.c
 *	  Data-parallel L-BFGS (optimizer => 'lbfgs'): each evaluation
 *	  all-reduces the full-batch loss and gradient over every rank's
 *	  training rows, rank 0 alone keeps the curvature history and runs the
 *	  two-loop recursion (kernels/lbfgs.c), and its direction and verdicts
 *	  are broadcast, so every replica takes the same steps even where an
 *	  all-reduce might round differently on different ranks.
 *
 * The objective is the mean loss plus weight_decay / 2 times the squared
 * weights (not the biases), the penalty Newton's method and the gradient
 * optimizers apply.  Each iteration reports progress like an epoch
 * (train_log_epoch: validation, patience).  No checkpoint is taken: a
 * restarted job starts again from the same initial parameters and gives
 * the same model.
 *
 * A spilled slice (stream.c) is read block by block at each evaluation,
 * its training rows gathered into the same chunks of EVAL_ROWS rows in the
 * same order as in memory, so the sums, and the model, are the same.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "worker.h"

typedef struct Objective
{
	DmlNet	   *net;
	DmlWork		work;
	const float *X;				/* (nt, d) training rows of this rank */
	const float *y;				/* (nt) */
	int			nt;
	double		n;				/* training rows of every rank */
	double		lambda;
	float	   *fgrad;			/* (np) */
	double	   *buf;			/* (np + 1) gradient and loss sum, reduced */
	double		data_loss;		/* mean loss at the last point evaluated */
	/* progress */
	EpochLog	log;
	TrainResult *res;
	const WorkerSpec *spec;
	Dataset    *ds;
	const int  *val_idx;
	int			nval;
	double		t_iter;			/* when the iteration began */
	double		start;			/* when training began: max_seconds counts from here */
	double		bytes_iter;
} Objective;

typedef struct LbfgsScan
{
	Objective  *ob;
	float	   *Xb;				/* (EVAL_ROWS, d) */
	float	   *yb;
	int			B;
	double		loss;
} LbfgsScan;

/* a spilled block's training rows into the chunks of the full gradient */
static void
lbfgs_block(const Dataset *v, void *arg)
{
	LbfgsScan  *ls = arg;

	for (int64_t i = 0; i < v->n; i++)
	{
		if (v->val[i])
			continue;
		memcpy(ls->Xb + (size_t) ls->B * v->d, v->X + (size_t) i * v->d, sizeof(float) * v->d);
		ls->yb[ls->B++] = v->y[i];
		if (ls->B == EVAL_ROWS)
		{
			ls->loss += dml_net_forward_backward(ls->ob->net, &ls->ob->work, ls->ob->fgrad,
												 ls->Xb, ls->yb, ls->B);
			ls->B = 0;
		}
	}
}

/* the loss sum and gradient (fgrad) over a spilled slice's training rows */
static double
stream_gradient(Objective *ob)
{
	LbfgsScan	ls = {ob, malloc(sizeof(float) * EVAL_ROWS * ob->ds->d),
	malloc(sizeof(float) * EVAL_ROWS), 0, 0};

	if (!ls.Xb || !ls.yb)
		worker_fail("out of memory");
	memset(ob->fgrad, 0, sizeof(float) * ob->net->nparams);
	stream_scan(ob->ds->spill, 0, lbfgs_block, &ls);
	if (ls.B > 0)
		ls.loss += dml_net_forward_backward(ob->net, &ob->work, ob->fgrad, ls.Xb, ls.yb, ls.B);
	free(ls.Xb);
	free(ls.yb);
	return ls.loss;
}

/* f(x) and g (np) at x (np), rank 0's figures on every rank */
static double
objective(void *arg, const double *x, double *g)
{
	Objective  *ob = arg;
	DmlNet	   *net = ob->net;
	size_t		np = net->nparams;

	for (size_t i = 0; i < np; i++)
		net->params[i] = (float) x[i];
	ob->buf[np] = ob->ds->spill ? stream_gradient(ob) :
		dml_net_full_gradient(net, &ob->work, ob->fgrad, ob->X, ob->y, ob->nt, EVAL_ROWS);
	for (size_t i = 0; i < np; i++)
		ob->buf[i] = ob->fgrad[i];
	comm_allreduce_double(ob->buf, np + 1);
	comm_bcast(ob->buf, sizeof(double) * (np + 1), 0);
	ob->data_loss = ob->buf[np] / ob->n;
	for (size_t i = 0; i < np; i++)
		g[i] = ob->buf[i] / ob->n;
	return ob->data_loss + dml_net_penalty(net, ob->lambda, x, g);
}

/* rank 0's direction and verdicts, everyone's */
static void
share(void *arg, double *buf, size_t n)
{
	comm_bcast(buf, sizeof(double) * n, 0);
}

/* after an iteration: progress, validation and patience, as for an epoch */
static DmlStopReason
iterate(void *arg, int iter, const double *x)
{
	Objective  *ob = arg;
	double		sums[2] = {ob->data_loss * ob->n, ob->n};
	bool		checkpoint;
	DmlStopReason stop = DML_STOP_NONE;

	for (size_t i = 0; i < ob->net->nparams; i++)
		ob->net->params[i] = (float) x[i];
	maybe_inject_fault(ob->spec, iter, NULL);
	if (train_log_epoch(&ob->log, ob->res, ob->spec, ob->ds, &ob->work, ob->val_idx, ob->nval,
						iter, sums, ob->t_iter, ob->bytes_iter, &checkpoint))
		stop = ob->res->stopped;
	else if (ob->spec->max_seconds > 0 && train_out_of_time(ob->spec, ob->start))
	{
		train_note_out_of_time(ob->spec, ob->res, iter, 0);
		stop = DML_STOP_MAX_TIME;
	}
	ob->t_iter = dml_clock_seconds();
	ob->bytes_iter = comm_job_bytes();
	return stop;
}

/*
 * train_lbfgs
 *		Fit the model by L-BFGS over the full training set of every rank.
 */
void
train_lbfgs(Dataset *ds, const WorkerSpec *spec, TrainResult *res)
{
	DmlModel   *m = &res->model;
	DmlNet	   *net = &m->net;
	size_t		np = net->nparams;
	int		   *train_idx;
	int			ntrain;
	Objective	ob;
	DmlLbfgs	lb;
	DmlLbfgsProblem pb;
	DmlLbfgsResult out;
	float	   *Xt = NULL,
			   *yt = NULL;
	double	   *x = malloc(sizeof(double) * np);
	double		t_start = dml_clock_seconds();

	memset(&ob, 0, sizeof(ob));
	train_split_rows(ds, &train_idx, &ntrain, (int **) &ob.val_idx, &ob.nval);
	ob.net = net;
	ob.nt = ntrain;
	if (ds->spill)
		;						/* each evaluation reads the blocks */
	else if (ob.nval == 0)
	{
		ob.X = ds->X;
		ob.y = ds->y;
	}
	else
	{
		/* the training rows, contiguous: each evaluation streams them once */
		Xt = malloc(sizeof(float) * (size_t) (ntrain ? ntrain : 1) * ds->d);
		yt = malloc(sizeof(float) * (ntrain ? ntrain : 1));
		if (!Xt || !yt)
			worker_fail("out of memory for %d training rows", ntrain);
		for (int i = 0; i < ntrain; i++)
		{
			memcpy(Xt + (size_t) i * ds->d, ds->X + (size_t) train_idx[i] * ds->d,
				   sizeof(float) * ds->d);
			yt[i] = ds->y[train_idx[i]];
		}
		ob.X = Xt;
		ob.y = yt;
	}
	ob.n = ntrain;
	comm_allreduce_double(&ob.n, 1);
	/* elastic net: l1_ratio of weight_decay on |W|_1 (OWL-QN), the rest on |W|^2 / 2 */
	ob.lambda = spec->weight_decay * (1 - spec->l1_ratio);
	ob.fgrad = malloc(sizeof(float) * np);
	ob.buf = malloc(sizeof(double) * (np + 1));
	ob.res = res;
	ob.spec = spec;
	ob.ds = ds;
	if (!x || !ob.fgrad || !ob.buf || dml_work_alloc(&ob.work, net, EVAL_ROWS) != DML_OK)
		worker_fail("out of memory");
	ob.work.class_weight = ds->class_weight;
	memset(&lb, 0, sizeof(lb));
	if (worker_rank == 0 && dml_lbfgs_alloc(&lb, np, DML_LBFGS_DEFAULT_M) != DML_OK)
		worker_fail("out of memory for the L-BFGS history (%zu parameters)", np);

	/* linear models start at zero (a convex problem); networks at random */
	if (net->nlayers > 1)
		dml_net_init(net, spec->seed);
	else
		memset(net->params, 0, sizeof(float) * np);
	for (size_t i = 0; i < np; i++)
		x[i] = net->params[i];
	train_log_init(&ob.log, net, spec, ob.nval);

	memset(&pb, 0, sizeof(pb));
	pb.n = np;
	pb.objective = objective;
	pb.share = share;
	pb.iterate = iterate;
	pb.arg = &ob;
	pb.owner = worker_rank == 0;
	pb.max_iter = spec->epochs;
	pb.gtol = spec->tolerance;
	if (spec->l1_ratio > 0)
	{
		unsigned char *mask = malloc(np);

		if (!mask)
			worker_fail("out of memory");
		dml_net_weight_mask(net, mask);
		pb.l1 = spec->weight_decay * spec->l1_ratio;
		pb.l1_mask = mask;
	}
	ob.t_iter = ob.start = dml_clock_seconds();
	ob.bytes_iter = comm_job_bytes();
	if (dml_lbfgs_minimize(&pb, &lb, x, &out) != DML_OK)
		worker_fail("out of memory");
	free((void *) pb.l1_mask);
	res->stopped = out.reason;

	for (size_t i = 0; i < np; i++)
		net->params[i] = (float) x[i];
	train_log_finish(&ob.log, res);	/* patience: the best iteration's weights */
	if (out.iterations == 0)
	{
		/* the starting point already met the tolerance */
		res->final_loss = ob.data_loss;
		if (net->loss == DML_LOSS_MSE)
			res->final_loss *= (double) m->out_scale[0] * m->out_scale[0];
	}
	res->train_seconds = dml_clock_seconds() - t_start;
	res->rows_per_second = res->train_seconds > 0 ?
		ob.n * (out.iterations > 0 ? out.iterations : 1) / res->train_seconds : 0;
	if (worker_rank == 0)
		dml_lbfgs_free(&lb);
	dml_work_free(&ob.work);
	free(ob.fgrad);
	free(ob.buf);
	free(Xt);
	free(yt);
	free(x);
	free(train_idx);
	free((int *) ob.val_idx);
}
