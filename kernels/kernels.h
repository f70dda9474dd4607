/*-------------------------------------------------------------------------
 *
 * kernels.h
 *	  The math of dml: dense layers, activations, losses, optimizers, the
 *	  network that strings them together, and the model's binary format.
 *
 * This header is shared by the backend (extension/, coordinator/) and the
 * worker (workers/).  Nothing here includes postgres.h or mpi.h: functions
 * return a status (DmlStatus) that the caller turns into ereport() or
 * MPI_Abort().
 *
 * Conventions (after llm.c): outputs first, then inputs, then sizes;
 * gradients carry a "d" prefix; every tensor's shape is in a comment,
 * row-major.  B = rows in the minibatch, C = input channels, OC = output
 * channels, K = outputs of the network.
 *
 * The CPU implementation (layers.c, losses.c, optim.c, net.c) is the reference.  The CUDA
 * implementation (kernels/cuda/, cuda_kernels.h) mirrors it name for name, with
 * a stream as the last argument.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_KERNELS_H
#define DML_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C"
{
#endif

#define DML_MAX_LAYERS		16		/* dense layers in one network */

/*
 * Elementwise loops (optimizers, activations) are compiled for AVX-512,
 * AVX2 with FMA (x86-64-v3), AVX2 alone and baseline x86-64 and picked at
 * load time, so one binary is both portable and fast.  The AVX2 copy
 * without FMA is for CPUs that lack the rest of x86-64-v3; where FMA is
 * there, the loss loops (logit.c, net.c) fuse their multiply-adds as the
 * AVX-512 copy does: the logistic rows' exponential and logarithm, bound
 * by their chains of dependent operations, took 1.5 times as long as
 * separate multiplies and adds.  DML_NO_CLONES compiles them for the -m
 * flags given only (the unit tests' build/test_kernels_sse2 and _avx2,
 * which is -mavx2 -mfma: what a machine without AVX-512 runs).
 */
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones) && !defined(__NVCC__) && !defined(__clang__) && \
	!defined(__SANITIZE_ADDRESS__) && !defined(DML_NO_CLONES)
#define DML_VECTORIZE __attribute__((target_clones("avx512f", "arch=x86-64-v3", "avx2", "default")))
#endif
#endif
#ifndef DML_VECTORIZE
#define DML_VECTORIZE
#endif

/*
 * Without trapping math GCC may evaluate both sides of a select (the
 * clamp in an exponential, the sigmoid's two forms), which is what lets
 * the loss loops (net.c's fused pass, logit.c's rows) vectorize; dml never
 * reads the floating-point exception flags.  Inline helpers carry it too,
 * or GCC would not inline them.
 */
#if defined(__GNUC__) && !defined(__clang__)
#define DML_FUSE_MATH __attribute__((optimize("no-trapping-math")))
#else
#define DML_FUSE_MATH
#endif
#define DML_MAX_WIDTH		65536	/* units in one layer */

typedef enum DmlStatus
{
	DML_OK = 0,
	DML_ERR_NOMEM,
	DML_ERR_FORMAT,				/* a model blob that does not parse */
	DML_ERR_CHECKSUM,
	DML_ERR_SINGULAR,			/* exact solver: matrix not positive definite */
	DML_ERR_ARG
} DmlStatus;

typedef enum DmlAct
{
	DML_ACT_IDENTITY = 0,
	DML_ACT_RELU = 1,
	DML_ACT_TANH = 2,
	DML_ACT_SIGMOID = 3
} DmlAct;

typedef enum DmlLoss
{
	DML_LOSS_MSE = 0,			/* regression, K targets */
	DML_LOSS_BCE = 1,			/* binary cross-entropy on one logit */
	DML_LOSS_SOFTMAX = 2		/* softmax cross-entropy on K logits */
} DmlLoss;

typedef enum DmlOptimizer
{
	DML_OPT_SGD = 0,
	DML_OPT_MOMENTUM = 1,
	DML_OPT_NESTEROV = 2,
	DML_OPT_ADAM = 3
} DmlOptimizer;

typedef enum DmlSchedule
{
	DML_SCHED_CONSTANT = 0,
	DML_SCHED_STEP = 1,			/* lr * gamma^(floor(epoch / step)) */
	DML_SCHED_COSINE = 2,		/* lr * 0.5 * (1 + cos(pi * epoch / epochs)) */
	DML_SCHED_PLATEAU = 3		/* lr * gamma^(plateaus): the training loop cuts it */
} DmlSchedule;

extern const char *dml_status_string(DmlStatus st);
extern const char *dml_act_name(DmlAct act);
extern int	dml_act_parse(const char *name);	/* -1 when unknown */

/* ---------------------------------------------------------------------
 * Layers (layers.c)
 * --------------------------------------------------------------------- */

/*
 * Layers of at most 12 outputs on kernels of dml's own (AVX-512 or AVX2,
 * dml_simd) instead of sgemm (layers.c); on by default.  dml_set_skinny(false) keeps sgemm (the
 * benchmarks' A/B, the unit tests' reference).
 */
extern void dml_set_skinny(bool on);
extern bool dml_skinny_applies(int B, int OC);
/*
 * Wider layers' products of a minibatch on dml's own kernel (gemm.h) on
 * AVX-512 instead of sgemm; on by default, and off with dml_set_skinny(false)
 * too.  dml_set_gemm(false) keeps sgemm for them alone.
 */
extern void dml_set_gemm(bool on);
/*
 * Those products on AMX's tiles where the CPU has AMX-BF16 (gemm_amx.h:
 * float32 in three bfloat16 parts, to float32 rounding); off until
 * dml_set_amx(true), which dml-worker calls.  Returns whether they run there.
 */
