/*-------------------------------------------------------------------------
 *
 * jobs.c
 *	  dml_train_async, dml_cancel, dml_wait: training as a background job,
 *	  and the background worker that runs one.
 *
 * A job is a row of dml.job_runs: the arguments of dml_train exactly as
 * given (replayed through the same C entry, so the planning, checks,
 * workers and model storage are dml_train's own), the dml.* settings of
 * the submitting session, and its state:
 *
 *	 queued -> running -> succeeded | failed | cancelled
 *	 queued -> cancelled | failed (owner dropped or unable to log in)
 *
 * Submitting runs dml_train's checks in the caller's session (a bad
 * argument fails at once, with dml_train's error, and queues nothing),
 * inserts the row and registers a dynamic background worker (no
 * shared_preload_libraries needed).  The worker logs in as the caller
 * (BackgroundWorkerInitializeConnectionByOid with the caller's role, so
 * its session user is the caller), waits for the submitting transaction
 * to end, and claims its job if the job is the oldest queued one of its
 * database and it gets one of the dml.max_concurrent_jobs run slots,
 * which bound the jobs running in the whole cluster (session advisory
 * locks in database 0, coordinator/limits.c: a dead worker's slot frees
 * itself); otherwise it exits and the job waits.  Claims in a database are
 * serialized by a transaction-level advisory lock.  Every worker, after
 * claiming or not, starts a worker for the next queued job while a slot
 * is free, so the queue drains in order as jobs end.  A database whose
 * queue found every slot taken notes itself in shared memory (progress.c)
 * before it tries, and a job that ends, having freed its slot, starts a
 * short worker in each database noted (dml_kick_main), so a slot freed in
 * one database moves the queue of another.  dml_wait kicks its queue too,
 * in case a worker could not be registered (max_worker_processes).
 *
 * While a job runs, its epochs' dml.epochs rows also go to a live file
 * (checkpoint.c) that dml_job_epochs reads, for the roles that may see
 * the job; the table's rows commit with the model, as dml_train's do.
 *
 * A claimed job commits "running", then runs dml_train in a transaction
 * of its own that stores the model and the job's end together; an error
 * rolls that back and a new transaction records failed (or cancelled,
 * for a query cancel, which is what dml_cancel sends) with the error's
 * message, detail and SQLSTATE.  Epochs advance live in dml.progress
 * (shared memory), which dml.jobs joins.
 *
 * A running job whose process is gone (server crash, immediate or fast
 * shutdown, pg_terminate_backend) reads as failed in dml.jobs at once,
 * with the reason (dml.job_lost), and the next claim writes that down.
 *
 * Catalog SQL here runs as the extension's owner with search_path
 * pg_catalog, pg_temp (DmlBecomeOwner) and fully qualified names.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>
#include <signal.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "parser/parse_func.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/postmaster.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "dml.h"
#include "jobs.h"

/*
 * dml_wait's look at the job when its latch is not set: a fallback (the
 * job's worker sets it at the end), so seldom.  Each look (a query of
 * dml.jobs) took a few ms of CPU that, on a machine whose cores the job's
 * ranks all use, one of them lost, and with it every rank that waited for
 * it at the step's end: at 250 ms the MLP's job trained 2-4% slower than
 * the same dml_train (bench/SPEED-NOTES.md).
 */
#define DML_JOB_POLL_MS		1000
/* a queued job's, as before: its queue is kicked every DML_KICK_EVERY_MS */
#define DML_JOB_QUEUED_POLL_MS	250
#define DML_CANCEL_WAIT_S	10
#define DML_KICK_EVERY_MS	1000
/* advisory lock keys: claims, and one role's submissions */
#define DML_LOCK_CLAIM		"SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('dml.job_runs'), 0)"
#define DML_LOCK_SUBMIT		"SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('dml.job_runs'), $1::pg_catalog.int4)"

/* a job queued again, to resume from its checkpoint */
#define DML_REQUEUE \
	"UPDATE dml.job_runs SET state = 'queued', resumes = resumes + 1, started = NULL, " \
	"finished = NULL, pid = NULL, server_started = NULL, model_id = NULL, " \
	"error_message = NULL, error_detail = NULL, error_sqlstate = NULL "

int			dml_max_concurrent_jobs = DML_DEFAULT_MAX_CONCURRENT_JOBS;
int			dml_max_queued_jobs = DML_DEFAULT_MAX_QUEUED_JOBS;
bool		DmlTrainCheckOnly = false;
int64		DmlCurrentJobId = 0;

/* dml_train's argument types, in order (sql/dml.sql) */
static const Oid train_argtypes[DML_TRAIN_NARGS] = {
	TEXTOID, REGCLASSOID, TEXTOID, TEXTARRAYOID, TEXTOID, INT4ARRAYOID, TEXTOID,
	TEXTOID, FLOAT8OID, INT4OID, INT4OID, FLOAT8OID, FLOAT8OID, INT4OID, TEXTOID,
	INT4OID, TEXTOID, INT8OID, JSONBOID, TEXTOID, INT4OID, INT4OID, INT4OID,
	TEXTOID, FLOAT8OID, FLOAT8OID, TEXTARRAYOID, TEXTOID, FLOAT8OID
};
#define DML_ARG_RELATION	1

/* settings of the submitting session a job runs with */
static const char *const carried_settings[] = {
	"dml.workers", "dml.max_workers", "dml.device", "dml.max_restarts",
	"dml.checkpoint_every", "dml.checkpoint_seconds", "dml.test_hooks", "dml.worker_memory"
};

/* what a job's worker is started with (bgw_extra) */
typedef struct DmlJobLaunch
{
	int64		job;
	Oid			database;
	Oid			owner;
	TransactionId wait_xid;		/* the submitting transaction, or invalid */
} DmlJobLaunch;

/* a claimed job, in TopMemoryContext */
typedef struct DmlClaimedJob
{
	int64		id;
	Oid			relation;
	Jsonb	   *args;
	Jsonb	   *settings;
	char	   *name;
	bool		tune;			/* dml_tune_async's: a search, not one training */
} DmlClaimedJob;

PGDLLEXPORT void dml_job_main(Datum main_arg);
PGDLLEXPORT void dml_kick_main(Datum main_arg);

/* ---------------------------------------------------------------------
 * Catalog access as the extension's owner
 * --------------------------------------------------------------------- */

typedef DmlCatalogUser OwnerSpi;

/* become the extension's owner (fixed search_path) and connect SPI */
static void
owner_begin(OwnerSpi *o)
{
	DmlBecomeOwner(o);
	SPI_connect();
}

