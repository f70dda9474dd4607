/*-------------------------------------------------------------------------
 *
 * supervise.c
 *	  Run one job to its end: launch, wait on latch + control socket +
 *	  child, relay progress, keep checkpoints, restart after a worker
 *	  failure, receive the model (training) or hand each block of
 *	  predictions to the caller (predict), and clean up on every path out.
 *
 * States of a job, advanced one step at a time:
 *
 *	 LAUNCHED   mpirun started, rank 0 not yet connected
 *	 RUNNING    rank 0 connected; progress and checkpoints (or blocks of
 *	            predictions) arrive
 *	 RECEIVED   the model (or a predict job's DONE) arrived; waiting for
 *	            mpirun to exit
 *	 EXITED     mpirun reaped: success, restart, or failure
 *
 * The backend never blocks: each wait is WaitLatchOrSocket with a 100 ms
 * timeout (SIGCHLD does not set our latch, so the child is polled), and
 * CHECK_FOR_INTERRUPTS() runs after every wait, so a cancel or
 * statement_timeout lands within a fraction of a second.  Cleanup
 * (DmlKillActiveJob) runs from PG_CATCH on ERROR and from a
 * before_shmem_exit callback when the backend exits (pg_terminate_backend,
 * fast shutdown).  If the backend is SIGKILLed, mpirun gets SIGKILL from
 * PR_SET_PDEATHSIG, the workers get it from theirs, and rank 0 sees the
 * control socket close.
 *
 * A resident job (dml_tune, DmlTuneResident): the trials of a search that
 * read the same rows with the same transforms share one job.  The first
 * trial launches it with resident set; after its model the ranks keep
 * their prepared rows and wait, and DmlRunJob returns at RECEIVED with the
 * job still running.  The next trial whose data plan (its job text less
 * the settings a trial may vary: resident_key) is the same is sent to it
 * as a new JOB over the open control socket and supervised as one of its
 * own; one whose plan differs ends it and launches afresh.  Any error
 * ends it (the next trial launches anew), and so do DmlEndResidentJob at
 * the end of the search and every cleanup path, as for any job.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "compat.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/value.h"
#include "pgstat.h"
#include "port.h"
#include "common/file_utils.h"	/* PG_TEMP_FILE_PREFIX on 16+ */
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "coordinator.h"
#include "launch.h"

#define DML_MAX_LOCAL_PIDS	256
#define DML_POLL_MS			100
#define DML_CONNECT_TIMEOUT_S 120	/* mpirun start + libpq connect */
#define DML_EXIT_GRACE_S	10		/* after the model, for MPI_Finalize */
#define DML_RECV_CHUNK		(8 << 20)	/* bytes read before dispatching */

typedef enum JobState
{
	JOB_LAUNCHED,
	JOB_RUNNING,
	JOB_RECEIVED,
	JOB_EXITED
} JobState;

/* The job this backend is running, for cleanup from any path */
typedef struct ActiveJob
{
	bool		active;
	pid_t		pid;			/* mpirun, leader of its process group */
	int			listen_fd;
	int			conn_fd;
	int			npids;
	pid_t		pids[DML_MAX_LOCAL_PIDS];	/* workers, from HELLO */
	char		dir[MAXPGPATH];
	char		spill[MAXPGPATH];	/* the job's spill directory, made by the workers */
} ActiveJob;

static ActiveJob active_job = {.listen_fd = -1,.conn_fd = -1};

/* the active job is resident, between dml_tune's trials */
typedef struct ResidentJob
{
	bool		alive;
	char	   *key;			/* its data plan (resident_key), TopMemoryContext */
	List	   *rank_hosts;		/* of char *: each rank's host, from HELLO, TopMemoryContext */
	List	   *classes;		/* of char *: the labels its ranks listed (discover_classes) */
	int			trials;			/* trials sent to it */
} ResidentJob;

static ResidentJob resident;

DmlCheckpointHookType DmlCheckpointHook = NULL;
DmlStepHookType DmlStepHook = NULL;
const char *DmlResumeCheckpoint = NULL;
uint32		DmlResumeCheckpointLen = 0;
static bool exit_hook_registered = false;

/* ---------------------------------------------------------------------
 * Cleanup
 * --------------------------------------------------------------------- */

/* signal mpirun's group and every worker we know of */
static void
signal_job(int sig)
{
	if (active_job.pid > 0)
	{
		kill(-active_job.pid, sig);
		kill(active_job.pid, sig);
	}
	for (int i = 0; i < active_job.npids; i++)
		if (active_job.pids[i] > 0)
			kill(active_job.pids[i], sig);
}

/* whether any worker we know of is still alive */
static bool
workers_alive(void)
{
	for (int i = 0; i < active_job.npids; i++)
		if (active_job.pids[i] > 0 && kill(active_job.pids[i], 0) == 0)
			return true;
	return false;
}

/*
 * DmlKillActiveJob
 *		End the running job, if any: SIGTERM, 200 ms of grace, then
 *		SIGKILL; reap mpirun; remove the job directory.  Idempotent, and
 *		safe from PG_CATCH and from backend exit.
 */
