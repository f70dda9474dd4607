/*-------------------------------------------------------------------------
 *
 * skinny.h
 *	  The skinny layers' kernels (layers.c), written once in simd.h's
 *	  operations and compiled once for each instruction set: layers.c
 *	  includes this file after each inclusion of simd.h.
 *
 * SKINNY_R rows share a forward pass's weight loads, and the weight
 * gradient sums SKINNY_WV vectors of columns at a time: each sized so
 * that the accumulators (SKINNY_OC of them for each row or vector) and
 * the operands stay in the instruction set's registers (32 on AVX-512,
 * 16 on AVX2).  Every output sums its products in the same order in both
 * copies except across a vector's lanes, whose width differs.
 *
 *-------------------------------------------------------------------------
 */
#undef SKINNY_R
#undef SKINNY_WV
#if SIMD_ISA == 512
#define SKINNY_R	2
#define SKINNY_WV	2
#else
#define SKINNY_R	1
#define SKINNY_WV	1
#endif

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
		int32_t		ki[16];

		bad |= vne_bits(m, u, k) |
			vne_any(m, SIMD_NAME(byte_quotient) (k, div, rdiv), x);
#if SIMD_ISA == 512
		_mm512_storeu_si512(ki, vtoi(k));
#else
		_mm256_storeu_si256((__m256i *) ki, vtoi(k));
#endif
		for (int i = 0; i < VL && i < left; i++)
			u8[j + i] = (uint8_t) ki[i];
	}
	return bad != 0;
}

/*
 * SKINNY_R rows' outputs: x[r] are float rows, or with R8 byte rows (R8's
 * mean and scale); p[r] the rows to ask into L1 meanwhile (or NULL); with
 * R8 and s[r] not NULL, the rows' float32 inputs are written to s[r]
 */
SIMD_INLINE void
SIMD_NAME(skinny_fwd_rows) (float *restrict out, const void *const *x, const void *const *p,
							const DmlRows8 *R8, float *const *s,
							const float *restrict W, const float *restrict bias, int C, const int OC)
{
	VF			a[SKINNY_R][SKINNY_OC];
	int			j = 0;
	int			esz = R8 ? 1 : sizeof(float);

#pragma GCC unroll 2
	for (int r = 0; r < SKINNY_R; r++)
#pragma GCC unroll 12
		for (int k = 0; k < OC; k++)
			a[r][k] = vzero();
	for (; j + VL <= C; j += VL)
	{
		VF			v[SKINNY_R];

#pragma GCC unroll 2
		for (int r = 0; r < SKINNY_R; r++)
		{
			if (R8)
			{
				v[r] = SIMD_NAME(byte_row) (x[r], R8, j, VL);
				if (s[r])
					vstore(s[r] + j, v[r]);
			}
			else
				v[r] = vload((const float *) x[r] + j);
			/* rows read in place: the next rows' lines, one each a line */
			if (p[r] && (((size_t) j * esz) & 63) == 0)
				_mm_prefetch((const char *) p[r] + (size_t) j * esz, _MM_HINT_T0);
		}
#pragma GCC unroll 12
		for (int k = 0; k < OC; k++)
		{
			VF			w = vload(W + (size_t) k * C + j);

			/* one load for every row (GCC would fold it into each FMA) */
			__asm__("" : "+v"(w));
#pragma GCC unroll 2
			for (int r = 0; r < SKINNY_R; r++)
				a[r][k] = vfma(v[r], w, a[r][k]);
		}
	}
	if (j < C)
	{
		VM			m = vmask(C - j);
		VF			v[SKINNY_R];

#pragma GCC unroll 2
		for (int r = 0; r < SKINNY_R; r++)
		{
			if (R8)
			{
				v[r] = SIMD_NAME(byte_row) (x[r], R8, j, C - j);
				if (s[r])
					vstorem(s[r] + j, m, v[r]);
			}
			else
				v[r] = vloadm(m, (const float *) x[r] + j);
		}
#pragma GCC unroll 12
		for (int k = 0; k < OC; k++)
		{
			VF			w = vloadm(m, W + (size_t) k * C + j);

#pragma GCC unroll 2
			for (int r = 0; r < SKINNY_R; r++)
				a[r][k] = vfma(v[r], w, a[r][k]);
		}
	}
#pragma GCC unroll 2
	for (int r = 0; r < SKINNY_R; r++)
#pragma GCC unroll 12
		for (int k = 0; k < OC; k++)
			out[(size_t) r * OC + k] = bias[k] + vhsum(a[r][k]);
}