static void
owner_end(OwnerSpi *o)
{
	SPI_finish();
	DmlRestoreUser(o);
}

/* run sql with parameters; elog on an unexpected result */
static void
spi_run(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls, int expect)
{
	int			rc = SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0);

	if (rc != expect)
		elog(ERROR, "dml: catalog query failed (%s): %s", SPI_result_code_string(rc), sql);
}

/* column i (1-based) of row r of the last SPI result */
static Datum
spi_col(int r, int i, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, i, isnull);
}

/* ---------------------------------------------------------------------
 * dml_train, called with stored arguments
 * --------------------------------------------------------------------- */

/* dml_train in the extension's schema */
Oid
DmlTrainFunction(void)
{
	Oid			nsp = DmlExtensionSchema();

	if (!OidIsValid(nsp))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"dml\" is not installed in this database")));
	return LookupFuncName(list_make2(makeString(get_namespace_name(nsp)),
									 makeString("dml_train")),
						  DML_TRAIN_NARGS, train_argtypes, false);
}

/* the argument names of fn, which takes nargs */
static char **
func_argnames(Oid fn, int nargs)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
	Oid		   *types;
	char	  **names;
	char	   *modes;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for function %u", fn);
	if (get_func_arg_info(tup, &types, &names, &modes) < nargs || names == NULL)
		elog(ERROR, "dml: %s has an unexpected signature. Please report a bug.", get_func_name(fn));
	ReleaseSysCache(tup);
	return names;
}

/* call dml_train; with check_only it returns NULL after its checks */
Datum
DmlCallTrain(Oid fn, NullableDatum *args, bool check_only, bool *isnull)
{
	FmgrInfo	flinfo;
	Datum		result;

	LOCAL_FCINFO(fc, DML_TRAIN_NARGS);

	fmgr_info(fn, &flinfo);
	InitFunctionCallInfoData(*fc, &flinfo, DML_TRAIN_NARGS, InvalidOid, NULL, NULL);
	for (int i = 0; i < DML_TRAIN_NARGS; i++)
		fc->args[i] = args[i];
	DmlTrainCheckOnly = check_only;
	PG_TRY();
	{
		result = FunctionCallInvoke(fc);
	}
	PG_FINALLY();
	{
		DmlTrainCheckOnly = false;
	}
	PG_END_TRY();
	*isnull = fc->isnull;
	return result;
}

/*
 * The arguments as a jsonb object of text values, each in its type's
 * text form (float8 with every digit), NULLs left out; the relation is
 * kept by OID in its own column and named here for people.
 */
static Jsonb *
encode_args(char **names, NullableDatum *args, int nargs, const Oid *argtypes)
{
	StringInfoData buf;
	bool		first = true;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int i = 0; i < nargs; i++)
	{
		char	   *text;

		if (args[i].isnull)
			continue;
		if (i == DML_ARG_RELATION)
		{
			Oid			rel = DatumGetObjectId(args[i].value);

			text = quote_qualified_identifier(get_namespace_name(get_rel_namespace(rel)),
											  get_rel_name(rel));
		}
		else if (argtypes[i] == FLOAT8OID)
			text = psprintf("%.17g", DatumGetFloat8(args[i].value));
		else
		{
			Oid			out;
			bool		varlena;

			getTypeOutputInfo(argtypes[i], &out, &varlena);
			text = OidOutputFunctionCall(out, args[i].value);
		}
		if (!first)
			appendStringInfoString(&buf, ", ");
		first = false;
		escape_json(&buf, names[i]);
		appendStringInfoString(&buf, ": ");
		escape_json(&buf, text);
	}
	appendStringInfoChar(&buf, '}');
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
}

/* the stored arguments back as datums */
static void
decode_args(char **names, Jsonb *stored, Oid relation, NullableDatum *args, int nargs,
			const Oid *argtypes)
{
	for (int i = 0; i < nargs; i++)
	{
		JsonbValue *v = getKeyJsonValueFromContainer(&stored->root, names[i],
													 strlen(names[i]), NULL);

		args[i].isnull = v == NULL || v->type != jbvString;
		args[i].value = (Datum) 0;
		if (args[i].isnull)
			continue;
		if (i == DML_ARG_RELATION)
			args[i].value = ObjectIdGetDatum(relation);
		else
		{
			Oid			in;
			Oid			ioparam;

			getTypeInputInfo(argtypes[i], &in, &ioparam);
			args[i].value = OidInputFunctionCall(in, pnstrdup(v->val.string.val, v->val.string.len),
												 ioparam, -1);
		}
	}
}

/* the carried dml.* settings of this session, as a jsonb object */
static Jsonb *
encode_settings(void)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int i = 0; i < lengthof(carried_settings); i++)
	{
		const char *v = GetConfigOption(carried_settings[i], true, false);

		if (v == NULL)
			continue;
		if (buf.len > 1)
			appendStringInfoString(&buf, ", ");
		escape_json(&buf, carried_settings[i]);
		appendStringInfoString(&buf, ": ");
		escape_json(&buf, v);
	}
	appendStringInfoChar(&buf, '}');
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
}

/* apply carried settings for the rest of this worker's session */
static void
apply_settings(Jsonb *settings)
{
	for (int i = 0; i < lengthof(carried_settings); i++)
	{
		JsonbValue *v = getKeyJsonValueFromContainer(&settings->root, carried_settings[i],
													 strlen(carried_settings[i]), NULL);

		if (v != NULL && v->type == jbvString)
			(void) set_config_option(carried_settings[i],
									 pnstrdup(v->val.string.val, v->val.string.len),
									 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_SET, true, 0, false);
	}
}

/* ---------------------------------------------------------------------
 * Workers and the queue
 * --------------------------------------------------------------------- */

/*
 * DmlBgworkerSetup
 *		A background worker of dml's library with a database connection:
 *		its entry point, type (also its name until the caller says more)
 *		and restart policy.
 */
void
DmlBgworkerSetup(BackgroundWorker *w, const char *function, const char *type, int restart)
{
	memset(w, 0, sizeof(*w));
	w->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	w->bgw_start_time = BgWorkerStart_RecoveryFinished;
	w->bgw_restart_time = restart;
	strlcpy(w->bgw_library_name, "dml", BGW_MAXLEN);
	strlcpy(w->bgw_function_name, function, BGW_MAXLEN);
	strlcpy(w->bgw_type, type, BGW_MAXLEN);
	strlcpy(w->bgw_name, type, BGW_MAXLEN);
}

