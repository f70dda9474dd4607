/*-------------------------------------------------------------------------
 *
 * cuda_kernels.h
 *	  The CUDA mirror of kernels.h: dense layers on cuBLAS, our own kernels
 *	  for bias, activations, losses and optimizers, a device-resident
 *	  network (DmlGpuNet) and an NCCL wrapper.
 *
 * Naming.  Every CPU kernel `foo(args...)` has a CUDA twin
 * `foo_cuda(args..., cudaStream_t stream)`: the same arguments in the same
 * order, every pointer a device pointer, the stream last.  Kernels that
 * multiply matrices also take the cuBLAS handle just before the stream.
 * A CPU kernel that returns a loss sum instead gets a leading output
 * `double *loss` (device, one element) that the loss is ADDED to, so a
 * whole epoch can be summed on the device and read once.  Functions with
 * no CPU twin (gather_rows_cuda, scale_cuda) follow the same order.
 * dense_forward_act_cuda's CPU twin, dense_forward_act, takes the
 * activation last, after the sizes, as dense_backward_act does.  Higher-level functions carry the
 * prefix dml_gpu_ (device, network) or dml_nccl_ (communication).
 *
 * Errors.  Every function returns an int: DML_OK (0), a DmlStatus from
 * kernels.h, or one of the DML_ERR_CUDA.. codes below.  Kernels never
 * exit() or abort().  The launchers record what failed, with file and
 * line, in a per-thread buffer read by dml_cuda_last_error(); the
 * dml_gpu_ and dml_nccl_ functions also copy it into the errbuf (errlen
 * bytes) they are given.  Launches are asynchronous: an error inside a
 * kernel shows up at the next synchronizing call (download, take_loss,
 * nccl_wait).
 *
 * Precision.  GEMMs run in strict FP32 unless TF32 is switched on for a
 * handle with dml_cublas_set_tf32(); the choice is always explicit.
 *
 * This header is plain C (it is included by the C worker): only the CUDA
 * runtime and cuBLAS C types appear, NCCL stays behind an opaque struct.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_CUDA_KERNELS_H
#define DML_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>
#include <cublas_v2.h>

#ifdef __cplusplus
extern "C"
{
#endif

/* kernels.h has no C++ guard of its own: its functions are C (layers.c, optim.c, net.c, ...) */
#include "kernels.h"

/* status codes beyond DmlStatus */
#define DML_ERR_CUDA		100		/* a CUDA runtime or cuBLAS call failed */
#define DML_ERR_NCCL		101		/* an NCCL call failed, or its async error */
#define DML_ERR_DEVMEM		102		/* not enough free device memory */
#define DML_ERR_NODEVICE	103		/* no CUDA device, or no driver */
#define DML_ERR_TIMEOUT		104		/* the watchdog gave up on a collective */

/* device memory kept free for cuBLAS workspaces and the context's growth */
#define DML_GPU_RESERVE_BYTES	((size_t) 64 << 20)

/* bytes of an ncclUniqueId, as broadcast by the worker through MPI */
#define DML_NCCL_ID_BYTES	128

/* name of any status this header or kernels.h defines */
extern const char *dml_cuda_status_string(int st);

/* the last error recorded on this thread: "file:line: call: reason" */
extern const char *dml_cuda_last_error(void);

/* ---------------------------------------------------------------------
 * Devices and handles (common.cu)
 * --------------------------------------------------------------------- */

/* CUDA devices visible; 0, cleanly, when there is no driver or device */
extern int	dml_gpu_device_count(void);

/* create device's context and cuBLAS's state in a thread (once), and join it */
extern void dml_gpu_warm_start(int device);
extern void dml_gpu_warm_wait(void);

/* a cuBLAS handle on the current device; tf32 = 0 strict FP32, 1 TF32 */
extern int	dml_cublas_create(cublasHandle_t *h, int tf32);

/* switch a handle's GEMMs between strict FP32 (0) and TF32 tensor cores (1) */
extern int	dml_cublas_set_tf32(cublasHandle_t h, int tf32);

/*
 * Copy n floats to a fresh device array *dptr, after checking free memory
 * (a whole dataset, say; minibatches are then slices by pointer offset).
 * what names the array in the error message.
 */
extern int	dml_gpu_upload(float **dptr, const float *host, size_t n,
						   const char *what, char *errbuf, size_t errlen);
extern void dml_gpu_free(void *dptr);

/* ---------------------------------------------------------------------
 * Layers (layers.cu).  Shapes as in kernels.h, all device memory.
 * --------------------------------------------------------------------- */

