/*-------------------------------------------------------------------------
 *
 * fit.c
 *	  Small tables trained inside the server: the rows are read with SPI
 *	  under the caller's privileges, standardized, and fitted full-batch by
 *	  L-BFGS (kernels/lbfgs.c) in the backend.
 *
 * Starting mpirun and its ranks costs 0.1-0.4 s before a row is read; on a
 * table of a few thousand rows the whole fit takes milliseconds.  So an
 * L-BFGS job whose data fit in DML_FIT_MAX_VALUES numbers, with numeric
 * features, no validation split, no imputation and no sync options, runs
 * here, as the exact solver does (exact.c).  It gives the model the workers
 * would: the same standardization (mean and population standard deviation
 * of the training rows, constant columns scaled to zero), the same
 * objective, the same initialization and the same L-BFGS, in one process.
 * Nothing here starts a thread or a process.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "coordinator.h"
#include "dml.h"

#define FIT_BLOCK	1024		/* rows per forward/backward pass */

/* whether job can be fitted in the server */
bool
DmlFitInServer(DmlJob *job)
{
	return job->optimizer == DML_JOB_OPT_LBFGS && job->device != DML_DEVICE_GPU &&
		job->rows >= 0 && (double) job->rows * job->ninputs <= DML_FIT_MAX_VALUES &&
		DmlInServerData(job);
}

/*
 * DmlCheckL1Ratio
 *		l1_ratio (0 to 1): the share of weight_decay that goes on the
 *		weights' L1 norm (elastic net, as scikit-learn's l1_ratio), the
 *		rest on half their squares.  L-BFGS minimizes it as OWL-QN, for
 *		linear, logistic and softmax regression; the other optimizers have
 *		no L1 term.
 */
void
DmlCheckL1Ratio(DmlJob *job, double l1_ratio)
{
	if (!(l1_ratio >= 0 && l1_ratio <= 1))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("l1_ratio is out of range"),
				 errhint("It is the share of weight_decay on the L1 norm, from 0 (ridge) to 1 (lasso).")));
	job->l1_ratio = l1_ratio;
	if (l1_ratio == 0)
		return;
	if (job->optimizer != DML_JOB_OPT_LBFGS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("l1_ratio needs optimizer \"lbfgs\", not \"%s\"",
						dml_job_name(DML_NAMES_OPTIMIZER, job->optimizer)),
				 errhint("Leave optimizer out, or pass optimizer => 'lbfgs'.")));
	if (job->kind == DML_KIND_MLP)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("l1_ratio applies to linear, logistic and softmax regression")));
}

/* the user's mistake, reported as the workers would */
static void
fit_error(int sqlstate, const char *hint, const char *msg)
{
	ereport(ERROR, (errcode(sqlstate), errmsg("%s", msg), errhint("%s", hint)));
}

typedef struct Fit
{
	DmlJob	   *job;
	DmlModel	m;
	DmlWork		work;
	float	   *X;				/* (n, d) standardized */
	float	   *y;				/* (n) class index or standardized target */
	int64		n;
	float	   *grads;
	double		lambda;
	double		data_loss;		/* mean loss at the last point evaluated */
	TimestampTz iter_start;
	TimestampTz start;			/* max_seconds counts from here */
	DmlProgressCallback cb;
	void	   *cb_arg;
} Fit;

static double
fit_objective(void *arg, const double *x, double *g)
{
	Fit		   *fit = arg;
	DmlNet	   *net = &fit->m.net;

	for (size_t i = 0; i < net->nparams; i++)
		net->params[i] = (float) x[i];
	fit->data_loss = dml_net_full_gradient(net, &fit->work, fit->grads, fit->X, fit->y,
										   fit->n, FIT_BLOCK) / fit->n;
	for (size_t i = 0; i < net->nparams; i++)
		g[i] = fit->grads[i] / fit->n;
	return fit->data_loss + dml_net_penalty(net, fit->lambda, x, g);
}

