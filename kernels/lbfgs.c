/*-------------------------------------------------------------------------
 *
 * lbfgs.c
 *	  Limited-memory BFGS: the curvature history and the two-loop
 *	  recursion that turns a gradient into a search direction (Nocedal and
 *	  Wright, Algorithm 7.4), in double precision.
 *
 * The caller owns the objective, the line search and the parameters: a
 * data-parallel caller all-reduces the gradient, keeps this history on one
 * rank and broadcasts the direction, so every replica steps the same way.
 *
 *-------------------------------------------------------------------------
 */
#include "kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* an empty history of up to m pairs of n-vectors */
DmlStatus
dml_lbfgs_alloc(DmlLbfgs *lb, size_t n, int m)
{
	memset(lb, 0, sizeof(*lb));
	lb->n = n;
	lb->m = m < 1 ? 1 : m;
	lb->S = calloc((size_t) lb->m * n, sizeof(double));
	lb->Y = calloc((size_t) lb->m * n, sizeof(double));
	lb->rho = calloc(lb->m, sizeof(double));
	lb->alpha = calloc(lb->m, sizeof(double));
	if (!lb->S || !lb->Y || !lb->rho || !lb->alpha)
	{
		dml_lbfgs_free(lb);
		return DML_ERR_NOMEM;
	}
	return DML_OK;
}

void
dml_lbfgs_free(DmlLbfgs *lb)
{
	free(lb->S);
	free(lb->Y);
	free(lb->rho);
	free(lb->alpha);
	memset(lb, 0, sizeof(*lb));
}

/*
 * Remember the step s = x_new - x_old and the gradient change
 * y = g_new - g_old.  A pair without positive curvature (s'y <= eps |s||y|,
 * as a line search without the Wolfe conditions can give) is skipped, so
 * the implied Hessian stays positive definite.  Returns whether it was kept.
 */
bool
dml_lbfgs_push(DmlLbfgs *lb, const double *s, const double *y)
{
	double		sy = 0,
				ss = 0,
				yy = 0;
	int			slot;

	for (size_t i = 0; i < lb->n; i++)
	{
		sy += s[i] * y[i];
		ss += s[i] * s[i];
		yy += y[i] * y[i];
	}
	if (!(sy > 1e-10 * sqrt(ss * yy)) || !isfinite(sy))
		return false;
	slot = (lb->head + lb->count) % lb->m;
	if (lb->count == lb->m)
	{
		slot = lb->head;
		lb->head = (lb->head + 1) % lb->m;
	}
	else
		lb->count++;
	memcpy(lb->S + (size_t) slot * lb->n, s, sizeof(double) * lb->n);
	memcpy(lb->Y + (size_t) slot * lb->n, y, sizeof(double) * lb->n);
	lb->rho[slot] = 1.0 / sy;
	lb->gamma = sy / yy;		/* the initial Hessian's scale, H0 = gamma I */
	return true;
}

/*
 * The two-loop recursion: dir = -H g, with H the inverse-Hessian
 * approximation of the history (steepest descent while it is empty).
 * dir (n), g (n).
 */
void
dml_lbfgs_direction(DmlLbfgs *lb, double *dir, const double *g)
{
	size_t		n = lb->n;

	for (size_t i = 0; i < n; i++)
		dir[i] = -g[i];
	for (int j = lb->count - 1; j >= 0; j--)
	{
		int			k = (lb->head + j) % lb->m;
		const double *s = lb->S + (size_t) k * n;
		const double *y = lb->Y + (size_t) k * n;
		double		a = 0;

		for (size_t i = 0; i < n; i++)
			a += s[i] * dir[i];
		a *= lb->rho[k];
		lb->alpha[k] = a;
		for (size_t i = 0; i < n; i++)
			dir[i] -= a * y[i];
	}
	if (lb->count > 0)
		for (size_t i = 0; i < n; i++)
			dir[i] *= lb->gamma;
	for (int j = 0; j < lb->count; j++)
	{
		int			k = (lb->head + j) % lb->m;
		const double *s = lb->S + (size_t) k * n;
		const double *y = lb->Y + (size_t) k * n;
		double		b = 0;

		for (size_t i = 0; i < n; i++)
			b += y[i] * dir[i];
		b *= lb->rho[k];
		for (size_t i = 0; i < n; i++)
			dir[i] += (lb->alpha[k] - b) * s[i];
	}
}

/* forget the history (a direction that was not a descent direction) */
void
dml_lbfgs_reset(DmlLbfgs *lb)
{
	lb->count = 0;
	lb->head = 0;
}

