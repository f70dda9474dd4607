/*-------------------------------------------------------------------------
 *
 * panel.h
 *	  The float32 Newton iterations' kernels over row panels (logit.c's
 *	  dml_panel_*), written once in simd.h's operations and compiled once
 *	  for each instruction set: logit.c includes this file after each
 *	  inclusion of simd.h.
 *
 * A panel is a group of DML_PANEL (16) consecutive rows stored a feature
 * at a time: feature c of the group's row l at c * 16 + l.  Each of the
 * 16 rows is a lane, and every output a lane sums is its own: the
 * gradient's and the Hessian's entries sum the products of lane l's rows
 * (rows 16 g + l) in row order, one rounding a product, in float32 over
 * the rows between two flushes (dml_panel_flush, the caller's chunk of
 * 2,048 rows: 128 products a lane, as dml_logit_stats32's chunks of 128
 * rows), then in double.  AVX-512 holds a panel's lanes in one vector,
 * AVX2 in two halves taken one after the other: the same operations on
 * the same lanes, so both give the same bits.
 *
 * Where dml_logit_stats32 turns each row into [x, 1] scaled by
 * sqrt(w), w = p (1 - p), and sums the outer products of those, a panel
 * multiplies one side alone by w: H's entry (i, k) sums w x_i x_k over
 * the lanes as (w x_i) x_k, with no square root, the rows' x_k read
 * where they lie and only [w x, w, r] written (PANEL_SUB panels at a
 * time: 11 KB for 128 rows at 20 inputs).  The gradient is one more row
 * of the triangle, r [x, 1].  Its register blocks are RB rows by CB
 * columns of the triangle (6 x 4 on AVX-512, 2 x 4 on AVX2), each entry
 * an accumulator of a vector's lanes: per panel, RB + CB loads feed up to
 * RB CB multiply-adds, p (p + 1) / 2 + p in all for p parameters (252 at
 * p = 21: 15.75 a row, where the row tiles take 26 and the gradient's
 * double products more).
 *
 *-------------------------------------------------------------------------
 */
#undef PANEL_RB
#undef PANEL_CB
#define PANEL_RB	(SIMD_ISA == 512 ? 6 : 2)
#define PANEL_CB	4
#undef PANEL_HALVES
#define PANEL_HALVES	(DML_PANEL / VL)

/*
 * out (16 g) = v[d] + sum_c v[c] x_c over G panels of d inputs: the
 * intercept first, then each input's multiply-add in order, in float32,
 * each lane its row's
 */
SIMD_TARGET static void
SIMD_NAME(panel_dot) (float *restrict out, const float *restrict Xp, int64_t G, int d,
					  const float *restrict v)
{
	for (int64_t g = 0; g < G; g++)
	{
		const float *x = Xp + (size_t) g * d * DML_PANEL;

		for (int h = 0; h < PANEL_HALVES; h++)
		{
			VF			acc = vset1(v[d]);

			for (int c = 0; c < d; c++)
				acc = vfma(vset1(v[c]), vload(x + c * DML_PANEL + h * VL), acc);
			vstore(out + g * DML_PANEL + h * VL, acc);
		}
	}
}

/* H's entry (i, k), k <= i, among the lanes' accumulators; the gradient's after */
#undef PANEL_E
#define PANEL_E(i, k)	((i) * ((i) + 1) / 2 + (k))

/*
 * One register block: rows [i0, i0 + RB) and columns [k0, k0 + CB) of the
 * lanes' triangle, the entries (i, k) with k <= i, k < P among them, over
 * the G panels of W (P + 1 vectors a panel: w x, w, and the residual r)
 * and Xp (d inputs a panel, the intercept's 1 after them), lanes [h VL,
 * (h + 1) VL).  Rows 0 .. d are H's; row P, r [x, 1], the gradient's.
 */
