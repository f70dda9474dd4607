/*-------------------------------------------------------------------------
 *
 * hess.h
 *	  The Hessian's register tiles and the Newton rows' kernel (logit.c),
 *	  written once in simd.h's double operations and compiled once for each
 *	  instruction set: logit.c includes this file after each inclusion of
 *	  simd.h.
 *
 * A tile is VDL columns of H (8 on AVX-512, 4 on AVX2) and up to HESS_RB
 * of its rows, each row's part an accumulator (24 of the 32 registers on
 * AVX-512, 12 of the 16 on AVX2).  Every entry sums its products z_c z_k
 * with one fused multiply-add a row, in row order, so both copies give H
 * bit for bit; so does the rows' kernel, whose gradient lanes each sum
 * their rows in order.
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

/* rows [c0, c0 + n) of tile T's columns VDL T .. VDL T + VDL - 1 */
SIMD_INLINE void
SIMD_NAME(hess_tile) (double *restrict Hs, const double *restrict Z, int m, const int T,
					  const int c0, const int n)
{
	VD			acc[HESS_RB];

#pragma GCC unroll 24
	for (int c = 0; c < n; c++)
		acc[c] = vdload(Hs + (c0 + c) * HESS_TILE_P + VDL * T);
	for (int i = 0; i < m; i++)
	{
		const double *z = Z + (size_t) i * HESS_TILE_P;
		VD			zk = vdload(z + VDL * T);

#pragma GCC unroll 24
		for (int c = 0; c < n; c++)
			acc[c] = vdfma(vdset1(z[c0 + c]), zk, acc[c]);
	}
#pragma GCC unroll 24
	for (int c = 0; c < n; c++)
		vdstore(Hs + (c0 + c) * HESS_TILE_P + VDL * T, acc[c]);
}

/*
 * The tiles over rows of Z in chunks of HESS_CHUNK: a chunk (24 KB) stays
 * in L1 while each tile reads it.  Only the rows c >= VDL T of tile T are
 * summed, each tile's code made for the model's P.
 */
SIMD_INLINE void
SIMD_NAME(hess_tiles_p) (double *restrict Hs, const double *restrict Z, int m, const int P)
{
	for (int i0 = 0; i0 < m; i0 += HESS_CHUNK)
	{
		const double *Zc = Z + (size_t) i0 * HESS_TILE_P;
		int			mc = m - i0 < HESS_CHUNK ? m - i0 : HESS_CHUNK;

		/* tile T's rows VDL T .. P - 1, in blocks of HESS_RB (constants after inlining) */
#define HESS_T(T) \
		if (VDL * (T) < P) \
		{ \
			SIMD_NAME(hess_tile) (Hs, Zc, mc, T, VDL * (T), \
								  P - VDL * (T) < HESS_RB ? P - VDL * (T) : HESS_RB); \
			if (VDL * (T) + HESS_RB < P) \
				SIMD_NAME(hess_tile) (Hs, Zc, mc, T, VDL * (T) + HESS_RB, \
									  P - VDL * (T) - HESS_RB); \
		}
		HESS_T(0);
		HESS_T(1);
		HESS_T(2);
#if SIMD_ISA != 512
		HESS_T(3);
		HESS_T(4);
		HESS_T(5);
#endif
#undef HESS_T
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
