/*-------------------------------------------------------------------------
 *
 * gpu_check.c
 *	  The CUDA kernels against the CPU reference, training on both, and a
 *	  throughput table.  Built and run by regress/gpu_check.sh.
 *
 * (a) Every CUDA kernel runs on fresh random inputs with its outputs
 *	   poisoned with NaN (all bits set) beforehand, and is compared with
 *	   the CPU kernel by the norm-wise relative error ||out - ref|| / ||ref||
 *	   (a NaN anywhere fails).  Tolerances:
 *	   - FP32, single kernels: 1e-5.  Only the order of float additions
 *		 differs (cuBLAS vs OpenBLAS blocking, warp vs serial sums, FMA
 *		 contraction); that costs a few ulps (1e-7), so 1e-5 is loose
 *		 enough to be stable and tight enough to catch an indexing bug.
 *	   - FP32, the whole network's gradients: 1e-4, as they chain six
 *		 GEMMs, the loss and the activations.
 *	   - TF32 (GEMM inputs rounded to a 10-bit mantissa, unit roundoff
 *		 2^-11 = 4.9e-4, products summed in FP32): 5e-3 for a GEMM and
 *		 2e-2 for the network's gradients, ten times the error we expect.
 * (b) The same MLP, 784-256-128-10 relu/softmax, from the same seed on the
 *	   same synthetic data in the same order, momentum SGD, 3 epochs, on
 *	   GPU and CPU: each epoch's mean loss agrees within 1e-3 relative
 *	   (FP32) or 2e-2 (TF32); chaotic growth of float differences over 96
 *	   steps stays far below that.
 * (c) Throughput: training steps of 784-1024-1024-10 at batch 1024 on GPU
 *	   (FP32, TF32) and CPU (OpenBLAS), and the TFLOP/s cuBLAS reaches on
 *	   each GEMM of that step next to a large square sgemm, same run.
 *
 * Output: "ok - ...", "not ok - ...: detail", "skip - ...: reason", lines
 * starting with "#" for information, and last "N passed, N failed,
 * N skipped".  With no CUDA device every GPU check is skipped and the
 * exit status is 0.  "gpu_check --device-count" prints the device count.
 *
 *-------------------------------------------------------------------------
 */
#include "kernels.h"
#include "cuda_kernels.h"

#include <cblas.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* OpenBLAS's own; declared here too in case cblas.h is another vendor's */
extern int	openblas_get_num_threads(void);

#define TOL_FP32		1e-5
#define TOL_FP32_NET	1e-4
#define TOL_TF32		5e-3
#define TOL_TF32_NET	2e-2
#define TOL_CURVE_FP32	1e-3
#define TOL_CURVE_TF32	2e-2

static int	npassed = 0;
static int	nfailed = 0;
static int	nskipped = 0;

static cudaStream_t stream;
static cublasHandle_t blas;

/* record one check */
static void
check(int ok, const char *name, const char *fmt,...)
{
	if (ok)
	{
		printf("ok - %s\n", name);
		npassed++;
		return;
	}
	printf("not ok - %s", name);
	if (fmt != NULL)
	{
		va_list		ap;

		printf(": ");
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
	}
	printf("\n");
	nfailed++;
}

/* record a skipped check */
static void
skip(const char *name, const char *why)
{
	printf("skip - %s: %s\n", name, why);
	nskipped++;
}

/* stop on a broken harness (not a kernel mismatch): report and leave */
static void
fatal(const char *what, int st)
{
	printf("not ok - %s: %s (%s)\n", what, dml_cuda_status_string(st), dml_cuda_last_error());
	nfailed++;
	printf("%d passed, %d failed, %d skipped\n", npassed, nfailed, nskipped);
	exit(1);
}

#define CK(call) \
	do { \
		int st_ = (call); \
		if (st_ != DML_OK) \
			fatal(#call, st_); \
	} while (0)

#define CUDA_OK(call) \
	do { \
		cudaError_t e_ = (call); \
		if (e_ != cudaSuccess) \
		{ \
			printf("not ok - %s at %s:%d: %s\n", #call, __FILE__, __LINE__, \
				   cudaGetErrorString(e_)); \
			nfailed++; \
			printf("%d passed, %d failed, %d skipped\n", npassed, nfailed, nskipped); \
			exit(1); \
		} \
	} while (0)

/* ---------------------------------------------------------------------
 * Host and device arrays
 * --------------------------------------------------------------------- */

/* n host floats, or stop */
static float *
hmalloc(size_t n)
{
	float	   *p = malloc(sizeof(float) * (n > 0 ? n : 1));

	if (p == NULL)
	{
		printf("not ok - out of host memory\n");
		exit(1);
	}
	return p;
}

/* device bytes, or stop */
static void *
dmalloc(size_t bytes)
{
	void	   *p = NULL;

	CUDA_OK(cudaMalloc(&p, bytes > 0 ? bytes : 1));
	return p;
}

/* a device copy of n host floats */
static float *
dcopy(const float *h, size_t n)
{
	float	   *d = dmalloc(sizeof(float) * n);

	CUDA_OK(cudaMemcpy(d, h, sizeof(float) * n, cudaMemcpyHostToDevice));
	/* a pageable copy may still be in flight when cudaMemcpy returns */
	CUDA_OK(cudaDeviceSynchronize());
	return d;
}

/* n device floats back to the host, after the stream's work */
static void
dget(float *h, const float *d, size_t n)
{
	CUDA_OK(cudaStreamSynchronize(stream));
	CUDA_OK(cudaMemcpy(h, d, sizeof(float) * n, cudaMemcpyDeviceToHost));
}

/* every bit set: a NaN in every float, so unwritten outputs show */
static void
poison(float *d, size_t n)
{
	CUDA_OK(cudaMemset(d, 0xFF, sizeof(float) * n));
	/* cudaMemset on device memory is asynchronous to the host */
	CUDA_OK(cudaDeviceSynchronize());
}

/* n uniform floats in [lo, hi) */
static void
fill(float *x, size_t n, DmlRng *rng, double lo, double hi)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float) (lo + (hi - lo) * dml_rng_uniform(rng));
}

