/*-------------------------------------------------------------------------
 *
 * exact.c
 *	  Exact solvers: linear regression by the normal equations and
 *	  logistic/softmax regression by Newton's method (IRLS).
 *
 * Each rank sums its statistics over its rows in double precision (X'X
 * and X'y; or gradient and Hessian), one all-reduce merges them, and every
 * rank solves the same small system with a Cholesky factorization, so the
 * replicas agree bit for bit.  Inputs are standardized (prepare.c), which
 * keeps the systems well conditioned; an intercept column of ones is
 * appended.  weight_decay adds N * weight_decay / 2 to the diagonal (not
 * the intercept's), the same penalty the gradient optimizers apply.
 *
 *-------------------------------------------------------------------------
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "protocol.h"
#include "worker.h"

#define CHUNK 512				/* rows converted to double at a time */

/* Z (B, d+1) = [X rows, 1] in double, for the training rows from lo */
static int
chunk_rows(const Dataset *ds, int64_t *pos, double *Z, double *y)
{
	int			B = 0;
	int			d = ds->d;

	while (*pos < ds->n && B < CHUNK)
	{
		int64_t		i = (*pos)++;
		const float *x = ds->X + (size_t) i * d;
		double	   *z = Z + (size_t) B * (d + 1);

		if (ds->val[i])
			continue;
		for (int c = 0; c < d; c++)
			z[c] = x[c];
		z[d] = 1.0;
		y[B] = ds->y[i];
		B++;
	}
	return B;
}

/*
 * One-hot blocks sum to the intercept column, so the system is singular
 * by construction (the dummy-variable trap).  A tiny ridge on those inputs
 * alone picks the minimum-norm solution among the equivalent ones without
 * changing predictions; real collinearity elsewhere is still an error.
 * A is (Kf p, Kf p) with Kf blocks of p = d + 1 parameters.
 */
static void
add_onehot_ridge(double *A, int p, int Kf, const WorkerSpec *spec, double n)
{
	size_t		q = (size_t) Kf * p;

	for (int f = 0; f < spec->nfeatures; f++)
	{
		const SpecFeature *ft = &spec->features[f];

		if (ft->kind != FEAT_CAT)
			continue;
		for (int k = 0; k < Kf; k++)
			for (int c = ft->offset; c < ft->offset + ft->width; c++)
			{
				size_t		i = (size_t) k * p + c;

				A[i * q + i] += 1e-6 * n;
			}
	}
}

/* one epoch-like progress message for a solver iteration */
static void
report(int iter, double loss, double rows, double secs, double bytes)
{
	DmlProgress p;

	memset(&p, 0, sizeof(p));
	p.epoch = iter;
	p.loss = loss;
	p.val_loss = NAN;
	p.val_metric = NAN;
	p.rows = rows;
	p.seconds = secs;
	p.bytes_sent = bytes;
	if (worker_rank == 0)
		control_send(DML_MSG_PROGRESS, &p, sizeof(p), NULL, 0);
}

/*
 * train_exact
 *		Least squares (ridge with weight_decay): one pass, one all-reduce,
 *		one Cholesky solve.
 */
void
train_exact(Dataset *ds, const WorkerSpec *spec, TrainResult *res)
{
	DmlModel   *m = &res->model;
	int			d = ds->d;
	int			p = d + 1;
	size_t		nstat = (size_t) p * p + p + 2;
	double	   *S = calloc(nstat, sizeof(double));	/* Z'Z, Z'y, y'y, n */
	double	   *A = S,
			   *bvec = S + (size_t) p * p;
	double	   *Z = malloc(sizeof(double) * CHUNK * p);
	double	   *y = malloc(sizeof(double) * CHUNK);
	double	   *w;
	double		t0 = wall_seconds();
	double		bytes0 = comm_job_bytes();
	double		n,
				sse;
	int64_t		pos = 0;
	int			B;

	if (!S || !Z || !y)
		worker_fail("out of memory for a %d x %d system", p, p);
	while ((B = chunk_rows(ds, &pos, Z, y)) > 0)
	{
		cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, p, B, 1.0, Z, p, 1.0, A, p);
		cblas_dgemv(CblasRowMajor, CblasTrans, B, p, 1.0, Z, p, y, 1, 1.0, bvec, 1);
		for (int i = 0; i < B; i++)
			S[nstat - 2] += y[i] * y[i];
		S[nstat - 1] += B;
	}
	comm_allreduce_double(S, nstat);
	n = S[nstat - 1];

	/* keep the lower triangle's copy for the loss; solve on a copy */
	{
		double	   *L = malloc(sizeof(double) * p * p);

		w = malloc(sizeof(double) * p);
		memcpy(L, A, sizeof(double) * p * p);
		memcpy(w, bvec, sizeof(double) * p);
		for (int c = 0; c < d; c++)
			L[(size_t) c * p + c] += n * spec->weight_decay / 2;
		add_onehot_ridge(L, p, 1, spec, n);
		if (dml_cholesky_solve(L, w, p) != DML_OK)
			worker_user_error("22000|Remove features that are linear combinations of others, or add weight_decay.|"
							  "the normal equations are singular: the features are collinear");
		free(L);
	}
	/* SSE = y'y - 2 w'Z'y + w'Z'Z w, with Z'Z symmetric from its lower half */
	sse = S[nstat - 2];
	for (int i = 0; i < p; i++)
	{
		sse -= 2 * w[i] * bvec[i];
		for (int j = 0; j < p; j++)
		{
			double		a = i >= j ? A[(size_t) i * p + j] : A[(size_t) j * p + i];

			sse += w[i] * a * w[j];
		}
	}
	for (int c = 0; c < d; c++)
		m->net.params[c] = (float) w[c];
	m->net.params[d] = (float) w[d];

	res->epochs_run = 1;
	res->final_loss = fmax(sse, 0) / n * (double) m->out_scale[0] * m->out_scale[0];
	res->train_seconds = wall_seconds() - t0;
	res->rows_per_second = res->train_seconds > 0 ? n / res->train_seconds : 0;
	report(1, res->final_loss, n, res->train_seconds, comm_job_bytes() - bytes0);
	free(S);
	free(Z);
	free(y);
	free(w);
}

