/*-------------------------------------------------------------------------
 *
 * gemm.h
 *	  The dense layers' matrix products on AVX-512, in place of OpenBLAS's
 *	  sgemm (layers.c includes this file once, after simd.h for AVX-512,
 *	  whose vmask it uses; AVX2 machines and the one-instruction-set builds
 *	  keep sgemm).
 *
 * C (M x N, row-major) = op(A) op(B) [+ C], op(A) M x K and op(B) K x N,
 * either of them read transposed, then at the end an epilogue: a bias
 * added to each row, and ReLU, or ReLU's derivative (each value kept where
 * a matrix of the same shape is above 0, else 0).  The layers' three
 * products are its cases:
 *
 *  - forward: out = inp weight^T + bias, then ReLU (A row-major, B
 *    transposed);
 *  - weight gradient: dweight (+)= dout^T inp (A transposed);
 *  - input gradient: dinp = (dout weight) where the layer's input is above
 *    0 (neither transposed).
 *
 * Goto's scheme cut to the layers' shapes (at most a few thousand a side):
 * K in blocks of at most GEMM_KC, each block of op(B) packed GEMM_NR
 * columns at a time (GEMM_KC x 64 floats, 32 KB: it stays in L1 while
 * every GEMM_MR rows of A go over it), and a register tile of 6 rows x 64
 * columns: each k loads the 4 vectors of B once and broadcasts 6 values
 * of A (read where they lie, no packing), 24 multiply-adds to 10 loads.
 * On this project's AVX-512 Xeon a 512-bit load costs about half a
 * multiply-add's slot, so fewer loads per multiply-add is what counts:
 * OpenBLAS's kernel reached 120-145 GFLOP/s at the MLP's shapes, this one
 * 145-165 (bench/SPEED-NOTES.md).  A layer's products are summed in
 * another order than sgemm's: the results agree to float32 rounding.
 * op(B) transposed (the forward pass's weight) is packed through 16 x 16
 * transposes in registers.
 *
 * Each K block goes over all of C, and each GEMM_NR columns of op(B) are
 * packed once for all of A's rows: that holds while C (1 MB) and op(B)
 * (2 MB) stay in L2 (GEMM_MAX_C, GEMM_MAX_B), as at the MLP's shapes.
 * Larger products keep sgemm, whose blocking for caches is complete: at
 * 512 x 2048 x 2048 this kernel reached 106-112 GFLOP/s against
 * OpenBLAS's 125-140, and at 4096 x 784 x 256 115-128 against 124-132.
 *
 *-------------------------------------------------------------------------
 */
#define GEMM_MR		6
#define GEMM_NR		64
#define GEMM_KC		128
/* the largest C (M x N) and op(B) (K x N) it takes, in floats (gemm_applies) */
#define GEMM_MAX_C	(256 * 1024)
#define GEMM_MAX_B	(512 * 1024)

/* what the last K block's values go through before they are stored */
typedef struct GemmEpilogue
{
	const float *bias;			/* N values added to each row, or NULL */
	bool		relu;			/* max(x, 0): ReLU (0 for NaN, as activation_forward) */
	const float *keep;			/* M x N (ldk): x where keep > 0, else 0 */
	int			ldk;
} GemmEpilogue;

/*
 * x stored at p (lanes m) as a vector of C: plus C's values there where
 * load_c, then ep's epilogue (ep NULL: none) with bias and keep at this
 * vector's columns (NULL: none).  gemm_tile_mn's and gemm_amx.h's stores.
 */
__attribute__((target("avx512f"), always_inline)) static inline void
gemm_store_vec(float *p, __m512 x, __mmask16 m, bool load_c, const GemmEpilogue *ep,
			   const float *bias, const float *keep)
{
	if (load_c)
		x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, p));
	if (ep)
	{
		if (bias)
			x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, bias));
		if (ep->relu)
			x = _mm512_max_ps(x, _mm512_setzero_ps());
		if (keep)
		{
			__m512		kv = _mm512_maskz_loadu_ps(m, keep);

			x = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(kv, _mm512_setzero_ps(), _CMP_GT_OQ), x);
		}
	}
	_mm512_mask_storeu_ps(p, m, x);
}