void
DmlKillActiveJob(void)
{
	if (!active_job.active)
		return;
	active_job.active = false;
	resident.alive = false;
	resident.trials = 0;
	list_free_deep(resident.classes);
	resident.classes = NIL;
	DmlReleaseJobSlots();

	if (active_job.pid > 0)
	{
		int			status;
		bool		reaped = false;

		signal_job(SIGTERM);
		/*
		 * Workers only read, so there is nothing to flush: a short grace,
		 * then SIGKILL.  A bounded poll, on a cleanup path.
		 */
		for (int i = 0; i < 20 && !reaped; i++)
		{
			if (waitpid(active_job.pid, &status, WNOHANG) == active_job.pid)
				reaped = true;
			else
				pg_usleep(10000L);
		}
		if (!reaped)
		{
			signal_job(SIGKILL);
			while (waitpid(active_job.pid, &status, 0) < 0 && errno == EINTR)
				;
		}
		active_job.pid = 0;
	}
	/* workers are mpirun's children; any straggler gets SIGKILL */
	for (int i = 0; i < 20 && workers_alive(); i++)
		pg_usleep(10000L);
	if (workers_alive())
		signal_job(SIGKILL);
	for (int i = 0; i < 100 && workers_alive(); i++)
		pg_usleep(10000L);
	active_job.npids = 0;

	if (active_job.conn_fd >= 0)
		close(active_job.conn_fd);
	if (active_job.listen_fd >= 0)
		close(active_job.listen_fd);
	active_job.conn_fd = active_job.listen_fd = -1;
	if (active_job.dir[0])
		DmlRemoveJobDir(active_job.dir);
	active_job.dir[0] = '\0';
	if (active_job.spill[0])
		DmlRemoveJobDir(active_job.spill);
	active_job.spill[0] = '\0';
}

/*
 * The job's spill directory (workers/stream.c makes it when a rank's slice
 * does not fit dml.worker_memory): under dml.spill_dir, or by default in
 * the data directory's base/pgsql_tmp, named with PostgreSQL's temporary
 * file prefix so that a restart after a crash removes what a killed
 * backend left.  Unique to this backend and job; removed on every way out
 * (DmlKillActiveJob), kept across a relaunch: a restarted rank reuses its
 * spill when the description beside it and every block's checksum agree,
 * and spills afresh from PostgreSQL otherwise.
 */
static void
spill_dir_for(DmlJob *job)
{
	static uint32 jobs = 0;
	char	   *base;

	if (dml_spill_dir != NULL && dml_spill_dir[0] != '\0')
	{
		if (!is_absolute_path(dml_spill_dir))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("dml.spill_dir must be an absolute path")));
		base = dml_spill_dir;
	}
	else
	{
		base = psprintf("%s/base/%s", DataDir, PG_TEMP_FILES_DIR);
		/* PostgreSQL makes it on first use; so do we */
		if (MakePGDirectory(base) < 0 && errno != EEXIST)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not create directory \"%s\": %m", base)));
	}
	job->spill_dir = psprintf("%s/%sdml.%d.%u", base, PG_TEMP_FILE_PREFIX, MyProcPid, ++jobs);
	strlcpy(active_job.spill, job->spill_dir, sizeof(active_job.spill));
}

static void
exit_hook(int code, Datum arg)
{
	DmlKillActiveJob();
}

/* ---------------------------------------------------------------------
 * Messages
 * --------------------------------------------------------------------- */

typedef struct RecvBuf
{
	char	   *data;
	size_t		len;
	size_t		cap;
} RecvBuf;

typedef struct JobRun
{
	DmlJob	   *job;
	DmlJobResult *result;
	DmlProgressCallback cb;
	void	   *cb_arg;
	JobState	state;
	RecvBuf		in;
	bool		in_more;		/* read_messages stopped at DML_RECV_CHUNK */
	char	   *last_error;		/* from an ERROR message */
	bool		have_checkpoint;
	int			checkpoint_epoch;
	char	   *checkpoint;		/* the last CHECKPOINT's payload, sent with a restart */
	uint32		checkpoint_len;
	MemoryContext cxt;			/* where the checkpoint is kept */
	int			restarts;
	TimestampTz launched;
	TimestampTz received;
	TimestampTz last_progress;	/* for epoch_timeout */
} JobRun;

/* "pids 123 456 ...\nhosts a a b ..." */
static void
handle_hello(JobRun *run, const char *payload, uint32 len)
{
	char	   *text = pnstrdup(payload, len);
	char	   *p = text;
	char	   *hosts = strstr(text, "\nhosts");
	char	   *save = NULL;

	if (strncmp(p, "pids", 4) != 0)
		elog(ERROR, "dml: malformed HELLO from rank 0. Please report a bug.");
	p += 4;
	active_job.npids = 0;
	while (*p && active_job.npids < DML_MAX_LOCAL_PIDS)
	{
		char	   *end;
		long		v = strtol(p, &end, 10);

		if (end == p)
			break;
		if (v > 0)
			active_job.pids[active_job.npids++] = (pid_t) v;
		p = end;
	}
	/* every rank's host, for dml.epochs (the job's memory context) */
	run->job->rank_hosts = NIL;
	if (hosts)
		for (char *h = strtok_r(hosts + 6, " ", &save); h; h = strtok_r(NULL, " ", &save))
			run->job->rank_hosts = lappend(run->job->rank_hosts, pstrdup(h));
	pfree(text);
}

/* keep the newest checkpoint in the job directory, written atomically */
static void
handle_checkpoint(JobRun *run, const char *payload, uint32 len)
{
	int32		epoch;

	if (len < 4)
		elog(ERROR, "dml: malformed CHECKPOINT from rank 0. Please report a bug.");
	memcpy(&epoch, payload, 4);
	if (run->checkpoint)
		pfree(run->checkpoint);
	run->checkpoint = MemoryContextAlloc(run->cxt, len);
	memcpy(run->checkpoint, payload, len);
	run->checkpoint_len = len;
	run->have_checkpoint = true;
	run->checkpoint_epoch = epoch;
	if (DmlCheckpointHook)
		DmlCheckpointHook(payload, len, epoch);
}

