/*-------------------------------------------------------------------------
 *
 * skinny.h
 *	  The skinny layers' kernels (layers.c), written once in simd.h's
 *	  operations and compiled once for each instruction set: layers.c
 *	  includes this file after each inclusion of simd.h.
 *
 * Both passes hold a tile of accumulators in registers: the forward pass
 * two rows by a block of outputs (each weight vector loaded once for the
 * rows), the weight gradient SKINNY_WV vectors of columns by a block of
 * outputs (each gradient value broadcast once for the vectors).  A block
 * is every output on AVX-512 (24 of its 32 registers), at most SKINNY_OCB
 * on AVX2 (12 of 16): there the forward pass goes over a pair of rows
 * once a block, byte rows rebuilt into the stash first.  Every output
 * sums its products in the same order whatever the blocks; the two
 * copies differ across a vector's lanes, whose width differs.
 *
 *-------------------------------------------------------------------------
 */
#undef SKINNY_WV
#undef SKINNY_OCB
#define SKINNY_WV	2
#if SIMD_ISA == 512
#define SKINNY_OCB	SKINNY_OC
#else
#define SKINNY_OCB	6
#endif

/*
 * The outputs' blocks: OC outputs in the fewest blocks of at most
 * SKINNY_OCB, as even as can be (10 on AVX2: 5 and 5); constants after
 * inlining
 */
#undef SKINNY_NB
#undef SKINNY_BW
#define SKINNY_NB(OC)	(((OC) + SKINNY_OCB - 1) / SKINNY_OCB)
#define SKINNY_BW(OC)	(((OC) + SKINNY_NB(OC) - 1) / SKINNY_NB(OC))

/* k / div rebuilt without a division: Markstein's correction of k (1 / div) */
SIMD_INLINE VF
SIMD_NAME(byte_quotient) (VF k, float div, float rdiv)
{
	VF			rd = vset1(rdiv),
				q = vmul(k, rd);

	return vfma(vfnma(q, vset1(div), k), rd, q);
}

/* inputs j .. j + VL - 1 of a byte row (left of them in the row, the rest 0) */
SIMD_INLINE VF
SIMD_NAME(byte_row) (const uint8_t *x, const DmlRows8 *R8, int j, int left)
{
	VF			k;

	if (left >= VL)
		k = vbytes(x + j);
	else
	{
		uint8_t		tail[16] = {0};

		for (int i = 0; i < left; i++)
			tail[i] = x[j + i];
		k = vbytes(tail);
	}
	k = SIMD_NAME(byte_quotient) (k, R8->div, R8->rdiv);
	if (left >= VL)
		return vmul(vsub(k, vload(R8->mean + j)), vload(R8->scale + j));
	else
	{
		VM			m = vmask(left);

		return vmul(vsub(k, vloadm(m, R8->mean + j)), vloadm(m, R8->scale + j));
	}
}