/* one NOTICE and dml.epochs row per iteration, as the workers send */
static DmlStopReason
fit_iterate(void *arg, int iter, const double *x)
{
	Fit		   *fit = arg;
	DmlProgress p;
	long		secs;
	int			usecs;

	CHECK_FOR_INTERRUPTS();
	TimestampDifference(fit->iter_start, GetCurrentTimestamp(), &secs, &usecs);
	memset(&p, 0, sizeof(p));
	p.epoch = iter;
	p.loss = fit->data_loss;
	if (fit->m.net.loss == DML_LOSS_MSE)
		p.loss *= (double) fit->m.out_scale[0] * fit->m.out_scale[0];
	p.val_loss = NAN;
	p.val_metric = NAN;
	p.staleness = NAN;
	p.seconds = secs + usecs / 1e6;
	p.rows = fit->n;
	if (fit->cb)
		fit->cb(&p, fit->cb_arg);
	fit->iter_start = GetCurrentTimestamp();
	if (fit->job->max_seconds > 0)
	{
		TimestampDifference(fit->start, fit->iter_start, &secs, &usecs);
		if (secs + usecs / 1e6 >= fit->job->max_seconds)
		{
			ereport(NOTICE,
					(errmsg("training stopped at iteration %d: max_seconds (%g s) spent",
							iter, fit->job->max_seconds)));
			return DML_STOP_MAX_TIME;
		}
	}
	return DML_STOP_NONE;
}

/*
 * Read the rows: the target (a class's index, or the value) and the
 * features, checked as the workers check them.
 */
static void
fit_load(Fit *fit)
{
	DmlJob	   *job = fit->job;
	int			d = job->ninputs;
	StringInfoData sql;
	ListCell   *lc;
	bool		skip = job->nulls == DML_NULLS_SKIP;
	int64		n = 0;

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT %s", job->target.expr);
	foreach(lc, job->features)
		appendStringInfo(&sql, ", %s", ((DmlFeature *) lfirst(lc))->expr);
	appendStringInfo(&sql, " FROM %s",
					 quote_qualified_identifier(get_namespace_name(get_rel_namespace(job->relid)),
												get_rel_name(job->relid)));
	if (SPI_execute(sql.data, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "dml: reading the rows failed");
	fit->X = palloc(sizeof(float) * Max(SPI_processed, 1) * d);
	fit->y = palloc(sizeof(float) * Max(SPI_processed, 1));
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	td = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		v = SPI_getbinval(tup, td, 1, &isnull);
		bool		keep = true;
		float	   *x = fit->X + (size_t) n * d;

		if (isnull)
		{
			if (!skip)
				fit_error(ERRCODE_NULL_VALUE_NOT_ALLOWED,
						  "Pass nulls => 'skip' to leave rows without a target out.",
						  "the target column has NULL values");
			continue;
		}
		if (job->classification)
		{
			char	   *label = TextDatumGetCString(v);
			int			k = 0;
			ListCell   *lk;

			foreach(lk, job->classes)
			{
				if (strcmp(lfirst(lk), label) == 0)
					break;
				k++;
			}
			if (k >= list_length(job->classes))
				fit_error(ERRCODE_T_R_SERIALIZATION_FAILURE, "Train again: the table changed while the job started.",
						  "rows carry labels that were not seen when the labels were listed");
			fit->y[n] = (float) k;
		}
		else
		{
			double		t = DatumGetFloat8(v);

			if (!isfinite((float) t))
				fit_error(ERRCODE_DATA_EXCEPTION,
						  "Leave such rows out with a view, or scale the target: it must fit a float32.",
						  "the target has NaN, infinite or out-of-range values");
			fit->y[n] = (float) t;
		}
		for (int c = 0; c < d && keep; c++)
		{
			const char *col = ((DmlFeature *) list_nth(job->features, c))->name;
			double		f = DatumGetFloat8(SPI_getbinval(tup, td, c + 2, &isnull));

			if (isnull)
			{
				if (!skip)
					fit_error(ERRCODE_NULL_VALUE_NOT_ALLOWED,
							  "Pass nulls => 'skip' to leave those rows out, or nulls => 'impute' to use the column's mean.",
							  psprintf("column \"%s\" has NULL values", col));
				keep = false;
			}
			else if (!isfinite((float) f))
				fit_error(ERRCODE_DATA_EXCEPTION,
						  psprintf("Leave such rows out with a view, e.g. WHERE %s NOT IN ('NaN', 'Infinity', '-Infinity'), or scale the column: it must fit a float32.", col),
						  psprintf("column \"%s\" has NaN, infinite or out-of-range values", col));
			else
				x[c] = (float) f;
		}
		if (keep)
			n++;
	}
	if (n < 2)
		fit_error(ERRCODE_DATA_EXCEPTION, "Training needs at least 2 rows with a target.",
				  psprintf("only " INT64_FORMAT " usable row%s", n, n == 1 ? "" : "s"));
	fit->n = n;
}

