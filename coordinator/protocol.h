/*-------------------------------------------------------------------------
 *
 * protocol.h
 *	  Framed messages between the coordinator (in the backend) and rank 0
 *	  of a dml-worker job, over the job's Unix-domain control socket.
 *
 * The first message goes from the coordinator to rank 0, the others from
 * rank 0 to the coordinator.  Every message is a 12-byte header followed
 * by its payload:
 *
 *	 uint32 magic   DML_MSG_MAGIC
 *	 uint32 type    DmlMsgType
 *	 uint32 length  payload bytes, at most DML_MSG_MAX
 *
 * in the host's byte order (both ends run on the same machine: rank 0 is
 * started by mpirun on the first host, the backend's).  Payloads:
 *
 *	 JOB       coordinator to rank 0, once, first: uint32 text length, the
 *	           serialized job (coordinator/jobspec.h: "key value" lines),
 *	           then what comes with it: for a training job the checkpoint
 *	           to resume from (as CHECKPOINT carried it) or nothing, for a
 *	           predict job the model blob.  Rank 0 hands the text on to the
 *	           other ranks over MPI, so no rank reads a file of the backend.
 *	 HELLO     text: "pids <pid> <pid> ...\nhosts <host> <host> ...": every
 *	           rank's pid (0 for a rank on another host than rank 0, whose
 *	           pid means nothing here) and host name, in rank order
 *	 PROGRESS  DmlProgress
 *	 CHECKPOINT binary: epoch (int32) then a model blob (kernels/format.c)
 *	 MODEL     a training job's result: DmlResult, then int64
 *	           server_staleness[servers], then double metrics[nmetrics] (the
 *	           sums of kernels' DmlMetrics over the rows evaluated on), then
 *	           the model blob (kernels/format.c) of blob_len bytes, then
 *	           for the exact solvers the statistics of the fit, a JSON
 *	           object of stats_len bytes (kernels/lsq.c, logit.c: numbers
 *	           and the inputs' names, which only the workers know for
 *	           one-hot levels); the backend writes the metrics JSON from
 *	           them (DmlResultJson)
 *	 ERROR     text: what failed, for the user's errmsg/errdetail
 *	 LOG       text: a line for a NOTICE
 *	 PREDICTIONS  a predict job's block of rows, in the order they were read:
 *	           uint32 rows B, uint32 outputs K, uint32 bytes per value V
 *	           (4, or 8 for a float64 model), out[B * K] (the model's
 *	           predictions as dml_model_predict or, in float64,
 *	           dml_model_predict64 gives them), then
 *	           when the job has an id column, per row an int32 length (-1
 *	           for NULL) and the id in its type's binary format
 *	 DONE      a predict job's end: int64 rows sent in all
 *	 CLASSES   the labels the workers listed (the job asked them to:
 *	           discover_classes), one per line, in output order
 *	 STEP      DmlStep: where rank 0 is within the epoch it runs
 *
 * The socket is the job's lifeline: when the coordinator closes it, rank 0
 * ends the whole job.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_PROTOCOL_H
#define DML_PROTOCOL_H

#include <stdint.h>

#define DML_MSG_MAGIC	0x444D4C31u		/* "DML1" */
#define DML_MSG_MAX		(1u << 30)		/* 1 GiB: the largest model we accept */
#define DML_MSG_HEADER	12

/*
 * PostgreSQL's FUNC_MAX_ARGS: a call with more arguments fails to parse, so
 * the workers' packers (dml.num_bytes, dml.pack_rows) are used only below it.
 */
#define DML_FUNC_MAX_ARGS	100

typedef enum DmlMsgType
{
	DML_MSG_HELLO = 1,
	DML_MSG_PROGRESS = 2,
	DML_MSG_CHECKPOINT = 3,
	DML_MSG_MODEL = 4,
	DML_MSG_ERROR = 5,
	DML_MSG_LOG = 6,
	DML_MSG_PREDICTIONS = 7,
	DML_MSG_DONE = 8,
	DML_MSG_CLASSES = 9,
	DML_MSG_JOB = 10,
	DML_MSG_STEP = 11,
	DML_MSG_END = 12			/* coordinator -> rank 0: a resident job's trials are over */
} DmlMsgType;