/* out (B,OC) = inp (B,C) @ weight (OC,C)^T + bias (OC); bias may be NULL */
extern int	dense_forward_cuda(float *out, const float *inp, const float *weight,
							   const float *bias, int B, int C, int OC,
							   cublasHandle_t h, cudaStream_t stream);

/* out (B,OC) = act(inp @ weight^T + bias): the bias and activation in one pass */
extern int	dense_forward_act_cuda(float *out, const float *inp, const float *weight,
								   const float *bias, int B, int C, int OC,
								   DmlAct act, cublasHandle_t h, cudaStream_t stream);

/*
 * dweight (OC,C) += dout (B,OC)^T @ inp (B,C); dbias (OC) += colsum(dout);
 * dinp (B,C) = dout @ weight, skipped when dinp is NULL.
 */
extern int	dense_backward_cuda(float *dinp, float *dweight, float *dbias,
								const float *dout, const float *inp,
								const float *weight, int B, int C, int OC,
								cublasHandle_t h, cudaStream_t stream);

/* out (n) = act(inp (n)); may run in place */
extern int	activation_forward_cuda(float *out, const float *inp, size_t n,
									DmlAct act, cudaStream_t stream);

/* dinp (n) = dout (n) * act'(.), from the activation's output (n); in place allowed */
extern int	activation_backward_cuda(float *dinp, const float *dout,
									 const float *out, size_t n, DmlAct act,
									 cudaStream_t stream);

/* out (B,C) = inp[idx[b]] row by row; idx (B) on the device */
extern int	gather_rows_cuda(float *out, const float *inp, const int *idx,
							 int B, int C, cudaStream_t stream);

/* x (n) *= alpha */
extern int	scale_cuda(float *x, size_t n, float alpha, cudaStream_t stream);

/* small layers of at most 16 outputs on dml's own kernels (1, the default) or cuBLAS (0) */
extern void dml_cuda_set_skinny(int on);

/* ---------------------------------------------------------------------
 * Losses (losses.cu): forward and backward fused; *loss += sum of rows'
 * losses (double, on the device); dlogits as on the CPU.  A softmax label
 * outside 0..K-1 makes the loss NaN instead of writing out of bounds.
 * --------------------------------------------------------------------- */

extern int	mse_forward_backward_cuda(double *loss, float *dlogits,
									  const float *logits, const float *y,
									  int B, int K, cudaStream_t stream);

extern int	bce_forward_backward_cuda(double *loss, float *dlogits,
									  const float *logits, const float *y,
									  int B, cudaStream_t stream);

/* probs (B,K) may be NULL */
extern int	softmax_forward_backward_cuda(double *loss, float *dlogits,
										  float *probs, const float *logits,
										  const float *y, int B, int K,
										  cudaStream_t stream);

/* ---------------------------------------------------------------------
 * Optimizers (optim.cu), as optim.c; Adam's bias corrections are computed
 * on the host exactly as the CPU computes them.
 * --------------------------------------------------------------------- */

extern int	sgd_update_cuda(float *params, const float *grads, size_t n,
							float lr, float weight_decay, cudaStream_t stream);

extern int	momentum_update_cuda(float *params, float *velocity,
								 const float *grads, size_t n, float lr,
								 float mu, float weight_decay, int nesterov,
								 cudaStream_t stream);

extern int	adam_update_cuda(float *params, float *m, float *v,
							 const float *grads, size_t n, float lr,
							 float beta1, float beta2, float eps,
							 float weight_decay, int t, cudaStream_t stream);

/* step t (from 1) of o: velocity or Adam's moments in m, v (optim_step's twin) */
extern int	optim_step_cuda(float *params, float *m, float *v, const float *grads,
							size_t n, const DmlOptim *o, int t, cudaStream_t stream);

/* ---------------------------------------------------------------------
 * The network on the device (net.cu), mirroring DmlNet + DmlWork.
 *
 * Typical step:  dml_gpu_net_zero_grads; dml_gpu_net_forward_backward
 * over X + (size_t) row0 * sizes[0] (a slice of a device-resident
 * dataset); all-reduce g->grads on g->stream; dml_gpu_net_step.  Once an
 * epoch, dml_gpu_net_take_loss.  Everything runs on g->stream.
 * --------------------------------------------------------------------- */

