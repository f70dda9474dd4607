/*-------------------------------------------------------------------------
 *
 * launch.c
 *	  Serialize a job (what the JOB message carries) and start mpirun.
 *
 * Process safety: a backend is one process among many, so the forked child
 * does nothing but put itself in a process group of its own, ask to be
 * killed when the backend dies, reset signals, close every inherited
 * descriptor (the client socket, the postmaster pipe) and exec mpirun.
 * Everything it needs (argv, envp, the log descriptor) is built before the
 * fork; after it, no palloc, no elog.
 *
 * The job is text of "key value" lines, values escaped so that newlines,
 * tabs and backslashes survive (names may hold any of them); the settings
 * come from jobspec.h's table.  It reaches rank 0 over the job's control
 * socket (supervise.c sends it when rank 0 connects) and the other ranks
 * from rank 0 over MPI: no rank reads a file of ours, and no secret goes
 * on mpirun's command line, which names only the control socket.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "compat.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "coordinator.h"
#include "hosts.h"
#include "launch.h"
#include "shards.h"

/* kernels/kernels.h and OpenBLAS (cblas.h would bring <complex.h>) */
extern const char *dml_blas_core_override(const char *corename);
extern char *openblas_get_corename(void);

extern char **environ;

/* Append "key value\n" to buf with the value escaped */
static void
spec_put(StringInfo buf, const char *key, const char *value)
{
	appendStringInfoString(buf, key);
	appendStringInfoChar(buf, ' ');
	for (const char *p = value; *p; p++)
	{
		switch (*p)
		{
			case '\\':
				appendStringInfoString(buf, "\\\\");
				break;
			case '\n':
				appendStringInfoString(buf, "\\n");
				break;
			case '\r':
				appendStringInfoString(buf, "\\r");
				break;
			case '\t':
				appendStringInfoString(buf, "\\t");
				break;
			default:
				appendStringInfoChar(buf, *p);
		}
	}
	appendStringInfoChar(buf, '\n');
}

static void
spec_putf(StringInfo buf, const char *key, const char *fmt,...) pg_attribute_printf(3, 4);

static void
spec_putf(StringInfo buf, const char *key, const char *fmt,...)
{
	StringInfoData v;

	initStringInfo(&v);
	for (;;)
	{
		va_list		args;
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&v, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&v, needed);
	}
	spec_put(buf, key, v.data);
	pfree(v.data);
}

/* features with their encodings, for the worker to read them as training did */
static void
spec_features(StringInfo buf, DmlJob *job)
{
	ListCell   *lc;

	foreach(lc, job->features)
	{
		DmlFeature *col = lfirst(lc);

		switch (col->kind)
		{
			case DML_FEAT_NUM:
				spec_put(buf, "feature_num", col->name);
				break;
			case DML_FEAT_VEC:
				spec_putf(buf, "feature_vec", "%d %s", col->width, col->name);
				break;
			case DML_FEAT_CAT:
				{
					const char **order = palloc(sizeof(char *) * Max(col->nlevels, 1));

					/* in one-hot order: the workers number them as they read */
					spec_put(buf, "feature_cat", col->name);
					dml_feature_levels_in_order(col, order);
					for (int i = 0; i < col->nlevels; i++)
						spec_put(buf, "level", order[i]);
					pfree(order);
				}
				break;
		}
	}
}

/* the shard servers a job reads, numbered from 1 (shards.c) */
static void
spec_shard_servers(StringInfo buf, DmlJob *job)
{
	ListCell   *lc;

	foreach(lc, job->shard_servers)
	{
		DmlShardServer *ss = lfirst(lc);
		int			k = foreach_current_index(lc) + 1;

		/* the connection string may hold the user mapping's password: this text only travels over the job's channels */
		spec_putf(buf, "shard_server", "%d %s", k, ss->conninfo);
		spec_putf(buf, "shard_name", "%d %s", k, ss->name);
		spec_putf(buf, "shard_snapshot", "%d %s", k, ss->snapshot);
	}
}

