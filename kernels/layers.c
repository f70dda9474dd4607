/*-------------------------------------------------------------------------
 *
 * layers.c
 *	  Dense layers on OpenBLAS sgemm (kernels of their own, AVX-512 or
 *	  AVX2, for layers of a few outputs, and for a model's hidden layers
 *	  of at most 64 outputs at inference; on AVX-512 a product of its own
 *	  for a minibatch's wider layers, gemm.h) and their activations.
 *
 * The CPU reference; cuda/layers.cu is its CUDA twin, name for name.
 * Single-threaded by design: each MPI rank pins OpenBLAS to one thread,
 * and the backend never starts a thread pool.
 *
 *-------------------------------------------------------------------------
 */
#include "kernels.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

static const char *const act_names[] = {"identity", "relu", "tanh", "sigmoid"};

/* Name of an activation */
const char *
dml_act_name(DmlAct act)
{
	if ((int) act < 0 || (int) act > DML_ACT_SIGMOID)
		return "unknown";
	return act_names[act];
}

/* Activation by name, -1 when unknown */
int
dml_act_parse(const char *name)
{
	for (int i = 0; i <= DML_ACT_SIGMOID; i++)
		if (strcmp(name, act_names[i]) == 0)
			return i;
	return -1;
}

/* ---------------------------------------------------------------------
 * Dense layer
 * --------------------------------------------------------------------- */

/*
 * Skinny layers: OC <= SKINNY_OC outputs (softmax regression's classes, an
 * MLP's output layer).  OpenBLAS's sgemm packs both operands for every
 * call and its kernels are cut for wide outputs: at 256 x 10 x 784 it ran
 * at about a third of its large-shape rate, and the softmax epoch spent
 * two thirds of its time there.  On AVX-512, and on AVX2 with FMA, these
 * take its place (skinny.h, compiled for each; dml_simd picks one):
 *
 *  - forward: each output a dot product along the row, two rows at a
 *    time (2 x OC accumulators, each weight vector loaded once for both
 *    rows), the accumulators reduced once at the end of the row;
 *  - weight gradient: dweight[k] += sum over rows of dout[b][k] inp[b],
 *    two vectors of columns at a time (2 x OC accumulators), the rows
 *    streaming through once per such group of columns;
 *
 * on AVX2, with half the registers, the outputs in blocks of at most 6.
 *
 * The products are summed in another order than sgemm's, so the results
 * agree to float32 rounding, not bit for bit; the two instruction sets'
 * copies agree the same way (a row's lanes are 16 or 8 wide).  Other CPUs,
 * wider layers and the builds for one instruction set (DML_NO_CLONES: the
 * unit tests' _sse2 and _avx2) keep sgemm; so does dml_set_skinny(false).
 *
 * Byte rows (DmlRows8): a row's C inputs stored as bytes k, each input the
 * float32 (k / div - mean[c]) * scale[c], the value prepare_data wrote into
 * the float32 rows from the raw input k / div (dml_rows8_row checked every
 * raw value bit for bit).  A quarter of the float32 row's bytes come from
 * memory.  k / div is rebuilt without a division: q = k (1 / div), then
 * q + (k - q div) (1 / div), Markstein's correction, which gives the
 * correctly rounded quotient (and dml_rows8_row keeps only rows where it
 * gives the stored value).
 */
#define SKINNY_OC	12
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(DML_NO_CLONES)
#define SKINNY 1
#include <cpuid.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static bool skinny_off = false;

/* row i of X (float rows), or of R8's bytes; idx NULL: row i itself */
#define SKINNY_ROW(X, R8, idx, i, C) \
	((R8) ? (const void *) ((R8)->X8 + (size_t) ((idx) ? (idx)[i] : (i)) * (C)) : \
	 (const void *) ((X) + (size_t) ((idx) ? (idx)[i] : (i)) * (C)))

#define SKINNY_CASES(CALL) \
	switch (OC) \
	{ \
		case 1: CALL(1); break; case 2: CALL(2); break; case 3: CALL(3); break; \
		case 4: CALL(4); break; case 5: CALL(5); break; case 6: CALL(6); break; \
		case 7: CALL(7); break; case 8: CALL(8); break; case 9: CALL(9); break; \
		case 10: CALL(10); break; case 11: CALL(11); break; default: CALL(12); break; \
	}

/*
 * dml_rows8_gather asks for the lines of the rows this many further on: a
 * pair's rebuilding (2 x 784 bytes into 6 KB of float32) takes about a
 * memory latency, and the rows come in a random order
 */
