/*-------------------------------------------------------------------------
 *
 * jobspec.h
 *	  The job contract: the settings of a training job, each listed once in
 *	  one table that the extension, the coordinator and the workers all use.
 *	  Plain C: no PostgreSQL, MPI or libpq header.
 *
 * DML_JOB_SETTINGS(X) calls X(TYPE, name, STORED, NAMES) once per setting:
 *
 *	 TYPE    INT (int), DBL (double), I64 (a 64-bit integer), STR (a string
 *	         every job has), OPT (a string that may be NULL: left out), ENUM
 *	         (one of the enums below, written and stored by its name)
 *	 name    the member of the backend's DmlJob (coordinator.h) and of the
 *	         workers' WorkerSpec (workers/worker.h), and the key of the
 *	         serialized job and of the stored spec's hyperparameters
 *	 STORED  1: kept in dml.models.spec -> hyperparameters
 *	 NAMES   ENUM: the enum's names, indexed by value (dml_job_names); else 0
 *
 * The coordinator writes the serialized job from the table
 * (coordinator/launch.c, job_settings), the workers read it back with the
 * same table (workers/spec.c), and the stored spec's hyperparameters are
 * written from it (extension/train_store.c, spec_json).  So a new setting is one
 * row here, one member in each of the two structs, its SQL argument, and
 * the code that uses it.
 *
 * Strings from SQL become these enums once, at the SQL boundary
 * (extension/train_args.c, with the user's error messages); nothing downstream
 * compares option strings.
 *
 * The serialized job is one line per setting, "key value", with "\\", "\n",
 * "\r" and "\t" escaped in the value; doubles are written with 17
 * significant digits, so they read back bit for bit.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_JOBSPEC_H
#define DML_JOBSPEC_H

/*
 * weight_decay_rows > 0: the default penalty of logistic and softmax
 * regression, weight_decay_rows / (the rows the workers read, at most
 * DML_PENALTY_MAX_ROWS), which the workers work out and send back
 * (DmlResult.weight_decay) where the plan did not count every row; the
 * weight_decay sent beside it is that for DML_PENALTY_MAX_ROWS rows
 */
#define DML_PENALTY_MAX_ROWS	1000000

#define DML_JOB_SETTINGS(X) \
	X(ENUM, kind, 0, DML_NAMES_KIND) \
	X(ENUM, loss, 0, DML_NAMES_LOSS) \
	X(ENUM, activation, 0, DML_NAMES_ACTIVATION) \
	X(ENUM, optimizer, 1, DML_NAMES_OPTIMIZER) \
	X(DBL, learning_rate, 1, 0) \
	X(DBL, momentum, 1, 0) \
	X(DBL, beta1, 0, 0) \
	X(DBL, beta2, 0, 0) \
	X(DBL, eps, 0, 0) \
	X(ENUM, schedule, 1, DML_NAMES_SCHEDULE) \
	X(INT, step_size, 0, 0) \
	X(DBL, gamma, 0, 0) \
	X(DBL, tolerance, 1, 0) \
	X(INT, batch_size, 1, 0) \
	X(INT, epochs, 1, 0) \
	X(INT, max_steps, 1, 0) \
	X(DBL, max_seconds, 1, 0) \
	X(DBL, weight_decay, 1, 0) \
	X(DBL, weight_decay_rows, 0, 0) \
	X(INT, rank_min_norm, 1, 0) \
	X(ENUM, cov_type, 1, DML_NAMES_COV) \
	X(OPT, class_weight, 1, 0) \
	X(DBL, l1_ratio, 1, 0) \
	X(DBL, validation, 1, 0) \
	X(INT, patience, 1, 0) \
	X(ENUM, nulls, 1, DML_NAMES_NULLS) \
	X(ENUM, device, 0, DML_NAMES_DEVICE) \
	X(I64, seed, 1, 0) \
	X(INT, checkpoint_every, 0, 0) \
	X(OPT, fault, 0, 0) \
	X(ENUM, sync, 1, DML_NAMES_SYNC) \
	X(INT, servers, 1, 0) \
	X(INT, staleness, 1, 0) \
	X(INT, average_every, 1, 0) \
	X(ENUM, compression, 1, DML_NAMES_COMPRESSION) \
	X(DBL, topk_ratio, 1, 0) \
	X(OPT, straggler, 0, 0) \
	X(INT, attempt, 0, 0) \
	X(I64, memory, 0, 0) \
	X(INT, window, 0, 0) \
	X(OPT, spill_dir, 0, 0) \
	X(I64, spill_limit, 0, 0) \
	X(INT, spill_format, 0, 0) \
	X(INT, checkpoint_last, 0, 0) \
	X(INT, resident, 0, 0) \
	X(INT, tf32, 0, 0) \
	X(ENUM, shuffle, 1, DML_NAMES_SHUFFLE)