/*
 * Newton for K-class softmax with the last class as reference (so the
 * Hessian is nonsingular), or binary logistic (one logit).  theta has
 * q = Kf * p entries, Kf = free logits (1 for logistic, K-1 for softmax),
 * row-major (Kf, p).  Returns the loss; fills g (q) and H (q, q) when they
 * are not NULL.
 */
static double
newton_pass(const Dataset *ds, const double *theta, int Kf, int binary,
			double *g, double *H, double lambda, double *n_out)
{
	int			p = ds->d + 1;
	size_t		q = (size_t) Kf * p;
	double	   *Z = malloc(sizeof(double) * CHUNK * p);
	double	   *y = malloc(sizeof(double) * CHUNK);
	double	   *eta = malloc(sizeof(double) * CHUNK * Kf);
	double	   *prob = malloc(sizeof(double) * CHUNK * Kf);
	double	   *WZ = malloc(sizeof(double) * CHUNK * p);
	double	   *G = calloc(q + 2, sizeof(double));
	double		loss = 0,
				n = 0;
	int64_t		pos = 0;
	int			B;

	while ((B = chunk_rows(ds, &pos, Z, y)) > 0)
	{
		/* eta (B, Kf) = Z theta^T */
		cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, Kf, p, 1.0, Z, p, theta, p,
					0.0, eta, Kf);
		for (int i = 0; i < B; i++)
		{
			double	   *e = eta + (size_t) i * Kf;
			double	   *pr = prob + (size_t) i * Kf;
			int			label = (int) y[i];

			if (binary)
			{
				double		z = e[0];

				pr[0] = 1.0 / (1.0 + exp(-z));
				loss += fmax(z, 0) + log1p(exp(-fabs(z))) - (label ? z : 0);
				pr[0] -= label;	/* residual */
			}
			else
			{
				double		mx = 0,
							den;

				for (int k = 0; k < Kf; k++)
					mx = fmax(mx, e[k]);
				den = exp(-mx);	/* the reference class, logit 0 */
				for (int k = 0; k < Kf; k++)
					den += (pr[k] = exp(e[k] - mx));
				for (int k = 0; k < Kf; k++)
					pr[k] /= den;
				loss += log(den) + mx - (label < Kf ? e[label] : 0);
				for (int k = 0; k < Kf; k++)
					pr[k] -= (label == k);	/* residual */
			}
		}
		n += B;
		if (g)
			/* g (Kf, p) += residual^T Z */
			cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Kf, p, B, 1.0, prob, Kf, Z, p,
						1.0, G, p);
		if (H)
		{
			/* block (k, l) += Z^T diag(w_kl) Z, w from the probabilities */
			for (int k = 0; k < Kf; k++)
				for (int l = 0; l <= k; l++)
				{
					for (int i = 0; i < B; i++)
					{
						double		pk,
									pl,
									wgt;

						if (binary)
						{
							pk = prob[i] + y[i];	/* residual back to probability */
							wgt = pk * (1 - pk);
						}
						else
						{
							pk = prob[(size_t) i * Kf + k] + ((int) y[i] == k);
							pl = prob[(size_t) i * Kf + l] + ((int) y[i] == l);
							wgt = (k == l ? pk : 0) - pk * pl;
						}
						for (int c = 0; c < p; c++)
							WZ[(size_t) i * p + c] = wgt * Z[(size_t) i * p + c];
					}
					cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, p, p, B, 1.0, Z, p, WZ, p,
								1.0, H + ((size_t) k * p) * q + (size_t) l * p, q);
				}
		}
	}
	G[q] = loss;
	G[q + 1] = n;
	comm_allreduce_double(G, q + 2);
	if (H)
		comm_allreduce_double(H, q * q);
	loss = G[q];
	n = G[q + 1];
	/* the weight decay penalty, intercepts excluded */
	for (int k = 0; k < Kf; k++)
		for (int c = 0; c < p - 1; c++)
		{
			double		t = theta[(size_t) k * p + c];

			loss += n * lambda / 2 * t * t;
			G[(size_t) k * p + c] += n * lambda * t;
			if (H)
				H[((size_t) k * p + c) * q + (size_t) k * p + c] += n * lambda;
		}
	if (g)
		memcpy(g, G, sizeof(double) * q);
	*n_out = n;
	free(Z);
	free(y);
	free(eta);
	free(prob);
	free(WZ);
	free(G);
	return loss;
}

