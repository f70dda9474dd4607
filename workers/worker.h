/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  dml-worker: one MPI rank of a training job.  The job spec, the local
 *	  dataset, and the steps of a run (load, prepare, train, report); and
 *	  the one rank of a predict job.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_WORKER_H
#define DML_WORKER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "jobspec.h"
#include "kernels.h"
#include "protocol.h"

/* ---------------------------------------------------------------------
 * Job spec (spec.c), as the coordinator wrote it
 * --------------------------------------------------------------------- */

/* each feature is a DmlFeature (jobspec.h) */

typedef struct SpecSlice
{
	int			rank;
	int			whole;			/* a view: read by rank 0 and dealt to every rank */
	int			shard;			/* 0: the coordinating server; k: shard server k */
	char	   *query;
} SpecSlice;

/* a shard's server (shard_read.c), numbered from 1 */
typedef struct SpecShard
{
	char	   *conninfo;		/* may hold the user mapping's password: never printed */
	char	   *name;			/* the foreign server's name, for messages */
	char	   *snapshot;		/* exported on that server by the coordinator */
} SpecShard;

typedef struct WorkerSpec
{
	int			predict;		/* "job predict": run a model over the slice, no training */
	int			has_id;			/* predict: the slice's first column is the row id */
	int			id_bytes;		/* predict, load block: the id's width (int2, int4, int8) */
	char	   *conninfo;
	char	   *snapshot;
	char	   *role;
	int			world;
	DmlKind		kind;
	DmlLoss		loss;
	DmlAct		activation;
	int			outputs;
	int			nhidden;
	int			hidden[DML_MAX_LAYERS];
	DmlJobOptimizer optimizer;
	double		learning_rate;
	double		momentum;
	double		beta1;
	double		beta2;
	double		eps;
	DmlSchedule schedule;
	int			step_size;
	double		gamma;
	double		tolerance;
	int			batch_size;
	int			epochs;
	int			max_steps;		/* > 0: at most this many steps, whatever epochs says */
	double		max_seconds;	/* time budget of training, rank 0's clock; 0: none */
	double		weight_decay;
	double		weight_decay_rows;	/* > 0: weight_decay is this over the rows read
									 * (jobspec.h), set after prepare_data */
	int			rank_min_norm;	/* exact: rank_deficient => min_norm */
	DmlCovType	cov_type;		/* exact, Newton: robust standard errors */
	char	   *class_weight;	/* "balanced", or "w0,w1,..." by output index; or NULL */
	double		l1_ratio;		/* L-BFGS: share of weight_decay on |W|_1 (OWL-QN) */
	double		validation;
	int			patience;
	DmlNulls	nulls;
	DmlDevice	device;
	uint64_t	seed;
	int			checkpoint_every;
	char	   *fault;			/* "rank:epoch:how" */
	DmlSyncMode sync;
	int			servers;		/* parameter-server ranks, the last of the world */
	int			staleness;		/* ssp bound, in clocks */
	int			average_every;	/* average: steps between averagings */
	DmlCompression compression;
	double		topk_ratio;
	char	   *straggler;		/* test hook: "rank:ms" delay per step */
	int			shared_memory;	/* allreduce may go through shared memory */
	int			byte_rows;		/* rows may be read as bytes (prepare.c) */
	int			amx;			/* training's wider products may run on AMX (options "amx") */
	int			balance;		/* one host: a step's rows shared by the ranks' speed (sync.c) */
	int			resume;			/* start from the checkpoint (rank 0 holds it) */
	int			attempt;		/* 0 first launch, n after n restarts */
	int64_t		memory;			/* bytes this rank may hold for data and model */
	int			window;			/* blocks a streamed epoch mixes rows across */
	char	   *spill_dir;		/* the job's spill directory */
	int64_t		spill_limit;	/* bytes of spill for the job; 0: no limit */
	int			spill_format;	/* DML_SPILL_*: how the float32 inputs are spilled */
	int			tf32;			/* GPU GEMMs round their inputs to TF32 (options "tf32") */
	DmlShuffle	shuffle;		/* an epoch's row order (options "shuffle") */
	int			checkpoint_last;	/* also checkpoint the last epoch (dml_tune's halving) */
	int			resident;		/* dml_tune: after the model, wait for the next trial's job */

	int			classification;
	int			nclasses;
	char	  **classes;		/* sorted bytewise */
	int		   *class_index;	/* output index of classes[i] */
	char	   *target_name;
	int			discover;		/* > 0: list the labels while loading, at most this many */
	int			load_block;		/* table slices come as dml.pack_rows blocks */
	char	   *label_keys;		/* "int" or "bool": labels come as int8 keys */
	int64_t    *class_keys;		/* (nclasses) sorted, with label_keys */
	int		   *class_key_index;	/* output index of class_keys[i] */

	int			nfeatures;
	DmlFeature *features;
	int			ninputs;

	int			nslices;
	SpecSlice  *slices;
	int			nshards;
	SpecShard  *shards;			/* shards[k - 1]: shard server k */

	/*
	 * Rank 0 only: what came with the job after its text: the checkpoint to
	 * resume from, or a predict job's model blob
	 */
	const unsigned char *attached;
	size_t		attached_len;
} WorkerSpec;

