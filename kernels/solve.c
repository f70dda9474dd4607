/*-------------------------------------------------------------------------
 *
 * solve.c
 *	  Dense symmetric positive definite solves for the exact solvers
 *	  (normal equations, Newton/IRLS), in double precision.
 *
 *-------------------------------------------------------------------------
 */
#include "kernels.h"

#include <math.h>

/*
 * Solve A x = b in place: A (n,n) is overwritten by its Cholesky factor,
 * b (n) by x.  Only the lower triangle of A is read.
 */
DmlStatus
dml_cholesky_solve(double *A, double *b, int n)
{
	for (int j = 0; j < n; j++)
	{
		double		d = A[(size_t) j * n + j];

		for (int k = 0; k < j; k++)
			d -= A[(size_t) j * n + k] * A[(size_t) j * n + k];
		if (!(d > 0.0) || !isfinite(d))
			return DML_ERR_SINGULAR;
		d = sqrt(d);
		A[(size_t) j * n + j] = d;
		for (int i = j + 1; i < n; i++)
		{
			double		s = A[(size_t) i * n + j];

			for (int k = 0; k < j; k++)
				s -= A[(size_t) i * n + k] * A[(size_t) j * n + k];
			A[(size_t) i * n + j] = s / d;
		}
	}
	/* L y = b */
	for (int i = 0; i < n; i++)
	{
		double		s = b[i];

		for (int k = 0; k < i; k++)
			s -= A[(size_t) i * n + k] * b[k];
		b[i] = s / A[(size_t) i * n + i];
	}
	/* L^T x = y */
	for (int i = n - 1; i >= 0; i--)
	{
		double		s = b[i];

		for (int k = i + 1; k < n; k++)
			s -= A[(size_t) k * n + i] * b[k];
		b[i] = s / A[(size_t) i * n + i];
	}
	return DML_OK;
}
