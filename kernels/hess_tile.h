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
 * T + 1), the last one alone where their count is odd.  A pair's rows
 * c >= HT_L T hold one accumulator each up to HT_L (T + 1), two after:
 * A(T) in all, cut into the fewest groups of at most HESS_RB - 1 of them
 * (HESS_NG), each about as large as the others, and each group's code is
 * made for the model's P.  (Groups filled to HESS_RB in turn left a last
 * group of one row at P = 21 on AVX-512, two sums that waited on the
 * multiply-add's latency: 12% of the float32 statistics kernel's samples;
 * tiles of one vector each, before that, left tiles of 1 and 5 rows on
 * AVX2 at P = 21: 43 cycles a row where the 66 multiply-adds need 33.)
 * Every entry still sums its products in row order, one multiply-add a
 * row, so H is the same bit for bit.
 */
SIMD_INLINE void
HT_NAME(hess_tiles_p) (HT_T *restrict Hs, const HT_T *restrict Z, int m, const int P)
{
	for (int i0 = 0; i0 < m; i0 += HESS_CHUNK)
	{
		const HT_T *Zc = Z + (size_t) i0 * HT_TP;
		int			mc = m - i0 < HESS_CHUNK ? m - i0 : HESS_CHUNK;

		/*
		 * the pair at T: A(T) accumulators in HESS_NG(T) groups; group k's
		 * rows are [HESS_C(T, k), HESS_C(T, k + 1)), where the first
		 * HESS_X(T, k) = ceil(k A / NG) accumulators end (one more where
		 * that falls inside a row of two), so a group holds at most
		 * ceil(A / NG) + 1 <= HESS_RB
		 */
#define HESS_A(T)	(HT_L + 2 * (P - HT_L * ((T) + 1)))
#define HESS_NG(T)	((HESS_A(T) + HESS_RB - 2) / (HESS_RB - 1))
#define HESS_X(T, k)	(((k) * HESS_A(T) + HESS_NG(T) - 1) / HESS_NG(T))
#define HESS_C(T, k) \
		(HESS_X(T, k) <= HT_L ? HT_L * (T) + HESS_X(T, k) : \
		 HT_L * ((T) + 1) + (HESS_X(T, k) - HT_L + 1) / 2)
#define HESS_GROUP(T, k) \
		if ((k) < HESS_NG(T)) \
			HT_NAME(hess_tile) (Hs, Zc, mc, T, 1, HESS_C(T, k), HESS_C(T, (k) + 1))
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
#undef HESS_C
#undef HESS_X
#undef HESS_NG
#undef HESS_A
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
