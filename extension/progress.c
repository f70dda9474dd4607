/*-------------------------------------------------------------------------
 *
 * progress.c
 *	  dml.progress: one row per training running anywhere in the cluster,
 *	  synchronous dml_train calls and background jobs alike, read from
 *	  shared memory, so another session sees it without waiting for a
 *	  commit.
 *
 * The table is a fixed array of DML_PROGRESS_SLOTS slots, each guarded by
 * its own spinlock.  A training takes a slot when it starts (after its
 * checks, before its workers launch), writes it at every epoch's progress
 * message, and frees it when it ends: at the end of dml_train, on abort
 * (a transaction callback) and on process exit (a before_shmem_exit
 * callback).  A slot whose process is gone (SIGKILL, a crash) is freed by
 * the next reader.
 *
 * Where the memory comes from:
 *
 *	 preloaded (shared_preload_libraries = 'dml'): requested in
 *	 _PG_init through shmem_request_hook and created by shmem_startup_hook,
 *	 the ordinary way.
 *
 *	 not preloaded: PostgreSQL 15 has no DSM registry, so the first backend
 *	 that needs the table creates it with ShmemInitStruct out of the slack
 *	 the postmaster leaves in the main segment (about 100 kB; the table is
 *	 about 40 kB), and every later backend finds it by name.  If the slack
 *	 is gone (other extensions took it), trainings run unseen: dml.progress
 *	 is empty and a WARNING says once per backend why.  dml.jobs still
 *	 shows the state of background jobs from its table either way.
 *
 * The table also lists the backends waiting in dml_wait, whose latches a
 * job's worker sets once it has committed the job's end.
 *
 * Also reported the standard way: pg_stat_activity's query of the
 * training process names the training and its epoch while it runs.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "compat.h"

#include <math.h>

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "dml.h"
#include "hosts.h"
#include "jobs.h"

#define DML_PROGRESS_SLOTS	64
#define DML_PROGRESS_NAME	201		/* model names have at most 200 bytes */
#define DML_PROGRESS_HOSTS	64
#define DML_PROGRESS_COLS	19

typedef struct DmlProgressSlot
{
	slock_t		mutex;
	pid_t		pid;			/* 0: free */
	Oid			database;
	Oid			owner;
	int64		job;			/* background job id, 0 for dml_train */
	char		name[DML_PROGRESS_NAME];
	char		hosts[DML_PROGRESS_HOSTS];
	int			ranks;			/* 0: solved inside the server */
	int			epoch;			/* last finished epoch, 0 before the first */
	int			epochs;
	int			step;			/* steps done of the epoch after it (rank 0's) */
	int			steps;			/* steps per epoch, 0 until rank 0 says */
	int			restarts;
	double		loss;
	double		metric;			/* validation accuracy or R2, NaN without */
	double		rows_per_second;
	TimestampTz started;
	TimestampTz updated;
} DmlProgressSlot;

/* a backend in dml_wait, woken when the job's worker has recorded its end */
typedef struct DmlJobWaiter
{
	int64		job;			/* 0: free */
	int			procno;
} DmlJobWaiter;

typedef struct DmlProgressTable
{
	int			nslots;
	DmlProgressSlot slots[DML_PROGRESS_SLOTS];
	slock_t		waiters_mutex;
	DmlJobWaiter waiters[DML_PROGRESS_SLOTS];
	/* databases with a queued job that found every run slot taken */
	Oid			waiting_dbs[DML_PROGRESS_SLOTS];
} DmlProgressTable;

static DmlProgressTable *progress_table = NULL;
static bool progress_unavailable = false;
static DmlProgressSlot *my_slot = NULL;
static bool callbacks_registered = false;
/* what this process last reported, kept after its slot is freed */
static int	last_epoch = 0,
			last_epochs = 0;
static double last_loss = NAN,
			last_metric = NAN,
			last_rows_per_second = NAN;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* ---------------------------------------------------------------------
 * Shared memory
 * --------------------------------------------------------------------- */

/* create or find the table; caller holds AddinShmemInitLock */
static void
progress_attach_locked(void)
{
	bool		found;

	progress_table = ShmemInitStruct("dml progress", sizeof(DmlProgressTable), &found);
	if (!found)
	{
		progress_table->nslots = DML_PROGRESS_SLOTS;
		for (int i = 0; i < DML_PROGRESS_SLOTS; i++)
		{
			SpinLockInit(&progress_table->slots[i].mutex);
			progress_table->slots[i].pid = 0;
			progress_table->waiters[i].job = 0;
			progress_table->waiting_dbs[i] = InvalidOid;
		}
		SpinLockInit(&progress_table->waiters_mutex);
	}
}

static void
progress_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(DmlProgressTable)));
}

