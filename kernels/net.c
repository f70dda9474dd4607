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
#include "fastmath.h"

#include <cblas.h>
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
	net->params = dml_calloc_lines(net->nparams, sizeof(float));
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
		if ((work->acts[l] = dml_malloc_lines((size_t) maxB * net->sizes[l], sizeof(float))) == NULL)
			goto nomem;
	for (int i = 0; i < 2; i++)
		if ((work->dacts[i] = dml_malloc_lines(wide, sizeof(float))) == NULL)
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

		dense_forward_act(out, inp, net->params + dml_net_weight_offset(net, l),
						  net->params + dml_net_bias_offset(net, l), B, C, OC,
						  l < net->nlayers - 1 ? net->act : DML_ACT_IDENTITY);
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

/*
 * One-output single-layer nets (linear and logistic regression), fused:
 * z = X w + b in one sgemv over the minibatch, then one pass over z that
 * computes each row's loss and turns z into its residual in place (times
 * the class weight and scale, in the reference path's order; the logistic
 * loss vectorized with fastmath.h's dml_expf_neg and dml_log1pf_unit, no libm
 * calls), then grads += X^T r in one sgemv.  The reference path's two
 * sgemm calls with one column (slow in OpenBLAS: packing for a
 * matrix-matrix product) and its separate loss pass go; z and then the
 * residuals live in work->acts[1] (B floats).
 * The residuals agree with the reference path's to float32 rounding, and
 * the sums over rows are taken in another order, so the gradients agree to
 * float32 rounding, not bit for bit.  Softmax (K > 1) stays on sgemm: a
 * per-row fused pass measured slower there (bench/micro/epoch).
 */
#define FUSE_ROWS			16
/* a chunk's lanes, added lane by lane (each instruction set the same sums) */
typedef double DmlLanesD __attribute__((vector_size(FUSE_ROWS * sizeof(double))));
typedef float DmlLanesF __attribute__((vector_size(FUSE_ROWS * sizeof(float))));

/*
 * Rows of at most 32 inputs (the fused pass's z = X w and X^T r) on
 * kernels of dml's own (narrow.h, for AVX-512 and for AVX2 with FMA)
 * instead of sgemv: at 256 x 20 OpenBLAS's two calls took 1.6 us a step,
 * most of it the calls' own work, against about 0.3 us of arithmetic.
 * The forward pass multiplies a vector's width of rows by w and adds each
 * row's lanes in one transposing reduction; the backward pass sums r[b]
 * x_b in sets of accumulators, added at the end.  Sums in another order
 * than sgemv's (and each instruction set in its own): the same to float32
 * rounding.  Other CPUs, wider rows and the single-ISA builds keep sgemv.
 */
#define NARROW_C	32
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(DML_NO_CLONES)
#define NARROW 1

#define SIMD_ISA 512
#include "simd.h"
#include "narrow.h"
#undef SIMD_ISA
#define SIMD_ISA 256
#include "simd.h"
#include "narrow.h"
#undef SIMD_ISA

static void
narrow_forward(float *z, const float *X, const float *w, int B, int C)
{
	SIMD_DISPATCH(narrow_forward, z, X, w, B, C);
}

static void
narrow_backward(float *g, const float *X, const float *r, int B, int C)
{
	SIMD_DISPATCH(narrow_backward, g, X, r, B, C);
}

static void
tile_forward(float *z, const DmlTileRun *runs, int nruns, const float *w, int C)
{
	SIMD_DISPATCH(tile_forward, z, runs, nruns, w, C);
}

static void
tile_backward(float *g, const DmlTileRun *runs, int nruns, const float *res, int C)
{
	SIMD_DISPATCH(tile_backward, g, runs, nruns, res, C);
}

static bool
narrow_applies(int C)
{
	return C <= NARROW_C && dml_simd() >= 256;
}
#else
#define NARROW 0
#endif

/*
 * z[b] += X[b] . w over B rows of C inputs, C apart: the narrow kernel
 * where it applies, else SGEMV (the fused pass's forward, and Newton's
 * direction logits, workers/exact.c)
 */
void
dml_rows_dot(float *z, const float *X, const float *w, int B, int C)
{
#if NARROW
	if (narrow_applies(C))
	{
		narrow_forward(z, X, w, B, C);
		return;
	}
#endif
	cblas_sgemv(CblasRowMajor, CblasNoTrans, B, C, 1.0f, X, C, w, 1, 1.0f, z, 1);
}

static bool
fused_applies(const DmlNet *net, const DmlWork *work, int B)
{
	/* one output: MSE or BCE (dml_net_alloc gives softmax two or more) */
	return net->nlayers == 1 && net->sizes[1] == 1 && !work->unfused && B <= work->maxB;
}

/*
 * The fused pass's middle: each row's loss from its logit z[b] (summed,
 * returned) and z[b] turned into its residual in place, their sum added
 * to *gb (the bias's gradient)
 */
