/*-------------------------------------------------------------------------
 *
 * optim.cu
 *	  SGD, momentum (heavy ball and Nesterov) and Adam updates, element by
 *	  element, with the same arithmetic as the CPU's.
 *
 *-------------------------------------------------------------------------
 */
#include "common.cuh"

#include <math.h>

/* p -= lr (g + wd p) */
__global__ void
sgd_kernel(float *params, const float *grads, size_t n, float lr, float wd)
{
	for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
		 i += (size_t) gridDim.x * blockDim.x)
		params[i] -= lr * (grads[i] + wd * params[i]);
}

/* v = mu v + g; p -= lr v (nesterov: p -= lr (g + mu v)) */
__global__ void
momentum_kernel(float *params, float *velocity, const float *grads, size_t n,
				float lr, float mu, float wd, int nesterov)
{
	for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
		 i += (size_t) gridDim.x * blockDim.x)
	{
		float		g = grads[i] + wd * params[i];
		float		v = mu * velocity[i] + g;

		velocity[i] = v;
		params[i] -= lr * (nesterov ? g + mu * v : v);
	}
}

/* Adam with the bias corrections folded into step and rbc2 by the host */
__global__ void
adam_kernel(float *params, float *m, float *v, const float *grads, size_t n,
			float step, float rbc2, float beta1, float beta2, float eps, float wd)
{
	for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n;
		 i += (size_t) gridDim.x * blockDim.x)
	{
		float		g = grads[i] + wd * params[i];
		float		mi = beta1 * m[i] + (1.0f - beta1) * g;
		float		vi = beta2 * v[i] + (1.0f - beta2) * g * g;

		m[i] = mi;
		v[i] = vi;
		params[i] -= step * mi / (sqrtf(vi) * rbc2 + eps);
	}
}

/* params (n) -= lr (grads + weight_decay params) */
int
sgd_update_cuda(float *params, const float *grads, size_t n, float lr,
				float weight_decay, cudaStream_t stream)
{
	if (n == 0)
		return DML_OK;
	sgd_kernel<<<grid_for(n), DML_BLOCK, 0, stream>>>(params, grads, n, lr, weight_decay);
	LAUNCH_CHECK();
	return DML_OK;
}

/* heavy ball or Nesterov momentum over n elements */
int
momentum_update_cuda(float *params, float *velocity, const float *grads,
					 size_t n, float lr, float mu, float weight_decay,
					 int nesterov, cudaStream_t stream)
{
	if (n == 0)
		return DML_OK;
	momentum_kernel<<<grid_for(n), DML_BLOCK, 0, stream>>>(params, velocity, grads, n, lr,
														   mu, weight_decay, nesterov);
	LAUNCH_CHECK();
	return DML_OK;
}

/* Adam step t (from 1) over n elements */
int
adam_update_cuda(float *params, float *m, float *v, const float *grads,
				 size_t n, float lr, float beta1, float beta2, float eps,
				 float weight_decay, int t, cudaStream_t stream)
{
	/* the same float expressions as adam_update in optim.c */
	float		bc1 = 1.0f - powf(beta1, (float) t);
	float		bc2 = 1.0f - powf(beta2, (float) t);
	float		step = lr / bc1;
	float		rbc2 = 1.0f / sqrtf(bc2);

	ARG_CHECK(t >= 1);
	if (n == 0)
		return DML_OK;
	adam_kernel<<<grid_for(n), DML_BLOCK, 0, stream>>>(params, m, v, grads, n, step, rbc2,
													   beta1, beta2, eps, weight_decay);
	LAUNCH_CHECK();
	return DML_OK;
}

/* step t (from 1) of o over n elements: optim_step of optim.c on the device */
int
optim_step_cuda(float *params, float *m, float *v, const float *grads, size_t n,
				const DmlOptim *o, int t, cudaStream_t stream)
{
	switch (o->kind)
	{
		case DML_OPT_SGD:
			return sgd_update_cuda(params, grads, n, o->lr, o->weight_decay, stream);
		case DML_OPT_MOMENTUM:
		case DML_OPT_NESTEROV:
			ARG_CHECK(m != NULL);	/* allocated for a stateless optimizer */
			return momentum_update_cuda(params, m, grads, n, o->lr, o->momentum,
										o->weight_decay, o->kind == DML_OPT_NESTEROV, stream);
		case DML_OPT_ADAM:
			ARG_CHECK(m != NULL && v != NULL);
			return adam_update_cuda(params, m, v, grads, n, o->lr, o->beta1, o->beta2, o->eps,
									o->weight_decay, t, stream);
	}
	ARG_CHECK(o->kind >= DML_OPT_SGD && o->kind <= DML_OPT_ADAM);
	return DML_OK;
}
