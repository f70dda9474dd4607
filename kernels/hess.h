/*-------------------------------------------------------------------------
 *
 * hess.h
 *	  The Hessian's register tiles and the Newton rows' kernel (logit.c),
 *	  written once in simd.h's double operations and compiled once for each
 *	  instruction set: logit.c includes this file after each inclusion of
 *	  simd.h.
 *
 * A tile is VDL columns of H (8 on AVX-512, 4 on AVX2), or two such sets
 * side by side, and some of their rows, each row's part an accumulator:
 * up to HESS_RB of them (24 of the 32 registers on AVX-512, 12 of the 16
 * on AVX2).  Every entry sums its products z_c z_k with one fused
 * multiply-add a row, in row order, so both copies give H bit for bit; so
 * does the rows' kernel, whose gradient lanes each sum their rows in
 * order.
 *
 *-------------------------------------------------------------------------
 */
#undef HESS_RB
#define HESS_RB		(SIMD_ISA == 512 ? 24 : 12)
#undef HESS_V
#define HESS_V		(HESS_TILE_P / VDL)
/* X(P) for each model size P below HESS_TILE_P, which the kernels are made for */
#undef HESS_EACH_P
#define HESS_EACH_P(X) \
	X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) \
	X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23)

/*
 * Rows [c0, c1) of the columns of vector T and, with two, of vector T + 1
 * (on its rows c >= VDL (T + 1) only: the lower triangle), at most HESS_RB
 * accumulators in all.  Per row of Z: one load of each vector's part of
 * the row, and for each tile row one broadcast that feeds both.
 */
SIMD_INLINE void
SIMD_NAME(hess_tile) (double *restrict Hs, const double *restrict Z, int m, const int T,
					  const int two, const int c0, const int c1)
{
	VD			acc0[HESS_RB],
				acc1[HESS_RB];

#pragma GCC unroll 24
	for (int c = c0; c < c1; c++)
	{
		acc0[c - c0] = vdload(Hs + c * HESS_TILE_P + VDL * T);
		if (two && c >= VDL * (T + 1))
			acc1[c - c0] = vdload(Hs + c * HESS_TILE_P + VDL * (T + 1));
	}
	for (int i = 0; i < m; i++)
	{
		const double *z = Z + (size_t) i * HESS_TILE_P;
		VD			zk0 = vdload(z + VDL * T),
					zk1 = two ? vdload(z + VDL * (T + 1)) : vdzero();

#pragma GCC unroll 24
		for (int c = c0; c < c1; c++)
		{
			VD			zc = vdset1(z[c]);

			acc0[c - c0] = vdfma(zc, zk0, acc0[c - c0]);
			if (two && c >= VDL * (T + 1))
				acc1[c - c0] = vdfma(zc, zk1, acc1[c - c0]);
		}
	}
#pragma GCC unroll 24
	for (int c = c0; c < c1; c++)
	{
		vdstore(Hs + c * HESS_TILE_P + VDL * T, acc0[c - c0]);
		if (two && c >= VDL * (T + 1))
			vdstore(Hs + c * HESS_TILE_P + VDL * (T + 1), acc1[c - c0]);
	}
}

/*
 * The tiles over rows of Z in chunks of HESS_CHUNK: a chunk (24 KB) stays
 * in L1 while each tile reads it.  The vectors of columns go in pairs (T,
 * T + 1), the last one alone where their count is odd; a pair's rows
 * c >= VDL T are cut into groups of at most HESS_RB accumulators: the
 * first group its VDL rows of vector T alone and (HESS_RB - VDL) / 2 rows
 * of both, each later one HESS_RB / 2 rows of both.  Each group's code is
 * made for the model's P.  (Tiles of one vector each, as before, left
 * tiles of 1 and 5 rows on AVX2 at P = 21 whose sums waited on the
 * multiply-add's latency: 43 cycles a row where the 66 multiply-adds need
 * 33.)  Every entry still sums its products in row order, one
 * multiply-add a row, so H is the same bit for bit.
 */
