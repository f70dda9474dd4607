/*-------------------------------------------------------------------------
 *
 * exact.c
 *	  Linear regression by the normal equations in one pass inside the
 *	  server: dml.xtx_cols over the relation (parallel-safe, run by
 *	  PostgreSQL's own parallel workers), then a Cholesky solve in the
 *	  backend.
 *
 * For a single pass the data path decides the time: reading the rows out
 * over libpq into MPI workers costs more than the whole computation, and
 * starting mpirun alone takes about 0.4 s.  So optimizer => 'exact' on
 * numeric features uses this path unless nulls => 'impute' (which needs a
 * second pass) or sync options ask for workers; the worker implementation
 * (workers/exact.c) remains for those.
 *
 * The solution is the same as the workers': standardized inputs and
 * target, ridge weight_decay / 2 on the standardized inputs only.  MAE
 * needs a second pass and is not reported here (dml_evaluate gives it).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "coordinator.h"
#include "dml.h"

/*
 * DmlInServerData
 *		Whether job's data suit a fit inside the server: numeric features,
 *		no validation split, no imputation, no test fault, in_server not
 *		turned off.  (exact.c, fit.c)
 */
bool
DmlInServerData(DmlJob *job)
{
	ListCell   *lc;

	if (job->nulls == DML_NULLS_IMPUTE || job->validation > 0 || job->fault != NULL ||
		job->no_in_server)
		return false;
	foreach(lc, job->features)
		if (((DmlColumn *) lfirst(lc))->kind != DML_COL_NUM)
			return false;
	return true;
}

/* whether job can take the in-server path */
bool
DmlExactInServer(DmlJob *job)
{
	return job->optimizer == DML_JOB_OPT_EXACT && DmlInServerData(job);
}

/* the user's mistake, reported as the workers would */
static void
data_error(int sqlstate, const char *hint, const char *msg)
{
	ereport(ERROR, (errcode(sqlstate), errmsg("%s", msg), errhint("%s", hint)));
}

/*
 * DmlExactSolve
 *		Fit job in the server; fills result as DmlRunJob would.  SPI is
 *		connected by the caller.
 */
