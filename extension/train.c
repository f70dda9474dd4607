/*-------------------------------------------------------------------------
 *
 * train.c
 *	  dml_train: check the arguments, resolve every name through the
 *	  catalog, plan the job, run it (in the server, or as a job of workers
 *	  the coordinator launches and supervises), store the model.  Each
 *	  step lives in a file named for its concern (train.h).
 *
 * Nothing user-supplied is pasted into SQL: relations are resolved to OIDs
 * (regclass), columns to attribute numbers, and both are written back with
 * quote_identifier.  Labels and vocabularies are read with SPI under the
 * caller's own privileges.  The caller must hold SELECT on the relation or
 * on every column used, checked before anything is launched; the workers
 * then read as the caller (SET ROLE), so row-level security applies.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"

#include "coordinator.h"
#include "shards.h"
#include "dml.h"
#include "jobs.h"
#include "train.h"

/* ---------------------------------------------------------------------
 * Progress
 * --------------------------------------------------------------------- */

typedef struct TrainProgress
{
	int64		model_id;
	bool		classification;
	bool		staleness;		/* the sync mode records staleness */
	DmlJob	   *job;			/* its rank_hosts */
} TrainProgress;

/* one NOTICE and one dml.epochs row (stored when the job ends) per epoch */
static void
on_progress(const DmlProgress *p, void *arg)
{
	TrainProgress *tp = arg;
	double		secs = p->train_seconds > 0 ? p->train_seconds : p->seconds;
	double		rps = secs > 0 ? p->rows / secs : 0;

	char	   *stale = tp->staleness && !isnan(p->staleness) ?
		psprintf(", staleness %.0f", p->staleness) : "";

	if (isnan(p->val_loss))
		ereport(NOTICE,
				(errmsg("epoch %d: loss %.6g, %.0f rows/s%s", p->epoch, p->loss, rps, stale)));
	else
		ereport(NOTICE,
				(errmsg("epoch %d: loss %.6g, validation loss %.6g, validation %s %.4f, %.0f rows/s%s",
						p->epoch, p->loss, p->val_loss,
						tp->classification ? "accuracy" : "R2", p->val_metric, rps, stale)));
	DmlStoreEpoch(tp->model_id, p->restarts, p->epoch, p->loss, p->val_loss,
				  p->val_metric, rps, p->seconds, p->bytes_sent, p->bytes_across,
				  tp->staleness ? p->staleness : NAN, tp->job->rank_hosts);
	DmlProgressEpoch(p, rps);
}

/* ---------------------------------------------------------------------
 * The run
 * --------------------------------------------------------------------- */

/*
 * Run the job: one pass or a small fit in the server, or a job of workers
 * (coordinator/launch.c, supervise.c).  Returns whether it ran in the
 * server; model_id is the model's, taken once the job is set up.
 */
static bool
train_run(DmlJob *job, DmlJobResult *result, int64 *model_id)
{
	TrainProgress tp;
	bool		fit_in_server;
	bool		in_server;

	/* how to run it: one pass or a small fit in the server, or a job of workers */
	job->no_in_server |= DmlShardsIs(job->relid);	/* shards are read where they are */
	fit_in_server = DmlFitInServer(job);
	if (fit_in_server && job->discover_classes)
	{
		job->discover_classes = false;
		set_classes(job, target_classes(job->relid, &job->target, DML_MAX_CLASSES + 1));
	}
	in_server = fit_in_server || DmlExactInServer(job);
	DmlJobSetLaunch(job, !in_server,
					"dml_train in a subtransaction: workers read with a snapshot taken at job start");
	if (!in_server)
		job->slices = DmlShardsPlan(job, job->pack_target ? DML_SLICE_BLOCKS_PACKED : DML_SLICE_BLOCKS_COPY);
	if (!in_server && job->slices == NIL)
		job->slices = DmlPlanSlices(job->relid, job->relkind, job->workers,
									job->pack_target ? DML_SLICE_BLOCKS_PACKED : DML_SLICE_BLOCKS_COPY);

	*model_id = DmlNextModelId();
	tp.model_id = *model_id;
	tp.classification = job->classification;
	tp.staleness = job->servers > 0;
	tp.job = job;
	DmlProgressBegin(job, in_server);
	DmlDiscardEpochs();
	if (fit_in_server)
		DmlFitSolve(job, result, on_progress, &tp);
	else if (in_server)
		DmlExactSolve(job, result, on_progress, &tp);
	else
		DmlRunJob(job, result, on_progress, &tp);
	/* the epochs' rows, kept while the job ran (catalog.c) */
	DmlFlushEpochs();
	if (job->discover_classes)
	{
		if (result->classes == NIL)
			elog(ERROR, "dml: the workers did not list the labels. Please report a bug.");
		set_classes(job, result->classes);
	}
	return in_server;
}

/*
 * The values of dml.train_result, in the caller's memory (SPI_finish frees
 * what SPI allocated)
 */
static void
train_result_values(DmlJob *job, DmlJobResult *result, int64 model_id, int version,
					bool in_server, const char *stopped, Datum *values)
{
	values[0] = Int64GetDatum(model_id);
	values[1] = SPI_datumTransfer(CStringGetTextDatum(job->name), false, -1);
	values[2] = Int32GetDatum(version);
	values[3] = Int32GetDatum(result->epochs_run);
	values[4] = Float8GetDatum(result->final_loss);
	values[5] = Float8GetDatum(result->seconds);
	values[6] = Float8GetDatum(result->rows_per_second);
	values[7] = Int32GetDatum(in_server ? 0 : job->workers);
	values[8] = SPI_datumTransfer(CStringGetTextDatum(result->device), false, -1);
	values[9] = SPI_datumTransfer(CStringGetTextDatum(dml_job_name(DML_NAMES_KIND, job->kind)), false, -1);
	values[10] = SPI_datumTransfer(CStringGetTextDatum(stopped), false, -1);
}

/* ---------------------------------------------------------------------
 * dml_train
 * --------------------------------------------------------------------- */

PG_FUNCTION_INFO_V1(dml_train);

Datum
dml_train(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	DmlJob	   *job = palloc0(sizeof(DmlJob));
	TrainArgs	args;
	DmlJobResult result;
	TupleDesc	tupdesc;
	const char *stopped;
	int64		model_id;
	int			version;
	bool		in_server;
	Oid			owner;
	Datum		values[11];
	bool		nulls[11] = {0};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "dml_train must return a composite type");
	DmlCheckWritable("train a model");

	train_read_relation(job, fcinfo);	/* name, relation, target */
	train_read_settings(job, fcinfo, &args);	/* every other argument */
	SPI_connect();
	train_resolve_features(job, &args);	/* the features, and a probe for rows */
	train_plan(job, &args, fcinfo); /* the model and its defaults */

	owner = DmlCheckNameForTraining(job->name);
	if (DmlTrainCheckOnly)
	{
		/* dml_train_async: the checks passed; the job does the rest */
		SPI_finish();
		PG_RETURN_NULL();
	}

	in_server = train_run(job, &result, &model_id);
	version = train_store(job, &result, model_id, owner, &stopped);
	DmlProgressEnd();

	train_result_values(job, &result, model_id, version, in_server, stopped, values);
	SPI_finish();
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}
