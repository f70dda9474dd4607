/*-------------------------------------------------------------------------
 *
 * hess.h
 *	  The Hessian's register tiles (hess_tile.h, in double and in float)
 *	  and the float32 Newton iterations' statistics kernel (logit.c),
 *	  written once in simd.h's operations and compiled once for each
 *	  instruction set: logit.c includes this file after each inclusion of
 *	  simd.h.
 *
 * A tile is a vector's width of columns of H (in double 8 on AVX-512 and
 * 4 on AVX2, in float 16 and 8), or two such sets side by side, and some
 * of their rows, each row's part an accumulator: up to HESS_RB of them
 * (24 of the 32 registers on AVX-512, 12 of the 16 on AVX2).  Every entry
 * sums its products z_c z_k with one fused multiply-add a row, in row
 * order, so both copies give H bit for bit; so does the statistics
 * kernel, whose gradient lanes each sum their rows in order and whose
 * chunks are the same on both.
 *
 *-------------------------------------------------------------------------
 */
#undef HESS_RB
#define HESS_RB		(SIMD_ISA == 512 ? 24 : 12)
/* X(P) for each model size P below HESS_TILE_P, which the kernels are made for */
#undef HESS_EACH_P
#define HESS_EACH_P(X) \
	X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) \
	X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23)

/* the tiles in double: H's sums (dml_hess_tiles) */
#define HT_T	double
#define HT_V	VD
#define HT_L	VDL
#define HT_TP	HESS_TILE_P
#define ht_load	vdload
#define ht_store	vdstore
#define ht_set1	vdset1
#define ht_fma	vdfma
#define ht_zero	vdzero
#define HT_NAME(f)	SIMD_NAME(f)
#include "hess_tile.h"

/*
 * the tiles in float (dml_logit_stats32): a vector holds twice the
 * doubles' lanes, so the same rows take about half the multiply-adds
 */
#undef HESS32_P
#define HESS32_P	(SIMD_ISA == 512 ? 32 : 24)
#define HT_T	float
#define HT_V	VF
#define HT_L	VL
#define HT_TP	HESS32_P
#define ht_load	vload
#define ht_store	vstore
#define ht_set1	vset1
#define ht_fma	vfma
#define ht_zero	vzero
#define HT_NAME(f)	SIMD_NAME(f##32)
#include "hess_tile.h"

/*
 * The entries above the diagonal blocks are then copied from their mirror
 * images, which hold the whole running sum, so H stays exactly symmetric
 */
SIMD_TARGET static void
SIMD_NAME(hess_tiles) (double *restrict Hs, const double *restrict Z, int m, int p)
{
	switch (p)
	{
#define HESS_CASE(P) case P: SIMD_NAME(hess_tiles_p) (Hs, Z, m, P); break;
			HESS_EACH_P(HESS_CASE)
#undef HESS_CASE
		default:
			SIMD_NAME(hess_tiles_p) (Hs, Z, m, HESS_TILE_P);
	}
	for (int c = 0; c < HESS_TILE_P; c++)
		for (int k = (c / VDL + 1) * VDL; k < HESS_TILE_P; k++)
			Hs[c * HESS_TILE_P + k] = Hs[k * HESS_TILE_P + c];
}

/*
 * The float32 Newton iterations' statistics (dml_logit_stats32) over B
 * rows, in chunks of HESS_CHUNK rows: per row, x is read once and turned
 * both into the gradient's term and into the tiles' row sqrt(p (1 - p))
 * [x, 1, 0 ...], in float; the chunk's tiles sum in float (its rows, 12
 * or 16 KB, stay in L1), and the chunk's gradient and the lower triangle
 * of its H are then added to g and Hs in double.  Made for each d = P - 1
 * (whole vectors load without a mask, the masks are constants).
 */
#undef HESS32_V
#define HESS32_V	(HESS32_P / VL)