SIMD_INLINE void
SIMD_NAME(panel_block) (float *restrict lanes, const float *restrict W, const float *restrict Xp,
						int G, int h, const int P, const int i0, const int k0,
						const char *next, int nlines)
{
	const int	d = P - 1;
	VF			acc[PANEL_RB][PANEL_CB];

	/*
	 * each block's accumulators from lanes and back to it: without this
	 * barrier GCC kept every block's in one stack copy of the lanes and
	 * ran the multiply-adds on that memory
	 */
	__asm__ volatile ("":::"memory");
#define PANEL_IN(r, c)	(i0 + (r) <= P && k0 + (c) <= i0 + (r) && k0 + (c) < P)
#pragma GCC unroll 8
	for (int r = 0; r < PANEL_RB; r++)
#pragma GCC unroll 8
		for (int c = 0; c < PANEL_CB; c++)
			if (PANEL_IN(r, c))
				acc[r][c] = vload(lanes + PANEL_E(i0 + r, k0 + c) * DML_PANEL + h * VL);
	for (int g = 0; g < G; g++)
	{
		const float *w = W + (size_t) g * (P + 1) * DML_PANEL + h * VL;
		const float *x = Xp + (size_t) g * d * DML_PANEL + h * VL;
		VF			xk[PANEL_CB];

		/* a line of the next run a panel (see panel_stats_p) */
		if (g < nlines)
			__builtin_prefetch(next + (size_t) g * 64, 0, 3);
#pragma GCC unroll 8
		for (int c = 0; c < PANEL_CB; c++)
			if (k0 + c < d)
				xk[c] = vload(x + (k0 + c) * DML_PANEL);
			else
				xk[c] = vset1(1.0f);
#pragma GCC unroll 8
		for (int r = 0; r < PANEL_RB; r++)
			if (i0 + r <= P)
			{
				VF			wi = vload(w + (i0 + r) * DML_PANEL);

#pragma GCC unroll 8
				for (int c = 0; c < PANEL_CB; c++)
					if (PANEL_IN(r, c))
						acc[r][c] = vfma(wi, xk[c], acc[r][c]);
			}
	}
#pragma GCC unroll 8
	for (int r = 0; r < PANEL_RB; r++)
#pragma GCC unroll 8
		for (int c = 0; c < PANEL_CB; c++)
			if (PANEL_IN(r, c))
				vstore(lanes + PANEL_E(i0 + r, k0 + c) * DML_PANEL + h * VL, acc[r][c]);
#undef PANEL_IN
}

/*
 * The statistics of G panels (PANEL_SUB at a time in W) with their
 * probabilities pr and labels: lanes += the Hessian's and the gradient's
 * lane sums, for P = d + 1 parameters known when compiled.
 *
 * next (or NULL): the gnext panels the caller reads next, whose lines are
 * asked for into L1 one at a time, one for each panel a register block
 * takes (136 lines over 8 panels at P = 21, of the 160 that 8 panels
 * hold; the hardware's prefetcher finds the rest after them), while this
 * call computes.  A pass over rows in memory otherwise reads each run's
 * rows when it starts (its logits, dml_panel_dot), at the rate one core's
 * loads in flight allow, while the bus is idle through the statistics: in
 * a 2-worker Newton pass over 500,000 rows a rank, the logits' reads took
 * 2.8 ms of 8.5 (time stamps around each part, a /tmp build).  A panel's
 * 20 lines at once, in the loop that makes W, took that time off the
 * logits and put as much on the blocks: the loads wait for free line
 * buffers either way, and spread out they find them.
 */