extern int	spec_parse(WorkerSpec *spec, const char *text, size_t len, char *err, size_t errlen);
/*
 * exact least squares and logistic/softmax regression by Newton: their rows
 * are loaded, and their models kept, in float64
 */
static inline bool
spec_float64(const WorkerSpec *spec)
{
	return !spec->predict &&
		((spec->optimizer == DML_JOB_OPT_EXACT && spec->loss == DML_LOSS_MSE) ||
		 spec->optimizer == DML_JOB_OPT_NEWTON);
}
extern int	cmp_int64(const void *a, const void *b);
extern int	label_text_key(const char *label_keys, const char *text, int64_t *key);

/* ---------------------------------------------------------------------
 * The rank's rows (load.c)
 * --------------------------------------------------------------------- */

typedef struct Dataset
{
	int64_t		n;				/* rows */
	int64_t		cap;
	int			d;				/* inputs per row */
	float	   *X;				/* (n, d); NaN marks a NULL feature */
	float	   *y;				/* (n); NaN marks a NULL target */
	unsigned char *val;			/* (n); 1 = held out for validation */
	float	   *class_weight;	/* (classes) the loss's weights (prepare.c), or NULL */
	/* exact least squares (spec_float64): the rows again, raw, in float64 */
	int			wide;
	double	   *Xd;				/* (n, d); NaN marks a NULL feature */
	double	   *yd;				/* (n) */
	/* per feature: NULL values, and non-finite values seen */
	int64_t    *null_count;
	int64_t    *bad_count;
	int64_t    *width_errors;	/* arrays of the wrong length */
	int64_t		target_nulls;
	int64_t		target_bad;
	int64_t		unknown_labels;
	int64_t		rows_read;		/* by every rank, before any was dropped (prepare_data) */
	double		load_seconds;
	double		bytes_read;
	const char *load_path;		/* "block" (dml.pack_rows) or "copy" */
	/* while the labels are being listed (spec->discover) */
	int64_t    *keys;			/* (n) each row's label key */
	int64_t    *seen;			/* distinct keys of this rank, sorted */
	int			nseen;
	int			seen_overflow;	/* more than spec->discover of them */
	/* the slice did not fit spec->memory: its rows are in this spill (stream.c) */
	struct Spill *spill;
	/*
	 * X's rows as bytes k, each raw input k / div8, where every input of
	 * the slice is one (prepare_data, when bytes_ok and the model is one
	 * skinny layer), or NULL; while such a model trains, rows8 describes
	 * them with the standardization (train.c)
	 */
	int			bytes_ok;		/* set before prepare_data: a CPU job */
	uint8_t    *X8;
	float		div8;
	DmlRows8   *rows8;
	int			spill_restart;	/* SPILL_REUSED, or why a restarted rank spilled afresh */
	/*
	 * rows [panel_row0, panel_row0 + panel_rows) of X lie as row panels
	 * (kernels.h's DML_PANEL rows a feature at a time; panel_rows a
	 * multiple of it), where Newton's method left them (exact.c), or none
	 */
	int64_t		panel_row0;
	int64_t		panel_rows;
} Dataset;

extern void load_slices(Dataset *ds, WorkerSpec *spec, int rank);
extern bool load_held_out(const Dataset *ds, int64_t i, uint64_t seed, double fraction);
extern int	load_label_of_key(const WorkerSpec *spec, int64_t key);

/* ---------------------------------------------------------------------
 * Slices larger than the memory budget, spilled and streamed (stream.c)
 * --------------------------------------------------------------------- */

