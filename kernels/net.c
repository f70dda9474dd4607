/*-------------------------------------------------------------------------
 *
 * net.c
 *	  A stack of dense layers: allocation, seeded initialization, forward
 *	  and backward passes.  Linear, logistic and softmax regression are the
 *	  one-layer case; the MLP adds hidden layers.
 *
 *-------------------------------------------------------------------------
 */
#include "kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* parameters of a network with these layer sizes */
size_t
dml_net_param_count(int nlayers, const int *sizes)
{
	size_t		n = 0;

	for (int l = 0; l < nlayers; l++)
		n += (size_t) sizes[l + 1] * sizes[l] + sizes[l + 1];
	return n;
}

/* offset of layer l's weight matrix in params */
size_t
dml_net_weight_offset(const DmlNet *net, int layer)
{
	return dml_net_param_count(layer, net->sizes);
}

/* offset of layer l's bias in params */
size_t
dml_net_bias_offset(const DmlNet *net, int layer)
{
	return dml_net_weight_offset(net, layer) +
		(size_t) net->sizes[layer + 1] * net->sizes[layer];
}

/* allocate a network's parameters (zeroed) */
DmlStatus
dml_net_alloc(DmlNet *net, int nlayers, const int *sizes, DmlAct act,
			  DmlLoss loss)
{
	if (nlayers < 1 || nlayers > DML_MAX_LAYERS)
		return DML_ERR_ARG;
	for (int l = 0; l <= nlayers; l++)
		if (sizes[l] < 1 || sizes[l] > DML_MAX_WIDTH)
			return DML_ERR_ARG;
	if ((loss == DML_LOSS_BCE && sizes[nlayers] != 1) ||
		(loss == DML_LOSS_SOFTMAX && sizes[nlayers] < 2))
		return DML_ERR_ARG;
	memset(net, 0, sizeof(*net));
	net->nlayers = nlayers;
	memcpy(net->sizes, sizes, sizeof(int) * (nlayers + 1));
	net->act = act;
	net->loss = loss;
	net->nparams = dml_net_param_count(nlayers, sizes);
	net->params = calloc(net->nparams, sizeof(float));
	return net->params ? DML_OK : DML_ERR_NOMEM;
}

void
dml_net_free(DmlNet *net)
{
	free(net->params);
	net->params = NULL;
}

/* He (relu) or Xavier (otherwise) normal initialization, biases zero */
void
dml_net_init(DmlNet *net, uint64_t seed)
{
	DmlRng		rng;

	dml_rng_seed(&rng, seed);
	for (int l = 0; l < net->nlayers; l++)
	{
		int			C = net->sizes[l];
		int			OC = net->sizes[l + 1];
		float	   *w = net->params + dml_net_weight_offset(net, l);
		float	   *b = net->params + dml_net_bias_offset(net, l);
		double		std;

		if (net->act == DML_ACT_RELU && l < net->nlayers - 1)
			std = sqrt(2.0 / C);
		else
			std = sqrt(2.0 / (C + OC));
		for (size_t i = 0; i < (size_t) OC * C; i++)
			w[i] = (float) (std * dml_rng_normal(&rng));
		memset(b, 0, sizeof(float) * OC);
	}
}

/* widest layer, for the gradient ping-pong buffers */
static int
max_width(const DmlNet *net)
{
	int			w = 0;

	for (int l = 0; l <= net->nlayers; l++)
		if (net->sizes[l] > w)
			w = net->sizes[l];
	return w;
}

/* workspace for up to maxB rows */
DmlStatus
dml_work_alloc(DmlWork *work, const DmlNet *net, int maxB)
{
	size_t		wide = (size_t) maxB * max_width(net);

	memset(work, 0, sizeof(*work));
	work->maxB = maxB;
	for (int l = 1; l <= net->nlayers; l++)
		if ((work->acts[l] = malloc(sizeof(float) * maxB * net->sizes[l])) == NULL)
			goto nomem;
	for (int i = 0; i < 2; i++)
		if ((work->dacts[i] = malloc(sizeof(float) * wide)) == NULL)
			goto nomem;
	return DML_OK;
nomem:
	dml_work_free(work);
	return DML_ERR_NOMEM;
}

void
dml_work_free(DmlWork *work)
{
	for (int l = 0; l <= DML_MAX_LAYERS; l++)
	{
		free(work->acts[l]);
		work->acts[l] = NULL;
	}
	for (int i = 0; i < 2; i++)
	{
		free(work->dacts[i]);
		work->dacts[i] = NULL;
	}
}

/* logits (B,K) for X (B, sizes[0]); hidden activations stay in work */
const float *
dml_net_forward(const DmlNet *net, DmlWork *work, const float *X, int B)
{
	const float *inp = X;

	for (int l = 0; l < net->nlayers; l++)
	{
		int			C = net->sizes[l];
		int			OC = net->sizes[l + 1];
		float	   *out = work->acts[l + 1];

		dense_forward(out, inp, net->params + dml_net_weight_offset(net, l),
					  net->params + dml_net_bias_offset(net, l), B, C, OC);
		if (l < net->nlayers - 1)
			activation_forward(out, out, (size_t) B * OC, net->act);
		inp = out;
	}
	return inp;
}

