/*-------------------------------------------------------------------------
 *
 * dml.c
 *	  Module initialization and settings.
 *
 * Settings that decide what program runs, where it runs and how it
 * connects back (dml.mpirun, dml.worker_path, dml.conninfo, dml.hosts) are
 * PGC_SUSET: a role that could set them could run any program as the
 * server's OS user.  The same goes for dml.test_hooks, which lets a caller
 * inject faults and delays into workers.  dml.spill_dir and dml.spill_limit
 * are PGC_SUSET too: workers write files as the server's OS user wherever
 * the first points.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>
#include <unistd.h>

#include "fmgr.h"
#include "utils/guc.h"

#include "coordinator.h"
#include "dml.h"
#include "hosts.h"
#include "jobs.h"

PG_MODULE_MAGIC;

int			dml_workers = DML_DEFAULT_WORKERS;
int			dml_max_workers = DML_DEFAULT_MAX_WORKERS;
int			dml_max_model_parameters = DML_DEFAULT_MAX_MODEL_PARAMETERS;
char	   *dml_device = NULL;
int			dml_max_restarts = 2;
int			dml_checkpoint_every = 1;
bool		dml_test_hooks = false;
int			dml_worker_memory = 1024 * 1024;	/* kB; _PG_init sets the default */
int			dml_spill_limit = -1;

void		_PG_init(void);

/* check hook: dml.device is one of auto, cpu, gpu */
static bool
check_device(char **newval, void **extra, GucSource source)
{
	if (*newval == NULL)
		return true;
	if (strcmp(*newval, "auto") == 0 || strcmp(*newval, "cpu") == 0 ||
		strcmp(*newval, "gpu") == 0)
		return true;
	GUC_check_errdetail("Valid values are \"auto\", \"cpu\" and \"gpu\".");
	return false;
}

/* check hook: dml.hosts parses (coordinator/hosts.c) */
static bool
check_hosts(char **newval, void **extra, GucSource source)
{
	const char *error;

	if (*newval == NULL)
		return true;
	DmlHostsParseText(*newval, &error);
	if (error == NULL)
		return true;
	GUC_check_errdetail("%s", error);
	return false;
}

/*
 * _PG_init
 *		Define the settings.  Nothing else: no process, thread or device is
 *		ever started in a backend.
 */