typedef struct Spill Spill;
typedef struct StreamEpoch StreamEpoch;

extern int64_t stream_data_budget(const WorkerSpec *spec);
extern int64_t stream_row_cost(const WorkerSpec *spec);
extern double stream_peak_rss(void);
extern Spill *stream_open(const WorkerSpec *spec, int d, int wide, int keys, int format, int rows);
extern void stream_flush(Spill *sp, Dataset *ds);
/* what a restarted rank found of its spill (stream_reuse) */
#define SPILL_NONE			0	/* a first launch, or the slice fit in memory */
#define SPILL_REUSED		1
#define SPILL_NO_META		2	/* what follows: spilled afresh, and why */
#define SPILL_BAD_META		3
#define SPILL_NO_FILE		4
#define SPILL_BAD_FILE		5
#define SPILL_UNREPEATABLE	6	/* no snapshot of the caller's, or a shard */
extern const char *stream_restart_why(int code);
extern int	stream_reuse(const WorkerSpec *spec, Dataset *ds);
extern void stream_note_load(Spill *sp, const Dataset *ds, const WorkerSpec *spec);
extern int64_t stream_loaded_rows(const Spill *sp);
extern int	stream_reused(const Spill *sp);
extern void stream_spoil(int remove);
extern int64_t stream_rows(const Spill *sp);
extern int64_t stream_bytes(const Spill *sp);
extern int	stream_block_rows(const Spill *sp);
extern void stream_read_figures(const Spill *sp, double *bytes, double *seconds);
extern void stream_counts(const Spill *sp, int64_t *ntrain, int64_t *nval);
extern void stream_rewrite(Spill *sp, void (*fn) (Dataset *view, void *arg), void *arg);
extern void stream_set_transform(Spill *sp, const DmlModel *m, const double *impute,
								 int standardize_y);
extern void stream_scan(Spill *sp, int raw, void (*fn) (const Dataset *view, void *arg), void *arg);
extern StreamEpoch *stream_epoch_new(Spill *sp, int window);
extern void stream_epoch_begin(StreamEpoch *e, uint64_t seed, int epoch);
extern int	stream_epoch_take(StreamEpoch *e, int B, float *Xb, float *yb);
extern void stream_epoch_free(StreamEpoch *e);
extern void load_copy_plain(void *pgconn, Dataset *ds, const WorkerSpec *spec, const char *query);

/* runtime.c: a connection as the job's caller, checked, or the job ends */
struct pg_conn;
/* shard_read.c: this rank's slices of shards, each from its own server */
extern void load_shard_slices(Dataset *ds, const WorkerSpec *spec, int rank);
extern struct pg_conn *shard_connect(const WorkerSpec *spec, int k);
extern struct pg_conn *worker_login(const WorkerSpec *spec);

/* The binary COPY wire format, for load.c (training rows) and predict.c */
static inline uint32_t
be32(const char *p)
{
	const unsigned char *u = (const unsigned char *) p;

	return ((uint32_t) u[0] << 24) | ((uint32_t) u[1] << 16) | ((uint32_t) u[2] << 8) | u[3];
}

static inline double
be_double(const char *p)
{
	uint64_t	v = ((uint64_t) be32(p) << 32) | be32(p + 4);
	double		d;

	memcpy(&d, &v, 8);
	return d;
}

/* a row's fields (after its field count) consumed; returns where the next row begins */
typedef const char *(*CopyRowFn) (void *arg, const char *p, const char *end);
extern int	copy_rows(void *pgconn, int nfields, CopyRowFn row, void *arg, double *bytes);
extern const char *field_text(const char *p, int len);
extern int	cmp_key(const void *key, const void *elem);
extern void feature_onehot(const DmlFeature *ft, const char *p, int len, float *dst);

/* ---------------------------------------------------------------------
 * Training (train.c, exact.c)
 * --------------------------------------------------------------------- */