#ifndef ROWS8_AHEAD
#define ROWS8_AHEAD	8
#endif

#define SIMD_ISA 512
#include "simd.h"
#include "skinny.h"
#include "dense_rows.h"
#include "gemm.h"
#include "gemm_amx.h"
#undef SIMD_ISA
#define SIMD_ISA 256
#include "simd.h"
#include "skinny.h"
#include "dense_rows.h"
#undef SIMD_ISA

static void
skinny_forward(float *out, const float *X, const DmlRows8 *R8, float *stash, const int *idx,
			   int B, int avail, const float *W, const float *bias, int C, int OC)
{
	SIMD_DISPATCH(skinny_forward, out, X, R8, stash, idx, B, avail, W, bias, C, OC);
}

static void
skinny_wgrad(float *dW, const float *dout, const float *inp, const int *idx, int B, int C,
			 bool accumulate, int OC)
{
	SIMD_DISPATCH(skinny_wgrad, dW, dout, inp, idx, B, C, accumulate, OC);
}

static bool
skinny_applies(int B, int OC)
{
	return !skinny_off && B >= 2 && OC >= 1 && OC <= SKINNY_OC && dml_simd() >= 256;
}

static bool gemm_off = false;

/*
 * Whether a product of M x K by K x N runs on gemm.h's kernel: on AVX-512,
 * for a minibatch (M, N and K at least 2; one row's forward pass keeps
 * sgemv) whose C and op(B) stay in L2 (where it is faster than sgemm:
 * gemm.h), unless dml_set_gemm(false) or dml_set_skinny(false)
 */
static bool
gemm_applies(int M, int N, int K)
{
	return !skinny_off && !gemm_off && M >= 2 && N >= 2 && K >= 2 &&
		(long) M * N <= GEMM_MAX_C && (long) K * N <= GEMM_MAX_B && dml_simd() >= 512;
}

static bool amx_on = false;
static long amx_products = 0;

/*
 * Whether gemm.h's product of M x K by K x N runs on AMX's tiles
 * (gemm_amx.h) instead: where dml_set_amx(true) (dml-worker's training,
 * not its predict jobs), the CPU and kernel allow it, and each side is at
 * least 32 (64 for K): at 37 x 45 x 29 the packing made it half
 * gemm_avx512's rate, at 100 x 70 x 50 1.1x, at the MLP's shapes 1.4-1.6x
 */
static bool
amx_applies(int M, int N, int K)
{
	return amx_on && M >= 32 && N >= 32 && K >= 64 && K <= AMX_MAX_K && amx_usable(M, K);
}

/* gemm_avx512's product, on AMX where amx_applies */
static void
gemm_run(bool transA, bool transB, int M, int N, int K, const float *A, long lda,
		 const float *B, long ldb, bool accumulate, float *C, long ldc,
		 const GemmEpilogue *ep)
{
	if (amx_applies(M, N, K))
	{
		amx_products++;
		gemm_amx(transA, transB, M, N, K, A, lda, B, ldb, accumulate, C, ldc, ep);
	}
	else
		gemm_avx512(transA, transB, M, N, K, A, lda, B, ldb, accumulate, C, ldc, ep);
}
#else
#define SKINNY 0
#endif

/*
 * Whether the wider layers' products (gemm.h's) run on AMX's tiles where
 * the CPU has them (off until set: the library does not ask the kernel for
 * the tiles' state in a process that did not say so).  Returns whether
 * they can: AMX there and granted.
 */
bool
dml_set_amx(bool on)
{
#if SKINNY
	amx_on = on && dml_simd() >= 512 && amx_usable(32, 64);
	return amx_on;
#else
	return false;
#endif
}

/* the products that have run on AMX's tiles in this process */
long
dml_amx_products(void)
{
#if SKINNY
	return amx_products;
#else
	return 0;
#endif
}

/*
 * C (M,N) = op(A) op(B), plus C's own values where accumulate, on gemm.h's
 * kernel, or gemm_amx.h's where the layers' would (op: transposed where
 * trans*; row-major, leading dimensions lda, ldb, ldc); false, C
 * untouched, where that kernel does not run (see gemm_applies).  For the
 * benchmarks' rate beside sgemm's.
 */
bool
dml_gemm(bool transA, bool transB, int M, int N, int K, const float *A, int lda,
		 const float *B, int ldb, bool accumulate, float *C, int ldc)
{
#if SKINNY
	if (gemm_applies(M, N, K))
	{
		gemm_run(transA, transB, M, N, K, A, lda, B, ldb, accumulate, C, ldc, NULL);
		return true;
	}
#endif
	return false;
}