/*
 * train_newton
 *		Newton's method with step halving.  Each pass over the data gives
 *		the loss, gradient and Hessian at one point, so an accepted step
 *		costs one pass (the next iteration's statistics come with the
 *		trial's loss); only a rejected step costs an extra pass.  Stops when
 *		the loss improves by less than tolerance (relative) or after epochs
 *		iterations.
 */
void
train_newton(Dataset *ds, const WorkerSpec *spec, TrainResult *res)
{
	DmlModel   *m = &res->model;
	int			binary = spec->loss == DML_LOSS_BCE;
	int			K = m->net.sizes[1];
	int			Kf = binary ? 1 : K - 1;
	int			p = ds->d + 1;
	size_t		q = (size_t) Kf * p;
	double	   *theta = calloc(q, sizeof(double));
	double	   *trial = malloc(sizeof(double) * q);
	double	   *g = malloc(sizeof(double) * q);
	double	   *H = malloc(sizeof(double) * q * q);
	double	   *g2 = malloc(sizeof(double) * q);
	double	   *H2 = malloc(sizeof(double) * q * q);
	double	   *delta = malloc(sizeof(double) * q);
	double		n = 0,
				loss,
				t_start = wall_seconds();
	int			iter;

	if (!theta || !trial || !g || !H || !g2 || !H2 || !delta)
		worker_fail("out of memory for a %zu x %zu Hessian", q, q);
	memset(H, 0, sizeof(double) * q * q);
	loss = newton_pass(ds, theta, Kf, binary, g, H, spec->weight_decay, &n);
	for (iter = 1; iter <= spec->epochs; iter++)
	{
		double		t0 = wall_seconds();
		double		bytes0 = comm_job_bytes();
		double		step = 1.0,
					new_loss = loss;
		int			accepted = 0;

		maybe_inject_fault(spec, iter, NULL);
		/* mirror the lower blocks to the upper, then solve H delta = g */
		for (size_t i = 0; i < q; i++)
			for (size_t j = i + 1; j < q; j++)
				H[i * q + j] = H[j * q + i];
		for (size_t i = 0; i < q; i++)
			H[i * q + i] += 1e-10 * n;	/* separable data: keep H positive definite */
		add_onehot_ridge(H, p, Kf, spec, n);
		memcpy(delta, g, sizeof(double) * q);
		if (dml_cholesky_solve(H, delta, (int) q) != DML_OK)
			worker_user_error("22000|Add weight_decay, or remove collinear features.|"
							  "the Hessian is singular at iteration %d", iter);
		/* step halving keeps each iteration a descent */
		for (int tries = 0; tries < 20; tries++, step /= 2)
		{
			for (size_t i = 0; i < q; i++)
				trial[i] = theta[i] - step * delta[i];
			memset(H2, 0, sizeof(double) * q * q);
			new_loss = newton_pass(ds, trial, Kf, binary, g2, H2, spec->weight_decay, &n);
			if (new_loss <= loss)
			{
				accepted = 1;
				break;
			}
		}
		if (accepted)
		{
			double	   *t;

			memcpy(theta, trial, sizeof(double) * q);
			t = g; g = g2; g2 = t;
			t = H; H = H2; H2 = t;
		}
		res->final_loss = (accepted ? new_loss : loss) / n;
		res->epochs_run = iter;
		report(iter, res->final_loss, n, wall_seconds() - t0, comm_job_bytes() - bytes0);
		if (!accepted ||
			fabs(loss - new_loss) <= spec->tolerance * fmax(fabs(new_loss), 1e-300))
			break;
		loss = new_loss;
	}
	/* into the network: free logits from theta, the reference class zero */
	memset(m->net.params, 0, sizeof(float) * m->net.nparams);
	for (int k = 0; k < Kf; k++)
	{
		for (int c = 0; c < ds->d; c++)
			m->net.params[(size_t) k * ds->d + c] = (float) theta[(size_t) k * p + c];
		m->net.params[(size_t) K * ds->d + k] = (float) theta[(size_t) k * p + ds->d];
	}
	res->train_seconds = wall_seconds() - t_start;
	res->rows_per_second = res->train_seconds > 0 ? n * res->epochs_run / res->train_seconds : 0;
	free(theta);
	free(trial);
	free(g);
	free(H);
	free(g2);
	free(H2);
	free(delta);
}
