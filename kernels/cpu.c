/*-------------------------------------------------------------------------
 *
 * cpu.c
 *	  CPU reference kernels: dense layers on OpenBLAS sgemm, activations,
 *	  losses, optimizers, random numbers.
 *
 * Everything here is single-threaded by design: each MPI rank pins
 * OpenBLAS to one thread, and the backend never starts a thread pool.
 *
 *-------------------------------------------------------------------------
 */
#include "kernels.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/* Name of a status, for error messages */
const char *
dml_status_string(DmlStatus st)
{
	switch (st)
	{
		case DML_OK:
			return "ok";
		case DML_ERR_NOMEM:
			return "out of memory";
		case DML_ERR_FORMAT:
			return "malformed model";
		case DML_ERR_CHECKSUM:
			return "checksum mismatch";
		case DML_ERR_SINGULAR:
			return "matrix is singular or not positive definite";
		case DML_ERR_ARG:
			return "invalid argument";
	}
	return "unknown status";
}

static const char *const act_names[] = {"identity", "relu", "tanh", "sigmoid"};

/* Name of an activation */
const char *
dml_act_name(DmlAct act)
{
	if ((int) act < 0 || (int) act > DML_ACT_SIGMOID)
		return "unknown";
	return act_names[act];
}

/* Activation by name, -1 when unknown */
int
dml_act_parse(const char *name)
{
	for (int i = 0; i <= DML_ACT_SIGMOID; i++)
		if (strcmp(name, act_names[i]) == 0)
			return i;
	return -1;
}

/* ---------------------------------------------------------------------
 * Dense layer
 * --------------------------------------------------------------------- */

/* out (B,OC) = inp (B,C) @ weight (OC,C)^T + bias (OC) */
void
dense_forward(float *out, const float *inp, const float *weight,
			  const float *bias, int B, int C, int OC)
{
	for (int b = 0; b < B; b++)
		memcpy(out + (size_t) b * OC, bias, sizeof(float) * OC);
	if (B == 1)
		cblas_sgemv(CblasRowMajor, CblasNoTrans, OC, C, 1.0f, weight, C,
					inp, 1, 1.0f, out, 1);
	else
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, OC, C,
					1.0f, inp, C, weight, C, 1.0f, out, OC);
}

/* dweight += dout^T inp; dbias += colsum(dout); dinp = dout weight */
void
dense_backward(float *dinp, float *dweight, float *dbias, const float *dout,
			   const float *inp, const float *weight, int B, int C, int OC)
{
	dense_backward_acc(dinp, dweight, dbias, dout, inp, weight, B, C, OC, true);
}

/* as dense_backward; without accumulate, dweight and dbias are overwritten */
void
dense_backward_acc(float *dinp, float *dweight, float *dbias, const float *dout,
				   const float *inp, const float *weight, int B, int C, int OC,
				   bool accumulate)
{
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, B,
				1.0f, dout, OC, inp, C, accumulate ? 1.0f : 0.0f, dweight, C);
	if (!accumulate)
		memset(dbias, 0, sizeof(float) * OC);
	for (int b = 0; b < B; b++)
	{
		const float *row = dout + (size_t) b * OC;

		for (int o = 0; o < OC; o++)
			dbias[o] += row[o];
	}
	if (dinp != NULL)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, C, OC,
					1.0f, dout, OC, weight, C, 0.0f, dinp, C);
}

/* ---------------------------------------------------------------------
 * Activations
 * --------------------------------------------------------------------- */

/* out = act(inp), elementwise; in place allowed */
DML_VECTORIZE void
activation_forward(float *out, const float *inp, size_t n, DmlAct act)
{
	switch (act)
	{
		case DML_ACT_IDENTITY:
			if (out != inp)
				memmove(out, inp, n * sizeof(float));
			break;
		case DML_ACT_RELU:
			for (size_t i = 0; i < n; i++)
				out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
			break;
		case DML_ACT_TANH:
			for (size_t i = 0; i < n; i++)
				out[i] = tanhf(inp[i]);
			break;
		case DML_ACT_SIGMOID:
			for (size_t i = 0; i < n; i++)
				out[i] = 1.0f / (1.0f + expf(-inp[i]));
			break;
	}
}

/* dinp = dout * act'(x), with act' written from the output y = act(x) */
DML_VECTORIZE void
activation_backward(float *dinp, const float *dout, const float *out,
					size_t n, DmlAct act)
{
	switch (act)
	{
		case DML_ACT_IDENTITY:
			if (dinp != dout)
				memmove(dinp, dout, n * sizeof(float));
			break;
		case DML_ACT_RELU:
			for (size_t i = 0; i < n; i++)
				dinp[i] = out[i] > 0.0f ? dout[i] : 0.0f;
			break;
		case DML_ACT_TANH:
			for (size_t i = 0; i < n; i++)
				dinp[i] = dout[i] * (1.0f - out[i] * out[i]);
			break;
		case DML_ACT_SIGMOID:
			for (size_t i = 0; i < n; i++)
				dinp[i] = dout[i] * out[i] * (1.0f - out[i]);
			break;
	}
}

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

	for (size_t i = 0; i < n; i++)
	{
		float		g = grads[i] + weight_decay * params[i];

		m[i] = beta1 * m[i] + (1.0f - beta1) * g;
		v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
		params[i] -= step * m[i] / (sqrtf(v[i]) * rbc2 + eps);
	}
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
	}
	return lr;
}

/* ---------------------------------------------------------------------
 * Random numbers: splitmix64, so a seed means the same stream everywhere
 * --------------------------------------------------------------------- */

void
dml_rng_seed(DmlRng *rng, uint64_t seed)
{
	rng->s = seed ^ 0x9E3779B97F4A7C15ull;
}

uint64_t
dml_rng_next(DmlRng *rng)
{
	uint64_t	z = (rng->s += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

double
dml_rng_uniform(DmlRng *rng)
{
	return (dml_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
}

/* Box-Muller; one value per call keeps the stream simple */
double
dml_rng_normal(DmlRng *rng)
{
	double		u1 = dml_rng_uniform(rng);
	double		u2 = dml_rng_uniform(rng);

	if (u1 < 1e-300)
		u1 = 1e-300;
	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* Fisher-Yates */
void
dml_shuffle(int *idx, int n, DmlRng *rng)
{
	for (int i = n - 1; i > 0; i--)
	{
		int			j = (int) (dml_rng_next(rng) % (uint64_t) (i + 1));
		int			t = idx[i];

		idx[i] = idx[j];
		idx[j] = t;
	}
}
