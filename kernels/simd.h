/*-------------------------------------------------------------------------
 *
 * simd.h
 *	  The vector operations dml's own kernels are written in, for one
 *	  instruction set at a time: a kernel's body is written once, in a
 *	  header of its own, and compiled for AVX-512 and for AVX2 with FMA by
 *	  including that header twice, after
 *
 *		#define SIMD_ISA 512		(or 256)
 *		#include "simd.h"
 *
 *	  Each inclusion replaces the previous one's definitions (no include
 *	  guard for that part).  SIMD_NAME(f) names the copy (f_avx512,
 *	  f_avx2), SIMD_TARGET compiles it for its instruction set, and
 *	  dml_simd() (common.c) picks one at run time.
 *
 *	  The operations are the same arithmetic in both: a fused multiply-add
 *	  is one rounding in each, so a kernel whose every output sums its
 *	  products in the same order gives the same bits on both; where the
 *	  order follows the vector's width (a dot product's lanes), the two
 *	  agree to float32 rounding.
 *
 *	  Only for x86-64 GCC builds with clones (kernels.h's DML_VECTORIZE
 *	  conditions); elsewhere the kernels are not compiled and sgemm runs.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_SIMD_H_ONCE
#define DML_SIMD_H_ONCE

#include <immintrin.h>
#include <stdint.h>

/*
 * The copy of kernel f to run: f_avx512 where dml_simd() says AVX-512,
 * else f_avx2 (callers check first that one of them runs)
 */
#define SIMD_DISPATCH(f, ...) \
	(dml_simd() >= 512 ? f##_avx512(__VA_ARGS__) : f##_avx2(__VA_ARGS__))

/* AVX2 helpers, defined once (AVX-512 has instructions for them) */

/* lanes [0, n) of 8 as a mask for maskload / maskstore */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256i
simd256_lanes(int n)
{
	return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* the sum of a vector's 8 lanes */
__attribute__((target("avx2,fma"), always_inline)) static inline float
simd256_hsum(__m256 v)
{
	__m128		s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));

	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/* 8 whole numbers 0 .. 255 as the low 8 bytes of a vector */
__attribute__((target("avx2,fma"), always_inline)) static inline __m128i
simd256_bytes(__m256i i)
{
	__m128i		w = _mm_packus_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));

	return _mm_packus_epi16(w, w);
}

/* the 8 vectors' lane sums as one vector, p[r]'s in lane r */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256
simd256_sum_rows(const __m256 *p)
{
	__m256		q[4],
				r[2];

	for (int i = 0; i < 4; i++)
		q[i] = _mm256_add_ps(_mm256_unpacklo_ps(p[2 * i], p[2 * i + 1]),
							 _mm256_unpackhi_ps(p[2 * i], p[2 * i + 1]));
	for (int i = 0; i < 2; i++)
		r[i] = _mm256_add_ps(_mm256_shuffle_ps(q[2 * i], q[2 * i + 1], 0x44),
							 _mm256_shuffle_ps(q[2 * i], q[2 * i + 1], 0xEE));
	/* r[0] lanes: rows 0-3 (low half) and 0-3 (high half); r[1]: rows 4-7 */
	return _mm256_add_ps(_mm256_permute2f128_ps(r[0], r[1], 0x20),
						 _mm256_permute2f128_ps(r[0], r[1], 0x31));
}

/* the 16 vectors' lane sums as one vector, p[r]'s in lane r */
__attribute__((target("avx512f"), always_inline)) static inline __m512
simd512_sum_rows(const __m512 *p)
{
	__m512		q[8],
				r[4],
				u,
				v;

	for (int i = 0; i < 8; i++)
		q[i] = _mm512_add_ps(_mm512_unpacklo_ps(p[2 * i], p[2 * i + 1]),
							 _mm512_unpackhi_ps(p[2 * i], p[2 * i + 1]));
	for (int i = 0; i < 4; i++)
		r[i] = _mm512_add_ps(_mm512_shuffle_ps(q[2 * i], q[2 * i + 1], 0x44),
							 _mm512_shuffle_ps(q[2 * i], q[2 * i + 1], 0xEE));
	u = _mm512_add_ps(_mm512_shuffle_f32x4(r[0], r[1], 0x44), _mm512_shuffle_f32x4(r[0], r[1], 0xEE));
	v = _mm512_add_ps(_mm512_shuffle_f32x4(r[2], r[3], 0x44), _mm512_shuffle_f32x4(r[2], r[3], 0xEE));
	return _mm512_add_ps(_mm512_shuffle_f32x4(u, v, 0x88), _mm512_shuffle_f32x4(u, v, 0xDD));
}
#endif							/* DML_SIMD_H_ONCE */

