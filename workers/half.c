/*-------------------------------------------------------------------------
 *
 * half.c
 *	  IEEE binary16 conversions for fp16 gradient compression.  Where the
 *	  CPU has F16C (every x86-64 since 2012) eight values convert in one
 *	  instruction; otherwise, and for the last few values, the compiler's
 *	  _Float16 casts do it one at a time.  Both round to nearest even, so
 *	  results do not depend on which path ran.
 *
 *-------------------------------------------------------------------------
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "half.h"

static void
from_float_scalar(uint16_t *h, const float *x, size_t n, float scale)
{
	for (size_t i = 0; i < n; i++)
	{
		_Float16	v = (_Float16) (x[i] * scale);

		memcpy(h + i, &v, 2);
	}
}

static void
to_float_scalar(float *x, const uint16_t *h, size_t n, float scale)
{
	for (size_t i = 0; i < n; i++)
	{
		_Float16	v;

		memcpy(&v, h + i, 2);
		x[i] = (float) v * scale;
	}
}

static void
add_scalar(uint16_t *acc, const uint16_t *in, size_t n)
{
	for (size_t i = 0; i < n; i++)
	{
		_Float16	a,
					b;

		memcpy(&a, acc + i, 2);
		memcpy(&b, in + i, 2);
		a = (_Float16) ((float) a + (float) b);
		memcpy(acc + i, &a, 2);
	}
}

#if defined(__x86_64__)
#include <immintrin.h>

#define F16C_TARGET __attribute__((target("avx,f16c")))
#define ROUND_EVEN _MM_FROUND_TO_NEAREST_INT

/* each returns how many values it did: the multiple of 8 below n */
F16C_TARGET static size_t
from_float_f16c(uint16_t *h, const float *x, size_t n, float scale)
{
	__m256		s = _mm256_set1_ps(scale);
	size_t		i;

	for (i = 0; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *) (h + i),
						 _mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(x + i), s), ROUND_EVEN));
	return i;
}

F16C_TARGET static size_t
to_float_f16c(float *x, const uint16_t *h, size_t n, float scale)
{
	__m256		s = _mm256_set1_ps(scale);
	size_t		i;

	for (i = 0; i + 8 <= n; i += 8)
		_mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (h + i))), s));
	return i;
}

F16C_TARGET static size_t
add_f16c(uint16_t *acc, const uint16_t *in, size_t n)
{
	size_t		i;

	for (i = 0; i + 8 <= n; i += 8)
	{
		__m256		a = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (acc + i)));
		__m256		b = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (in + i)));

		_mm_storeu_si128((__m128i *) (acc + i), _mm256_cvtps_ph(_mm256_add_ps(a, b), ROUND_EVEN));
	}
	return i;
}

static int
have_f16c(void)
{
	static int	known = -1;

	if (known < 0)
		known = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
	return known;
}
#define FAST(call) (have_f16c() ? (call) : 0)
#else
#define FAST(call) 0
#endif

/* h[i] = binary16(x[i] * scale) */
void
half_from_float(uint16_t *h, const float *x, size_t n, float scale)
{
	size_t		done = FAST(from_float_f16c(h, x, n, scale));

	from_float_scalar(h + done, x + done, n - done, scale);
}

/* x[i] = h[i] * scale */
void
half_to_float(float *x, const uint16_t *h, size_t n, float scale)
{
	size_t		done = FAST(to_float_f16c(x, h, n, scale));

	to_float_scalar(x + done, h + done, n - done, scale);
}

/* acc[i] = binary16(acc[i] + in[i]) */
void
half_add(uint16_t *acc, const uint16_t *in, size_t n)
{
	size_t		done = FAST(add_f16c(acc, in, n));

	add_scalar(acc + done, in + done, n - done);
}
