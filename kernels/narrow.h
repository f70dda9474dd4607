/*-------------------------------------------------------------------------
 *
 * narrow.h
 *	  The narrow rows' kernels (net.c), written once in simd.h's operations
 *	  and compiled once for each instruction set: net.c includes this file
 *	  after each inclusion of simd.h.  A row of C <= NARROW_C inputs is
 *	  NARROW_V vectors; the backward pass keeps NARROW_S sets of
 *	  accumulators, NARROW_S x NARROW_V registers in all.
 *
 *-------------------------------------------------------------------------
 */
#undef NARROW_V
#undef NARROW_S
#define NARROW_V	(NARROW_C / VL)
#define NARROW_S	(SIMD_ISA == 512 ? 4 : 2)

/* z[b] += X[b] . w over B rows of C <= NARROW_C inputs */
SIMD_TARGET static void
SIMD_NAME(narrow_forward) (float *z, const float *X, const float *w, int B, int C)
{
	int			nv = (C + VL - 1) / VL;
	VM			m[NARROW_V];
	VF			wv[NARROW_V];
	int			b = 0;

	for (int v = 0; v < NARROW_V; v++)
	{
		m[v] = vmask(C - v * VL);
		wv[v] = vloadm(m[v], w + v * VL);
	}
	for (; b + VL <= B; b += VL)
	{
		VF			p[VL];

#pragma GCC unroll 16
		for (int i = 0; i < VL; i++)
		{
			const float *x = X + (size_t) (b + i) * C;

			p[i] = vmul(vloadm(m[0], x), wv[0]);
#pragma GCC unroll 4
			for (int v = 1; v < NARROW_V; v++)
				if (v < nv)
					p[i] = vfma(vloadm(m[v], x + v * VL), wv[v], p[i]);
		}
		vstore(z + b, vadd(vload(z + b), vsum_rows(p)));
	}
	for (; b < B; b++)
	{
		const float *x = X + (size_t) b * C;
		VF			p = vmul(vloadm(m[0], x), wv[0]);

#pragma GCC unroll 4
		for (int v = 1; v < NARROW_V; v++)
			if (v < nv)
				p = vfma(vloadm(m[v], x + v * VL), wv[v], p);
		z[b] += vhsum(p);
	}
}

/* acc[v] += rb x's vector v, for the row's nv vectors */
SIMD_INLINE void
SIMD_NAME(narrow_row) (VF *acc, const VM *m, const float *x, float rb, int nv)
{
	VF			rv = vset1(rb);

#pragma GCC unroll 4
	for (int v = 0; v < NARROW_V; v++)
		if (v < nv)
			acc[v] = vfma(rv, vloadm(m[v], x + v * VL), acc[v]);
}

/* g += X^T r over B rows of C <= NARROW_C inputs */
SIMD_TARGET static void
SIMD_NAME(narrow_backward) (float *g, const float *X, const float *r, int B, int C)
{
	int			nv = (C + VL - 1) / VL;
	VM			m[NARROW_V];
	VF			a[NARROW_S][NARROW_V];
	int			b0 = 0;

#pragma GCC unroll 4
	for (int v = 0; v < NARROW_V; v++)
	{
		m[v] = vmask(C - v * VL);
#pragma GCC unroll 4
		for (int k = 0; k < NARROW_S; k++)
			a[k][v] = vzero();
	}
	/*
	 * row b into set b % NARROW_S, NARROW_S rows a step, every index a
	 * constant (the sets stay in registers)
	 */
	for (; b0 + NARROW_S <= B; b0 += NARROW_S)
#pragma GCC unroll 4
		for (int k = 0; k < NARROW_S; k++)
			SIMD_NAME(narrow_row) (a[k], m, X + (size_t) (b0 + k) * C, r[b0 + k], nv);
#pragma GCC unroll 4
	for (int k = 0; k < NARROW_S - 1; k++)
		if (b0 + k < B)
			SIMD_NAME(narrow_row) (a[k], m, X + (size_t) (b0 + k) * C, r[b0 + k], nv);
#pragma GCC unroll 4
	for (int v = 0; v < NARROW_V; v++)
		if (v < nv)
		{
			VF			s;

			/* (a0 + a1) + (a2 + a3) on AVX-512, a0 + a1 on AVX2 */
			if (NARROW_S == 4)
				s = vadd(vadd(a[0][v], a[1][v]), vadd(a[2 % NARROW_S][v], a[3 % NARROW_S][v]));
			else
				s = vadd(a[0][v], a[1][v]);
			vstorem(g + v * VL, m[v], vadd(vloadm(m[v], g + v * VL), s));
		}
}

