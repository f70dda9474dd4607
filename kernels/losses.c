/*-------------------------------------------------------------------------
 *
 * losses.c
 *	  Losses with their gradients: MSE, binary cross-entropy, softmax
 *	  cross-entropy.
 *
 * The CPU reference; cuda/losses.cu is its CUDA twin, name for name.
 * Single-threaded by design: each MPI rank pins OpenBLAS to one thread,
 * and the backend never starts a thread pool.
 *
 *-------------------------------------------------------------------------
 */
#include "kernels.h"
#include "fastmath.h"

#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------------
 * Losses
 * --------------------------------------------------------------------- */

/* sum over rows of sum_k (z - y)^2; dlogits = 2 (z - y) */
double
mse_forward_backward(float *dlogits, const float *logits, const float *y,
					 int B, int K)
{
	double		sum = 0.0;
	size_t		n = (size_t) B * K;

	for (size_t i = 0; i < n; i++)
	{
		float		d = logits[i] - y[i];

		sum += (double) d * d;
		dlogits[i] = 2.0f * d;
	}
	return sum;
}

/* sum over rows of log(1 + e^z) - y z; dlogits = sigmoid(z) - y */
double
bce_forward_backward(float *dlogits, const float *logits, const float *y, int B)
{
	double		sum = 0.0;

	for (int b = 0; b < B; b++)
	{
		float		z = logits[b];
		float		t = y[b];

		/* log(1 + e^z) = max(z, 0) + log1p(e^-|z|) never overflows */
		sum += (z > 0.0f ? z : 0.0f) + log1pf(expf(-fabsf(z))) - t * z;
		dlogits[b] = 1.0f / (1.0f + expf(-z)) - t;
	}
	return sum;
}

/* rows a group of softmax_forward_backward's passes: their values stay in L1 */
#define SOFTMAX_ROWS	64

/*
 * sum over rows of logsumexp(z) - z[y]; dlogits = softmax(z) - onehot(y).
 * Rows go in groups of SOFTMAX_ROWS, each in three passes, so that the
 * exponentials are one vectorized loop over the group's values
 * (fastmath.h's dml_expf_neg, about 1 ulp; below e^-87, under float's
 * normal range, 0): each row's z - max(z) into dlogits, their e^x, then
 * each row's sum, quotients and loss in row order.  libm's expf, a call
 * a value, was about 5% of a softmax epoch's samples on Fashion-MNIST.  A
 * label outside 0..K-1 poisons the loss and its row instead of writing
 * out of bounds.
 */
DML_VECTORIZE DML_FUSE_MATH double
softmax_forward_backward(float *dlogits, float *probs, const float *logits,
						 const float *y, int B, int K)
{
	double		sum = 0.0;

	for (int b0 = 0; b0 < B; b0 += SOFTMAX_ROWS)
	{
		int			R = B - b0 < SOFTMAX_ROWS ? B - b0 : SOFTMAX_ROWS;
		size_t		n = (size_t) R * K;
		float	   *dg = dlogits + (size_t) b0 * K;
		float		maxz[SOFTMAX_ROWS];

		for (int i = 0; i < R; i++)
		{
			const float *z = logits + (size_t) (b0 + i) * K;
			float	   *d = dg + (size_t) i * K;
			float		m = z[0];

			for (int k = 1; k < K; k++)
				if (z[k] > m)
					m = z[k];
			for (int k = 0; k < K; k++)
				d[k] = z[k] - m;
			maxz[i] = m;
		}
		for (size_t j = 0; j < n; j++)
		{
			float		x = dg[j];

			dg[j] = x < -87.0f ? 0.0f : dml_expf_neg(x);
		}
		for (int i = 0; i < R; i++)
		{
			int			b = b0 + i;
			const float *z = logits + (size_t) b * K;
			float	   *d = dg + (size_t) i * K;
			float		denom = 0.0f;
			int			label;

			if (!(y[b] >= 0.0f && y[b] < (float) K))
			{
				for (int k = 0; k < K; k++)
					d[k] = NAN;
				sum = NAN;
				continue;
			}
			label = (int) y[b];
			for (int k = 0; k < K; k++)
				denom += d[k];
			for (int k = 0; k < K; k++)
				d[k] /= denom;
			if (probs != NULL)
				memcpy(probs + (size_t) b * K, d, sizeof(float) * K);
			sum += (double) logf(denom) + maxz[i] - z[label];
			d[label] -= 1.0f;
		}
	}
	return sum;
}

