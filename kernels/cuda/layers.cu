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
 * A layer with at most SKINNY_MAX outputs (the last layer of a classifier
 * or a regression, a logistic or softmax model) on a small (B,C) skips
 * cuBLAS: with one dimension of 10, cuBLAS ran its three GEMMs at 1.0-1.5
 * TFLOP/s on an H200 (17.6, 16.6 and 10-14 us at B = C = 1024), and a
 * small step is a chain of such launches.  The skinny kernels below do
 * each in one launch, in FP32 whatever the handle's math mode, and sum in a
 * fixed order (no atomics), so a step is as deterministic as with cuBLAS.
 *	 forward: a warp per row, OC running sums per lane, reduced by shuffles,
 *			  bias and activation applied on the way out;
 *	 dweight: a block per 32 columns, 16 row groups, partial sums met in
 *			  shared memory in a fixed order;
 *	 dinp:	  a thread per element, the OC products summed in a register.
 * They run where (B,C) is small (use_skinny: measured both ways).
 * DML_GPU_SKINNY=0 in the environment (or dml_cuda_set_skinny(0)) sends
 * every layer to cuBLAS, for A/B timing.
 *
 *-------------------------------------------------------------------------
 */
#include <stdlib.h>
#include <string.h>

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

/*
 * out (B,OC) = act(out + bias), in place after the GEMM; bias may be NULL.
 * Blocks stride over rows and threads over a row's columns: no division or
 * modulo per element (a 64-bit i % OC cost more than the memory traffic).
 */
template <int ACT>
__global__ void
bias_act_kernel(float *out, const float *bias, int B, int OC)
{
	for (int b = blockIdx.x; b < B; b += gridDim.x)
	{
		float	   *row = out + (size_t) b * OC;

		for (int o = threadIdx.x; o < OC; o += blockDim.x)
		{
			float		x = row[o];

			if (bias != NULL)
				x += bias[o];
			row[o] = act_fwd<ACT>(x);
		}
	}
}

