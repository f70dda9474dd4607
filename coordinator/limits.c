/*-------------------------------------------------------------------------
 *
 * limits.c
 *	  Cluster-wide limits on running jobs: dml.max_workers_total ranks in
 *	  all, dml.max_jobs_per_role jobs of one role.  Checked atomically at
 *	  launch, before anything starts.  And dml.max_concurrent_jobs
 *	  background jobs running at once in the whole cluster, whatever their
 *	  database: each holds one of that many "run slot" locks from its
 *	  claim to its end (extension/jobs.c).
 *
 * The counts live in PostgreSQL's lock manager, so they need no shared
 * memory of dml's own (and no shared_preload_libraries): each running rank
 * holds one of dml.max_workers_total "rank slot" locks, each running job
 * one of dml.max_jobs_per_role "job slot" locks of its role.  They are
 * session-level advisory locks in database 0, which no SQL call can take
 * (pg_advisory_lock always names the current database), so pg_locks shows
 * them (locktype advisory, database 0, classid 0x646d6c00) and a backend
 * that dies releases them.  Slots are taken under one allocator lock, so
 * two jobs never each take part of what both need.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/acl.h"
#include "utils/memutils.h"

#include "coordinator.h"

#define DML_LOCK_KEY		0x646d6c00	/* "dml\0" */
#define DML_LOCK_RANK		3			/* locktag_field4: a rank slot */
#define DML_LOCK_JOB		4			/* a job slot of a role */
#define DML_LOCK_ALLOC		5			/* the allocator */
#define DML_LOCK_RUN		6			/* a running background job's slot */

/* the slots this backend holds for its running job */
static int *held_ranks = NULL;
static int	nheld_ranks = 0;
static int	held_job = -1;
static Oid	held_role = InvalidOid;
static int	held_run = -1;

static void
rank_tag(LOCKTAG *tag, int slot)
{
	SET_LOCKTAG_ADVISORY(*tag, InvalidOid, DML_LOCK_KEY, (uint32) slot, DML_LOCK_RANK);
}

static void
job_tag(LOCKTAG *tag, Oid role, int slot)
{
	SET_LOCKTAG_ADVISORY(*tag, InvalidOid, role, (uint32) slot, DML_LOCK_JOB);
}

/* take a session lock if nobody holds it */
static bool
try_slot(LOCKTAG *tag)
{
	return LockAcquire(tag, ExclusiveLock, true, true) == LOCKACQUIRE_OK;
}

/*
 * DmlReleaseJobSlots
 *		Give back what DmlAcquireJobSlots took.  Idempotent; safe on every
 *		path out of a job.
 */
void
DmlReleaseJobSlots(void)
{
	LOCKTAG		tag;

	for (int i = 0; i < nheld_ranks; i++)
	{
		rank_tag(&tag, held_ranks[i]);
		LockRelease(&tag, ExclusiveLock, true);
	}
	nheld_ranks = 0;
	if (held_job >= 0)
	{
		job_tag(&tag, held_role, held_job);
		LockRelease(&tag, ExclusiveLock, true);
	}
	held_job = -1;
}

/*
 * DmlAcquireJobSlots
 *		Slots for a job of ranks ranks, run by the current role, or an error
 *		that says which limit stops it.
 */
void
DmlAcquireJobSlots(int ranks)
{
	LOCKTAG		alloc;
	LOCKTAG		tag;
	Oid			role = GetUserId();
	int			busy = 0;

	if (nheld_ranks > 0 || held_job >= 0)
		elog(ERROR, "dml: job slots are already held. Please report a bug.");
	if (ranks > dml_max_workers_total)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("a job of %d ranks is more than dml.max_workers_total allows (%d)",
						ranks, dml_max_workers_total),
				 errhint("Ask for fewer workers; a superuser can raise dml.max_workers_total.")));
	if (held_ranks == NULL)
		held_ranks = MemoryContextAlloc(TopMemoryContext, sizeof(int) * DML_MAX_WORKERS);

	SET_LOCKTAG_ADVISORY(alloc, InvalidOid, DML_LOCK_KEY, 0, DML_LOCK_ALLOC);
	(void) LockAcquire(&alloc, ExclusiveLock, false, false);
	PG_TRY();
	{
		held_role = role;
		for (int j = 0; j < dml_max_jobs_per_role && held_job < 0; j++)
		{
			job_tag(&tag, role, j);
			if (try_slot(&tag))
				held_job = j;
		}
		if (held_job < 0)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("role \"%s\" already runs %d jobs, as many as dml.max_jobs_per_role allows",
							GetUserNameFromId(role, false), dml_max_jobs_per_role),
					 errhint("Wait for one to finish; a superuser can raise dml.max_jobs_per_role.")));
		for (int slot = 0; slot < dml_max_workers_total && nheld_ranks < ranks; slot++)
		{
			rank_tag(&tag, slot);
			if (try_slot(&tag))
				held_ranks[nheld_ranks++] = slot;
			else
				busy++;
		}
		if (nheld_ranks < ranks)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("too many worker ranks running: this job needs %d, %d of dml.max_workers_total = %d are free",
							ranks, dml_max_workers_total - busy, dml_max_workers_total),
					 errhint("Wait for other jobs to finish, or ask for fewer workers.")));
	}
	PG_CATCH();
	{
		DmlReleaseJobSlots();
		LockRelease(&alloc, ExclusiveLock, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	LockRelease(&alloc, ExclusiveLock, false);
}

static void
run_tag(LOCKTAG *tag, int slot)
{
	SET_LOCKTAG_ADVISORY(*tag, InvalidOid, DML_LOCK_KEY, (uint32) slot, DML_LOCK_RUN);
}

/* the first of max run slots this process could take (now taken), or -1 */
static int
take_run_slot(int max)
{
	LOCKTAG		tag;

	for (int slot = 0; slot < max; slot++)
	{
		run_tag(&tag, slot);
		if (try_slot(&tag))
			return slot;
	}
	return -1;
}

/*
 * DmlAcquireRunSlot
 *		One of max run slots for the background job this process is about
 *		to run; false when all are held.  A process that dies gives its
 *		slot back with its locks.
 */
bool
DmlAcquireRunSlot(int max)
{
	if (held_run < 0)
		held_run = take_run_slot(max);
	return held_run >= 0;
}

/* DmlReleaseRunSlot: the job ended (idempotent) */
void
DmlReleaseRunSlot(void)
{
	LOCKTAG		tag;

	if (held_run < 0)
		return;
	run_tag(&tag, held_run);
	LockRelease(&tag, ExclusiveLock, true);
	held_run = -1;
}

/* DmlRunSlotFree: is one of max run slots free right now?  (It may not be a moment later.) */
bool
DmlRunSlotFree(int max)
{
	LOCKTAG		tag;
	int			slot;

	if (held_run >= 0)
		return true;
	slot = take_run_slot(max);
	if (slot < 0)
		return false;
	run_tag(&tag, slot);
	LockRelease(&tag, ExclusiveLock, true);
	return true;
}