/* ||out - ref|| / ||ref||; infinite when out holds a NaN or infinity */
static double
rel_err(const float *out, const float *ref, size_t n)
{
	double		num = 0.0,
				den = 0.0;

	for (size_t i = 0; i < n; i++)
	{
		double		d = (double) out[i] - ref[i];

		if (!isfinite(out[i]))
			return INFINITY;
		num += d * d;
		den += (double) ref[i] * ref[i];
	}
	return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* compare a device array with a host reference */
static void
check_rel(const char *name, const float *dout, const float *ref, size_t n, double tol)
{
	float	   *h = hmalloc(n);
	double		e;
	char		line[256];

	dget(h, dout, n);
	e = rel_err(h, ref, n);
	snprintf(line, sizeof(line), "%s: rel err %.2e < %.0e", name, e, tol);
	check(e < tol, line, NULL);
	free(h);
}

/* seconds on a monotonic clock */
static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------------
 * (a) kernels against the CPU
 * --------------------------------------------------------------------- */

static const char *const act_names[] = {"identity", "relu", "tanh", "sigmoid"};

/* dense forward, fused forward and backward at a few shapes */
static void
test_dense(int tf32, DmlRng *rng)
{
	const int	shapes[][3] = {{1, 7, 5}, {33, 65, 17}, {256, 784, 256}, {1024, 1024, 10}, {37, 100, 16}, {64, 20, 1}, {200, 784, 10}};
	double		tol = tf32 ? TOL_TF32 : TOL_FP32;
	const char *mode = tf32 ? "tf32" : "fp32";

	for (int s = 0; s < 4; s++)
	{
		int			B = shapes[s][0],
					C = shapes[s][1],
					OC = shapes[s][2];
		float	   *inp = hmalloc((size_t) B * C),
				   *w = hmalloc((size_t) OC * C),
				   *bias = hmalloc(OC),
				   *out = hmalloc((size_t) B * OC),
				   *dout = hmalloc((size_t) B * OC),
				   *dinp = hmalloc((size_t) B * C),
				   *dw = hmalloc((size_t) OC * C),
				   *db = hmalloc(OC);
		float	   *d_inp,
				   *d_w,
				   *d_bias,
				   *d_out,
				   *d_dout,
				   *d_dinp,
				   *d_dw,
				   *d_db;
		char		name[160];

		fill(inp, (size_t) B * C, rng, -1, 1);
		fill(w, (size_t) OC * C, rng, -1, 1);
		fill(bias, OC, rng, -1, 1);
		fill(dout, (size_t) B * OC, rng, -1, 1);
		fill(dw, (size_t) OC * C, rng, -1, 1);
		fill(db, OC, rng, -1, 1);
		d_inp = dcopy(inp, (size_t) B * C);
		d_w = dcopy(w, (size_t) OC * C);
		d_bias = dcopy(bias, OC);
		d_dout = dcopy(dout, (size_t) B * OC);
		d_dw = dcopy(dw, (size_t) OC * C);
		d_db = dcopy(db, OC);
		d_out = dmalloc(sizeof(float) * B * OC);
		d_dinp = dmalloc(sizeof(float) * B * C);

		/* forward */
		dense_forward(out, inp, w, bias, B, C, OC);
		poison(d_out, (size_t) B * OC);
		CK(dense_forward_cuda(d_out, d_inp, d_w, d_bias, B, C, OC, blas, stream));
		snprintf(name, sizeof(name), "dense_forward_cuda %dx%dx%d %s", B, C, OC, mode);
		check_rel(name, d_out, out, (size_t) B * OC, tol);

		/* fused bias + activation, every activation */
		for (int a = 0; a <= DML_ACT_SIGMOID; a++)
		{
			float	   *ref = hmalloc((size_t) B * OC);

			dense_forward(ref, inp, w, bias, B, C, OC);
			activation_forward(ref, ref, (size_t) B * OC, (DmlAct) a);
			poison(d_out, (size_t) B * OC);
			CK(dense_forward_act_cuda(d_out, d_inp, d_w, d_bias, B, C, OC, (DmlAct) a, blas, stream));
			snprintf(name, sizeof(name), "dense_forward_act_cuda %s %dx%dx%d %s",
					 act_names[a], B, C, OC, mode);
			check_rel(name, d_out, ref, (size_t) B * OC, tol);
			free(ref);
		}

		/* backward: dweight and dbias accumulate onto random values */
		dense_backward(dinp, dw, db, dout, inp, w, B, C, OC);
		poison(d_dinp, (size_t) B * C);
		CK(dense_backward_cuda(d_dinp, d_dw, d_db, d_dout, d_inp, d_w, B, C, OC, blas, stream));
		snprintf(name, sizeof(name), "dense_backward_cuda dinp %dx%dx%d %s", B, C, OC, mode);
		check_rel(name, d_dinp, dinp, (size_t) B * C, tol);
		snprintf(name, sizeof(name), "dense_backward_cuda dweight %dx%dx%d %s", B, C, OC, mode);
		check_rel(name, d_dw, dw, (size_t) OC * C, tol);
		snprintf(name, sizeof(name), "dense_backward_cuda dbias %dx%dx%d %s", B, C, OC, mode);
		check_rel(name, d_db, db, OC, TOL_FP32);

		/* dinp NULL: only the accumulation */
		dense_backward(NULL, dw, db, dout, inp, w, B, C, OC);
		CK(dense_backward_cuda(NULL, d_dw, d_db, d_dout, d_inp, d_w, B, C, OC, blas, stream));
		snprintf(name, sizeof(name), "dense_backward_cuda dinp=NULL dweight %dx%dx%d %s", B, C, OC, mode);
		check_rel(name, d_dw, dw, (size_t) OC * C, tol);

		free(inp);
		free(w);
		free(bias);
		free(out);
		free(dout);
		free(dinp);
		free(dw);
		free(db);
		cudaFree(d_inp);
		cudaFree(d_w);
		cudaFree(d_bias);
		cudaFree(d_out);
		cudaFree(d_dout);
		cudaFree(d_dinp);
		cudaFree(d_dw);
		cudaFree(d_db);
	}
}

/* activations forward and backward, every kind */
static void
test_activations(DmlRng *rng)
{
	const size_t n = 100003;
	float	   *x = hmalloc(n),
			   *y = hmalloc(n),
			   *g = hmalloc(n),
			   *dx = hmalloc(n);
	float	   *d_x,
			   *d_y,
			   *d_g,
			   *d_dx;
	char		name[128];

	d_x = dmalloc(sizeof(float) * n);
	d_y = dmalloc(sizeof(float) * n);
	d_g = dmalloc(sizeof(float) * n);
	d_dx = dmalloc(sizeof(float) * n);
	for (int a = 0; a <= DML_ACT_SIGMOID; a++)
	{
		fill(x, n, rng, -4, 4);
		fill(g, n, rng, -1, 1);
		activation_forward(y, x, n, (DmlAct) a);
		activation_backward(dx, g, y, n, (DmlAct) a);
		CUDA_OK(cudaMemcpy(d_x, x, sizeof(float) * n, cudaMemcpyHostToDevice));
		CUDA_OK(cudaMemcpy(d_g, g, sizeof(float) * n, cudaMemcpyHostToDevice));

		poison(d_y, n);
		CK(activation_forward_cuda(d_y, d_x, n, (DmlAct) a, stream));
		snprintf(name, sizeof(name), "activation_forward_cuda %s", act_names[a]);
		check_rel(name, d_y, y, n, TOL_FP32);

		/* backward from the CPU's forward output, so only backward is tested */
		CUDA_OK(cudaMemcpy(d_y, y, sizeof(float) * n, cudaMemcpyHostToDevice));
		poison(d_dx, n);
		CK(activation_backward_cuda(d_dx, d_g, d_y, n, (DmlAct) a, stream));
		snprintf(name, sizeof(name), "activation_backward_cuda %s", act_names[a]);
		check_rel(name, d_dx, dx, n, TOL_FP32);

		/* in place, as the network calls it */
		CK(activation_backward_cuda(d_g, d_g, d_y, n, (DmlAct) a, stream));
		snprintf(name, sizeof(name), "activation_backward_cuda %s in place", act_names[a]);
		check_rel(name, d_g, dx, n, TOL_FP32);
	}
	free(x);
	free(y);
	free(g);
	free(dx);
	cudaFree(d_x);
	cudaFree(d_y);
	cudaFree(d_g);
	cudaFree(d_dx);
}

/* |a - b| / |b| for two loss sums */
static double
scalar_rel(double a, double b)
{
	if (!isfinite(a))
		return INFINITY;
	return fabs(a - b) / (fabs(b) > 0 ? fabs(b) : 1.0);
}

/* read the device loss accumulator */
static double
dloss_get(const double *d_loss)
{
	double		v;

	CUDA_OK(cudaStreamSynchronize(stream));
	CUDA_OK(cudaMemcpy(&v, d_loss, sizeof(double), cudaMemcpyDeviceToHost));
	return v;
}

/* the three losses: dlogits, probs, and the summed loss */
static void
test_losses(DmlRng *rng)
{
	const int	B = 1000;
	const int	Ks[3] = {3, 10, 100};
	double	   *d_loss = dmalloc(sizeof(double));
	char		name[160];

	/* MSE */
	{
		int			K = Ks[0];
		size_t		n = (size_t) B * K;
		float	   *z = hmalloc(n),
				   *y = hmalloc(n),
				   *dz = hmalloc(n);
		float	   *d_z,
				   *d_y,
				   *d_dz = dmalloc(sizeof(float) * n);
		double		ref,
					got;

		fill(z, n, rng, -3, 3);
		fill(y, n, rng, -3, 3);
		ref = mse_forward_backward(dz, z, y, B, K);
		d_z = dcopy(z, n);
		d_y = dcopy(y, n);
		poison(d_dz, n);
		CUDA_OK(cudaMemset(d_loss, 0, sizeof(double)));
		CK(mse_forward_backward_cuda(d_loss, d_dz, d_z, d_y, B, K, stream));
		check_rel("mse_forward_backward_cuda dlogits", d_dz, dz, n, TOL_FP32);
		got = dloss_get(d_loss);
		snprintf(name, sizeof(name), "mse_forward_backward_cuda loss sum: rel err %.2e", scalar_rel(got, ref));
		check(scalar_rel(got, ref) < TOL_FP32, name, "gpu %.9g cpu %.9g", got, ref);
		/* the loss accumulates */
		CK(mse_forward_backward_cuda(d_loss, d_dz, d_z, d_y, B, K, stream));
		got = dloss_get(d_loss);
		check(scalar_rel(got, 2 * ref) < TOL_FP32, "mse_forward_backward_cuda adds to *loss",
			  "gpu %.9g want %.9g", got, 2 * ref);
		free(z);
		free(y);
		free(dz);
		cudaFree(d_z);
		cudaFree(d_y);
		cudaFree(d_dz);
	}

	/* BCE, a few logits at +-100 */
	{
		float	   *z = hmalloc(B),
				   *y = hmalloc(B),
				   *dz = hmalloc(B);
		float	   *d_z,
				   *d_y,
				   *d_dz = dmalloc(sizeof(float) * B);
		double		ref,
					got;

		fill(z, B, rng, -6, 6);
		for (int b = 0; b < B; b++)
			y[b] = (float) (dml_rng_next(rng) & 1);
		z[0] = 100.0f;
		z[1] = -100.0f;
		z[2] = 100.0f;
		y[2] = 0.0f;
		ref = bce_forward_backward(dz, z, y, B);
		d_z = dcopy(z, B);
		d_y = dcopy(y, B);
		poison(d_dz, B);
		CUDA_OK(cudaMemset(d_loss, 0, sizeof(double)));
		CK(bce_forward_backward_cuda(d_loss, d_dz, d_z, d_y, B, stream));
		check_rel("bce_forward_backward_cuda dlogits (logits to +-100)", d_dz, dz, B, TOL_FP32);
		got = dloss_get(d_loss);
		snprintf(name, sizeof(name), "bce_forward_backward_cuda loss sum: rel err %.2e", scalar_rel(got, ref));
		check(scalar_rel(got, ref) < TOL_FP32, name, "gpu %.9g cpu %.9g", got, ref);
		free(z);
		free(y);
		free(dz);
		cudaFree(d_z);
		cudaFree(d_y);
		cudaFree(d_dz);
	}

	/* softmax at K = 10 and 100 (more than a warp), some rows at +-1000 */
	for (int i = 1; i < 3; i++)
	{
		int			K = Ks[i];
		size_t		n = (size_t) B * K;
		float	   *z = hmalloc(n),
				   *y = hmalloc(B),
				   *dz = hmalloc(n),
				   *p = hmalloc(n);
		float	   *d_z,
				   *d_y,
				   *d_dz = dmalloc(sizeof(float) * n),
				   *d_p = dmalloc(sizeof(float) * n);
		double		ref,
					got;

		fill(z, n, rng, -5, 5);
		for (int b = 0; b < B; b++)
			y[b] = (float) (dml_rng_next(rng) % K);
		for (int b = 0; b < B; b += 97)
			for (int k = 0; k < K; k++)
				z[(size_t) b * K + k] = (dml_rng_next(rng) & 1) ? 1000.0f : -1000.0f;
		ref = softmax_forward_backward(dz, p, z, y, B, K);
		d_z = dcopy(z, n);
		d_y = dcopy(y, B);
		poison(d_dz, n);
		poison(d_p, n);
		CUDA_OK(cudaMemset(d_loss, 0, sizeof(double)));
		CK(softmax_forward_backward_cuda(d_loss, d_dz, d_p, d_z, d_y, B, K, stream));
		snprintf(name, sizeof(name), "softmax_forward_backward_cuda K=%d dlogits (rows at +-1000)", K);
		check_rel(name, d_dz, dz, n, TOL_FP32);
		snprintf(name, sizeof(name), "softmax_forward_backward_cuda K=%d probs", K);
		check_rel(name, d_p, p, n, TOL_FP32);
		got = dloss_get(d_loss);
		snprintf(name, sizeof(name), "softmax_forward_backward_cuda K=%d loss sum: rel err %.2e",
				 K, scalar_rel(got, ref));
		check(scalar_rel(got, ref) < TOL_FP32, name, "gpu %.9g cpu %.9g", got, ref);

		/* probs may be NULL */
		poison(d_dz, n);
		CK(softmax_forward_backward_cuda(d_loss, d_dz, NULL, d_z, d_y, B, K, stream));
		snprintf(name, sizeof(name), "softmax_forward_backward_cuda K=%d probs=NULL", K);
		check_rel(name, d_dz, dz, n, TOL_FP32);
		free(z);
		free(y);
		free(dz);
		free(p);
		cudaFree(d_z);
		cudaFree(d_y);
		cudaFree(d_dz);
		cudaFree(d_p);
	}
	cudaFree(d_loss);
}

/* the optimizers, three steps each from random parameters and state */
static void
test_optimizers(DmlRng *rng)
{
	const size_t n = 100003;
	float	   *p = hmalloc(n),
			   *m = hmalloc(n),
			   *v = hmalloc(n),
			   *g = hmalloc(n);
	float	   *d_p = dmalloc(sizeof(float) * n),
			   *d_m = dmalloc(sizeof(float) * n),
			   *d_v = dmalloc(sizeof(float) * n),
			   *d_g = dmalloc(sizeof(float) * n);
	const char *names[4] = {"sgd_update_cuda (weight decay)", "momentum_update_cuda",
	"momentum_update_cuda nesterov", "adam_update_cuda"};
	char		name[128];

	for (int kind = 0; kind < 4; kind++)
	{
		fill(p, n, rng, -1, 1);
		fill(m, n, rng, -0.1, 0.1);
		fill(v, n, rng, 0, 0.01);
		CUDA_OK(cudaMemcpy(d_p, p, sizeof(float) * n, cudaMemcpyHostToDevice));
		CUDA_OK(cudaMemcpy(d_m, m, sizeof(float) * n, cudaMemcpyHostToDevice));
		CUDA_OK(cudaMemcpy(d_v, v, sizeof(float) * n, cudaMemcpyHostToDevice));
		for (int t = 1; t <= 3; t++)
		{
			fill(g, n, rng, -1, 1);
			CUDA_OK(cudaMemcpy(d_g, g, sizeof(float) * n, cudaMemcpyHostToDevice));
			switch (kind)
			{
				case 0:
					sgd_update(p, g, n, 0.05f, 0.01f);
					CK(sgd_update_cuda(d_p, d_g, n, 0.05f, 0.01f, stream));
					break;
				case 1:
				case 2:
					momentum_update(p, m, g, n, 0.05f, 0.9f, 1e-3f, kind == 2);
					CK(momentum_update_cuda(d_p, d_m, d_g, n, 0.05f, 0.9f, 1e-3f, kind == 2, stream));
					break;
				case 3:
					adam_update(p, m, v, g, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, t);
					CK(adam_update_cuda(d_p, d_m, d_v, d_g, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f,
										t, stream));
					break;
			}
			CUDA_OK(cudaStreamSynchronize(stream));
		}
		snprintf(name, sizeof(name), "%s params after 3 steps", names[kind]);
		check_rel(name, d_p, p, n, TOL_FP32);
		if (kind >= 1)
		{
			snprintf(name, sizeof(name), "%s %s after 3 steps", names[kind],
					 kind == 3 ? "m" : "velocity");
			check_rel(name, d_m, m, n, TOL_FP32);
		}
		if (kind == 3)
			check_rel("adam_update_cuda v after 3 steps", d_v, v, n, TOL_FP32);
	}
	free(p);
	free(m);
	free(v);
	free(g);
	cudaFree(d_p);
	cudaFree(d_m);
	cudaFree(d_v);
	cudaFree(d_g);
}

/* gather_rows_cuda and scale_cuda */
static void
test_helpers(DmlRng *rng)
{
	const int	N = 500,
				C = 37,
				B = 123;
	float	   *X = hmalloc((size_t) N * C),
			   *ref = hmalloc((size_t) B * C);
	int			idx[123];
	float	   *d_X,
			   *d_out = dmalloc(sizeof(float) * B * C);
	int		   *d_idx = dmalloc(sizeof(idx));

	fill(X, (size_t) N * C, rng, -1, 1);
	for (int b = 0; b < B; b++)
	{
		idx[b] = (int) (dml_rng_next(rng) % N);
		memcpy(ref + (size_t) b * C, X + (size_t) idx[b] * C, sizeof(float) * C);
	}
	d_X = dcopy(X, (size_t) N * C);
	CUDA_OK(cudaMemcpy(d_idx, idx, sizeof(idx), cudaMemcpyHostToDevice));
	poison(d_out, (size_t) B * C);
	CK(gather_rows_cuda(d_out, d_X, d_idx, B, C, stream));
	check_rel("gather_rows_cuda", d_out, ref, (size_t) B * C, 1e-30);
	for (size_t i = 0; i < (size_t) B * C; i++)
		ref[i] *= 0.25f;
	CK(scale_cuda(d_out, (size_t) B * C, 0.25f, stream));
	check_rel("scale_cuda", d_out, ref, (size_t) B * C, 1e-30);
	free(X);
	free(ref);
	cudaFree(d_X);
	cudaFree(d_out);
	cudaFree(d_idx);
}

/* DmlGpuNet forward_backward against dml_net_forward_backward */
static void
test_net(int tf32, DmlRng *rng)
{
	struct
	{
		int			nlayers;
		int			sizes[4];
		DmlAct		act;
		DmlLoss		loss;
		int			B;
	}			cases[] = {
		{3, {784, 256, 128, 10}, DML_ACT_RELU, DML_LOSS_SOFTMAX, 256},
		{3, {20, 16, 8, 3}, DML_ACT_TANH, DML_LOSS_MSE, 100},
		{2, {20, 16, 1}, DML_ACT_SIGMOID, DML_LOSS_BCE, 100},
		{1, {30, 4}, DML_ACT_IDENTITY, DML_LOSS_SOFTMAX, 1},
	};
	double		tol = tf32 ? TOL_TF32_NET : TOL_FP32_NET;
	const char *mode = tf32 ? "tf32" : "fp32";

	for (int c = 0; c < 4; c++)
	{
		DmlNet		net;
		DmlWork		work;
		DmlGpuNet	g;
		char		err[512],
					name[200];
		int			B = cases[c].B,
					C = cases[c].sizes[0],
					K = cases[c].sizes[cases[c].nlayers];
		int			ny = cases[c].loss == DML_LOSS_MSE ? B * K : B;
		float	   *X = hmalloc((size_t) B * C),
				   *y = hmalloc(ny),
				   *grads,
				   *d_X,
				   *d_y;
		double		loss,
					gloss;
		const float *d_logits;

		CK(dml_net_alloc(&net, cases[c].nlayers, cases[c].sizes, cases[c].act, cases[c].loss));
		CK(dml_work_alloc(&work, &net, B));
		dml_net_init(&net, 500 + c);
		for (int l = 0; l < net.nlayers; l++)
			fill(net.params + dml_net_bias_offset(&net, l), net.sizes[l + 1], rng, -0.1, 0.1);
		fill(X, (size_t) B * C, rng, -1, 1);
		for (int i = 0; i < ny; i++)
			y[i] = cases[c].loss == DML_LOSS_MSE ? (float) dml_rng_uniform(rng) :
				(float) (dml_rng_next(rng) % (cases[c].loss == DML_LOSS_BCE ? 2 : K));
		grads = calloc(net.nparams, sizeof(float));
		loss = dml_net_forward_backward(&net, &work, grads, X, y, B);

		if (dml_gpu_net_alloc(&g, &net, B, DML_OPT_SGD, 0, tf32, err, sizeof(err)) != DML_OK)
			fatal(err, DML_ERR_CUDA);
		CK(dml_gpu_net_upload(&g, net.params, err, sizeof(err)));
		d_X = dcopy(X, (size_t) B * C);
		d_y = dcopy(y, ny);
		poison(g.grads, net.nparams);
		CK(dml_gpu_net_zero_grads(&g, err, sizeof(err)));
		CK(dml_gpu_net_forward_backward(&g, d_X, d_y, B, err, sizeof(err)));
		CK(dml_gpu_net_take_loss(&g, &gloss, err, sizeof(err)));
		snprintf(name, sizeof(name), "dml_gpu_net_forward_backward %d-layer %s/%s B=%d %s grads",
				 net.nlayers, act_names[net.act], cases[c].loss == DML_LOSS_MSE ? "mse" :
				 cases[c].loss == DML_LOSS_BCE ? "bce" : "softmax", B, mode);
		CUDA_OK(cudaStreamSynchronize(g.stream));
		check_rel(name, g.grads, grads, net.nparams, tol);
		snprintf(name, sizeof(name), "dml_gpu_net_forward_backward %d-layer %s loss: rel err %.2e",
				 net.nlayers, mode, scalar_rel(gloss, loss));
		check(scalar_rel(gloss, loss) < tol, name, "gpu %.9g cpu %.9g", gloss, loss);

		/* forward alone equals the CPU's logits */
		{
			const float *logits = dml_net_forward(&net, &work, X, B);

			CK(dml_gpu_net_forward(&g, &d_logits, d_X, B, err, sizeof(err)));
			CUDA_OK(cudaStreamSynchronize(g.stream));
			snprintf(name, sizeof(name), "dml_gpu_net_forward %d-layer %s logits", net.nlayers, mode);
			check_rel(name, d_logits, logits, (size_t) B * K, tf32 ? TOL_TF32_NET : TOL_FP32_NET);
		}

		/* B above maxB is refused, not overrun */
		check(dml_gpu_net_forward_backward(&g, d_X, d_y, B + 1, err, sizeof(err)) == DML_ERR_ARG,
			  "dml_gpu_net_forward_backward refuses B > maxB", "%s", err);

		/* download returns what upload sent */
		if (c == 0 && !tf32)
		{
			float	   *back = hmalloc(net.nparams);

			CK(dml_gpu_net_download(&g, back, err, sizeof(err)));
			check(memcmp(back, net.params, sizeof(float) * net.nparams) == 0,
				  "dml_gpu_net_upload / download round trip is bit-exact", NULL);
			free(back);
		}

		dml_gpu_net_free(&g);
		cudaFree(d_X);
		cudaFree(d_y);
		free(X);
		free(y);
		free(grads);
		dml_work_free(&work);
		dml_net_free(&net);
	}
}

/* an impossible network is refused before any allocation, with numbers */
static void
test_memory_budget(void)
{
	DmlNet		net;
	DmlGpuNet	g;
	char		err[512] = "",
				need[32];
	int			st;
	size_t		free0,
				free1,
				total;

	/* described, never allocated on the host: 4 layers of 65536 x 65536 */
	memset(&net, 0, sizeof(net));
	net.nlayers = 4;
	for (int l = 0; l <= 4; l++)
		net.sizes[l] = 65536;
	net.act = DML_ACT_RELU;
	net.loss = DML_LOSS_MSE;
	net.nparams = dml_net_param_count(4, net.sizes);
	snprintf(need, sizeof(need), "%zu", dml_gpu_net_bytes(&net, 4096, DML_OPT_ADAM));
	CUDA_OK(cudaMemGetInfo(&free0, &total));
	st = dml_gpu_net_alloc(&g, &net, 4096, DML_OPT_ADAM, 0, 0, err, sizeof(err));
	CUDA_OK(cudaMemGetInfo(&free1, &total));
	printf("# %s\n", err);
	check(st == DML_ERR_DEVMEM && strstr(err, need) != NULL && strstr(err, "free") != NULL,
		  "dml_gpu_net_alloc refuses a 275 GB network, stating bytes needed and free",
		  "status %d: %s", st, err);
	check(g.slab == NULL && g.cublas == NULL && g.stream == NULL && free1 + (1 << 20) >= free0,
		  "a refused dml_gpu_net_alloc holds no device memory",
		  "free before %zu after %zu", free0, free1);
}

/* NCCL on one rank: id, init, all-reduce (identity), watchdog, teardown */
static void
test_nccl(DmlRng *rng)
{
	unsigned char id[DML_NCCL_ID_BYTES];
	char		err[512] = "";
	DmlNccl    *comm = NULL;
	const size_t n = 4099;
	float	   *h = hmalloc(n),
			   *d;
	int			st;

	fill(h, n, rng, -1, 1);
	d = dcopy(h, n);
	st = dml_nccl_unique_id(id, err, sizeof(err));
	if (st == DML_OK)
		st = dml_nccl_init(&comm, id, 1, 0, 0, 60.0, err, sizeof(err));
	check(st == DML_OK, "dml_nccl_init, one rank", "%s", err);
	if (st != DML_OK)
	{
		free(h);
		cudaFree(d);
		return;
	}
	st = dml_nccl_allreduce_sum(comm, d, n, stream, err, sizeof(err));
	if (st == DML_OK)
		st = dml_nccl_wait(comm, stream, 30.0, err, sizeof(err));
	check(st == DML_OK, "dml_nccl_allreduce_sum + dml_nccl_wait", "%s", err);
	check_rel("dml_nccl_allreduce_sum over one rank is the identity", d, h, n, 1e-30);
	check(dml_nccl_poll(comm, err, sizeof(err)) == DML_OK, "dml_nccl_poll on a healthy communicator",
		  "%s", err);
	dml_nccl_destroy(comm);
	free(h);
	cudaFree(d);
}

/* ---------------------------------------------------------------------
 * (b) the same training on GPU and CPU
 * --------------------------------------------------------------------- */

/* N rows of 784 features around 10 class centres, labels 0..9 */
static void
synthetic(float *X, float *y, int N, int C, int K, uint64_t seed)
{
	DmlRng		rng;
	float	   *centre = hmalloc((size_t) K * C);

	dml_rng_seed(&rng, seed);
	for (size_t i = 0; i < (size_t) K * C; i++)
		centre[i] = (float) dml_rng_normal(&rng);
	for (int r = 0; r < N; r++)
	{
		int			k = (int) (dml_rng_next(&rng) % K);

		y[r] = (float) k;
		for (int c = 0; c < C; c++)
			X[(size_t) r * C + c] = 0.1f * centre[(size_t) k * C + c] + (float) dml_rng_normal(&rng);
	}
	free(centre);
}

/* (b): train the same MLP on GPU and CPU and compare the loss curves */
static void
test_training(int tf32)
{
	enum
	{
		N = 8192, BATCH = 256, EPOCHS = 3
	};
	int			sizes[4] = {784, 256, 128, 10};
	const char *mode = tf32 ? "tf32" : "fp32";
	double		tol = tf32 ? TOL_CURVE_TF32 : TOL_CURVE_FP32;
	DmlOptim opt = {DML_OPT_MOMENTUM, 0.02f, 0.9f, 0, 0, 0, 1e-4f};
	float	   *X = hmalloc((size_t) N * 784),
			   *y = hmalloc(N),
			   *grads,
			   *vel,
			   *d_X = NULL,
			   *d_y = NULL;
	DmlNet		net;
	DmlWork		work;
	DmlGpuNet	g;
	char		err[512],
				name[200];
	double		cpu_curve[EPOCHS],
				gpu_curve[EPOCHS],
				worst = 0.0;

	synthetic(X, y, N, 784, 10, 99);
	CK(dml_net_alloc(&net, 3, sizes, DML_ACT_RELU, DML_LOSS_SOFTMAX));
	CK(dml_work_alloc(&work, &net, BATCH));
	dml_net_init(&net, 1234);
	grads = calloc(net.nparams, sizeof(float));
	vel = calloc(net.nparams, sizeof(float));

	if (dml_gpu_net_alloc(&g, &net, BATCH, DML_OPT_MOMENTUM, 0, tf32, err, sizeof(err)) != DML_OK)
		fatal(err, DML_ERR_CUDA);
	CK(dml_gpu_net_upload(&g, net.params, err, sizeof(err)));
	CK(dml_gpu_upload(&d_X, X, (size_t) N * 784, "the training set", err, sizeof(err)));
	CK(dml_gpu_upload(&d_y, y, N, "the labels", err, sizeof(err)));

	for (int e = 0; e < EPOCHS; e++)
	{
		double		sum = 0.0;

		for (int r0 = 0; r0 < N; r0 += BATCH)
		{
			memset(grads, 0, sizeof(float) * net.nparams);
			sum += dml_net_forward_backward(&net, &work, grads, X + (size_t) r0 * 784, y + r0, BATCH);
			cblas_sscal((int) net.nparams, 1.0f / BATCH, grads, 1);
			momentum_update(net.params, vel, grads, net.nparams, opt.lr, opt.momentum,
							opt.weight_decay, 0);

			/* the minibatch is a slice of the device-resident set */
			CK(dml_gpu_net_zero_grads(&g, err, sizeof(err)));
			CK(dml_gpu_net_forward_backward(&g, d_X + (size_t) r0 * 784, d_y + r0, BATCH,
											err, sizeof(err)));
			CK(dml_gpu_net_step(&g, &opt, 1.0f / BATCH, err, sizeof(err)));
		}
		cpu_curve[e] = sum / N;
		CK(dml_gpu_net_take_loss(&g, &gpu_curve[e], err, sizeof(err)));
		gpu_curve[e] /= N;
		printf("# %s epoch %d: cpu loss %.7f gpu loss %.7f\n", mode, e + 1, cpu_curve[e], gpu_curve[e]);
		if (scalar_rel(gpu_curve[e], cpu_curve[e]) > worst || !isfinite(gpu_curve[e]))
			worst = isfinite(gpu_curve[e]) ? scalar_rel(gpu_curve[e], cpu_curve[e]) : INFINITY;
	}
	snprintf(name, sizeof(name),
			 "784-256-128-10 training, %d epochs, %s: loss curves agree, worst rel diff %.2e < %.0e",
			 EPOCHS, mode, worst, tol);
	check(worst < tol, name, NULL);
	snprintf(name, sizeof(name), "784-256-128-10 training %s: loss falls", mode);
	check(gpu_curve[EPOCHS - 1] < 0.9 * gpu_curve[0] && cpu_curve[EPOCHS - 1] < 0.9 * cpu_curve[0],
		  name, "cpu %g -> %g, gpu %g -> %g", cpu_curve[0], cpu_curve[EPOCHS - 1],
		  gpu_curve[0], gpu_curve[EPOCHS - 1]);
	{
		float	   *back = hmalloc(net.nparams);

		CK(dml_gpu_net_download(&g, back, err, sizeof(err)));
		printf("# %s final parameters: rel diff gpu vs cpu %.2e\n", mode,
			   rel_err(back, net.params, net.nparams));
		free(back);
	}

	dml_gpu_net_free(&g);
	dml_gpu_free(d_X);
	dml_gpu_free(d_y);
	free(X);
	free(y);
	free(grads);
	free(vel);
	dml_work_free(&work);
	dml_net_free(&net);
}

/* ---------------------------------------------------------------------
 * (c) throughput
 * --------------------------------------------------------------------- */

/* seconds per call of one sgemm, timed with events over reps calls */
static double
time_sgemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
		   const float *A, int lda, const float *Bm, int ldb, float *Cm, int ldc,
		   float beta, int reps)
{
	const float one = 1.0f;
	cudaEvent_t t0,
				t1;
	float		ms = 0.0f;

	CUDA_OK(cudaEventCreate(&t0));
	CUDA_OK(cudaEventCreate(&t1));
	cublasSetStream(blas, stream);
	for (int i = 0; i < 2; i++)
		cublasSgemm(blas, ta, tb, m, n, k, &one, A, lda, Bm, ldb, &beta, Cm, ldc);
	CUDA_OK(cudaEventRecord(t0, stream));
	for (int i = 0; i < reps; i++)
		cublasSgemm(blas, ta, tb, m, n, k, &one, A, lda, Bm, ldb, &beta, Cm, ldc);
	CUDA_OK(cudaEventRecord(t1, stream));
	CUDA_OK(cudaEventSynchronize(t1));
	CUDA_OK(cudaEventElapsedTime(&ms, t0, t1));
	cudaEventDestroy(t0);
	cudaEventDestroy(t1);
	return ms * 1e-3 / reps;
}

