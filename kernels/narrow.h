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