/*
 * The register tile: C[0..mr) x [0..16 nv) (+)= A (mr x kc, element (i, k)
 * at a[i rsa + k csa]) times bp (kc x 64, packed), the last vector's lanes
 * masked by lastm.  load_c: add C's values (a K block after the first, or
 * accumulating); ep (NULL but on the last K block): the epilogue, its
 * pointers at this tile's first row and column.  mr and nv are constants
 * after inlining (gemm_tile's cases).
 */
__attribute__((target("avx512f"), always_inline)) static inline void
gemm_tile_mn(int kc, const float *a, long rsa, long csa, const float *bp, float *c, long ldc,
			 const int mr, const int nv, __mmask16 lastm, bool load_c,
			 const GemmEpilogue *ep, const float *bias, const float *keep)
{
	__m512		acc[GEMM_MR][4];
	const float *ar[GEMM_MR];

	for (int i = 0; i < GEMM_MR; i++)
	{
		ar[i] = a + (i < mr ? i : 0) * rsa;
		for (int v = 0; v < 4; v++)
			acc[i][v] = _mm512_setzero_ps();
	}
	for (int k = 0; k < kc; k++)
	{
		__m512		b[4];

		for (int v = 0; v < nv; v++)
			b[v] = _mm512_load_ps(bp + GEMM_NR * k + 16 * v);
		for (int i = 0; i < mr; i++)
		{
			__m512		s = _mm512_set1_ps(ar[i][k * csa]);

			for (int v = 0; v < nv; v++)
				acc[i][v] = _mm512_fmadd_ps(s, b[v], acc[i][v]);
		}
	}
	for (int i = 0; i < mr; i++)
		for (int v = 0; v < nv; v++)
			gemm_store_vec(c + i * ldc + 16 * v, acc[i][v], v == nv - 1 ? lastm : 0xffff, load_c, ep,
						   bias ? bias + 16 * v : NULL, keep ? keep + (long) i * ep->ldk + 16 * v : NULL);
}

#define GEMM_TILE(MR, NV) \
	case (MR) * 8 + (NV): \
		gemm_tile_mn(kc, a, rsa, csa, bp, c, ldc, MR, NV, lastm, load_c, ep, bias, keep); \
		break;
#define GEMM_TILES(MR) GEMM_TILE(MR, 4) GEMM_TILE(MR, 3) GEMM_TILE(MR, 2) GEMM_TILE(MR, 1)

/* gemm_tile_mn for mr (1 .. 6) rows and nv (1 .. 4) vectors */
__attribute__((target("avx512f"), noinline)) static void
gemm_tile(int kc, const float *a, long rsa, long csa, const float *bp, float *c, long ldc,
		  int mr, int nv, __mmask16 lastm, bool load_c, const GemmEpilogue *ep,
		  const float *bias, const float *keep)
{
	switch (mr * 8 + nv)
	{
			GEMM_TILES(6) GEMM_TILES(5) GEMM_TILES(4) GEMM_TILES(3) GEMM_TILES(2) GEMM_TILES(1)
	}
}

/*
 * r (16 vectors of 16 floats) transposed in registers, in place: pairs of
 * rows interleaved, then pairs of pairs, then the four groups' 128-bit
 * lanes gathered (r[k] is then column k)
 */
__attribute__((target("avx512f"), always_inline)) static inline void
gemm_transpose16(__m512 r[16])
{
	__m512		t[16];

	/* t[4q + c] holds rows 4q .. 4q + 3 */
	for (int j = 0; j < 16; j += 2)
	{
		t[j] = _mm512_unpacklo_ps(r[j], r[j + 1]);
		t[j + 1] = _mm512_unpackhi_ps(r[j], r[j + 1]);
	}
	for (int j = 0; j < 16; j += 4)
	{
		__m512d		a0 = _mm512_castps_pd(t[j]),
					a1 = _mm512_castps_pd(t[j + 1]),
					a2 = _mm512_castps_pd(t[j + 2]),
					a3 = _mm512_castps_pd(t[j + 3]);

		r[j] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
		r[j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
		r[j + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
		r[j + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
	}
	for (int c = 0; c < 4; c++)
	{
		__m512		a0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88),
					a1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xdd),
					b0 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88),
					b1 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xdd);

		t[c] = _mm512_shuffle_f32x4(a0, b0, 0x88);
		t[c + 8] = _mm512_shuffle_f32x4(a0, b0, 0xdd);
		t[c + 4] = _mm512_shuffle_f32x4(a1, b1, 0x88);
		t[c + 12] = _mm512_shuffle_f32x4(a1, b1, 0xdd);
	}
	for (int j = 0; j < 16; j++)
		r[j] = t[j];
}

