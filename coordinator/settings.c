/*-------------------------------------------------------------------------
 *
 * settings.c
 *	  How a job's workers start and connect back: the launch settings
 *	  (dml.mpirun, dml.worker_path, dml.conninfo, dml.hosts, dml.mpi_options)
 *	  and the limits (dml.max_workers_total, dml.max_jobs_per_role), all
 *	  declared in settings.h and registered by extension/dml.c; the worker program for a device, the connection
 *	  string and role, and the probes of this host's GPUs.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dirent.h>
#include <unistd.h>

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "utils/acl.h"

#include "coordinator.h"
#include "hosts.h"

char	   *dml_mpirun = NULL;
char	   *dml_worker_path = NULL;
char	   *dml_conninfo = NULL;
char	   *dml_hosts = NULL;
char	   *dml_mpi_options = NULL;
char	   *dml_spill_dir = NULL;
int			dml_max_workers_total = DML_DEFAULT_MAX_WORKERS;
int			dml_max_jobs_per_role = DML_DEFAULT_MAX_JOBS_PER_ROLE;

/* dml_tune: the snapshot its trials' workers read under, or NULL */
const char *DmlTuneSnapshot = NULL;

/* dml_tune's halving: a trial's last epoch is checkpointed, for its next rung */
bool		DmlTuneCheckpointLast = false;

/* dml_tune: trials that read the same rows share one job (supervise.c) */
bool		DmlTuneResident = false;

/*
 * DmlBuildHasCuda
 *		Whether this build's dml-worker has CUDA kernels.
 */
bool
DmlBuildHasCuda(void)
{
#ifdef DML_WORKER_HAS_CUDA
	return true;
#else
	return false;
#endif
}

/*
 * DmlGpuVisible
 *		Whether the server's processes can see an NVIDIA GPU, asked of the
 *		kernel driver's files (no CUDA in a backend): a loaded driver that
 *		lists a GPU, or a device node, not hidden by CUDA_VISIBLE_DEVICES.
 *		The worker asks CUDA itself and decides for good.
 */
bool
DmlGpuVisible(void)
{
	const char *vis = getenv("CUDA_VISIBLE_DEVICES");
	DIR		   *d;
	bool		found = false;

	if (vis != NULL && (vis[0] == '\0' || vis[0] == '-'))
		return false;
	d = opendir("/proc/driver/nvidia/gpus");
	if (d != NULL)
	{
		struct dirent *de;

		while (!found && (de = readdir(d)) != NULL)
			found = de->d_name[0] != '.';
		closedir(d);
		return found;
	}
	return access("/dev/nvidia0", F_OK) == 0;
}

/*
 * dml.worker_path, or the worker next to the postgres binary: the CUDA
 * build (dml-worker-gpu) when the job may run on a GPU, else the CPU build,
 * which starts and exits about 0.15 s sooner because it loads no CUDA
 * libraries.  'gpu' always gets the CUDA build (its worker reports a
 * missing GPU); 'auto' gets it when this host shows a GPU or when ranks
 * run on other hosts (dml.hosts), which may have one.
 */
static char *
worker_path(DmlDevice device)
{
	char	   *dir;
	char	   *gpu;

	if (dml_worker_path && dml_worker_path[0])
		return pstrdup(dml_worker_path);
	dir = pstrdup(my_exec_path);
	get_parent_directory(dir);
	gpu = psprintf("%s/dml-worker-gpu", dir);
	if ((device == DML_DEVICE_GPU ||
		 (device == DML_DEVICE_AUTO && ((dml_hosts && dml_hosts[0]) || DmlGpuVisible()))) &&
		access(gpu, X_OK) == 0)
		return gpu;
	return psprintf("%s/dml-worker", dir);
}

/*
 * DmlJobSetLaunch
 *		How a job's workers start and connect back: the snapshot they read
 *		under, the role they log in as (the caller: login.c), the
 *		connection string, hosts and programs.  With export_snapshot false they read with no snapshot of
 *		ours (the in-server path launches nothing).  A snapshot cannot be
 *		exported from a subtransaction (a PL/pgSQL EXCEPTION block, a
 *		SAVEPOINT): rank 0 then exports one of its own and the other ranks
 *		import it, so the ranks still agree on the data, as of the job's
 *		start rather than the caller's snapshot; subxact_notice says so.
 *		Needs an SPI connection.
 */
void
DmlJobSetLaunch(DmlJob *job, bool export_snapshot, const char *subxact_notice)
{
	if (!export_snapshot)
		job->snapshot = "";
	else if (DmlTuneSnapshot != NULL)
		job->snapshot = pstrdup(DmlTuneSnapshot);	/* dml_tune's, for every trial */
	else if (IsSubTransaction())
	{
		ereport(NOTICE, (errmsg("%s", subxact_notice)));
		job->snapshot = "";
	}
	else
	{
		if (SPI_execute("SELECT pg_export_snapshot()", false, 1) != SPI_OK_SELECT)
			elog(ERROR, "dml: pg_export_snapshot failed");
		job->snapshot = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	}
	job->checkpoint_last = DmlTuneCheckpointLast;
	job->role = GetUserNameFromId(GetUserId(), false);
	job->conninfo = DmlWorkerConninfo(GetUserId());
	job->hosts = DmlHostsChoose(job->host_names);
	job->mpi_options = dml_mpi_options;
	job->mpirun = dml_mpirun;
	job->worker_path = worker_path(job->device);
}