/* the slices, each a rank's, of this server or of a shard server */
static void
spec_slices(StringInfo buf, DmlJob *job)
{
	ListCell   *lc;

	foreach(lc, job->slices)
	{
		DmlSlice   *slice = lfirst(lc);

		if (slice->shard > 0)
			spec_putf(buf, "shard_slice", "%d %d %s", slice->shard, slice->rank, slice->query);
		else
			spec_putf(buf, "slice", "%d %d %s", slice->rank, slice->whole ? 1 : 0,
					  DmlSliceQuery(job, slice));
	}
}

/*
 * The spec of a predict job: the model that comes with the job runs on
 * each rank's slices (plan.c, shards.c), or with no slices planned on the
 * one query rank 0 reads.
 */
static char *
spec_text_predict(DmlJob *job)
{
	StringInfoData buf;

	initStringInfo(&buf);
	spec_put(&buf, "version", "1");
	spec_put(&buf, "job", "predict");
	spec_put(&buf, "conninfo", job->conninfo);
	spec_put(&buf, "snapshot", job->snapshot);
	spec_put(&buf, "role", job->role);
	spec_putf(&buf, "world", "%d", job->workers);
	spec_putf(&buf, "outputs", "%d", job->noutputs);
	spec_put(&buf, "device", dml_job_name(DML_NAMES_DEVICE, job->device));
	spec_putf(&buf, "id", "%d", job->predict_id ? 1 : 0);
	spec_putf(&buf, "attempt", "%d", job->attempt);
	if (job->pack_target)
	{
		/* this server's table slices come as dml.pack_rows64 blocks */
		spec_put(&buf, "load", "block");
		spec_putf(&buf, "id_bytes", "%d", job->predict_id_bytes);
	}
	spec_features(&buf, job);
	spec_shard_servers(&buf, job);
	if (job->slices == NIL)
		spec_putf(&buf, "slice", "0 0 %s", job->predict_query);
	else
		spec_slices(&buf, job);
	spec_put(&buf, "end", "");
	return buf.data;
}

/* the job's settings: every row of jobspec.h's table */
static void
spec_settings(StringInfo buf, const DmlJob *job)
{
#define PUT_INT(name, names) spec_putf(buf, #name, DML_JOB_FMT_INT, job->name)
#define PUT_DBL(name, names) spec_putf(buf, #name, DML_JOB_FMT_DBL, job->name)
#define PUT_I64(name, names) spec_putf(buf, #name, DML_JOB_FMT_I64, (long long) job->name)
#define PUT_STR(name, names) spec_put(buf, #name, job->name)
#define PUT_OPT(name, names) do { if (job->name) spec_put(buf, #name, job->name); } while (0)
#define PUT_ENUM(name, names) spec_put(buf, #name, dml_job_name(names, job->name))
#define PUT(type, name, stored, names) PUT_##type(name, names);
	DML_JOB_SETTINGS(PUT)
#undef PUT
#undef PUT_INT
#undef PUT_DBL
#undef PUT_I64
#undef PUT_STR
#undef PUT_OPT
#undef PUT_ENUM
}

