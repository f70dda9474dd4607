/*-------------------------------------------------------------------------
 *
 * coordinator.h
 *	  The part of the backend that runs one job of dml-workers: plan the
 *	  slices, serialize the job, launch mpirun, send rank 0 the job,
 *	  supervise it, receive the model (a training job, as a typed result)
 *	  or the predictions (a predict job).
 *
 * The extension (extension/train*.c) checks the arguments and resolves
 * every name through the catalog; it hands the coordinator a DmlJob whose
 * SQL fragments are already quoted.  The coordinator never blocks: it
 * waits on the latch, the control socket and the child together.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_COORDINATOR_H
#define DML_COORDINATOR_H

#include "postgres.h"

#include "access/attnum.h"
#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "storage/block.h"
#include "jobspec.h"
#include "kernels.h"
#include "protocol.h"
#include "settings.h"

/* What a job does */
typedef enum DmlJobType
{
	DML_JOB_TRAIN,				/* train a model, send it back */
	DML_JOB_PREDICT				/* run a model over a relation, stream predictions back */
} DmlJobType;

/* Called for each PREDICTIONS message of a predict job, in order */
typedef void (*DmlBlockCallback) (const char *payload, uint32 len, void *arg);

#define DML_MAX_CLASSES		1000	/* labels of a classifier */

/* One rank's share: block range [start, end) of one relation */
typedef struct DmlSlice
{
	int			rank;
	Oid			relid;
	BlockNumber start;
	BlockNumber end;			/* InvalidBlockNumber: to the end */
	bool		whole;			/* a view or foreign table: read it all */
	int			shard;			/* 0: this server; k: job->shard_servers' k-th
								 * (shards.c), read with query */
	char	   *query;			/* a shard's slice: the SELECT on its server */
} DmlSlice;

