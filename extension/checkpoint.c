/*-------------------------------------------------------------------------
 *
 * checkpoint.c
 *	  Durable checkpoints of background jobs: files in the data directory,
 *	  dml_checkpoints/<database oid>/<job id>, that dml_resume starts from.
 *
 * The coordinator keeps each checkpoint rank 0 sends in the job's private
 * directory (for restarts within the run), and hands it to the hook
 * here, which keeps a copy at most every dml.checkpoint_seconds: written
 * to a temporary file, then durable_rename (file and directory fsynced),
 * so after a crash the file is the old checkpoint or the new one, whole.
 * A checkpoint is the worker's own bytes (coordinator/protocol.h:
 * epoch, model blob, optimizer state); the worker checks it when it
 * resumes.  The files are outside the WAL: a base backup copies them, a
 * streaming replica does not have them, and pg_dump leaves them out (a
 * restored failed job resumes from its first epoch, to the same model).
 *
 * Beside it, <job id>.epochs: the job's dml.epochs rows as they come, one
 * fixed-size record appended per epoch, so dml_job_epochs shows them while
 * the job runs (its transaction commits them to dml.epochs only with the
 * model).  It is a live view, not a log to recover from: not fsynced,
 * emptied when a run starts, read past a torn last record, and removed
 * with the checkpoint.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/file_perm.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "dml.h"
#include "jobs.h"

#define DML_CHECKPOINT_DIR	"dml_checkpoints"

int			dml_checkpoint_seconds = DML_DEFAULT_CHECKPOINT_SECONDS;
int			dml_checkpoint_retention = DML_DEFAULT_CHECKPOINT_RETENTION;

static int64 kept_job = 0;
static TimestampTz kept_at = 0;

/* this database's directory of checkpoints, relative to the data directory */
static char *
checkpoint_dir(void)
{
	return psprintf("%s/%u", DML_CHECKPOINT_DIR, MyDatabaseId);
}

static char *
checkpoint_path(int64 job)
{
	return psprintf("%s/" INT64_FORMAT, checkpoint_dir(), job);
}

static char *
epochs_path(int64 job)
{
	return psprintf("%s/" INT64_FORMAT ".epochs", checkpoint_dir(), job);
}

/* make dml_checkpoints/<database> */
static void
make_job_dir(void)
{
	char	   *dir = checkpoint_dir();

	if (MakePGDirectory(DML_CHECKPOINT_DIR) != 0 && errno != EEXIST)
		ereport(ERROR, (errcode_for_file_access(),
						errmsg("could not create directory \"%s\": %m", DML_CHECKPOINT_DIR)));
	if (MakePGDirectory(dir) != 0 && errno != EEXIST)
		ereport(ERROR, (errcode_for_file_access(),
						errmsg("could not create directory \"%s\": %m", dir)));
}

/*
 * DmlJobEpochRecord
 *		Append an epoch's row of the job DmlCurrentJobId to its live file.
 *		A write that fails loses the live row only (dml.epochs still gets
 *		it with the model): a WARNING, not an error that ends the job.
 */
void
DmlJobEpochRecord(const DmlJobEpoch *e)
{
	char	   *path;
	int			fd;

	if (DmlCurrentJobId == 0)
		return;
	make_job_dir();
	path = epochs_path(DmlCurrentJobId);
	fd = OpenTransientFile(path, O_WRONLY | O_CREAT | O_APPEND | PG_BINARY);
	if (fd < 0 || write(fd, e, sizeof(*e)) != (ssize_t) sizeof(*e))
		ereport(WARNING, (errcode_for_file_access(),
						  errmsg("could not write \"%s\": %m", path)));
	if (fd >= 0)
		CloseTransientFile(fd);
}

/*
 * DmlJobEpochsRead
 *		The live epoch rows of job (this database's), in the order they
 *		came; *n of them (0 when there is no file).
 */
DmlJobEpoch *
DmlJobEpochsRead(int64 job, int *n)
{
	char	   *path = epochs_path(job);
	int			fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	struct stat st;
	DmlJobEpoch *rows;
	ssize_t		got;

	*n = 0;
	if (fd < 0)
	{
		if (errno != ENOENT)
			ereport(ERROR, (errcode_for_file_access(),
							errmsg("could not open \"%s\": %m", path)));
		return NULL;
	}
	if (fstat(fd, &st) != 0)
		ereport(ERROR, (errcode_for_file_access(), errmsg("could not stat \"%s\": %m", path)));
	if (st.st_size > MaxAllocSize)
		ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
						errmsg("\"%s\" is too large", path)));
	rows = palloc(st.st_size + 1);
	got = read(fd, rows, st.st_size);
	if (got < 0)
		ereport(ERROR, (errcode_for_file_access(), errmsg("could not read \"%s\": %m", path)));
	CloseTransientFile(fd);
	/* a record being appended right now is left for the next look */
	*n = (int) (got / sizeof(DmlJobEpoch));
	return rows;
}