/* One epoch's figures, reduced over every rank by rank 0 */
typedef struct DmlProgress
{
	int32_t		epoch;			/* 1-based */
	int32_t		restarts;
	double		loss;			/* mean training loss over the epoch */
	double		val_loss;		/* NaN when there is no validation set */
	double		val_metric;		/* accuracy or R^2; NaN without validation */
	double		seconds;		/* wall time of the epoch */
	double		train_seconds;	/* of which training (no validation); 0: all */
	double		rows;			/* training rows processed, all ranks */
	double		bytes_sent;		/* bytes this job's sync put on the wire */
	double		bytes_across;	/* ... of which between hosts */
	double		staleness;		/* ssp/async/ps: most staleness seen; NaN: n/a */
} DmlProgress;

/*
 * Where rank 0 is within an epoch (STEP), sent at most every
 * DML_STEP_REPORT_S seconds while it steps: dml.progress's step column
 */
#define DML_STEP_REPORT_S	0.5

typedef struct DmlStep
{
	int32_t		epoch;			/* 1-based: the epoch being run */
	int32_t		step;			/* steps of it done */
	int32_t		steps;			/* steps per epoch */
} DmlStep;

/* What a training job did: MODEL's fixed part, all ranks' figures */
typedef struct DmlResult
{
	int32_t		epochs;			/* epochs (or solver iterations) run */
	int32_t		workers;		/* data ranks */
	int32_t		servers;		/* parameter-server ranks: server_staleness entries */
	int32_t		gpu;			/* 1: trained on GPUs */
	int32_t		on_validation;	/* metrics over the validation rows, else the training rows */
	int32_t		load_block;		/* slices came as dml.pack_rows blocks, else by COPY */
	int32_t		has_sync;		/* an iterative loop ran: its sync facts below apply */
	int32_t		allreduce;		/* 0: none, 1: MPI, 2: shared memory, 3: hierarchical */
	int32_t		out_of_time;	/* stopped because max_seconds was spent */
	int32_t		metrics_loss;	/* the DmlLoss the metrics are for */
	int32_t		metrics_k;		/* and their classes or outputs */
	uint32_t	nmetrics;		/* doubles of metric sums that follow */
	uint32_t	blob_len;		/* bytes of the model blob at the end */
	int32_t		stopped;		/* DmlStopReason */
	int32_t		best_epoch;		/* the epoch whose weights the model holds */
	uint32_t	stats_len;		/* bytes of the fit's statistics after the blob (exact solvers) */
	int32_t		streamed;		/* data ranks whose slice was spilled and streamed */
	int32_t		window;			/* blocks a streamed epoch mixed */
	int32_t		spill_format;	/* DML_SPILL_*: what the spills held */
	int32_t		spill_reused;	/* restarted ranks that found their spill intact */
	int32_t		spill_recreated;	/* and those that spilled afresh */
	int32_t		shuffle_block;	/* rows a block of the in-memory block shuffle; 0: rows */
	int32_t		trial_in_job;	/* a resident job's (dml_tune) trial: 1, 2, ...; else 0 */
	int32_t		byte_rows;		/* the steps read the rows as bytes k / byte_rows; 0: float32 */
	int32_t		balance;		/* the steps' rows were split by the ranks' speed (sync.c) */
	int32_t		amx;			/* the training's wider products ran on AMX's tiles (rank 0's) */
	int32_t		newton;			/* float32 Newton iterations ran: the next three apply */
	int32_t		newton_sampled; /* steps located on a sample of the rows */
	int32_t		newton_full;	/* steps searched on every row */
	int32_t		newton_again;	/* located steps whose loss was not lower, searched again */
	int32_t		newton_panels;	/* data ranks whose float32 passes read row panels */
	int32_t		newton_precise;	/* the iteration whose Hessian went to double; 0: never */
	double		train_rows;
	double		validation_rows;
	double		final_loss;
	double		rows_per_second;
	double		train_seconds;
	double		load_seconds;
	double		total_seconds;	/* rank 0's, from its start to the result */
	double		bytes_sent;
	double		consensus;		/* gossip: the replicas' distance from their mean */
	double		spill_bytes;	/* spill written, all ranks */
	double		memory;			/* the budget of each rank, bytes */
	double		spill_read_bytes;	/* read back from the spills, all ranks */
	double		spill_read_seconds; /* the reads' time, all ranks */
	double		weight_decay;	/* the penalty the model was trained with */
	double		balance_steps;	/* balance: steps whose rows were not split as held */
	double		balance_rows;	/* ... rows computed by a rank other than the one holding them */
	double		chunks_taken;	/* shared memory: chunks stepped off another rank's list, all
								 * ranks; negative: the step takes no chunks */
	/* then (workers) doubles: each data rank's peak resident set, bytes */
} DmlResult;

#endif							/* DML_PROTOCOL_H */