static double forward_backward(const DmlNet *net, DmlWork *work, float *grads,
							   const float *X, const float *y, int B, float scale,
							   bool accumulate);

/* forward, loss and backward: grads += d(sum loss)/dparams; returns sum loss */
double
dml_net_forward_backward(const DmlNet *net, DmlWork *work, float *grads,
						 const float *X, const float *y, int B)
{
	return dml_net_forward_backward_scaled(net, work, grads, X, y, B, 1.0f);
}

/*
 * As dml_net_forward_backward, with the loss gradient multiplied by scale
 * before the backward pass: grads += scale * d(sum loss)/dparams.  With
 * scale = 1 / (rows in the global minibatch) the summed gradients need no
 * pass of their own after the all-reduce.
 */
double
dml_net_forward_backward_scaled(const DmlNet *net, DmlWork *work, float *grads,
								const float *X, const float *y, int B, float scale)
{
	return forward_backward(net, work, grads, X, y, B, scale, true);
}

/*
 * As dml_net_forward_backward_scaled, but grads is overwritten, not added
 * to: grads = scale * d(sum loss)/dparams, with no pass to clear it first.
 * B must be at least 1.
 */
double
dml_net_gradient(const DmlNet *net, DmlWork *work, float *grads, const float *X,
				 const float *y, int B, float scale)
{
	return forward_backward(net, work, grads, X, y, B, scale, false);
}

static double
forward_backward(const DmlNet *net, DmlWork *work, float *grads, const float *X,
				 const float *y, int B, float scale, bool accumulate)
{
	int			L = net->nlayers;
	int			K = net->sizes[L];
	const float *logits = dml_net_forward(net, work, X, B);
	float	   *dout = work->dacts[0];
	double		loss = 0.0;

	switch (net->loss)
	{
		case DML_LOSS_MSE:
			loss = mse_forward_backward(dout, logits, y, B, K);
			break;
		case DML_LOSS_BCE:
		case DML_LOSS_SOFTMAX:
			if (work->class_weight)
			{
				/* class weights: each row's loss and gradient times its class's weight */
				for (int b = 0; b < B; b++)
				{
					float		w = y[b] >= 0 && y[b] < (net->loss == DML_LOSS_BCE ? 2 : K) ?
						work->class_weight[(int) y[b]] : NAN;
					float	   *d = dout + (size_t) b * K;
					const float *z = logits + (size_t) b * K;

					loss += w * (net->loss == DML_LOSS_BCE ?
								 bce_forward_backward(d, z, y + b, 1) :
								 softmax_forward_backward(d, NULL, z, y + b, 1, K));
					for (int k = 0; k < K; k++)
						d[k] *= w;
				}
			}
			else if (net->loss == DML_LOSS_BCE)
				loss = bce_forward_backward(dout, logits, y, B);
			else
				loss = softmax_forward_backward(dout, NULL, logits, y, B, K);
			break;
	}
	if (scale != 1.0f)
		for (size_t i = 0; i < (size_t) B * K; i++)
			dout[i] *= scale;

	for (int l = L - 1; l >= 0; l--)
	{
		int			C = net->sizes[l];
		int			OC = net->sizes[l + 1];
		const float *inp = l == 0 ? X : work->acts[l];
		float	   *dinp = l == 0 ? NULL : work->dacts[(L - l) & 1];

		dense_backward_acc(dinp, grads + dml_net_weight_offset(net, l),
						   grads + dml_net_bias_offset(net, l), dout, inp,
						   net->params + dml_net_weight_offset(net, l), B, C, OC, accumulate);
		if (l > 0)
		{
			/* through the hidden activation of layer l-1's output */
			activation_backward(dinp, dinp, work->acts[l], (size_t) B * C, net->act);
			dout = dinp;
		}
	}
	return loss;
}

/* logits to predictions in place: sigmoid for BCE, softmax for softmax */
void
dml_net_output(const DmlNet *net, float *logits, int B)
{
	int			K = net->sizes[net->nlayers];

	if (net->loss == DML_LOSS_BCE)
		activation_forward(logits, logits, (size_t) B * K, DML_ACT_SIGMOID);
	else if (net->loss == DML_LOSS_SOFTMAX)
	{
		for (int b = 0; b < B; b++)
		{
			float	   *z = logits + (size_t) b * K;
			float		maxz = z[0];
			float		denom = 0.0f;

			for (int k = 1; k < K; k++)
				if (z[k] > maxz)
					maxz = z[k];
			for (int k = 0; k < K; k++)
				denom += (z[k] = expf(z[k] - maxz));
			for (int k = 0; k < K; k++)
				z[k] /= denom;
		}
	}
}