/*
 * dml_lbfgs_minimize
 *		Minimize pb->objective from x (n, updated in place) by L-BFGS with
 *		a backtracking (Armijo) line search.  Each trial point's evaluation
 *		also gives its gradient, so an iteration usually costs one
 *		evaluation.
 *
 *		Data-parallel callers give every rank the same f and g (the
 *		objective reduces and shares them); lb holds the history on the
 *		owner only (pb->owner), and pb->share makes the owner's direction
 *		and verdicts everyone's, so the replicas take identical steps.  A
 *		single process passes owner true and share NULL.
 *
 *		Stops when the largest gradient entry is at most pb->gtol
 *		("converged"), when no step lowers the objective or an iteration
 *		lowers it by less than DML_LBFGS_FTOL of itself ("converged"), when
 *		pb->iterate asks to (its reason), or after pb->max_iter iterations
 *		("max epochs").  out->iterations counts the steps taken.
 *
 *		With pb->l1 > 0 it is OWL-QN (Andrew and Gao, 2007): the objective
 *		gains l1 |x|_1 over the masked entries, the pseudo-gradient takes
 *		the gradient's place in the direction, the convergence test and the
 *		Armijo condition, the direction is kept to the pseudo-gradient's
 *		descent entry by entry, and each trial point is projected onto the
 *		orthant it starts in, so an entry the step would carry across zero
 *		is exactly 0; the curvature pairs use the smooth part's gradient.
 */
/* OWL-QN: the L1 term l1 sum |x_i| over the masked entries */
static double
l1_term(const DmlLbfgsProblem *pb, const double *x)
{
	double		sum = 0;

	if (!(pb->l1 > 0))
		return 0;
	for (size_t i = 0; i < pb->n; i++)
		if (pb->l1_mask[i])
			sum += fabs(x[i]);
	return pb->l1 * sum;
}

/*
 * OWL-QN's pseudo-gradient pg (n) of f + l1 |x|_1 at x, g = f's gradient:
 * the one-sided derivative that descends, or 0 where neither side does
 * (x_i = 0 and |g_i| <= l1); g itself off the mask.
 */
static void
pseudo_gradient(const DmlLbfgsProblem *pb, double *pg, const double *x, const double *g)
{
	for (size_t i = 0; i < pb->n; i++)
	{
		if (!(pb->l1 > 0) || !pb->l1_mask[i])
			pg[i] = g[i];
		else if (x[i] > 0)
			pg[i] = g[i] + pb->l1;
		else if (x[i] < 0)
			pg[i] = g[i] - pb->l1;
		else if (g[i] + pb->l1 < 0)
			pg[i] = g[i] + pb->l1;
		else if (g[i] - pb->l1 > 0)
			pg[i] = g[i] - pb->l1;
		else
			pg[i] = 0;
	}
}