/* whether gemm.h's products take sgemm's place on AVX-512 (the default) */
void
dml_set_gemm(bool on)
{
#if SKINNY
	gemm_off = !on;
#endif
}

/* whether skinny layers take sgemm's place where they can (the default) */
void
dml_set_skinny(bool on)
{
#if SKINNY
	skinny_off = !on;
#endif
}

/* whether a layer of OC outputs over B rows would run skinny on this CPU */
bool
dml_skinny_applies(int B, int OC)
{
#if SKINNY
	return skinny_applies(B, OC);
#else
	return false;
#endif
}

/*
 * Hidden layers at inference without sgemm (dense_rows.h), for a layer of
 * C inputs and OC outputs: where the skinny kernels run (AVX-512, or AVX2
 * with FMA, not turned off), at most 64 outputs (one block of columns on
 * AVX-512: the rows' inputs are read once), and on AVX2 at most 256
 * inputs.  For a model of a few dozen inputs and hidden units (the MLP
 * 20-64-64-1 of bench/RESULTS.md), OpenBLAS packed both operands of every
 * call, and its kernel over 20 inputs ran at a fraction of its rate:
 * dml_predict_table's forward passes, their ReLU and bias took about a
 * third of its time.  bench/micro/predict_rows, 1,000,000 rows in batches
 * of 1,024 on an Intel Xeon with AVX-512 (the whole forward pass, both
 * with the skinny output layer): 20-64-64-1 95 ms against 137 with sgemm,
 * 784-64-1 223 against 240, 512-32-1 101 against 109; wider layers were as
 * fast or slower (64-256-1 70 against 66, 128-128-1 66 against 64).  On
 * AVX2, against OpenBLAS's Haswell kernels on the same CPU: 20-64-64-1 28.3
 * against 33.5 ms (200,000 rows), 512-32-1 120 against 127, 784-64-1 320
 * against 309.
 */
bool
dml_dense_rows_applies(int C, int OC)
{
#if SKINNY
	return !skinny_off && dml_simd() >= 256 && OC <= DML_DENSE_ROWS_MAX_OC &&
		(dml_simd() >= 512 || C <= 256);
#else
	return false;
#endif
}

/* the floats of dml_dense_rows_weights's WT for a layer of C inputs and OC outputs */
size_t
dml_dense_rows_floats(int C, int OC)
{
	return (size_t) (C + 1) * dml_dense_rows_ld(OC);
}

/*
 * WT (C + 1, dml_dense_rows_ld(OC)) = weight (OC, C) transposed, then the
 * bias (OC) as its last row, every column past OC zero
 */
void
dml_dense_rows_weights(float *WT, const float *weight, const float *bias, int C, int OC)
{
	int			ldw = dml_dense_rows_ld(OC);

	/* a row of WT at a time, written in order (a batch of rows pays this) */
	for (int c = 0; c <= C; c++)
	{
		float	   *w = WT + (size_t) c * ldw;

		if (c < C)
			for (int o = 0; o < OC; o++)
				w[o] = weight[(size_t) o * C + c];
		else
			memcpy(w, bias, sizeof(float) * OC);
		memset(w + OC, 0, sizeof(float) * (ldw - OC));
	}
}

/*
 * out (B, OC, rows ldo apart) = inp (B, C, rows ldi apart) W' + bias, then
 * ReLU where relu, from WT as dml_dense_rows_weights made it.  A row's
 * outputs are the same whatever B and its place among the rows; they agree
 * with sgemm's to float32 rounding.  Any C and OC where dml_simd() is 256
 * or more; dml_dense_rows_applies says where it is faster than sgemm.
 */
void
dml_dense_rows(float *out, int ldo, const float *inp, int ldi, const float *WT, int B, int C,
			   int OC, bool relu)
{
#if SKINNY
	SIMD_DISPATCH(dense_rows, out, ldo, inp, ldi, WT, dml_dense_rows_ld(OC), B, C, OC, relu);
#endif
}

/* dbias (+)= the column sums of dout (B,OC) */
static void
bias_grad(float *dbias, const float *dout, int B, int OC, bool accumulate)
{
	if (!accumulate)
		memset(dbias, 0, sizeof(float) * OC);
	for (int b = 0; b < B; b++)
	{
		const float *row = dout + (size_t) b * OC;

		for (int o = 0; o < OC; o++)
			dbias[o] += row[o];
	}
}