typedef struct DmlJob
{
	DmlJobType	type;

	/* what to train */
	char	   *name;
	Oid			relid;
	char		relkind;
	DmlKind		kind;			/* DML_KIND_AUTO until the plan settles it */
	bool		classification;
	DmlFeature	target;			/* its name, attnum, typid and expr */
	List	   *features;		/* of DmlFeature * (jobspec.h) */
	List	   *classes;		/* of char *, class labels as text */
	char	   *pack_target;	/* all-numeric job: the target for dml.pack_rows
								 * (float8, or an int8 label key), else NULL */
	bool		pack_wide;		/* dml.pack_rows64: float64 features (exact least squares) */
	char	   *label_keys;		/* integer or boolean labels: "int" or "bool" */
	bool		discover_classes;	/* the workers list the labels (classes NIL) */
	bool		load_copy;		/* options: {"load": "copy"} */
	Oid			label_type;		/* type of the target column */
	int			ninputs;		/* sum of feature widths */
	int			noutputs;
	int			nhidden;
	int			hidden[16];
	DmlAct		activation;
	DmlLoss		loss;
	DmlJobOptimizer optimizer;
	double		learning_rate;
	int			batch_size;
	int			epochs;
	int64		rows;			/* rows counted, up to a limit (-1: not counted) */
	int			max_steps;		/* epochs not given: the step budget (0: none) */
	double		max_seconds;	/* time budget of training; 0: none */
	double		weight_decay;
	double		weight_decay_rows;	/* > 0: weight_decay is this over the rows the
									 * workers read (jobspec.h) */
	double		validation;
	int			patience;
	DmlNulls	nulls;
	int			workers;
	List	   *host_names;		/* of char *: dml_train's hosts argument, or NIL */
	DmlDevice	device;
	int64		seed;
	/* optimizer details from options */
	double		momentum;
	double		beta1;
	double		beta2;
	double		eps;
	DmlSchedule schedule;
	int			step_size;
	double		gamma;
	double		tolerance;

	/* how to run it */
	List	   *slices;			/* of DmlSlice * */
	char	   *snapshot;
	char	   *role;			/* role name the workers log in as */
	char	   *conninfo;
	List	   *hosts;			/* of DmlHost *: dml.hosts narrowed (hosts.c), or NIL */
	List	   *lost_hosts;		/* of String: hosts a restart leaves out */
	char	   *mpi_options;	/* dml.mpi_options */
	List	   *shard_servers;	/* of DmlShardServer * (shards.h), or NIL */
	List	   *shard_reads;	/* of char *: JSON of each shard's read, for metrics */
	List	   *rank_hosts;		/* of char *: each rank's host, as rank 0 said */
	char	   *mpirun;
	char	   *worker_path;
	int			checkpoint_every;
	int			max_restarts;
	int			epoch_timeout;	/* seconds without progress before a restart; 0: none */
	char	   *fault;			/* test hook: "rank:epoch:how" or NULL */
	int			attempt;		/* 0, then 1 for the first restart, ... */
	int			checkpoint_last;	/* also a checkpoint after the last epoch (dml_tune's halving) */
	int			resident;		/* dml_tune: the ranks keep their rows for the next trial (supervise.c) */
	bool		no_in_server;	/* option in_server => false: always a job */
	bool		no_shared_memory;	/* option shared_memory => false: MPI_Allreduce */
	bool		no_byte_rows;	/* option byte_rows => false: float32 rows only */
	bool		no_amx;			/* option amx => false: no product on AMX's tiles */
	bool		balance;		/* option balance => true: the ranks share a step's rows by speed */
	int			rank_min_norm;	/* option rank_deficient => 'min_norm' (exact solver) */
	DmlCovType	cov_type;		/* option cov: HC0/HC1 standard errors (exact, Newton) */
	char	   *class_weight;	/* "balanced", or the weights in output order "w0,w1,..."; or NULL */
	double		l1_ratio;		/* elastic net: share of weight_decay on |W|_1 (L-BFGS: OWL-QN) */
	int64		memory;			/* bytes a rank may hold (jobspec.h) */
	int			window;			/* blocks a streamed epoch mixes */
	char	   *spill_dir;		/* the job's spill directory (set by DmlRunJob) */
	int64		spill_limit;	/* bytes of spill for the job; 0: no limit */
	int			spill_format;	/* options "spill": DML_SPILL_* */
	int			tf32;			/* options "tf32": GPU GEMMs take TF32 inputs */
	DmlShuffle	shuffle;		/* options "shuffle": an epoch's row order */

	/* synchronization (workers/sync.h) */
	DmlSyncMode sync;
	int			servers;		/* parameter-server ranks after the workers */
	int			staleness;
	int			average_every;
	DmlCompression compression;
	double		topk_ratio;
	char	   *straggler;		/* test hook: "rank:ms" or "*:ms:p" */

	/*
	 * a predict job: the model, the query rank 0 reads when no slices are
	 * planned (else each slice's: target is the row id, features' exprs
	 * DmlPredictColumnExpr's), where blocks go
	 */
	bytea	   *model_blob;		/* kernels/format.c, written into the job directory */
	char	   *predict_query;	/* SELECT [id,] features..., names quoted */
	bool		predict_id;		/* the query's first column is the row id */
	int			predict_id_bytes;	/* pack_target set: the id's width, 2, 4 or 8 */
	DmlBlockCallback on_block;
	void	   *block_arg;
} DmlJob;

/* What came back */
typedef struct DmlJobResult
{
	bytea	   *weights;
	char	   *metrics_json;
	int			epochs_run;
	double		final_loss;
	double		seconds;
	double		rows_per_second;
	char	   *device;
	DmlStopReason stopped;		/* why training stopped */
	int			restarts;
	int64		rows_predicted; /* a predict job: the count its DONE gave */
	List	   *classes;		/* discover_classes: the labels rank 0 listed */
} DmlJobResult;

/* Called for each epoch as its progress arrives */
typedef void (*DmlProgressCallback) (const DmlProgress *p, void *arg);

