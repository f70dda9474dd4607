/*-------------------------------------------------------------------------
 *
 * net.cu
 *	  DmlGpuNet: the network of net.c with its parameters, gradients,
 *	  optimizer state and activations on one device, all in one slab.
 *
 * The passes mirror dml_net_forward / dml_net_forward_backward line for
 * line, with the bias and hidden activation fused into the forward GEMM's
 * epilogue.  Rows come in as device pointers, so a minibatch is a slice of
 * a device-resident dataset (X + row0 * sizes[0]) with no copy.
 *
 *-------------------------------------------------------------------------
 */
#include "common.cuh"

#include <stdio.h>
#include <string.h>

#define SLAB_ALIGN	256

/* bytes rounded up to the slab's alignment */
static size_t
aligned(size_t bytes)
{
	return (bytes + SLAB_ALIGN - 1) / SLAB_ALIGN * SLAB_ALIGN;
}

/* widest layer, for the gradient ping-pong buffers */
static int
max_width(const int *sizes, int nlayers)
{
	int			w = 0;

	for (int l = 0; l <= nlayers; l++)
		if (sizes[l] > w)
			w = sizes[l];
	return w;
}

/* elements of optimizer state per parameter */
static int
state_per_param(DmlOptimizer opt)
{
	switch (opt)
	{
		case DML_OPT_SGD:
			return 0;
		case DML_OPT_MOMENTUM:
		case DML_OPT_NESTEROV:
			return 1;
		case DML_OPT_ADAM:
			return 2;
	}
	return 2;
}

/* the slab's size; carve_slab lays it out in the same order */
size_t
dml_gpu_net_bytes(const DmlNet *net, int maxB, DmlOptimizer opt)
{
	size_t		p = aligned(net->nparams * sizeof(float));
	size_t		bytes = aligned(sizeof(double));

	bytes += p * (2 + state_per_param(opt));
	for (int l = 1; l <= net->nlayers; l++)
		bytes += aligned((size_t) maxB * net->sizes[l] * sizeof(float));
	bytes += 2 * aligned((size_t) maxB * max_width(net->sizes, net->nlayers) * sizeof(float));
	return bytes;
}

/* point g's arrays into the slab */
static void
carve_slab(DmlGpuNet *g)
{
	char	   *p = (char *) g->slab;
	size_t		pbytes = aligned(g->nparams * sizeof(float));
	size_t		wide = aligned((size_t) g->maxB * max_width(g->sizes, g->nlayers) * sizeof(float));
	int			nstate = state_per_param(g->opt);

	g->loss_sum = (double *) p;
	p += aligned(sizeof(double));
	g->params = (float *) p;
	p += pbytes;
	g->grads = (float *) p;
	p += pbytes;
	g->opt_m = nstate >= 1 ? (float *) p : NULL;
	p += nstate >= 1 ? pbytes : 0;
	g->opt_v = nstate >= 2 ? (float *) p : NULL;
	p += nstate >= 2 ? pbytes : 0;
	g->acts[0] = NULL;
	for (int l = 1; l <= g->nlayers; l++)
	{
		g->acts[l] = (float *) p;
		p += aligned((size_t) g->maxB * g->sizes[l] * sizeof(float));
	}
	g->dacts[0] = (float *) p;
	p += wide;
	g->dacts[1] = (float *) p;
}

/* release everything g holds; safe on a zeroed or half-built g */
void
dml_gpu_net_free(DmlGpuNet *g)
{
	if (g->cublas != NULL)
		cublasDestroy(g->cublas);
	if (g->stream != NULL)
		cudaStreamDestroy(g->stream);
	if (g->slab != NULL)
		cudaFree(g->slab);
	memset(g, 0, sizeof(*g));
}

