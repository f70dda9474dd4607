/*-------------------------------------------------------------------------
 *
 * sync.h
 *	  How the data ranks of a training job agree on the parameters each
 *	  step (the `sync` modes), how gradients are compressed on the way, and
 *	  the parameter-server ranks that hold the parameters in ps, ssp and
 *	  async modes.
 *
 *	  allreduce  gradients summed by MPI_Allreduce; every replica steps (on
 *	             each host: summed in shared memory, each rank stepping 1/L
 *	             of the host's shared copy of the parameters; the hosts'
 *	             leaders all-reduce the host sums between, and a compression
 *	             asked for applies to the host sums on the network)
 *	  ps         servers sum the workers' pushes of a clock, step, serve pulls
 *	  ssp        ps, but a worker may run up to `staleness` clocks ahead of
 *	             the slowest; s = 0 is ps
 *	  async      servers apply every push at once; no clock, no barrier
 *	  gossip     local steps, then each replica averages with one partner
 *	  average    local steps, replicas averaged every `average_every` steps
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_SYNC_H
#define DML_SYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "worker.h"

/* parameter-server messages: one MPI_BYTE message, this header then values */
typedef enum PsType
{
	PS_INIT = 1,				/* rank 0 -> server: shard of params and state */
	PS_REGISTER,				/* worker -> server, once: the key range it pushes */
	PS_PUSH,					/* worker -> server: gradient; answered with weights */
	PS_BARRIER,					/* async epoch end: answered when every worker came */
	PS_STATE,					/* rank 0 -> server: send the optimizer state */
	PS_STOP						/* the job is over */
} PsType;

typedef enum PsEncoding
{
	ENC_DENSE = 0,				/* float32 values of the whole range */
	ENC_FP16,					/* binary16 values times `scale` */
	ENC_TOPK					/* nvals (int32 offset, float32 value) pairs */
} PsEncoding;

#define PS_TAG_REQUEST	101
#define PS_TAG_REPLY	102
#define PS_EPOCH_DONE	1		/* reply flag (async): the epoch's rows are in */

typedef struct PsHeader
{
	int32_t		type;
	int32_t		worker;			/* data rank of the sender (requests) */
	int64_t		clock;			/* push: the clock of this gradient */
	int64_t		want;			/* push: clocks the weights sent back must include */
	int64_t		version;		/* async: updates in the weights a gradient used / sent */
	int64_t		count;			/* INIT: parameters; PUSH: rows; REGISTER: range start */
	int64_t		target;			/* INIT: training rows per epoch; REGISTER: range end */
	double		bytes;			/* reply: bytes this server sent so far */
	double		bytes_across;	/* reply: of which to ranks on other hosts */
	float		lr;
	float		scale;			/* fp16 */
	int32_t		encoding;
	int32_t		nvals;
	int32_t		staleness;		/* reply: clocks (ssp) or updates (async) missing */
	int32_t		flags;
} PsHeader;