typedef struct TrainResult
{
	DmlModel	model;
	int			epochs_run;
	double		final_loss;
	double		rows_per_second;
	double		train_seconds;
	char	   *metrics_json;
	char	   *sync_json;		/* JSON members describing the sync, or NULL */
	DmlStopReason stopped;		/* why it stopped (DML_STOP_NONE: max epochs) */
	int			best_epoch;		/* the epoch whose weights were kept; 0: the last */
	char	   *statistics_json;	/* exact solvers: the fit's statistics, or NULL */
	bool		out_of_time;	/* stopped because max_seconds was spent */
	/* what the synchronization did (an iterative loop ran: has_sync) */
	bool		has_sync;
	int			shuffle_block;	/* rows a block of the block shuffle; 0: rows one by one */
	int			byte_rows;		/* the steps read byte rows k / byte_rows; 0: float32 */
	bool		amx;			/* products of its steps ran on AMX's tiles (kernels/gemm_amx.h) */
	int			allreduce;		/* 0: none, 1: MPI, 2: shared memory */
	bool		balance;		/* the steps' rows were split by the ranks' speed */
	int64_t		balance_steps;	/* ... steps whose split was not the rows' own */
	int64_t		balance_rows;	/* ... rows computed by a rank other than the one holding them */
	int64_t		chunks_taken;	/* this rank's chunks of other ranks' lists (sync.c's
								 * claimed_step); -1: its step takes no chunks */
	/* Newton's float32 iterations (exact.c): how their steps were found */
	bool		newton;
	int			newton_sampled; /* located on a sample of the rows */
	int			newton_full;	/* searched on every row */
	int			newton_again;	/* located, not lower, then searched on every row */
	int			newton_panels;	/* ranks whose float32 passes read row panels */
	int			newton_precise; /* the iteration whose Hessian went to double; 0: never */
	double		consensus;		/* gossip; NaN otherwise */
	int			servers;
	int64_t    *server_stale;	/* (servers) the most staleness each saw */
	double	   *peak_rss;		/* (data ranks) rank 0: each one's peak resident set */
	/*
	 * The last validation (train_log_epoch): the parameters it evaluated
	 * and its figures, which final_result takes when they are the model's
	 * (train_forget_evaluation frees them)
	 */
	float	   *eval_params;
	double	   *eval_values;
	size_t		eval_nvalues;
} TrainResult;

/* the optimizer settings of spec for a step at learning rate lr */
static inline DmlOptim
train_optim(const WorkerSpec *spec, DmlOptimizer kind, float lr)
{
	DmlOptim	o = {kind, lr, (float) spec->momentum, (float) spec->beta1, (float) spec->beta2,
	(float) spec->eps, (float) spec->weight_decay};

	return o;
}

/* one optimizer step (kernels/optim.c) with spec's settings at lr */
#define train_optim_step(st, spec, params, grads, lr) \
	optim_step((st), (const DmlOptim[]) {train_optim((spec), (st)->kind, (lr))}, (params), (grads))

#define EVAL_ROWS 1024			/* rows per forward pass when evaluating */

/* Steps per epoch, the same on every rank, and who holds how many rows */
typedef struct StepPlan
{
	int64_t    *rows;			/* (world) training rows of each rank */
	int			steps;
} StepPlan;

/* The per-epoch bookkeeping the CPU and GPU loops share */
typedef struct EpochLog
{
	double		nval_total;		/* validation rows, all ranks */
	double		train_time;
	double		rows_done;
	double		best_loss;		/* early stopping */
	double		staleness;		/* most staleness seen this epoch; NaN: n/a */
	double		across_mark;	/* bytes across hosts at the last epoch's end */
	int			bad_epochs;		/* since the loss last improved by tolerance */
	int			best_epoch;
	float	   *best;			/* best replica's parameters, or NULL */
	int			stalled;		/* schedule plateau: epochs since an improvement or a cut */
	float		lr_scale;		/* schedule plateau: gamma^(cuts so far) */
	DmlMetrics	met;
} EpochLog;

extern void prepare_data(Dataset *ds, const WorkerSpec *spec, DmlModel *model);
extern void prepare_trial(Dataset *ds, const WorkerSpec *spec, DmlModel *model,
						  const DmlModel *first);
extern void train_split_rows(const Dataset *ds, int **train, int *ntrain, int **val, int *nval);
extern void train_evaluate(const DmlModel *m, DmlWork *work, const Dataset *ds,
						   const int *idx, int n, DmlMetrics *met);