/*
 * bp (kc x 64) = op(B) rows k0 .. k0 + kc, columns j0 .. j0 + nr, 0 past
 * nr.  transB: op(B)[k][j] = B[j ldb + k], 16 x 16 blocks transposed in
 * registers (the rest one value at a time); else B[k ldb + j], rows copied.
 */
__attribute__((target("avx512f"))) static void
gemm_pack_b(float *bp, const float *B, long ldb, bool transB, int k0, int kc, int j0, int nr)
{
	if (!transB)
	{
		__mmask16	m[4];

		for (int v = 0; v < 4; v++)
			m[v] = vmask(nr - 16 * v);
		for (int k = 0; k < kc; k++)
		{
			const float *s = B + (long) (k0 + k) * ldb + j0;

			for (int v = 0; v < 4; v++)
				_mm512_store_ps(bp + GEMM_NR * k + 16 * v, _mm512_maskz_loadu_ps(m[v], s + 16 * v));
		}
		return;
	}
	for (int jb = 0; jb < GEMM_NR; jb += 16)
	{
		int			kb = 0;

		if (jb + 16 <= nr)
			for (; kb + 16 <= kc; kb += 16)
			{
				__m512		r[16];

				for (int j = 0; j < 16; j++)
					r[j] = _mm512_loadu_ps(B + (long) (j0 + jb + j) * ldb + k0 + kb);
				gemm_transpose16(r);
				for (int k = 0; k < 16; k++)
					_mm512_store_ps(bp + GEMM_NR * (kb + k) + jb, r[k]);
			}
		for (; kb < kc; kb++)
			for (int j = jb; j < jb + 16; j++)
				bp[GEMM_NR * kb + j] = j < nr ? B[(long) (j0 + j) * ldb + k0 + kb] : 0.0f;
	}
}

/*
 * C (M x N, ldc) = op(A) op(B), plus C's own values where accumulate, then
 * ep (NULL: none).  transA: op(A)[i][k] = A[k lda + i], else A[i lda + k];
 * transB likewise for B.  M, N and K at least 1.
 */
__attribute__((target("avx512f"))) static void
gemm_avx512(bool transA, bool transB, int M, int N, int K, const float *A, long lda,
			const float *B, long ldb, bool accumulate, float *C, long ldc,
			const GemmEpilogue *ep)
{
	float		bp[GEMM_KC * GEMM_NR] __attribute__((aligned(64)));
	long		rsa = transA ? 1 : lda,
				csa = transA ? lda : 1;

	/* K in equal blocks of a multiple of 16 (whole transposes), at most GEMM_KC */
	int			nkb = (K + GEMM_KC - 1) / GEMM_KC,
				kstep = ((K + nkb - 1) / nkb + 15) / 16 * 16;

	for (int k0 = 0; k0 < K; k0 += kstep)
	{
		int			kc = K - k0 < kstep ? K - k0 : kstep;
		bool		load_c = k0 > 0 || accumulate;
		const GemmEpilogue *e = k0 + kc == K ? ep : NULL;

		for (int j0 = 0; j0 < N; j0 += GEMM_NR)
		{
			int			nr = N - j0 < GEMM_NR ? N - j0 : GEMM_NR,
						nv = (nr + 15) / 16;
			__mmask16	lastm = vmask(nr - 16 * (nv - 1));

			gemm_pack_b(bp, B, ldb, transB, k0, kc, j0, nr);
			for (int i0 = 0; i0 < M; i0 += GEMM_MR)
				gemm_tile(kc, A + i0 * rsa + k0 * csa, rsa, csa, bp, C + (long) i0 * ldc + j0, ldc,
						  M - i0 < GEMM_MR ? M - i0 : GEMM_MR, nv, lastm, load_c, e,
						  e && e->bias ? e->bias + j0 : NULL,
						  e && e->keep ? e->keep + (long) i0 * e->ldk + j0 : NULL);
		}
	}
}
