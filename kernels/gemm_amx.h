/*-------------------------------------------------------------------------
 *
 * gemm_amx.h
 *	  gemm.h's products on AMX tiles, where the CPU has AMX-BF16 and the
 *	  kernel lets this process use them (layers.c includes this file once,
 *	  after gemm.h, whose GemmEpilogue it takes; dml_set_amx turns it on,
 *	  as dml-worker does).
 *
 * C (M x N) = op(A) op(B) [+ C], then the epilogue, as gemm_avx512, to
 * float32 rounding: each float32 x is split into three bfloat16, x = h + m
 * + l exactly (truncation: h is x with its low 16 bits 0, m the same of
 * x - h, l of what is left, which has at most 8 significant bits), and
 * a b = Σ over the six products whose parts' orders add up to at most
 * 2 (hh, hm, mh, hl, mm, lh), each exact in float32 and summed in float32
 * by the tiles (TDPBF16PS).  The three left out (ml, lm, ll) are below
 * 2^-20 of |a b| together at worst (|m| < 2^-7 |a|, |l| < 2^-14 |a|),
 * and about 2^-24 in the mean, a float32 product's own rounding: in the
 * unit tests the worst errors stay within 2x gemm_avx512's.
 * On this project's Xeon (family 6 model 167) TDPBF16PS ran 2.3 TFLOP/s
 * of bfloat16 on one core, so the six products alone (packs reused) ran
 * 300-460 GFLOP/s of float32 at the MLP's shapes, and with the packing
 * 210-240 against gemm_avx512's 150-160 (1.4-1.6x); at 37 x 45 x 29,
 * half its rate (layers.c's amx_applies).
 *
 * Both operands are packed (and split) into tiles first: op(A) in panels
 * of at most 256 rows, op(B) 32 columns at a time, each k block of 32 as
 * 16 pairs (k, k + 16), the pairing TDPBF16PS sums in one lane.  The
 * register blocking is 2 x 2 tiles of C (32 x 32 floats) over 4 tile
 * registers of A and B parts.  The packing is the vector units' share;
 * at the MLP's shapes it took about as long as the tile products.
 * Denormal parts count as 0 on AMX: a float32 below about 2^-110 loses
 * its low parts; an infinity's parts make NaN (inf - inf).
 *
 *-------------------------------------------------------------------------
 */
#define AMX_TILE_BYTES	1024
/* a tile's bfloat16s, and a k block's three part tiles' (h, m, l, in that order) */
#define AMX_TILE_ELEMS	(AMX_TILE_BYTES / 2)
#define AMX_PARTS_ELEMS	(3 * AMX_TILE_ELEMS)
#define AMX_PART_M		AMX_TILE_ELEMS			/* where the m and l parts' tiles start */
#define AMX_PART_L		(2 * AMX_TILE_ELEMS)
#define AMX_PANEL_ROWS	256
#define AMX_MAX_K		2048

typedef struct AmxCfg
{
	uint8_t		palette;
	uint8_t		start_row;
	uint8_t		reserved[14];
	uint16_t	colsb[16];
	uint8_t		rows[16];
} __attribute__((packed)) AmxCfg;

/*
 * x (16 floats) split three ways by truncation, h + m + l = x exactly (each
 * part's low 16 bits 0: a bfloat16 in the high half of its lane)
 */
__attribute__((target("avx512f"), always_inline)) static inline void
amx_split3(__m512 x, __m512i *h, __m512i *m, __m512i *l)
{
	const __m512i hi = _mm512_set1_epi32((int) 0xffff0000);
	__m512i		xi = _mm512_castps_si512(x),
				hb = _mm512_and_si512(xi, hi);
	__m512		r = _mm512_sub_ps(x, _mm512_castsi512_ps(hb));
	__m512i		mb = _mm512_and_si512(_mm512_castps_si512(r), hi);

	r = _mm512_sub_ps(r, _mm512_castsi512_ps(mb));
	*h = hb;
	*m = mb;
	*l = _mm512_and_si512(_mm512_castps_si512(r), hi);
}