void
DmlExactSolve(DmlJob *job, DmlJobResult *result, DmlProgressCallback cb, void *cb_arg)
{
	StringInfoData sql;
	ListCell   *lc;
	int			d = list_length(job->features);
	int			p = d + 1;
	TimestampTz start = GetCurrentTimestamp();
	ArrayType  *arr;
	Datum	   *e;
	bool	   *enulls;
	int			ne;
	double	   *v;
	double		n;
	const double *nulls,
			   *bad,
			   *A,
			   *bvec;
	double		yy;
	double		total_rows = 0;
	double	   *mu,
			   *sd,
			   *C,
			   *w;
	double		ymu,
				ysd,
				sse;
	DmlModel	m;
	int			sizes[2] = {d, 1};
	long		secs;
	int			usecs;
	DmlProgress prog;
	bool		isnull;
	char	   *rel;
	size_t		blen;
	bytea	   *weights;

	/*
	 * dml.xtx_cols(y, x1, ..., xd) over every row: the columns as arguments,
	 * no array per row; ARRAY[y, x1, ..., xd] beyond a function's argument
	 * limit (the state takes one of them).
	 */
	rel = quote_qualified_identifier(get_namespace_name(get_rel_namespace(job->relid)),
									 get_rel_name(job->relid));
	initStringInfo(&sql);
	if (d + 2 <= FUNC_MAX_ARGS)
		appendStringInfo(&sql, "SELECT dml.xtx_cols(%s", job->target.expr);
	else
		appendStringInfo(&sql, "SELECT dml.xtx(ARRAY[%s", job->target.expr);
	foreach(lc, job->features)
		appendStringInfo(&sql, ", %s", ((DmlColumn *) lfirst(lc))->expr);
	appendStringInfo(&sql, "%s), count(*)::float8 FROM %s", d + 2 <= FUNC_MAX_ARGS ? "" : "]", rel);
	/* no row limit: the executor runs a plan in parallel only without one */
	if (SPI_execute(sql.data, true, 0) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "dml: the normal-equations pass failed");
	if (SPI_tuptable->vals[0] == NULL)
		elog(ERROR, "dml: the normal-equations pass returned nothing");
	{
		Datum		dv = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (isnull)
			data_error(ERRCODE_DATA_EXCEPTION,
					   "Training needs data: load rows first, or check row-level security policies.",
					   "the relation has no rows");
		arr = DatumGetArrayTypeP(dv);
		total_rows = DatumGetFloat8(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	}
	deconstruct_array(arr, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &e, &enulls, &ne);
	if (ne != 2 + 2 * p + p * p + p + 1)
		elog(ERROR, "dml: dml.xtx returned %d values for %d features. Please report a bug.", ne, d);
	v = palloc(sizeof(double) * ne);
	for (int i = 0; i < ne; i++)
		v[i] = DatumGetFloat8(e[i]);
	n = v[1];
	nulls = v + 2;
	bad = nulls + p;
	A = bad + p;
	bvec = A + p * p;
	yy = bvec[p];

	/* the same checks, in the same order, as the workers' prepare_data */
	for (int i = 1; i < p; i++)
	{
		const char *col = ((DmlColumn *) list_nth(job->features, i - 1))->name;

		if (nulls[i] >= total_rows)
			data_error(ERRCODE_NULL_VALUE_NOT_ALLOWED, "Leave the column out of features.",
					   psprintf("column \"%s\" is NULL in every row", col));
		if (bad[i] > 0)
			data_error(ERRCODE_DATA_EXCEPTION,
					   psprintf("Leave such rows out with a view, e.g. WHERE %s NOT IN ('NaN', 'Infinity', '-Infinity'), or scale the column: it must fit a float32.", col),
					   psprintf("column \"%s\" has %.0f NaN, infinite or out-of-range values", col, bad[i]));
		if (nulls[i] > 0 && job->nulls != DML_NULLS_SKIP)
			data_error(ERRCODE_NULL_VALUE_NOT_ALLOWED,
					   "Pass nulls => 'skip' to leave those rows out, or nulls => 'impute' to use the column's mean.",
					   psprintf("column \"%s\" has %.0f NULL values", col, nulls[i]));
	}
	if (bad[0] > 0)
		data_error(ERRCODE_DATA_EXCEPTION, "Leave such rows out with a view, or scale the target: it must fit a float32.",
				   psprintf("the target has %.0f NaN, infinite or out-of-range values", bad[0]));
	if (nulls[0] > 0 && job->nulls != DML_NULLS_SKIP)
		data_error(ERRCODE_NULL_VALUE_NOT_ALLOWED,
				   "Pass nulls => 'skip' to leave rows without a target out.",
				   psprintf("the target column has %.0f NULL values", nulls[0]));
	if (n < 2)
		data_error(ERRCODE_DATA_EXCEPTION, "Training needs at least 2 rows with a target.",
				   psprintf("only %.0f usable row%s", n, n == 1 ? "" : "s"));

	/* moments, then the standardized normal equations */
	mu = palloc(sizeof(double) * d);
	sd = palloc(sizeof(double) * d);
	for (int c = 0; c < d; c++)
	{
		double		var;

		mu[c] = A[(size_t) c * p + d] / n;
		var = A[(size_t) c * p + c] / n - mu[c] * mu[c];
		sd[c] = var > 0 ? sqrt(var) : 0;
		/* a constant column is standardized to zero: weight 0, as in the workers */
		if (sd[c] <= 1e-12 * fmax(1.0, fabs(mu[c])))
			sd[c] = 0;
	}
	ymu = bvec[d] / n;
	ysd = yy / n - ymu * ymu > 0 ? sqrt(yy / n - ymu * ymu) : 0;
	if (ysd <= 0)
		ysd = 1;
	C = palloc(sizeof(double) * d * d);
	w = palloc(sizeof(double) * d);
	for (int i = 0; i < d; i++)
	{
		for (int j = 0; j < d; j++)
			C[(size_t) i * d + j] = sd[i] == 0 || sd[j] == 0 ? (i == j ? 1 : 0) :
				(A[(size_t) i * p + j] / n - mu[i] * mu[j]) / (sd[i] * sd[j]);
		C[(size_t) i * d + i] += job->weight_decay / 2;
		w[i] = sd[i] == 0 ? 0 : (bvec[i] / n - mu[i] * ymu) / (sd[i] * ysd);
	}
	{
		double	   *L = palloc(sizeof(double) * d * d);
		double	   *c0 = palloc(sizeof(double) * d);

		memcpy(L, C, sizeof(double) * d * d);
		memcpy(c0, w, sizeof(double) * d);
		if (dml_cholesky_solve(L, w, d) != DML_OK)
			data_error(ERRCODE_DATA_EXCEPTION,
					   "Remove features that are linear combinations of others, or add weight_decay.",
					   "the normal equations are singular: the features are collinear");
		/* SSE / n in standardized units: 1 - 2 w'c + w'Cw (ridge term removed) */
		sse = 1.0;
		for (int i = 0; i < d; i++)
		{
			sse -= 2 * w[i] * c0[i];
			for (int j = 0; j < d; j++)
				sse += w[i] * (C[(size_t) i * d + j] - (i == j ? job->weight_decay / 2 : 0)) * w[j];
		}
	}

	if (dml_model_alloc(&m, 1, sizes, DML_ACT_RELU, DML_LOSS_MSE) != DML_OK)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	for (int c = 0; c < d; c++)
	{
		m.in_mean[c] = (float) mu[c];
		m.in_scale[c] = sd[c] > 0 ? (float) (1.0 / sd[c]) : 0.0f;
		m.net.params[c] = (float) w[c];
	}
	m.net.params[d] = 0.0f;		/* centered data: the intercept is the means */
	m.out_mean[0] = (float) ymu;
	m.out_scale[0] = (float) ysd;
	blen = dml_model_serialized_size(&m);
	weights = palloc(VARHDRSZ + blen);
	SET_VARSIZE(weights, VARHDRSZ + blen);
	dml_model_serialize(&m, (unsigned char *) VARDATA(weights));
	dml_model_free(&m);

	TimestampDifference(start, GetCurrentTimestamp(), &secs, &usecs);
	memset(result, 0, sizeof(*result));
	result->weights = weights;
	result->seconds = secs + usecs / 1e6;
	result->epochs_run = 1;
	result->final_loss = fmax(sse, 0) * ysd * ysd;
	result->rows_per_second = result->seconds > 0 ? n / result->seconds : 0;
	result->device = "cpu";
	result->stopped = DML_STOP_CONVERGED;
	result->metrics_json = psprintf("{\"device\": \"cpu\", \"solver\": \"in-server aggregate\", "
									"\"optimizer\": \"exact\", \"stopped\": \"converged\", "
									"\"evaluated_on\": \"training\", \"train_rows\": %.0f, "
									"\"validation_rows\": 0, \"epochs\": 1, \"final_loss\": %.10g, "
									"\"rows_per_second\": %.1f, \"train_seconds\": %.4f, "
									"\"workers\": 0, \"rows\": %.0f, \"mse\": %.10g, \"mae\": null, "
									"\"r2\": %.10g}",
									n, result->final_loss, result->rows_per_second,
									result->seconds, n, result->final_loss, 1.0 - fmax(sse, 0));

	memset(&prog, 0, sizeof(prog));
	prog.epoch = 1;
	prog.loss = result->final_loss;
	prog.val_loss = NAN;
	prog.val_metric = NAN;
	prog.seconds = result->seconds;
	prog.rows = n;
	if (cb)
		cb(&prog, cb_arg);
}