/* DmlResult, server staleness, metric sums, model blob (protocol.h) */
static void
handle_model(JobRun *run, const char *payload, uint32 len)
{
	DmlResult	r;
	int64	   *stale = NULL;
	double	   *rss;
	DmlMetrics	met;
	size_t		slen,
				mlen;
	bytea	   *w;

	if (len < sizeof(r) || run->job->type != DML_JOB_TRAIN)
		elog(ERROR, "dml: malformed MODEL from rank 0. Please report a bug.");
	memcpy(&r, payload, sizeof(r));
	slen = sizeof(int64) * (size_t) Max(r.servers, 0) + sizeof(double) * (size_t) Max(r.workers, 0);
	mlen = sizeof(double) * (size_t) r.nmetrics;
	if (r.servers < 0 || r.workers < 0 || len != sizeof(r) + slen + mlen + r.blob_len + r.stats_len ||
		dml_metrics_init(&met, (DmlLoss) r.metrics_loss, r.metrics_k) != DML_OK ||
		met.nvalues != r.nmetrics)
		elog(ERROR, "dml: malformed MODEL from rank 0. Please report a bug.");
	if (r.servers > 0)
	{
		stale = palloc(sizeof(int64) * r.servers);
		memcpy(stale, payload + sizeof(r), sizeof(int64) * r.servers);
	}
	rss = palloc(sizeof(double) * (r.workers + 1));
	memcpy(rss, payload + sizeof(r) + sizeof(int64) * Max(r.servers, 0), sizeof(double) * r.workers);
	memcpy(met.v, payload + sizeof(r) + slen, mlen);
	w = palloc(VARHDRSZ + r.blob_len);
	SET_VARSIZE(w, VARHDRSZ + r.blob_len);
	memcpy(VARDATA(w), payload + sizeof(r) + slen + mlen, r.blob_len);
	run->result->weights = w;
	run->result->device = r.gpu ? "gpu" : "cpu";
	/* the default penalty over the rows the workers read (jobspec.h) */
	if (run->job->weight_decay_rows > 0)
	{
		if (!(r.weight_decay > 0))
			elog(ERROR, "dml: malformed MODEL from rank 0. Please report a bug.");
		run->job->weight_decay = r.weight_decay;
	}
	run->result->rows_per_second = r.rows_per_second;
	run->result->stopped = r.out_of_time ? DML_STOP_MAX_TIME : (DmlStopReason) r.stopped;
	PG_TRY();
	{
		run->result->metrics_json =
			DmlResultJson(run->job, &r, stale, rss, &met, (unsigned char *) VARDATA(w),
						  r.stats_len ? pnstrdup(payload + sizeof(r) + slen + mlen + r.blob_len,
												 r.stats_len) : NULL);
	}
	PG_FINALLY();
	{
		dml_metrics_free(&met);
	}
	PG_END_TRY();
	run->state = JOB_RECEIVED;
	run->received = GetCurrentTimestamp();
}

static void
handle_message(JobRun *run, uint32 type, const char *payload, uint32 len)
{
	switch (type)
	{
		case DML_MSG_HELLO:
			handle_hello(run, payload, len);
			break;
		case DML_MSG_PROGRESS:
			{
				DmlProgress p;

				if (len != sizeof(DmlProgress))
					elog(ERROR, "dml: malformed PROGRESS from rank 0. Please report a bug.");
				memcpy(&p, payload, sizeof(p));
				p.restarts = run->restarts;
				run->last_progress = GetCurrentTimestamp();
				run->result->epochs_run = p.epoch;
				run->result->final_loss = p.loss;
				if (run->cb)
					run->cb(&p, run->cb_arg);
				break;
			}
		case DML_MSG_STEP:
			{
				DmlStep		st;

				if (len != sizeof(DmlStep))
					elog(ERROR, "dml: malformed STEP from rank 0. Please report a bug.");
				memcpy(&st, payload, sizeof(st));
				if (DmlStepHook)
					DmlStepHook(st.epoch, st.step, st.steps);
				break;
			}
		case DML_MSG_CHECKPOINT:
			handle_checkpoint(run, payload, len);
			break;
		case DML_MSG_MODEL:
			handle_model(run, payload, len);
			break;
		case DML_MSG_ERROR:
			run->last_error = pnstrdup(payload, len);
			break;
		case DML_MSG_LOG:
			ereport(NOTICE, (errmsg("%s", pnstrdup(payload, len))));
			break;
		case DML_MSG_PREDICTIONS:
			if (run->job->type != DML_JOB_PREDICT || run->state != JOB_RUNNING)
				elog(ERROR, "dml: unexpected PREDICTIONS from rank 0. Please report a bug.");
			run->job->on_block(payload, len, run->job->block_arg);
			break;
		case DML_MSG_CLASSES:
			{
				/* the labels the workers found, one per line, in order */
				char	   *text = pnstrdup(payload, len);
				char	   *save = NULL;

				if (run->job->type != DML_JOB_TRAIN || !run->job->discover_classes)
					elog(ERROR, "dml: unexpected CLASSES from rank 0. Please report a bug.");
				run->result->classes = NIL;
				for (char *tok = strtok_r(text, "\n", &save); tok; tok = strtok_r(NULL, "\n", &save))
					run->result->classes = lappend(run->result->classes, pstrdup(tok));
				break;
			}
		case DML_MSG_DONE:
			if (run->job->type != DML_JOB_PREDICT || len != sizeof(int64))
				elog(ERROR, "dml: malformed DONE from rank 0. Please report a bug.");
			memcpy(&run->result->rows_predicted, payload, sizeof(int64));
			run->state = JOB_RECEIVED;
			run->received = GetCurrentTimestamp();
			break;
		default:
			elog(ERROR, "dml: unknown message type %u from rank 0. Please report a bug.", type);
	}
}