extern bool dml_set_amx(bool on);
/* how many products have run on AMX's tiles in this process */
extern long dml_amx_products(void);
extern bool dml_gemm(bool transA, bool transB, int M, int N, int K, const float *A, int lda,
					 const float *B, int ldb, bool accumulate, float *C, int ldc);
/* out (B,OC) = inp (B,C) @ weight (OC,C)^T + bias (OC) */
extern void dense_forward(float *out, const float *inp, const float *weight,
						  const float *bias, int B, int C, int OC);
/* the same, then out = act(out) (activation_forward) */
extern void dense_forward_act(float *out, const float *inp, const float *weight,
							  const float *bias, int B, int C, int OC, DmlAct act);

/*
 * dweight (OC,C) += dout (B,OC)^T @ inp (B,C); dbias (OC) += colsum(dout);
 * dinp (B,C) = dout @ weight, skipped when dinp is NULL.
 */
extern void dense_backward(float *dinp, float *dweight, float *dbias,
						   const float *dout, const float *inp,
						   const float *weight, int B, int C, int OC);
/* the same; with accumulate false dweight and dbias are overwritten (=) */
extern void dense_backward_acc(float *dinp, float *dweight, float *dbias,
							   const float *dout, const float *inp,
							   const float *weight, int B, int C, int OC,
							   bool accumulate);
/*
 * the same, then dinp through act's derivative where inp is act's output
 * (activation_backward (dinp, dinp, inp))
 */
extern void dense_backward_act(float *dinp, float *dweight, float *dbias,
							   const float *dout, const float *inp,
							   const float *weight, int B, int C, int OC,
							   bool accumulate, DmlAct act);
/*
 * Rows of inputs stored as bytes: input c of a row with byte k is the
 * float32 (k / div - mean[c]) * scale[c], k / div correctly rounded:
 * prepare_data's standardized value of a raw input k / div
 */
typedef struct DmlRows8
{
	const uint8_t *X8;			/* (n, C) */
	const float *mean;			/* (C) */
	const float *scale;			/* (C) */
	float		div;			/* 1, or 255 for bytes scaled to [0, 1] */
	float		rdiv;			/* 1 / div */
} DmlRows8;

/*
 * u8 (C) = the raw inputs v (C) as bytes k, v = k / div: true when every
 * value is one, bit for bit as the kernels rebuild it; else false (u8 then
 * holds nothing of use)
 */
extern bool dml_rows8_row(uint8_t *u8, const float *v, int C, float div);

/*
 * Xb (B, C) = R8's rows idx[0..B) as their float32 inputs, bit for bit
 * the standardized rows dml_gather_rows would copy, and yb (B) = y at them;
 * idx[B..avail) are read next.  A quarter of the float32 rows' bytes come
 * from memory.  dml_rows8_gather_applies: it runs on dml's own kernels
 * (AVX-512, or AVX2 with FMA) on this CPU, and not in plain C
 */
extern void dml_rows8_gather(const DmlRows8 *R8, const float *y, int C, const int *idx, int B,
							 int avail, float *Xb, float *yb);
extern bool dml_rows8_gather_applies(void);

/*
 * a layer over rows idx[0..B) of X read in place, the forward pass also
 * over R8's bytes (R8 not NULL; it then writes their float32 rows to stash
 * (B, C) unless it is NULL); where dml_skinny_applies
 */
extern void dense_forward_rows(float *out, const float *X, const DmlRows8 *R8, float *stash,
							   const int *idx, int B, int avail, const float *weight,
							   const float *bias, int C, int OC);
extern void dense_wgrad_rows(float *dweight, float *dbias, const float *dout, const float *X,
							 const int *idx, int B, int C, int OC, bool accumulate);

/* out (n) = act(inp (n)); may run in place */
extern void activation_forward(float *out, const float *inp, size_t n, DmlAct act);
/*
 * Subnormals flushed to zero (FTZ and DAZ in MXCSR) until
 * dml_subnormals_back(the returned word): around a kernel whose products
 * can fall below the smallest normal, where each vector operation with a
 * subnormal lane takes a microcode assist (Adam's moments, the Newton
 * statistics, the logistic rows' log1p).  Elsewhere than x86 a no-op.
 */
static inline unsigned int
dml_subnormals_off(void)
{
#if defined(__x86_64__) || defined(__SSE__)
	unsigned int csr = __builtin_ia32_stmxcsr();

	__builtin_ia32_ldmxcsr(csr | 0x8040);
	return csr;
#else
	return 0;
#endif
}

static inline void
dml_subnormals_back(unsigned int csr)
{
#if defined(__x86_64__) || defined(__SSE__)
	__builtin_ia32_ldmxcsr(csr);
#else
	(void) csr;
#endif
}

/* hidden layers at inference by dml's own kernel (layers.c), of at most this many outputs */
#define DML_DENSE_ROWS_MAX_OC	64
static inline int
dml_dense_rows_ld(int OC)
{
	return (OC + 15) / 16 * 16;
}
extern bool dml_dense_rows_applies(int C, int OC);
extern size_t dml_dense_rows_floats(int C, int OC);
extern void dml_dense_rows_weights(float *WT, const float *weight, const float *bias, int C,
								   int OC);
extern void dml_dense_rows(float *out, int ldo, const float *inp, int ldi, const float *WT,
						   int B, int C, int OC, bool relu);

/* dinp (n) = dout (n) * act'(.), written from the activation's output (n) */
extern void activation_backward(float *dinp, const float *dout,
								const float *out, size_t n, DmlAct act);

/* ---------------------------------------------------------------------
 * Losses (losses.c).  Each returns the SUM of per-row losses over the B rows
 * and writes dlogits = d(sum of losses) / d(logits); the caller scales by
 * 1/(global rows).  logits (B,K); targets y (B,K) for MSE, y (B) holding
 * 0/1 for BCE and the class index for softmax.
 * --------------------------------------------------------------------- */