/* register a worker for a job; false when no slot is free */
static bool
launch_worker(int64 job, Oid owner, TransactionId wait_xid)
{
	BackgroundWorker w;
	DmlJobLaunch l;

	DmlBgworkerSetup(&w, "dml_job_main", "dml job", BGW_NEVER_RESTART);
	snprintf(w.bgw_name, BGW_MAXLEN, "dml job " INT64_FORMAT, job);
	l.job = job;
	l.database = MyDatabaseId;
	l.owner = owner;
	l.wait_xid = wait_xid;
	StaticAssertStmt(sizeof(l) <= BGW_EXTRALEN, "DmlJobLaunch must fit in bgw_extra");
	memcpy(w.bgw_extra, &l, sizeof(l));
	w.bgw_notify_pid = 0;
	if (!RegisterDynamicBackgroundWorker(&w, NULL))
	{
		ereport(DEBUG1,
				(errmsg("dml: no background worker slot for job " INT64_FORMAT "; it stays queued", job)));
		return false;
	}
	return true;
}

/*
 * Write down what is already true: running jobs whose process is gone
 * failed, queued jobs whose owner was dropped or cannot log in failed.
 * Needs an owner_begin connection.
 */
static void
jobs_settle(void)
{
	spi_run("UPDATE dml.job_runs SET state = 'failed', finished = pg_catalog.clock_timestamp(), "
			"error_message = dml.job_lost(pid, owner, server_started) "
			"WHERE state = 'running' AND dml.job_lost(pid, owner, server_started) IS NOT NULL",
			0, NULL, NULL, NULL, SPI_OK_UPDATE);
	spi_run("UPDATE dml.job_runs j SET state = 'failed', finished = pg_catalog.clock_timestamp(), "
			"error_sqlstate = '28000', error_message = CASE WHEN NOT EXISTS "
			"(SELECT 1 FROM pg_catalog.pg_roles r WHERE r.oid = j.owner) "
			"THEN 'the role that submitted the job was dropped' "
			"ELSE 'the role that submitted the job can no longer log in' END "
			"WHERE j.state = 'queued' AND NOT EXISTS "
			"(SELECT 1 FROM pg_catalog.pg_roles r WHERE r.oid = j.owner AND r.rolcanlogin)",
			0, NULL, NULL, NULL, SPI_OK_UPDATE);
}

/*
 * Under the claim lock: claim job (when not 0) if it is the oldest queued
 * job and there is room, then start a worker for the next queued job if
 * there is still room.  Returns whether job was claimed, with its row in
 * *out.  Runs in a transaction the caller commits.
 */
static bool
jobs_claim_and_kick(int64 job, DmlClaimedJob *out)
{
	OwnerSpi	o;
	bool		claimed = false;
	bool		isnull;
	int64		head = 0;
	Oid			head_owner = InvalidOid;

	owner_begin(&o);
	spi_run(DML_LOCK_CLAIM, 0, NULL, NULL, NULL, SPI_OK_SELECT);
	jobs_settle();
	spi_run("SELECT id, owner FROM dml.job_runs WHERE state = 'queued' ORDER BY id LIMIT 1",
			0, NULL, NULL, NULL, SPI_OK_SELECT);
	if (SPI_processed == 0)
	{
		owner_end(&o);
		return false;
	}
	head = DatumGetInt64(spi_col(0, 1, &isnull));
	head_owner = DatumGetObjectId(spi_col(0, 2, &isnull));
	if (job != 0 && head == job)
		DmlJobsNoteWaiting();
	/* a run slot of dml.max_concurrent_jobs, cluster-wide (coordinator/limits.c) */
	if (job != 0 && head == job && DmlAcquireRunSlot(dml_max_concurrent_jobs))
	{
		Oid			types[2] = {INT8OID, INT4OID};
		Datum		values[2] = {Int64GetDatum(job), Int32GetDatum(MyProcPid)};
		MemoryContext old;

		spi_run("UPDATE dml.job_runs SET state = 'running', started = pg_catalog.clock_timestamp(), "
				"pid = $2, server_started = pg_catalog.pg_postmaster_start_time() "
				"WHERE id = $1 AND state = 'queued' RETURNING relation, args, settings, name, function",
				2, types, values, NULL, SPI_OK_UPDATE_RETURNING);
		if (SPI_processed == 1)
		{
			old = MemoryContextSwitchTo(TopMemoryContext);
			out->id = job;
			out->relation = DatumGetObjectId(spi_col(0, 1, &isnull));
			out->args = DatumGetJsonbPCopy(spi_col(0, 2, &isnull));
			out->settings = DatumGetJsonbPCopy(spi_col(0, 3, &isnull));
			out->name = TextDatumGetCString(spi_col(0, 4, &isnull));
			out->tune = strcmp(TextDatumGetCString(spi_col(0, 5, &isnull)), "dml_tune") == 0;
			MemoryContextSwitchTo(old);
			claimed = true;
			/* the next in line, if any */
			spi_run("SELECT id, owner FROM dml.job_runs WHERE state = 'queued' ORDER BY id LIMIT 1",
					0, NULL, NULL, NULL, SPI_OK_SELECT);
			head = 0;
			if (SPI_processed == 1)
			{
				head = DatumGetInt64(spi_col(0, 1, &isnull));
				head_owner = DatumGetObjectId(spi_col(0, 2, &isnull));
			}
		}
		else
			DmlReleaseRunSlot();
	}
	owner_end(&o);
	/* it waits for our commit on the claim lock */
	if (head != 0 && head != job)
	{
		DmlJobsNoteWaiting();
		if (DmlRunSlotFree(dml_max_concurrent_jobs))
			launch_worker(head, head_owner, InvalidTransactionId);
	}
	return claimed;
}

/* read-only: start a worker for the oldest queued job if there seems to be room */
static void
jobs_kick(void)
{
	OwnerSpi	o;
	bool		isnull;
	int64		head = 0;
	Oid			owner = InvalidOid;

	owner_begin(&o);
	spi_run("SELECT id, owner FROM dml.job_runs WHERE state = 'queued' ORDER BY id LIMIT 1",
			0, NULL, NULL, NULL, SPI_OK_SELECT);
	if (SPI_processed == 1)
	{
		head = DatumGetInt64(spi_col(0, 1, &isnull));
		owner = DatumGetObjectId(spi_col(0, 2, &isnull));
	}
	owner_end(&o);
	if (head != 0)
	{
		DmlJobsNoteWaiting();
		if (DmlRunSlotFree(dml_max_concurrent_jobs))
			launch_worker(head, owner, InvalidTransactionId);
	}
}

