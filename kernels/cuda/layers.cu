/*-------------------------------------------------------------------------
 *
 * layers.cu
 *	  Dense layers (cuBLAS GEMMs plus a fused bias/activation kernel),
 *	  activations, and two helpers for minibatches: row gather and scale.
 *
 * cuBLAS is column-major and our tensors are row-major.  A row-major (R,C)
 * matrix is, in memory, the column-major (C,R) matrix: its transpose.  So
 * each product is handed to cuBLAS in transposed form:
 *
 *	 out (B,OC) = inp (B,C) @ W^T	  as  out^T (OC,B) = W (OC,C) @ inp^T (C,B)
 *		sgemm(T, N, m=OC, n=B, k=C, A=W lda=C, B=inp ldb=C, C=out ldc=OC)
 *	 dW (OC,C) += dout^T @ inp		  as  dW^T (C,OC) += inp^T (C,B) @ dout (B,OC)
 *		sgemm(N, T, m=C, n=OC, k=B, A=inp lda=C, B=dout ldb=OC, C=dW ldc=C)
 *	 dinp (B,C) = dout @ W			  as  dinp^T (C,B) = W^T (C,OC) @ dout^T (OC,B)
 *		sgemm(N, N, m=C, n=B, k=OC, A=W lda=C, B=dout ldb=OC, C=dinp ldc=C)
 *
 *-------------------------------------------------------------------------
 */
#include "common.cuh"

/* act(x), as the CPU's computes it */
template <int ACT>
__device__ __forceinline__ float
act_fwd(float x)
{
	if (ACT == DML_ACT_RELU)
		return x > 0.0f ? x : 0.0f;
	if (ACT == DML_ACT_TANH)
		return tanhf(x);
	if (ACT == DML_ACT_SIGMOID)
		return 1.0f / (1.0f + expf(-x));
	return x;
}

/* dout * act'(x), written from the output y = act(x) */
template <int ACT>
__device__ __forceinline__ float
act_bwd(float dout, float y)
{
	if (ACT == DML_ACT_RELU)
		return y > 0.0f ? dout : 0.0f;
	if (ACT == DML_ACT_TANH)
		return dout * (1.0f - y * y);
	if (ACT == DML_ACT_SIGMOID)
		return dout * y * (1.0f - y);
	return dout;
}

/* out (B,OC) = act(out + bias), in place after the GEMM; bias may be NULL */
template <int ACT>
__global__ void
bias_act_kernel(float *out, const float *bias, size_t n, int OC)
{
	for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
		 i += (size_t) gridDim.x * blockDim.x)
	{
		float		x = out[i];

		if (bias != NULL)
			x += bias[i % OC];
		out[i] = act_fwd<ACT>(x);
	}
}

/* out (n) = act(inp (n)) */
template <int ACT>
__global__ void
act_forward_kernel(float *out, const float *inp, size_t n)
{
	for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
		 i += (size_t) gridDim.x * blockDim.x)
		out[i] = act_fwd<ACT>(inp[i]);
}

/* dinp (n) = dout (n) * act'(.) from out (n) */
template <int ACT>
__global__ void
act_backward_kernel(float *dinp, const float *dout, const float *out, size_t n)
{
	for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
		 i += (size_t) gridDim.x * blockDim.x)
		dinp[i] = act_bwd<ACT>(dout[i], out[i]);
}

/*
 * dbias (OC) += colsum(dout (B,OC)).  A block of 32 x 8 threads owns 32
 * columns: each thread strides down the rows (reads coalesced along a
 * row), then the 8 partial sums per column meet in shared memory.  No
 * atomics, so the result is deterministic.
 */
__global__ void
colsum_kernel(float *dbias, const float *dout, int B, int OC)
{
	__shared__ float part[8][33];
	int			o = blockIdx.x * 32 + threadIdx.x;
	float		s = 0.0f;

	if (o < OC)
		for (int b = threadIdx.y; b < B; b += 8)
			s += dout[(size_t) b * OC + o];
	part[threadIdx.y][threadIdx.x] = s;
	__syncthreads();
	if (threadIdx.y == 0 && o < OC)
	{
		for (int k = 1; k < 8; k++)
			s += part[k][threadIdx.x];
		dbias[o] += s;
	}
}

/* out (B,C) = inp[idx[b]] */
__global__ void
gather_kernel(float *out, const float *inp, const int *idx, int B, int C)
{
	size_t		n = (size_t) B * C;

	for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
		 i += (size_t) gridDim.x * blockDim.x)
	{
		size_t		b = i / C,
					c = i % C;

		out[i] = inp[(size_t) idx[b] * C + c];
	}
}

/* x (n) *= alpha */
__global__ void
scale_kernel(float *x, size_t n, float alpha)
{
	for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
		 i += (size_t) gridDim.x * blockDim.x)
		x[i] *= alpha;
}