/* lane q: (the bf16 of a's lane q, the bf16 of b's lane q), a's low */
__attribute__((target("avx512f,avx512bw"), always_inline)) static inline __m512i
amx_pair(__m512i a, __m512i b)
{
	return _mm512_mask_blend_epi16(0xAAAAAAAA, _mm512_srli_epi32(a, 16), b);
}

static inline __mmask16
amx_lanes(int n)
{
	return n >= 16 ? 0xffff : n <= 0 ? 0 : (__mmask16) ((1u << n) - 1);
}

/* the three parts of x0 and x1 paired lane by lane, stored as a tile row of each part */
__attribute__((target("avx512f,avx512bw"), always_inline)) static inline void
amx_store_pairs(uint16_t *out, __m512 x0, __m512 x1)
{
	__m512i		h0, m0, l0, h1, m1, l1;

	amx_split3(x0, &h0, &m0, &l0);
	amx_split3(x1, &h1, &m1, &l1);
	_mm512_store_si512(out, amx_pair(h0, h1));
	_mm512_store_si512(out + AMX_PART_M, amx_pair(m0, m1));
	_mm512_store_si512(out + AMX_PART_L, amx_pair(l0, l1));
}

/*
 * The k's of a block of 32 go in pairs (q, 16 + q), q = 0 .. 15: element 2q
 * of an A tile's row and row q of a B tile's pair hold k0 + q and k0 + 16 + q.
 *
 * The A tiles of rows i0 .. i0 + 16 and k0 .. k0 + 32 of op(A) (0 past M
 * and K): out + AMX_TILE_ELEMS s (16 rows of 32 bf16) for the part s.
 */
__attribute__((target("avx512f,avx512bw"))) static void
amx_pack_a(uint16_t *out, const float *A, long lda, bool transA, int M, int K, int i0, int k0)
{
	if (!transA)
	{
		__mmask16	m0 = amx_lanes(K - k0),
					m1 = amx_lanes(K - k0 - 16);

		for (int i = 0; i < 16; i++)
		{
			const float *a = A + (long) (i0 + i) * lda + k0;

			if (i0 + i < M)
				amx_store_pairs(out + 32 * i, _mm512_maskz_loadu_ps(m0, a), _mm512_maskz_loadu_ps(m1, a + 16));
			else
				amx_store_pairs(out + 32 * i, _mm512_setzero_ps(), _mm512_setzero_ps());
		}
		return;
	}
	/* op(A)[i][k] = A[k lda + i]: 16 k's of 16 i's, transposed to rows i */
	{
		__m512		r[2][16];
		__mmask16	mi = amx_lanes(M - i0);

		for (int half = 0; half < 2; half++)
		{
			for (int k = 0; k < 16; k++)
			{
				int			kk = k0 + 16 * half + k;

				r[half][k] = kk < K ? _mm512_maskz_loadu_ps(mi, A + (long) kk * lda + i0) : _mm512_setzero_ps();
			}
			gemm_transpose16(r[half]);
		}
		for (int i = 0; i < 16; i++)
			amx_store_pairs(out + 32 * i, r[0][i], r[1][i]);
	}
}

/*
 * The B tiles of op(B) rows k0 .. k0 + 32, columns j0 .. j0 + 16 (0 past K
 * and N): row q, column j = (op(B)[k0 + q][j], op(B)[k0 + 16 + q][j]); out +
 * AMX_TILE_ELEMS s for the part s.
 */
__attribute__((target("avx512f,avx512bw"))) static void
amx_pack_b(uint16_t *out, const float *B, long ldb, bool transB, int N, int K, int j0, int k0)
{
	if (!transB)
	{
		__mmask16	mj = amx_lanes(N - j0);

		for (int q = 0; q < 16; q++)
		{
			int			k = k0 + q;
			__m512		x0 = k < K ? _mm512_maskz_loadu_ps(mj, B + (long) k * ldb + j0) : _mm512_setzero_ps(),
						x1 = k + 16 < K ? _mm512_maskz_loadu_ps(mj, B + (long) (k + 16) * ldb + j0) : _mm512_setzero_ps();

			amx_store_pairs(out + 32 * q, x0, x1);
		}
		return;
	}
	/* op(B)[k][j] = B[j ldb + k]: op(B)'s 16 x 32 block transposed in two halves */
	{
		__m512		r[2][16];
		__mmask16	mk0 = amx_lanes(K - k0),
					mk1 = amx_lanes(K - k0 - 16);

		for (int j = 0; j < 16; j++)
		{
			const float *b = B + (long) (j0 + j) * ldb + k0;

			r[0][j] = j0 + j < N ? _mm512_maskz_loadu_ps(mk0, b) : _mm512_setzero_ps();
			r[1][j] = j0 + j < N ? _mm512_maskz_loadu_ps(mk1, b + 16) : _mm512_setzero_ps();
		}
		gemm_transpose16(r[0]);
		gemm_transpose16(r[1]);
		for (int q = 0; q < 16; q++)
			amx_store_pairs(out + 32 * q, r[0][q], r[1][q]);
	}
}

