/*-------------------------------------------------------------------------
 *
 * common.cuh
 *	  Private to kernels/cuda/: check macros, the per-thread error buffer,
 *	  launch geometry.
 *
 * Every CUDA, cuBLAS and NCCL call goes through a check macro that, on
 * failure, records "file:line: call: reason" and returns a status from
 * the enclosing function (kernels never exit).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_CUDA_COMMON_CUH
#define DML_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <cublas_v2.h>

#include "cuda_kernels.h"

/* record an error for dml_cuda_last_error(); returns st */
extern int	dml_cuda_fail(int st, const char *file, int line, const char *fmt,...)
			__attribute__((format(printf, 4, 5)));

/* copy the last error into a caller's buffer */
extern void dml_cuda_copy_error(char *errbuf, size_t errlen);

/* DML_ERR_DEVMEM, stating both numbers, unless need + reserve bytes are free */
extern int	dml_gpu_check_free(size_t need, const char *what);

#define CUDA_CHECK(call) \
	do { \
		cudaError_t e_ = (call); \
		if (e_ != cudaSuccess) \
			return dml_cuda_fail(DML_ERR_CUDA, __FILE__, __LINE__, "%s: %s", \
								 #call, cudaGetErrorString(e_)); \
	} while (0)

#define CUBLAS_CHECK(call) \
	do { \
		cublasStatus_t s_ = (call); \
		if (s_ != CUBLAS_STATUS_SUCCESS) \
			return dml_cuda_fail(DML_ERR_CUDA, __FILE__, __LINE__, "%s: %s", \
								 #call, cublasGetStatusString(s_)); \
	} while (0)

/* after a <<<launch>>>: configuration errors surface here */
#define LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

/* propagate a status from an inner call */
#define STATUS_CHECK(call) \
	do { \
		int st_ = (call); \
		if (st_ != DML_OK) \
			return st_; \
	} while (0)

/* argument checks name the broken condition */
#define ARG_CHECK(cond) \
	do { \
		if (!(cond)) \
			return dml_cuda_fail(DML_ERR_ARG, __FILE__, __LINE__, \
								 "invalid argument: %s", #cond); \
	} while (0)

#define DML_BLOCK 256

/* blocks for a grid-stride loop over n elements */
static inline unsigned int
grid_for(size_t n)
{
	size_t		blocks = (n + DML_BLOCK - 1) / DML_BLOCK;

	if (blocks < 1)
		blocks = 1;
	if (blocks > 65536)
		blocks = 65536;
	return (unsigned int) blocks;
}

#endif							/* DML_CUDA_COMMON_CUH */