/* start the queue of another database, as the bootstrap superuser (dml_kick_main) */
static void
launch_kick(Oid database)
{
	BackgroundWorker w;

	DmlBgworkerSetup(&w, "dml_kick_main", "dml queue", BGW_NEVER_RESTART);
	snprintf(w.bgw_name, BGW_MAXLEN, "dml queue of database %u", database);
	w.bgw_main_arg = ObjectIdGetDatum(database);
	if (!RegisterDynamicBackgroundWorker(&w, NULL))
		ereport(DEBUG1,
				(errmsg("dml: no background worker slot to start the queue of database %u", database)));
}

/*
 * dml_kick_main
 *		A job ended in another database and freed a run slot: if this
 *		database's oldest queued job can run, start its worker.  Runs only
 *		dml's catalog SQL, as the extension's owner.
 */
void
dml_kick_main(Datum main_arg)
{
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(DatumGetObjectId(main_arg), InvalidOid, 0);
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (OidIsValid(DmlExtensionSchema()))
	{
		DML_REQUIRE_SCHEMA();
		jobs_kick();
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	proc_exit(0);
}

/*
 * DmlJobsRecover
 *		After the server started (launcher.c): write down the jobs it cut
 *		short as failed, or with resume queue them again from their
 *		checkpoints; then start the queue.  Runs in a transaction.
 */
void
DmlJobsRecover(bool resume)
{
	OwnerSpi	o;

	owner_begin(&o);
	spi_run(DML_LOCK_CLAIM, 0, NULL, NULL, NULL, SPI_OK_SELECT);
	if (resume)
	{
		spi_run(DML_REQUEUE "WHERE state = 'running' AND "
				"dml.job_lost(pid, owner, server_started) IS NOT NULL",
				0, NULL, NULL, NULL, SPI_OK_UPDATE);
		if (SPI_processed > 0)
			ereport(LOG,
					(errmsg("dml: %llu job%s cut short by the restart queued again from %s checkpoint%s",
							(unsigned long long) SPI_processed, SPI_processed == 1 ? "" : "s",
							SPI_processed == 1 ? "its" : "their", SPI_processed == 1 ? "" : "s")));
	}
	jobs_settle();
	owner_end(&o);
	jobs_kick();
}

/* ---------------------------------------------------------------------
 * The job's background worker
 * --------------------------------------------------------------------- */

/* the job's end, in the transaction that stored its model */
static void
record_success(DmlClaimedJob *cj, HeapTupleHeader result)
{
	OwnerSpi	o;
	bool		isnull;
	int			epoch,
				epochs;
	double		loss,
				metric,
				rps;
	Oid			types[7] = {INT8OID, INT8OID, INT4OID, FLOAT8OID, FLOAT8OID, FLOAT8OID, INT4OID};
	Datum		values[7];
	char		nulls[7] = "       ";

	DmlProgressLast(&epoch, &epochs, &loss, &metric, &rps);
	values[0] = Int64GetDatum(cj->id);
	values[1] = GetAttributeByNum(result, 1, &isnull);	/* model_id */
	values[2] = GetAttributeByNum(result, 4, &isnull);	/* epochs */
	values[3] = GetAttributeByNum(result, 5, &isnull);	/* final_loss */
	if (isnull)
		nulls[3] = 'n';
	values[4] = Float8GetDatum(metric);
	if (isnan(metric))
		nulls[4] = 'n';
	values[5] = GetAttributeByNum(result, 7, &isnull);	/* rows_per_second */
	values[6] = Int32GetDatum(epochs);
	owner_begin(&o);
	spi_run("UPDATE dml.job_runs SET state = 'succeeded', finished = pg_catalog.clock_timestamp(), "
			"model_id = $2, epoch = $3, loss = $4, metric = $5, rows_per_second = $6, "
			"epochs = $7 WHERE id = $1",
			7, types, values, nulls, SPI_OK_UPDATE);
	owner_end(&o);
}

/* a search's end: its best model, in the transaction that stored it */
static void
record_tune_success(DmlClaimedJob *cj, int64 model_id)
{
	OwnerSpi	o;

	owner_begin(&o);
	spi_run("UPDATE dml.job_runs SET state = 'succeeded', finished = pg_catalog.clock_timestamp(), "
			"model_id = $2 WHERE id = $1",
			2, (Oid[]) {INT8OID, INT8OID}, (Datum[]) {Int64GetDatum(cj->id), Int64GetDatum(model_id)},
			model_id == 0 ? " n" : NULL, SPI_OK_UPDATE);
	owner_end(&o);
}

/*
 * Keep the checkpoints of the dml.checkpoint_retention jobs that failed
 * or were cancelled last, and of queued and running ones; drop the rest.
 * Needs an owner_begin connection.
 */
static void
sweep_checkpoints(void)
{
	List	   *have = DmlCheckpointJobs();
	Datum	   *ids;
	ListCell   *lc;
	int			n = 0;
	bool		isnull;

	if (have == NIL)
		return;
	ids = palloc(sizeof(Datum) * list_length(have));
	foreach(lc, have)
		ids[n++] = Int64GetDatum(*(int64 *) lfirst(lc));
	spi_run("SELECT id FROM dml.job_runs WHERE id = ANY($1) AND state IN ('queued', 'running') "
			"UNION ALL (SELECT id FROM dml.job_runs WHERE id = ANY($1) "
			"AND state IN ('failed', 'cancelled') ORDER BY finished DESC LIMIT $2)",
			2, (Oid[]) {INT8ARRAYOID, INT4OID},
			(Datum[]) {PointerGetDatum(construct_array(ids, n, INT8OID, 8, true, TYPALIGN_DOUBLE)),
				Int32GetDatum(dml_checkpoint_retention)},
			NULL, SPI_OK_SELECT);
	foreach(lc, have)
	{
		int64		id = *(int64 *) lfirst(lc);
		bool		keep = false;

		for (uint64 i = 0; i < SPI_processed && !keep; i++)
			keep = DatumGetInt64(spi_col(i, 1, &isnull)) == id;
		if (!keep)
			DmlCheckpointDrop(id);
	}
}

/* the job's end after an error, in a transaction of its own */
static void
record_failure(DmlClaimedJob *cj, ErrorData *edata)
{
	OwnerSpi	o;
	bool		cancelled = edata->sqlerrcode == ERRCODE_QUERY_CANCELED;
	int			epoch,
				epochs;
	double		loss,
				metric,
				rps;
	Oid			types[10] = {INT8OID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT4OID,
	FLOAT8OID, FLOAT8OID, FLOAT8OID, INT4OID};
	Datum		values[10];
	char		nulls[10] = "          ";

	DmlProgressLast(&epoch, &epochs, &loss, &metric, &rps);
	values[0] = Int64GetDatum(cj->id);
	values[1] = CStringGetTextDatum(cancelled ? "cancelled" : "failed");
	values[2] = CStringGetTextDatum(edata->message ? edata->message : "unknown error");
	values[3] = edata->detail ? CStringGetTextDatum(edata->detail) : (Datum) 0;
	if (edata->detail == NULL)
		nulls[3] = 'n';
	values[4] = CStringGetTextDatum(unpack_sql_state(edata->sqlerrcode));
	values[5] = Int32GetDatum(epoch);
	values[6] = Float8GetDatum(loss);
	values[7] = Float8GetDatum(metric);
	values[8] = Float8GetDatum(rps);
	values[9] = Int32GetDatum(epochs);
	if (epochs == 0)
		nulls[9] = 'n';
	if (epoch == 0)
		nulls[5] = nulls[6] = nulls[7] = nulls[8] = 'n';
	for (int i = 6; i < 9; i++)
		if (isnan(DatumGetFloat8(values[i])))
			nulls[i] = 'n';

	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	owner_begin(&o);
	spi_run("UPDATE dml.job_runs SET state = $2, finished = pg_catalog.clock_timestamp(), "
			"error_message = $3, error_detail = $4, error_sqlstate = $5, "
			"epoch = $6, loss = $7, metric = $8, rows_per_second = $9, epochs = $10 WHERE id = $1",
			10, types, values, nulls, SPI_OK_UPDATE);
	sweep_checkpoints();
	owner_end(&o);
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/* run a claimed job to its end and record it */
static void
run_job(DmlClaimedJob *cj)
{
	MemoryContext cxt = CurrentMemoryContext;

	pgstat_report_activity(STATE_RUNNING, psprintf("dml: job " INT64_FORMAT ", training \"%s\"",
												   cj->id, cj->name));
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	PG_TRY();
	{
		Oid			fn;
		NullableDatum args[DML_TRAIN_NARGS];
		bool		isnull;
		Datum		result;
		int			after;

		apply_settings(cj->settings);
		if (cj->tune)
		{
			/*
			 * A search: no durable checkpoints (a checkpoint belongs to
			 * one training, and a search trains many); resumed, it starts
			 * over, to the same trials.
			 */
			NullableDatum targs[DML_TUNE_NARGS];

			fn = DmlTuneFunction();
			decode_args(func_argnames(fn, DML_TUNE_NARGS), cj->args, cj->relation, targs,
						DML_TUNE_NARGS, DmlTuneArgTypes);
			record_tune_success(cj, DmlTuneRun(targs));
			PopActiveSnapshot();
			CommitTransactionCommand();
			DmlJobWakeWaiters(cj->id);
		}
		else
		{
			fn = DmlTrainFunction();
			decode_args(func_argnames(fn, DML_TRAIN_NARGS), cj->args, cj->relation, args,
						DML_TRAIN_NARGS, train_argtypes);
			after = DmlCheckpointBegin();
			if (after > 0)
				ereport(LOG, (errmsg("dml job " INT64_FORMAT " resumes after epoch %d", cj->id, after)));
			result = DmlCallTrain(fn, args, false, &isnull);
			if (isnull)
				elog(ERROR, "dml: dml_train returned NULL. Please report a bug.");
			DmlCheckpointEnd();
			record_success(cj, DatumGetHeapTupleHeader(result));
			PopActiveSnapshot();
			CommitTransactionCommand();
			DmlJobWakeWaiters(cj->id);
			/* a finished job needs its checkpoint no more */
			DmlCheckpointDrop(cj->id);
		}
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		HOLD_INTERRUPTS();
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		DmlCheckpointEnd();
		record_failure(cj, edata);
		DmlJobWakeWaiters(cj->id);
		RESUME_INTERRUPTS();
		ereport(LOG,
				(errmsg("dml job " INT64_FORMAT " %s: %s", cj->id,
						edata->sqlerrcode == ERRCODE_QUERY_CANCELED ? "cancelled" : "failed",
						edata->message)));
	}
	PG_END_TRY();
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * dml_job_main
 *		A job's background worker: log in as the job's owner, wait for the
 *		submitting transaction, claim the job or leave it queued, run it,
 *		and pass the turn on.
 */
void
dml_job_main(Datum main_arg)
{
	DmlJobLaunch l;
	DmlClaimedJob cj;
	bool		claimed;

	memcpy(&l, MyBgworkerEntry->bgw_extra, sizeof(l));
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(l.database, l.owner, 0);
	DmlCurrentJobId = l.job;
	SetConfigOption("application_name", MyBgworkerEntry->bgw_name, PGC_USERSET, PGC_S_SESSION);

	StartTransactionCommand();
	if (TransactionIdIsValid(l.wait_xid))
		XactLockTableWait(l.wait_xid, NULL, NULL, XLTW_None);
	PushActiveSnapshot(GetTransactionSnapshot());
	if (!OidIsValid(DmlExtensionSchema()))
		claimed = false;		/* the extension was dropped meanwhile */
	else
		claimed = jobs_claim_and_kick(l.job, &cj);
	PopActiveSnapshot();
	CommitTransactionCommand();

	if (claimed)
	{
		Oid		   *dbs;
		int			n;

		run_job(&cj);
		/* our place is free: the next in line here, then in the databases waiting */
		DmlReleaseRunSlot();
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		jobs_claim_and_kick(0, &cj);
		PopActiveSnapshot();
		CommitTransactionCommand();
		dbs = DmlJobsTakeWaiting(&n);
		for (int i = 0; i < n; i++)
			if (dbs[i] != MyDatabaseId)
				launch_kick(dbs[i]);
	}
	proc_exit(0);
}

/* ---------------------------------------------------------------------
 * SQL functions
 * --------------------------------------------------------------------- */

/* the row of a job the caller may see, or an error; as the owner */
static void
read_job(int64 job, Oid *owner, char **state, int *pid)
{
	OwnerSpi	o;
	bool		isnull;
	bool		found;

	owner_begin(&o);
	spi_run("SELECT owner, state, pid FROM dml.job_runs WHERE id = $1",
			1, (Oid[]) {INT8OID}, (Datum[]) {Int64GetDatum(job)}, NULL, SPI_OK_SELECT);
	found = SPI_processed == 1;
	if (found)
	{
		*owner = DatumGetObjectId(spi_col(0, 1, &isnull));
		*state = TextDatumGetCString(spi_col(0, 2, &isnull));
		*pid = DatumGetInt32(spi_col(0, 3, &isnull));
		if (isnull)
			*pid = 0;
	}
	owner_end(&o);
	/* another role's job is as good as absent */
	if (!found || !has_privs_of_role(GetUserId(), *owner))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("job " INT64_FORMAT " does not exist", job),
				 errhint("dml.jobs lists the jobs of the roles whose privileges you have.")));
}

/* a job's worker logs in as its owner: the role must be able to */
static void
check_can_login(Oid role)
{
	HeapTuple	tup = SearchSysCache1(AUTHOID, ObjectIdGetDatum(role));
	bool		ok = false;

	if (HeapTupleIsValid(tup))
	{
		ok = ((Form_pg_authid) GETSTRUCT(tup))->rolcanlogin;
		ReleaseSysCache(tup);
	}
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" cannot log in, so it cannot run background jobs",
						GetUserNameFromId(role, true) ? GetUserNameFromId(role, true) : "?"),
				 errdetail("A job's background worker logs in as the role that submitted the job."),
				 errhint("Use dml_train, or give the role LOGIN.")));
}

