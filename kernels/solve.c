/*-------------------------------------------------------------------------
 *
 * solve.c
 *	  The exact solvers' linear algebra, in double precision: symmetric
 *	  positive definite solves (Newton/IRLS) and least squares by a
 *	  distributed QR factorization (TSQR) with a rank-revealing step.
 *
 *-------------------------------------------------------------------------
 */
#include "kernels.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* ---------------------------------------------------------------------
 * Least squares by a distributed QR factorization (TSQR)
 *
 * Every holder of rows (a rank, a parallel worker's aggregate state)
 * keeps the R factor of the rows it has seen, augmented with the target
 * as its last column: for Z = [X, y] (n, q), Z = Q R with R (q, q) upper
 * triangular, R = [R11 c; 0 r], where R11 (p, p) is X's R factor, c = Q'y
 * and r^2 the residual sum of squares.  Adding a block of rows factors
 * [R; block]; merging two holders factors [R1; R2].  The R of the whole
 * table is the same (up to the signs of its rows) whatever the order and
 * the tree, and its condition is that of X, not the square of it as with
 * the normal equations.  LAPACK's dgeqrf does the factoring; matrices
 * here are row-major, LAPACK's are column-major, so each call transposes
 * into its own buffer.
 * --------------------------------------------------------------------- */

extern void dgeqrf_(const int *m, const int *n, double *a, const int *lda, double *tau,
					double *work, const int *lwork, int *info);
extern void dgeqp3_(const int *m, const int *n, double *a, const int *lda, int *jpvt,
					double *tau, double *work, const int *lwork, int *info);
extern void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info);
extern void dpotri_(const char *uplo, const int *n, double *a, const int *lda, int *info);
extern void dgesvd_(const char *jobu, const char *jobvt, const int *m, const int *n,
					double *a, const int *lda, double *s, double *u, const int *ldu,
					double *vt, const int *ldvt, double *work, const int *lwork, int *info);

/*
 * R (q,q) = the R factor of [R; Z (B,q)], both row-major; R starts as
 * zeros.  The diagonal's signs are LAPACK's (either sign is an R factor).
 */
DmlStatus
dml_qr_stack(double *R, const double *Z, int B, int q)
{
	int			m = q + B;
	int			lwork = 64 * q;
	int			info = 0;
	double	   *M,
			   *tau,
			   *work;

	if (B < 0 || q < 1)
		return DML_ERR_ARG;
	if (B == 0)
		return DML_OK;
	M = malloc(sizeof(double) * ((size_t) m * q + q + lwork));
	if (M == NULL)
		return DML_ERR_NOMEM;
	tau = M + (size_t) m * q;
	work = tau + q;
	/* column-major M (m, q) = [R; Z] */
	for (int j = 0; j < q; j++)
	{
		double	   *col = M + (size_t) j * m;

		for (int i = 0; i < q; i++)
			col[i] = i <= j ? R[(size_t) i * q + j] : 0.0;
		for (int b = 0; b < B; b++)
			col[q + b] = Z[(size_t) b * q + j];
	}
	dgeqrf_(&m, &q, M, &m, tau, work, &lwork, &info);
	if (info == 0)
		for (int i = 0; i < q; i++)
			for (int j = 0; j < q; j++)
				R[(size_t) i * q + j] = j >= i ? M[i + (size_t) j * m] : 0.0;
	free(M);
	return info == 0 ? DML_OK : DML_ERR_ARG;
}

/* singular values s (p) of A (p,p) row-major, and when U/Vt are not NULL its vectors */
static DmlStatus
svd_square(const double *A, int p, double *s, double *U, double *Vt)
{
	/*
	 * Row-major A is column-major A'.  LAPACK factors A' = W S Z', so A =
	 * Z S W': its "U" output, read row-major, is V' of A, and its "VT"
	 * output is U of A.
	 */
	int			lwork = 8 * p + 64;
	int			info = 0;
	char		job = U ? 'A' : 'N';
	double	   *M = malloc(sizeof(double) * ((size_t) p * p + lwork));
	double		dummy = 0;
	int			one = 1;

	if (M == NULL)
		return DML_ERR_NOMEM;
	memcpy(M, A, sizeof(double) * p * p);
	dgesvd_(&job, &job, &p, &p, M, &p, s, U ? Vt : &dummy, U ? &p : &one,
			U ? U : &dummy, U ? &p : &one, M + (size_t) p * p, &lwork, &info);
	free(M);
	return info == 0 ? DML_OK : DML_ERR_SINGULAR;
}

/*
 * dml_lsq_solve
 *		Least squares from the augmented R (q,q) of [X, y], p = q - 1
 *		coefficients.  Rank: a column-pivoted QR (dgeqp3) of R11 with its
 *		columns scaled to unit length, so units do not matter; a column
 *		whose pivot is at most max(n, p) * eps of the largest is a linear
 *		combination of the columns before it.  Full rank: coef = R11^-1 c
 *		and cov = R11^-1 R11^-T = (X'X)^-1.  Rank-deficient: DML_ERR_SINGULAR
 *		with the dependent columns in ls->dropped, unless min_norm, which
 *		gives the minimum-norm solution (as LAPACK's dgelsd and numpy's
 *		lstsq do) from the SVD of R11, and cov its pseudo-inverse.  cond is
 *		the 2-norm condition number of X (as statsmodels reports it).
 *		ls owns its arrays on every return; dml_lsq_free releases them.
 */
