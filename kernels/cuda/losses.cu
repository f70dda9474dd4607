/*-------------------------------------------------------------------------
 *
 * losses.cu
 *	  MSE, binary cross-entropy and softmax cross-entropy: forward and
 *	  backward in one kernel each, the loss summed on the device.
 *
 * Each per-row (or per-element) loss is formed in float exactly as the CPU's
 * forms it, then summed in double: within a block by warp shuffles, across
 * blocks by one atomicAdd per block into *loss.  The order of those adds
 * varies from run to run, which moves the sum only in its last bits.
 *
 *-------------------------------------------------------------------------
 */
#include "common.cuh"

#include <math.h>

/* sum of v over the block, valid in thread 0; blockDim.x a multiple of 32 */
static __device__ double
block_sum(double v)
{
	__shared__ double warp_sums[32];
	int			lane = threadIdx.x & 31,
				warp = threadIdx.x >> 5,
				nwarps = blockDim.x >> 5;

	for (int off = 16; off > 0; off >>= 1)
		v += __shfl_down_sync(0xFFFFFFFFu, v, off);
	if (lane == 0)
		warp_sums[warp] = v;
	__syncthreads();
	v = 0.0;
	if (warp == 0)
	{
		if (lane < nwarps)
			v = warp_sums[lane];
		for (int off = 16; off > 0; off >>= 1)
			v += __shfl_down_sync(0xFFFFFFFFu, v, off);
	}
	return v;
}

/* per element (z - y)^2; dlogits = 2 (z - y) */
__global__ void
mse_kernel(double *loss, float *dlogits, const float *logits, const float *y,
		   size_t n)
{
	double		s = 0.0;

	for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
		 i += (size_t) gridDim.x * blockDim.x)
	{
		float		d = logits[i] - y[i];

		s += (double) d * d;
		dlogits[i] = 2.0f * d;
	}
	s = block_sum(s);
	if (threadIdx.x == 0)
		atomicAdd(loss, s);
}

/* per row log(1 + e^z) - y z without overflow; dlogits = sigmoid(z) - y */
__global__ void
bce_kernel(double *loss, float *dlogits, const float *logits, const float *y,
		   int B)
{
	double		s = 0.0;

	for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < B;
		 b += gridDim.x * blockDim.x)
	{
		float		z = logits[b];
		float		t = y[b];

		s += (z > 0.0f ? z : 0.0f) + log1pf(expf(-fabsf(z))) - t * z;
		dlogits[b] = 1.0f / (1.0f + expf(-z)) - t;
	}
	s = block_sum(s);
	if (threadIdx.x == 0)
		atomicAdd(loss, s);
}

/*
 * One warp per row: max, exp and sum across the lanes, then
 * dlogits = softmax(z) - onehot(y) and loss += logsumexp(z) - z[y].
 */
__global__ void
softmax_kernel(double *loss, float *dlogits, float *probs, const float *logits,
			   const float *y, int B, int K)
{
	int			lane = threadIdx.x & 31;
	int			warps = (gridDim.x * blockDim.x) >> 5;
	double		s = 0.0;

	for (int b = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; b < B; b += warps)
	{
		const float *z = logits + (size_t) b * K;
		float	   *d = dlogits + (size_t) b * K;
		int			label = (int) y[b];
		float		maxz = -INFINITY,
					denom = 0.0f;

		for (int k = lane; k < K; k += 32)
			maxz = fmaxf(maxz, z[k]);
		for (int off = 16; off > 0; off >>= 1)
			maxz = fmaxf(maxz, __shfl_xor_sync(0xFFFFFFFFu, maxz, off));
		for (int k = lane; k < K; k += 32)
		{
			float		e = expf(z[k] - maxz);

			d[k] = e;
			denom += e;
		}
		for (int off = 16; off > 0; off >>= 1)
			denom += __shfl_xor_sync(0xFFFFFFFFu, denom, off);
		for (int k = lane; k < K; k += 32)
		{
			float		p = d[k] / denom;

			if (probs != NULL)
				probs[(size_t) b * K + k] = p;
			d[k] = (k == label) ? p - 1.0f : p;
		}
		if (lane == 0)
		{
			if (label < 0 || label >= K)
				s += (double) NAN;	/* a bad label poisons the loss, visibly */
			else
				s += (double) logf(denom) + maxz - z[label];
		}
	}
	s = block_sum(s);
	if (threadIdx.x == 0)
		atomicAdd(loss, s);
}

/* loss += sum (z - y)^2 over B*K; dlogits (B,K) = 2 (z - y) */
int
mse_forward_backward_cuda(double *loss, float *dlogits, const float *logits,
						  const float *y, int B, int K, cudaStream_t stream)
{
	size_t		n = (size_t) B * K;

	ARG_CHECK(B >= 0 && K > 0);
	if (n == 0)
		return DML_OK;
	mse_kernel<<<grid_for(n), DML_BLOCK, 0, stream>>>(loss, dlogits, logits, y, n);
	LAUNCH_CHECK();
	return DML_OK;
}

/* loss += sum log(1 + e^z) - y z over B rows; dlogits (B) = sigmoid(z) - y */
int
bce_forward_backward_cuda(double *loss, float *dlogits, const float *logits,
						  const float *y, int B, cudaStream_t stream)
{
	ARG_CHECK(B >= 0);
	if (B == 0)
		return DML_OK;
	bce_kernel<<<grid_for(B), DML_BLOCK, 0, stream>>>(loss, dlogits, logits, y, B);
	LAUNCH_CHECK();
	return DML_OK;
}

/* loss += sum logsumexp(z) - z[y]; dlogits (B,K) = softmax(z) - onehot(y) */
int
softmax_forward_backward_cuda(double *loss, float *dlogits, float *probs,
							  const float *logits, const float *y, int B, int K,
							  cudaStream_t stream)
{
	ARG_CHECK(B >= 0 && K > 0);
	if (B == 0)
		return DML_OK;
	/* one warp per row, DML_BLOCK / 32 rows per block */
	softmax_kernel<<<grid_for((size_t) B * 32), DML_BLOCK, 0, stream>>>(loss, dlogits, probs,
																	   logits, y, B, K);
	LAUNCH_CHECK();
	return DML_OK;
}