/*
 * The job's enums.  The first values of DmlJobOptimizer are kernels.h's
 * DmlOptimizer (the iterative ones); DmlSchedule, DmlLoss (loss) and DmlAct
 * (activation) are kernels.h's, named here (jobspec.c) in their order.
 */

/*
 * The kind of model: dml.models.kind and dml_train's model argument.
 * DML_KIND_AUTO is the argument's 'auto' while the plan settles it
 * (extension/train_plan.c); no job runs with it.
 */
typedef enum DmlKind
{
	DML_KIND_LINEAR,
	DML_KIND_LOGISTIC,
	DML_KIND_SOFTMAX,
	DML_KIND_MLP,
	DML_KIND_AUTO
} DmlKind;

typedef enum DmlJobOptimizer
{
	DML_JOB_OPT_SGD,
	DML_JOB_OPT_MOMENTUM,
	DML_JOB_OPT_NESTEROV,
	DML_JOB_OPT_ADAM,
	DML_JOB_OPT_EXACT,			/* normal equations, one pass */
	DML_JOB_OPT_NEWTON,			/* Newton/IRLS */
	DML_JOB_OPT_LBFGS			/* full-batch L-BFGS */
} DmlJobOptimizer;

typedef enum DmlSyncMode
{
	DML_SYNC_ALLREDUCE,
	DML_SYNC_PS,
	DML_SYNC_SSP,
	DML_SYNC_ASYNC,
	DML_SYNC_GOSSIP,
	DML_SYNC_AVERAGE
} DmlSyncMode;

typedef enum DmlCompression
{
	DML_COMPRESS_NONE,
	DML_COMPRESS_FP16,
	DML_COMPRESS_TOPK
} DmlCompression;

/*
 * How an in-memory epoch orders a rank's training rows (options
 * "shuffle"; workers/train.c, train_layout_blocks): "rows" shuffles the
 * rows one by one each epoch; "blocks" lays the training rows out once in
 * a seeded random order and then shuffles blocks of consecutive rows
 * (about DML_SHUFFLE_BLOCK_BYTES each), so an epoch streams memory instead
 * of reading a random row at a time; "auto" takes blocks for narrow rows
 * in a large slice over several epochs, rows otherwise.
 */
typedef enum DmlShuffle
{
	DML_SHUFFLE_AUTO,
	DML_SHUFFLE_ROWS,
	DML_SHUFFLE_BLOCKS
} DmlShuffle;

#define DML_SHUFFLE_BLOCK_BYTES		4096
#define DML_SHUFFLE_AUTO_BYTES		(16 * 1024 * 1024)

typedef enum DmlNulls
{
	DML_NULLS_ERROR,
	DML_NULLS_SKIP,
	DML_NULLS_IMPUTE
} DmlNulls;

typedef enum DmlDevice
{
	DML_DEVICE_AUTO,
	DML_DEVICE_CPU,
	DML_DEVICE_GPU
} DmlDevice;

/* standard errors of an exact fit: model-based, or robust (option cov) */
typedef enum DmlCovType
{
	DML_COV_NONROBUST,
	DML_COV_HC0,
	DML_COV_HC1
} DmlCovType;