void
_PG_init(void)
{
	/* four ranks a core: sync modes with servers oversubscribe on purpose */
	int			total = Max(8, 4 * (int) sysconf(_SC_NPROCESSORS_ONLN));

	total = Min(total, DML_MAX_WORKERS);
	DefineCustomIntVariable("dml.workers",
							"Worker ranks a training job uses when dml_train does not say.",
							NULL,
							&dml_workers,
							DML_DEFAULT_WORKERS, DML_MIN_WORKERS, DML_MAX_WORKERS,
							PGC_USERSET, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("dml.max_workers",
							"Most worker ranks one training job may ask for.",
							NULL,
							&dml_max_workers,
							DML_DEFAULT_MAX_WORKERS, DML_MIN_WORKERS, DML_MAX_WORKERS,
							PGC_SUSET, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("dml.max_workers_total",
							"Most worker ranks running at once in the whole cluster, every job of every database together.",
							"The default is four a CPU core, at least 8.",
							&dml_max_workers_total,
							total, DML_MIN_WORKERS, DML_MAX_WORKERS,
							PGC_SUSET, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("dml.max_jobs_per_role",
							"Most jobs of workers one role may run at once in the cluster.",
							NULL,
							&dml_max_jobs_per_role,
							DML_DEFAULT_MAX_JOBS_PER_ROLE, 1, 1000,
							PGC_SUSET, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("dml.max_model_parameters",
							"Most parameters (weights and biases) a model to train may have.",
							"Checked before anything starts; each worker holds the parameters, their gradients and the optimizer's state.",
							&dml_max_model_parameters,
							DML_DEFAULT_MAX_MODEL_PARAMETERS, 1, INT_MAX,
							PGC_SUSET, 0, NULL, NULL, NULL);

	DefineCustomStringVariable("dml.mpirun",
							   "The mpirun program that launches training jobs.",
							   NULL,
							   &dml_mpirun,
							   "mpirun",
							   PGC_SUSET, 0, NULL, NULL, NULL);

	DefineCustomStringVariable("dml.worker_path",
							   "Path of the dml-worker program; empty means the server's bin directory.",
							   NULL,
							   &dml_worker_path,
							   "",
							   PGC_SUSET, 0, NULL, NULL, NULL);

	DefineCustomStringVariable("dml.conninfo",
							   "libpq connection string workers use to reach this server; empty means its local socket.",
							   NULL,
							   &dml_conninfo,
							   "",
							   PGC_SUSET, GUC_SUPERUSER_ONLY, NULL, NULL, NULL);

	DefineCustomStringVariable("dml.hosts",
							   "Hosts and slots jobs may run on, in Open MPI's hostfile terms (\"db1 slots=4, node2 slots=8\"); empty means this machine.",
							   "The server's own host must be among them: rank 0 runs there.",
							   &dml_hosts,
							   "",
							   PGC_SUSET, 0, check_hosts, NULL, NULL);

	DefineCustomStringVariable("dml.mpi_options",
							   "Options added to mpirun's command line (--mca name value ...), split at white space.",
							   "For example the launch agent and the network interfaces of jobs across hosts.",
							   &dml_mpi_options,
							   "",
							   PGC_SUSET, 0, NULL, NULL, NULL);

	DefineCustomStringVariable("dml.device",
							   "Device training uses when dml_train does not say: auto, cpu or gpu.",
							   NULL,
							   &dml_device,
							   "auto",
							   PGC_USERSET, 0, check_device, NULL, NULL);

	DefineCustomIntVariable("dml.max_restarts",
							"Times a training job is restarted from its checkpoint after a worker failure.",
							NULL,
							&dml_max_restarts,
							2, 0, 100,
							PGC_USERSET, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("dml.checkpoint_every",
							"Epochs between checkpoints sent to the coordinator; 0 disables them.",
							NULL,
							&dml_checkpoint_every,
							1, 0, 1000000,
							PGC_USERSET, 0, NULL, NULL, NULL);

	DefineCustomBoolVariable("dml.test_hooks",
							 "Honour fault-injection and delay options of dml_train (tests only).",
							 NULL,
							 &dml_test_hooks,
							 false,
							 PGC_SUSET, 0, NULL, NULL, NULL);

	/*
	 * A share of the machine for each rank: an eighth of its memory over
	 * its cores, between 256 MB and 4 GB
	 */
	{
		double		mem = (double) sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
		int			cores = Max(1, (int) sysconf(_SC_NPROCESSORS_ONLN));
		double		kb = mem > 0 ? mem / 8 / cores / 1024 : 1024 * 1024;

		dml_worker_memory = (int) Min(Max(kb, 256.0 * 1024), 4.0 * 1024 * 1024);
	}
	DefineCustomIntVariable("dml.worker_memory",
							"Memory each worker rank may hold for its rows, the model and the optimizer's state.",
							"A slice that does not fit is spilled once to a local file under dml.spill_dir and streamed block by block each epoch.",
							&dml_worker_memory,
							dml_worker_memory, (int) (DML_MEMORY_MIN / 1024), INT_MAX,
							PGC_USERSET, GUC_UNIT_KB, NULL, NULL, NULL);

	DefineCustomStringVariable("dml.spill_dir",
							   "Directory under which training jobs spill the rows that do not fit dml.worker_memory; empty means base/pgsql_tmp in the data directory.",
							   "Each job makes a private directory there and removes it when it ends.",
							   &dml_spill_dir,
							   "",
							   PGC_SUSET, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("dml.spill_limit",
							"Most spill one training job may write; -1 means no limit.",
							NULL,
							&dml_spill_limit,
							-1, -1, INT_MAX,
							PGC_SUSET, GUC_UNIT_KB, NULL, NULL, NULL);

	DmlJobsInit();
	DmlProgressInit();
	DmlLauncherInit();

	MarkGUCPrefixReserved("dml");

	DmlInstallRoleHooks();
}