/* the checkpoint hook of the job DmlCurrentJobId */
static void
keep_checkpoint(const char *payload, uint32 len, int epoch)
{
	TimestampTz now = GetCurrentTimestamp();
	char	   *path = checkpoint_path(DmlCurrentJobId);
	char	   *tmp = psprintf("%s.tmp", path);
	int			fd;

	if (kept_job == DmlCurrentJobId && kept_at != 0 &&
		!TimestampDifferenceExceeds(kept_at, now, dml_checkpoint_seconds * 1000))
		return;
	make_job_dir();
	fd = OpenTransientFile(tmp, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0 || write(fd, payload, len) != (ssize_t) len || CloseTransientFile(fd) != 0)
		ereport(ERROR, (errcode_for_file_access(),
						errmsg("could not write checkpoint \"%s\": %m", tmp)));
	(void) durable_rename(tmp, path, ERROR);
	kept_job = DmlCurrentJobId;
	kept_at = now;
	ereport(DEBUG1, (errmsg("dml job " INT64_FORMAT ": kept the checkpoint of epoch %d",
							DmlCurrentJobId, epoch)));
}

/*
 * DmlCheckpointBegin
 *		Before the job DmlCurrentJobId trains: keep its checkpoints, and
 *		start from the one kept, if any.  Returns the epoch it starts
 *		after (0: from the beginning).
 */
int
DmlCheckpointBegin(void)
{
	char	   *path = checkpoint_path(DmlCurrentJobId);
	int			fd;
	struct stat st;
	char	   *data;
	int32		epoch = 0;

	kept_job = DmlCurrentJobId;
	/*
	 * The first durable copy too waits dml.checkpoint_seconds from the
	 * start: its fsyncs run in the coordinator, and rank 0 waits on them
	 * (measured with bench/jobs.sh: a copy at the first epoch made the
	 * Fashion-MNIST MLP job about 14% slower than dml_train on a loaded
	 * machine, none made it 1%).
	 */
	kept_at = GetCurrentTimestamp();
	/* the live rows are this run's, as dml.epochs will be */
	if (unlink(epochs_path(DmlCurrentJobId)) != 0 && errno != ENOENT)
		ereport(WARNING, (errcode_for_file_access(),
						  errmsg("could not remove \"%s\": %m", epochs_path(DmlCurrentJobId))));
	DmlCheckpointHook = keep_checkpoint;
	DmlResumeCheckpoint = NULL;
	DmlResumeCheckpointLen = 0;
	fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	if (fd < 0)
	{
		if (errno != ENOENT)
			ereport(ERROR, (errcode_for_file_access(),
							errmsg("could not open checkpoint \"%s\": %m", path)));
		return 0;
	}
	if (fstat(fd, &st) != 0 || st.st_size < 8 || st.st_size > MaxAllocSize)
		ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
						errmsg("checkpoint \"%s\" is not a checkpoint", path)));
	data = MemoryContextAlloc(TopMemoryContext, st.st_size);
	if (read(fd, data, st.st_size) != st.st_size)
		ereport(ERROR, (errcode_for_file_access(),
						errmsg("could not read checkpoint \"%s\": %m", path)));
	CloseTransientFile(fd);
	memcpy(&epoch, data, 4);
	DmlResumeCheckpoint = data;
	DmlResumeCheckpointLen = (uint32) st.st_size;
	return epoch;
}

/* DmlCheckpointEnd: the job's training ended, one way or another */
void
DmlCheckpointEnd(void)
{
	DmlCheckpointHook = NULL;
	if (DmlResumeCheckpoint != NULL)
		pfree((void *) DmlResumeCheckpoint);
	DmlResumeCheckpoint = NULL;
	DmlResumeCheckpointLen = 0;
}

/* DmlCheckpointDrop: remove a job's checkpoint and its live epoch rows */
void
DmlCheckpointDrop(int64 job)
{
	char	   *path = checkpoint_path(job);

	if (unlink(path) != 0 && errno != ENOENT)
		ereport(WARNING, (errcode_for_file_access(),
						  errmsg("could not remove checkpoint \"%s\": %m", path)));
	path = epochs_path(job);
	if (unlink(path) != 0 && errno != ENOENT)
		ereport(WARNING, (errcode_for_file_access(),
						  errmsg("could not remove \"%s\": %m", path)));
}

/* DmlCheckpointJobs: the jobs of this database that have a checkpoint */
List *
DmlCheckpointJobs(void)
{
	char	   *dir = checkpoint_dir();
	DIR		   *d = AllocateDir(dir);
	struct dirent *de;
	List	   *jobs = NIL;

	if (d == NULL)
		return NIL;				/* no checkpoint yet */
	while ((de = ReadDir(d, dir)) != NULL)
	{
		char	   *end;
		long long	id = strtoll(de->d_name, &end, 10);

		/* a checkpoint or live epoch rows (a job may be listed twice) */
		if (end != de->d_name && id > 0 && (*end == '\0' || strcmp(end, ".epochs") == 0))
		{
			int64	   *p = palloc(sizeof(int64));

			*p = id;
			jobs = lappend(jobs, p);
		}
	}
	FreeDir(d);
	return jobs;
}