static void
progress_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	progress_attach_locked();
	LWLockRelease(AddinShmemInitLock);
}

/*
 * The table, created on first use when the library was not preloaded;
 * NULL when there is no room for it.
 */
static DmlProgressTable *
progress_get(void)
{
	MemoryContext cxt = CurrentMemoryContext;

	if (progress_table != NULL || progress_unavailable)
		return progress_table;
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	PG_TRY();
	{
		progress_attach_locked();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		/* ShmemInitStruct releases its own lock before it throws */
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		progress_table = NULL;
		progress_unavailable = true;
		ereport(WARNING,
				(errmsg("dml.progress is not available: %s", edata->message),
				 errhint("Add dml to shared_preload_libraries to reserve its shared memory at startup.")));
	}
	PG_END_TRY();
	LWLockRelease(AddinShmemInitLock);
	return progress_table;
}

/* ---------------------------------------------------------------------
 * Writers
 * --------------------------------------------------------------------- */

/* free this process's slot and put its query back in pg_stat_activity */
static void
progress_release(void)
{
	if (my_slot == NULL)
		return;
	SpinLockAcquire(&my_slot->mutex);
	if (my_slot->pid == MyProcPid)
		my_slot->pid = 0;
	SpinLockRelease(&my_slot->mutex);
	my_slot = NULL;
	if (DmlCurrentJobId == 0 && debug_query_string != NULL)
		pgstat_report_activity(STATE_RUNNING, debug_query_string);
}

static void
progress_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		progress_release();
}

static void
progress_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						  SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		progress_release();
}

static void
progress_exit_callback(int code, Datum arg)
{
	progress_release();
}

/* pg_stat_activity's query for the training */
static void
progress_report_activity(DmlProgressSlot *s)
{
	char		buf[DML_PROGRESS_NAME + 128];

	if (s->epoch == 0 && s->steps == 0)
		snprintf(buf, sizeof(buf), "dml: training \"%s\", starting", s->name);
	else if (s->epoch == 0)
		snprintf(buf, sizeof(buf), "dml: training \"%s\", epoch 1 of %d: step %d of %d",
				 s->name, s->epochs, s->step, s->steps);
	else if (s->steps == 0 || s->epoch >= s->epochs)
		snprintf(buf, sizeof(buf), "dml: training \"%s\", epoch %d of %d, loss %.6g",
				 s->name, s->epoch, s->epochs, s->loss);
	else
		snprintf(buf, sizeof(buf), "dml: training \"%s\", epoch %d of %d, loss %.6g; epoch %d: step %d of %d",
				 s->name, s->epoch, s->epochs, s->loss, s->epoch + 1, s->step, s->steps);
	pgstat_report_activity(STATE_RUNNING, buf);
}

/*
 * DmlProgressBegin
 *		Take a slot for the training job is about to run.  A training with
 *		no free slot runs unseen.
 */
void
DmlProgressBegin(const DmlJob *job, bool in_server)
{
	DmlProgressTable *t = progress_get();
	DmlProgressSlot *s = NULL;
	const char *hosts = "localhost";

	progress_release();
	last_epoch = 0;
	last_epochs = job->epochs;
	last_loss = last_metric = last_rows_per_second = NAN;
	if (t == NULL)
		return;
	if (!callbacks_registered)
	{
		RegisterXactCallback(progress_xact_callback, NULL);
		RegisterSubXactCallback(progress_subxact_callback, NULL);
		before_shmem_exit(progress_exit_callback, 0);
		callbacks_registered = true;
	}
	for (int i = 0; i < t->nslots && s == NULL; i++)
	{
		DmlProgressSlot *c = &t->slots[i];
		pid_t		pid;

		SpinLockAcquire(&c->mutex);
		pid = c->pid;
		SpinLockRelease(&c->mutex);
		/* a slot is free, or its process is gone (no cleanup after SIGKILL) */
		if (pid != 0 && (pid == MyProcPid || BackendPidGetProc(pid) != NULL))
			continue;
		SpinLockAcquire(&c->mutex);
		if (c->pid == pid)
		{
			c->pid = MyProcPid;
			s = c;
		}
		SpinLockRelease(&c->mutex);
	}
	if (s == NULL)
	{
		ereport(DEBUG1, (errmsg("dml.progress has no free slot; this training runs unseen")));
		return;
	}
	if (job->hosts != NIL)
	{
		StringInfoData buf;
		ListCell   *lc;

		initStringInfo(&buf);
		foreach(lc, job->hosts)
			appendStringInfo(&buf, "%s%s", buf.len ? ", " : "", ((DmlHost *) lfirst(lc))->name);
		hosts = buf.data;
	}
	SpinLockAcquire(&s->mutex);
	s->database = MyDatabaseId;
	s->owner = GetUserId();
	s->job = DmlCurrentJobId;
	strlcpy(s->name, job->name, sizeof(s->name));
	strlcpy(s->hosts, hosts, sizeof(s->hosts));
	s->ranks = in_server ? 0 : job->workers;
	s->epoch = 0;
	s->epochs = job->epochs;
	s->step = 0;
	s->steps = 0;
	s->restarts = 0;
	s->loss = NAN;
	s->metric = NAN;
	s->rows_per_second = NAN;
	s->started = s->updated = GetCurrentTimestamp();
	SpinLockRelease(&s->mutex);
	my_slot = s;
	progress_report_activity(s);
}