/*
 * dml_train_async
 *		Check the arguments as dml_train does, queue the job, and return its
 *		id.  Its worker starts when this transaction commits.
 */
/* queue a job of function (dml_train or dml_tune) with its encoded arguments */
static int64
queue_job(FunctionCallInfo fcinfo, const char *function, Jsonb *args)
{
	Oid			owner = GetUserId();
	bool		isnull;
	OwnerSpi	o;
	int64		job;
	int64		queued;
	Jsonb	   *settings;

	check_can_login(owner);
	settings = encode_settings();

	owner_begin(&o);
	spi_run(DML_LOCK_SUBMIT, 1, (Oid[]) {INT4OID}, (Datum[]) {Int32GetDatum((int32) owner)},
			NULL, SPI_OK_SELECT);
	spi_run("SELECT pg_catalog.count(*) FROM dml.job_runs WHERE owner = $1 AND state = 'queued'",
			1, (Oid[]) {OIDOID}, (Datum[]) {ObjectIdGetDatum(owner)}, NULL, SPI_OK_SELECT);
	queued = DatumGetInt64(spi_col(0, 1, &isnull));
	if (queued >= dml_max_queued_jobs)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("role \"%s\" has too many queued jobs", GetUserNameFromId(owner, false)),
				 errdetail("%lld jobs are queued; dml.max_queued_jobs is %d.",
						   (long long) queued, dml_max_queued_jobs),
				 errhint("Wait for queued jobs to start, cancel some with dml_cancel, or ask a superuser to raise dml.max_queued_jobs.")));
	spi_run("INSERT INTO dml.job_runs (name, owner, relation, args, settings, function) "
			"VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
			6, (Oid[]) {TEXTOID, OIDOID, OIDOID, JSONBOID, JSONBOID, TEXTOID},
			(Datum[]) {PG_GETARG_DATUM(0), ObjectIdGetDatum(owner), PG_GETARG_DATUM(1),
				JsonbPGetDatum(args), JsonbPGetDatum(settings), CStringGetTextDatum(function)},
			NULL, SPI_OK_INSERT_RETURNING);
	job = DatumGetInt64(spi_col(0, 1, &isnull));
	owner_end(&o);

	/* it waits for this transaction; a rollback leaves it nothing to do */
	launch_worker(job, owner, GetTopTransactionId());
	return job;
}

