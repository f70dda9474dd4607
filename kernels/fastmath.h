/*-------------------------------------------------------------------------
 *
 * fastmath.h
 *	  The float32 e^x and log(1 + e) of the loss passes (net.c's fused
 *	  pass, losses.c's softmax): branch-free and inline, so that a loop
 *	  over a minibatch's values vectorizes (libm's expf and logf are a call
 *	  a value).  Each within about 1 ulp.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_FASTMATH_H
#define DML_FASTMATH_H

#include "kernels.h"

#include <stdint.h>

/*
 * e^x for x <= 0, branch-free so a loop of it vectorizes: Cephes' expf
 * (range reduction by ln 2 in two parts, degree-6 polynomial; about 1 ulp).
 * Below -87 it gives e^-87 (the true value is below float's normal range:
 * the logistic loss only meets it in 1 + e, the softmax takes 0 there),
 * and a NaN stays NaN.
 */
DML_FUSE_MATH static inline float
dml_expf_neg(float x)
{
	float		n,
				r,
				p;
	union
	{
		uint32_t	u;
		float		f;
	}			two_n;

	x = x < -87.0f ? -87.0f : x;
	/* round to nearest by adding and taking away 1.5 * 2^23 */
	n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
	r = x - n * 0.693359375f;
	r = r - n * -2.12194440e-4f;
	p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + r + 1.0f;
	two_n.u = (uint32_t) ((int32_t) n + 127) << 23;
	return p * two_n.f;
}

/*
 * log(1 + e) for 0 <= e <= 1 as 2 atanh(s), s = e / (2 + e) <= 1/3: the
 * odd series to s^15 is within float rounding, and exact as e -> 0.
 */
DML_FUSE_MATH static inline float
dml_log1pf_unit(float e)
{
	float		s = e / (2.0f + e);
	float		s2 = s * s;
	float		p = 1.0f / 15;

	p = p * s2 + 1.0f / 13;
	p = p * s2 + 1.0f / 11;
	p = p * s2 + 1.0f / 9;
	p = p * s2 + 1.0f / 7;
	p = p * s2 + 1.0f / 5;
	p = p * s2 + 1.0f / 3;
	p = p * s2 + 1.0f;
	return 2.0f * s * p;
}

#endif							/* DML_FASTMATH_H */