/* shape, budget-check and allocate g (g zeroed by the caller) */
static int
gpu_net_alloc(DmlGpuNet *g, const DmlNet *net, int maxB, DmlOptimizer opt,
			  int device, int tf32)
{
	size_t		bytes;
	char		what[96];

	ARG_CHECK(net->nlayers >= 1 && net->nlayers <= DML_MAX_LAYERS);
	ARG_CHECK(maxB >= 1);
	for (int l = 0; l <= net->nlayers; l++)
		ARG_CHECK(net->sizes[l] >= 1 && net->sizes[l] <= DML_MAX_WIDTH);

	g->nlayers = net->nlayers;
	memcpy(g->sizes, net->sizes, sizeof(int) * (net->nlayers + 1));
	g->act = net->act;
	g->loss = net->loss;
	g->nparams = net->nparams;
	g->maxB = maxB;
	g->device = device;
	g->opt = opt;

	CUDA_CHECK(cudaSetDevice(device));
	/* the budget is checked before the first allocation, cuBLAS's included */
	bytes = dml_gpu_net_bytes(net, maxB, opt);
	snprintf(what, sizeof(what), "a network of %zu parameters for %d rows", net->nparams, maxB);
	STATUS_CHECK(dml_gpu_check_free(bytes, what));

	CUDA_CHECK(cudaMalloc(&g->slab, bytes));
	g->bytes = bytes;
	/*
	 * A blocking stream: it stays ordered after plain cudaMemcpy/cudaMemset
	 * on the legacy default stream (dataset uploads, test harnesses).
	 */
	CUDA_CHECK(cudaStreamCreateWithFlags(&g->stream, cudaStreamDefault));
	CUDA_CHECK(cudaMemsetAsync(g->slab, 0, bytes, g->stream));
	STATUS_CHECK(dml_cublas_create(&g->cublas, tf32));
	CUBLAS_CHECK(cublasSetStream(g->cublas, g->stream));
	carve_slab(g);
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
	return DML_OK;
}

/* allocate a device network shaped like net; on failure g holds nothing */
int
dml_gpu_net_alloc(DmlGpuNet *g, const DmlNet *net, int maxB, DmlOptimizer opt,
				  int device, int tf32, char *errbuf, size_t errlen)
{
	int			st;

	memset(g, 0, sizeof(*g));
	st = gpu_net_alloc(g, net, maxB, opt, device, tf32);
	if (st != DML_OK)
	{
		dml_cuda_copy_error(errbuf, errlen);
		dml_gpu_net_free(g);
	}
	return st;
}

/* run an inner function and copy its error into the caller's buffer */
#define WITH_ERRBUF(call) \
	do { \
		int st_ = (call); \
		if (st_ != DML_OK) \
			dml_cuda_copy_error(errbuf, errlen); \
		return st_; \
	} while (0)

/* host params to the device, synchronously */
static int
gpu_net_upload(DmlGpuNet *g, const float *params)
{
	CUDA_CHECK(cudaMemcpyAsync(g->params, params, g->nparams * sizeof(float),
							   cudaMemcpyHostToDevice, g->stream));
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
	return DML_OK;
}

/* params (nparams, host) onto the device */
int
dml_gpu_net_upload(DmlGpuNet *g, const float *params, char *errbuf, size_t errlen)
{
	WITH_ERRBUF(gpu_net_upload(g, params));
}

/* device params to the host, after queued work */
static int
gpu_net_download(DmlGpuNet *g, float *params)
{
	CUDA_CHECK(cudaMemcpyAsync(params, g->params, g->nparams * sizeof(float),
							   cudaMemcpyDeviceToHost, g->stream));
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
	return DML_OK;
}

/* params (nparams, host) from the device, after all queued work */
int
dml_gpu_net_download(DmlGpuNet *g, float *params, char *errbuf, size_t errlen)
{
	WITH_ERRBUF(gpu_net_download(g, params));
}

/* zero the optimizer state on the stream */
static int
gpu_net_reset_optimizer(DmlGpuNet *g)
{
	size_t		bytes = g->nparams * sizeof(float);

	if (g->opt_m != NULL)
		CUDA_CHECK(cudaMemsetAsync(g->opt_m, 0, bytes, g->stream));
	if (g->opt_v != NULL)
		CUDA_CHECK(cudaMemsetAsync(g->opt_v, 0, bytes, g->stream));
	g->step = 0;
	return DML_OK;
}

/* optimizer state to zero, step count to 0 */
int
dml_gpu_net_reset_optimizer(DmlGpuNet *g, char *errbuf, size_t errlen)
{
	WITH_ERRBUF(gpu_net_reset_optimizer(g));
}

/* zero the gradients on the stream */
static int
gpu_net_zero_grads(DmlGpuNet *g)
{
	CUDA_CHECK(cudaMemsetAsync(g->grads, 0, g->nparams * sizeof(float), g->stream));
	return DML_OK;
}

/* grads (nparams) = 0 */
int
dml_gpu_net_zero_grads(DmlGpuNet *g, char *errbuf, size_t errlen)
{
	WITH_ERRBUF(gpu_net_zero_grads(g));
}

/* weights of layer l */
static inline const float *
weight_of(const DmlGpuNet *g, int l)
{
	return g->params + dml_net_param_count(l, g->sizes);
}

/* bias of layer l */
static inline const float *
bias_of(const DmlGpuNet *g, int l)
{
	return weight_of(g, l) + (size_t) g->sizes[l + 1] * g->sizes[l];
}