#undef SIMD_TARGET
#undef SIMD_INLINE
#undef SIMD_NAME
#undef VL
#undef VF
#undef VM
#undef VM_ALL
#undef vzero
#undef vset1
#undef vload
#undef vstore
#undef vmask
#undef vloadm
#undef vstorem
#undef vfma
#undef vfnma
#undef vadd
#undef vsub
#undef vmul
#undef vmin
#undef vmax
#undef vhsum
#undef vsum_rows
#undef VDK
#undef VK
#undef vone_lane
#undef vsel
#undef vdone_lane
#undef vdsel
#undef vdloadf
#undef vdloadf_all
#undef vbytes
#undef vround
#undef vtobytes
#undef vstore_bytes
#undef vfromi
#undef vne_any
#undef vne_bits
#undef VDL
#undef VD
#undef VDM
#undef vdzero
#undef vdset1
#undef vdload
#undef vdstore
#undef vdmask
#undef vdloadm
#undef vdstorem
#undef vdfma
#undef vdmul
#undef vdlo
#undef vdhi

#if SIMD_ISA == 512

#define SIMD_TARGET		__attribute__((target("avx512f")))
#define SIMD_INLINE		__attribute__((target("avx512f"), always_inline)) static inline
#define SIMD_NAME(f)	f##_avx512

/* float32: VL lanes; a mask VM of the lanes [0, n) */
#define VL				16
#define VF				__m512
#define VM				__mmask16
#define VM_ALL			((__mmask16) 0xFFFF)
#define vzero()			_mm512_setzero_ps()
#define vset1(x)		_mm512_set1_ps(x)
#define vload(p)		_mm512_loadu_ps(p)
#define vstore(p, v)	_mm512_storeu_ps(p, v)
#define vmask(n)		((__mmask16) dml_lanes16(n))
#define vloadm(m, p)	_mm512_maskz_loadu_ps(m, p)
#define vstorem(p, m, v) _mm512_mask_storeu_ps(p, m, v)
#define vfma(a, b, c)	_mm512_fmadd_ps(a, b, c)	/* a b + c */
#define vfnma(a, b, c)	_mm512_fnmadd_ps(a, b, c)	/* c - a b */
#define vadd(a, b)		_mm512_add_ps(a, b)
#define vsub(a, b)		_mm512_sub_ps(a, b)
#define vmul(a, b)		_mm512_mul_ps(a, b)
#define vmin(a, b)		_mm512_min_ps(a, b)
#define vmax(a, b)		_mm512_max_ps(a, b)
#define vhsum(v)		_mm512_reduce_add_ps(v)
/* VL vectors' lane sums as one vector (p[r]'s in lane r) */
#define vsum_rows(p)	simd512_sum_rows(p)
/* a mask of lane i alone (none if i is not a lane), and v with 1 there */
#define VK				__mmask16
#define vone_lane(i)	((i) >= 0 && (i) < 16 ? (__mmask16) (1u << (i)) : (__mmask16) 0)
#define vsel(k, one, v)	_mm512_mask_mov_ps(v, k, one)
/* VL bytes at p as floats */
#define vbytes(p)		_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *) (p))))
#define vround(v)		_mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
/* lanes of v, whole numbers 0 .. 255, as the low VL bytes of a vector; stored */
#define vtobytes(v)		_mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v))
#define vstore_bytes(p, b) _mm_storeu_si128((__m128i *) (p), b)
/* lanes of m where a != b (unordered: a NaN differs), as bits */
#define vne_bits(m, a, b) ((unsigned) _mm512_mask_cmp_ps_mask(m, a, b, _CMP_NEQ_UQ))
/* lanes of m whose bits differ */
#define vne_any(m, a, b) ((unsigned) _mm512_mask_cmpneq_epi32_mask(m, _mm512_castps_si512(a), _mm512_castps_si512(b)))