/* per row: sum_k (logit - y)^2 */
extern double mse_forward_backward(float *dlogits, const float *logits,
								   const float *y, int B, int K);

/* per row: log(1 + e^z) - y z, computed without overflow */
extern double bce_forward_backward(float *dlogits, const float *logits,
								   const float *y, int B);

/* per row: logsumexp(z) - z[y]; probs (B,K) optional (may be NULL) */
extern double softmax_forward_backward(float *dlogits, float *probs,
									   const float *logits, const float *y,
									   int B, int K);

/* ---------------------------------------------------------------------
 * Optimizers (optim.c).  Weight decay is L2 added to the gradient (as
 * torch.optim does); params, state and grads all have n elements.
 * --------------------------------------------------------------------- */

extern void sgd_update(float *params, const float *grads, size_t n,
					   float lr, float weight_decay);

/* v = mu v + g; p -= lr v (nesterov: p -= lr (g + mu v)) */
extern void momentum_update(float *params, float *velocity, const float *grads,
							size_t n, float lr, float mu, float weight_decay,
							int nesterov);

/* Adam with bias correction; t counts steps from 1 */
extern void adam_update(float *params, float *m, float *v, const float *grads,
						size_t n, float lr, float beta1, float beta2,
						float eps, float weight_decay, int t);

/* learning rate of epoch (0-based) out of epochs */
extern float lr_at_epoch(DmlSchedule sched, float lr, int epoch, int epochs,
						 int step_size, float gamma);

/* An optimizer's settings for one step (the CUDA step takes the same) */
typedef struct DmlOptim
{
	DmlOptimizer kind;
	float		lr;
	float		momentum;		/* momentum and nesterov */
	float		beta1;			/* adam */
	float		beta2;
	float		eps;
	float		weight_decay;
} DmlOptim;

/* Its state over n parameters: velocity (s1) or Adam's moments (s1, s2) */
typedef struct DmlOptimState
{
	DmlOptimizer kind;
	size_t		n;
	float	   *s1;
	float	   *s2;
	int			t;				/* steps taken */
} DmlOptimState;

/* one step of o over st->n parameters: params -= update(grads) */
extern void optim_step(DmlOptimState *st, const DmlOptim *o, float *params, const float *grads);

/* the optimizer named (sgd, momentum, nesterov, adam); sgd when unknown */
extern DmlOptimizer dml_optimizer_parse(const char *name);

/* ---------------------------------------------------------------------
 * Random numbers (common.c): splitmix64/xorshift, identical on every platform
 * --------------------------------------------------------------------- */

typedef struct DmlRng
{
	uint64_t	s;
} DmlRng;

extern void dml_rng_seed(DmlRng *rng, uint64_t seed);
extern uint64_t dml_rng_next(DmlRng *rng);
extern double dml_rng_uniform(DmlRng *rng);		/* [0, 1) */
extern double dml_rng_normal(DmlRng *rng);
extern void dml_shuffle(int *idx, int n, DmlRng *rng);
/* rows idx[0..B) of X (n, d), y into Xb, yb; idx[B..avail) are read next */
/*
 * The OpenBLAS core type to force (OPENBLAS_CORETYPE) on this CPU, or NULL
 * when the one OpenBLAS detected has AVX2 or better kernels, or the CPU has
 * none.  Debian's OpenBLAS 0.3.21 does not know newer CPU models (Intel
 * model 207, Emerald Rapids, among them) and falls back to its SSE3
 * "Prescott" kernels, 4-5x slower at sgemm.  corename is what
 * openblas_get_corename() says.
 */
extern const char *dml_blas_core_override(const char *corename);
/*
 * The instruction set of dml's own kernels (the skinny layers, the narrow
 * rows, the Hessian's tiles; kernels/simd.h): 512 (AVX-512F), 256 (AVX2 and
 * FMA) or 0 (OpenBLAS instead), the widest the CPU has; dml_set_simd caps
 * it (the unit tests and benchmarks run each set on one machine)
 */
extern int	dml_simd(void);
extern void dml_set_simd(int cap);
extern void dml_gather_rows(const float *X, const float *y, int d, const int *idx,
							int B, int avail, float *Xb, float *yb);

/*
 * An epoch that takes blocks of c consecutive rows of X (n rows in nb
 * blocks; block nb - 1 holds the n - (nb - 1) c left over) in the order
 * order[0..nb): dml_gather_blocks copies its rows [pos, pos + B) a run a
 * block, with no row-by-row index (the same rows, in the same order, as
 * dml_gather_rows over the epoch's row indices).
 */
typedef struct DmlBlockOrder
{
	const int  *order;			/* block numbers in the epoch's order */
	int			nb;
	int			c;				/* rows a block */
	int			n;
	int			short_at;		/* where order holds block nb - 1 */
} DmlBlockOrder;

extern void dml_block_order_init(DmlBlockOrder *bo, const int *order, int nb, int c, int n);
extern void dml_gather_blocks(const float *X, const float *y, int d, const DmlBlockOrder *bo,
							  int pos, int B, float *Xb, float *yb);
/*
 * The block order's blocks tiled (common.c): each block of c rows (the
 * last one its own length) stored a feature at a time, feature j of the
 * block's row r at T[j * len + r], in the same place as its rows
 * (dml_tile_blocks: to_tiles false puts the rows back).  A run is a
 * step's rows in one block: its first row's feature 0 at T, ld the
 * block's rows, len the run's.  dml_block_runs writes the runs of rows
 * [pos, pos + B) (up to B / c + 3 of them: a step may hold the short
 * block between others) and copies their labels into yb, asking for the
 * next B rows' blocks from memory; it returns the runs.
 */