SIMD_INLINE void
SIMD_NAME(hess_tiles_p) (double *restrict Hs, const double *restrict Z, int m, const int P)
{
	for (int i0 = 0; i0 < m; i0 += HESS_CHUNK)
	{
		const double *Zc = Z + (size_t) i0 * HESS_TILE_P;
		int			mc = m - i0 < HESS_CHUNK ? m - i0 : HESS_CHUNK;

		/* group k of the pair at T: rows [HESS_G0(T, k), HESS_G0(T, k + 1)) within P */
#define HESS_FIRST	(VDL + (HESS_RB - VDL) / 2)
#define HESS_G0(T, k) \
		(VDL * (T) + ((k) == 0 ? 0 : HESS_FIRST + ((k) - 1) * (HESS_RB / 2)))
#define HESS_GROUP(T, k) \
		if (HESS_G0(T, k) < P) \
			SIMD_NAME(hess_tile) (Hs, Zc, mc, T, 1, HESS_G0(T, k), \
								  HESS_G0(T, (k) + 1) < P ? HESS_G0(T, (k) + 1) : P)
		/* the pair at T, or vector T alone (its rows in groups of HESS_RB) */
#define HESS_PAIR(T) \
		if (VDL * ((T) + 1) < P) \
		{ \
			HESS_GROUP(T, 0); \
			HESS_GROUP(T, 1); \
			HESS_GROUP(T, 2); \
			HESS_GROUP(T, 3); \
		} \
		else if (VDL * (T) < P) \
		{ \
			SIMD_NAME(hess_tile) (Hs, Zc, mc, T, 0, VDL * (T), \
								  P - VDL * (T) < HESS_RB ? P : VDL * (T) + HESS_RB); \
			if (VDL * (T) + HESS_RB < P) \
				SIMD_NAME(hess_tile) (Hs, Zc, mc, T, 0, VDL * (T) + HESS_RB, P); \
		}
		HESS_PAIR(0);
		HESS_PAIR(2);
#if SIMD_ISA != 512
		HESS_PAIR(4);
#endif
#undef HESS_PAIR
#undef HESS_GROUP
#undef HESS_G0
#undef HESS_FIRST
	}
}

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
 * The float32 Newton iterations' rows for the tiles (dml_logit_rows): per
 * row, x is read once, widened to double and turned both into the
 * gradient's term and into the tiles' row.  Z's products are the ones the
 * scalar loop made (a times the widened x), so H is the same bit for bit;
 * the gradient is summed in double in row order.
 */
SIMD_INLINE void
SIMD_NAME(logit_rows_d) (const float *restrict X, int B, const int d, size_t ld,
						 const double *restrict pr, const int *restrict label,
						 double *restrict g, double *restrict Z)
{
	VD			one = vdset1(1.0),
				gv[HESS_V];
	/* lane d of the vectors: the intercept's 1 */
	VDK			k[HESS_V];

	for (int t = 0; t < HESS_V; t++)
	{
		gv[t] = vdzero();
		k[t] = vdone_lane(d - VDL * t);
	}
	for (int i = 0; i < B; i++)
	{
		const float *x = X + (size_t) i * ld;
		VD			r = vdset1(pr[i] - label[i]),
					a = vdset1(sqrt(pr[i] * (1 - pr[i])));
		double	   *z = Z + (size_t) i * HESS_TILE_P;

#pragma GCC unroll 6
		for (int t = 0; t < HESS_V; t++)
		{
			/* past the row's d inputs (and the intercept's lane) zeros */
			VD			v = d - VDL * t >= VDL ? vdloadf_all(x + VDL * t) :
				VDL * t < d ? vdloadf(x + VDL * t, d - VDL * t) : vdzero();

			v = vdsel(k[t], one, v);
			gv[t] = vdfma(r, v, gv[t]);
			vdstore(z + VDL * t, vdmul(a, v));
		}
	}
	{
		double		gs[HESS_TILE_P];

		for (int t = 0; t < HESS_V; t++)
			vdstore(gs + VDL * t, gv[t]);
		for (int c = 0; c <= d; c++)
			g[c] += gs[c];
	}
}

/*
 * logit_rows_d made for each d = p - 1, p the sizes the tiles are made
 * for: with d a constant, whole vectors load without a mask and the
 * gradient's sums stay in registers (with d at run time, AVX2's copy
 * branched on every vector of a row, made its masks again each row, and
 * stored every sum to the stack each row)
 */
SIMD_TARGET static void
SIMD_NAME(logit_rows) (const float *restrict X, int B, int d, size_t ld,
					   const double *restrict pr, const int *restrict label,
					   double *restrict g, double *restrict Z)
{
	/* by p = d + 1, the sizes the tiles are made for */
	switch (d + 1)
	{
#define LOGIT_ROWS_CASE(P) case P: SIMD_NAME(logit_rows_d) (X, B, P - 1, ld, pr, label, g, Z); break;
			HESS_EACH_P(LOGIT_ROWS_CASE)
#undef LOGIT_ROWS_CASE
		default:
			SIMD_NAME(logit_rows_d) (X, B, d, ld, pr, label, g, Z);
	}
}