/*
 * The tiled rows' kernels (the block shuffle's blocks stored a feature at
 * a time, kernels.h's DmlTileRun).  TILE_LOAD: lanes m of a vector at p,
 * or all of them (a plain load) where full
 */
#undef TILE_LOAD
#define TILE_LOAD(full, m, p)	((full) ? vload(p) : vloadm(m, p))

/* a vector of rows' x . w at t (feature j at t + j ld): every lane, or lanes m */
SIMD_INLINE VF
SIMD_NAME(tile_dot) (const float *t, int ld, const float *w, int C, bool full, VM m)
{
	VF			s0 = vmul(TILE_LOAD(full, m, t), vset1(w[0])),
				s1 = vzero();
	int			j = 1;

	for (; j + 1 < C; j += 2)
	{
		s1 = vfma(TILE_LOAD(full, m, t + (size_t) j * ld), vset1(w[j]), s1);
		s0 = vfma(TILE_LOAD(full, m, t + (size_t) (j + 1) * ld), vset1(w[j + 1]), s0);
	}
	if (j < C)
		s1 = vfma(TILE_LOAD(full, m, t + (size_t) j * ld), vset1(w[j]), s1);
	return vadd(s0, s1);
}

/*
 * Tiled rows (the block shuffle's blocks stored a feature at a time:
 * feature j of a run's row r at T[j * ld + r], kernels.h's DmlTileRun).
 * z[r] += x_r . w over the runs' rows (z in the runs' order) of C <=
 * NARROW_C inputs, VL rows a vector: the features in two alternating sums
 * (even and odd j), added at the end.
 */
SIMD_TARGET static void
SIMD_NAME(tile_forward) (float *z, const DmlTileRun *runs, int nruns, const float *w, int C)
{
	for (int k = 0; k < nruns; k++)
	{
		const float *T = runs[k].T;
		int			ld = runs[k].ld,
					L = runs[k].len,
					r = 0;

		for (; r + VL <= L; r += VL)
			vstore(z + r, vadd(vload(z + r), SIMD_NAME(tile_dot) (T + r, ld, w, C, true, VM_ALL)));
		if (r < L)
		{
			VM			m = vmask(L - r);

			vstorem(z + r, m, vadd(vloadm(m, z + r), SIMD_NAME(tile_dot) (T + r, ld, w, C, false, m)));
		}
		z += L;
	}
}

/*
 * Features a set of the tiled backward pass keeps in registers: a vector
 * each, beside the residuals' and a row's
 */
#undef TILE_SET
#define TILE_SET	(SIMD_ISA == 512 ? 16 : 10)

/* a[j] += a vector of rows' residuals times their feature j, for j < cn */
SIMD_INLINE void
SIMD_NAME(tile_acc) (VF *a, const float *t, int ld, const float *res, int cn, bool full, VM m)
{
	VF			rv = TILE_LOAD(full, m, res);

#pragma GCC unroll 16
	for (int j = 0; j < TILE_SET; j++)
		if (j < cn)
			a[j] = vfma(rv, TILE_LOAD(full, m, t + (size_t) j * ld), a[j]);
}

/*
 * g[j] = sum over the runs' rows of res[r] x_r's feature j, for j < C:
 * the products in the lanes of a vector (a row's lane its place in its
 * run's vectors, in the runs' order), the lanes added at the end.  The
 * features in sets of at most TILE_SET, each set's sums in registers over
 * every run.
 */
SIMD_TARGET static void
SIMD_NAME(tile_backward) (float *g, const DmlTileRun *runs, int nruns, const float *res, int C)
{
	int			nsets = (C + TILE_SET - 1) / TILE_SET,
				per = (C + nsets - 1) / nsets;

	for (int j0 = 0; j0 < C; j0 += per)
	{
		int			cn = C - j0 < per ? C - j0 : per;
		const float *rp = res;
		VF			a[TILE_SET];

#pragma GCC unroll 16
		for (int j = 0; j < TILE_SET; j++)
			a[j] = vzero();
		for (int k = 0; k < nruns; k++)
		{
			const float *T = runs[k].T + (size_t) j0 * runs[k].ld;
			int			ld = runs[k].ld,
						L = runs[k].len,
						r = 0;

			for (; r + VL <= L; r += VL)
				SIMD_NAME(tile_acc) (a, T + r, ld, rp + r, cn, true, VM_ALL);
			if (r < L)
				SIMD_NAME(tile_acc) (a, T + r, ld, rp + r, cn, false, vmask(L - r));
			rp += L;
		}
#pragma GCC unroll 16
		for (int j = 0; j < TILE_SET; j++)
			if (j < cn)
				g[j0 + j] = vhsum(a[j]);
	}
}