/* logits (B,K) of X (B, sizes[0]) into acts[nlayers] */
static int
gpu_net_forward(DmlGpuNet *g, const float **logits, const float *X, int B)
{
	const float *inp = X;

	ARG_CHECK(B >= 1 && B <= g->maxB);
	for (int l = 0; l < g->nlayers; l++)
	{
		DmlAct		act = l < g->nlayers - 1 ? g->act : DML_ACT_IDENTITY;

		STATUS_CHECK(dense_forward_act_cuda(g->acts[l + 1], inp, weight_of(g, l), bias_of(g, l),
											B, g->sizes[l], g->sizes[l + 1], act,
											g->cublas, g->stream));
		inp = g->acts[l + 1];
	}
	*logits = inp;
	return DML_OK;
}

/* logits of B rows, on the device */
int
dml_gpu_net_forward(DmlGpuNet *g, const float **logits, const float *X, int B,
					char *errbuf, size_t errlen)
{
	WITH_ERRBUF(gpu_net_forward(g, logits, X, B));
}

/* as dml_net_forward_backward: grads += d(sum loss)/dparams, loss_sum += */
static int
gpu_net_forward_backward(DmlGpuNet *g, const float *X, const float *y, int B)
{
	int			L = g->nlayers;
	int			K = g->sizes[L];
	const float *logits;
	float	   *dout = g->dacts[0];

	STATUS_CHECK(gpu_net_forward(g, &logits, X, B));
	switch (g->loss)
	{
		case DML_LOSS_MSE:
			STATUS_CHECK(mse_forward_backward_cuda(g->loss_sum, dout, logits, y, B, K, g->stream));
			break;
		case DML_LOSS_BCE:
			STATUS_CHECK(bce_forward_backward_cuda(g->loss_sum, dout, logits, y, B, g->stream));
			break;
		case DML_LOSS_SOFTMAX:
			STATUS_CHECK(softmax_forward_backward_cuda(g->loss_sum, dout, NULL, logits, y, B, K,
													   g->stream));
			break;
		default:
			ARG_CHECK(g->loss >= DML_LOSS_MSE && g->loss <= DML_LOSS_SOFTMAX);
	}

	for (int l = L - 1; l >= 0; l--)
	{
		int			C = g->sizes[l];
		int			OC = g->sizes[l + 1];
		const float *inp = l == 0 ? X : g->acts[l];
		float	   *dinp = l == 0 ? NULL : g->dacts[(L - l) & 1];
		size_t		woff = dml_net_param_count(l, g->sizes);

		STATUS_CHECK(dense_backward_cuda(dinp, g->grads + woff, g->grads + woff + (size_t) OC * C,
										 dout, inp, weight_of(g, l), B, C, OC,
										 g->cublas, g->stream));
		if (l > 0)
		{
			/* through the hidden activation of layer l-1's output */
			STATUS_CHECK(activation_backward_cuda(dinp, dinp, g->acts[l], (size_t) B * C,
												  g->act, g->stream));
			dout = dinp;
		}
	}
	return DML_OK;
}

/* gradients of B rows added into g->grads */
int
dml_gpu_net_forward_backward(DmlGpuNet *g, const float *X, const float *y, int B,
							 char *errbuf, size_t errlen)
{
	WITH_ERRBUF(gpu_net_forward_backward(g, X, y, B));
}

/* read and zero the device loss sum */
static int
gpu_net_take_loss(DmlGpuNet *g, double *loss)
{
	CUDA_CHECK(cudaMemcpyAsync(loss, g->loss_sum, sizeof(double),
							   cudaMemcpyDeviceToHost, g->stream));
	CUDA_CHECK(cudaStreamSynchronize(g->stream));
	CUDA_CHECK(cudaMemsetAsync(g->loss_sum, 0, sizeof(double), g->stream));
	return DML_OK;
}

/* *loss = losses summed since the last take; zeroes the sum */
int
dml_gpu_net_take_loss(DmlGpuNet *g, double *loss, char *errbuf, size_t errlen)
{
	WITH_ERRBUF(gpu_net_take_loss(g, loss));
}

/* scale the gradients and apply one optimizer step */
static int
gpu_net_step(DmlGpuNet *g, const DmlOptim *o, float grad_scale)
{
	size_t		n = g->nparams;

	if (grad_scale != 1.0f)
		STATUS_CHECK(scale_cuda(g->grads, n, grad_scale, g->stream));
	STATUS_CHECK(optim_step_cuda(g->params, g->opt_m, g->opt_v, g->grads, n, o, g->step + 1,
								 g->stream));
	g->step++;
	return DML_OK;
}

/* grads *= grad_scale, then one step of o */
int
dml_gpu_net_step(DmlGpuNet *g, const DmlOptim *o, float grad_scale,
				 char *errbuf, size_t errlen)
{
	WITH_ERRBUF(gpu_net_step(g, o, grad_scale));
}