typedef struct DmlTileRun
{
	const float *T;
	int			ld;
	int			len;
} DmlTileRun;

extern bool dml_tile_blocks(float *X, int d, int c, int n, bool to_tiles);
extern int	dml_block_runs(const float *X, const float *y, int d, const DmlBlockOrder *bo, int pos,
						   int B, DmlTileRun *runs, float *yb);

/*
 * realloc and free for the arrays of a worker's rows, given their sizes in
 * bytes (common.c): from DML_BIG_MIN up a mapping of their own, aligned to
 * and sized in 2 MB, asked for transparent huge pages, grown by moving its
 * pages; below it malloc's memory
 */
#define DML_BIG_MIN			((size_t) 2 << 20)
extern void *dml_big_realloc(void *p, size_t old_bytes, size_t new_bytes);
extern void dml_big_free(void *p, size_t bytes);

/*
 * malloc and calloc for the arrays a step's kernels stream through (a
 * network's parameters, gradients, optimizer state and workspace): aligned
 * to a cache line, so that no vector load of a row that starts on one
 * splits across two lines; freed by free().  NULL when out of memory.
 */
#define DML_LINE			64
extern void *dml_malloc_lines(size_t n, size_t size);
extern void *dml_calloc_lines(size_t n, size_t size);

/* ---------------------------------------------------------------------
 * The network (net.c): dense layers with one hidden activation and a loss
 * --------------------------------------------------------------------- */

typedef struct DmlNet
{
	int			nlayers;		/* dense layers, >= 1 */
	int			sizes[DML_MAX_LAYERS + 1];	/* sizes[0] inputs .. outputs */
	DmlAct		act;			/* after every layer but the last */
	DmlLoss		loss;
	size_t		nparams;
	float	   *params;			/* per layer: W (out,in) then b (out) */
} DmlNet;

/* Activations kept for the backward pass, sized for up to maxB rows. */
typedef struct DmlWork
{
	int			maxB;
	float	   *acts[DML_MAX_LAYERS + 1];	/* acts[l] (maxB, sizes[l]); acts[0] unused */
	float	   *dacts[2];		/* ping-pong gradient buffers (maxB, max width) */
	/*
	 * classification: each row's loss times class_weight[its label] in
	 * the gradients (NULL: every weight 1); not owned
	 */
	const float *class_weight;
	/*
	 * the reference path (sgemm, loss and backward passes) for linear and
	 * logistic regression too, instead of their fused pass in net.c (tests
	 * compare the two); dml_work_alloc leaves it false
	 */
	bool		unfused;
	/*
	 * where set, dml_net_gradient's backward pass calls ready(ready_arg,
	 * from) as each layer is done: grads[from..nparams) are whole, and the
	 * pass reads none of params[from..nparams) again (the synchronization
	 * may sum and step them meanwhile).  dml_work_alloc leaves it NULL.
	 */
	void		(*ready) (void *arg, size_t from);
	void	   *ready_arg;
} DmlWork;

extern size_t dml_net_param_count(int nlayers, const int *sizes);
extern size_t dml_net_weight_offset(const DmlNet *net, int layer);
extern size_t dml_net_bias_offset(const DmlNet *net, int layer);
extern DmlStatus dml_net_alloc(DmlNet *net, int nlayers, const int *sizes,
							   DmlAct act, DmlLoss loss);
extern void dml_net_free(DmlNet *net);
/* He initialization for relu, Xavier otherwise; biases zero */
extern void dml_net_init(DmlNet *net, uint64_t seed);

extern DmlStatus dml_work_alloc(DmlWork *work, const DmlNet *net, int maxB);
extern void dml_work_free(DmlWork *work);

/* logits (B, K) of X (B, sizes[0]); uses work->acts */
extern const float *dml_net_forward(const DmlNet *net, DmlWork *work,
									const float *X, int B);

/*
 * Forward and backward over B rows: grads (nparams) += d(sum loss)/dparams.
 * Returns the sum of the rows' losses.
 */
extern double dml_net_forward_backward(const DmlNet *net, DmlWork *work,
									   float *grads, const float *X,
									   const float *y, int B);

/* grads = scale * d(sum loss)/dparams (overwritten; B >= 1); the sum of losses */
extern double dml_net_gradient(const DmlNet *net, DmlWork *work, float *grads,
							   const float *X, const float *y, int B, float scale);
/* the same over the tiled runs runs[0..nruns) (net.c); where it applies */
extern bool dml_net_tile_applies(const DmlNet *net, const DmlWork *work, int B);
extern double dml_net_gradient_tiles(const DmlNet *net, DmlWork *work, float *grads,
									 const DmlTileRun *runs, int nruns, const float *y, int B,
									 float scale);
/*
 * the same over rows idx[0..B) of X read in place, or of R8's bytes (R8 not
 * NULL) (net.c); where it applies
 */
extern bool dml_net_rows_applies(const DmlNet *net, const DmlWork *work, int B);
extern double dml_net_gradient_rows(const DmlNet *net, DmlWork *work, float *grads,
									const float *X, const DmlRows8 *R8, const int *idx, int B,
									int avail, const float *y, float scale);
/* the logits of those rows (work->acts[1]); where it applies */
extern const float *dml_net_forward_rows(const DmlNet *net, DmlWork *work, const float *X,
										 const DmlRows8 *R8, const int *idx, int B, int avail);
/* grads += scale * d(sum loss)/dparams; returns the (unscaled) sum of losses */
extern double dml_net_forward_backward_scaled(const DmlNet *net, DmlWork *work,
											  float *grads, const float *X,
											  const float *y, int B, float scale);