/* samples/s of GPU training steps for the given network */
static double
gpu_steps_per_s(DmlNet *net, const float *d_X, const float *d_y, int B, int tf32, int steps)
{
	DmlGpuNet	g;
	DmlOptim opt = {DML_OPT_SGD, 0.01f, 0, 0, 0, 0, 0};
	char		err[512];
	double		t0 = 0.0,
				loss;

	if (dml_gpu_net_alloc(&g, net, B, DML_OPT_SGD, 0, tf32, err, sizeof(err)) != DML_OK)
		fatal(err, DML_ERR_CUDA);
	CK(dml_gpu_net_upload(&g, net->params, err, sizeof(err)));
	for (int s = -20; s < steps; s++)
	{
		if (s == 0)
		{
			CK(dml_gpu_net_take_loss(&g, &loss, err, sizeof(err)));
			t0 = now_s();
		}
		CK(dml_gpu_net_zero_grads(&g, err, sizeof(err)));
		CK(dml_gpu_net_forward_backward(&g, d_X, d_y, B, err, sizeof(err)));
		CK(dml_gpu_net_step(&g, &opt, 1.0f / B, err, sizeof(err)));
	}
	CK(dml_gpu_net_take_loss(&g, &loss, err, sizeof(err)));
	t0 = now_s() - t0;
	dml_gpu_net_free(&g);
	return (double) steps * B / t0;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a,
				y = *(const double *) b;

	return (x > y) - (x < y);
}