/* blocks for a kernel whose blocks stride over B rows */
static inline unsigned int
grid_rows(int B)
{
	return (unsigned int) (B < 1 ? 1 : B > 65536 ? 65536 : B);
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
 * dbias (OC) += colsum(dout (B,OC)).  A block of 32 x 32 threads owns 32
 * columns: each thread strides down the rows (reads coalesced along a
 * row), then the 32 partial sums per column meet in shared memory.  No
 * atomics, so the result is deterministic.  (With 32 x 8 threads, the 32
 * blocks of a 1024-wide layer kept too few loads in flight: about 10 us
 * at B = 1024, latency rather than bandwidth.)
 */
#define COLSUM_ROWS 32
__global__ void __launch_bounds__(32 * COLSUM_ROWS)
colsum_kernel(float *dbias, const float *dout, int B, int OC)
{
	__shared__ float part[COLSUM_ROWS][33];
	int			o = blockIdx.x * 32 + threadIdx.x;
	float		s = 0.0f;

	if (o < OC)
		for (int b = threadIdx.y; b < B; b += COLSUM_ROWS)
			s += dout[(size_t) b * OC + o];
	part[threadIdx.y][threadIdx.x] = s;
	__syncthreads();
	if (threadIdx.y == 0 && o < OC)
	{
		for (int k = 1; k < COLSUM_ROWS; k++)
			s += part[k][threadIdx.x];
		dbias[o] += s;
	}
}

/*
 * out (B,C) = inp[idx[b]]: a block per row (striding), 16-byte copies when
 * rows are whole float4s (cudaMalloc aligns to 256 bytes)
 */
__global__ void
gather_kernel(float *out, const float *inp, const int *idx, int B, int C)
{
	for (int b = blockIdx.x; b < B; b += gridDim.x)
	{
		const float *src = inp + (size_t) idx[b] * C;
		float	   *dst = out + (size_t) b * C;

		if ((C & 3) == 0)
		{
			const float4 *s4 = (const float4 *) src;
			float4	   *d4 = (float4 *) dst;

			for (int c = threadIdx.x; c < C / 4; c += blockDim.x)
				d4[c] = s4[c];
		}
		else
			for (int c = threadIdx.x; c < C; c += blockDim.x)
				dst[c] = src[c];
	}
}

#define SKINNY_MAX 16

/* -1: not yet read from DML_GPU_SKINNY */
static int	skinny_on = -1;

void
dml_cuda_set_skinny(int on)
{
	skinny_on = on ? 1 : 0;
}

/*
 * The skinny kernels win where a step is short and its launches' latency
 * counts: a Fashion-MNIST MLP at batch 128 trained 1.38x faster with them
 * (H200).  On a big (B,C) their few blocks keep too few loads in flight:
 * at B = C = 1024 the step of MLP 784-1024-1024-10 ran at 0.85x (FP32) and
 * 0.72x (TF32) of cuBLAS's.  So only (B,C) of at most 2^18 values take them.
 */
#define SKINNY_MAX_VALUES (1 << 18)

static bool
use_skinny(int B, int C, int OC)
{
	if (skinny_on < 0)
	{
		const char *e = getenv("DML_GPU_SKINNY");

		skinny_on = !(e != NULL && strcmp(e, "0") == 0);
	}
	return skinny_on && OC <= SKINNY_MAX && (size_t) B * C <= SKINNY_MAX_VALUES;
}

/* acc[o] for a run-time o, with compile-time indices (registers, not local memory) */
__device__ __forceinline__ float
pick(const float (&acc)[SKINNY_MAX], int o)
{
	float		v = 0.0f;

#pragma unroll
	for (int k = 0; k < SKINNY_MAX; k++)
		if (k == o)
			v = acc[k];
	return v;
}

/* out (B,OC) = act(inp (B,C) @ W (OC,C)^T + bias): a warp per row */
template <int ACT>
__global__ void
skinny_forward_kernel(float *out, const float *inp, const float *W,
					  const float *bias, int B, int C, int OC)
{
	int			lane = threadIdx.x & 31;
	int			nwarps = (int) ((gridDim.x * blockDim.x) >> 5);

	for (int b = (int) ((blockIdx.x * blockDim.x + threadIdx.x) >> 5); b < B; b += nwarps)
	{
		const float *x = inp + (size_t) b * C;
		float		acc[SKINNY_MAX];

#pragma unroll
		for (int o = 0; o < SKINNY_MAX; o++)
			acc[o] = 0.0f;
		for (int c = lane; c < C; c += 32)
		{
			float		xv = x[c];

#pragma unroll
			for (int o = 0; o < SKINNY_MAX; o++)
				if (o < OC)
					acc[o] = fmaf(xv, __ldg(W + (size_t) o * C + c), acc[o]);
		}
		/* OC is the same for the whole warp: every lane takes each shuffle */
#pragma unroll
		for (int o = 0; o < SKINNY_MAX; o++)
			if (o < OC)
				for (int k = 16; k > 0; k >>= 1)
					acc[o] += __shfl_xor_sync(0xffffffffu, acc[o], k);
		if (lane < OC)
		{
			float		v = pick(acc, lane);

			if (bias != NULL)
				v += bias[lane];
			out[(size_t) b * OC + lane] = act_fwd<ACT>(v);
		}
	}
}

/*
 * dW (OC,C) += dout (B,OC)^T @ inp (B,C): a block of 32 columns x 16 row
 * groups; each thread sums its rows, then the 16 partial sums of each
 * (output, column) meet in shared memory and are added in a fixed order.
 */
#define DW_GROUPS 16
__global__ void __launch_bounds__(32 * DW_GROUPS)
skinny_dweight_kernel(float *dW, const float *dout, const float *inp, int B, int C, int OC)
{
	__shared__ float part[SKINNY_MAX][DW_GROUPS][33];
	int			tx = threadIdx.x,
				ty = threadIdx.y,
				c = blockIdx.x * 32 + tx;
	float		acc[SKINNY_MAX];

#pragma unroll
	for (int o = 0; o < SKINNY_MAX; o++)
		acc[o] = 0.0f;
	if (c < C)
		for (int b = ty; b < B; b += DW_GROUPS)
		{
			float		xv = inp[(size_t) b * C + c];
			const float *d = dout + (size_t) b * OC;

#pragma unroll
			for (int o = 0; o < SKINNY_MAX; o++)
				if (o < OC)
					acc[o] = fmaf(__ldg(d + o), xv, acc[o]);
		}
#pragma unroll
	for (int o = 0; o < SKINNY_MAX; o++)
		if (o < OC)
			part[o][ty][tx] = acc[o];
	__syncthreads();
	/* 512 threads, at most 16 x 32 sums */
	{
		int			t = ty * 32 + tx,
					o = t / 32,
					col = blockIdx.x * 32 + t % 32;

		if (o < OC && col < C)
		{
			float		s = 0.0f;

			for (int g = 0; g < DW_GROUPS; g++)
				s += part[o][g][t % 32];
			dW[(size_t) o * C + col] += s;
		}
	}
}

/* dinp (B,C) = dout (B,OC) @ W (OC,C): a thread per element */
__global__ void
skinny_dinp_kernel(float *dinp, const float *dout, const float *W, int B, int C, int OC)
{
	int			c = blockIdx.x * blockDim.x + threadIdx.x;

	if (c >= C)
		return;
	for (int b = blockIdx.y; b < B; b += gridDim.y)
	{
		const float *d = dout + (size_t) b * OC;
		float		s = 0.0f;

#pragma unroll
		for (int o = 0; o < SKINNY_MAX; o++)
			if (o < OC)
				s = fmaf(__ldg(d + o), __ldg(W + (size_t) o * C + c), s);
		dinp[(size_t) b * C + c] = s;
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

	ARG_CHECK(B > 0 && C > 0 && OC > 0);
	ARG_CHECK(act >= DML_ACT_IDENTITY && act <= DML_ACT_SIGMOID);
	if (use_skinny(B, C, OC))
	{
		/* 8 warps a block, a warp per row */
		unsigned int blocks = (unsigned int) ((B + 7) / 8 > 65536 ? 65536 : (B + 7) / 8);

		switch (act)
		{
			case DML_ACT_IDENTITY:
				skinny_forward_kernel<DML_ACT_IDENTITY><<<blocks, DML_BLOCK, 0, stream>>>(out, inp, weight, bias, B, C, OC);
				break;
			case DML_ACT_RELU:
				skinny_forward_kernel<DML_ACT_RELU><<<blocks, DML_BLOCK, 0, stream>>>(out, inp, weight, bias, B, C, OC);
				break;
			case DML_ACT_TANH:
				skinny_forward_kernel<DML_ACT_TANH><<<blocks, DML_BLOCK, 0, stream>>>(out, inp, weight, bias, B, C, OC);
				break;
			case DML_ACT_SIGMOID:
				skinny_forward_kernel<DML_ACT_SIGMOID><<<blocks, DML_BLOCK, 0, stream>>>(out, inp, weight, bias, B, C, OC);
				break;
		}
		LAUNCH_CHECK();
		return DML_OK;
	}
	CUBLAS_CHECK(cublasSetStream(h, stream));
	CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, OC, B, C, &one,
							 weight, C, inp, C, &zero, out, OC));
	if (bias == NULL && act == DML_ACT_IDENTITY)
		return DML_OK;
	switch (act)
	{
		case DML_ACT_IDENTITY:
			bias_act_kernel<DML_ACT_IDENTITY><<<grid_rows(B), DML_BLOCK, 0, stream>>>(out, bias, B, OC);
			break;
		case DML_ACT_RELU:
			bias_act_kernel<DML_ACT_RELU><<<grid_rows(B), DML_BLOCK, 0, stream>>>(out, bias, B, OC);
			break;
		case DML_ACT_TANH:
			bias_act_kernel<DML_ACT_TANH><<<grid_rows(B), DML_BLOCK, 0, stream>>>(out, bias, B, OC);
			break;
		case DML_ACT_SIGMOID:
			bias_act_kernel<DML_ACT_SIGMOID><<<grid_rows(B), DML_BLOCK, 0, stream>>>(out, bias, B, OC);
			break;
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
	if (use_skinny(B, C, OC))
	{
		skinny_dweight_kernel<<<(C + 31) / 32, dim3(32, DW_GROUPS), 0, stream>>>(dweight, dout, inp, B, C, OC);
		LAUNCH_CHECK();
	}
	else
	{
		CUBLAS_CHECK(cublasSetStream(h, stream));
		CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, B, &one,
								 inp, C, dout, OC, &one, dweight, C));
	}
	colsum_kernel<<<(OC + 31) / 32, dim3(32, COLSUM_ROWS), 0, stream>>>(dbias, dout, B, OC);
	LAUNCH_CHECK();
	if (dinp == NULL)
		return DML_OK;
	if (use_skinny(B, C, OC))
	{
		dim3		grid((C + DML_BLOCK - 1) / DML_BLOCK, B > 65535 ? 65535 : B);

		skinny_dinp_kernel<<<grid, DML_BLOCK, 0, stream>>>(dinp, dout, weight, B, C, OC);
		LAUNCH_CHECK();
	}
	else
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
	gather_kernel<<<grid_rows(B), DML_BLOCK, 0, stream>>>(out, inp, idx, B, C);
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