SIMD_INLINE void
SIMD_NAME(logit_stats32_d) (const float *restrict X, int B, const int d, size_t ld,
							const double *restrict pr, const int *restrict label,
							double *restrict g, double *restrict Hs, const float *next,
							int nnext, const int P)
{
	const size_t rb = sizeof(float) * ld;	/* a row's bytes: at most 2 lines and a part */

	float		Z[HESS_CHUNK * HESS32_P] __attribute__((aligned(64)));
	float		Ht[HESS32_P * HESS32_P] __attribute__((aligned(64)));
	double		gs[HESS32_P];
	VF			one = vset1(1.0f);
	/* lane d of the vectors: the intercept's 1 */
	VK			k[HESS32_V];

	for (int t = 0; t < HESS32_V; t++)
		k[t] = vone_lane(d - VL * t);
	for (int i0 = 0; i0 < B; i0 += HESS_CHUNK)
	{
		int			mc = B - i0 < HESS_CHUNK ? B - i0 : HESS_CHUNK;
		VD			gv[2 * HESS32_V];
		/*
		 * the chunk's weights sqrt(p (1 - p)) and residuals p - y, a
		 * vector of rows at a time: the same values the row loop made
		 * one row at a time, with a scalar square root (that loop was
		 * 44% of the kernel's samples)
		 */
		float		aw[HESS_CHUNK];
		double		rw[HESS_CHUNK];

		for (int i = 0; i < mc; i++)
		{
			double		pi = pr[i0 + i];

			aw[i] = (float) sqrt(pi * (1 - pi));
			rw[i] = pi - label[i0 + i];
		}
		for (int t = 0; t < 2 * HESS32_V; t++)
			gv[t] = vdzero();
		for (int i = 0; i < mc; i++)
		{
			const float *x = X + (size_t) (i0 + i) * ld;

			/* the lines of the next call's row i0 + i, into L2 (see dml_logit_stats32) */
			if (i0 + i < nnext)
			{
				const char *n = (const char *) (next + (size_t) (i0 + i) * ld);

				__builtin_prefetch(n, 0, 2);
				__builtin_prefetch(n + rb - 1, 0, 2);
				if (rb > 64)
					__builtin_prefetch(n + 64, 0, 2);
			}
			VF			a = vset1(aw[i]);
			VD			r = vdset1(rw[i]);
			float	   *z = Z + (size_t) i * HESS32_P;

#pragma GCC unroll 4
			for (int t = 0; t < HESS32_V; t++)
			{
				/* past the row's d inputs (and the intercept's lane) zeros */
				VF			v = d - VL * t >= VL ? vload(x + VL * t) :
					VL * t < d ? vloadm(vmask(d - VL * t), x + VL * t) : vzero();

				v = vsel(k[t], one, v);
				/* the gradient in double, in row order */
				gv[2 * t] = vdfma(r, vdlo(v), gv[2 * t]);
				gv[2 * t + 1] = vdfma(r, vdhi(v), gv[2 * t + 1]);
				vstore(z + VL * t, vmul(a, v));
			}
		}
		memset(Ht, 0, sizeof(float) * HESS32_P * P);
		SIMD_NAME(hess_tiles_p32) (Ht, Z, mc, P);
		for (int t = 0; t < 2 * HESS32_V; t++)
			vdstore(gs + VDL * t, gv[t]);
		for (int c = 0; c <= d; c++)
			g[c] += gs[c];
		for (int c = 0; c < P; c++)
			for (int j = 0; j <= c; j++)
				Hs[c * HESS_TILE_P + j] += Ht[c * HESS32_P + j];
	}
}

SIMD_TARGET static void
SIMD_NAME(logit_stats32) (const float *restrict X, int B, int d, size_t ld,
						  const double *restrict pr, const int *restrict label,
						  double *restrict g, double *restrict Hs, const float *next, int nnext)
{
	if (!next)
		nnext = 0;
	switch (d + 1)
	{
#define LOGIT_STATS32_CASE(P) \
		case P: SIMD_NAME(logit_stats32_d) (X, B, P - 1, ld, pr, label, g, Hs, next, nnext, P); break;
			HESS_EACH_P(LOGIT_STATS32_CASE)
#undef LOGIT_STATS32_CASE
		default:
			SIMD_NAME(logit_stats32_d) (X, B, d, ld, pr, label, g, Hs, next, nnext, HESS_TILE_P);
	}
}