/* the median of 5 runs of 200 steps, as regress/gpu/torch_peer.py times PyTorch */
static double
gpu_steps_median(DmlNet *net, const float *d_X, const float *d_y, int B, int tf32)
{
	double		r[5];

	for (int i = 0; i < 5; i++)
		r[i] = gpu_steps_per_s(net, d_X, d_y, B, tf32, 200);
	qsort(r, 5, sizeof(double), cmp_double);
	return r[2];
}

/* (c): samples/s of a training step, GEMM TFLOP/s, square sgemm */
static void
test_throughput(void)
{
	enum
	{
		B = 1024, SQ = 8192
	};
	int			sizes[4] = {784, 1024, 1024, 10};
	DmlNet		net;
	DmlWork		work;
	float	   *X = hmalloc((size_t) B * 784),
			   *y = hmalloc(B),
			   *grads,
			   *d_X,
			   *d_y;
	double		flops_step = 0.0,
				gpu_sps[2],
				cpu_sps,
				t0 = 0.0;
	int			cpu_steps = 5;
	float	   *dA,
			   *dB,
			   *dC;
	char		name[200];

	synthetic(X, y, B, 784, 10, 7);
	CK(dml_net_alloc(&net, 3, sizes, DML_ACT_RELU, DML_LOSS_SOFTMAX));
	CK(dml_work_alloc(&work, &net, B));
	dml_net_init(&net, 5);
	d_X = dcopy(X, (size_t) B * 784);
	d_y = dcopy(y, B);

	/* forward and dweight GEMMs of every layer, dinp of all but the first */
	for (int l = 0; l < 3; l++)
		flops_step += 2.0 * B * sizes[l] * sizes[l + 1] * (l == 0 ? 2 : 3);

	/* at this size every layer is on cuBLAS (layers.cu's use_skinny) */
	for (int tf32 = 0; tf32 < 2; tf32++)
		gpu_sps[tf32] = gpu_steps_median(&net, d_X, d_y, B, tf32);

	/* the CPU: the same step, OpenBLAS with its own thread count */
	grads = calloc(net.nparams, sizeof(float));
	for (int s = -1; s < cpu_steps; s++)
	{
		if (s == 0)
			t0 = now_s();
		memset(grads, 0, sizeof(float) * net.nparams);
		dml_net_forward_backward(&net, &work, grads, X, y, B);
		cblas_sscal((int) net.nparams, 1.0f / B, grads, 1);
		sgd_update(net.params, grads, net.nparams, 0.01f, 0.0f);
	}
	cpu_sps = (double) cpu_steps * B / (now_s() - t0);

	/* GEMMs at the step's shapes (column-major m x n x k, as layers.cu calls them) */
	dA = dmalloc(sizeof(float) * SQ * SQ);
	dB = dmalloc(sizeof(float) * SQ * SQ);
	dC = dmalloc(sizeof(float) * SQ * SQ);
	/*
	 * random operands, never zeros: a GEMM on zeros can run faster than on
	 * real data and hides nothing but its own speed
	 */
	{
		float	   *h = hmalloc((size_t) SQ * SQ);
		float	   *dst[3] = {dA, dB, dC};
		DmlRng		r;

		dml_rng_seed(&r, 99);
		for (int b = 0; b < 3; b++)
		{
			for (size_t i = 0; i < (size_t) SQ * SQ; i++)
				h[i] = (float) dml_rng_uniform(&r) * 2.0f - 1.0f;
			CUDA_OK(cudaMemcpy(dst[b], h, sizeof(float) * SQ * SQ, cudaMemcpyHostToDevice));
		}
		free(h);
	}
	printf("# GEMM throughput, TFLOP/s (2mnk / time), same run:\n");
	printf("# %-34s %-18s %10s %10s\n", "GEMM", "m x n x k", "fp32", "tf32");
	for (int l = 0; l < 3; l++)
	{
		int			C = sizes[l],
					OC = sizes[l + 1];

		for (int kind = 0; kind < 3; kind++)
		{
			double		tf[2];
			char		what[64],
						shape[48];
			int			m = kind == 0 ? OC : C,
						n = kind == 0 ? B : kind == 1 ? OC : B,
						k = kind == 0 ? C : kind == 1 ? B : OC;

			if (kind == 2 && l == 0)
				continue;
			for (int tf32 = 0; tf32 < 2; tf32++)
			{
				double		s;

				CK(dml_cublas_set_tf32(blas, tf32));
				if (kind == 0)
					s = time_sgemm(CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, dA, C, dB, C, dC, OC, 0.0f, 20);
				else if (kind == 1)
					s = time_sgemm(CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, dA, C, dB, OC, dC, C, 1.0f, 20);
				else
					s = time_sgemm(CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, dA, C, dB, OC, dC, C, 0.0f, 20);
				tf[tf32] = 2.0 * m * n * k / s * 1e-12;
			}
			snprintf(what, sizeof(what), "layer %d %s", l + 1,
					 kind == 0 ? "forward" : kind == 1 ? "dweight" : "dinp");
			snprintf(shape, sizeof(shape), "%d x %d x %d", m, n, k);
			printf("# %-34s %-18s %10.2f %10.2f\n", what, shape, tf[0], tf[1]);
		}
	}
	{
		double		tf[2];

		for (int tf32 = 0; tf32 < 2; tf32++)
		{
			CK(dml_cublas_set_tf32(blas, tf32));
			tf[tf32] = 2.0 * SQ * SQ * (double) SQ /
				time_sgemm(CUBLAS_OP_N, CUBLAS_OP_N, SQ, SQ, SQ, dA, SQ, dB, SQ, dC, SQ, 0.0f, 10) * 1e-12;
		}
		printf("# %-34s %-18s %10.2f %10.2f\n", "square sgemm (reference)", "8192 x 8192 x 8192",
			   tf[0], tf[1]);
	}
	CK(dml_cublas_set_tf32(blas, 0));

	/*
	 * the Fashion-MNIST MLP's step, 784-256-128-10 at batch 128, where the
	 * last layer takes the skinny kernels (layers.cu): cuBLAS only, then as
	 * dml trains
	 */
	{
		int			fs[4] = {784, 256, 128, 10};
		DmlNet		fnet;
		double		f_sps[2];

		CK(dml_net_alloc(&fnet, 3, fs, DML_ACT_RELU, DML_LOSS_SOFTMAX));
		dml_net_init(&fnet, 5);
		for (int skinny = 0; skinny < 2; skinny++)
		{
			dml_cuda_set_skinny(skinny);
			f_sps[skinny] = gpu_steps_median(&fnet, d_X, d_y, 128, 0);
		}
		printf("# training step 784-256-128-10, batch 128, fp32: cuBLAS only %.0f samples/s, "
			   "with the skinny last layer %.0f samples/s (%.2fx)\n",
			   f_sps[0], f_sps[1], f_sps[1] / f_sps[0]);
		dml_net_free(&fnet);
	}

	printf("# training step 784-1024-1024-10, batch %d (%.2f GFLOP per step):\n", B, flops_step * 1e-9);
	printf("# %-24s %14s %12s\n", "device", "samples/s", "TFLOP/s");
	printf("# %-24s %14.0f %12.2f\n", "GPU fp32", gpu_sps[0], gpu_sps[0] / B * flops_step * 1e-12);
	printf("# %-24s %14.0f %12.2f\n", "GPU tf32", gpu_sps[1], gpu_sps[1] / B * flops_step * 1e-12);
	snprintf(name, sizeof(name), "CPU (OpenBLAS, %d thr)", openblas_get_num_threads());
	printf("# %-24s %14.0f %12.3f\n", name, cpu_sps, cpu_sps / B * flops_step * 1e-12);
	snprintf(name, sizeof(name), "throughput measured: GPU fp32 %.0f samples/s is above CPU %.0f samples/s",
			 gpu_sps[0], cpu_sps);
	check(isfinite(gpu_sps[0]) && isfinite(cpu_sps) && gpu_sps[0] > cpu_sps, name, NULL);

	cudaFree(dA);
	cudaFree(dB);
	cudaFree(dC);
	cudaFree(d_X);
	cudaFree(d_y);
	free(X);
	free(y);
	free(grads);
	dml_work_free(&work);
	dml_net_free(&net);
}