/* plan.c */
/*
 * Blocks per slice query at most.  A dml.pack_rows block is one value that
 * the server builds, copies and sends whole, and at 8 MB of heap the copies
 * stay in cache and the memory is reused (at 100 MB, sending the value cost
 * about as much as building it); a block of float8 rows is about half the
 * heap's size, of booleans at most four times.  COPY streams its rows, so
 * its slices are larger (fewer queries).
 */
#define DML_SLICE_BLOCKS_PACKED	1024
#define DML_SLICE_BLOCKS_COPY	8192

extern List *DmlPlanSlices(Oid relid, char relkind, int nranks, BlockNumber max_blocks);
extern char *DmlSliceQuery(DmlJob *job, DmlSlice *slice);
extern bool DmlLeavesReadable(Oid relid);
extern char *DmlPredictColumnExpr(const DmlFeature *f, const char *qname);

/* extension/exact.c: the in-server alternative to a job */
extern void DmlExactSolve(DmlJob *job, DmlJobResult *result,
						  DmlProgressCallback cb, void *cb_arg);

/* extension/fit.c: small tables fitted by L-BFGS in the server */
#define DML_FIT_MAX_VALUES	4000000	/* rows x inputs, about 16 MB of float32 */
extern bool DmlFitInServer(DmlJob *job);
extern void DmlFitSolve(DmlJob *job, DmlJobResult *result,
						DmlProgressCallback cb, void *cb_arg);

/* settings.c: how a job's workers are started and connect back (settings.h) */
extern const char *DmlTuneSnapshot;	/* dml_tune's, exported once for all trials */
extern bool DmlTuneCheckpointLast;	/* dml_tune's halving: trials checkpoint their last epoch */
extern bool DmlTuneResident;	/* dml_tune: trials over the same rows share one job */
extern void DmlJobSetLaunch(DmlJob *job, bool export_snapshot, const char *subxact_notice);
extern bool DmlBuildHasCuda(void);
extern bool DmlGpuVisible(void);

/* result.c: the metrics JSON of a training job's typed result */
extern char *DmlResultJson(const DmlJob *job, const DmlResult *r, const int64 *server_staleness,
						   const double *peak_rss, const DmlMetrics *met, const unsigned char *blob,
						   const char *statistics);

/* login.c: workers log in as the calling role */
extern char *DmlWorkerConninfo(Oid role);
extern void DmlAppendConnValue(StringInfo buf, const char *key, const char *value);
extern void DmlCheckWorkerLogin(const char *conninfo, Oid role);

/* limits.c: dml.max_workers_total, dml.max_jobs_per_role */
extern void DmlAcquireJobSlots(int ranks);
extern void DmlReleaseJobSlots(void);
/* limits.c: dml.max_concurrent_jobs, cluster-wide: a running background job's slot */
extern bool DmlAcquireRunSlot(int max);
extern void DmlReleaseRunSlot(void);
extern bool DmlRunSlotFree(int max);

/* launch.c, supervise.c */
extern void DmlRunJob(DmlJob *job, DmlJobResult *result,
					  DmlProgressCallback cb, void *cb_arg);
extern void DmlKillActiveJob(void);
extern void DmlEndResidentJob(void);
extern void DmlFinishResidentJob(void);

/*
 * extension/jobs.c, for a background job: each checkpoint as it arrives
 * (to keep it durably), and a checkpoint to start from (dml_resume)
 */
typedef void (*DmlCheckpointHookType) (const char *payload, uint32 len, int epoch);
/* where rank 0 is within the epoch (STEP messages); set by the extension's progress.c */
typedef void (*DmlStepHookType) (int epoch, int step, int steps);
extern DmlStepHookType DmlStepHook;
extern DmlCheckpointHookType DmlCheckpointHook;
extern const char *DmlResumeCheckpoint;
extern uint32 DmlResumeCheckpointLen;

#endif							/* DML_COORDINATOR_H */