/*
 * A feature column: the one type the extension (training, the model cache,
 * predict), the coordinator and the workers describe a feature with.  The
 * catalog's members (attnum, typid, expr) are filled where dml_train
 * resolves the column; the workers and the model cache leave them empty.
 */
typedef enum DmlFeatureKind
{
	DML_FEAT_NUM,				/* one number (numbers, booleans as 0/1) */
	DML_FEAT_VEC,				/* an array of numbers of fixed width */
	DML_FEAT_CAT				/* text, one-hot over its levels */
} DmlFeatureKind;

typedef struct DmlFeature
{
	char	   *name;			/* the column's name, unquoted */
	DmlFeatureKind kind;
	int			width;			/* inputs it becomes */
	int			offset;			/* its first input (the workers) */
	int			nlevels;		/* DML_FEAT_CAT: its levels */
	char	  **levels;			/* sorted bytewise (strcmp), for bsearch */
	int		   *level_slot;		/* one-hot position of levels[i] */
	/* dml_train: where the column comes from */
	short		attnum;			/* AttrNumber */
	unsigned int typid;			/* Oid of its (base) type */
	char	   *expr;			/* quoted SQL expression the workers read */
} DmlFeature;

/* f's levels in one-hot order: order[slot], f->nlevels of them */
extern void dml_feature_levels_in_order(const DmlFeature *f, const char **order);

/* which name list (jobspec.c) */
typedef enum DmlJobNames
{
	DML_NAMES_OPTIMIZER,
	DML_NAMES_SCHEDULE,
	DML_NAMES_SYNC,
	DML_NAMES_COMPRESSION,
	DML_NAMES_NULLS,
	DML_NAMES_DEVICE,
	DML_NAMES_KIND,
	DML_NAMES_LOSS,				/* kernels.h's DmlLoss */
	DML_NAMES_ACTIVATION,		/* kernels.h's DmlAct */
	DML_NAMES_COV,
	DML_NAMES_SHUFFLE
} DmlJobNames;

/* the name of value in list which; "?" out of range */
extern const char *dml_job_name(DmlJobNames which, int value);

/* the value named name in list which, or -1 */
extern int	dml_job_parse(DmlJobNames which, const char *name);

/* printf formats of the serialized job, by TYPE (I64 as long long) */
#define DML_JOB_FMT_INT		"%d"
#define DML_JOB_FMT_DBL		"%.17g"
#define DML_JOB_FMT_I64		"%lld"

/*
 * max_seconds: the time budget of training, checked by rank 0 from the start
 * of the training loop (0: none).  When it is spent every rank stops at the
 * same step, and the metrics say "stopped": "max_seconds".
 */
#define DML_MAX_SECONDS_MAX	(86400.0 * 365)

/*
 * memory: the bytes each rank may hold for its data, the model and the
 * optimizer's state (dml.worker_memory, options "memory"); a slice that
 * does not fit is spilled once and streamed (workers/stream.c).  window:
 * the blocks a streamed epoch mixes rows across.  spill_dir: the job's own
 * spill directory, made by the first rank that spills and removed by the
 * coordinator when the job ends; spill_limit: bytes of spill the whole
 * job may write (0: no limit), each data rank an equal share.
 * spill_format (options "spill"): how the spill keeps the float32 inputs:
 * as they are, as IEEE half floats ("fp16"; a value out of fp16's range is
 * an error), or as one byte each ("int8": integer values, each block's
 * column spanning at most 256 of them, stored exactly as an offset from
 * the block's least; any other value is an error).  Float64 rows (the
 * exact solvers) are always spilled as they are.
 */
#define DML_SPILL_FLOAT32		0
#define DML_SPILL_FP16			1
#define DML_SPILL_INT8			2
#define DML_MEMORY_MIN			(8 * 1024 * 1024LL)
#define DML_WINDOW_DEFAULT		4
#define DML_WINDOW_MAX			256

#endif							/* DML_JOBSPEC_H */
