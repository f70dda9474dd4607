/*-------------------------------------------------------------------------
 *
 * dense_rows.h
 *	  A model's hidden layers at inference (layers.c's dml_dense_rows),
 *	  written once in simd.h's operations and compiled once for each
 *	  instruction set: layers.c includes this file after each inclusion of
 *	  simd.h.
 *
 * out (B, OC) = act(inp (B, C) W' + bias) with the weights transposed and
 * padded once a call (dml_dense_rows_weights: WT (C + 1, ldw), its last
 * row the bias, the columns past OC zero).  A register block is DR_RB rows
 * by DR_NV vectors of outputs (6 x 4 on AVX-512, 24 of its 32 registers; 6
 * x 2 on AVX2, 12 of 16): per input, DR_NV loads of WT's row and DR_RB
 * broadcasts of the rows' input feed DR_RB DR_NV multiply-adds.  Nothing
 * is packed: WT's block of columns (C x 64 floats) stays in L1 while the
 * rows go by, and the rows' inputs are read where they lie.  The bias
 * starts each output's sum and the inputs' products are added in input
 * order, one rounding each (fused multiply-adds); ReLU is applied in the
 * registers before the store.  Each output's sum is the same whatever the
 * block, the row's place in the batch or the instruction set: a row's
 * outputs do not depend on the other rows.
 *
 *-------------------------------------------------------------------------
 */
#undef DR_RB
#undef DR_NV
#define DR_RB	6
#if SIMD_ISA == 512
#define DR_NV	4
#else
#define DR_NV	2
#endif

/* rows [0, R) by vectors [0, V) of the outputs from column j0 */
SIMD_INLINE void
SIMD_NAME(dense_rows_block) (float *restrict out, int ldo, const float *restrict inp, int ldi,
							 const float *restrict WT, int ldw, int C, int j0, int OC, bool relu,
							 const int R, const int V)
{
	VF			acc[DR_RB][DR_NV];

#pragma GCC unroll 8
	for (int v = 0; v < V; v++)
	{
		VF			b = vload(WT + (size_t) C * ldw + j0 + v * VL);

#pragma GCC unroll 8
		for (int r = 0; r < R; r++)
			acc[r][v] = b;
	}
	for (int c = 0; c < C; c++)
	{
		const float *w = WT + (size_t) c * ldw + j0;
		VF			wv[DR_NV];

#pragma GCC unroll 8
		for (int v = 0; v < V; v++)
			wv[v] = vload(w + v * VL);
#pragma GCC unroll 8
		for (int r = 0; r < R; r++)
		{
			VF			x = vset1(inp[(size_t) r * ldi + c]);

#pragma GCC unroll 8
			for (int v = 0; v < V; v++)
				acc[r][v] = vfma(x, wv[v], acc[r][v]);
		}
	}
#pragma GCC unroll 8
	for (int r = 0; r < R; r++)
#pragma GCC unroll 8
		for (int v = 0; v < V; v++)
		{
			int			j = j0 + v * VL;
			VF			a = relu ? vmax(acc[r][v], vzero()) : acc[r][v];

			if (j + VL <= OC)
				vstore(out + (size_t) r * ldo + j, a);
			else
				vstorem(out + (size_t) r * ldo + j, vmask(OC - j), a);
		}
}

SIMD_TARGET static void
SIMD_NAME(dense_rows) (float *restrict out, int ldo, const float *restrict inp, int ldi,
					   const float *restrict WT, int ldw, int B, int C, int OC, bool relu)
{
	for (int j0 = 0; j0 < OC; j0 += DR_NV * VL)
	{
		int			V = (OC - j0 + VL - 1) / VL;

		if (V > DR_NV)
			V = DR_NV;
		for (int r0 = 0; r0 < B; r0 += DR_RB)
		{
			int			R = B - r0 < DR_RB ? B - r0 : DR_RB;
			float	   *o = out + (size_t) r0 * ldo;
			const float *x = inp + (size_t) r0 * ldi;

			/* each (rows, vectors) its own code, the loops above unrolled */
#define DR_CALL(RR, VV) \
			SIMD_NAME(dense_rows_block) (o, ldo, x, ldi, WT, ldw, C, j0, OC, relu, RR, VV)
#define DR_ROWS(VV) \
			switch (R) \
			{ \
				case 1: DR_CALL(1, VV); break; case 2: DR_CALL(2, VV); break; \
				case 3: DR_CALL(3, VV); break; case 4: DR_CALL(4, VV); break; \
				case 5: DR_CALL(5, VV); break; default: DR_CALL(6, VV); break; \
			}
#if SIMD_ISA == 512
			switch (V)
			{
				case 1: DR_ROWS(1); break;
				case 2: DR_ROWS(2); break;
				case 3: DR_ROWS(3); break;
				default: DR_ROWS(4); break;
			}
#else
			if (V == 1)
				DR_ROWS(1)
			else
				DR_ROWS(2)
#endif
#undef DR_ROWS
#undef DR_CALL
		}
	}
}