/* mean and population standard deviation of every column; constant ones scale to 0 */
static void
fit_standardize(Fit *fit)
{
	int			d = fit->job->ninputs;
	DmlModel   *m = &fit->m;

	for (int c = 0; c < d; c++)
	{
		double		s = 0,
					ss = 0,
					mean,
					var,
					sd;

		for (int64 i = 0; i < fit->n; i++)
		{
			double		v = fit->X[(size_t) i * d + c];

			s += v;
			ss += v * v;
		}
		mean = s / fit->n;
		var = ss / fit->n - mean * mean;
		sd = var > 0 ? sqrt(var) : 0;
		m->in_mean[c] = (float) mean;
		m->in_scale[c] = sd <= 1e-12 * fmax(1.0, fabs(mean)) ? 0.0f : (float) (1.0 / sd);
	}
	if (m->net.loss == DML_LOSS_MSE)
	{
		double		s = 0,
					ss = 0,
					mean,
					var;

		for (int64 i = 0; i < fit->n; i++)
		{
			s += fit->y[i];
			ss += (double) fit->y[i] * fit->y[i];
		}
		mean = s / fit->n;
		var = ss / fit->n - mean * mean;
		m->out_mean[0] = (float) mean;
		m->out_scale[0] = var > 0 && sqrt(var) > 1e-12 ? (float) sqrt(var) : 1.0f;
		for (int64 i = 0; i < fit->n; i++)
			fit->y[i] = (fit->y[i] - m->out_mean[0]) / m->out_scale[0];
	}
	for (int64 i = 0; i < fit->n; i++)
		for (int c = 0; c < d; c++)
		{
			float	   *x = fit->X + (size_t) i * d + c;

			*x = (*x - m->in_mean[c]) * m->in_scale[c];
		}
}

/* the model's metrics on the training rows, as JSON members (no braces) */
static char *
fit_metrics(Fit *fit)
{
	DmlNet	   *net = &fit->m.net;
	int			K = net->sizes[net->nlayers];
	DmlMetrics	met;
	float	   *out = palloc(sizeof(float) * FIT_BLOCK * K);
	float	   *yb = palloc(sizeof(float) * FIT_BLOCK);
	size_t		need;
	char	   *json;

	if (dml_metrics_init(&met, net->loss, fit->job->classification ?
						 list_length(fit->job->classes) : 1) != DML_OK)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	for (int64 lo = 0; lo < fit->n; lo += FIT_BLOCK)
	{
		int			B = fit->n - lo < FIT_BLOCK ? (int) (fit->n - lo) : FIT_BLOCK;

		memcpy(out, dml_net_forward(net, &fit->work, fit->X + (size_t) lo * net->sizes[0], B),
			   sizeof(float) * B * K);
		dml_net_output(net, out, B);
		memcpy(yb, fit->y + lo, sizeof(float) * B);
		if (net->loss == DML_LOSS_MSE)
			for (int b = 0; b < B; b++)
			{
				out[(size_t) b * K] = out[(size_t) b * K] * fit->m.out_scale[0] + fit->m.out_mean[0];
				yb[b] = yb[b] * fit->m.out_scale[0] + fit->m.out_mean[0];
			}
		dml_metrics_add(&met, out, yb, B);
	}
	need = dml_metrics_json(&met, NULL, 0);
	json = palloc(need);
	dml_metrics_json(&met, json, need);
	dml_metrics_free(&met);
	json[strlen(json) - 1] = '\0';	/* the closing brace */
	return json + 1;				/* the opening one */
}

/*
 * DmlFitSolve
 *		Fit job in the server by L-BFGS; fills result as DmlRunJob would.
 *		SPI is connected by the caller.
 */