/* The spec text for one launch of a job */
static char *
spec_text(DmlJob *job, bool resume)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	spec_put(&buf, "version", "1");
	spec_put(&buf, "conninfo", job->conninfo);
	spec_put(&buf, "snapshot", job->snapshot);
	spec_put(&buf, "role", job->role);
	spec_putf(&buf, "world", "%d", job->workers + job->servers);
	spec_putf(&buf, "outputs", "%d", job->noutputs);
	for (int i = 0; i < job->nhidden; i++)
		spec_putf(&buf, "hidden", "%d", job->hidden[i]);
	spec_settings(&buf, job);
	if (job->no_shared_memory)
		spec_put(&buf, "shared_memory", "0");
	if (job->no_byte_rows)
		spec_put(&buf, "byte_rows", "0");
	if (job->no_amx)
		spec_put(&buf, "amx", "0");
	if (job->balance)
		spec_put(&buf, "balance", "1");
	if (resume)
		spec_put(&buf, "resume", "1");

	spec_put(&buf, "target", job->classification ? "label" : "num");
	spec_put(&buf, "target_name", job->target.name);
	if (job->pack_target)
		spec_put(&buf, "load", "block");
	if (job->label_keys)
		spec_put(&buf, "label_keys", job->label_keys);
	if (job->discover_classes)
		spec_putf(&buf, "discover_classes", "%d", DML_MAX_CLASSES);
	foreach(lc, job->classes)
		spec_put(&buf, "class", (char *) lfirst(lc));
	spec_features(&buf, job);
	/* a restart reads a shard whose server went away under a new snapshot */
	if (job->attempt > 0)
		DmlShardsRefresh(job);
	spec_shard_servers(&buf, job);
	spec_slices(&buf, job);
	spec_put(&buf, "end", "");
	return buf.data;
}

/*
 * DmlJobText
 *		The serialized job for one launch (what JOB carries, protocol.h);
 *		resume: a checkpoint comes with it.
 */
char *
DmlJobText(DmlJob *job, bool resume)
{
	return job->type == DML_JOB_PREDICT ? spec_text_predict(job) : spec_text(job, resume);
}

/*
 * DmlRemoveJobDir
 *		Remove a job directory and the files in it.
 */
void
DmlRemoveJobDir(const char *dir)
{
	DIR		   *d = opendir(dir);
	struct dirent *de;

	if (d != NULL)
	{
		while ((de = readdir(d)) != NULL)
		{
			char		path[MAXPGPATH];

			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			unlink(path);
		}
		closedir(d);
	}
	rmdir(dir);
}

/*
 * A backend killed with SIGKILL runs no cleanup: its job's processes die
 * by PR_SET_PDEATHSIG, but its directory stays.  Remove directories of
 * ours whose backend is gone.
 */
static void
sweep_stale_job_dirs(const char *tmp)
{
	DIR		   *d = opendir(tmp);
	struct dirent *de;

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL)
	{
		int			pid;
		char		path[MAXPGPATH];
		struct stat st;

		if (sscanf(de->d_name, "dml-job-%d-", &pid) != 1 || pid == MyProcPid)
			continue;
		snprintf(path, sizeof(path), "%s/%s", tmp, de->d_name);
		if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
			continue;
		if (kill(pid, 0) != 0 && errno == ESRCH)
			DmlRemoveJobDir(path);
	}
	closedir(d);
}

/*
 * DmlMakeJobDir
 *		A fresh private directory (mode 0700) for one job.
 */
char *
DmlMakeJobDir(void)
{
	const char *tmp = getenv("TMPDIR");
	char	   *path;

	if (tmp == NULL || tmp[0] == '\0' || strlen(tmp) > 60)
		tmp = "/tmp";
	sweep_stale_job_dirs(tmp);
	path = psprintf("%s/dml-job-%d-XXXXXX", tmp, MyProcPid);
	if (mkdtemp(path) == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create job directory \"%s\": %m", path)));
	if (chmod(path, 0700) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not set permissions of \"%s\": %m", path)));
	return path;
}

/*
 * DmlListen
 *		The job's control socket, non-blocking, listening in dir.
 */
int
DmlListen(const char *dir, char **path_out)
{
	struct sockaddr_un addr;
	char	   *path = psprintf("%s/ctl.sock", dir);
	int			fd;

	if (strlen(path) >= sizeof(addr.sun_path))
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("control socket path \"%s\" is too long", path),
				 errhint("Set TMPDIR of the server to a shorter directory.")));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_socket_access(),
				 errmsg("could not create control socket: %m")));
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	strlcpy(addr.sun_path, path, sizeof(addr.sun_path));
	if (bind(fd, (struct sockaddr *) &addr, sizeof(addr)) != 0 ||
		listen(fd, 4) != 0)
	{
		int			save = errno;

		close(fd);
		errno = save;
		ereport(ERROR,
				(errcode_for_socket_access(),
				 errmsg("could not listen on control socket \"%s\": %m", path)));
	}
	*path_out = path;
	return fd;
}