/* the four tiles of C (+)= the A tiles in 4, 5 times the B tiles in 6, 7 */
#define AMX_DP4 \
	do { \
		_tile_dpbf16ps(0, 4, 6); \
		_tile_dpbf16ps(1, 4, 7); \
		_tile_dpbf16ps(2, 5, 6); \
		_tile_dpbf16ps(3, 5, 7); \
	} while (0)

/* the epilogue of a 16 x 16 block of C from t (16 x 16 floats) */
__attribute__((target("avx512f"))) static inline void
amx_store_c(const float *t, float *C, long ldc, int rows, int cols, bool load_c,
			const GemmEpilogue *ep, int i0, int j0)
{
	for (int i = 0; i < rows; i++)
		gemm_store_vec(C + (long) (i0 + i) * ldc + j0, _mm512_load_ps(t + 16 * i), amx_lanes(cols), load_c, ep,
					   ep && ep->bias ? ep->bias + j0 : NULL,
					   ep && ep->keep ? ep->keep + (long) (i0 + i) * ep->ldk + j0 : NULL);
}

/*
 * the packs' space, grown as needed: a panel of op(A), two columns of tiles
 * of op(B); the process's, for its one computing thread (dml-worker's)
 */
static uint16_t *amx_apack;
static uint16_t *amx_bpack;
static size_t amx_apack_size;

