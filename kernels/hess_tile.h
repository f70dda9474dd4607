/*-------------------------------------------------------------------------
 *
 * hess_tile.h
 *	  The Hessian's register tiles, written once for an element type and
 *	  its vectors: hess.h includes this file twice for each instruction
 *	  set, once for double (dml_hess_tiles: the float64 polish's H) and
 *	  once for float (dml_logit_stats32: the float32 Newton iterations'),
 *	  after defining
 *
 *		HT_T		the element type
 *		HT_V		its vector type, of HT_L lanes
 *		HT_TP		the tiles' width: a multiple of HT_L, at least 24
 *		ht_load, ht_store, ht_set1, ht_fma, ht_zero: the vector operations
 *		HT_NAME(f)	the copy's name
 *
 *	  and HESS_RB, the accumulators a group may hold.  The parameters are
 *	  undefined at the end, for the next inclusion's.
 *
 *-------------------------------------------------------------------------
 */
/*
 * Rows [c0, c1) of the columns of vector T and, with two, of vector T + 1
 * (on its rows c >= HT_L (T + 1) only: the lower triangle), at most HESS_RB
 * accumulators in all.  Per row of Z: one load of each vector's part of
 * the row, and for each tile row one broadcast that feeds both.
 */
SIMD_INLINE void
HT_NAME(hess_tile) (HT_T *restrict Hs, const HT_T *restrict Z, int m, const int T,
					  const int two, const int c0, const int c1)
{
	HT_V		acc0[HESS_RB],
				acc1[HESS_RB];

#pragma GCC unroll 24
	for (int c = c0; c < c1; c++)
	{
		acc0[c - c0] = ht_load(Hs + c * HT_TP + HT_L * T);
		if (two && c >= HT_L * (T + 1))
			acc1[c - c0] = ht_load(Hs + c * HT_TP + HT_L * (T + 1));
	}
	for (int i = 0; i < m; i++)
	{
		const HT_T *z = Z + (size_t) i * HT_TP;
		HT_V		zk0 = ht_load(z + HT_L * T),
					zk1 = two ? ht_load(z + HT_L * (T + 1)) : ht_zero();

#pragma GCC unroll 24
		for (int c = c0; c < c1; c++)
		{
			HT_V		zc = ht_set1(z[c]);

			acc0[c - c0] = ht_fma(zc, zk0, acc0[c - c0]);
			if (two && c >= HT_L * (T + 1))
				acc1[c - c0] = ht_fma(zc, zk1, acc1[c - c0]);
		}
	}
#pragma GCC unroll 24
	for (int c = c0; c < c1; c++)
	{
		ht_store(Hs + c * HT_TP + HT_L * T, acc0[c - c0]);
		if (two && c >= HT_L * (T + 1))
			ht_store(Hs + c * HT_TP + HT_L * (T + 1), acc1[c - c0]);
	}
}

/*
 * The tiles over rows of Z in chunks of HESS_CHUNK: a chunk (24 KB) stays
 * in L1 while each tile reads it.  The vectors of columns go in pairs (T,
 * T + 1), the last one alone where their count is odd; a pair's rows
 * c >= HT_L T are cut into groups of at most HESS_RB accumulators: the
 * first group its HT_L rows of vector T alone and (HESS_RB - HT_L) / 2 rows
 * of both, each later one HESS_RB / 2 rows of both.  Each group's code is
 * made for the model's P.  (Tiles of one vector each, as before, left
 * tiles of 1 and 5 rows on AVX2 at P = 21 whose sums waited on the
 * multiply-add's latency: 43 cycles a row where the 66 multiply-adds need
 * 33.)  Every entry still sums its products in row order, one
 * multiply-add a row, so H is the same bit for bit.
 */
SIMD_INLINE void
HT_NAME(hess_tiles_p) (HT_T *restrict Hs, const HT_T *restrict Z, int m, const int P)
{
	for (int i0 = 0; i0 < m; i0 += HESS_CHUNK)
	{
		const HT_T *Zc = Z + (size_t) i0 * HT_TP;
		int			mc = m - i0 < HESS_CHUNK ? m - i0 : HESS_CHUNK;

		/* group k of the pair at T: rows [HESS_G0(T, k), HESS_G0(T, k + 1)) within P */
#define HESS_FIRST	(HT_L + (HESS_RB - HT_L) / 2)
#define HESS_G0(T, k) \
		(HT_L * (T) + ((k) == 0 ? 0 : HESS_FIRST + ((k) - 1) * (HESS_RB / 2)))
#define HESS_GROUP(T, k) \
		if (HESS_G0(T, k) < P) \
			HT_NAME(hess_tile) (Hs, Zc, mc, T, 1, HESS_G0(T, k), \
								  HESS_G0(T, (k) + 1) < P ? HESS_G0(T, (k) + 1) : P)
		/* the pair at T, or vector T alone (its rows in groups of HESS_RB) */
#define HESS_PAIR(T) \
		if (HT_L * ((T) + 1) < P) \
		{ \
			HESS_GROUP(T, 0); \
			HESS_GROUP(T, 1); \
			HESS_GROUP(T, 2); \
			HESS_GROUP(T, 3); \
		} \
		else if (HT_L * (T) < P) \
		{ \
			HT_NAME(hess_tile) (Hs, Zc, mc, T, 0, HT_L * (T), \
								  P - HT_L * (T) < HESS_RB ? P : HT_L * (T) + HESS_RB); \
			if (HT_L * (T) + HESS_RB < P) \
				HT_NAME(hess_tile) (Hs, Zc, mc, T, 0, HT_L * (T) + HESS_RB, P); \
		}
		HESS_PAIR(0);
#if HT_TP / HT_L > 2
		HESS_PAIR(2);
#endif
#if HT_TP / HT_L > 4
		HESS_PAIR(4);
#endif
#undef HESS_PAIR
#undef HESS_GROUP
#undef HESS_G0
#undef HESS_FIRST
	}
}

#undef HT_T
#undef HT_V
#undef HT_L
#undef HT_TP
#undef ht_load
#undef ht_store
#undef ht_set1
#undef ht_fma
#undef ht_zero
#undef HT_NAME