/*
 * dml_train_async
 *		Check the arguments as dml_train does, queue the job, and return its
 *		id.  Its worker starts when this transaction commits.
 */
PG_FUNCTION_INFO_V1(dml_train_async);

Datum
dml_train_async(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	Oid			fn = DmlTrainFunction();
	char	  **names = func_argnames(fn, DML_TRAIN_NARGS);
	bool		isnull;

	if (PG_NARGS() != DML_TRAIN_NARGS)
		elog(ERROR, "dml: dml_train_async has an unexpected signature. Please report a bug.");
	(void) DmlCallTrain(fn, fcinfo->args, true, &isnull);
	PG_RETURN_INT64(queue_job(fcinfo, "dml_train",
							  encode_args(names, fcinfo->args, DML_TRAIN_NARGS, train_argtypes)));
}

/*
 * dml_tune_async
 *		Check a search as dml_tune does (search, strategy, the first
 *		configuration), queue it as a job, and return its id.  Its trials
 *		show in dml.progress as they run.
 */
PG_FUNCTION_INFO_V1(dml_tune_async);

Datum
dml_tune_async(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	Oid			fn = DmlTuneFunction();
	char	  **names = func_argnames(fn, DML_TUNE_NARGS);

	if (PG_NARGS() != DML_TUNE_NARGS)
		elog(ERROR, "dml: dml_tune_async has an unexpected signature. Please report a bug.");
	DmlTuneCheck(fcinfo->args);
	PG_RETURN_INT64(queue_job(fcinfo, "dml_tune",
							  encode_args(names, fcinfo->args, DML_TUNE_NARGS, DmlTuneArgTypes)));
}

/*
 * dml_resume
 *		Queue a failed or cancelled job again, as its owner, to continue
 *		from its kept checkpoint (from the beginning when there is none):
 *		the same arguments and settings, so the same model as a run that
 *		was never interrupted, if the data did not change.  It keeps its
 *		id, so its place in the queue.
 */
PG_FUNCTION_INFO_V1(dml_resume);

Datum
dml_resume(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	int64		job = PG_GETARG_INT64(0);
	Oid			owner;
	char	   *state;
	int			pid;
	OwnerSpi	o;
	bool		done;

	read_job(job, &owner, &state, &pid);
	check_can_login(owner);
	owner_begin(&o);
	jobs_settle();
	spi_run(DML_REQUEUE "WHERE id = $1 AND state IN ('failed', 'cancelled') RETURNING state",
			1, (Oid[]) {INT8OID}, (Datum[]) {Int64GetDatum(job)}, NULL, SPI_OK_UPDATE_RETURNING);
	done = SPI_processed == 1;
	owner_end(&o);
	if (!done)
	{
		read_job(job, &owner, &state, &pid);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("job " INT64_FORMAT " is %s", job, state),
				 errhint("Only a failed or cancelled job can be resumed.")));
	}
	launch_worker(job, owner, GetTopTransactionId());
	PG_RETURN_INT64(job);
}