/*
 * Read what is there, up to DML_RECV_CHUNK bytes at a time (so a fast
 * sender cannot make us buffer without bound: what we leave in the socket
 * holds it back); dispatch complete frames; false at EOF (after
 * dispatching what came before it).
 */
static bool
read_messages(JobRun *run)
{
	RecvBuf    *in = &run->in;
	size_t		got = 0;
	bool		eof = false;

	run->in_more = false;
	for (;;)
	{
		ssize_t		n;

		if (got >= DML_RECV_CHUNK)
		{
			run->in_more = true;
			break;
		}

		if (in->cap - in->len < 65536)
		{
			in->cap = Max(in->cap * 2, in->len + 65536);
			in->data = in->data ? repalloc_huge(in->data, in->cap)
				: MemoryContextAllocHuge(CurrentMemoryContext, in->cap);
		}
		n = recv(active_job.conn_fd, in->data + in->len, in->cap - in->len, 0);
		if (n == 0)
		{
			eof = true;
			break;
		}
		if (n < 0)
		{
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			eof = true;			/* connection reset: rank 0 died */
			break;
		}
		in->len += n;
		got += n;
	}

	/* dispatch every complete frame, those that came just before EOF too */
	{
		size_t		pos = 0;

		while (in->len - pos >= DML_MSG_HEADER)
		{
			uint32		hdr[3];

			memcpy(hdr, in->data + pos, sizeof(hdr));
			if (hdr[0] != DML_MSG_MAGIC || hdr[2] > DML_MSG_MAX)
				elog(ERROR, "dml: corrupt frame on the control socket. Please report a bug.");
			if (in->len - pos - DML_MSG_HEADER < hdr[2])
				break;
			handle_message(run, hdr[1], in->data + pos + DML_MSG_HEADER, hdr[2]);
			pos += DML_MSG_HEADER + hdr[2];
		}
		if (pos > 0)
		{
			memmove(in->data, in->data + pos, in->len - pos);
			in->len -= pos;
		}
	}
	return !eof;
}

/* ---------------------------------------------------------------------
 * Failure reports
 * --------------------------------------------------------------------- */

/* "exit code 1" / "terminated by signal 9: Killed" */
static char *
describe_status(int status)
{
	if (WIFEXITED(status))
		return psprintf("exit code %d", WEXITSTATUS(status));
	if (WIFSIGNALED(status))
		return psprintf("terminated by signal %d: %s", WTERMSIG(status),
						pg_strsignal(WTERMSIG(status)));
	return psprintf("unrecognized status %d", status);
}

/*
 * What the worker log says about a failure: our own error line (it names
 * rank, host, file and line) if there is one; else mpirun's account of
 * which rank died and how, with the last line a worker wrote.
 */
static char *
log_summary(void)
{
	char		path[MAXPGPATH];
	char		buf[16384];
	int			fd;
	ssize_t		n;
	off_t		size;
	char	   *err_line = NULL;
	char	   *noticed = NULL;
	char	   *last_worker = NULL;
	char	   *last = NULL;
	int			rank = -1;
	int			code = -1;
	char	   *save;
	StringInfoData out;

	snprintf(path, sizeof(path), "%s/worker.log", active_job.dir);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	size = lseek(fd, 0, SEEK_END);
	lseek(fd, size > (off_t) sizeof(buf) - 1 ? size - (off_t) sizeof(buf) + 1 : 0, SEEK_SET);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
	{
		char	   *p;

		while (*line == ' ')
			line++;
		if (strstr(line, "dml-worker error") != NULL)
			err_line = line;
		else if (strncmp(line, "dml-worker", 10) == 0)
			last_worker = line;
		else if (strstr(line, "mpirun noticed that process rank") != NULL)
			noticed = line;
		else if ((p = strstr(line, "Process name: [[")) != NULL && (p = strchr(p, ']')) != NULL)
			rank = atoi(p + 2);
		else if ((p = strstr(line, "Exit code:")) != NULL)
			code = atoi(p + 10);
		if (line[strspn(line, " \t-")] != '\0')
			last = line;
	}
	if (err_line)
		return pstrdup(err_line);
	initStringInfo(&out);
	if (noticed)
		appendStringInfoString(&out, noticed);
	else if (rank >= 0)
		appendStringInfo(&out, "Rank %d exited with code %d.", rank, code);
	if (last_worker)
		appendStringInfo(&out, "%sLast worker message: %s", out.len ? " " : "", last_worker);
	if (out.len == 0 && last)
		appendStringInfoString(&out, last);
	return out.len ? out.data : NULL;
}

/* ---------------------------------------------------------------------
 * The job
 * --------------------------------------------------------------------- */

/* launch (or relaunch) mpirun for this job */
static void
start_job(JobRun *run)
{
	char	   *socket_path;

	if (active_job.listen_fd < 0)
		active_job.listen_fd = DmlListen(active_job.dir, &socket_path);
	else
		socket_path = psprintf("%s/ctl.sock", active_job.dir);
	run->job->attempt = run->restarts;
	/*
	 * the spill directory stays: a restarted rank reuses its spill when it
	 * is intact (workers/stream.c), and spills afresh otherwise
	 */
	active_job.pid = DmlLaunch(run->job, active_job.dir, socket_path);
	run->state = JOB_LAUNCHED;
	run->launched = GetCurrentTimestamp();
	run->in.len = 0;
	run->last_error = NULL;
}

/*
 * Write len bytes to rank 0 without blocking the backend: wait on the
 * latch and the socket together.  False when rank 0 is gone (the child's
 * exit says what happened).
 */