void
DmlFitSolve(DmlJob *job, DmlJobResult *result, DmlProgressCallback cb, void *cb_arg)
{
	Fit			fit;
	int			sizes[DML_MAX_LAYERS + 1];
	int			nlayers = job->nhidden + 1;
	DmlLoss		loss = job->loss;
	TimestampTz start = GetCurrentTimestamp();
	DmlLbfgs	lb;
	DmlLbfgsProblem pb;
	DmlLbfgsResult out;
	double	   *x;
	long		secs;
	int			usecs;
	size_t		blen;
	char	   *members;

	memset(result, 0, sizeof(*result));
	memset(&fit, 0, sizeof(fit));
	fit.job = job;
	fit.cb = cb;
	fit.cb_arg = cb_arg;
	/* elastic net: l1_ratio of weight_decay on |W|_1 (OWL-QN), the rest on |W|^2 / 2 */
	fit.lambda = job->weight_decay * (1 - job->l1_ratio);
	sizes[0] = job->ninputs;
	for (int l = 0; l < job->nhidden; l++)
		sizes[l + 1] = job->hidden[l];
	sizes[nlayers] = job->noutputs;
	fit_load(&fit);

	memset(&lb, 0, sizeof(lb));
	if (dml_model_alloc(&fit.m, nlayers, sizes, job->activation, loss) != DML_OK)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory for the model")));
	PG_TRY();
	{
		DmlNet	   *net = &fit.m.net;

		if (dml_work_alloc(&fit.work, net, FIT_BLOCK) != DML_OK ||
			dml_lbfgs_alloc(&lb, net->nparams, DML_LBFGS_DEFAULT_M) != DML_OK)
			ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
		fit_standardize(&fit);
		if (job->class_weight)
			fit.work.class_weight = DmlClassWeightValues(job, fit.y, fit.n);
		fit.grads = palloc(sizeof(float) * net->nparams);
		x = palloc(sizeof(double) * net->nparams);
		/* as the workers: linear models from zero, networks at random */
		if (nlayers > 1)
			dml_net_init(net, (uint64_t) job->seed);
		for (size_t i = 0; i < net->nparams; i++)
			x[i] = net->params[i];

		memset(&pb, 0, sizeof(pb));
		pb.n = net->nparams;
		pb.objective = fit_objective;
		pb.iterate = fit_iterate;
		pb.arg = &fit;
		pb.owner = true;
		pb.max_iter = job->epochs;
		pb.gtol = job->tolerance;
		if (job->l1_ratio > 0)
		{
			unsigned char *mask = palloc(net->nparams);

			dml_net_weight_mask(net, mask);
			pb.l1 = job->weight_decay * job->l1_ratio;
			pb.l1_mask = mask;
		}
		fit.iter_start = fit.start = GetCurrentTimestamp();
		if (dml_lbfgs_minimize(&pb, &lb, x, &out) != DML_OK)
			ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
		for (size_t i = 0; i < net->nparams; i++)
			net->params[i] = (float) x[i];
		members = fit_metrics(&fit);

		result->final_loss = fit.data_loss;
		if (loss == DML_LOSS_MSE)
			result->final_loss *= (double) fit.m.out_scale[0] * fit.m.out_scale[0];
		blen = dml_model_serialized_size(&fit.m);
		result->weights = palloc(VARHDRSZ + blen);
		SET_VARSIZE(result->weights, VARHDRSZ + blen);
		dml_model_serialize(&fit.m, (unsigned char *) VARDATA(result->weights));
	}
	PG_FINALLY();
	{
		dml_lbfgs_free(&lb);
		dml_work_free(&fit.work);
		dml_model_free(&fit.m);
	}
	PG_END_TRY();

	TimestampDifference(start, GetCurrentTimestamp(), &secs, &usecs);
	result->seconds = secs + usecs / 1e6;
	result->epochs_run = out.iterations;
	result->rows_per_second = result->seconds > 0 ?
		fit.n * Max(out.iterations, 1) / result->seconds : 0;
	result->device = "cpu";
	result->stopped = out.reason;
	result->metrics_json =
		psprintf("{\"device\": \"cpu\", \"solver\": \"in-server lbfgs\", \"optimizer\": \"lbfgs\", "
				 "\"stopped\": \"%s\", \"best_epoch\": %d, \"evaluated_on\": \"training\", "
				 "\"train_rows\": " INT64_FORMAT ", \"validation_rows\": 0, \"epochs\": %d, "
				 "\"final_loss\": %.10g, \"rows_per_second\": %.1f, \"train_seconds\": %.4f, "
				 "\"workers\": 0, %s}",
				 dml_stop_name(out.reason), out.iterations, fit.n, out.iterations, result->final_loss,
				 result->rows_per_second, result->seconds, members);
}
