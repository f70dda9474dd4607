/*-------------------------------------------------------------------------
 *
 * layers.c
 *	  Dense layers on OpenBLAS sgemm (AVX-512 kernels of their own for
 *	  layers of a few outputs) and their activations.
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
 * two thirds of its time there.  On AVX-512 these take its place:
 *
 *  - forward: each output a dot product along the row, two rows at a
 *    time (OC x 2 accumulators, each weight vector loaded once for both
 *    rows), the accumulators reduced once at the end of the row;
 *  - weight gradient: dweight[k] += sum over rows of dout[b][k] inp[b],
 *    32 columns at a time (OC x 2 accumulators), the rows streaming
 *    through once per 32 columns.
 *
 * The products are summed in another order than sgemm's, so the results
 * agree to float32 rounding, not bit for bit.  Other CPUs, wider layers
 * and the builds for one instruction set (DML_NO_CLONES: the unit tests'
 * _sse2 and _avx2) keep sgemm; so does dml_set_skinny(false).
 */
#define SKINNY_OC	12
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(DML_NO_CLONES)
#include <immintrin.h>
#define SKINNY 1

static bool skinny_off = false;

/*
 * Byte rows (DmlRows8): a row's C inputs stored as bytes k, each input the
 * float32 (k / div - mean[c]) * scale[c], the value prepare_data wrote into
 * the float32 rows from the raw input k / div (dml_rows8_row checked every
 * raw value bit for bit).  A quarter of the float32 row's bytes come from
 * memory.  k / div is rebuilt without a division: q = k (1 / div), then
 * q + (k - q div) (1 / div), Markstein's correction, which gives the
 * correctly rounded quotient (and dml_rows8_row keeps only rows where it
 * gives the stored value).
 */
__attribute__((target("avx512f"), always_inline)) static inline __m512
byte16_quotient(__m512 k, float div, float rdiv)
{
	__m512		rd = _mm512_set1_ps(rdiv),
				q = _mm512_mul_ps(k, rd);

	return _mm512_fmadd_ps(_mm512_fnmadd_ps(q, _mm512_set1_ps(div), k), rd, q);
}

/* the inputs j .. j + 15 (mask m) of a byte row from its bytes k, as prepare_data makes them */
__attribute__((target("avx512f"), always_inline)) static inline __m512
byte16_value(__m512 k, const DmlRows8 *R8, int j, __mmask16 m)
{
	return _mm512_mul_ps(_mm512_sub_ps(byte16_quotient(k, R8->div, R8->rdiv),
									   _mm512_maskz_loadu_ps(m, R8->mean + j)),
						 _mm512_maskz_loadu_ps(m, R8->scale + j));
}

/* inputs j .. j + 15 of a byte row (left of them in the row, the rest 0) */
__attribute__((target("avx512f"), always_inline)) static inline __m512
byte16(const uint8_t *x, const DmlRows8 *R8, int j, int left)
{
	__m128i		u;

	if (left >= 16)
		u = _mm_loadu_si128((const __m128i *) (x + j));
	else
	{
		uint8_t		tail[16] = {0};

		for (int i = 0; i < left; i++)
			tail[i] = x[j + i];
		u = _mm_loadu_si128((const __m128i *) tail);
	}
	return byte16_value(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(u)), R8,
						j, left >= 16 ? (__mmask16) 0xffff : dml_lanes16(left));
}

/* dml_rows8_row on AVX-512, with the kernels' own quotient */
__attribute__((target("avx512f"))) static bool
rows8_row_avx512(uint8_t *u8, const float *v, int C, float div)
{
	__mmask16	bad = 0;
	float		rdiv = 1.0f / div;

	for (int j = 0; j < C; j += 16)
	{
		int			left = C - j;
		__mmask16	m = left >= 16 ? (__mmask16) 0xffff : dml_lanes16(left);
		__m512		x = _mm512_maskz_loadu_ps(m, v + j),
					u = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(div)),
										 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
		/* max_ps gives its second operand for a NaN: 0, and u != 0 flags it */
					k = _mm512_min_ps(_mm512_max_ps(u, _mm512_setzero_ps()), _mm512_set1_ps(255.0f));
		__m128i		b = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(k));

		bad |= _mm512_mask_cmp_ps_mask(m, u, k, _CMP_NEQ_UQ) |
			_mm512_mask_cmpneq_epi32_mask(m, _mm512_castps_si512(byte16_quotient(k, div, rdiv)),
										  _mm512_castps_si512(x));
		if (left >= 16)
			_mm_storeu_si128((__m128i *) (u8 + j), b);
		else
		{
			uint8_t		tail[16];

			_mm_storeu_si128((__m128i *) tail, b);
			for (int i = 0; i < left; i++)
				u8[j + i] = tail[i];
		}
	}
	return bad != 0;
}

/*
 * Two rows' outputs: x0 and x1 are float rows, or with R8 byte rows (R8's
 * mean and scale); p0 and p1 are the rows to ask into L1 meanwhile
 */