DmlStatus
dml_lsq_solve(DmlLsq *ls, const double *R, int q, double n, bool min_norm)
{
	int			p = q - 1;
	double	   *R11,
			   *c,
			   *s,
			   *U,
			   *Vt,
			   *A,
			   *tau,
			   *work;
	int		   *jpvt;
	int			lwork = 64 * (p + 1) + 64,
				info = 0;
	double		tol;
	DmlStatus	st = DML_OK;

	memset(ls, 0, sizeof(*ls));
	if (p < 1)
		return DML_ERR_ARG;
	ls->p = p;
	ls->coef = calloc(p, sizeof(double));
	ls->cov = calloc((size_t) p * p, sizeof(double));
	ls->dropped = calloc(p, sizeof(int));
	R11 = malloc(sizeof(double) * ((size_t) 4 * p * p + 3 * p + lwork));
	jpvt = calloc(p, sizeof(int));
	if (!ls->coef || !ls->cov || !ls->dropped || !R11 || !jpvt)
	{
		free(R11);
		free(jpvt);
		return DML_ERR_NOMEM;
	}
	U = R11 + (size_t) p * p;
	Vt = U + (size_t) p * p;
	A = Vt + (size_t) p * p;
	c = A + (size_t) p * p;
	s = c + p;
	tau = s + p;
	work = tau + p;
	for (int i = 0; i < p; i++)
	{
		memcpy(R11 + (size_t) i * p, R + (size_t) i * q, sizeof(double) * p);
		c[i] = R[(size_t) i * q + p];
	}
	ls->rss = R[(size_t) p * q + p] * R[(size_t) p * q + p];
	tol = fmax(n, (double) p) * DBL_EPSILON;

	/* rank: pivoted QR of R11 D^-1, column-major, D the column norms */
	for (int j = 0; j < p; j++)
	{
		double		norm = 0;

		for (int i = 0; i <= j; i++)
			norm += R11[(size_t) i * p + j] * R11[(size_t) i * p + j];
		norm = sqrt(norm);
		for (int i = 0; i < p; i++)
			A[i + (size_t) j * p] = norm > 0 ? R11[(size_t) i * p + j] / norm : 0.0;
	}
	dgeqp3_(&p, &p, A, &p, jpvt, tau, work, &lwork, &info);
	if (info != 0)
		st = DML_ERR_ARG;
	ls->rank = 0;
	for (int k = 0; k < p && st == DML_OK; k++)
	{
		if (fabs(A[k + (size_t) k * p]) > tol * fabs(A[0]))
			ls->rank++;
		else
			ls->dropped[ls->ndropped++] = jpvt[k] - 1;
	}

	/* condition number and, rank-deficient, the minimum-norm solution */
	if (st == DML_OK)
		st = svd_square(R11, p, s, U, Vt);
	if (st == DML_OK)
		ls->cond = s[p - 1] > 0 ? s[0] / s[p - 1] : INFINITY;
	if (st == DML_OK && ls->rank < p)
	{
		if (!min_norm)
			st = DML_ERR_SINGULAR;
		else
		{
			/* coef = V S^+ U' c; cov = V S^+2 V', s_i beyond tol * s_0 dropped */
			for (int k = 0; k < p; k++)
			{
				double		uc = 0;

				if (!(s[k] > tol * s[0]))
					continue;
				for (int i = 0; i < p; i++)
					uc += U[(size_t) i * p + k] * c[i];
				for (int j = 0; j < p; j++)
				{
					ls->coef[j] += Vt[(size_t) k * p + j] * uc / s[k];
					for (int i = 0; i < p; i++)
						ls->cov[(size_t) i * p + j] +=
							Vt[(size_t) k * p + i] * Vt[(size_t) k * p + j] / (s[k] * s[k]);
				}
			}
		}
	}
	else if (st == DML_OK)
	{
		/* coef = R11^-1 c; Rinv = R11^-1 (upper), cov = Rinv Rinv' */
		memcpy(ls->coef, c, sizeof(double) * p);
		cblas_dtrsv(CblasRowMajor, CblasUpper, CblasNoTrans, CblasNonUnit, p, R11, p,
					ls->coef, 1);
		memset(A, 0, sizeof(double) * p * p);
		for (int i = 0; i < p; i++)
			A[(size_t) i * p + i] = 1.0;
		cblas_dtrsm(CblasRowMajor, CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, p, p,
					1.0, R11, p, A, p);
		cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, p, p, p, 1.0, A, p, A, p, 0.0,
					ls->cov, p);
	}
	free(R11);
	free(jpvt);
	return st;
}

void
dml_lsq_free(DmlLsq *ls)
{
	free(ls->coef);
	free(ls->cov);
	free(ls->dropped);
	memset(ls, 0, sizeof(*ls));
}

/* A (n,n) symmetric positive definite := A^-1, both triangles */
DmlStatus
dml_spd_inverse(double *A, int n)
{
	int			info = 0;
	char		uplo = 'L';

	dpotrf_(&uplo, &n, A, &n, &info);
	if (info != 0)
		return DML_ERR_SINGULAR;
	dpotri_(&uplo, &n, A, &n, &info);
	if (info != 0)
		return DML_ERR_SINGULAR;
	/* column-major lower is row-major upper: mirror it down */
	for (int i = 0; i < n; i++)
		for (int j = 0; j < i; j++)
			A[(size_t) i * n + j] = A[(size_t) j * n + i];
	return DML_OK;
}
