/*
 * refblas.c: the CBLAS routines dml's CPU kernels call, as plain loops with
 * double accumulation, for make gpu-check on a machine without OpenBLAS
 * (see noblas/cblas.h).  Slow but exact enough to be the reference the CUDA
 * kernels are compared with.
 */
#include "cblas.h"

/* element (i, j) of op(X), X row-major with leading dimension ld */
static inline float
at(const float *X, int ld, int trans, int i, int j)
{
	return trans ? X[(long) j * ld + i] : X[(long) i * ld + j];
}

void
cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb,
			int M, int N, int K, float alpha, const float *A, int lda,
			const float *B, int ldb, float beta, float *C, int ldc)
{
	if (order == CblasColMajor)
	{
		/* C' = op(B)' op(A)': the row-major product with the operands swapped */
		cblas_sgemm(CblasRowMajor, tb, ta, N, M, K, alpha, B, ldb, A, lda, beta, C, ldc);
		return;
	}
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++)
		{
			double		s = 0;

			for (int k = 0; k < K; k++)
				s += (double) at(A, lda, ta == CblasTrans, i, k) * at(B, ldb, tb == CblasTrans, k, j);
			C[(long) i * ldc + j] = (float) (alpha * s +
											 (beta == 0.0f ? 0.0 : (double) beta * C[(long) i * ldc + j]));
		}
}

void
cblas_sgemv(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, int M, int N, float alpha,
			const float *A, int lda, const float *x, int incx, float beta, float *y, int incy)
{
	int			nt = ta != CblasTrans;
	int			rows = nt ? M : N;
	int			cols = nt ? N : M;

	for (int i = 0; i < rows; i++)
	{
		double		s = 0;

		for (int j = 0; j < cols; j++)
		{
			/* op(A)(i, j) = A(r, c); A(r, c) as the order stores it */
			int			r = nt ? i : j,
						c = nt ? j : i;
			float		a = order == CblasRowMajor ? A[(long) r * lda + c] : A[(long) c * lda + r];

			s += (double) a * x[(long) j * incx];
		}
		y[(long) i * incy] = (float) (alpha * s +
									  (beta == 0.0f ? 0.0 : (double) beta * y[(long) i * incy]));
	}
}

void
cblas_sscal(int n, float alpha, float *x, int incx)
{
	for (int i = 0; i < n; i++)
		x[(long) i * incx] *= alpha;
}

int
openblas_get_num_threads(void)
{
	return 1;
}