/*
 * dml_cancel
 *		End a queued or running job (its owner, a member of the owner, or a
 *		superuser).  A running job's worker gets a query cancel, stops its
 *		workers, records the job cancelled and exits; this waits for that.
 *		Returns false when the job had already ended.
 */
PG_FUNCTION_INFO_V1(dml_cancel);

Datum
dml_cancel(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	int64		job = PG_GETARG_INT64(0);
	Oid			owner;
	char	   *state;
	int			pid;
	OwnerSpi	o;
	bool		done;
	TimestampTz deadline;
	PGPROC	   *proc;

	read_job(job, &owner, &state, &pid);
	if (strcmp(state, "queued") == 0)
	{
		owner_begin(&o);
		spi_run("UPDATE dml.job_runs SET state = 'cancelled', finished = pg_catalog.clock_timestamp(), "
				"error_message = 'cancelled before it started', error_sqlstate = '57014' "
				"WHERE id = $1 AND state = 'queued'",
				1, (Oid[]) {INT8OID}, (Datum[]) {Int64GetDatum(job)}, NULL, SPI_OK_UPDATE);
		done = SPI_processed == 1;
		owner_end(&o);
		if (done)
			PG_RETURN_BOOL(true);
		read_job(job, &owner, &state, &pid);	/* it has just started */
	}
	if (strcmp(state, "running") != 0 || pid == 0)
		PG_RETURN_BOOL(false);

	proc = BackendPidGetProc(pid);
	if (proc == NULL || proc->roleId != owner || proc->databaseId != MyDatabaseId)
		PG_RETURN_BOOL(false);	/* its process is gone: dml.jobs says failed */
	if (kill(pid, SIGINT) != 0)
		ereport(ERROR,
				(errmsg("could not send a cancel to the worker of job " INT64_FORMAT ": %m", job)));
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), DML_CANCEL_WAIT_S * 1000);
	while (BackendPidGetProc(pid) != NULL && GetCurrentTimestamp() < deadline)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 20, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	PG_RETURN_BOOL(true);
}

/*
 * A job submitted or resumed in this transaction starts when it commits:
 * waiting for it here would wait forever.
 */
static void
check_not_ours(int64 job)
{
	OwnerSpi	o;
	bool		isnull;
	bool		ours = false;

	owner_begin(&o);
	spi_run("SELECT xmin FROM dml.job_runs WHERE id = $1",
			1, (Oid[]) {INT8OID}, (Datum[]) {Int64GetDatum(job)}, NULL, SPI_OK_SELECT);
	if (SPI_processed == 1)
		ours = TransactionIdIsCurrentTransactionId(DatumGetTransactionId(spi_col(0, 1, &isnull)));
	owner_end(&o);
	if (ours)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("job " INT64_FORMAT " starts when this transaction commits", job),
				 errhint("Call dml_wait after COMMIT.")));
}

/*
 * dml_wait
 *		Wait until a job ends, or until timeout, and return its dml.jobs row.
 *		Each look is a new snapshot, so this needs READ COMMITTED.
 */
PG_FUNCTION_INFO_V1(dml_wait);

Datum
dml_wait(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	int64		job;
	TimestampTz deadline = 0;
	TimestampTz last_kick = GetCurrentTimestamp();
	int			waiter;
	Datum		result = (Datum) 0;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	job = PG_GETARG_INT64(0);

	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("dml_wait cannot wait inside a REPEATABLE READ or SERIALIZABLE transaction"),
				 errdetail("Such a transaction would never see the job end."),
				 errhint("Call dml_wait in a READ COMMITTED transaction.")));
	if (!PG_ARGISNULL(1))
	{
		Interval   *iv = PG_GETARG_INTERVAL_P(1);
		double		secs = iv->time / 1e6 + (iv->day + iv->month * 30.0) * 86400;

		deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), (int64) (secs * 1000));
	}
	check_not_ours(job);
	waiter = DmlJobWaitBegin(job);
	PG_TRY();
	{
		for (;;)
		{
			HeapTuple	row;
			bool		isnull;
			char	   *state;
			bool		end,
						queued;

			SPI_connect();
			spi_run("SELECT * FROM dml.jobs WHERE id = $1",
					1, (Oid[]) {INT8OID}, (Datum[]) {Int64GetDatum(job)}, NULL, SPI_OK_SELECT);
			if (SPI_processed != 1)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_OBJECT),
						 errmsg("job " INT64_FORMAT " does not exist", job),
						 errhint("dml.jobs lists the jobs of the roles whose privileges you have.")));
			row = SPI_tuptable->vals[0];
			state = TextDatumGetCString(SPI_getbinval(row, SPI_tuptable->tupdesc,
													  SPI_fnumber(SPI_tuptable->tupdesc, "state"),
													  &isnull));
			/* state is SPI's memory, gone at SPI_finish */
			queued = strcmp(state, "queued") == 0;
			end = !queued && strcmp(state, "running") != 0;
			if (end || (deadline != 0 && GetCurrentTimestamp() >= deadline))
			{
				result = PointerGetDatum(SPI_returntuple(row, SPI_tuptable->tupdesc));
				SPI_finish();
				break;
			}
			SPI_finish();
			if (queued &&
				TimestampDifferenceExceeds(last_kick, GetCurrentTimestamp(), DML_KICK_EVERY_MS))
			{
				jobs_kick();
				last_kick = GetCurrentTimestamp();
			}
			/* the job's worker sets the latch at the end; the timeout is a fallback */
			{
				long		wait_ms = DML_JOB_POLL_MS;

				if (deadline != 0)
				{
					long		left = (long) ((deadline - GetCurrentTimestamp()) / 1000) + 1;

					wait_ms = Min(wait_ms, Max(left, 1));
				}
				if (queued)
					wait_ms = Min(wait_ms, DML_JOB_QUEUED_POLL_MS);
				(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
								 wait_ms, PG_WAIT_EXTENSION);
			}
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_FINALLY();
	{
		DmlJobWaitEnd(waiter);
	}
	PG_END_TRY();
	PG_RETURN_DATUM(result);
}

#define DML_JOB_EPOCH_COLS	14