/* run every group, or skip them all when no device is visible */
int
main(int argc, char **argv)
{
	int			ndev;
	DmlRng		rng;

	setvbuf(stdout, NULL, _IOLBF, 0);
	ndev = dml_gpu_device_count();
	if (argc > 1 && strcmp(argv[1], "--device-count") == 0)
	{
		printf("%d\n", ndev);
		return 0;
	}
	if (ndev == 0)
	{
		const char *groups[] = {
			"(a) CUDA kernels vs CPU, fp32", "(a) CUDA GEMM kernels vs CPU, tf32",
			"(a) DmlGpuNet vs dml_net, fp32 and tf32", "(a) device memory budget",
			"(a) NCCL on one rank", "(b) training curves GPU vs CPU, fp32",
			"(b) training curves GPU vs CPU, tf32", "(c) throughput table"
		};

		printf("# no CUDA device visible: %s\n", dml_cuda_last_error());
		for (int i = 0; i < 8; i++)
			skip(groups[i], "no CUDA device");
		printf("%d passed, %d failed, %d skipped\n", npassed, nfailed, nskipped);
		return 0;
	}
	{
		struct cudaDeviceProp prop;

		CUDA_OK(cudaGetDeviceProperties(&prop, 0));
		printf("# device 0 of %d: %s, %d SMs, %.1f GiB, compute %d.%d\n", ndev, prop.name,
			   prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0, prop.major, prop.minor);
	}
	CUDA_OK(cudaSetDevice(0));
	CUDA_OK(cudaStreamCreate(&stream));
	CK(dml_cublas_create(&blas, 0));
	dml_rng_seed(&rng, 2024);

	/* (a) */
	test_dense(0, &rng);
	test_activations(&rng);
	test_losses(&rng);
	test_optimizers(&rng);
	test_helpers(&rng);
	test_net(0, &rng);
	CK(dml_cublas_set_tf32(blas, 1));
	test_dense(1, &rng);
	CK(dml_cublas_set_tf32(blas, 0));
	test_net(1, &rng);
	test_memory_budget();
	test_nccl(&rng);

	/* (b) */
	test_training(0);
	test_training(1);

	/* (c) */
	test_throughput();

	cublasDestroy(blas);
	cudaStreamDestroy(stream);
	printf("%d passed, %d failed, %d skipped\n", npassed, nfailed, nskipped);
	return nfailed > 0 ? 1 : 0;
}
