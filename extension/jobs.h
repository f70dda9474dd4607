/*-------------------------------------------------------------------------
 *
 * jobs.h
 *	  Training as a background job (jobs.c) and the live view of every
 *	  running training (progress.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_JOBS_H
#define DML_JOBS_H

#include "postgres.h"

#include "coordinator.h"
#include "postmaster/bgworker.h"
#include "utils/timestamp.h"

/* Settings (jobs.c) */
#define DML_DEFAULT_MAX_CONCURRENT_JOBS	2
#define DML_MIN_MAX_CONCURRENT_JOBS		1
#define DML_MAX_MAX_CONCURRENT_JOBS		1000
#define DML_DEFAULT_MAX_QUEUED_JOBS		100
#define DML_MIN_MAX_QUEUED_JOBS			0
#define DML_MAX_MAX_QUEUED_JOBS			100000

#define DML_DEFAULT_CHECKPOINT_SECONDS	30
#define DML_DEFAULT_CHECKPOINT_RETENTION	10

extern int	dml_max_concurrent_jobs;
extern int	dml_max_queued_jobs;
extern int	dml_checkpoint_seconds;
extern int	dml_checkpoint_retention;

/* jobs.c */
extern bool DmlTrainCheckOnly;	/* dml_train returns after its checks */
extern int64 DmlCurrentJobId;	/* the job this process runs, or 0 */
extern void DmlJobsInit(void);
extern void DmlJobsRecover(bool resume);
extern void DmlBgworkerSetup(BackgroundWorker *w, const char *function,
							 const char *type, int restart);

/* launcher.c */
extern bool dml_resume_after_restart;
extern void DmlLauncherInit(void);

/* one epoch's dml.epochs row of a running job, as its live file keeps it */
typedef struct DmlJobEpoch
{
	int32		restarts;
	int32		epoch;
	double		loss;			/* NaN: NULL, as in the columns below */
	double		val_loss;
	double		val_metric;
	double		rows_per_second;
	double		seconds;
	double		bytes_sent;
	double		bytes_across;
	double		staleness;
	TimestampTz recorded;
} DmlJobEpoch;

/* checkpoint.c: durable checkpoints of the job DmlCurrentJobId */
extern int	DmlCheckpointBegin(void);
extern void DmlCheckpointEnd(void);
extern void DmlCheckpointDrop(int64 job);
extern List *DmlCheckpointJobs(void);
extern void DmlJobEpochRecord(const DmlJobEpoch *e);
extern DmlJobEpoch *DmlJobEpochsRead(int64 job, int *n);

/* progress.c */
extern void DmlProgressInit(void);
extern void DmlProgressBegin(const DmlJob *job, bool in_server);
extern void DmlProgressEpoch(const DmlProgress *p, double rows_per_second);
extern void DmlProgressEnd(void);
extern int	DmlJobWaitBegin(int64 job);
extern void DmlJobWaitEnd(int handle);
extern void DmlJobWakeWaiters(int64 job);
extern void DmlJobsNoteWaiting(void);
extern Oid *DmlJobsTakeWaiting(int *n);
extern void DmlProgressLast(int *epoch, int *epochs, double *loss, double *metric,
							double *rows_per_second);

#endif							/* DML_JOBS_H */