/* DmlProgressEpoch: an epoch's progress message arrived */
void
DmlProgressEpoch(const DmlProgress *p, double rows_per_second)
{
	DmlProgressSlot *s = my_slot;

	last_epoch = p->epoch;
	last_loss = p->loss;
	last_metric = p->val_metric;
	last_rows_per_second = rows_per_second;
	if (s == NULL)
		return;
	SpinLockAcquire(&s->mutex);
	s->epoch = p->epoch;
	s->step = 0;				/* of the next epoch */
	s->restarts = p->restarts;
	s->loss = p->loss;
	s->metric = p->val_metric;
	s->rows_per_second = rows_per_second;
	s->updated = GetCurrentTimestamp();
	SpinLockRelease(&s->mutex);
	progress_report_activity(s);
}

/*
 * DmlProgressStep: rank 0 is step steps into epoch (1-based), of steps
 * (the coordinator's DmlStepHook)
 */
static void
progress_step(int epoch, int step, int steps)
{
	DmlProgressSlot *s = my_slot;
	bool		changed = false;

	if (s == NULL || steps <= 0 || step < 0 || step > steps)
		return;
	SpinLockAcquire(&s->mutex);
	/* a late message of an epoch already reported changes nothing */
	if (epoch == s->epoch + 1)
	{
		s->step = step;
		s->steps = steps;
		changed = true;
	}
	SpinLockRelease(&s->mutex);
	if (changed)
		progress_report_activity(s);
}

/* DmlProgressEnd: the training finished (its model is stored) */
void
DmlProgressEnd(void)
{
	progress_release();
}

/* DmlProgressLast: the last epoch this process reported, 0 if none */
void
DmlProgressLast(int *epoch, int *epochs, double *loss, double *metric,
				double *rows_per_second)
{
	*epoch = last_epoch;
	*epochs = last_epochs;
	*loss = last_loss;
	*metric = last_metric;
	*rows_per_second = last_rows_per_second;
}

/*
 * DmlJobWaitBegin
 *		This backend waits for job's end: its latch is set when the job's
 *		worker has committed it.  Returns a handle for DmlJobWaitEnd, -1
 *		when there is no room (the caller still polls).
 */
int
DmlJobWaitBegin(int64 job)
{
	DmlProgressTable *t = progress_get();
	int			found = -1;

	if (t == NULL)
		return -1;
	SpinLockAcquire(&t->waiters_mutex);
	for (int i = 0; i < DML_PROGRESS_SLOTS && found < 0; i++)
		if (t->waiters[i].job == 0)
		{
			t->waiters[i].job = job;
			t->waiters[i].procno = DML_MY_PROCNO;
			found = i;
		}
	SpinLockRelease(&t->waiters_mutex);
	return found;
}

void
DmlJobWaitEnd(int handle)
{
	if (handle < 0 || progress_table == NULL)
		return;
	SpinLockAcquire(&progress_table->waiters_mutex);
	progress_table->waiters[handle].job = 0;
	SpinLockRelease(&progress_table->waiters_mutex);
}

/*
 * DmlJobsNoteWaiting
 *		This database has a queued job that may find no run slot: the next
 *		job to end, in any database, starts its queue (DmlJobsTakeWaiting).
 *		Noted before the slot is tried, so an end between the two is seen.
 */
void
DmlJobsNoteWaiting(void)
{
	DmlProgressTable *t = progress_get();
	int			free_at = -1;

	if (t == NULL)
		return;
	SpinLockAcquire(&t->waiters_mutex);
	for (int i = 0; i < DML_PROGRESS_SLOTS; i++)
	{
		if (t->waiting_dbs[i] == MyDatabaseId)
		{
			free_at = -2;
			break;
		}
		if (free_at == -1 && !OidIsValid(t->waiting_dbs[i]))
			free_at = i;
	}
	if (free_at >= 0)
		t->waiting_dbs[free_at] = MyDatabaseId;
	SpinLockRelease(&t->waiters_mutex);
}