/* float64: VDL lanes */
#define VDL				8
#define VD				__m512d
#define vdzero()		_mm512_setzero_pd()
#define vdset1(x)		_mm512_set1_pd(x)
#define vdload(p)		_mm512_loadu_pd(p)
#define vdstore(p, v)	_mm512_storeu_pd(p, v)
#define vdfma(a, b, c)	_mm512_fmadd_pd(a, b, c)
#define vdmul(a, b)		_mm512_mul_pd(a, b)
/* a float vector's low and high halves, widened */
#define vdlo(v)			_mm512_cvtps_pd(_mm512_castps512_ps256(v))
#define vdhi(v)			_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)))
/* n floats at p (at most VDL; more are read if n is larger) widened, the rest 0 */
#define vdloadf(p, n)	_mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_maskz_loadu_ps(dml_lanes16(n), p)))
/* vdloadf(p, VDL): every lane */
#define vdloadf_all(p)	_mm512_cvtps_pd(_mm256_loadu_ps(p))
/* a mask of lane i alone (none if i is not a lane), and v with 1 there */
#define VDK				__mmask8
#define vdone_lane(i)	((i) >= 0 && (i) < 8 ? (__mmask8) (1u << (i)) : (__mmask8) 0)
#define vdsel(k, one, v) _mm512_mask_mov_pd(v, k, one)

#elif SIMD_ISA == 256

#define SIMD_TARGET		__attribute__((target("avx2,fma")))
#define SIMD_INLINE		__attribute__((target("avx2,fma"), always_inline)) static inline
#define SIMD_NAME(f)	f##_avx2

#define VL				8
#define VF				__m256
#define VM				__m256i
#define VM_ALL			_mm256_set1_epi32(-1)
#define vzero()			_mm256_setzero_ps()
#define vset1(x)		_mm256_set1_ps(x)
#define vload(p)		_mm256_loadu_ps(p)
#define vstore(p, v)	_mm256_storeu_ps(p, v)
#define vmask(n)		simd256_lanes(n)
#define vloadm(m, p)	_mm256_maskload_ps(p, m)
#define vstorem(p, m, v) _mm256_maskstore_ps(p, m, v)
#define vfma(a, b, c)	_mm256_fmadd_ps(a, b, c)
#define vfnma(a, b, c)	_mm256_fnmadd_ps(a, b, c)
#define vadd(a, b)		_mm256_add_ps(a, b)
#define vsub(a, b)		_mm256_sub_ps(a, b)
#define vmul(a, b)		_mm256_mul_ps(a, b)
#define vmin(a, b)		_mm256_min_ps(a, b)
#define vmax(a, b)		_mm256_max_ps(a, b)
#define vhsum(v)		simd256_hsum(v)
#define vsum_rows(p)	simd256_sum_rows(p)
#define VK				__m256
#define vone_lane(i)	_mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_set1_epi32(i), \
															   _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)))
#define vsel(k, one, v)	_mm256_blendv_ps(v, one, k)
#define vbytes(p)		_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *) (p))))
#define vround(v)		_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define vtobytes(v)		simd256_bytes(_mm256_cvtps_epi32(v))
#define vstore_bytes(p, b) _mm_storel_epi64((__m128i *) (p), b)
#define vne_bits(m, a, b) ((unsigned) _mm256_movemask_ps(_mm256_and_ps(_mm256_castsi256_ps(m), \
											_mm256_cmp_ps(a, b, _CMP_NEQ_UQ))))
#define vne_any(m, a, b) ((unsigned) _mm256_movemask_ps(_mm256_andnot_ps( \
											_mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_castps_si256(a), \
																				   _mm256_castps_si256(b))), \
											_mm256_castsi256_ps(m))))

#define VDL				4
#define VD				__m256d
#define vdzero()		_mm256_setzero_pd()
#define vdset1(x)		_mm256_set1_pd(x)
#define vdload(p)		_mm256_loadu_pd(p)
#define vdstore(p, v)	_mm256_storeu_pd(p, v)
#define vdfma(a, b, c)	_mm256_fmadd_pd(a, b, c)
#define vdmul(a, b)		_mm256_mul_pd(a, b)
#define vdlo(v)			_mm256_cvtps_pd(_mm256_castps256_ps128(v))
#define vdhi(v)			_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))
#define vdloadf(p, n)	_mm256_cvtps_pd(_mm_maskload_ps(p, _mm256_castsi256_si128(simd256_lanes(n))))
/* vdloadf(p, VDL): every lane */
#define vdloadf_all(p)	_mm256_cvtps_pd(_mm_loadu_ps(p))
#define VDK				__m256d
#define vdone_lane(i)	_mm256_castsi256_pd(_mm256_cmpeq_epi64(_mm256_set1_epi64x(i), \
															   _mm256_setr_epi64x(0, 1, 2, 3)))
#define vdsel(k, one, v) _mm256_blendv_pd(v, one, k)

#else
#error "simd.h: define SIMD_ISA as 512 or 256 before including it"
#endif