/* "NAME=value" for envp */
static char *
env_entry(const char *name, const char *value)
{
	return psprintf("%s=%s", name, value);
}

/*
 * DmlLaunch
 *		Start mpirun in its own process group, its ranks told only where
 *		the control socket is (the job itself follows over it).  Returns
 *		the child's pid; the log (mpirun's stdout and stderr) goes to
 *		dir/worker.log.
 *
 *		A job of one rank on this host, with dml.mpirun and dml.mpi_options
 *		as they come, starts the worker itself instead: an isolated MPI
 *		singleton (OMPI_MCA_ess_singleton_isolated), with no mpirun and no
 *		daemon to wire up with.  A bare MPI program took 0.14 s of wall time
 *		under `mpirun -np 1` and 0.02 s as an isolated singleton (MPI_Init
 *		40-50 ms against 21 ms), on every training, search and predict job
 *		of one rank.  The worker's exit status is then the child's own, and
 *		cancel and restarts treat its process group as they treat mpirun's.
 */
pid_t
DmlLaunch(DmlJob *job, const char *dir, const char *socket_path)
{
	char	   *log_path = psprintf("%s/worker.log", dir);
	char	   *np = psprintf("%d", job->workers + job->servers);
	const char **argv;
	char	   *placement = DmlHostsPlace(job->hosts, job->lost_hosts,
										  job->workers + job->servers);
	char	   *options = pstrdup(job->mpi_options ? job->mpi_options : "");
	char	   *save = NULL;
	char	  **envp;
	int			argc = 0;
	int			nenv = 0;
	int			logfd;
	pid_t		parent = getpid();
	pid_t		pid;
	int			maxfd = (int) sysconf(_SC_OPEN_MAX);
	bool		direct;

	if (maxfd < 1024)
		maxfd = 1024;
	direct = job->workers + job->servers == 1 && placement == NULL &&
		options[strspn(options, " \t\n")] == '\0' && strcmp(job->mpirun, "mpirun") == 0;
	argv = palloc(sizeof(char *) * (32 + strlen(options)));
	if (!direct)
	{
		argv[argc++] = job->mpirun;
		argv[argc++] = "-np";
		argv[argc++] = np;
		argv[argc++] = "--oversubscribe";
		argv[argc++] = "--bind-to";
		argv[argc++] = "none";
		argv[argc++] = "-x";
		argv[argc++] = "OPENBLAS_NUM_THREADS";
		argv[argc++] = "-x";
		argv[argc++] = "OMP_NUM_THREADS";
		if (placement)
		{
			/* local host first: rank 0 is there (hosts.c) */
			argv[argc++] = "--host";
			argv[argc++] = placement;
			argv[argc++] = "--map-by";
			argv[argc++] = "slot";
		}
		/* dml.mpi_options: the superuser's words, split at white space */
		for (char *tok = strtok_r(options, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save))
			argv[argc++] = tok;
	}
	argv[argc++] = job->worker_path;
	argv[argc++] = socket_path;	/* the job itself comes over it */
	argv[argc] = NULL;

	for (char **e = environ; *e; e++)
		nenv++;
	envp = palloc(sizeof(char *) * (nenv + 14));
	nenv = 0;
	for (char **e = environ; *e; e++)
		if (strncmp(*e, "OPENBLAS_NUM_THREADS=", 21) != 0 &&
			strncmp(*e, "OMP_NUM_THREADS=", 16) != 0)
			envp[nenv++] = *e;
	envp[nenv++] = env_entry("OPENBLAS_NUM_THREADS", "1");
	envp[nenv++] = env_entry("OMP_NUM_THREADS", "1");
	/*
	 * Where OpenBLAS would fall back to its SSE3 kernels on this CPU
	 * (dml_blas_core_override), a worker runs itself again with
	 * OPENBLAS_CORETYPE set.  mpirun's ranks on this machine inherit its
	 * environment, so name the core here and spare each of them that exec;
	 * ranks on other hosts do not see it and still decide for their CPU.
	 */
	if (getenv("OPENBLAS_CORETYPE") == NULL)
	{
		const char *core = dml_blas_core_override(openblas_get_corename());

		if (core != NULL)
			envp[nenv++] = env_entry("OPENBLAS_CORETYPE", core);
	}
	/* CMA needs ptrace rights that containers often withhold */
	envp[nenv++] = env_entry("OMPI_MCA_btl_vader_single_copy_mechanism", "none");

	/*
	 * Open MPI picks its point-to-point layer by asking each candidate; the
	 * cm layer's probe of network libraries costs about 0.2 s of every
	 * job's start-up here.  ob1 carries shared memory and TCP, which is
	 * what dml uses (NCCL moves GPU data), so name it unless the server's
	 * environment chose one.
	 */
	if (getenv("OMPI_MCA_pml") == NULL)
		envp[nenv++] = env_entry("OMPI_MCA_pml", "ob1");
	/*
	 * When a rank dies, mpirun ends the others with SIGTERM and then waits
	 * this many seconds (default 1) before SIGKILL.  Workers only read,
	 * there is nothing to flush: restart or report at once.
	 */
	envp[nenv++] = env_entry("OMPI_MCA_odls_base_sigkill_timeout", "0");
	if (direct)
		envp[nenv++] = env_entry("OMPI_MCA_ess_singleton_isolated", "1");

	/*
	 * Between hosts, TCP messages up to 1 MiB go eagerly, without the
	 * rendezvous handshake above 64 KiB: the leaders' ring passes parts of
	 * a third of the gradient, and each handshake waits on a rank that may
	 * be napping (workers/comm.c).  On the namespace hosts the MLP's epoch
	 * took 0.358 s eager against 0.445 s (bench/MULTIHOST.md).  The
	 * server's environment, or dml.mpi_options on the command line, may
	 * say otherwise.  Within a host (vader) nothing changes.
	 */
	{
		static const char *const eager[] = {"OMPI_MCA_btl_tcp_eager_limit",
			"OMPI_MCA_btl_tcp_rndv_eager_limit", "OMPI_MCA_btl_tcp_max_send_size"};

		for (int i = 0; i < lengthof(eager); i++)
			if (getenv(eager[i]) == NULL)
				envp[nenv++] = env_entry(eager[i], "1048576");
	}
	envp[nenv] = NULL;

	logfd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
	if (logfd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", log_path)));

	fflush(NULL);
	pid = fork();
	if (pid < 0)
	{
		close(logfd);
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("could not fork mpirun: %m")));
	}
	if (pid == 0)
	{
		/* child: async-signal-safe calls only, then exec */
		sigset_t	all;
		int			devnull;

		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		for (int sig = 1; sig < NSIG; sig++)
			if (sig != SIGKILL && sig != SIGSTOP)
				signal(sig, SIG_DFL);
		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0)
			dup2(devnull, 0);
		dup2(logfd, 1);
		dup2(logfd, 2);
		if (syscall(SYS_close_range, 3, ~0U, 0) != 0)
			for (int fd = 3; fd < maxfd; fd++)
				close(fd);
		execvpe(argv[0], (char *const *) argv, envp);
		{
			static const char msg[] = "dml: could not execute mpirun or the worker\n";

			if (write(2, msg, sizeof(msg) - 1) < 0)
				_exit(126);
		}
		_exit(127);
	}
	/* parent */
	setpgid(pid, pid);			/* also done in the child; whichever is first */
	close(logfd);
	return pid;
}
