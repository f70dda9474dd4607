/*-------------------------------------------------------------------------
 *
 * optim.c
 *	  Optimizer updates (SGD, momentum, Nesterov, Adam), learning-rate
 *	  schedules, and one optimizer step over a parameter vector.
 *
 * The CPU reference; cuda/optim.cu is its CUDA twin, name for name.
 * Single-threaded by design: each MPI rank pins OpenBLAS to one thread,
 * and the backend never starts a thread pool.
 *
 *-------------------------------------------------------------------------
 */
#include "kernels.h"

#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------------
 * Optimizers
 * --------------------------------------------------------------------- */

/* p -= lr (g + wd p) */
DML_VECTORIZE void
sgd_update(float *params, const float *grads, size_t n, float lr,
		   float weight_decay)
{
	for (size_t i = 0; i < n; i++)
		params[i] -= lr * (grads[i] + weight_decay * params[i]);
}

/* heavy ball or Nesterov momentum, as torch.optim.SGD with dampening 0 */
DML_VECTORIZE void
momentum_update(float *params, float *velocity, const float *grads, size_t n,
				float lr, float mu, float weight_decay, int nesterov)
{
	for (size_t i = 0; i < n; i++)
	{
		float		g = grads[i] + weight_decay * params[i];

		velocity[i] = mu * velocity[i] + g;
		params[i] -= lr * (nesterov ? g + mu * velocity[i] : velocity[i]);
	}
}

/* Adam (Kingma & Ba) with bias correction, as torch.optim.Adam */
DML_VECTORIZE void
adam_update(float *params, float *m, float *v, const float *grads, size_t n,
			float lr, float beta1, float beta2, float eps, float weight_decay,
			int t)
{
	float		bc1 = 1.0f - powf(beta1, (float) t);
	float		bc2 = 1.0f - powf(beta2, (float) t);
	float		step = lr / bc1;
	float		rbc2 = 1.0f / sqrtf(bc2);
	/*
	 * Subnormals flushed to zero (FTZ and DAZ) in this loop only.  A weight
	 * whose gradient has turned zero (a dead ReLU's) has m decay by beta1 a
	 * step into the subnormals, where each operation takes a microcode
	 * assist: up to half the MLP's optimizer time (bench/RESULTS.md).  What
	 * changes is m, v or a gradient below 1.2e-38, and their step on a
	 * weight, far under half an ulp of any normal weight.
	 */
	unsigned int csr = dml_subnormals_off();

	for (size_t i = 0; i < n; i++)
	{
		float		g = grads[i] + weight_decay * params[i];

		m[i] = beta1 * m[i] + (1.0f - beta1) * g;
		v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
		params[i] -= step * m[i] / (sqrtf(v[i]) * rbc2 + eps);
	}
	dml_subnormals_back(csr);
}

/* learning rate for a 0-based epoch */
float
lr_at_epoch(DmlSchedule sched, float lr, int epoch, int epochs,
			int step_size, float gamma)
{
	switch (sched)
	{
		case DML_SCHED_CONSTANT:
			return lr;
		case DML_SCHED_STEP:
			return lr * powf(gamma, (float) (epoch / (step_size > 0 ? step_size : 1)));
		case DML_SCHED_COSINE:
			return lr * 0.5f * (1.0f + cosf((float) M_PI * epoch / (epochs > 0 ? epochs : 1)));
		case DML_SCHED_PLATEAU:
			return lr;			/* cut on a plateau of the loss: train_log_epoch */
	}
	return lr;
}


/* the optimizer named (sgd, momentum, nesterov, adam); sgd when unknown */
DmlOptimizer
dml_optimizer_parse(const char *name)
{
	if (strcmp(name, "adam") == 0)
		return DML_OPT_ADAM;
	if (strcmp(name, "momentum") == 0)
		return DML_OPT_MOMENTUM;
	if (strcmp(name, "nesterov") == 0)
		return DML_OPT_NESTEROV;
	return DML_OPT_SGD;
}

/* one step of o over st->n parameters (optim_step_cuda is its twin) */
void
optim_step(DmlOptimState *st, const DmlOptim *o, float *params, const float *grads)
{
	st->t++;
	switch (o->kind)
	{
		case DML_OPT_SGD:
			sgd_update(params, grads, st->n, o->lr, o->weight_decay);
			break;
		case DML_OPT_MOMENTUM:
		case DML_OPT_NESTEROV:
			momentum_update(params, st->s1, grads, st->n, o->lr, o->momentum,
							o->weight_decay, o->kind == DML_OPT_NESTEROV);
			break;
		case DML_OPT_ADAM:
			adam_update(params, st->s1, st->s2, grads, st->n, o->lr, o->beta1,
						o->beta2, o->eps, o->weight_decay, st->t);
			break;
	}
}