typedef struct Sync
{
	DmlSyncMode	mode;
	DmlCompression comp;
	double		topk_ratio;
	int			W;				/* data ranks */
	int			S;				/* server ranks */
	size_t		np;				/* parameters */
	size_t	   *bound;			/* (S + 1) shard boundaries */
	float	   *residual;		/* error feedback of the compression */
	float	   *scratch;		/* (np) values to compress, or the average */
	int		   *order;			/* top-k selection */
	int64_t		clock;			/* pushes (steps) done */
	int64_t	   *version;		/* async: per server, updates in our weights */
	unsigned char **sbuf;		/* per server: request and reply buffers */
	unsigned char **rbuf;
	size_t		buflen;
	double	   *server_bytes;	/* latest figure each server reported */
	double	   *server_across;	/* ... of which to other hosts */
	int64_t	   *server_stale;	/* the most staleness each server reported */
	int			stale_epoch;	/* the most this rank saw this epoch */
	int			epoch_done;		/* async: server 0 said the epoch's rows are in */
	int64_t		round;			/* gossip round / steps since averaging */
	double		consensus;		/* gossip: max ||x_r - mean|| / ||mean||; NaN otherwise */

	/* allreduce through shared memory (sync_bind), else shm is NULL */
	struct CommShared *shm;
	int			L;				/* data ranks on this host */
	int			H;				/* hosts */
	float	  **slot;			/* (L) the host's ranks' gradients, in the segment */
	float	   *host_sum;		/* (np) with H > 1: the host's sum, then all hosts' */
	float	   *shm_params;		/* the one copy of the parameters ... */
	float	   *shm_s1;			/* ... and of the optimizer state */
	float	   *shm_s2;
	size_t		lo;				/* the coordinates this rank sums and steps (several hosts) */
	size_t		hi;
	bool		claimed;		/* one host: the ranks claim the step's chunks (claimed_step) */
	int64_t		seq;			/* shared steps since sync_bind */
	int		   *claim_order;	/* every rank's chunks, in the order it steps them ... */
	int		   *claim_home;		/* (L + 1) ... rank r's at [claim_home[r], claim_home[r + 1]) */
	int64_t		chunks_taken;	/* chunks this rank stepped off other ranks' lists */
	float	   *own_params;		/* the rank's private buffers, while bound */
	float	   *own_grads;
	float	   *own_s1;
	float	   *own_s2;
	bool		shared;			/* the job's all-reduce went through shared memory */
	bool		keep_shm;		/* a resident job: the segment stays for the next trial */
	bool		hierarchical;	/* ... on several hosts, their leaders all-reducing */
	bool		replicated;		/* ... a small model on one host: every rank steps it all */
	int			parity;			/* replicated: which of a rank's two slots this step takes */

	/*
	 * Balance (sync_balance_*; options "balance"): on one host, every
	 * rank's rows of a step in the segment, in rank order, and each rank
	 * computing a share of them by the ranks' measured speed
	 */
	int			bal_rows;		/* rows the region holds (every rank's most in a step); 0: off */
	int			bal_d;			/* values a row */
	float	   *bal_X[2];		/* (bal_rows, bal_d) a step's rows, in the segment, by step parity */
	float	   *bal_y[2];		/* (bal_rows) their targets */
	double	   *bal_time;		/* [2][L] in the segment: seconds a row each rank took, by step parity */
	double	   *bal_spr;		/* (L) every rank's smoothed seconds a row, the same on every rank */
	int		   *bal_cut;		/* (L + 1) the rows each rank computes: [cut[r], cut[r + 1]) */
	int64_t		bal_step;		/* balance steps taken */
	int64_t		bal_moved_steps;	/* steps whose split was not the rows' own */
	int64_t		bal_moved_rows; /* rows computed by a rank other than the one holding them */
} Sync;

/* allreduce through shared memory replicates a model of at most this many parameters */
#define SHARED_REPLICATED_FLOATS	1024

/* the sharded step sums and steps its range this many parameters at a time (32 KB of L1) */
#define SHARED_STEP_CHUNK	2048

/*
 * Balance: shares move in multiples of this many rows, and only when the
 * measured speeds would move a boundary by at least this many rows and a
 * 32nd of the step's; BALANCE_SMOOTH is the weight of a step's time in the
 * smoothed seconds a row
 */
#define BALANCE_ROWS		8
#define BALANCE_SMOOTH		0.25

extern void sync_init(Sync *s, const WorkerSpec *spec, size_t np);
extern void sync_start(Sync *s, const float *params, const DmlOptimState *o, int64_t epoch_rows);
extern void sync_release_kept(void);
extern void sync_bind(Sync *s, const WorkerSpec *spec, float **params, float **grads,
					  DmlOptimState *o);
extern void sync_balance_want(Sync *s, int rows, int d);
extern void sync_balance_fence(Sync *s);
extern int	sync_balance_split(Sync *s, const int *own, int *lo);
extern void sync_balance_took(Sync *s, double seconds, int rows);
extern void sync_unbind(Sync *s, float **params, float **grads, DmlOptimState *o);
extern bool sync_wants_ready(const Sync *s);
extern void sync_ready_layers(Sync *s, const size_t *from, int n);
extern void sync_ready(void *sync, size_t from);
extern float sync_grad_scale(const Sync *s, int B, int64_t total);
extern void sync_step(Sync *s, const WorkerSpec *spec, float *params, float *grads,
					  DmlOptimState *o, float lr, int B, int64_t total, bool epoch_end);
extern const float *sync_epoch_end(Sync *s, float *params, double *staleness);
extern void sync_gather_state(Sync *s, DmlOptimState *o);
extern void sync_finish(Sync *s, float *params);
extern void sync_free(Sync *s);
extern void sync_stop_servers(void);

/* shared by workers and servers */
extern size_t ps_encode(PsEncoding enc, const float *v, size_t n, float *residual,
						double topk_ratio, unsigned char *out, float *scale, int32_t *nvals,
						float *work, int *order);
extern void ps_decode_add(PsEncoding enc, const unsigned char *in, size_t n, int32_t nvals,
						  float scale, float *acc);

/* server.c */
extern void server_main(const WorkerSpec *spec);

#endif							/* DML_SYNC_H */