/* dml_rows8_row: true when some value of v is not a byte k / div bit for bit */
SIMD_TARGET static bool
SIMD_NAME(rows8_row) (uint8_t *u8, const float *v, int C, float div)
{
	unsigned	bad = 0;
	float		rdiv = 1.0f / div;

	for (int j = 0; j < C; j += VL)
	{
		int			left = C - j;
		VM			m = vmask(left);
		VF			x = vloadm(m, v + j),
					u = vround(vmul(x, vset1(div))),
		/* max gives its second operand for a NaN: 0, and u != k flags it */
					k = vmin(vmax(u, vzero()), vset1(255.0f));
		__m128i		b;

		bad |= vne_bits(m, u, k) |
			vne_any(m, SIMD_NAME(byte_quotient) (k, div, rdiv), x);
		b = vtobytes(k);
		if (left >= VL)
			vstore_bytes(u8 + j, b);
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
 * Outputs k0 .. k0 + n - 1 of two rows, x0 and x1: float rows,
 * or with R8 byte rows (R8's mean and scale); p0 and p1 the rows to ask
 * into L1 meanwhile (or NULL); with R8 and s0, s1 not NULL the rows'
 * float32 inputs are written there
 */
SIMD_INLINE void
SIMD_NAME(skinny_fwd_rows) (float *restrict out, const void *restrict x0, const void *restrict x1,
							const void *p0, const void *p1, const DmlRows8 *R8, float *s0, float *s1,
							const float *restrict W, const float *restrict bias, int C, const int OC,
							const int k0, const int n)
{
	VF			a0[SKINNY_OCB],
				a1[SKINNY_OCB];
	int			j = 0;
	int			esz = R8 ? 1 : sizeof(float);
	const float *Wk = W + (size_t) k0 * C;

#pragma GCC unroll 12
	for (int k = 0; k < n; k++)
		a0[k] = a1[k] = vzero();
	for (; j + VL <= C; j += VL)
	{
		VF			v0,
					v1;

		if (R8)
		{
			v0 = SIMD_NAME(byte_row) (x0, R8, j, VL);
			v1 = SIMD_NAME(byte_row) (x1, R8, j, VL);
			if (s0)
			{
				vstore(s0 + j, v0);
				vstore(s1 + j, v1);
			}
		}
		else
		{
			v0 = vload((const float *) x0 + j);
			v1 = vload((const float *) x1 + j);
		}
		/* rows read in place: the next pair's lines, one each a line */
		if (p0 && (((size_t) j * esz) & 63) == 0)
		{
			_mm_prefetch((const char *) p0 + (size_t) j * esz, _MM_HINT_T0);
			_mm_prefetch((const char *) p1 + (size_t) j * esz, _MM_HINT_T0);
		}
#pragma GCC unroll 12
		for (int k = 0; k < n; k++)
		{
			VF			w = vload(Wk + (size_t) k * C + j);

			/* one load for both rows (GCC would fold it into each FMA) */
			__asm__("" : "+v"(w));
			a0[k] = vfma(v0, w, a0[k]);
			a1[k] = vfma(v1, w, a1[k]);
		}
	}
	if (j < C)
	{
		VM			m = vmask(C - j);
		VF			v0,
					v1;

		if (R8)
		{
			v0 = SIMD_NAME(byte_row) (x0, R8, j, C - j);
			v1 = SIMD_NAME(byte_row) (x1, R8, j, C - j);
			if (s0)
			{
				vstorem(s0 + j, m, v0);
				vstorem(s1 + j, m, v1);
			}
		}
		else
		{
			v0 = vloadm(m, (const float *) x0 + j);
			v1 = vloadm(m, (const float *) x1 + j);
		}
#pragma GCC unroll 12
		for (int k = 0; k < n; k++)
		{
			VF			w = vloadm(m, Wk + (size_t) k * C + j);

			a0[k] = vfma(v0, w, a0[k]);
			a1[k] = vfma(v1, w, a1[k]);
		}
	}
#pragma GCC unroll 12
	for (int k = 0; k < n; k++)
	{
		out[k0 + k] = bias[k0 + k] + vhsum(a0[k]);
		out[OC + k0 + k] = bias[k0 + k] + vhsum(a1[k]);
	}
}

/*
 * Two byte rows' float32 inputs written to s0 and s1, the next pair's
 * lines (p0, p1, or NULL) asked for meanwhile
 */
SIMD_INLINE void
SIMD_NAME(bytes_pair) (const uint8_t *x0, const uint8_t *x1, const void *p0, const void *p1,
					   const DmlRows8 *R8, float *s0, float *s1, int C)
{
	int			j = 0;

	for (; j + VL <= C; j += VL)
	{
		vstore(s0 + j, SIMD_NAME(byte_row) (x0, R8, j, VL));
		vstore(s1 + j, SIMD_NAME(byte_row) (x1, R8, j, VL));
		if (p0 && (j & 63) == 0)
		{
			_mm_prefetch((const char *) p0 + j, _MM_HINT_T0);
			_mm_prefetch((const char *) p1 + j, _MM_HINT_T0);
		}
	}
	if (j < C)
	{
		VM			m = vmask(C - j);

		vstorem(s0 + j, m, SIMD_NAME(byte_row) (x0, R8, j, C - j));
		vstorem(s1 + j, m, SIMD_NAME(byte_row) (x1, R8, j, C - j));
	}
}

/*
 * dml_rows8_gather: R8's rows idx[0..B) rebuilt into Xb (B, C) a pair at a
 * time, the lines of rows ROWS8_AHEAD further on asked for meanwhile
 * (idx[B..avail) are read next), and y at them into yb
 */
SIMD_TARGET static void
SIMD_NAME(rows8_gather) (const DmlRows8 *R8, const float *y, int C, const int *idx, int B,
						 int avail, float *Xb, float *yb)
{
	for (int b = 0; b < B; b += 2)
	{
		const uint8_t *x0 = R8->X8 + (size_t) idx[b] * C;

		for (int a = b + ROWS8_AHEAD; a < b + ROWS8_AHEAD + 2 && a < avail; a++)
		{
			const char *row = (const char *) (R8->X8 + (size_t) idx[a] * C);

			for (int off = 0; off < C; off += 64)
				_mm_prefetch(row + off, _MM_HINT_T0);
			_mm_prefetch(row + C - 1, _MM_HINT_T0);
		}
		if (b + 1 < B)
			SIMD_NAME(bytes_pair) (x0, R8->X8 + (size_t) idx[b + 1] * C, NULL, NULL, R8,
								   Xb + (size_t) b * C, Xb + (size_t) (b + 1) * C, C);
		else
		{
			/* the last row alone */
			int			j = 0;
			float	   *s = Xb + (size_t) b * C;

			for (; j + VL <= C; j += VL)
				vstore(s + j, SIMD_NAME(byte_row) (x0, R8, j, VL));
			if (j < C)
				vstorem(s + j, vmask(C - j), SIMD_NAME(byte_row) (x0, R8, j, C - j));
		}
		yb[b] = y[idx[b]];
		if (b + 1 < B)
			yb[b + 1] = y[idx[b + 1]];
	}
}

/*
 * Every output of two rows, a block of outputs at a time.  One block (AVX-
 * 512) reads the rows, rebuilding byte rows as it goes; with several
 * (AVX2), byte rows with a stash are rebuilt into it first (the
 * accumulators need the registers the rebuilding would take), and every
 * block reads the stash
 */
SIMD_INLINE void
SIMD_NAME(skinny_fwd_pair) (float *restrict out, const void *x0, const void *x1,
							const void *p0, const void *p1, const DmlRows8 *R8, float *s0, float *s1,
							const float *restrict W, const float *restrict bias, int C, const int OC)
{
	const int	bw = SKINNY_BW(OC);

	if (bw < OC && R8 && s0)
	{
		SIMD_NAME(bytes_pair) (x0, x1, p0, p1, R8, s0, s1, C);
#pragma GCC unroll 2
		for (int k0 = 0; k0 < OC; k0 += bw)
			SIMD_NAME(skinny_fwd_rows) (out, s0, s1, NULL, NULL, NULL, NULL, NULL, W, bias, C, OC,
										k0, OC - k0 < bw ? OC - k0 : bw);
		return;
	}
#pragma GCC unroll 2
	for (int k0 = 0; k0 < OC; k0 += bw)
		SIMD_NAME(skinny_fwd_rows) (out, x0, x1, k0 == 0 ? p0 : NULL, k0 == 0 ? p1 : NULL, R8,
									s0, s1, W, bias, C, OC, k0, OC - k0 < bw ? OC - k0 : bw);
}

/*
 * out (B,OC) = the rows (B,C) @ W (OC,C)^T + bias, OC a constant after
 * inlining: row b is X's row b, or with idx X's row idx[b], read where it
 * lies, a wide row's lines asked for a pair ahead (idx[B..avail) are read
 * next); with R8, R8's byte rows in X's place, and with stash (B,C) their
 * float32 inputs written there too
 */
SIMD_INLINE void
SIMD_NAME(skinny_fwd_oc) (float *out, const float *X, const DmlRows8 *R8, float *stash,
						  const int *idx, int B, int avail, const float *W, const float *bias,
						  int C, const int OC)
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
		SIMD_NAME(skinny_fwd_pair) (out + (size_t) b * OC, SKINNY_ROW(X, R8, idx, b, C),
									SKINNY_ROW(X, R8, idx, b + 1, C), p0, p1, R8,
									stash ? stash + (size_t) b * C : NULL,
									stash ? stash + (size_t) (b + 1) * C : NULL, W, bias, C, OC);
	}
	if (b < B)
	{
		float		two[2 * SKINNY_OC];
		float	   *sb = stash ? stash + (size_t) b * C : NULL;

		/* the last row alone: paired with itself, its second copy dropped */
		SIMD_NAME(skinny_fwd_pair) (two, SKINNY_ROW(X, R8, idx, b, C), SKINNY_ROW(X, R8, idx, b, C),
									NULL, NULL, R8, sb, sb, W, bias, C, OC);
		memcpy(out + (size_t) b * OC, two, sizeof(float) * OC);
	}
}

/*
 * dW (OC,C) (+)= dout (B,OC)^T inp (B,C), SKINNY_WV vectors of columns by
 * a block of outputs at a time; with idx, inp's row b is X's row idx[b]
 * (inp is X)
 */
SIMD_INLINE void
SIMD_NAME(skinny_wgrad_oc) (float *dW, const float *dout, const float *inp, const int *idx,
							int B, int C, bool accumulate, const int OC)
{
	const int	bw = SKINNY_BW(OC);

	for (int j = 0; j < C; j += SKINNY_WV * VL)
	{
		VM			m0 = vmask(C - j),
					m1 = vmask(C - j - VL);

#pragma GCC unroll 2
		for (int k0 = 0; k0 < OC; k0 += bw)
		{
			const int	n = OC - k0 < bw ? OC - k0 : bw;
			VF			a0[SKINNY_OCB],
						a1[SKINNY_OCB];

#pragma GCC unroll 12
			for (int k = 0; k < n; k++)
				a0[k] = a1[k] = vzero();
			for (int b = 0; b < B; b++)
			{
				const float *x = inp + (size_t) (idx ? idx[b] : b) * C + j;
				const float *d = dout + (size_t) b * OC + k0;
				VF			v0 = vloadm(m0, x),
							v1 = vloadm(m1, x + VL);

#pragma GCC unroll 12
				for (int k = 0; k < n; k++)
				{
					VF			g = vset1(d[k]);

					a0[k] = vfma(g, v0, a0[k]);
					a1[k] = vfma(g, v1, a1[k]);
				}
			}
#pragma GCC unroll 12
			for (int k = 0; k < n; k++)
			{
				float	   *w = dW + (size_t) (k0 + k) * C + j;

				if (accumulate)
				{
					a0[k] = vadd(a0[k], vloadm(m0, w));
					a1[k] = vadd(a1[k], vloadm(m1, w + VL));
				}
				vstorem(w, m0, a0[k]);
				vstorem(w + VL, m1, a1[k]);
			}
		}
	}
}

SIMD_TARGET static void
SIMD_NAME(skinny_forward) (float *out, const float *X, const DmlRows8 *R8, float *stash,
						   const int *idx, int B, int avail, const float *W, const float *bias,
						   int C, int OC)
{
#define FWD(n) SIMD_NAME(skinny_fwd_oc) (out, X, R8, stash, idx, B, avail, W, bias, C, n)
	if (R8)
		SKINNY_CASES(FWD)
	else
		SKINNY_CASES(FWD)
#undef FWD
}

SIMD_TARGET static void
SIMD_NAME(skinny_wgrad) (float *dW, const float *dout, const float *inp, const int *idx,
						 int B, int C, bool accumulate, int OC)
{
#define WG(n) SIMD_NAME(skinny_wgrad_oc) (dW, dout, inp, idx, B, C, accumulate, n)
	SKINNY_CASES(WG);
#undef WG
}