/* z (B) += X (B, C) w, rows of few inputs (net.c) */
extern void dml_rows_dot(float *z, const float *X, const float *w, int B, int C);

/* Turn logits (B,K) into predictions in place: identity / sigmoid / softmax */
extern void dml_net_output(const DmlNet *net, float *logits, int B);

/* ---------------------------------------------------------------------
 * Exact solvers (solve.c)
 * --------------------------------------------------------------------- */

/* Solve A x = b for symmetric positive definite A (n,n) in place (double) */
extern DmlStatus dml_cholesky_solve(double *A, double *b, int n);
/* A (n,n) symmetric positive definite := its inverse (LAPACK dpotrf, dpotri) */
extern DmlStatus dml_spd_inverse(double *A, int n);

/*
 * Least squares by TSQR.  R (q,q), row-major upper triangular, is the R
 * factor of Z = [X, y] (n, q), the target its last column: R = [R11 c; 0 r],
 * p = q - 1 coefficients, r^2 the residual sum of squares.
 */

/* R = the R factor of [R; Z (B,q)]: adds B rows, or merges another R (B = q) */
extern DmlStatus dml_qr_stack(double *R, const double *Z, int B, int q);

typedef struct DmlLsq
{
	int			p;				/* coefficients */
	int			rank;			/* numerical rank of X */
	double	   *coef;			/* (p) */
	double	   *cov;			/* (p,p) (X'X)^-1, or its pseudo-inverse */
	double		rss;			/* residual sum of squares */
	double		cond;			/* 2-norm condition number of X */
	int			ndropped;
	int		   *dropped;		/* (ndropped) columns that depend on others */
} DmlLsq;

/*
 * Solve from R for n rows.  DML_ERR_SINGULAR when X is rank-deficient
 * (ls->dropped names the columns), unless min_norm: then the minimum-norm
 * solution.  ls owns allocations on every return (dml_lsq_free).
 */
extern DmlStatus dml_lsq_solve(DmlLsq *ls, const double *R, int q, double n, bool min_norm);
extern void dml_lsq_free(DmlLsq *ls);

/* ---------------------------------------------------------------------
 * Logistic regression in float64 (logit.c): Newton's statistics on raw
 * rows, beta (d + 1) with the intercept last, and the fit as JSON
 * --------------------------------------------------------------------- */

/*
 * g (d+1) and H (d+1, d+1; NULL: the gradient only) += the negative
 * log-likelihood's derivatives; returns its sum
 */
extern double dml_logit_stats(double *g, double *H, const double *X, const double *y,
							  const unsigned char *skip, int64_t n, int d,
							  const double *beta);
/* binary logistic rows in double, vectorized: probabilities and the loss's sum */
extern double dml_logit_probs(const double *z, const int *label, int64_t n, double *pr,
							  bool want_loss);
/*
 * the loss and its two derivatives along z = e0 - t ed (Newton's line
 * search); sq (or NULL): the sum of the squared terms of the first
 */
extern void dml_logit_line(const double *e0, const double *ed, const int *label, int64_t n,
						   int stride, double t, bool want_loss, double out[3], double *sq);
/*
 * The Hessian's sum in register tiles on AVX-512 or AVX2 (logit.c), for models of
 * at most DML_HESS_TILE_P parameters: Hs (24, 24) += Z' Z over m rows of Z
 * (m, 24), columns past the model's p zero
 */
#define DML_HESS_TILE_P 24
extern bool dml_hess_tiles_ok(int p);
extern void dml_hess_tiles(double *Hs, const double *Z, int m, int p);
/*
 * the float32 Newton iterations' gradient g (d + 1, in double) and the
 * lower triangle of their Hessian Hs (DML_HESS_TILE_P, DML_HESS_TILE_P,
 * float32 products and chunk sums, added in double) over B rows; the
 * lines of the nnext rows at next (the next call's) asked for meanwhile
 */
extern void dml_logit_stats32(const float *X, int B, int d, size_t ld, const double *pr,
							  const int *label, double *g, double *Hs, const float *next,
							  int nnext);
/*
 * Row panels (logit.c, panel.h): DML_PANEL consecutive rows stored a
 * feature at a time, for the float32 Newton iterations where
 * dml_hess_tiles_ok(d + 1): the layout in place and back, the rows'
 * logits, and the gradient's and Hessian's lane sums (flushed into double
 * lanes, then summed into g and Hs's lower triangle)
 */
#define DML_PANEL 16
/* row o of the panels at P, of d inputs: its first input, the next DML_PANEL apart */
static inline const float *
dml_panel_row(const float *P, int64_t o, int d)
{
	return P + (size_t) (o / DML_PANEL) * DML_PANEL * d + o % DML_PANEL;
}
extern void dml_panel_layout(float *X, int64_t G, int d, bool to_panels);
extern size_t dml_panel_lanes(int p);
extern void dml_panel_dot(float *out, const float *Xp, int64_t G, int d, const float *v);
extern void dml_panel_stats(const float *Xp, int G, int d, const double *pr, const int *label,
							float *lanes, const float *next, int gnext);
extern void dml_panel_flush(float *lanes, double *dlanes, int p);
/* out (n) = v[d] + sum_c v[c] x_c over n rows of d float columns ld apart, in double */
extern void dml_cols_dot_d(double *out, const float *X, size_t ld, int64_t n, int d,
						   const double *v);
extern void dml_panel_sum(const double *dlanes, int p, double *g, double *Hs);
/* S (p, p) += the symmetric matrix whose lower half is L's (robust.c) */
extern void dml_add_lower_sym(double *S, const double *L, int p);

/*
 * The sum of z z' over rows z (p) written one at a time, put through one
 * DSYRK per DML_SYRK_BLOCK rows (robust.c): dml_syrk_begin, then
 * dml_syrk_row for each row (the place to write it), then dml_syrk_end,
 * which adds the sum to S (p, p, full) and frees the buffers.
 */