__attribute__((target("avx512f,avx512bw,amx-tile,amx-bf16"))) static void
gemm_amx(bool transA, bool transB, int M, int N, int K, const float *A, long lda,
		 const float *B, long ldb, bool accumulate, float *C, long ldc,
		 const GemmEpilogue *ep)
{
	int			nb = (N + 31) / 32 * 2,	/* 16-column blocks, an even count */
				kc = (K + 31) / 32;
	AmxCfg		cfg = {.palette = 1};
	float		t[4][256] __attribute__((aligned(64)));

	for (int q = 0; q < 8; q++)
	{
		cfg.colsb[q] = 64;
		cfg.rows[q] = 16;
	}
	_tile_loadconfig(&cfg);
	for (int p0 = 0; p0 < M; p0 += AMX_PANEL_ROWS)
	{
		int			mp = M - p0 < AMX_PANEL_ROWS ? M - p0 : AMX_PANEL_ROWS,
					mb = (mp + 31) / 32 * 2;

		for (int ib = 0; ib < mb; ib++)
			for (int c = 0; c < kc; c++)
				amx_pack_a(amx_apack + ((size_t) ib * kc + c) * AMX_PARTS_ELEMS, A, lda, transA, M, K, p0 + 16 * ib, 32 * c);
		for (int jb = 0; jb < nb; jb += 2)
		{
			for (int e = 0; e < 2; e++)
				for (int c = 0; c < kc; c++)
					amx_pack_b(amx_bpack + ((size_t) e * kc + c) * AMX_PARTS_ELEMS, B, ldb, transB, N, K, 16 * (jb + e), 32 * c);
			for (int ib = 0; ib < mb; ib += 2)
			{
				const uint16_t *a0 = amx_apack + (size_t) ib * kc * AMX_PARTS_ELEMS,
						   *a1 = a0 + (size_t) kc * AMX_PARTS_ELEMS,
						   *b0 = amx_bpack,
						   *b1 = amx_bpack + (size_t) kc * AMX_PARTS_ELEMS;
				int			i0 = p0 + 16 * ib,
							j0 = 16 * jb;

				_tile_zero(0);
				_tile_zero(1);
				_tile_zero(2);
				_tile_zero(3);
				for (int c = 0; c < kc; c++, a0 += AMX_PARTS_ELEMS, a1 += AMX_PARTS_ELEMS,
					 b0 += AMX_PARTS_ELEMS, b1 += AMX_PARTS_ELEMS)
				{
					/* the small products first: lh, mh, mm, then hl, hm, hh */
					_tile_loadd(4, a0 + AMX_PART_L, 64);
					_tile_loadd(5, a1 + AMX_PART_L, 64);
					_tile_loadd(6, b0, 64);
					_tile_loadd(7, b1, 64);
					AMX_DP4;
					_tile_loadd(4, a0 + AMX_PART_M, 64);
					_tile_loadd(5, a1 + AMX_PART_M, 64);
					AMX_DP4;
					_tile_loadd(6, b0 + AMX_PART_M, 64);
					_tile_loadd(7, b1 + AMX_PART_M, 64);
					AMX_DP4;
					_tile_loadd(4, a0, 64);
					_tile_loadd(5, a1, 64);
					_tile_loadd(6, b0 + AMX_PART_L, 64);
					_tile_loadd(7, b1 + AMX_PART_L, 64);
					AMX_DP4;
					_tile_loadd(6, b0 + AMX_PART_M, 64);
					_tile_loadd(7, b1 + AMX_PART_M, 64);
					AMX_DP4;
					_tile_loadd(6, b0, 64);
					_tile_loadd(7, b1, 64);
					AMX_DP4;
				}
				if (!accumulate && ep == NULL && i0 + 32 <= M && j0 + 32 <= N)
				{
					float	   *c = C + (long) i0 * ldc + j0;

					_tile_stored(0, c, ldc * 4);
					_tile_stored(1, c + 16, ldc * 4);
					_tile_stored(2, c + 16 * ldc, ldc * 4);
					_tile_stored(3, c + 16 * ldc + 16, ldc * 4);
					continue;
				}
				_tile_stored(0, t[0], 64);
				_tile_stored(1, t[1], 64);
				_tile_stored(2, t[2], 64);
				_tile_stored(3, t[3], 64);
				for (int q = 0; q < 4; q++)
				{
					int			r0 = i0 + 16 * (q / 2),
								c0 = j0 + 16 * (q % 2);

					if (r0 < M && c0 < N)
						amx_store_c(t[q], C, ldc, M - r0 < 16 ? M - r0 : 16, N - c0 < 16 ? N - c0 : 16,
									accumulate, ep, r0, c0);
				}
			}
		}
	}
	_tile_release();
}

/*
 * Whether this process may use AMX's tiles: the CPU has AMX-TILE, AMX-BF16
 * and AVX512BW, and Linux grants the tiles' state (arch_prctl
 * ARCH_REQ_XCOMP_PERM, once); then the packs' space for a product of
 * (at most AMX_PANEL_ROWS rows of) M x N x K.
 */
static bool
amx_usable(int M, int K)
{
	static int	granted = -1;
	int			kc = (K + 31) / 32;
	size_t		need = (size_t) ((M < AMX_PANEL_ROWS ? M : AMX_PANEL_ROWS) + 31) / 32 * 2 * kc * AMX_PARTS_ELEMS * sizeof(uint16_t);

	if (granted < 0)
	{
		unsigned	a, b, c, d;

		granted = 0;
#ifdef SYS_arch_prctl
		if (__get_cpuid_count(7, 0, &a, &b, &c, &d) &&
			(d & (1u << 24)) && (d & (1u << 22)) && (b & (1u << 30)) &&
			syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */ , 18 /* XTILEDATA */ ) == 0)
		{
			amx_bpack = aligned_alloc(64, (size_t) 2 * (AMX_MAX_K / 32) * AMX_PARTS_ELEMS * sizeof(uint16_t));
			granted = amx_bpack != NULL;
		}
#endif
	}
	if (!granted)
		return false;
	if (need > amx_apack_size)
	{
		free(amx_apack);
		amx_apack = aligned_alloc(64, need);
		amx_apack_size = amx_apack ? need : 0;
	}
	return amx_apack != NULL;
}
