/*-------------------------------------------------------------------------
 *
 * layers.c
 *	  Dense layers on OpenBLAS sgemm and their activations.
 *
 * The CPU reference; cuda/layers.cu is its CUDA twin, name for name.
 * Single-threaded by design: each MPI rank pins OpenBLAS to one thread,
 * and the backend never starts a thread pool.
 *
 *-------------------------------------------------------------------------
 */
#include "kernels.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

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