#define DML_SYRK_BLOCK 256
typedef struct DmlSyrkRows
{
	int			p;
	int			B;				/* rows in Z not yet summed */
	double	   *Z;				/* (DML_SYRK_BLOCK, p) */
	double	   *L;				/* (p, p): the sum so far, lower half */
} DmlSyrkRows;
extern DmlStatus dml_syrk_begin(DmlSyrkRows *a, int p);
extern double *dml_syrk_row(DmlSyrkRows *a);
extern void dml_syrk_end(DmlSyrkRows *a, double *S);

/*
 * cov = H^-1 or NULL (penalized: no standard errors), or a robust one
 * named by cov_type (NULL: model-based); returns the length needed
 */
extern size_t dml_logit_json(const double *beta, const double *cov, const char *cov_type,
							 int d, double n, double llf, double llnull,
							 const char *const *terms, char *buf, size_t len);
/* multinomial: beta (K-1, d+1), class K-1 the reference; g, H += as above */
extern double dml_mnlogit_stats(double *g, double *H, const double *X, const int *label,
								const unsigned char *skip, int64_t n, int d, int K,
								const double *beta);
/* the fit with classes[0] as the reference, as statsmodels' MNLogit reports it */
extern size_t dml_mnlogit_json(const double *b, const double *cov, int d, int K, double n,
							   double llf, double llnull, const char *const *terms,
							   const char *const *classes, char *buf, size_t len);

/* ---------------------------------------------------------------------
 * Heteroskedasticity-robust covariances (robust.c): HC0 and HC1
 * --------------------------------------------------------------------- */

/* M (d+1, d+1) += sum_i r_i^2 [x_i, 1][x_i, 1]' over the rows not skipped */
extern DmlStatus dml_hc_meat(double *M, const double *X, const double *r,
							 const unsigned char *skip, int64_t n, int d);
/* V = scale C M C */
extern DmlStatus dml_sandwich(double *V, const double *C, const double *M, int p, double scale);
/* the slopes' Wald F against V: b_s' V_ss^-1 b_s / d (intercept last) */
extern double dml_wald_f(const double *b, const double *V, int d);

/* ---------------------------------------------------------------------
 * Distributions for the statistics of a fit (stats.c)
 * --------------------------------------------------------------------- */

/* regularized incomplete beta I_x(a, b) */
extern double dml_incbeta(double a, double b, double x);
/* two-sided p-value of t with df degrees of freedom: P(|T| >= |t|) */
extern double dml_t_pvalue(double t, double df);
/* P(F >= f) for F(d1, d2) */
extern double dml_f_pvalue(double f, double d1, double d2);
/* two-sided p-value of a standard normal z: P(|Z| >= |z|) */
extern double dml_z_pvalue(double z);

/* ---------------------------------------------------------------------
 * L-BFGS (lbfgs.c): curvature pairs and the two-loop recursion; the
 * caller evaluates the objective and runs the line search
 * --------------------------------------------------------------------- */

#define DML_LBFGS_DEFAULT_M		10	/* curvature pairs kept */

typedef struct DmlLbfgs
{
	size_t		n;				/* parameters */
	int			m;				/* pairs kept at most */
	int			count;			/* pairs held */
	int			head;			/* slot of the oldest pair */
	double	   *S;				/* (m, n) steps */
	double	   *Y;				/* (m, n) gradient changes */
	double	   *rho;			/* (m) 1 / s'y */
	double	   *alpha;			/* (m) scratch of the recursion */
	double		gamma;			/* initial inverse Hessian scale */
} DmlLbfgs;

extern DmlStatus dml_lbfgs_alloc(DmlLbfgs *lb, size_t n, int m);
extern void dml_lbfgs_free(DmlLbfgs *lb);
extern bool dml_lbfgs_push(DmlLbfgs *lb, const double *s, const double *y);
/* dir = -H g */
extern void dml_lbfgs_direction(DmlLbfgs *lb, double *dir, const double *g);
extern void dml_lbfgs_reset(DmlLbfgs *lb);

#define DML_LBFGS_C1			1e-4	/* Armijo: sufficient decrease */
#define DML_LBFGS_MAX_TRIALS	40		/* halvings of the step per iteration */
#define DML_LBFGS_FTOL			1e-9	/* relative decrease that counts as none */

/* Why a training stopped (dml_stop_name: common.c) */
typedef enum DmlStopReason
{
	DML_STOP_NONE = 0,			/* it has not: go on */
	DML_STOP_MAX_EPOCHS,		/* the epochs (iterations, step budget) ran out */
	DML_STOP_CONVERGED,			/* the loss stopped improving, or the gradient vanished */
	DML_STOP_PATIENCE,			/* the validation loss stopped improving */
	DML_STOP_MAX_TIME			/* max_seconds was spent */
} DmlStopReason;

extern const char *dml_stop_name(DmlStopReason r);

/* What dml_lbfgs_minimize minimizes, and how the replicas agree */
typedef struct DmlLbfgsProblem
{
	size_t		n;
	/* f(x), and its gradient g (n); the same on every replica */
	double		(*objective) (void *arg, const double *x, double *g);
	/* make the owner's buf (n) every replica's; NULL: one process */
	void		(*share) (void *arg, double *buf, size_t n);
	/* after each iteration (x the new point): a reason to stop, or DML_STOP_NONE */
	DmlStopReason (*iterate) (void *arg, int iter, const double *x);
	void	   *arg;
	bool		owner;			/* this replica keeps the history */
	int			max_iter;
	double		gtol;			/* stop when every |g_i| <= gtol */
	/*
	 * l1 > 0: minimize objective + l1 sum |x_i| over the x_i where
	 * l1_mask[i], by OWL-QN (the L-BFGS of Andrew and Gao): the
	 * pseudo-gradient steers, steps stay in one orthant, and an x_i the
	 * step would move across zero is set to exactly 0
	 */
	double		l1;
	const unsigned char *l1_mask;	/* (n) */
} DmlLbfgsProblem;