DML_VECTORIZE DML_FUSE_MATH static double
fused_residuals(const DmlNet *net, const float *class_weight, float *z, const float *y, int B,
				float scale, float *gb)
{
	double		sum = 0.0;
	bool		bce = net->loss == DML_LOSS_BCE;
	/*
	 * the loss and the bias's gradient summed a lane per row of a chunk,
	 * the lanes added in order at the end: one vector add a chunk each, in
	 * place of a chain of FUSE_ROWS dependent scalar adds (the whole pass
	 * over 256 cached rows of 20 took 3.6 ns a row instead of 4.25)
	 */
	DmlLanesD	lsum = {0};
	DmlLanesF	gsum = {0};

	for (int b0 = 0; b0 < B; b0 += FUSE_ROWS)
	{
		int			R = B - b0 < FUSE_ROWS ? B - b0 : FUSE_ROWS;
		float	   *zr = z + b0;
		const float *yr = y + b0;
		double		loss[FUSE_ROWS];

		if (bce)
		{
			/*
			 * as bce_forward_backward, with e = e^-|z| shared by the loss
			 * and the sigmoid: 1 / (1 + e) for z >= 0, e / (1 + e) below
			 */
			for (int i = 0; i < R; i++)
			{
				float		zi = zr[i];
				float		t = yr[i];
				float		e = dml_expf_neg(-fabsf(zi));
				float		q = 1.0f / (1.0f + e);

				loss[i] = (zi > 0.0f ? zi : 0.0f) + dml_log1pf_unit(e) - t * zi;
				zr[i] = (zi >= 0.0f ? 1.0f : e) * q - t;
			}
			if (class_weight)
				for (int i = 0; i < R; i++)
				{
					float		cw = yr[i] >= 0 && yr[i] < 2 ? class_weight[(int) yr[i]] : NAN;

					loss[i] *= cw;
					zr[i] *= cw;
				}
		}
		else
			/* as mse_forward_backward */
			for (int i = 0; i < R; i++)
			{
				float		d = zr[i] - yr[i];

				loss[i] = (double) d * d;
				zr[i] = 2.0f * d;
			}
		if (scale != 1.0f)
			for (int i = 0; i < R; i++)
				zr[i] *= scale;
		if (R == FUSE_ROWS)
		{
			DmlLanesD	l;
			DmlLanesF	g;

			memcpy(&l, loss, sizeof(l));
			memcpy(&g, zr, sizeof(g));
			lsum += l;
			gsum += g;
		}
		else
			for (int i = 0; i < R; i++)
			{
				lsum[i] += loss[i];
				gsum[i] += zr[i];
			}
	}
	for (int i = 0; i < FUSE_ROWS; i++)
	{
		sum += lsum[i];
		*gb += gsum[i];
	}
	return sum;
}

static double
forward_backward_fused(const DmlNet *net, const float *class_weight, float *grads,
					   const float *X, const float *y, int B, float scale, bool accumulate,
					   float *z)
{
	int			C = net->sizes[0];
	const float *w = net->params;
	float		bias = net->params[C];
	double		sum;
	float		gb = accumulate ? grads[C] : 0.0f;

	if (!accumulate)
		memset(grads, 0, sizeof(float) * C);
	for (int b = 0; b < B; b++)
		z[b] = bias;
	dml_rows_dot(z, X, w, B, C);
	sum = fused_residuals(net, class_weight, z, y, B, scale, &gb);
#if NARROW
	if (narrow_applies(C))
		narrow_backward(grads, X, z, B, C);
	else
#endif
		cblas_sgemv(CblasRowMajor, CblasTrans, B, C, 1.0f, X, C, z, 1, 1.0f, grads, 1);
	grads[C] = gb;
	return sum;
}

/*
 * Whether dml_net_gradient_tiles takes a minibatch of B rows: a one-output
 * single layer (linear or logistic regression) whose rows narrow.h's
 * kernels take
 */
bool
dml_net_tile_applies(const DmlNet *net, const DmlWork *work, int B)
{
#if NARROW
	return fused_applies(net, work, B) && narrow_applies(net->sizes[0]);
#else
	(void) net;
	(void) work;
	(void) B;
	return false;
#endif
}

/*
 * As dml_net_gradient over the B rows of the tiled runs runs[0..nruns)
 * (kernels.h), their labels in y; only where dml_net_tile_applies.  The
 * logits sum a row's products in two alternating sums (even and odd
 * features), the weights' gradient each feature's products in the lanes
 * of a vector (a row's lane its place in its run's vectors), the lanes
 * added at the end: the same model as over the rows one after another to
 * float32 rounding, not bit for bit.  A vector of a feature's rows is one
 * multiply-add, with no transposing sum of a row's lanes and no lanes left
 * empty by a row of 20: over cached rows of 20 in runs of 48 the pass took
 * 2.9 ns a row against 3.6 for the rows' (bench/SPEED-NOTES.md), and the
 * step copies no rows.
 */