__attribute__((target("avx512f"), always_inline)) static inline void
skinny_fwd_rows(float *restrict out, const void *restrict x0, const void *restrict x1,
				const void *p0, const void *p1, const DmlRows8 *R8, float *s0, float *s1,
				const float *restrict W, const float *restrict bias, int C, const int OC)
{
	__m512		a0[SKINNY_OC],
				a1[SKINNY_OC];
	int			j = 0;
	int			esz = R8 ? 1 : sizeof(float);

#pragma GCC unroll 12
	for (int k = 0; k < OC; k++)
		a0[k] = a1[k] = _mm512_setzero_ps();
	for (; j + 16 <= C; j += 16)
	{
		__m512		v0,
					v1;

		if (R8)
		{
			v0 = byte16(x0, R8, j, 16);
			v1 = byte16(x1, R8, j, 16);
			if (s0)
			{
				_mm512_storeu_ps(s0 + j, v0);
				_mm512_storeu_ps(s1 + j, v1);
			}
		}
		else
		{
			v0 = _mm512_loadu_ps((const float *) x0 + j);
			v1 = _mm512_loadu_ps((const float *) x1 + j);
		}
		/* rows read in place: the next pair's lines, one each a step */
		if (p0 && (!R8 || (j & 63) == 0))
		{
			_mm_prefetch((const char *) p0 + (size_t) j * esz, _MM_HINT_T0);
			_mm_prefetch((const char *) p1 + (size_t) j * esz, _MM_HINT_T0);
		}
#pragma GCC unroll 12
		for (int k = 0; k < OC; k++)
		{
			__m512		w = _mm512_loadu_ps(W + (size_t) k * C + j);

			/* one load for both rows (GCC would fold it into each FMA) */
			__asm__("" : "+v"(w));
			a0[k] = _mm512_fmadd_ps(v0, w, a0[k]);
			a1[k] = _mm512_fmadd_ps(v1, w, a1[k]);
		}
	}
	if (j < C)
	{
		__mmask16	m = dml_lanes16(C - j);
		__m512		v0,
					v1;

		if (R8)
		{
			v0 = byte16(x0, R8, j, C - j);
			v1 = byte16(x1, R8, j, C - j);
			if (s0)
			{
				_mm512_mask_storeu_ps(s0 + j, m, v0);
				_mm512_mask_storeu_ps(s1 + j, m, v1);
			}
		}
		else
		{
			v0 = _mm512_maskz_loadu_ps(m, (const float *) x0 + j);
			v1 = _mm512_maskz_loadu_ps(m, (const float *) x1 + j);
		}
#pragma GCC unroll 12
		for (int k = 0; k < OC; k++)
		{
			__m512		w = _mm512_maskz_loadu_ps(m, W + (size_t) k * C + j);

			a0[k] = _mm512_fmadd_ps(v0, w, a0[k]);
			a1[k] = _mm512_fmadd_ps(v1, w, a1[k]);
		}
	}
#pragma GCC unroll 12
	for (int k = 0; k < OC; k++)
	{
		out[k] = bias[k] + _mm512_reduce_add_ps(a0[k]);
		out[OC + k] = bias[k] + _mm512_reduce_add_ps(a1[k]);
	}
}

/* row i of X (float rows), or of R8's bytes; idx NULL: row i itself */
#define SKINNY_ROW(X, R8, idx, i, C) \
	((R8) ? (const void *) ((R8)->X8 + (size_t) ((idx) ? (idx)[i] : (i)) * (C)) : \
	 (const void *) ((X) + (size_t) ((idx) ? (idx)[i] : (i)) * (C)))

/*
 * out (B,OC) = the rows (B,C) @ W (OC,C)^T + bias, OC a constant after
 * inlining: row b is X's row b, or with idx X's row idx[b], read where it
 * lies, a wide row's lines asked for a pair ahead (idx[B..avail) are read
 * next); with R8, R8's byte rows in X's place, and with stash (B,C) their
 * float32 inputs written there too
 */
__attribute__((target("avx512f"), always_inline)) static inline void
skinny_fwd_oc(float *out, const float *X, const DmlRows8 *R8, float *stash, const int *idx,
			  int B, int avail, const float *W, const float *bias, int C, const int OC)
{
	int			b = 0;
	bool		ahead = idx != NULL && C >= 64;

	for (; b + 2 <= B; b += 2)
	{
		const void *p0 = NULL,
				   *p1 = NULL;

		if (ahead && b + 3 < avail)
		{
			p0 = SKINNY_ROW(X, R8, idx, b + 2, C);
			p1 = SKINNY_ROW(X, R8, idx, b + 3, C);
		}
		skinny_fwd_rows(out + (size_t) b * OC, SKINNY_ROW(X, R8, idx, b, C),
						SKINNY_ROW(X, R8, idx, b + 1, C), p0, p1, R8,
						stash ? stash + (size_t) b * C : NULL,
						stash ? stash + (size_t) (b + 1) * C : NULL, W, bias, C, OC);
	}
	if (b < B)
	{
		float		two[2 * SKINNY_OC];
		float	   *sb = stash ? stash + (size_t) b * C : NULL;

		/* the last row alone: paired with itself, its second copy dropped */
		skinny_fwd_rows(two, SKINNY_ROW(X, R8, idx, b, C), SKINNY_ROW(X, R8, idx, b, C),
						NULL, NULL, R8, sb, sb, W, bias, C, OC);
		memcpy(out + (size_t) b * OC, two, sizeof(float) * OC);
	}
}

