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

/* sum over rows of logsumexp(z) - z[y]; dlogits = softmax(z) - onehot(y) */
double
softmax_forward_backward(float *dlogits, float *probs, const float *logits,
						 const float *y, int B, int K)
{
	double		sum = 0.0;

	for (int b = 0; b < B; b++)
	{
		const float *z = logits + (size_t) b * K;
		float	   *d = dlogits + (size_t) b * K;
		int			label = (int) y[b];
		float		maxz = z[0];
		float		denom = 0.0f;

		/* a label outside 0..K-1 poisons the loss instead of writing out of bounds */
		if (!(y[b] >= 0.0f && y[b] < (float) K))
		{
			for (int k = 0; k < K; k++)
				d[k] = NAN;
			sum = NAN;
			continue;
		}
		for (int k = 1; k < K; k++)
			if (z[k] > maxz)
				maxz = z[k];
		for (int k = 0; k < K; k++)
		{
			d[k] = expf(z[k] - maxz);
			denom += d[k];
		}
		for (int k = 0; k < K; k++)
			d[k] /= denom;
		if (probs != NULL)
			memcpy(probs + (size_t) b * K, d, sizeof(float) * K);
		sum += (double) logf(denom) + maxz - z[label];
		d[label] -= 1.0f;
	}
	return sum;
}