/* DmlJobsTakeWaiting: the databases noted, forgotten; *n of them */
Oid *
DmlJobsTakeWaiting(int *n)
{
	DmlProgressTable *t = progress_get();
	Oid		   *dbs = palloc(sizeof(Oid) * DML_PROGRESS_SLOTS);

	*n = 0;
	if (t == NULL)
		return dbs;
	SpinLockAcquire(&t->waiters_mutex);
	for (int i = 0; i < DML_PROGRESS_SLOTS; i++)
		if (OidIsValid(t->waiting_dbs[i]))
		{
			dbs[(*n)++] = t->waiting_dbs[i];
			t->waiting_dbs[i] = InvalidOid;
		}
	SpinLockRelease(&t->waiters_mutex);
	return dbs;
}

/* DmlJobWakeWaiters: job's end is committed */
void
DmlJobWakeWaiters(int64 job)
{
	DmlProgressTable *t = progress_get();
	int			procnos[DML_PROGRESS_SLOTS];
	int			n = 0;

	if (t == NULL)
		return;
	SpinLockAcquire(&t->waiters_mutex);
	for (int i = 0; i < DML_PROGRESS_SLOTS; i++)
		if (t->waiters[i].job == job)
			procnos[n++] = t->waiters[i].procno;
	SpinLockRelease(&t->waiters_mutex);
	for (int i = 0; i < n; i++)
		SetLatch(&ProcGlobal->allProcs[procnos[i]].procLatch);
}

/* ---------------------------------------------------------------------
 * The view
 * --------------------------------------------------------------------- */

/* a float column, NULL for NaN */
static void
put_float(Datum *values, bool *nulls, int i, double v)
{
	if (isnan(v))
		nulls[i] = true;
	else
		values[i] = Float8GetDatum(v);
}

/*
 * dml_progress
 *		The running trainings the caller may see: those of roles whose
 *		privileges it has, or all with pg_read_all_stats.  Estimated time
 *		left: the mean time of the finished epochs times the epochs left,
 *		less the time since the last one ended.
 */
PG_FUNCTION_INFO_V1(dml_progress);

Datum
dml_progress(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DmlProgressTable *t;
	Oid			user = GetUserId();
	bool		all = has_privs_of_role(user, ROLE_PG_READ_ALL_STATS);
	TimestampTz now = GetCurrentTimestamp();

	InitMaterializedSRF(fcinfo, 0);
	t = progress_get();
	if (t == NULL)
		return (Datum) 0;
	for (int i = 0; i < t->nslots; i++)
	{
		DmlProgressSlot s;
		Datum		values[DML_PROGRESS_COLS];
		bool		nulls[DML_PROGRESS_COLS] = {0};

		SpinLockAcquire(&t->slots[i].mutex);
		s = t->slots[i];
		SpinLockRelease(&t->slots[i].mutex);
		if (s.pid == 0 || BackendPidGetProc(s.pid) == NULL)
			continue;
		if (!all && !has_privs_of_role(user, s.owner))
			continue;
		values[0] = Int32GetDatum(s.pid);
		values[1] = Int64GetDatum(s.job);
		nulls[1] = s.job == 0;
		values[2] = ObjectIdGetDatum(s.database);
		values[3] = ObjectIdGetDatum(s.owner);
		values[4] = CStringGetTextDatum(s.name);
		values[5] = CStringGetTextDatum(s.epoch == 0 ? "starting" : "training");
		values[6] = Int32GetDatum(s.ranks);
		values[7] = CStringGetTextDatum(s.hosts);
		values[8] = Int32GetDatum(s.epoch);
		values[9] = Int32GetDatum(s.epochs);
		values[10] = Int32GetDatum(s.restarts);
		put_float(values, nulls, 11, s.loss);
		put_float(values, nulls, 12, s.metric);
		put_float(values, nulls, 13, s.rows_per_second);
		values[14] = TimestampTzGetDatum(s.started);
		values[15] = TimestampTzGetDatum(s.updated);
		if (s.epoch > 0)
		{
			double		per_epoch = (double) (s.updated - s.started) / s.epoch;
			double		left = per_epoch * (s.epochs - s.epoch) - (double) (now - s.updated);
			Interval   *iv = palloc0(sizeof(Interval));

			iv->time = (TimeOffset) Max(left, 0);
			values[16] = IntervalPGetDatum(iv);
		}
		else
			nulls[16] = true;
		/* steps done of the epoch being run; NULL until rank 0 has said */
		values[17] = Int32GetDatum(s.step);
		values[18] = Int32GetDatum(s.steps);
		nulls[17] = nulls[18] = s.steps == 0;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * DmlProgressInit
 *		From _PG_init: reserve the table when preloaded.
 */
void
DmlProgressInit(void)
{
	DmlStepHook = progress_step;
	if (!process_shared_preload_libraries_in_progress)
		return;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = progress_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = progress_shmem_startup;
}