DmlStatus
dml_lbfgs_minimize(const DmlLbfgsProblem *pb, DmlLbfgs *lb, double *x, DmlLbfgsResult *out)
{
	size_t		n = pb->n;
	double	   *g = malloc(sizeof(double) * n);
	double	   *xn = malloc(sizeof(double) * n);
	double	   *gn = malloc(sizeof(double) * n);
	double	   *dir = malloc(sizeof(double) * (n + 2));
	double	   *s = malloc(sizeof(double) * n);
	double	   *yv = malloc(sizeof(double) * n);
	double	   *pg = malloc(sizeof(double) * n);	/* OWL-QN's pseudo-gradient, or g */
	bool		owl = pb->l1 > 0;
	double		f,
				fn = 0;
	int			iter;

	memset(out, 0, sizeof(*out));
	if (!g || !xn || !gn || !dir || !s || !yv || !pg)
	{
		free(g), free(xn), free(gn), free(dir), free(s), free(yv), free(pg);
		return DML_ERR_NOMEM;
	}
	/* f is the whole objective, the L1 term included; g the smooth part's gradient */
	f = pb->objective(pb->arg, x, g) + l1_term(pb, x);
	out->reason = DML_STOP_MAX_EPOCHS;
	for (iter = 1; iter <= pb->max_iter; iter++)
	{
		double		step = 1;
		bool		ok = false;
		DmlStopReason why;

		/* every rank: x and g are the same everywhere, so is pg */
		pseudo_gradient(pb, pg, x, g);
		/* the owner's direction; dir[n] = pg'dir, dir[n + 1] = 1: gradient small */
		if (pb->owner)
		{
			double		gd = 0,
						gnorm = 0,
						gmax = 0;

			for (size_t i = 0; i < n; i++)
			{
				gmax = fmax(gmax, fabs(pg[i]));
				gnorm += pg[i] * pg[i];
			}
			dml_lbfgs_direction(lb, dir, pg);
			/* OWL-QN: no move against the pseudo-gradient's descent */
			if (owl)
				for (size_t i = 0; i < n; i++)
					if (dir[i] * pg[i] >= 0)
						dir[i] = 0;
			for (size_t i = 0; i < n; i++)
				gd += pg[i] * dir[i];
			if (!(gd < 0))
			{
				/* not a descent direction: start the history afresh */
				dml_lbfgs_reset(lb);
				dml_lbfgs_direction(lb, dir, pg);
				gd = -gnorm;
			}
			dir[n] = gd;
			/* the first step along -g has length at most 1 */
			if (lb->count == 0 && gnorm > 1)
				for (size_t i = 0; i <= n; i++)
					dir[i] /= sqrt(gnorm);
			dir[n + 1] = gmax <= pb->gtol;
		}
		if (pb->share)
			pb->share(pb->arg, dir, n + 2);
		if (dir[n + 1] != 0)
		{
			out->reason = DML_STOP_CONVERGED;
			break;
		}

		for (int trial = 0; trial < DML_LBFGS_MAX_TRIALS && !ok; trial++)
		{
			double		decrease = step * dir[n];

			for (size_t i = 0; i < n; i++)
				xn[i] = x[i] + step * dir[i];
			if (owl)
			{
				/* stay in x's orthant (pg's side where x_i = 0): crossing zero stops at 0 */
				decrease = 0;
				for (size_t i = 0; i < n; i++)
				{
					if (pb->l1_mask[i])
					{
						double		side = x[i] != 0 ? x[i] : -pg[i];

						if (xn[i] * side <= 0)
							xn[i] = 0;
					}
					decrease += pg[i] * (xn[i] - x[i]);
				}
			}
			fn = pb->objective(pb->arg, xn, gn) + l1_term(pb, xn);
			ok = isfinite(fn) && fn <= f + DML_LBFGS_C1 * decrease;
			if (!ok)
				step /= 2;
		}
		if (!ok)
		{
			/* no step lowers the objective: rounding is all that is left */
			pb->objective(pb->arg, x, g);
			out->reason = DML_STOP_CONVERGED;
			break;
		}
		if (pb->owner)
		{
			for (size_t i = 0; i < n; i++)
			{
				s[i] = xn[i] - x[i];
				yv[i] = gn[i] - g[i];
			}
			dml_lbfgs_push(lb, s, yv);
		}
		memcpy(x, xn, sizeof(double) * n);
		memcpy(g, gn, sizeof(double) * n);
		out->iterations = iter;
		/* f and fn are the same on every rank: so is this test */
		why = f - fn <= DML_LBFGS_FTOL * fmax(fmax(fabs(f), fabs(fn)), 1.0) ?
			DML_STOP_CONVERGED : DML_STOP_NONE;
		f = fn;
		if (pb->iterate)
		{
			DmlStopReason stop = pb->iterate(pb->arg, iter, x);

			if (stop != DML_STOP_NONE)
				why = stop;
		}
		if (why != DML_STOP_NONE)
		{
			out->reason = why;
			break;
		}
	}
	out->objective = f;
	free(g), free(xn), free(gn), free(dir), free(s), free(yv), free(pg);
	return DML_OK;
}

/*
 * The weights' mask (nparams): 1 on every layer's weights, 0 on the biases.
 */
void
dml_net_weight_mask(const DmlNet *net, unsigned char *mask)
{
	memset(mask, 0, net->nparams);
	for (int l = 0; l < net->nlayers; l++)
		memset(mask + dml_net_weight_offset(net, l), 1,
			   dml_net_bias_offset(net, l) - dml_net_weight_offset(net, l));
}

/*
 * The full-batch loss sum of n rows, and its gradient into grads (nparams,
 * overwritten), in blocks of at most work's rows (maxB).
 */
double
dml_net_full_gradient(const DmlNet *net, DmlWork *work, float *grads, const float *X,
					  const float *y, int64_t n, int maxB)
{
	double		sum = 0;

	memset(grads, 0, sizeof(float) * net->nparams);
	for (int64_t lo = 0; lo < n; lo += maxB)
	{
		int			B = n - lo < maxB ? (int) (n - lo) : maxB;

		sum += dml_net_forward_backward(net, work, grads, X + (size_t) lo * net->sizes[0],
										y + lo, B);
	}
	return sum;
}

/*
 * The L2 penalty lambda / 2 |W|^2 over every layer's weights (not the
 * biases) at x (nparams): added to g, and returned.
 */
double
dml_net_penalty(const DmlNet *net, double lambda, const double *x, double *g)
{
	double		sq = 0;

	if (lambda == 0)
		return 0;
	for (int l = 0; l < net->nlayers; l++)
		for (size_t i = dml_net_weight_offset(net, l); i < dml_net_bias_offset(net, l); i++)
		{
			sq += x[i] * x[i];
			g[i] += lambda * x[i];
		}
	return lambda / 2 * sq;
}