typedef struct DmlGpuNet
{
	int			nlayers;
	int			sizes[DML_MAX_LAYERS + 1];
	DmlAct		act;
	DmlLoss		loss;
	size_t		nparams;
	int			maxB;			/* rows per forward_backward, at most */
	int			device;
	DmlOptimizer opt;			/* decides which optimizer state exists */
	int			step;			/* optimizer steps taken (Adam's t) */
	size_t		bytes;			/* device memory in slab */
	void	   *slab;			/* one allocation holding every array below */
	float	   *params;			/* (nparams), laid out as DmlNet.params */
	float	   *grads;			/* (nparams) */
	float	   *opt_m;			/* (nparams) velocity or Adam m; NULL for SGD */
	float	   *opt_v;			/* (nparams) Adam v; else NULL */
	float	   *acts[DML_MAX_LAYERS + 1];	/* acts[l] (maxB, sizes[l]); acts[0] unused */
	float	   *dacts[2];		/* (maxB, widest layer) */
	double	   *loss_sum;		/* (1) losses summed since the last take */
	cublasHandle_t cublas;
	cudaStream_t stream;
} DmlGpuNet;

/* device bytes dml_gpu_net_alloc will ask for (reserve not included) */
extern size_t dml_gpu_net_bytes(const DmlNet *net, int maxB, DmlOptimizer opt);

/*
 * Shape g like net, for up to maxB rows, on device; free memory is checked
 * with cudaMemGetInfo before anything is allocated and a shortage is
 * DML_ERR_DEVMEM with the bytes needed and free in errbuf.  Parameters,
 * gradients and optimizer state start at zero.
 */
extern int	dml_gpu_net_alloc(DmlGpuNet *g, const DmlNet *net, int maxB,
							  DmlOptimizer opt, int device, int tf32,
							  char *errbuf, size_t errlen);
extern void dml_gpu_net_free(DmlGpuNet *g);

/* params (nparams, host) to the device, and back (download synchronizes) */
extern int	dml_gpu_net_upload(DmlGpuNet *g, const float *params,
							   char *errbuf, size_t errlen);
extern int	dml_gpu_net_download(DmlGpuNet *g, float *params,
								 char *errbuf, size_t errlen);

/* zero the optimizer state and the step count */
extern int	dml_gpu_net_reset_optimizer(DmlGpuNet *g, char *errbuf, size_t errlen);

extern int	dml_gpu_net_zero_grads(DmlGpuNet *g, char *errbuf, size_t errlen);

/* *logits = device (B,K) logits of X (B, sizes[0]) */
extern int	dml_gpu_net_forward(DmlGpuNet *g, const float **logits,
								const float *X, int B,
								char *errbuf, size_t errlen);

/* grads += d(sum loss)/dparams over X (B, sizes[0]), y as for the losses; loss_sum += */
extern int	dml_gpu_net_forward_backward(DmlGpuNet *g, const float *X,
										 const float *y, int B,
										 char *errbuf, size_t errlen);

/* wait for the stream, read the summed loss and zero it */
extern int	dml_gpu_net_take_loss(DmlGpuNet *g, double *loss,
								  char *errbuf, size_t errlen);

/* grads *= grad_scale (skipped at 1), then one optimizer step */
extern int	dml_gpu_net_step(DmlGpuNet *g, const DmlOptim *o, float grad_scale,
							 char *errbuf, size_t errlen);

/* ---------------------------------------------------------------------
 * NCCL (nccl.cu).  Rank 0 makes the id, the worker broadcasts its bytes
 * through MPI, every rank calls dml_nccl_init.  The communicator is
 * non-blocking so that init and collectives can be watched and aborted.
 * --------------------------------------------------------------------- */

typedef struct DmlNccl DmlNccl;

extern int	dml_nccl_unique_id(unsigned char *id /* DML_NCCL_ID_BYTES */ ,
							   char *errbuf, size_t errlen);

/* join the communicator on device; gives up after timeout_s seconds */
extern int	dml_nccl_init(DmlNccl **comm, const unsigned char *id, int nranks,
						  int rank, int device, double timeout_s,
						  char *errbuf, size_t errlen);

/* buf (n) = sum over ranks of buf, in place, enqueued on stream */
extern int	dml_nccl_allreduce_sum(DmlNccl *comm, float *buf, size_t n,
								   cudaStream_t stream,
								   char *errbuf, size_t errlen);

/* watchdog poll: DML_OK, or DML_ERR_NCCL when the communicator has failed */
extern int	dml_nccl_poll(DmlNccl *comm, char *errbuf, size_t errlen);

/*
 * Wait for stream while polling the communicator; on an NCCL error or
 * after timeout_s seconds the communicator is aborted and the error
 * returned, so the caller can end the job.
 */
extern int	dml_nccl_wait(DmlNccl *comm, cudaStream_t stream, double timeout_s,
						  char *errbuf, size_t errlen);

/* abort (after an error) or destroy (after success); both free comm */
extern void dml_nccl_abort(DmlNccl *comm);
extern void dml_nccl_destroy(DmlNccl *comm);

#ifdef __cplusplus
}
#endif

#endif							/* DML_CUDA_KERNELS_H */