/* out (B,OC) = act(inp (B,C) @ weight (OC,C)^T + bias (OC)) */
int
dense_forward_act_cuda(float *out, const float *inp, const float *weight,
					   const float *bias, int B, int C, int OC, DmlAct act,
					   cublasHandle_t h, cudaStream_t stream)
{
	const float one = 1.0f,
				zero = 0.0f;
	size_t		n = (size_t) B * OC;

	ARG_CHECK(B > 0 && C > 0 && OC > 0);
	CUBLAS_CHECK(cublasSetStream(h, stream));
	CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, OC, B, C, &one,
							 weight, C, inp, C, &zero, out, OC));
	if (bias == NULL && act == DML_ACT_IDENTITY)
		return DML_OK;
	switch (act)
	{
		case DML_ACT_IDENTITY:
			bias_act_kernel<DML_ACT_IDENTITY><<<grid_for(n), DML_BLOCK, 0, stream>>>(out, bias, n, OC);
			break;
		case DML_ACT_RELU:
			bias_act_kernel<DML_ACT_RELU><<<grid_for(n), DML_BLOCK, 0, stream>>>(out, bias, n, OC);
			break;
		case DML_ACT_TANH:
			bias_act_kernel<DML_ACT_TANH><<<grid_for(n), DML_BLOCK, 0, stream>>>(out, bias, n, OC);
			break;
		case DML_ACT_SIGMOID:
			bias_act_kernel<DML_ACT_SIGMOID><<<grid_for(n), DML_BLOCK, 0, stream>>>(out, bias, n, OC);
			break;
		default:
			ARG_CHECK(act >= DML_ACT_IDENTITY && act <= DML_ACT_SIGMOID);
	}
	LAUNCH_CHECK();
	return DML_OK;
}

/* out (B,OC) = inp (B,C) @ weight (OC,C)^T + bias (OC) */
int
dense_forward_cuda(float *out, const float *inp, const float *weight,
				   const float *bias, int B, int C, int OC,
				   cublasHandle_t h, cudaStream_t stream)
{
	return dense_forward_act_cuda(out, inp, weight, bias, B, C, OC,
								  DML_ACT_IDENTITY, h, stream);
}

/* dweight += dout^T inp; dbias += colsum(dout); dinp = dout weight */
int
dense_backward_cuda(float *dinp, float *dweight, float *dbias,
					const float *dout, const float *inp, const float *weight,
					int B, int C, int OC, cublasHandle_t h, cudaStream_t stream)
{
	const float one = 1.0f,
				zero = 0.0f;

	ARG_CHECK(B > 0 && C > 0 && OC > 0);
	CUBLAS_CHECK(cublasSetStream(h, stream));
	CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, B, &one,
							 inp, C, dout, OC, &one, dweight, C));
	colsum_kernel<<<(OC + 31) / 32, dim3(32, 8), 0, stream>>>(dbias, dout, B, OC);
	LAUNCH_CHECK();
	if (dinp != NULL)
		CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, C, B, OC, &one,
								 weight, C, dout, OC, &zero, dinp, C));
	return DML_OK;
}

/* out (n) = act(inp (n)); in place allowed */
int
activation_forward_cuda(float *out, const float *inp, size_t n, DmlAct act,
						cudaStream_t stream)
{
	if (n == 0)
		return DML_OK;
	switch (act)
	{
		case DML_ACT_IDENTITY:
			if (out != inp)
				CUDA_CHECK(cudaMemcpyAsync(out, inp, n * sizeof(float),
										   cudaMemcpyDeviceToDevice, stream));
			return DML_OK;
		case DML_ACT_RELU:
			act_forward_kernel<DML_ACT_RELU><<<grid_for(n), DML_BLOCK, 0, stream>>>(out, inp, n);
			break;
		case DML_ACT_TANH:
			act_forward_kernel<DML_ACT_TANH><<<grid_for(n), DML_BLOCK, 0, stream>>>(out, inp, n);
			break;
		case DML_ACT_SIGMOID:
			act_forward_kernel<DML_ACT_SIGMOID><<<grid_for(n), DML_BLOCK, 0, stream>>>(out, inp, n);
			break;
		default:
			ARG_CHECK(act >= DML_ACT_IDENTITY && act <= DML_ACT_SIGMOID);
	}
	LAUNCH_CHECK();
	return DML_OK;
}

/* dinp (n) = dout (n) * act'(.) from the activation's output (n) */
int
activation_backward_cuda(float *dinp, const float *dout, const float *out,
						 size_t n, DmlAct act, cudaStream_t stream)
{
	if (n == 0)
		return DML_OK;
	switch (act)
	{
		case DML_ACT_IDENTITY:
			if (dinp != dout)
				CUDA_CHECK(cudaMemcpyAsync(dinp, dout, n * sizeof(float),
										   cudaMemcpyDeviceToDevice, stream));
			return DML_OK;
		case DML_ACT_RELU:
			act_backward_kernel<DML_ACT_RELU><<<grid_for(n), DML_BLOCK, 0, stream>>>(dinp, dout, out, n);
			break;
		case DML_ACT_TANH:
			act_backward_kernel<DML_ACT_TANH><<<grid_for(n), DML_BLOCK, 0, stream>>>(dinp, dout, out, n);
			break;
		case DML_ACT_SIGMOID:
			act_backward_kernel<DML_ACT_SIGMOID><<<grid_for(n), DML_BLOCK, 0, stream>>>(dinp, dout, out, n);
			break;
		default:
			ARG_CHECK(act >= DML_ACT_IDENTITY && act <= DML_ACT_SIGMOID);
	}
	LAUNCH_CHECK();
	return DML_OK;
}

/* out (B,C) = rows idx (B) of inp */
int
gather_rows_cuda(float *out, const float *inp, const int *idx, int B, int C,
				 cudaStream_t stream)
{
	size_t		n = (size_t) B * C;

	ARG_CHECK(B >= 0 && C > 0);
	if (n == 0)
		return DML_OK;
	gather_kernel<<<grid_for(n), DML_BLOCK, 0, stream>>>(out, inp, idx, B, C);
	LAUNCH_CHECK();
	return DML_OK;
}

/* x (n) *= alpha */
int
scale_cuda(float *x, size_t n, float alpha, cudaStream_t stream)
{
	if (n == 0)
		return DML_OK;
	scale_kernel<<<grid_for(n), DML_BLOCK, 0, stream>>>(x, n, alpha);
	LAUNCH_CHECK();
	return DML_OK;
}