SIMD_INLINE void
SIMD_NAME(panel_stats_p) (const float *restrict Xp, int G, const double *restrict pr,
						  const int *restrict label, float *restrict lanes, const float *next,
						  int gnext, const int P)
{
	const int	d = P - 1;
	float		W[PANEL_SUB * (DML_HESS_TILE_P + 1) * DML_PANEL] __attribute__((aligned(64)));
	float		aw[PANEL_SUB * DML_PANEL] __attribute__((aligned(64)));
	float		ar[PANEL_SUB * DML_PANEL] __attribute__((aligned(64)));

	for (int g0 = 0; g0 < G; g0 += PANEL_SUB)
	{
		int			sg = G - g0 < PANEL_SUB ? G - g0 : PANEL_SUB;
		const float *X = Xp + (size_t) g0 * d * DML_PANEL;
		const double *p = pr + (size_t) g0 * DML_PANEL;
		const int  *y = label + (size_t) g0 * DML_PANEL;

		/* each row's weight p (1 - p) and residual p - y, rounded to float */
		for (int i = 0; i < sg * DML_PANEL; i++)
		{
			aw[i] = (float) (p[i] * (1 - p[i]));
			ar[i] = (float) (p[i] - y[i]);
		}
		for (int h = 0; h < PANEL_HALVES; h++)
		{
			/* W = [w x, w, r] a panel at a time */
			for (int g = 0; g < sg; g++)
			{
				float	   *wg = W + (size_t) g * (P + 1) * DML_PANEL + h * VL;
				const float *xg = X + (size_t) g * d * DML_PANEL + h * VL;
				VF			a = vload(aw + g * DML_PANEL + h * VL);

				for (int c = 0; c < d; c++)
					vstore(wg + c * DML_PANEL, vmul(a, vload(xg + c * DML_PANEL)));
				vstore(wg + d * DML_PANEL, a);
				vstore(wg + P * DML_PANEL, vload(ar + g * DML_PANEL + h * VL));
			}
			/*
			 * the register blocks of the lanes' triangle, row blocks in
			 * order; the lines of next's panels g0 .. g0 + sg - 1 (where
			 * it has them), sg more for each block, on the first half
			 */
			const char *nl = (const char *) (next + (size_t) g0 * d * DML_PANEL);
			int			left = 0;

			if (next && h == 0 && g0 < gnext)
				left = (int) (((size_t) (gnext - g0 < sg ? gnext - g0 : sg) * d * DML_PANEL *
							   sizeof(float) + 63) / 64);
#define PANEL_BLOCK(i0, k0) \
			if ((i0) <= P && (k0) <= (i0) + PANEL_RB - 1 && (k0) < P) \
			{ \
				SIMD_NAME(panel_block) (lanes, W, X, sg, h, P, i0, k0, nl, left); \
				nl += (size_t) sg * 64; \
				left -= sg; \
			}
#define PANEL_ROW(i0) \
			PANEL_BLOCK(i0, 0); PANEL_BLOCK(i0, PANEL_CB); \
			PANEL_BLOCK(i0, 2 * PANEL_CB); PANEL_BLOCK(i0, 3 * PANEL_CB); \
			PANEL_BLOCK(i0, 4 * PANEL_CB); PANEL_BLOCK(i0, 5 * PANEL_CB)
			PANEL_ROW(0);
			PANEL_ROW(PANEL_RB);
			PANEL_ROW(2 * PANEL_RB);
			PANEL_ROW(3 * PANEL_RB);
			PANEL_ROW(4 * PANEL_RB);
			PANEL_ROW(5 * PANEL_RB);
			PANEL_ROW(6 * PANEL_RB);
			PANEL_ROW(7 * PANEL_RB);
			PANEL_ROW(8 * PANEL_RB);
			PANEL_ROW(9 * PANEL_RB);
			PANEL_ROW(10 * PANEL_RB);
			PANEL_ROW(11 * PANEL_RB);
			PANEL_ROW(12 * PANEL_RB);
#undef PANEL_ROW
#undef PANEL_BLOCK
		}
	}
}

SIMD_TARGET static void
SIMD_NAME(panel_stats) (const float *restrict Xp, int G, int d, const double *restrict pr,
						const int *restrict label, float *restrict lanes, const float *next,
						int gnext)
{
	switch (d + 1)
	{
#define PANEL_CASE(P) case P: SIMD_NAME(panel_stats_p) (Xp, G, pr, label, lanes, next, gnext, P); break;
			HESS_EACH_P(PANEL_CASE)
#undef PANEL_CASE
		default:
			SIMD_NAME(panel_stats_p) (Xp, G, pr, label, lanes, next, gnext, DML_HESS_TILE_P);
	}
}