static bool
send_to_rank0(const char *p, size_t len)
{
	while (len > 0)
	{
		ssize_t		n = send(active_job.conn_fd, p, len, MSG_NOSIGNAL);

		if (n > 0)
		{
			p += n;
			len -= (size_t) n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		{
			int			rc = WaitLatchOrSocket(MyLatch,
											   WL_LATCH_SET | WL_SOCKET_WRITEABLE | WL_TIMEOUT |
											   WL_EXIT_ON_PM_DEATH,
											   active_job.conn_fd, 1000, PG_WAIT_EXTENSION);

			if (rc & WL_LATCH_SET)
				ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
			continue;
		}
		return false;
	}
	return true;
}

/*
 * The JOB message (protocol.h): the serialized job, then the checkpoint to
 * resume from (a restart) or a predict job's model.
 */
static void
send_job(JobRun *run)
{
	char	   *text = DmlJobText(run->job, run->have_checkpoint);
	uint32		tlen = (uint32) strlen(text);
	const char *att = NULL;
	uint32		alen = 0;
	uint32		hdr[4];

	if (run->job->type == DML_JOB_PREDICT)
	{
		att = VARDATA_ANY(run->job->model_blob);
		alen = VARSIZE_ANY_EXHDR(run->job->model_blob);
	}
	else if (run->have_checkpoint)
	{
		att = run->checkpoint;
		alen = run->checkpoint_len;
	}
	if ((uint64) tlen + alen + 4 > DML_MSG_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the job is too large to send to its workers (%u bytes)", tlen + alen)));
	hdr[0] = DML_MSG_MAGIC;
	hdr[1] = DML_MSG_JOB;
	hdr[2] = 4 + tlen + alen;
	hdr[3] = tlen;
	if (send_to_rank0((const char *) hdr, sizeof(hdr)) && send_to_rank0(text, tlen) && alen > 0)
		send_to_rank0(att, alen);
	pfree(text);
}

/* accept rank 0's connection, if it is there */
static void
try_accept(JobRun *run)
{
	int			fd = accept4(active_job.listen_fd, NULL, NULL,
							 SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd < 0)
	{
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return;
		ereport(ERROR,
				(errcode_for_socket_access(),
				 errmsg("could not accept on control socket: %m")));
	}
	active_job.conn_fd = fd;
	run->state = JOB_RUNNING;
	run->last_progress = GetCurrentTimestamp();
	send_job(run);
}

/*
 * An ERROR from rank 0 is "SQLSTATE\nmessage\nhint".  A SQLSTATE means a
 * problem with the user's data or request, raised as it is; without one it
 * is a failure of the job, reported with the exit status.
 */
static void
raise_user_error(const char *payload)
{
	char	   *copy = pstrdup(payload);
	char	   *msg = strchr(copy, '\n');
	char	   *hint;

	if (msg == NULL || msg - copy != 5)
		return;
	*msg++ = '\0';
	hint = strchr(msg, '\n');
	if (hint)
		*hint++ = '\0';
	ereport(ERROR,
			(errcode(MAKE_SQLSTATE(copy[0], copy[1], copy[2], copy[3], copy[4])),
			 errmsg("%s", msg),
			 hint && hint[0] ? errhint("%s", hint) : 0));
}

/* the message part of an ERROR payload without a SQLSTATE */
static char *
error_text(const char *payload)
{
	char	   *copy = pstrdup(payload);
	char	   *msg = strchr(copy, '\n');
	char	   *end;

	if (msg == NULL)
		return copy;
	msg++;
	end = strchr(msg, '\n');
	if (end)
		*end = '\0';
	return msg;
}

/* the start of the job's log, NUL-terminated, into buf; false when there is none */
static bool
read_job_log(char *buf, size_t cap)
{
	char		path[MAXPGPATH];
	int			fd;
	ssize_t		n;

	snprintf(path, sizeof(path), "%s/worker.log", active_job.dir);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	n = read(fd, buf, cap - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return true;
}

/*
 * The host whose Open MPI daemon mpirun lost, from the job's log: the
 * daemon was killed, its host went down or its link did (found by the TCP
 * keepalive of Open MPI's out-of-band channel, oob_tcp_keepalive_*).  NULL
 * when the log names none.
 */
static char *
lost_host(void)
{
	char		buf[16384];
	char	   *p;
	char		host[256];

	/* "  Remote daemon: [[60877,0],2] on node dmlh3" */
	if (!read_job_log(buf, sizeof(buf)) ||
		(p = strstr(buf, "Remote daemon:")) == NULL || (p = strstr(p, " on node ")) == NULL ||
		sscanf(p + 9, "%255[A-Za-z0-9._-]", host) != 1)
		return NULL;
	return pstrdup(host);
}

/*
 * An error a rank marked as one that would happen again on every try (a
 * line "dml-worker final SQLSTATE message" in the job's log, from
 * workers' worker_fail_final): raised as it is, without a restart.
 */
static void
raise_final_error(void)
{
	char		buf[16384];
	char	   *line;

	if (!read_job_log(buf, sizeof(buf)))
		return;
	line = strstr(buf, "dml-worker final ");
	if (line == NULL)
		return;
	line += strlen("dml-worker final ");
	if (strlen(line) < 7 || line[5] != ' ')
		return;
	if (strchr(line, '\n'))
		*strchr(line, '\n') = '\0';
	ereport(ERROR,
			(errcode(MAKE_SQLSTATE(line[0], line[1], line[2], line[3], line[4])),
			 errmsg("%s", line + 6),
			 errhint("A worker's query or data failed; the job was not restarted, as it would fail again.")));
}

/* "training" or "predict", for messages */
static const char *
job_noun(DmlJob *job)
{
	return job->type == DML_JOB_PREDICT ? "predict" : "training";
}

/* mpirun is gone without a model: restart from the checkpoint, or fail */
static bool
job_failed(JobRun *run, const char *what)
{
	char	   *why;
	char	   *lost = lost_host();

	if (run->last_error)
		raise_user_error(run->last_error);
	raise_final_error();
	why = run->last_error ? error_text(run->last_error) : log_summary();
	if (lost)
	{
		/* the restart leaves the host out: its ranks go to the hosts left */
		what = psprintf("host \"%s\" lost", lost);
		why = psprintf("Open MPI lost contact with its daemon on host \"%s\".", lost);
		if (!list_member(run->job->lost_hosts, makeString(lost)))
			run->job->lost_hosts = lappend(run->job->lost_hosts, makeString(lost));
	}

	if (run->restarts < run->job->max_restarts)
	{
		run->restarts++;
		if (run->have_checkpoint)
			ereport(NOTICE,
					(errmsg("worker failure (%s); restarting from the checkpoint of epoch %d, restart %d of %d",
							what, run->checkpoint_epoch, run->restarts,
							run->job->max_restarts),
					 why ? errdetail("%s", why) : 0));
		else
			ereport(NOTICE,
					(errmsg("worker failure (%s) before the first checkpoint; restarting from the beginning, restart %d of %d",
							what, run->restarts, run->job->max_restarts),
					 why ? errdetail("%s", why) : 0));
		/* the old processes are gone; forget them and start again */
		if (active_job.conn_fd >= 0)
			close(active_job.conn_fd);
		active_job.conn_fd = -1;
		active_job.pid = 0;
		active_job.npids = 0;
		start_job(run);
		return true;
	}
	ereport(ERROR,
			(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
			 errmsg("%s job failed: %s", job_noun(run->job), what),
			 why ? errdetail("%s", why) : 0,
			 run->restarts > 0 ? errhint("The job was restarted %d time%s first.",
										 run->restarts, run->restarts == 1 ? "" : "s") : 0));
	return false;				/* not reached */
}

/* one pass of the loop; returns true while the job is not finished */
static bool
supervise_step(JobRun *run)
{
	int			events = WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH;
	pgsocket	sock = PGINVALID_SOCKET;
	int			rc;
	int			status;
	pid_t		r;

	if (run->state == JOB_LAUNCHED)
		sock = active_job.listen_fd;
	else if (active_job.conn_fd >= 0)
		sock = active_job.conn_fd;
	if (sock != PGINVALID_SOCKET)
		events |= WL_SOCKET_READABLE;

	rc = WaitLatchOrSocket(MyLatch, events, sock, DML_POLL_MS, PG_WAIT_EXTENSION);
	if (rc & WL_LATCH_SET)
		ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();

	if (run->state == JOB_LAUNCHED)
		try_accept(run);
	if (active_job.conn_fd >= 0 && !read_messages(run))
	{
		/* rank 0 closed its end: the job is over one way or another */
		close(active_job.conn_fd);
		active_job.conn_fd = -1;
	}

	r = waitpid(active_job.pid, &status, WNOHANG);
	if (r == active_job.pid)
	{
		/* drain anything rank 0 wrote before it went */
		if (active_job.conn_fd >= 0)
		{
			while (read_messages(run) && run->in_more)
				CHECK_FOR_INTERRUPTS();
			close(active_job.conn_fd);
			active_job.conn_fd = -1;
		}
		active_job.pid = 0;
		if (run->state == JOB_RECEIVED && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		{
			run->state = JOB_EXITED;
			return false;
		}
		if (run->state == JOB_RECEIVED)
		{
			/* the model is complete and checked; a noisy exit is only logged */
			ereport(WARNING,
					(errmsg("mpirun %s after sending the model", describe_status(status))));
			run->state = JOB_EXITED;
			return false;
		}
		return job_failed(run, describe_status(status));
	}

	if (run->state == JOB_LAUNCHED &&
		TimestampDifferenceExceeds(run->launched, GetCurrentTimestamp(),
								   DML_CONNECT_TIMEOUT_S * 1000))
	{
		char	   *why = log_summary();

		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("%s job did not start within %d seconds", job_noun(run->job),
						DML_CONNECT_TIMEOUT_S),
				 why ? errdetail("%s", why) : 0));
	}
	if (run->state == JOB_RUNNING && run->job->epoch_timeout > 0 &&
		TimestampDifferenceExceeds(run->last_progress, GetCurrentTimestamp(),
								   run->job->epoch_timeout * 1000))
	{
		/* a hung rank: end this attempt and treat it as a failure */
		char	   *what = psprintf("no progress for %d seconds (epoch_timeout)",
									run->job->epoch_timeout);
		bool		keep;

		signal_job(SIGKILL);
		while (waitpid(active_job.pid, &status, 0) < 0 && errno == EINTR)
			;
		active_job.pid = 0;
		if (active_job.conn_fd >= 0)
			close(active_job.conn_fd);
		active_job.conn_fd = -1;
		keep = job_failed(run, what);
		return keep;
	}
	if (run->state == JOB_RECEIVED &&
		TimestampDifferenceExceeds(run->received, GetCurrentTimestamp(),
								   DML_EXIT_GRACE_S * 1000))
	{
		/* the model is here; a job stuck in MPI_Finalize is not our problem */
		DmlKillActiveJob();
		run->state = JOB_EXITED;
		return false;
	}
	return true;
}

/* mpirun ended (or a child of it stopped): wake the supervising loop */
static void
job_sigchld(SIGNAL_ARGS)
{
	int			save_errno = errno;

	SetLatch(MyLatch);
	errno = save_errno;
}

/*
 * The settings of a job text that a search's trials may vary over the same
 * rows (what the workers use in training, not in loading and preparing
 * them), and the settings of one launch.  Everything else is the job's
 * data plan: relation and slices, snapshot, role, features and their
 * levels, target and classes, kind, loss and outputs, validation, seed,
 * nulls, device, sync, memory.
 */
static const char *const trial_keys[] = {
	"learning_rate", "momentum", "beta1", "beta2", "eps", "schedule", "step_size", "gamma",
	"tolerance", "batch_size", "epochs", "max_steps", "max_seconds", "weight_decay",
	"weight_decay_rows",
	"class_weight", "l1_ratio", "patience", "optimizer", "activation", "hidden", "topk_ratio",
	"attempt", "checkpoint_last", "checkpoint_every", "fault", "straggler", "spill_dir",
	"resume", "resident"
};

/* the job's data plan: its text without the lines of trial_keys */
static char *
resident_key(DmlJob *job)
{
	char	   *text = DmlJobText(job, false);
	StringInfoData key;
	char	   *save = NULL;

	initStringInfo(&key);
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
	{
		size_t		klen = strcspn(line, " ");
		bool		trial = false;

		for (int i = 0; i < lengthof(trial_keys) && !trial; i++)
			trial = strlen(trial_keys[i]) == klen && strncmp(line, trial_keys[i], klen) == 0;
		if (!trial)
			appendStringInfo(&key, "%s\n", line);
	}
	pfree(text);
	return key.data;
}

/*
 * Whether a job may stay resident for the search's next trials: dml_tune's
 * iterative trials, synchronized by all-reduce (no parameter servers,
 * whose loop ends with the training).
 */
static bool
resident_ok(const DmlJob *job)
{
	return DmlTuneResident && job->type == DML_JOB_TRAIN && job->servers == 0 &&
		job->sync == DML_SYNC_ALLREDUCE &&
		job->optimizer != DML_JOB_OPT_EXACT && job->optimizer != DML_JOB_OPT_NEWTON &&
		job->optimizer != DML_JOB_OPT_LBFGS;
}

/* a copy of a list of strings, in the current memory context */
static List *
copy_strings(List *from)
{
	List	   *to = NIL;
	ListCell   *lc;

	foreach(lc, from)
		to = lappend(to, pstrdup(lfirst(lc)));
	return to;
}

/*
 * Keep the job resident after its model: its plan, its ranks' hosts, and
 * the labels they listed while loading (sent once, at the load)
 */
static void
keep_resident(DmlJob *job, const char *key, const DmlJobResult *result)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	if (resident.key)
		pfree(resident.key);
	resident.key = pstrdup(key);
	list_free_deep(resident.rank_hosts);
	resident.rank_hosts = copy_strings(job->rank_hosts);
	if (result->classes != NIL)
	{
		list_free_deep(resident.classes);
		resident.classes = copy_strings(result->classes);
	}
	MemoryContextSwitchTo(old);
	resident.alive = true;
	resident.trials++;
}

/*
 * DmlEndResidentJob
 *		End dml_tune's resident job, if one is running.
 */
void
DmlEndResidentJob(void)
{
	if (resident.alive)
		DmlKillActiveJob();
}

/*
 * DmlFinishResidentJob
 *		End dml_tune's resident job, if one is running, as a job ends: rank 0
 *		is told that no trial follows (END), every rank leaves MPI, and
 *		mpirun exits by itself.  Killing it (DmlKillActiveJob) cost the
 *		search a second and more: mpirun takes its time to notice signalled
 *		ranks.  Waits at most 5 s, interruptibly; what is left then, or on
 *		any error, DmlKillActiveJob ends.
 */
void
DmlFinishResidentJob(void)
{
	uint32		hdr[3] = {DML_MSG_MAGIC, DML_MSG_END, 0};
	TimestampTz deadline;

	if (!resident.alive || active_job.pid <= 0 || active_job.conn_fd < 0)
		return;
	if (send_to_rank0((const char *) hdr, sizeof(hdr)))
	{
		deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), 5000);
		while (GetCurrentTimestamp() < deadline)
		{
			int			status;
			pid_t		r = waitpid(active_job.pid, &status, WNOHANG);

			if (r == active_job.pid || (r < 0 && errno == ECHILD))
			{
				elog(DEBUG1, "dml: the search's job ended by itself (mpirun's exit status %d)",
					 r == active_job.pid && WIFEXITED(status) ? WEXITSTATUS(status) : -1);
				active_job.pid = 0;
				break;
			}
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 2,
							 PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}
	DmlKillActiveJob();			/* what remains: stragglers, sockets, directories */
}