typedef struct DmlLbfgsResult
{
	int			iterations;
	double		objective;
	DmlStopReason reason;		/* converged, max epochs, or iterate's */
} DmlLbfgsResult;

extern DmlStatus dml_lbfgs_minimize(const DmlLbfgsProblem *pb, DmlLbfgs *lb, double *x,
									DmlLbfgsResult *out);
/* full-batch objectives: the loss sum and its gradient; the L2 penalty on weights */
extern double dml_net_full_gradient(const DmlNet *net, DmlWork *work, float *grads,
									const float *X, const float *y, int64_t n, int maxB);
extern double dml_net_penalty(const DmlNet *net, double lambda, const double *x, double *g);
/* mask (nparams) = 1 on every layer's weights, 0 on the biases: what the penalties cover */
extern void dml_net_weight_mask(const DmlNet *net, unsigned char *mask);

/* ---------------------------------------------------------------------
 * The model blob (format.c): what dml.models.weights holds
 *
 *	 offset  field
 *	 0       magic "DMLM" (uint32 0x4D4C4D44, little-endian)
 *	 4       format version (uint32, DML_FORMAT_VERSION)
 *	 8       total length in bytes, checksum included (uint32)
 *	 12      nlayers (uint32), act (uint32), loss (uint32)
 *	 24      sizes[nlayers + 1] (uint32 each)
 *	 ..      in_mean[sizes[0]], in_scale[sizes[0]]   (float32)
 *	 ..      out_mean[K], out_scale[K]               (float32)
 *	 ..      params[nparams]                         (float32)
 *	 end-4   CRC-32 of every byte before it (uint32)
 *
 * Version 2 records the precision of the values: a uint32 after loss
 * (offset 24; 32 or 64), the sizes from offset 28, then the same vectors
 * as float32 or float64.  float32 models are still written as version 1,
 * byte for byte as before; float64 ones (the exact solvers' linear,
 * logistic and softmax models: one layer) as version 2.  Both are read.
 *
 * Inputs are standardized as (x - in_mean) * in_scale before the network;
 * for regression, outputs are mapped back as y = out * out_scale + out_mean.
 * All integers and floats are little-endian.
 * --------------------------------------------------------------------- */

#define DML_FORMAT_MAGIC	0x4D4C4D44u
#define DML_FORMAT_VERSION	2		/* the newest this build reads and writes */
#define DML_FORMAT_VERSION_F32	1	/* float32 models */

typedef struct DmlModel
{
	DmlNet		net;
	float	   *in_mean;		/* (sizes[0]) */
	float	   *in_scale;		/* (sizes[0]) */
	float	   *out_mean;		/* (K) */
	float	   *out_scale;		/* (K) */
	/*
	 * precision 64: the same five vectors in float64 (the float32 ones
	 * above hold them rounded, for the paths that compute in float32);
	 * NULL for precision 32
	 */
	int			precision;		/* 32 or 64 */
	double	   *params64;		/* (nparams) */
	double	   *in_mean64;
	double	   *in_scale64;
	double	   *out_mean64;
	double	   *out_scale64;
	/*
	 * the hidden layers' weights as dml_dense_rows takes them, made once
	 * by dml_model_prepare (NULL until then): each hidden layer of at
	 * most DML_DENSE_ROWS_MAX_OC outputs in turn, dml_dense_rows_floats
	 * of it.  Valid while params stay as they were; dml_model_free frees it.
	 */
	float	   *rows_wt;
} DmlModel;

extern DmlStatus dml_model_alloc(DmlModel *m, int nlayers, const int *sizes,
								 DmlAct act, DmlLoss loss);
extern void dml_model_free(DmlModel *m);
/* make m a float64 model (one layer only): the float64 vectors, from the float32 ones */
extern DmlStatus dml_model_make_f64(DmlModel *m);
/* after writing the float64 vectors: round them into the float32 ones */
extern void dml_model_sync_f32(DmlModel *m);
extern size_t dml_model_serialized_size(const DmlModel *m);
/* writes dml_model_serialized_size(m) bytes into buf */
extern void dml_model_serialize(const DmlModel *m, unsigned char *buf);
/*
 * Parse and validate a blob; on success *m owns fresh allocations.  On
 * failure *m is untouched and errbuf (errlen bytes) says what was wrong.
 */
extern DmlStatus dml_model_parse(DmlModel *m, const unsigned char *buf,
								 size_t len, char *errbuf, size_t errlen);

/*
 * Predict B rows of raw features X (B, sizes[0]) into out (B, K): inputs
 * standardized, network run, output function applied, regression outputs
 * mapped back.  scratch needs dml_model_scratch_floats(m, B) floats.
 */
extern size_t dml_model_scratch_floats(const DmlModel *m, int B);
extern void dml_model_predict(const DmlModel *m, float *out, const float *X,
							  int B, float *scratch);
/*
 * m->rows_wt made from m's parameters, for a model that predicts many
 * times (a cache's): no batch transposes its hidden layers' weights, and
 * a row alone runs as in a batch, the same bits (dml_model_predict).
 */
extern DmlStatus dml_model_prepare(DmlModel *m);
/* a float64 model's predictions out (B,K) for X (B, sizes[0]), in float64 */
extern void dml_model_predict64(const DmlModel *m, double *out, const double *X, int B);

