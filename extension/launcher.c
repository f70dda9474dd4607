/*-------------------------------------------------------------------------
 *
 * launcher.c
 *	  With shared_preload_libraries = 'dml': a launcher that settles the
 *	  jobs a server restart or crash cut short, in every database.
 *
 * Without the launcher, dml.jobs already shows such a job as failed
 * ("the server restarted while the job ran") from the moment the server
 * accepts connections, and the next claim writes it down; the launcher
 * writes it down at once and, with dml.resume_after_restart, queues the
 * job again from its durable checkpoint (as dml_resume would), then
 * starts the queue moving.
 *
 * The launcher is a static background worker connected to no database:
 * it lists the databases that accept connections and starts, for each,
 * one short worker that looks for the extension there and settles its
 * jobs (jobs.c, DmlJobsRecover), as the bootstrap superuser, running
 * only dml's own catalog SQL (as the extension's owner).  It then waits
 * idle until shutdown; after a crash the postmaster restarts it, which
 * runs the recovery again.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"
#include "utils/wait_event.h"

#include "dml.h"
#include "jobs.h"

#define DML_LAUNCHER_RESTART_S	10

bool		dml_resume_after_restart = false;

PGDLLEXPORT void dml_launcher_main(Datum main_arg);
PGDLLEXPORT void dml_recover_main(Datum main_arg);

/* start the worker that settles the jobs of one database */
static void
launch_recovery(Oid database, const char *name)
{
	BackgroundWorker w;

	DmlBgworkerSetup(&w, "dml_recover_main", "dml recovery", BGW_NEVER_RESTART);
	snprintf(w.bgw_name, BGW_MAXLEN, "dml recovery of database %s", name);
	w.bgw_main_arg = ObjectIdGetDatum(database);
	if (!RegisterDynamicBackgroundWorker(&w, NULL))
		ereport(WARNING,
				(errmsg("dml: no background worker slot to settle the jobs of database \"%s\"", name),
				 errhint("Raise max_worker_processes; meanwhile dml.jobs shows those jobs as failed.")));
}

/*
 * dml_launcher_main
 *		List the databases, start a recovery worker for each, then idle.
 */
void
dml_launcher_main(Datum main_arg)
{
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

		if (db->datallowconn && !db->datistemplate)
			launch_recovery(db->oid, NameStr(db->datname));
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	PopActiveSnapshot();
	CommitTransactionCommand();

	for (;;)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, -1L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * dml_recover_main
 *		In one database: if dml is installed, settle its jobs.
 */
void
dml_recover_main(Datum main_arg)
{
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(DatumGetObjectId(main_arg), InvalidOid, 0);

	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (OidIsValid(DmlExtensionSchema()))
		DmlJobsRecover(dml_resume_after_restart);
	PopActiveSnapshot();
	CommitTransactionCommand();
	proc_exit(0);
}

/*
 * DmlLauncherInit
 *		From _PG_init: the setting, and the launcher when preloaded.
 */
void
DmlLauncherInit(void)
{
	BackgroundWorker w;

	DefineCustomBoolVariable("dml.resume_after_restart",
							 "Queue jobs that a server restart or crash cut short again, from their checkpoints (needs shared_preload_libraries = 'dml').",
							 NULL,
							 &dml_resume_after_restart,
							 false,
							 PGC_SIGHUP, 0, NULL, NULL, NULL);
	if (!process_shared_preload_libraries_in_progress)
		return;
	DmlBgworkerSetup(&w, "dml_launcher_main", "dml launcher", DML_LAUNCHER_RESTART_S);
	RegisterBackgroundWorker(&w);
}