/* out (B,OC) = inp (B,C) @ weight (OC,C)^T + bias (OC) */
void
dense_forward(float *out, const float *inp, const float *weight,
			  const float *bias, int B, int C, int OC)
{
	dense_forward_act(out, inp, weight, bias, B, C, OC, DML_ACT_IDENTITY);
}

/*
 * dense_forward, then act on out: activation_forward's values, ReLU in
 * the same pass as the product where gemm.h's kernel runs
 */
void
dense_forward_act(float *out, const float *inp, const float *weight,
				  const float *bias, int B, int C, int OC, DmlAct act)
{
#if SKINNY
	if (skinny_applies(B, OC))
		skinny_forward(out, inp, NULL, NULL, NULL, B, B, weight, bias, C, OC);
	else if (gemm_applies(B, OC, C))
	{
		GemmEpilogue ep = {.bias = bias, .relu = act == DML_ACT_RELU};

		gemm_run(false, true, B, OC, C, inp, C, weight, C, false, out, OC, &ep);
		if (ep.relu)
			return;
	}
	else
#endif
	{
		for (int b = 0; b < B; b++)
			memcpy(out + (size_t) b * OC, bias, sizeof(float) * OC);
		if (B == 1)
			cblas_sgemv(CblasRowMajor, CblasNoTrans, OC, C, 1.0f, weight, C,
						inp, 1, 1.0f, out, 1);
		else
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, OC, C,
						1.0f, inp, C, weight, C, 1.0f, out, OC);
	}
	activation_forward(out, out, (size_t) B * OC, act);
}

/* dweight += dout^T inp; dbias += colsum(dout); dinp = dout weight */
void
dense_backward(float *dinp, float *dweight, float *dbias, const float *dout,
			   const float *inp, const float *weight, int B, int C, int OC)
{
	dense_backward_acc(dinp, dweight, dbias, dout, inp, weight, B, C, OC, true);
}

/* as dense_backward; without accumulate, dweight and dbias are overwritten */
void
dense_backward_acc(float *dinp, float *dweight, float *dbias, const float *dout,
				   const float *inp, const float *weight, int B, int C, int OC,
				   bool accumulate)
{
	dense_backward_act(dinp, dweight, dbias, dout, inp, weight, B, C, OC, accumulate,
					   DML_ACT_IDENTITY);
}

/*
 * dense_backward_acc, with dinp then through act's derivative at inp (the
 * layer's input, act's output): activation_backward (dinp, dinp, inp),
 * ReLU's in the same pass as the product where gemm.h's kernel runs
 */
void
dense_backward_act(float *dinp, float *dweight, float *dbias, const float *dout,
				   const float *inp, const float *weight, int B, int C, int OC,
				   bool accumulate, DmlAct act)
{
#if SKINNY
	if (skinny_applies(B, OC))
		skinny_wgrad(dweight, dout, inp, NULL, B, C, accumulate, OC);
	else if (gemm_applies(OC, C, B))
		gemm_run(true, false, OC, C, B, dout, OC, inp, C, accumulate, dweight, C, NULL);
	else
#endif
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, B,
					1.0f, dout, OC, inp, C, accumulate ? 1.0f : 0.0f, dweight, C);
	bias_grad(dbias, dout, B, OC, accumulate);
	if (dinp == NULL)
		return;
#if SKINNY
	if (gemm_applies(B, C, OC))
	{
		GemmEpilogue ep = {.keep = act == DML_ACT_RELU ? inp : NULL, .ldk = C};

		gemm_run(false, false, B, C, OC, dout, OC, weight, C, false, dinp, C, &ep);
		if (ep.keep)
			return;
	}
	else
#endif
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, C, OC,
					1.0f, dout, OC, weight, C, 0.0f, dinp, C);
	activation_backward(dinp, dinp, inp, (size_t) B * C, act);
}

/*
 * A layer over rows idx[0..B) of X (n, C) read where they lie, with no
 * gather into a minibatch first (a wide row is streamed once, by the
 * forward pass, instead of copied and read again): only where
 * dml_skinny_applies.  The results are bit for bit those of
 * dense_forward and dense_backward_acc (without dinp) over the gathered
 * rows.  idx[B..avail) are the rows read next.  With R8 (not NULL) the
 * forward pass reads R8's bytes, not X, with the results of the float32
 * rows the bytes stand for, bit for bit, and also writes those float32
 * rows to stash (B, C) unless it is NULL: the weight gradient then reads
 * them there (idx NULL).
 */