/* a job's run, supervised from its start (or its trial's JOB) to its end */
static void
job_run_init(JobRun *run, DmlJob *job, DmlJobResult *result, DmlProgressCallback cb, void *cb_arg)
{
	memset(run, 0, sizeof(*run));
	run->job = job;
	run->result = result;
	run->cb = cb;
	run->cb_arg = cb_arg;
	run->cxt = CurrentMemoryContext;
	memset(result, 0, sizeof(*result));
}

/*
 * A trial sent to the resident job: its JOB (with the checkpoint to
 * resume from, halving's next rung) over the open control socket, then
 * supervised to its model as a launched job is; a failure restarts the
 * trial as a job of its own (which stays resident).
 */
static void
run_resident_trial(DmlJob *job, DmlJobResult *result, DmlProgressCallback cb, void *cb_arg,
				   const char *key)
{
	JobRun		run;
	TimestampTz start = GetCurrentTimestamp();
	pqsigfunc	old_sigchld;
	long		secs;
	int			usecs;

	job_run_init(&run, job, result, cb, cb_arg);
	job->attempt = 0;
	if (active_job.spill[0])
		job->spill_dir = pstrdup(active_job.spill);	/* a restart's ranks spill where the job's did */
	job->rank_hosts = copy_strings(resident.rank_hosts);

	old_sigchld = DmlSetSignal(SIGCHLD, job_sigchld);
	PG_TRY();
	{
		if (DmlResumeCheckpoint != NULL)
			handle_checkpoint(&run, DmlResumeCheckpoint, DmlResumeCheckpointLen);
		run.state = JOB_RUNNING;
		run.launched = run.last_progress = GetCurrentTimestamp();
		send_job(&run);
		while (supervise_step(&run) && run.state != JOB_RECEIVED)
			;
	}
	PG_CATCH();
	{
		pqsignal(SIGCHLD, old_sigchld);
		DmlKillActiveJob();
		PG_RE_THROW();
	}
	PG_END_TRY();
	pqsignal(SIGCHLD, old_sigchld);
	/* the same plan lists the same labels: the ranks listed them at the load */
	if (job->discover_classes && result->classes == NIL)
		result->classes = copy_strings(resident.classes);
	if (run.state == JOB_RECEIVED && active_job.pid > 0)
		keep_resident(job, key, result);
	else
		DmlKillActiveJob();

	TimestampDifference(start, GetCurrentTimestamp(), &secs, &usecs);
	result->seconds = secs + usecs / 1e6;
	result->restarts = run.restarts;
	if (result->weights == NULL)
		elog(ERROR, "dml: job ended without a model. Please report a bug.");
}