/*
 * out (B,OC) = the rows (B,C) @ W (OC,C)^T + bias, OC a constant after
 * inlining: row b is X's row b, or with idx X's row idx[b], read where it
 * lies, a wide row's lines asked for SKINNY_R rows ahead (idx[B..avail)
 * are read next); with R8, R8's byte rows in X's place, and with stash
 * (B,C) their float32 inputs written there too
 */
SIMD_INLINE void
SIMD_NAME(skinny_fwd_oc) (float *out, const float *X, const DmlRows8 *R8, float *stash,
						  const int *idx, int B, int avail, const float *W, const float *bias,
						  int C, const int OC)
{
	int			b = 0;
	bool		ahead = idx != NULL && C >= 64;

	for (; b + SKINNY_R <= B; b += SKINNY_R)
	{
		const void *x[SKINNY_R],
				   *p[SKINNY_R];
		float	   *s[SKINNY_R];

		for (int r = 0; r < SKINNY_R; r++)
		{
			x[r] = SKINNY_ROW(X, R8, idx, b + r, C);
			p[r] = ahead && b + SKINNY_R + r < avail ?
				SKINNY_ROW(X, R8, idx, b + SKINNY_R + r, C) : NULL;
			s[r] = stash ? stash + (size_t) (b + r) * C : NULL;
		}
		SIMD_NAME(skinny_fwd_rows) (out + (size_t) b * OC, x, p, R8, s, W, bias, C, OC);
	}
	for (; b < B; b++)
	{
		/* a last row alone: in every slot, the other copies dropped */
		float		one[SKINNY_R * SKINNY_OC];
		const void *x[SKINNY_R],
				   *p[SKINNY_R];
		float	   *s[SKINNY_R];

		for (int r = 0; r < SKINNY_R; r++)
		{
			x[r] = SKINNY_ROW(X, R8, idx, b, C);
			p[r] = NULL;
			s[r] = stash ? stash + (size_t) b * C : NULL;
		}
		SIMD_NAME(skinny_fwd_rows) (one, x, p, R8, s, W, bias, C, OC);
		memcpy(out + (size_t) b * OC, one, sizeof(float) * OC);
	}
}

/*
 * dW (OC,C) (+)= dout (B,OC)^T inp (B,C), SKINNY_WV vectors of columns at
 * a time; with idx, inp's row b is X's row idx[b] (inp is X)
 */
SIMD_INLINE void
SIMD_NAME(skinny_wgrad_oc) (float *dW, const float *dout, const float *inp, const int *idx,
							int B, int C, bool accumulate, const int OC)
{
	for (int j = 0; j < C; j += SKINNY_WV * VL)
	{
		VM			m[SKINNY_WV];
		VF			a[SKINNY_WV][SKINNY_OC];

#pragma GCC unroll 2
		for (int t = 0; t < SKINNY_WV; t++)
		{
			m[t] = vmask(C - j - t * VL);
#pragma GCC unroll 12
			for (int k = 0; k < OC; k++)
				a[t][k] = vzero();
		}
		for (int b = 0; b < B; b++)
		{
			const float *x = inp + (size_t) (idx ? idx[b] : b) * C + j;
			const float *d = dout + (size_t) b * OC;
			VF			v[SKINNY_WV];

#pragma GCC unroll 2
			for (int t = 0; t < SKINNY_WV; t++)
				v[t] = vloadm(m[t], x + t * VL);
#pragma GCC unroll 12
			for (int k = 0; k < OC; k++)
			{
				VF			g = vset1(d[k]);

#pragma GCC unroll 2
				for (int t = 0; t < SKINNY_WV; t++)
					a[t][k] = vfma(g, v[t], a[t][k]);
			}
		}
#pragma GCC unroll 12
		for (int k = 0; k < OC; k++)
		{
			float	   *w = dW + (size_t) k * C + j;

#pragma GCC unroll 2
			for (int t = 0; t < SKINNY_WV; t++)
			{
				if (accumulate)
					a[t][k] = vadd(a[t][k], vloadm(m[t], w + t * VL));
				vstorem(w + t * VL, m[t], a[t][k]);
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