void
dense_forward_rows(float *out, const float *X, const DmlRows8 *R8, float *stash, const int *idx,
				   int B, int avail, const float *weight, const float *bias, int C, int OC)
{
#if SKINNY
	skinny_forward(out, X, R8, R8 ? stash : NULL, idx, B, avail, weight, bias, C, OC);
#endif
}

void
dense_wgrad_rows(float *dweight, float *dbias, const float *dout, const float *X,
				 const int *idx, int B, int C, int OC, bool accumulate)
{
#if SKINNY
	skinny_wgrad(dweight, dout, X, idx, B, C, accumulate, OC);
#endif
	bias_grad(dbias, dout, B, OC, accumulate);
}

bool
dml_rows8_row(uint8_t *u8, const float *v, int C, float div)
{
	float		rdiv = 1.0f / div;
	bool		bad = false;

#if SKINNY
	if (dml_simd() >= 256)
		return !SIMD_DISPATCH(rows8_row, u8, v, C, div);
#endif
	/* the same in C, where the kernels do not run (the unit tests' builds for one instruction set) */
	for (int c = 0; c < C; c++)
	{
		float		u = rintf(v[c] * div);
		float		k = u > 0.0f ? (u < 255.0f ? u : 255.0f) : 0.0f;
		float		q = k * rdiv;

		q = fmaf(fmaf(-q, div, k), rdiv, q);
		/* bit for bit: equal, and zeros of the same sign (NaN: u != k) */
		bad |= u != k || q != v[c] || signbit(q) != signbit(v[c]);
		u8[c] = (uint8_t) k;
	}
	return !bad;
}

/* whether dml_rows8_gather runs on dml's own kernels on this CPU */
bool
dml_rows8_gather_applies(void)
{
#if SKINNY
	return !skinny_off && dml_simd() >= 256;
#else
	return false;
#endif
}

void
dml_rows8_gather(const DmlRows8 *R8, const float *y, int C, const int *idx, int B, int avail,
				 float *Xb, float *yb)
{
#if SKINNY
	if (dml_simd() >= 256)
	{
		SIMD_DISPATCH(rows8_gather, R8, y, C, idx, B, avail, Xb, yb);
		return;
	}
#endif
	/* the same in C, where the kernels do not run (the unit tests' builds for one instruction set) */
	for (int b = 0; b < B; b++)
	{
		const uint8_t *x = R8->X8 + (size_t) idx[b] * C;
		float	   *out = Xb + (size_t) b * C;

		for (int c = 0; c < C; c++)
		{
			float		k = (float) x[c];
			float		q = k * R8->rdiv;

			q = fmaf(fmaf(-q, R8->div, k), R8->rdiv, q);
			out[c] = (q - R8->mean[c]) * R8->scale[c];
		}
		yb[b] = y[idx[b]];
	}
}

/* ---------------------------------------------------------------------
 * Activations
 * --------------------------------------------------------------------- */

/* out = act(inp), elementwise; in place allowed */
DML_VECTORIZE void
activation_forward(float *out, const float *inp, size_t n, DmlAct act)
{
	switch (act)
	{
		case DML_ACT_IDENTITY:
			if (out != inp)
				memmove(out, inp, n * sizeof(float));
			break;
		case DML_ACT_RELU:
			for (size_t i = 0; i < n; i++)
				out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
			break;
		case DML_ACT_TANH:
			for (size_t i = 0; i < n; i++)
				out[i] = tanhf(inp[i]);
			break;
		case DML_ACT_SIGMOID:
			for (size_t i = 0; i < n; i++)
				out[i] = 1.0f / (1.0f + expf(-inp[i]));
			break;
	}
}

/* dinp = dout * act'(x), with act' written from the output y = act(x) */
DML_VECTORIZE void
activation_backward(float *dinp, const float *dout, const float *out,
					size_t n, DmlAct act)
{
	switch (act)
	{
		case DML_ACT_IDENTITY:
			if (dinp != dout)
				memmove(dinp, dout, n * sizeof(float));
			break;
		case DML_ACT_RELU:
			for (size_t i = 0; i < n; i++)
				dinp[i] = out[i] > 0.0f ? dout[i] : 0.0f;
			break;
		case DML_ACT_TANH:
			for (size_t i = 0; i < n; i++)
				dinp[i] = dout[i] * (1.0f - out[i] * out[i]);
			break;
		case DML_ACT_SIGMOID:
			for (size_t i = 0; i < n; i++)
				dinp[i] = dout[i] * out[i] * (1.0f - out[i]);
			break;
	}
}