/*
 * dW (OC,C) (+)= dout (B,OC)^T inp (B,C), 32 columns at a time; with idx,
 * inp's row b is X's row idx[b] (inp is X)
 */
__attribute__((target("avx512f"), always_inline)) static inline void
skinny_wgrad_oc(float *dW, const float *dout, const float *inp, const int *idx, int B, int C,
				bool accumulate, const int OC)
{
	for (int j = 0; j < C; j += 32)
	{
		int			left = C - j;
		__mmask16	m0 = dml_lanes16(left),
					m1 = dml_lanes16(left - 16);
		__m512		a0[SKINNY_OC],
					a1[SKINNY_OC];

#pragma GCC unroll 12
		for (int k = 0; k < OC; k++)
			a0[k] = a1[k] = _mm512_setzero_ps();
		for (int b = 0; b < B; b++)
		{
			const float *x = inp + (size_t) (idx ? idx[b] : b) * C + j;
			const float *d = dout + (size_t) b * OC;
			__m512		v0 = _mm512_maskz_loadu_ps(m0, x),
						v1 = _mm512_maskz_loadu_ps(m1, x + 16);
#pragma GCC unroll 12
			for (int k = 0; k < OC; k++)
			{
				__m512		g = _mm512_set1_ps(d[k]);

				a0[k] = _mm512_fmadd_ps(g, v0, a0[k]);
				a1[k] = _mm512_fmadd_ps(g, v1, a1[k]);
			}
		}
#pragma GCC unroll 12
		for (int k = 0; k < OC; k++)
		{
			float	   *w = dW + (size_t) k * C + j;

			if (accumulate)
			{
				a0[k] = _mm512_add_ps(a0[k], _mm512_maskz_loadu_ps(m0, w));
				a1[k] = _mm512_add_ps(a1[k], _mm512_maskz_loadu_ps(m1, w + 16));
			}
			_mm512_mask_storeu_ps(w, m0, a0[k]);
			_mm512_mask_storeu_ps(w + 16, m1, a1[k]);
		}
	}
}

#define SKINNY_CASES(CALL) \
	switch (OC) \
	{ \
		case 1: CALL(1); break; case 2: CALL(2); break; case 3: CALL(3); break; \
		case 4: CALL(4); break; case 5: CALL(5); break; case 6: CALL(6); break; \
		case 7: CALL(7); break; case 8: CALL(8); break; case 9: CALL(9); break; \
		case 10: CALL(10); break; case 11: CALL(11); break; default: CALL(12); break; \
	}

__attribute__((target("avx512f"))) static void
skinny_forward(float *out, const float *X, const DmlRows8 *R8, float *stash, const int *idx,
			   int B, int avail, const float *W, const float *bias, int C, int OC)
{
#define FWD(n) skinny_fwd_oc(out, X, R8, stash, idx, B, avail, W, bias, C, n)
	if (R8)
		SKINNY_CASES(FWD)
	else
		SKINNY_CASES(FWD)
#undef FWD
}

__attribute__((target("avx512f"))) static void
skinny_wgrad(float *dW, const float *dout, const float *inp, const int *idx, int B, int C,
			 bool accumulate, int OC)
{
#define WG(n) skinny_wgrad_oc(dW, dout, inp, idx, B, C, accumulate, n)
	SKINNY_CASES(WG);
#undef WG
}

static bool
skinny_applies(int B, int OC)
{
	return !skinny_off && B >= 2 && OC >= 1 && OC <= SKINNY_OC &&
		__builtin_cpu_supports("avx512f");
}
#else
#define SKINNY 0
#endif

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
#if SKINNY
	if (skinny_applies(B, OC))
	{
		skinny_forward(out, inp, NULL, NULL, NULL, B, B, weight, bias, C, OC);
		return;
	}
#endif
	for (int b = 0; b < B; b++)
		memcpy(out + (size_t) b * OC, bias, sizeof(float) * OC);
	if (B == 1)
		cblas_sgemv(CblasRowMajor, CblasNoTrans, OC, C, 1.0f, weight, C,
					inp, 1, 1.0f, out, 1);
	else
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, OC, C,
					1.0f, inp, C, weight, C, 1.0f, out, OC);
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
#if SKINNY
	if (skinny_applies(B, OC))
		skinny_wgrad(dweight, dout, inp, NULL, B, C, accumulate, OC);
	else
#endif
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, B,
					1.0f, dout, OC, inp, C, accumulate ? 1.0f : 0.0f, dweight, C);
	bias_grad(dbias, dout, B, OC, accumulate);
	if (dinp != NULL)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, C, OC,
					1.0f, dout, OC, weight, C, 0.0f, dinp, C);
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
	if (__builtin_cpu_supports("avx512f"))
		return !rows8_row_avx512(u8, v, C, div);
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