extern void train_send_checkpoint(const DmlModel *m, const DmlOptimState *o, int epoch);
extern int	train_resume(const WorkerSpec *spec, DmlModel *m, DmlOptimState *o);
extern void train_shuffle(DmlRng *rng, int *idx, int n, uint64_t seed, int epoch);
extern void train_plan_steps(StepPlan *plan, int ntrain, int batch_size);
extern int	train_step_rows(const StepPlan *plan, int rank);
extern int64_t train_step_total(const StepPlan *plan, int s);
extern void train_log_init(EpochLog *log, const DmlNet *net, const WorkerSpec *spec, int nval);
extern bool train_log_epoch(EpochLog *log, TrainResult *res, const WorkerSpec *spec,
							const Dataset *ds, DmlWork *work, const int *val_idx, int nval,
							int epoch, double sums[2], double t0, double bytes0,
							bool *checkpoint);
extern void train_log_finish(EpochLog *log, TrainResult *res);
extern bool train_out_of_time(const WorkerSpec *spec, double start);
extern void train_note_out_of_time(const WorkerSpec *spec, TrainResult *res, int epoch, int step);
extern void train_report_step(int epoch, int step, int steps);
extern void train_eval_outputs(const DmlModel *m, float *out, float *yb, int B, DmlMetrics *met);
#ifdef DML_HAVE_CUDA
extern void train_gpu(Dataset *ds, const WorkerSpec *spec, TrainResult *res, int device);
extern bool train_gpu_evaluate(const DmlModel *m, const Dataset *ds, const int *idx, int n,
							   DmlMetrics *met);
extern void train_gpu_release(void);
#else
/* without CUDA every evaluation runs on the CPU */
static inline bool
train_gpu_evaluate(const DmlModel *m, const Dataset *ds, const int *idx, int n, DmlMetrics *met)
{
	return false;
}
static inline void
train_gpu_release(void)
{
}
#endif
extern void train_iterative(Dataset *ds, const WorkerSpec *spec, TrainResult *res);
extern void train_lbfgs(Dataset *ds, const WorkerSpec *spec, TrainResult *res);
extern void train_exact(Dataset *ds, const WorkerSpec *spec, TrainResult *res);
extern void train_newton(Dataset *ds, const WorkerSpec *spec, TrainResult *res);
extern void dataset_unpanel(Dataset *ds);
extern void final_result(Dataset *ds, const WorkerSpec *spec, const DmlModel *m,
						 const TrainResult *res, DmlResult *out, DmlMetrics *met);
extern void train_forget_evaluation(TrainResult *res);

/* ---------------------------------------------------------------------
 * A predict job (predict.c): read the slice, run the model in blocks on a
 * GPU or the CPU, stream (id, prediction) blocks to the coordinator
 * --------------------------------------------------------------------- */

extern void predict_run(const WorkerSpec *spec);

/* ---------------------------------------------------------------------
 * The runtime (runtime.c): who this rank is; failing fast, naming rank,
 * host, file and line, and ending the job
 * --------------------------------------------------------------------- */

extern int	worker_rank;
extern int	worker_world;
extern char worker_host[256];

/* rank 0's report to the coordinator (control.c sets it once connected) */
extern void (*worker_report) (uint32_t type, const void *payload, size_t len);
/* what a collective user error does before the ranks end (main sets it) */
extern void (*worker_before_exit) (void);
/* end the whole job now (MPI_Abort) */
extern void worker_abort(int code) __attribute__((noreturn));

extern void worker_fail_at(const char *file, int line, const char *fmt,...)
			__attribute__((format(printf, 3, 4), noreturn));
#define worker_fail(...) worker_fail_at(__FILE__, __LINE__, __VA_ARGS__)

/* an error that would happen again (SQLSTATE state): fail without a restart */
extern void worker_fail_final_at(const char *file, int line, const char *state, const char *hint,
								 const char *fmt,...)
			__attribute__((format(printf, 5, 6), noreturn));
#define worker_fail_final(state, ...) worker_fail_final_at(__FILE__, __LINE__, state, NULL, __VA_ARGS__)

/* a failed query (conn a PGconn, res its PGresult or NULL): final unless transient */
extern void worker_fail_query_at(const char *file, int line, void *pgconn, void *pgres,
								 const char *what) __attribute__((noreturn));
#define worker_fail_query(conn, res, what) worker_fail_query_at(__FILE__, __LINE__, conn, res, what)

/* a user-facing error found collectively: rank 0 reports it, all end */
extern void worker_user_error(const char *fmt,...)
			__attribute__((format(printf, 1, 2), noreturn));


/* the fault-injection hook: act if spec->fault names this rank and epoch */
extern void maybe_inject_fault(const WorkerSpec *spec, int epoch, void *pgconn);

#endif							/* DML_WORKER_H */