/* order of live rows: by restarts, then epoch, then as they came */
static int
cmp_job_epoch(const void *a, const void *b)
{
	const DmlJobEpoch *x = a;
	const DmlJobEpoch *y = b;

	if (x->restarts != y->restarts)
		return x->restarts < y->restarts ? -1 : 1;
	if (x->epoch != y->epoch)
		return x->epoch < y->epoch ? -1 : 1;
	return x->recorded < y->recorded ? -1 : x->recorded > y->recorded ? 1 : 0;
}

/* a float8 column, NULL for NaN */
static void
epoch_float(Datum *values, bool *nulls, int i, double v)
{
	nulls[i] = isnan(v);
	values[i] = Float8GetDatum(v);
}

/*
 * dml_job_epochs(job)
 *		A job's dml.epochs rows, for the roles that may see the job: while
 *		it runs (or after it failed), the rows its worker has written so
 *		far, from the live file (checkpoint.c); once it succeeded, its
 *		model's rows in dml.epochs, which its commit stored.
 */
PG_FUNCTION_INFO_V1(dml_job_epochs);

Datum
dml_job_epochs(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int64		job = PG_GETARG_INT64(0);
	Oid			owner;
	char	   *state;
	int			pid;

	InitMaterializedSRF(fcinfo, 0);
	read_job(job, &owner, &state, &pid);
	if (strcmp(state, "succeeded") == 0)
	{
		OwnerSpi	o;

		owner_begin(&o);
		spi_run("SELECT e.restarts, e.epoch, e.loss, e.val_loss, e.val_metric, e.rows_per_second, "
				"e.seconds, e.bytes_sent, e.staleness, e.recorded, e.stopped, e.bytes_within, "
				"e.bytes_across, e.hosts FROM dml.epochs e JOIN dml.job_runs j "
				"ON j.model_id OPERATOR(pg_catalog.=) e.model_id "
				"WHERE j.id OPERATOR(pg_catalog.=) $1 ORDER BY e.restarts, e.epoch",
				1, (Oid[]) {INT8OID}, (Datum[]) {Int64GetDatum(job)}, NULL, SPI_OK_SELECT);
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			Datum		values[DML_JOB_EPOCH_COLS];
			bool		nulls[DML_JOB_EPOCH_COLS];

			heap_deform_tuple(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, values, nulls);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
		owner_end(&o);
	}
	else
	{
		int			n;
		DmlJobEpoch *rows = DmlJobEpochsRead(job, &n);

		if (n > 1)
			qsort(rows, n, sizeof(DmlJobEpoch), cmp_job_epoch);
		for (int r = 0; r < n; r++)
		{
			DmlJobEpoch *e = &rows[r];
			Datum		values[DML_JOB_EPOCH_COLS];
			bool		nulls[DML_JOB_EPOCH_COLS] = {0};

			/* a restart's repeated row: the first stays, as in dml.epochs */
			if (r > 0 && e->restarts == rows[r - 1].restarts && e->epoch == rows[r - 1].epoch)
				continue;
			values[0] = Int32GetDatum(e->restarts);
			values[1] = Int32GetDatum(e->epoch);
			epoch_float(values, nulls, 2, e->loss);
			epoch_float(values, nulls, 3, e->val_loss);
			epoch_float(values, nulls, 4, e->val_metric);
			epoch_float(values, nulls, 5, e->rows_per_second);
			epoch_float(values, nulls, 6, e->seconds);
			values[7] = Int64GetDatum((int64) e->bytes_sent);
			values[8] = Int32GetDatum(isnan(e->staleness) ? 0 : (int32) e->staleness);
			nulls[8] = isnan(e->staleness);
			values[9] = TimestampTzGetDatum(e->recorded);
			nulls[10] = true;	/* stopped: written on the last epoch at the end */
			values[11] = Int64GetDatum((int64) (e->bytes_sent - e->bytes_across));
			values[12] = Int64GetDatum((int64) e->bytes_across);
			nulls[13] = true;	/* hosts: in dml.epochs once stored */
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	return (Datum) 0;
}

/* dml.job_visible(owner): may the caller see a job of owner? */
PG_FUNCTION_INFO_V1(dml_job_visible);

Datum
dml_job_visible(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	PG_RETURN_BOOL(has_privs_of_role(GetUserId(), PG_GETARG_OID(0)));
}

/*
 * dml.job_lost(pid, owner, server_started): NULL while the process that
 * claimed a running job lives, else why the job ended
 */
PG_FUNCTION_INFO_V1(dml_job_lost);

Datum
dml_job_lost(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	PGPROC	   *proc;

	if (PG_ARGISNULL(2) || PG_GETARG_TIMESTAMPTZ(2) != PgStartTime)
		PG_RETURN_TEXT_P(cstring_to_text("the server restarted while the job ran"));
	proc = PG_ARGISNULL(0) ? NULL : BackendPidGetProc(PG_GETARG_INT32(0));
	if (proc != NULL && !PG_ARGISNULL(1) && proc->roleId == PG_GETARG_OID(1))
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text("the job's process ended while it ran (it was terminated, or the server crashed)"));
}

/*
 * DmlJobsInit
 *		From _PG_init: the settings of jobs.
 */
void
DmlJobsInit(void)
{
	DefineCustomIntVariable("dml.max_concurrent_jobs",
							"Most background training jobs that run at once in the cluster, all databases together; the rest wait, in order within a database.",
							NULL,
							&dml_max_concurrent_jobs,
							DML_DEFAULT_MAX_CONCURRENT_JOBS, DML_MIN_MAX_CONCURRENT_JOBS,
							DML_MAX_MAX_CONCURRENT_JOBS,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("dml.max_queued_jobs",
							"Most background training jobs one role may have queued.",
							NULL,
							&dml_max_queued_jobs,
							DML_DEFAULT_MAX_QUEUED_JOBS, DML_MIN_MAX_QUEUED_JOBS,
							DML_MAX_MAX_QUEUED_JOBS,
							PGC_SUSET, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("dml.checkpoint_seconds",
							"Least seconds between the checkpoints a background job keeps durably.",
							NULL,
							&dml_checkpoint_seconds,
							DML_DEFAULT_CHECKPOINT_SECONDS, 0, 86400,
							PGC_USERSET, GUC_UNIT_S, NULL, NULL, NULL);
	DefineCustomIntVariable("dml.checkpoint_retention",
							"Failed or cancelled jobs of a database that keep their checkpoint for dml_resume, the newest first.",
							NULL,
							&dml_checkpoint_retention,
							DML_DEFAULT_CHECKPOINT_RETENTION, 0, 100000,
							PGC_SIGHUP, 0, NULL, NULL, NULL);
}