/*
 * DmlRunJob
 *		Run a job to completion, calling cb for each epoch (training) or
 *		job->on_block for each block of predictions (predict).  On return
 *		the result holds the model, or the count of rows predicted; on any
 *		error the job is killed first.  A predict job is never restarted:
 *		its blocks are already written.
 */
void
DmlRunJob(DmlJob *job, DmlJobResult *result, DmlProgressCallback cb, void *cb_arg)
{
	JobRun		run;
	char	   *dir;
	TimestampTz start = GetCurrentTimestamp();
	pqsigfunc	old_sigchld;
	long		secs;
	int			usecs;
	char	   *key = NULL;

	if (!exit_hook_registered)
	{
		before_shmem_exit(exit_hook, (Datum) 0);
		exit_hook_registered = true;
	}
	/* dml_tune: a trial over the resident job's rows goes to it; another ends it */
	job->resident = resident_ok(job);
	if (job->resident || resident.alive)
		key = resident_key(job);
	if (resident.alive)
	{
		int			status;

		/* a job that ended while it waited is reaped, and the trial launches anew */
		if (waitpid(active_job.pid, &status, WNOHANG) == active_job.pid)
		{
			active_job.pid = 0;
			DmlKillActiveJob();
		}
	}
	if (resident.alive)
	{
		if (job->resident && strcmp(key, resident.key) == 0)
		{
			run_resident_trial(job, result, cb, cb_arg, key);
			return;
		}
		DmlKillActiveJob();
	}
	if (active_job.active)
		elog(ERROR, "dml: a job is already running in this backend. Please report a bug.");
	if (job->type == DML_JOB_PREDICT && (job->on_block == NULL || job->max_restarts != 0))
		elog(ERROR, "dml: a predict job needs a block callback and no restarts. Please report a bug.");

	/* the workers' login works before anything starts */
	DmlCheckWorkerLogin(job->conninfo, GetUserId());

	job_run_init(&run, job, result, cb, cb_arg);

	active_job.active = true;
	active_job.dir[0] = '\0';
	active_job.spill[0] = '\0';
	active_job.listen_fd = active_job.conn_fd = -1;
	active_job.pid = 0;
	active_job.npids = 0;

	/* an exit wakes us at once instead of at the next poll */
	old_sigchld = DmlSetSignal(SIGCHLD, job_sigchld);
	PG_TRY();
	{
		/* the cluster's limits; DmlKillActiveJob gives the slots back */
		DmlAcquireJobSlots(job->workers + job->servers);
		dir = DmlMakeJobDir();
		strlcpy(active_job.dir, dir, sizeof(active_job.dir));
		if (job->type == DML_JOB_TRAIN)
			spill_dir_for(job);
		/* dml_resume: the first launch starts from the kept checkpoint */
		if (job->type == DML_JOB_TRAIN && DmlResumeCheckpoint != NULL)
			handle_checkpoint(&run, DmlResumeCheckpoint, DmlResumeCheckpointLen);
		start_job(&run);
		/* a resident job is done with this trial at its model */
		while (supervise_step(&run) && !(job->resident && run.state == JOB_RECEIVED))
			;
	}
	PG_CATCH();
	{
		pqsignal(SIGCHLD, old_sigchld);
		DmlKillActiveJob();
		PG_RE_THROW();
	}
	PG_END_TRY();
	pqsignal(SIGCHLD, old_sigchld);
	if (job->resident && run.state == JOB_RECEIVED && active_job.pid > 0)
		keep_resident(job, key, result);
	else
		DmlKillActiveJob();

	TimestampDifference(start, GetCurrentTimestamp(), &secs, &usecs);
	result->seconds = secs + usecs / 1e6;
	result->restarts = run.restarts;
	if (job->type == DML_JOB_TRAIN && result->weights == NULL)
		elog(ERROR, "dml: job ended without a model. Please report a bug.");
	if (job->type == DML_JOB_PREDICT && run.state != JOB_EXITED)
		elog(ERROR, "dml: predict job ended without DONE. Please report a bug.");
}