/*
 * The two ends of dml_model_predict, for a network run elsewhere (a GPU):
 * Xs (B, sizes[0]) = standardized X, in place allowed; then the network's
 * logits (B,K) turned into predictions in place.
 */
extern void dml_model_standardize(const DmlModel *m, float *Xs, const float *X, int B);
extern void dml_model_finish(const DmlModel *m, float *out, int B);

extern uint32_t dml_crc32(const unsigned char *buf, size_t len);

/*
 * Little-endian uint32 at p, whatever the host's order: the weights format
 * (format.c), dml's export package (extension/package.c) and the fuzzers'
 * repairs all write and read their fields with these two.
 */
static inline void
dml_put_le32(unsigned char *p, uint32_t v)
{
	p[0] = v & 0xFF;
	p[1] = (v >> 8) & 0xFF;
	p[2] = (v >> 16) & 0xFF;
	p[3] = (v >> 24) & 0xFF;
}

static inline uint32_t
dml_get_le32(const unsigned char *p)
{
	return (uint32_t) p[0] | ((uint32_t) p[1] << 8) |
		((uint32_t) p[2] << 16) | ((uint32_t) p[3] << 24);
}

/*
 * The first n of 16 vector lanes as a bit mask (none for n <= 0, all for
 * n >= 16): the AVX-512 kernels' masked loads and stores of a row's tail
 * (net.c, layers.c, logit.c)
 */
static inline uint16_t
dml_lanes16(int n)
{
	return n >= 16 ? (uint16_t) 0xFFFF : n <= 0 ? (uint16_t) 0 : (uint16_t) ((1u << n) - 1);
}

/* ---------------------------------------------------------------------
 * A least-squares fit from its TSQR factor (lsq.c): R (d+2, d+2) of the
 * rows [x, 1, y]; shared by the in-server solver and the workers
 * --------------------------------------------------------------------- */

typedef struct DmlLsqFit
{
	int			d;				/* inputs */
	double		n;				/* rows */
	DmlLsq		ls;				/* coef (d+1): raw-scale slopes, then the intercept */
	double	   *mu;				/* (d) inputs' means */
	double	   *sd;				/* (d) and population standard deviations */
	double		ymu;
	double		ysd;			/* 1 when the target is constant */
	double		rss;			/* residual sum of squares, penalty excluded */
	double		tss;			/* total sum of squares about the mean */
	bool		penalized;		/* ridge: no standard errors */
	double	   *robust;			/* (d+1, d+1) HC covariance, or NULL (malloc'd) */
	const char *cov_type;		/* "HC0" or "HC1" with robust */
} DmlLsqFit;

/* moments and tss from R; then check the inputs (sd 0: constant), then dml_lsq_fit */
extern DmlStatus dml_lsq_moments(DmlLsqFit *fit, const double *R, int d, double n);
/* solve; penalty (d) or NULL: weights of beta_c^2 on the standardized scale; R changes */
extern DmlStatus dml_lsq_fit(DmlLsqFit *fit, double *R, const double *penalty, bool min_norm);
/* the fit into m (one layer, d inputs, one MSE output), float64, standardized form */
extern DmlStatus dml_lsq_fit_model(const DmlLsqFit *fit, DmlModel *m);
/* the statistics as JSON (terms: d input names); returns the length needed */
extern size_t dml_lsq_fit_json(const DmlLsqFit *fit, const char *const *terms, char *buf,
							   size_t len);
extern void dml_lsq_fit_free(DmlLsqFit *fit);

/* JSON writing into buf (len bytes), *pos counting the length needed (lsq.c) */
extern void dml_json_add(char *buf, size_t len, size_t *pos, const char *fmt,...)
			__attribute__((format(printf, 4, 5)));
extern void dml_json_num(char *buf, size_t len, size_t *pos, const char *sep, double x);
extern void dml_json_str(char *buf, size_t len, size_t *pos, const char *sep, const char *s);
extern void dml_json_coefficients(char *buf, size_t len, size_t *pos, const char *method,
								  const char *solver, const char *const *terms, int d,
								  const double *coef, const double *cov, double scale);

/* ---------------------------------------------------------------------
 * Metrics (metrics.c): sums that all-reduce, then JSON
 *
 * v[] holds every figure as a double so one MPI_Allreduce(SUM) merges the
 * ranks: n, loss sum, |err| sum, err^2 sum, y sum, y^2 sum, then for
 * classification the confusion matrix (K,K) indexed [true * K + predicted].
 * --------------------------------------------------------------------- */

#define DML_MET_N		0
#define DML_MET_LOSS	1
#define DML_MET_ABS		2
#define DML_MET_SQ		3
#define DML_MET_Y		4
#define DML_MET_YY		5
#define DML_MET_CONF	6

typedef struct DmlMetrics
{
	DmlLoss		loss;
	int			K;				/* classes (2 for BCE), or outputs */
	size_t		nvalues;
	double	   *v;
} DmlMetrics;

extern DmlStatus dml_metrics_init(DmlMetrics *m, DmlLoss loss, int K);
extern void dml_metrics_free(DmlMetrics *m);
extern void dml_metrics_reset(DmlMetrics *m);

/*
 * Add B rows: pred (B,K') is the model's output after dml_net_output
 * (values, P(class 1), or class probabilities); y as for the losses.
 */
extern void dml_metrics_add(DmlMetrics *m, const float *pred, const float *y, int B);

/* mean loss (MSE, or log loss) and the headline metric (R^2 or accuracy) */
extern double dml_metrics_loss(const DmlMetrics *m);
extern double dml_metrics_score(const DmlMetrics *m);

/* JSON object with every metric; returns the length it needed */
extern size_t dml_metrics_json(const DmlMetrics *m, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif							/* DML_KERNELS_H */
