/*-------------------------------------------------------------------------
 *
 * common.cu
 *	  Error reporting, device discovery, cuBLAS handles and plain device
 *	  arrays for the CUDA kernels.
 *
 *-------------------------------------------------------------------------
 */
#include "common.cuh"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* one message per thread, so concurrent callers do not garble each other */
static thread_local char last_error[512];

/* record "file:line: message" and return st */
int
dml_cuda_fail(int st, const char *file, int line, const char *fmt,...)
{
	va_list		ap;
	const char *base = strrchr(file, '/');
	int			n;

	n = snprintf(last_error, sizeof(last_error), "%s:%d: ", base ? base + 1 : file, line);
	if (n < 0 || (size_t) n >= sizeof(last_error))
		n = 0;
	va_start(ap, fmt);
	vsnprintf(last_error + n, sizeof(last_error) - n, fmt, ap);
	va_end(ap);
	return st;
}

/* the last error recorded on this thread */
const char *
dml_cuda_last_error(void)
{
	return last_error;
}

/* copy the last error into errbuf (errlen bytes) */
void
dml_cuda_copy_error(char *errbuf, size_t errlen)
{
	if (errbuf != NULL && errlen > 0)
		snprintf(errbuf, errlen, "%s", last_error);
}

/* name of a status from kernels.h or cuda_kernels.h */
const char *
dml_cuda_status_string(int st)
{
	switch (st)
	{
		case DML_ERR_CUDA:
			return "CUDA error";
		case DML_ERR_NCCL:
			return "NCCL error";
		case DML_ERR_DEVMEM:
			return "out of device memory";
		case DML_ERR_NODEVICE:
			return "no CUDA device";
		case DML_ERR_TIMEOUT:
			return "collective timed out";
		default:
			return dml_status_string((DmlStatus) st);
	}
}

/* devices visible; 0 when the driver or the device is missing */
int
dml_gpu_device_count(void)
{
	int			n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (e != cudaSuccess)
	{
		/* no driver, no device, or a driver too old: all mean "none" */
		dml_cuda_fail(DML_ERR_NODEVICE, __FILE__, __LINE__, "cudaGetDeviceCount: %s",
					  cudaGetErrorString(e));
		(void) cudaGetLastError();
		return 0;
	}
	return n;
}

/*
 * Warming a device up: its context and cuBLAS's state take a few hundred
 * milliseconds to create, on the first CUDA call that needs them.  A
 * thread makes them while the caller does other work (a worker reads its
 * rows), once per process; dml_gpu_warm_wait joins it.  Its errors are
 * dropped: the caller's own first calls meet them again and report them.
 */
static pthread_t warm_thread;
static int	warm_state;			/* 0 not started, 1 running, 2 joined */

static void *
warm_main(void *arg)
{
	cublasHandle_t h;

	if (cudaSetDevice((int) (intptr_t) arg) == cudaSuccess && cudaFree(0) == cudaSuccess &&
		cublasCreate(&h) == CUBLAS_STATUS_SUCCESS)
		cublasDestroy(h);
	(void) cudaGetLastError();
	return NULL;
}

void
dml_gpu_warm_start(int device)
{
	if (warm_state == 0)
		warm_state = pthread_create(&warm_thread, NULL, warm_main, (void *) (intptr_t) device) == 0 ? 1 : 2;
}

void
dml_gpu_warm_wait(void)
{
	if (warm_state == 1)
		pthread_join(warm_thread, NULL);
	warm_state = 2;
}

/* DML_ERR_DEVMEM unless need bytes (plus the reserve) are free on this device */
int
dml_gpu_check_free(size_t need, const char *what)
{
	size_t		free_bytes = 0,
				total_bytes = 0;
	int			dev = -1;

	CUDA_CHECK(cudaGetDevice(&dev));
	CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
	if (need > free_bytes || free_bytes - need < DML_GPU_RESERVE_BYTES)
		return dml_cuda_fail(DML_ERR_DEVMEM, __FILE__, __LINE__,
							 "%s needs %zu bytes (plus %zu reserved) but GPU %d has %zu bytes free of %zu",
							 what, need, DML_GPU_RESERVE_BYTES, dev, free_bytes, total_bytes);
	return DML_OK;
}

/* switch a handle between strict FP32 and TF32 tensor-core GEMMs */
int
dml_cublas_set_tf32(cublasHandle_t h, int tf32)
{
	CUBLAS_CHECK(cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
	return DML_OK;
}

/* a cuBLAS handle on the current device, in the precision asked for */
int
dml_cublas_create(cublasHandle_t *h, int tf32)
{
	cublasHandle_t handle;
	int			st;

	CUBLAS_CHECK(cublasCreate(&handle));
	if ((st = dml_cublas_set_tf32(handle, tf32)) != DML_OK)
	{
		cublasDestroy(handle);
		return st;
	}
	*h = handle;
	return DML_OK;
}

/* upload n floats into a fresh device array, memory checked first */
static int
gpu_upload(float **dptr, const float *host, size_t n, const char *what)
{
	float	   *d = NULL;
	cudaError_t e;

	STATUS_CHECK(dml_gpu_check_free(n * sizeof(float), what));
	CUDA_CHECK(cudaMalloc((void **) &d, n * sizeof(float)));
	e = cudaMemcpy(d, host, n * sizeof(float), cudaMemcpyHostToDevice);
	/* from pageable memory the DMA may outlive the call: finish it here */
	if (e == cudaSuccess)
		e = cudaDeviceSynchronize();
	if (e != cudaSuccess)
	{
		cudaFree(d);
		return dml_cuda_fail(DML_ERR_CUDA, __FILE__, __LINE__, "cudaMemcpy of %s: %s",
							 what, cudaGetErrorString(e));
	}
	*dptr = d;
	return DML_OK;
}

/* upload, with the error copied into errbuf */
int
dml_gpu_upload(float **dptr, const float *host, size_t n, const char *what,
			   char *errbuf, size_t errlen)
{
	int			st = gpu_upload(dptr, host, n, what);

	if (st != DML_OK)
		dml_cuda_copy_error(errbuf, errlen);
	return st;
}

/* free a device array from dml_gpu_upload (NULL is fine) */
void
dml_gpu_free(void *dptr)
{
	if (dptr != NULL)
		cudaFree(dptr);
}
