/*
 * cblas.h for make gpu-check on a machine without OpenBLAS: the part of the
 * CBLAS interface dml's CPU kernels use, implemented by regress/gpu/refblas.c
 * with plain loops.  Only regress/gpu_check.sh puts this directory on the
 * include path, and only when no system cblas.h and libopenblas are found.
 */
#ifndef DML_NOBLAS_CBLAS_H
#define DML_NOBLAS_CBLAS_H

enum CBLAS_ORDER
{
	CblasRowMajor = 101,
	CblasColMajor = 102
};
enum CBLAS_TRANSPOSE
{
	CblasNoTrans = 111,
	CblasTrans = 112
};

extern void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb,
						int M, int N, int K, float alpha, const float *A, int lda,
						const float *B, int ldb, float beta, float *C, int ldc);
extern void cblas_sgemv(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, int M, int N,
						float alpha, const float *A, int lda, const float *x, int incx,
						float beta, float *y, int incy);
extern void cblas_sscal(int n, float alpha, float *x, int incx);
extern int	openblas_get_num_threads(void);

#endif