double
dml_net_gradient_tiles(const DmlNet *net, DmlWork *work, float *grads, const DmlTileRun *runs,
					   int nruns, const float *y, int B, float scale)
{
#if NARROW
	int			C = net->sizes[0];
	const float *w = net->params;
	float	   *z = work->acts[1];
	float		gb = 0.0f;
	double		sum;

	for (int b = 0; b < B; b++)
		z[b] = net->params[C];
	tile_forward(z, runs, nruns, w, C);
	sum = fused_residuals(net, work->class_weight, z, y, B, scale, &gb);
	tile_backward(grads, runs, nruns, z, C);
	grads[C] = gb;
	return sum;
#else
	(void) net;
	(void) work;
	(void) grads;
	(void) runs;
	(void) nruns;
	(void) y;
	(void) B;
	(void) scale;
	return NAN;
#endif
}

/*
 * The loss of logits (B,K) against y, summed, and its gradient in dout
 * (each row's times its class's weight, then all times scale)
 */
static double
loss_delta(const DmlNet *net, const DmlWork *work, const float *logits, float *dout,
		   const float *y, int B, int K, float scale)
{
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
	return loss;
}

static double
forward_backward(const DmlNet *net, DmlWork *work, float *grads, const float *X,
				 const float *y, int B, float scale, bool accumulate)
{
	int			L = net->nlayers;
	int			K = net->sizes[L];
	const float *logits;
	float	   *dout = work->dacts[0];
	double		loss = 0.0;

	if (fused_applies(net, work, B))
		return forward_backward_fused(net, work->class_weight, grads, X, y, B,
									  scale, accumulate, work->acts[1]);
	logits = dml_net_forward(net, work, X, B);
	loss = loss_delta(net, work, logits, dout, y, B, K, scale);

	for (int l = L - 1; l >= 0; l--)
	{
		int			C = net->sizes[l];
		int			OC = net->sizes[l + 1];
		const float *inp = l == 0 ? X : work->acts[l];
		float	   *dinp = l == 0 ? NULL : work->dacts[(L - l) & 1];

		/* dinp through the hidden activation of layer l-1's output, inp */
		dense_backward_act(dinp, grads + dml_net_weight_offset(net, l),
						   grads + dml_net_bias_offset(net, l), dout, inp,
						   net->params + dml_net_weight_offset(net, l), B, C, OC, accumulate,
						   net->act);
		if (work->ready != NULL && !accumulate)
			work->ready(work->ready_arg, dml_net_weight_offset(net, l));
		if (l > 0)
			dout = dinp;
	}
	return loss;
}

/*
 * Whether dml_net_gradient_rows takes a minibatch of B rows: a single
 * layer of 2 to 12 outputs (softmax regression, or linear regression of
 * several targets) where skinny layers run (layers.c).
 */
bool
dml_net_rows_applies(const DmlNet *net, const DmlWork *work, int B)
{
	return net->nlayers == 1 && net->sizes[1] >= 2 && !work->unfused && B <= work->maxB &&
		dml_skinny_applies(B, net->sizes[1]);
}

/*
 * dml_net_forward over the rows idx[0..B) of X read where they lie
 * (idx[B..avail) are read next); only where dml_net_rows_applies.  Bit for
 * bit the gathered rows' logits: an evaluation pass copies no rows.
 */
const float *
dml_net_forward_rows(const DmlNet *net, DmlWork *work, const float *X, const DmlRows8 *R8,
					 const int *idx, int B, int avail)
{
	float	   *logits = work->acts[1];

	dense_forward_rows(logits, X, R8, NULL, idx, B, avail,
					   net->params + dml_net_weight_offset(net, 0),
					   net->params + dml_net_bias_offset(net, 0), net->sizes[0], net->sizes[1]);
	return logits;
}

/*
 * As dml_net_gradient over the rows idx[0..B) of X (n, sizes[0]), read
 * where they lie instead of gathered first (idx[B..avail) are read next),
 * with y the minibatch's targets in that order; only where
 * dml_net_rows_applies.  Bit for bit the gathered minibatch's gradient.
 */
double
dml_net_gradient_rows(const DmlNet *net, DmlWork *work, float *grads, const float *X,
					  const DmlRows8 *R8, const int *idx, int B, int avail, const float *y,
					  float scale)
{
	int			C = net->sizes[0],
				K = net->sizes[1];
	float	   *logits = work->acts[1];
	/*
	 * byte rows: the forward pass leaves their float32 rows in dacts[1] (B,
	 * C), which the weight gradient reads in order, instead of rebuilding
	 * them from the bytes
	 */
	float	   *stash = R8 ? work->dacts[1] : NULL;
	double		loss;

	dense_forward_rows(logits, X, R8, stash, idx, B, avail,
					   net->params + dml_net_weight_offset(net, 0),
					   net->params + dml_net_bias_offset(net, 0), C, K);
	loss = loss_delta(net, work, logits, work->dacts[0], y, B, K, scale);
	dense_wgrad_rows(grads + dml_net_weight_offset(net, 0), grads + dml_net_bias_offset(net, 0),
					 work->dacts[0], stash ? stash : X, stash ? NULL : idx, B, C, K, false);
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
