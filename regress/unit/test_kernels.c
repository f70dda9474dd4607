/*-------------------------------------------------------------------------
 *
 * test_kernels.c
 *	  Unit tests of the CPU reference kernels (kernels/layers.c, losses.c, optim.c, net.c, ...).
 *
 * Every backward pass is checked against central finite differences: the
 * kernels run in float, the objective is summed in double, and the step
 * actually taken is measured as (double) ((float) (x + h) - (float) (x - h))
 * so the rounding of x +- h does not count as error.  A gradient g passes
 * against its estimate ref when |g - ref| <= atol + |ref| * rtol; each
 * group states its atol, rtol and h with the reason.
 *
 * Optimizers, schedules, losses at extreme logits, the solver, the model
 * blob, prediction and metrics are checked against numbers worked out by
 * hand (the working is in the comments).
 *
 * Output: one line per check, "ok - name" or "not ok - name: detail", then
 * "N passed, N failed"; the exit status is 1 when anything failed.
 *
 *-------------------------------------------------------------------------
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE				/* MAP_FIXED_NOREPLACE */
#endif
#include "kernels.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static int	npassed = 0;
static int	nfailed = 0;
/* the instruction set of dml's own kernels under test, as a prefix to the checks' names */
static const char *simd_tag = "";

/* record one check; detail is printed only on failure */
static void
check(int ok, const char *name, const char *fmt,...)
{
	if (ok)
	{
		printf("ok - %s%s\n", simd_tag, name);
		npassed++;
		return;
	}
	printf("not ok - %s%s: ", simd_tag, name);
	if (fmt != NULL)
	{
		va_list		ap;

		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
	}
	printf("\n");
	nfailed++;
}

/* |got - want| <= atol + |want| * rtol */
static int
close_to(double got, double want, double atol, double rtol)
{
	return fabs(got - want) <= atol + fabs(want) * rtol;
}

/* check one scalar against a literal */
static void
check_num(const char *name, double got, double want, double atol, double rtol)
{
	check(close_to(got, want, atol, rtol), name, "got %.9g, want %.9g", got, want);
}

/* compare n analytic values with references; report the worst element */
static void
check_vec(const char *name, const float *got, const double *want, size_t n,
		  double atol, double rtol)
{
	size_t		worst = 0;
	double		worst_excess = -1.0;
	int			bad = 0;

	for (size_t i = 0; i < n; i++)
	{
		double		excess = fabs(got[i] - want[i]) - (atol + fabs(want[i]) * rtol);

		if (!(excess <= 0.0))
			bad++;
		if (!(excess <= worst_excess))
		{
			worst_excess = excess;
			worst = i;
		}
	}
	check(bad == 0, name, "%d of %zu elements off; worst [%zu] got %.9g want %.9g",
		  bad, n, worst, got[worst], want[worst]);
}

/* n uniform floats in [lo, hi) */
static void
fill_uniform(float *x, size_t n, DmlRng *rng, double lo, double hi)
{
	for (size_t i = 0; i < n; i++)
		x[i] = (float) (lo + (hi - lo) * dml_rng_uniform(rng));
}

/* n uniform floats with lo <= |x| < hi and a random sign */
static void
fill_away_from_zero(float *x, size_t n, DmlRng *rng, double lo, double hi)
{
	for (size_t i = 0; i < n; i++)
	{
		double		u = lo + (hi - lo) * dml_rng_uniform(rng);

		x[i] = (float) (dml_rng_uniform(rng) < 0.5 ? -u : u);
	}
}

/* the step really taken between two perturbed floats */
static double
step_taken(float x, float h)
{
	return (double) (x + h) - (double) (x - h);
}

/* ---------------------------------------------------------------------
 * Dense layer
 * --------------------------------------------------------------------- */

/* sum(out .* G) in double, out = dense_forward(inp, weight, bias) */
static double
dense_objective(const float *inp, const float *weight, const float *bias,
				const float *G, int B, int C, int OC)
{
	float	   *out = malloc(sizeof(float) * B * OC);
	double		s = 0.0;

	dense_forward(out, inp, weight, bias, B, C, OC);
	for (int i = 0; i < B * OC; i++)
		s += (double) out[i] * G[i];
	free(out);
	return s;
}

/* central difference of dense_objective with respect to x[i] */
static double
dense_fd(float *x, int i, float h, const float *inp, const float *weight,
		 const float *bias, const float *G, int B, int C, int OC)
{
	float		keep = x[i];
	double		fp,
				fm,
				dx = step_taken(keep, h);

	x[i] = keep + h;
	fp = dense_objective(inp, weight, bias, G, B, C, OC);
	x[i] = keep - h;
	fm = dense_objective(inp, weight, bias, G, B, C, OC);
	x[i] = keep;
	return (fp - fm) / dx;
}

/*
 * dense_backward against finite differences.  The layer is linear in each
 * argument, so the difference quotient has no truncation error: only the
 * float rounding of the forward pass (about 1e-7 of an O(1) objective,
 * divided by 2h = 2e-2) remains.  h = 1e-2, atol = 1e-4, rtol = 1e-3.
 */
static void
test_dense(void)
{
	enum
	{
		B = 3, C = 4, OC = 5
	};
	DmlRng		rng;
	float		inp[B * C],
				weight[OC * C],
				bias[OC],
				G[B * OC];
	float		dinp[B * C],
				dweight[OC * C],
				dbias[OC];
	double		ref_inp[B * C],
				ref_weight[OC * C],
				ref_bias[OC];
	const float h = 1e-2f;
	const double atol = 1e-4,
				rtol = 1e-3;

	dml_rng_seed(&rng, 11);
	fill_uniform(inp, B * C, &rng, -1, 1);
	fill_uniform(weight, OC * C, &rng, -1, 1);
	fill_uniform(bias, OC, &rng, -1, 1);
	fill_uniform(G, B * OC, &rng, -1, 1);

	/* forward by hand, and the B == 1 (sgemv) path against the sgemm one */
	{
		float		out[B * OC],
					row[OC];
		double		ref[B * OC];
		int			bad = 0;

		dense_forward(out, inp, weight, bias, B, C, OC);
		for (int b = 0; b < B; b++)
			for (int o = 0; o < OC; o++)
			{
				double		s = bias[o];

				for (int c = 0; c < C; c++)
					s += (double) inp[b * C + c] * weight[o * C + c];
				ref[b * OC + o] = s;
			}
		check_vec("dense_forward equals the sum by hand", out, ref, B * OC, 1e-6, 1e-6);
		for (int b = 0; b < B; b++)
		{
			dense_forward(row, inp + b * C, weight, bias, 1, C, OC);
			for (int o = 0; o < OC; o++)
				if (fabsf(row[o] - out[b * OC + o]) > 1e-6f)
					bad++;
		}
		check(bad == 0, "dense_forward B=1 (sgemv) equals B>1 (sgemm)", "%d values differ", bad);
	}

	memset(dweight, 0, sizeof(dweight));
	memset(dbias, 0, sizeof(dbias));
	dense_backward(dinp, dweight, dbias, G, inp, weight, B, C, OC);
	for (int i = 0; i < B * C; i++)
		ref_inp[i] = dense_fd(inp, i, h, inp, weight, bias, G, B, C, OC);
	for (int i = 0; i < OC * C; i++)
		ref_weight[i] = dense_fd(weight, i, h, inp, weight, bias, G, B, C, OC);
	for (int i = 0; i < OC; i++)
		ref_bias[i] = dense_fd(bias, i, h, inp, weight, bias, G, B, C, OC);
	check_vec("dense_backward dinp vs finite differences", dinp, ref_inp, B * C, atol, rtol);
	check_vec("dense_backward dweight vs finite differences", dweight, ref_weight, OC * C, atol, rtol);
	check_vec("dense_backward dbias vs finite differences", dbias, ref_bias, OC, atol, rtol);

	/* dweight and dbias accumulate; dinp may be NULL */
	{
		float		dw2[OC * C],
					db2[OC];
		int			bad = 0;

		memcpy(dw2, dweight, sizeof(dw2));
		memcpy(db2, dbias, sizeof(db2));
		dense_backward(NULL, dw2, db2, G, inp, weight, B, C, OC);
		for (int i = 0; i < OC * C; i++)
			if (!close_to(dw2[i], 2.0 * dweight[i], 1e-6, 1e-6))
				bad++;
		for (int i = 0; i < OC; i++)
			if (!close_to(db2[i], 2.0 * dbias[i], 1e-6, 1e-6))
				bad++;
		check(bad == 0, "dense_backward accumulates into dweight/dbias (dinp NULL)",
			  "%d values are not doubled", bad);
	}
}

/* ---------------------------------------------------------------------
 * Activations
 * --------------------------------------------------------------------- */

/*
 * activation_backward against finite differences, element by element
 * (the activation is elementwise, so d/dx_i sum(act(x) .* G) involves only
 * x_i).  Inputs keep |x| >= 0.1 so relu's kink is never inside [x-h, x+h].
 * h = 1e-3: truncation h^2/6 |act'''| < 1e-6, float rounding of act(x)
 * (6e-8) over 2h gives 3e-5, so atol = 1e-4 and rtol = 1e-3.
 */
static void
test_activations(void)
{
	enum
	{
		N = 64
	};
	const DmlAct acts[] = {DML_ACT_RELU, DML_ACT_TANH, DML_ACT_SIGMOID, DML_ACT_IDENTITY};
	const float h = 1e-3f;
	DmlRng		rng;

	dml_rng_seed(&rng, 12);
	for (int a = 0; a < 4; a++)
	{
		DmlAct		act = acts[a];
		float		x[N],
					y[N],
					G[N],
					dx[N];
		double		ref[N];
		char		name[96];

		fill_away_from_zero(x, N, &rng, 0.1, 3.0);
		fill_uniform(G, N, &rng, -1, 1);
		activation_forward(y, x, N, act);
		activation_backward(dx, G, y, N, act);
		for (int i = 0; i < N; i++)
		{
			float		p = x[i] + h,
						m = x[i] - h,
						yp,
						ym;

			activation_forward(&yp, &p, 1, act);
			activation_forward(&ym, &m, 1, act);
			ref[i] = G[i] * ((double) yp - ym) / step_taken(x[i], h);
		}
		snprintf(name, sizeof(name), "activation_backward %s vs finite differences",
				 dml_act_name(act));
		check_vec(name, dx, ref, N, 1e-4, 1e-3);

		/* in place, as net.c calls it */
		memcpy(dx, G, sizeof(dx));
		activation_backward(dx, dx, y, N, act);
		snprintf(name, sizeof(name), "activation_backward %s in place", dml_act_name(act));
		check_vec(name, dx, ref, N, 1e-4, 1e-3);
	}

	/* forward values at a few points by hand */
	{
		float		x[3] = {-2.0f, 0.0f, 1.5f},
					y[3];

		activation_forward(y, x, 3, DML_ACT_RELU);
		check(y[0] == 0.0f && y[1] == 0.0f && y[2] == 1.5f, "relu forward", "%g %g %g", y[0], y[1], y[2]);
		activation_forward(y, x, 3, DML_ACT_SIGMOID);
		check(close_to(y[0], 0.119202922, 1e-7, 1e-6) && y[1] == 0.5f &&
			  close_to(y[2], 0.817574476, 1e-7, 1e-6), "sigmoid forward", "%g %g %g", y[0], y[1], y[2]);
		activation_forward(y, x, 3, DML_ACT_TANH);
		check(close_to(y[0], -0.964027580, 1e-7, 1e-6) && y[1] == 0.0f &&
			  close_to(y[2], 0.905148254, 1e-7, 1e-6), "tanh forward", "%g %g %g", y[0], y[1], y[2]);
	}
	check(dml_act_parse("tanh") == DML_ACT_TANH && dml_act_parse("gelu") == -1 &&
		  strcmp(dml_act_name(DML_ACT_SIGMOID), "sigmoid") == 0,
		  "dml_act_parse / dml_act_name", NULL);
}

/* ---------------------------------------------------------------------
 * Losses
 * --------------------------------------------------------------------- */

/* the sum of losses for one of the three losses */
static double
loss_sum(DmlLoss loss, float *scratch, const float *z, const float *y, int B, int K)
{
	switch (loss)
	{
		case DML_LOSS_MSE:
			return mse_forward_backward(scratch, z, y, B, K);
		case DML_LOSS_BCE:
			return bce_forward_backward(scratch, z, y, B);
		case DML_LOSS_SOFTMAX:
			return softmax_forward_backward(scratch, NULL, z, y, B, K);
	}
	return NAN;
}

/*
 * dlogits of each loss against finite differences of the returned sum.
 * h = 1e-3; the per-row terms are float (logf, log1pf: 1e-7 of O(1)), so
 * rounding over 2h is about 1e-4 at worst: atol = 5e-4, rtol = 5e-3.
 */
static void
test_loss_gradients(void)
{
	enum
	{
		B = 5, K = 4
	};
	const DmlLoss losses[] = {DML_LOSS_MSE, DML_LOSS_BCE, DML_LOSS_SOFTMAX};
	const char *names[] = {"mse", "bce", "softmax"};
	const float h = 1e-3f;
	DmlRng		rng;

	dml_rng_seed(&rng, 13);
	for (int l = 0; l < 3; l++)
	{
		DmlLoss		loss = losses[l];
		int			k = loss == DML_LOSS_BCE ? 1 : K;
		int			n = B * k;
		float		z[B * K],
					y[B * K],
					dz[B * K],
					scratch[B * K];
		double		ref[B * K];
		char		name[96];

		fill_uniform(z, n, &rng, -3, 3);
		for (int i = 0; i < (loss == DML_LOSS_MSE ? n : B); i++)
		{
			if (loss == DML_LOSS_MSE)
				y[i] = (float) (4.0 * dml_rng_uniform(&rng) - 2.0);
			else if (loss == DML_LOSS_BCE)
				y[i] = (float) (dml_rng_next(&rng) & 1);
			else
				y[i] = (float) (dml_rng_next(&rng) % K);
		}
		loss_sum(loss, dz, z, y, B, k);
		for (int i = 0; i < n; i++)
		{
			float		keep = z[i];
			double		fp,
						fm;

			z[i] = keep + h;
			fp = loss_sum(loss, scratch, z, y, B, k);
			z[i] = keep - h;
			fm = loss_sum(loss, scratch, z, y, B, k);
			z[i] = keep;
			ref[i] = (fp - fm) / step_taken(keep, h);
		}
		snprintf(name, sizeof(name), "%s dlogits vs finite differences", names[l]);
		check_vec(name, dz, ref, n, 5e-4, 5e-3);
	}

	/* the loss values themselves on one row each, by hand */
	{
		float		z[3] = {1.0f, 2.0f, 3.0f},
					t[3] = {0.5f, 2.0f, 1.0f},
					d[3],
					p[3];
		float		lbl = 2.0f;

		/* (0.5)^2 + 0 + 2^2 = 4.25 */
		check_num("mse loss by hand", mse_forward_backward(d, z, t, 1, 3), 4.25, 1e-9, 1e-9);
		/* log(1 + e^1) - 1 * 1 = 0.313261687518 */
		check_num("bce loss by hand", bce_forward_backward(d, z, t + 2, 1), 0.313261687518, 1e-6, 1e-6);
		/* log(e + e^2 + e^3) - 3 = 0.407605964 */
		check_num("softmax loss by hand", softmax_forward_backward(d, p, z, &lbl, 1, 3),
				  0.407605964, 1e-6, 1e-6);
		check(close_to(p[0] + p[1] + p[2], 1.0, 1e-6, 0) && close_to(p[2], 0.665240956, 1e-6, 1e-6),
			  "softmax probs sum to 1", "%g %g %g", p[0], p[1], p[2]);
	}
}

/*
 * softmax_forward_backward's vectorized exponentials against libm in
 * double: minibatches of 1 to 133 rows (groups of 64 and a rest) of 2 to 12 classes, logits in
 * [-40, 40] with some rows at +-1000 (probabilities of 0 and 1), every
 * probability and gradient within 4e-7 and the loss within 1e-6 relative;
 * a row with a label outside 0..K-1 is NaN and so is the loss
 */
static void
test_softmax_exp(void)
{
	DmlRng		rng;
	double		worst_d = 0,
				worst_loss = 0;
	bool		nan_ok = true;

	dml_rng_seed(&rng, 77);
	for (int K = 2; K <= 12; K++)
		for (int B = 1; B <= 133; B += 12)
		{
			size_t		n = (size_t) B * K;
			float	   *z = malloc(sizeof(float) * n),
					   *d = malloc(sizeof(float) * n),
					   *p = malloc(sizeof(float) * n),
					   *y = malloc(sizeof(float) * B);
			double		want = 0,
						got;

			for (size_t i = 0; i < n; i++)
				z[i] = (float) (80.0 * dml_rng_uniform(&rng) - 40.0);
			for (int b = 0; b < B; b += 5)
				for (int k = 0; k < K; k++)
					z[(size_t) b * K + k] = (dml_rng_next(&rng) & 1) ? 1000.0f : -1000.0f;
			for (int b = 0; b < B; b++)
				y[b] = (float) (dml_rng_next(&rng) % K);
			got = softmax_forward_backward(d, p, z, y, B, K);
			for (int b = 0; b < B; b++)
			{
				const float *zb = z + (size_t) b * K;
				double		m = zb[0],
							den = 0;

				for (int k = 1; k < K; k++)
					m = fmax(m, zb[k]);
				for (int k = 0; k < K; k++)
					den += exp((double) zb[k] - m);
				want += log(den) + m - zb[(int) y[b]];
				for (int k = 0; k < K; k++)
				{
					double		pk = exp((double) zb[k] - m) / den;
					double		dk = pk - (k == (int) y[b]);

					worst_d = fmax(worst_d, fabs(p[(size_t) b * K + k] - pk));
					worst_d = fmax(worst_d, fabs(d[(size_t) b * K + k] - dk));
				}
			}
			worst_loss = fmax(worst_loss, fabs(got - want) / fmax(fabs(want), 1e-300));
			/* one label out of range: its row and the loss are NaN, the others untouched */
			y[B / 2] = (float) K;
			got = softmax_forward_backward(d, p, z, y, B, K);
			nan_ok = nan_ok && isnan(got);
			for (int k = 0; k < K; k++)
				nan_ok = nan_ok && isnan(d[(size_t) (B / 2) * K + k]);
			for (int b = 0; b < B; b++)
				for (int k = 0; b != B / 2 && k < K; k++)
					nan_ok = nan_ok && isfinite(d[(size_t) b * K + k]);
			free(z);
			free(d);
			free(p);
			free(y);
		}
	check(worst_d <= 4e-7, "softmax probabilities and gradients match libm's in double",
		  "worst difference %.3g", worst_d);
	check(worst_loss <= 1e-6, "softmax loss sums match libm's in double",
		  "worst relative difference %.3g", worst_loss);
	check(nan_ok, "softmax: a label out of range makes its row and the loss NaN", NULL);
}

/* softmax at logits of +-1000 and BCE at +-100: finite and exact */
static void
test_loss_stability(void)
{
	float		d[3],
				p[3];
	double		s;

	{
		float		z[3] = {1000.0f, -1000.0f, 0.0f};
		float		y0 = 0.0f,
					y1 = 1.0f;

		/* label 0: logsumexp = 1000, loss 0; label 1: loss 2000 */
		s = softmax_forward_backward(d, p, z, &y0, 1, 3);
		check(isfinite(s) && fabs(s) < 1e-6 && isfinite(d[0]) && isfinite(d[1]) &&
			  isfinite(d[2]) && fabsf(d[0]) < 1e-6f && fabsf(d[1]) < 1e-6f && fabsf(d[2]) < 1e-6f,
			  "softmax at +-1000, right label: loss 0, dlogits 0",
			  "loss %g dlogits %g %g %g", s, d[0], d[1], d[2]);
		s = softmax_forward_backward(d, p, z, &y1, 1, 3);
		check(close_to(s, 2000.0, 1e-3, 1e-6) && close_to(d[0], 1.0, 1e-6, 0) &&
			  close_to(d[1], -1.0, 1e-6, 0) && fabsf(d[2]) < 1e-6f,
			  "softmax at +-1000, wrong label: loss 2000, dlogits (1,-1,0)",
			  "loss %g dlogits %g %g %g", s, d[0], d[1], d[2]);
	}
	{
		float		z[2] = {1000.0f, 1000.0f};
		float		y0 = 0.0f;

		s = softmax_forward_backward(d, p, z, &y0, 1, 2);
		check(close_to(s, log(2.0), 1e-6, 0) && close_to(d[0], -0.5, 1e-6, 0) &&
			  close_to(d[1], 0.5, 1e-6, 0), "softmax at (1000, 1000): log 2",
			  "loss %g dlogits %g %g", s, d[0], d[1]);
	}
	{
		/* (z, y): loss log(1+e^z) - y z, dlogit sigmoid(z) - y */
		const float zs[4] = {100.0f, 100.0f, -100.0f, -100.0f};
		const float ys[4] = {1.0f, 0.0f, 0.0f, 1.0f};
		const double want_loss[4] = {0.0, 100.0, 0.0, 100.0};
		const double want_d[4] = {0.0, 1.0, 0.0, -1.0};
		int			bad = 0;

		for (int i = 0; i < 4; i++)
		{
			float		dz;

			s = bce_forward_backward(&dz, &zs[i], &ys[i], 1);
			if (!isfinite(s) || !close_to(s, want_loss[i], 1e-6, 1e-6) ||
				!close_to(dz, want_d[i], 1e-6, 0))
			{
				bad++;
				printf("# bce z=%g y=%g: loss %g dlogit %g\n", zs[i], ys[i], s, dz);
			}
		}
		check(bad == 0, "bce at +-100: finite, exact loss and dlogit", "%d cases wrong", bad);
	}
}

/* ---------------------------------------------------------------------
 * The network
 * --------------------------------------------------------------------- */

/*
 * dml_net_forward_backward of a 2-hidden-layer MLP (3-5-4-K) against
 * finite differences over every parameter, once per loss.  Biases are set
 * nonzero so they matter.  h = 1e-3: the loss of 4 rows is O(1) and its
 * float rounding over 2h is about 2e-4, so atol = 1e-3 and rtol = 1e-2; a
 * wrong gradient is off by O(1).  The relu case is seeded so no hidden
 * pre-activation sits within reach of the kink (a kink would show as a
 * single outlier element).
 */
static void
test_net_gradients(void)
{
	const DmlLoss losses[] = {DML_LOSS_MSE, DML_LOSS_BCE, DML_LOSS_SOFTMAX};
	const DmlAct acts[] = {DML_ACT_TANH, DML_ACT_SIGMOID, DML_ACT_RELU};
	const int	outs[] = {2, 1, 3};
	const char *names[] = {"mse", "bce", "softmax"};
	const int	B = 4;
	const float h = 1e-3f;

	for (int l = 0; l < 3; l++)
	{
		int			sizes[4] = {3, 5, 4, outs[l]};
		int			K = outs[l];
		DmlNet		net;
		DmlWork		work;
		DmlRng		rng;
		float	   *grads,
				   *scratch,
				   *X,
				   *y;
		double	   *ref;
		double		loss;
		char		name[128];

		if (dml_net_alloc(&net, 3, sizes, acts[l], losses[l]) != DML_OK ||
			dml_work_alloc(&work, &net, B) != DML_OK)
		{
			check(0, "dml_net_alloc", "allocation failed");
			return;
		}
		dml_net_init(&net, 100 + l);
		dml_rng_seed(&rng, 200 + l);
		for (int j = 0; j < net.nlayers; j++)
			fill_uniform(net.params + dml_net_bias_offset(&net, j), sizes[j + 1], &rng, -0.5, 0.5);
		grads = calloc(net.nparams, sizeof(float));
		scratch = calloc(net.nparams, sizeof(float));
		ref = calloc(net.nparams, sizeof(double));
		X = malloc(sizeof(float) * B * sizes[0]);
		y = malloc(sizeof(float) * B * K);
		fill_uniform(X, (size_t) B * sizes[0], &rng, -2, 2);
		for (int i = 0; i < (losses[l] == DML_LOSS_MSE ? B * K : B); i++)
			y[i] = losses[l] == DML_LOSS_MSE ? (float) (2.0 * dml_rng_uniform(&rng) - 1.0) :
				(float) (dml_rng_next(&rng) % (losses[l] == DML_LOSS_BCE ? 2 : K));

		loss = dml_net_forward_backward(&net, &work, grads, X, y, B);
		for (size_t i = 0; i < net.nparams; i++)
		{
			float		keep = net.params[i];
			double		fp,
						fm;

			net.params[i] = keep + h;
			fp = dml_net_forward_backward(&net, &work, scratch, X, y, B);
			net.params[i] = keep - h;
			fm = dml_net_forward_backward(&net, &work, scratch, X, y, B);
			net.params[i] = keep;
			ref[i] = (fp - fm) / step_taken(keep, h);
		}
		snprintf(name, sizeof(name), "dml_net_forward_backward 3-5-4-%d %s/%s vs finite differences",
				 K, dml_act_name(acts[l]), names[l]);
		check_vec(name, grads, ref, net.nparams, 1e-3, 1e-2);
		snprintf(name, sizeof(name), "dml_net_forward_backward %s loss is finite and positive", names[l]);
		check(isfinite(loss) && loss > 0, name, "loss %g", loss);

		/* dml_net_gradient overwrites: from a buffer of junk, the same gradient (scaled) */
		{
			double		gl;
			int			same = 1;

			for (size_t i = 0; i < net.nparams; i++)
				scratch[i] = 1e6f * (float) (i % 7) - 3e6f;
			gl = dml_net_gradient(&net, &work, scratch, X, y, B, 0.5f);
			for (size_t i = 0; i < net.nparams; i++)
				if (fabsf(scratch[i] - 0.5f * grads[i]) > 1e-6f * (1.0f + fabsf(grads[i])))
					same = 0;
			snprintf(name, sizeof(name), "dml_net_gradient %s overwrites with the scaled gradient",
					 names[l]);
			check(same && gl == loss, name, "loss %g vs %g", gl, loss);
		}

		free(grads);
		free(scratch);
		free(ref);
		free(X);
		free(y);
		dml_work_free(&work);
		dml_net_free(&net);
	}

	/* argument checks */
	{
		DmlNet		net;
		int			bad[3] = {3, 0, 2};

		check(dml_net_alloc(&net, 2, bad, DML_ACT_RELU, DML_LOSS_MSE) == DML_ERR_ARG &&
			  dml_net_alloc(&net, 0, bad, DML_ACT_RELU, DML_LOSS_MSE) == DML_ERR_ARG,
			  "dml_net_alloc rejects a zero width and zero layers", NULL);
	}
}

/* ---------------------------------------------------------------------
 * Optimizers and schedules
 * --------------------------------------------------------------------- */

/* each optimizer against hand-computed steps */
static void
test_optimizers(void)
{
	/*
	 * SGD, lr 0.1, weight decay 0.01, g = (0.5, 0.25) twice from (1, -2):
	 * p0: 1 - 0.1 (0.5 + 0.01) = 0.949; 0.949 - 0.1 (0.5 + 0.00949) = 0.898051
	 * p1: -2 - 0.1 (0.25 - 0.02) = -2.023; -2.023 - 0.1 (0.25 - 0.02023) = -2.045977
	 */
	{
		float		p[2] = {1.0f, -2.0f},
					g[2] = {0.5f, 0.25f};

		sgd_update(p, g, 2, 0.1f, 0.01f);
		check(close_to(p[0], 0.949, 1e-6, 0) && close_to(p[1], -2.023, 1e-6, 0),
			  "sgd_update with weight decay, step 1", "%.9g %.9g", p[0], p[1]);
		sgd_update(p, g, 2, 0.1f, 0.01f);
		check(close_to(p[0], 0.898051, 1e-6, 0) && close_to(p[1], -2.045977, 1e-6, 0),
			  "sgd_update with weight decay, step 2", "%.9g %.9g", p[0], p[1]);
	}

	/*
	 * Momentum, lr 0.1, mu 0.9, g = 1, p = 1:
	 * heavy ball: v = 1, 1.9, 2.71; p = 0.9, 0.71, 0.439
	 * Nesterov:   p -= 0.1 (1 + 0.9 v): 0.81, 0.539, 0.1951
	 */
	{
		const double heavy[3] = {0.9, 0.71, 0.439};
		const double nest[3] = {0.81, 0.539, 0.1951};

		for (int n = 0; n < 2; n++)
		{
			float		p = 1.0f,
						v = 0.0f,
						g = 1.0f;
			int			bad = 0;

			for (int t = 0; t < 3; t++)
			{
				momentum_update(&p, &v, &g, 1, 0.1f, 0.9f, 0.0f, n);
				if (!close_to(p, n ? nest[t] : heavy[t], 1e-6, 0))
				{
					bad++;
					printf("# step %d: p %.9g want %.9g\n", t + 1, p, n ? nest[t] : heavy[t]);
				}
			}
			check(bad == 0, n ? "momentum_update nesterov, 3 steps" : "momentum_update heavy ball, 3 steps",
				  "%d steps wrong", bad);
		}
		/* weight decay enters the gradient: g = 1 + 0.5 * 1 = 1.5, p = 1 - 0.1 * 1.5 */
		{
			float		p = 1.0f,
						v = 0.0f,
						g = 1.0f;

			momentum_update(&p, &v, &g, 1, 0.1f, 0.9f, 0.5f, 0);
			check(close_to(p, 0.85, 1e-6, 0) && close_to(v, 1.5, 1e-6, 0),
				  "momentum_update with weight decay", "p %.9g v %.9g", p, v);
		}
	}

	/*
	 * Adam, lr 0.1, betas (0.9, 0.999), eps 1e-8, p = 1, g = 1, -2, 0.5:
	 * t=1: m = 0.1, v = 0.001, m^ = 1, v^ = 1, p = 1 - 0.1 = 0.9
	 * t=2: m = -0.11, v = 0.004999, m^ = -0.578947, v^ = 2.500750,
	 *      p = 0.9 + 0.1 * 0.578947 / 1.581376 = 0.936610
	 * t=3: m = -0.049, v = 0.005244001, m^ = -0.180738, v^ = 1.749751,
	 *      p = 0.950279
	 * (as torch.optim.Adam; worked in double)
	 */
	{
		const float gs[3] = {1.0f, -2.0f, 0.5f};
		const double want[3] = {0.900000001, 0.9366103535, 0.9502794197};
		float		p = 1.0f,
					m = 0.0f,
					v = 0.0f;
		int			bad = 0;

		for (int t = 0; t < 3; t++)
		{
			adam_update(&p, &m, &v, &gs[t], 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.0f, t + 1);
			if (!close_to(p, want[t], 2e-6, 0))
			{
				bad++;
				printf("# step %d: p %.9g want %.9g\n", t + 1, p, want[t]);
			}
		}
		check(bad == 0, "adam_update, 3 steps", "%d steps wrong", bad);
	}
}

/* learning-rate schedules at chosen epochs */
static void
test_schedules(void)
{
	check_num("lr_at_epoch constant", lr_at_epoch(DML_SCHED_CONSTANT, 0.1f, 7, 10, 3, 0.5f), 0.1, 1e-7, 0);
	/* lr 0.1, step 3, gamma 0.5: epochs 0-2 -> 0.1, 3-5 -> 0.05, 7 -> 0.025 */
	check_num("lr_at_epoch step, epoch 2", lr_at_epoch(DML_SCHED_STEP, 0.1f, 2, 10, 3, 0.5f), 0.1, 1e-7, 0);
	check_num("lr_at_epoch step, epoch 3", lr_at_epoch(DML_SCHED_STEP, 0.1f, 3, 10, 3, 0.5f), 0.05, 1e-7, 0);
	check_num("lr_at_epoch step, epoch 7", lr_at_epoch(DML_SCHED_STEP, 0.1f, 7, 10, 3, 0.5f), 0.025, 1e-7, 0);
	/* cosine, 10 epochs: 0 -> lr, 2 -> 0.05 (1 + cos 0.2 pi) = 0.0904508, 5 -> lr / 2 */
	check_num("lr_at_epoch cosine, epoch 0", lr_at_epoch(DML_SCHED_COSINE, 0.1f, 0, 10, 0, 0), 0.1, 1e-7, 0);
	check_num("lr_at_epoch cosine, epoch 2", lr_at_epoch(DML_SCHED_COSINE, 0.1f, 2, 10, 0, 0), 0.0904508497, 1e-7, 0);
	check_num("lr_at_epoch cosine, epoch 5", lr_at_epoch(DML_SCHED_COSINE, 0.1f, 5, 10, 0, 0), 0.05, 1e-7, 0);
	check_num("lr_at_epoch cosine, epoch 10", lr_at_epoch(DML_SCHED_COSINE, 0.1f, 10, 10, 0, 0), 0.0, 1e-7, 0);
}

/* ---------------------------------------------------------------------
 * Random numbers
 * --------------------------------------------------------------------- */

/* the random stream and the shuffle */
static void
test_rng(void)
{
	DmlRng		a,
				b;
	int			idx[100],
				seen[100] = {0},
				dup = 0,
				same = 1;

	dml_rng_seed(&a, 42);
	dml_rng_seed(&b, 42);
	for (int i = 0; i < 1000; i++)
		if (dml_rng_next(&a) != dml_rng_next(&b))
			same = 0;
	check(same, "dml_rng: same seed, same stream", NULL);
	for (int i = 0; i < 100; i++)
		idx[i] = i;
	dml_shuffle(idx, 100, &a);
	for (int i = 0; i < 100; i++)
		if (idx[i] < 0 || idx[i] >= 100 || seen[idx[i]]++)
			dup++;
	check(dup == 0, "dml_shuffle is a permutation", "%d bad entries", dup);
}

/* ---------------------------------------------------------------------
 * Exact solver
 * --------------------------------------------------------------------- */

/* the SPD solver on a known system, a singular and an indefinite one */
static void
test_cholesky(void)
{
	/* A = L L^T with L = [[2,0,0],[6,1,0],[-8,5,3]]; x = (1,2,3), b = A x */
	{
		double		A[9] = {4, 12, -16, 12, 37, -43, -16, -43, 98};
		double		b[3] = {-20, -43, 192};
		DmlStatus	st = dml_cholesky_solve(A, b, 3);

		check(st == DML_OK && close_to(b[0], 1, 1e-10, 0) && close_to(b[1], 2, 1e-10, 0) &&
			  close_to(b[2], 3, 1e-10, 0), "dml_cholesky_solve on a known SPD system",
			  "status %d x = %g %g %g", st, b[0], b[1], b[2]);
		check(close_to(A[0], 2, 1e-12, 0) && close_to(A[3], 6, 1e-12, 0) &&
			  close_to(A[8], 3, 1e-12, 0), "dml_cholesky_solve leaves the factor L", NULL);
	}
	{
		double		A[4] = {1, 2, 2, 4};
		double		b[2] = {1, 2};

		check(dml_cholesky_solve(A, b, 2) == DML_ERR_SINGULAR,
			  "dml_cholesky_solve rejects a singular matrix", NULL);
	}
	{
		double		A[4] = {1, 0, 0, -1};
		double		b[2] = {1, 1};

		check(dml_cholesky_solve(A, b, 2) == DML_ERR_SINGULAR,
			  "dml_cholesky_solve rejects an indefinite matrix", NULL);
	}
}

/* Rosenbrock's function in n dimensions: minimum 0 at (1, ..., 1) */
static double
rosenbrock(void *arg, const double *x, double *g)
{
	int		   *n = arg;
	double		f = 0;

	memset(g, 0, sizeof(double) * *n);
	for (int i = 0; i + 1 < *n; i++)
	{
		double		a = x[i + 1] - x[i] * x[i];
		double		b = 1 - x[i];

		f += 100 * a * a + b * b;
		g[i] += -400 * a * x[i] - 2 * b;
		g[i + 1] += 200 * a;
	}
	return f;
}

/* L-BFGS: the two-loop recursion on a quadratic, the minimizer on Rosenbrock */
static void
test_lbfgs(void)
{
	/*
	 * On f = x'Ax/2 with A = diag(1, 10), two exact curvature pairs make
	 * the recursion's H the exact inverse: -H g = -A^-1 g.
	 */
	{
		DmlLbfgs	lb;
		double		s1[2] = {1, 0},
					y1[2] = {1, 0},
					s2[2] = {0, 1},
					y2[2] = {0, 10},
					g[2] = {3, 20},
					dir[2];

		dml_lbfgs_alloc(&lb, 2, 5);
		dml_lbfgs_push(&lb, s1, y1);
		dml_lbfgs_push(&lb, s2, y2);
		dml_lbfgs_direction(&lb, dir, g);
		check(close_to(dir[0], -3, 1e-12, 0) && close_to(dir[1], -2, 1e-12, 0),
			  "dml_lbfgs_direction inverts the Hessian its pairs describe",
			  "dir = %g %g", dir[0], dir[1]);
		check(!dml_lbfgs_push(&lb, s1, (double[]) {-1, 0}),
			  "dml_lbfgs_push skips a pair without positive curvature", NULL);
		dml_lbfgs_free(&lb);
	}
	{
		int			n = 6;
		double		x[6] = {-1.2, 1, -1.2, 1, -1.2, 1};
		DmlLbfgs	lb;
		DmlLbfgsProblem pb = {.n = 6, .objective = rosenbrock, .arg = &n, .owner = true,
		.max_iter = 500, .gtol = 1e-8};
		DmlLbfgsResult out;
		double		worst = 0;

		dml_lbfgs_alloc(&lb, 6, DML_LBFGS_DEFAULT_M);
		dml_lbfgs_minimize(&pb, &lb, x, &out);
		for (int i = 0; i < n; i++)
			worst = fmax(worst, fabs(x[i] - 1));
		check(worst < 1e-4 && out.reason == DML_STOP_CONVERGED && out.iterations < 500,
			  "dml_lbfgs_minimize finds Rosenbrock's minimum",
			  "worst |x - 1| %g after %d iterations (%s)", worst, out.iterations, dml_stop_name(out.reason));
		dml_lbfgs_free(&lb);
	}
}

/* ---------------------------------------------------------------------
 * The fused single-layer kernel (net.c) against the reference path
 * --------------------------------------------------------------------- */

/*
 * A single-layer net's data: X (B, C) uniform in [-1, 1), the weights
 * dml_net_init's times wscale (a large wscale drives the logits to the
 * loss's extremes), labels or targets for the loss.
 */
static void
fused_data(DmlNet *net, DmlLoss loss, int C, int K, int B, double wscale, DmlRng *rng,
		   float *X, float *y)
{
	int			sizes[2] = {C, K};

	dml_net_alloc(net, 1, sizes, DML_ACT_IDENTITY, loss);
	dml_net_init(net, dml_rng_next(rng));
	for (size_t i = 0; i < net->nparams; i++)
		net->params[i] = (float) (net->params[i] * wscale + (i >= (size_t) K * C ? 0.3 : 0));
	fill_uniform(X, (size_t) B * C, rng, -1, 1);
	for (int i = 0; i < (loss == DML_LOSS_MSE ? B * K : B); i++)
		y[i] = loss == DML_LOSS_MSE ? (float) (2 * dml_rng_uniform(rng) - 1) :
			(float) (dml_rng_next(rng) % (loss == DML_LOSS_BCE ? 2 : K));
}

/*
 * Fused and reference gradients of one case agree to float32 rounding:
 * each element within 2e-5 of the largest plus 1e-5 relative (the sums
 * over rows run in another order), the losses within 1e-5 relative.
 */
static void
fused_case(DmlLoss loss, int C, int K, int B, bool weighted, float scale,
		   bool accumulate, double wscale, DmlRng *rng)
{
	static const char *const names[] = {"mse", "bce", "softmax"};
	DmlNet		net;
	DmlWork		work;
	float	   *X = malloc(sizeof(float) * B * C);
	float	   *y = malloc(sizeof(float) * B * K);
	float	   *gf,
			   *gr;
	double	   *want;
	float		cw[16];
	double		lf,
				lr,
				big = 0;
	char		name[160];

	fused_data(&net, loss, C, K, B, wscale, rng, X, y);
	gf = malloc(sizeof(float) * net.nparams);
	gr = malloc(sizeof(float) * net.nparams);
	want = malloc(sizeof(double) * net.nparams);
	for (int k = 0; k < 16; k++)
		cw[k] = 0.5f + 0.25f * k;
	dml_work_alloc(&work, &net, B);
	work.class_weight = weighted ? cw : NULL;
	/* accumulate onto the same start; overwrite a buffer of junk */
	for (size_t i = 0; i < net.nparams; i++)
		gf[i] = gr[i] = accumulate ? (float) (0.01 * (double) i) : 1e30f;
	work.unfused = true;
	lr = accumulate ? dml_net_forward_backward_scaled(&net, &work, gr, X, y, B, scale) :
		dml_net_gradient(&net, &work, gr, X, y, B, scale);
	work.unfused = false;
	lf = accumulate ? dml_net_forward_backward_scaled(&net, &work, gf, X, y, B, scale) :
		dml_net_gradient(&net, &work, gf, X, y, B, scale);
	for (size_t i = 0; i < net.nparams; i++)
	{
		want[i] = gr[i];
		big = fmax(big, fabs(gr[i]));
	}
	snprintf(name, sizeof(name), "fused %s %dx%d B=%d%s scale %g%s%s: gradient as the reference path's",
			 names[loss], C, K, B, weighted ? " class-weighted" : "", scale,
			 accumulate ? " accumulating" : "", wscale > 1 ? " extreme logits" : "");
	check_vec(name, gf, want, net.nparams, 2e-5 * big, 1e-5);
	snprintf(name, sizeof(name), "fused %s %dx%d B=%d%s scale %g%s%s: loss as the reference path's",
			 names[loss], C, K, B, weighted ? " class-weighted" : "", scale,
			 accumulate ? " accumulating" : "", wscale > 1 ? " extreme logits" : "");
	check(close_to(lf, lr, 1e-6, 1e-5) && isfinite(lf), name, "fused %.9g reference %.9g", lf, lr);
	dml_work_free(&work);
	dml_net_free(&net);
	free(X), free(y), free(gf), free(gr), free(want);
}

/* L-BFGS's objective over a single-layer net: loss sum + L2 penalty, doubles outside */
typedef struct FusedObjective
{
	DmlNet	   *net;
	DmlWork    *work;
	const float *X,
			   *y;
	int			n;
	double		lambda;
	float	   *grads;
} FusedObjective;

static double
fused_objective(void *arg, const double *x, double *g)
{
	FusedObjective *o = arg;
	double		f;

	for (size_t i = 0; i < o->net->nparams; i++)
		o->net->params[i] = (float) x[i];
	f = dml_net_full_gradient(o->net, o->work, o->grads, o->X, o->y, o->n, 64);
	for (size_t i = 0; i < o->net->nparams; i++)
		g[i] = o->grads[i];
	return f + dml_net_penalty(o->net, o->lambda, x, g);
}

/*
 * The float64 logistic rows (logit.c) against libm: probabilities, losses
 * and the line search's derivatives per row, and dml_logit_stats against
 * the per-row libm form it replaced, on logits from 0 to beyond +-700.
 */
static double
ref_logit_row(double z, double y, double *pr)
{
	double		u = exp(-fabs(z));

	*pr = z >= 0 ? 1.0 / (1.0 + u) : u / (1.0 + u);
	return (z > 0 ? z : 0) + log1p(u) - y * z;
}

static void
test_logit_rows(void)
{
	DmlRng		rng;
	enum
	{
		N = 1003, D = 7
	};
	static double z[N],
				ed[N],
				pr[N],
				X[N * D],
				y[N];
	static int	label[N];
	static unsigned char skip[N];
	const double edge[] = {0.0, -0.0, 1e-300, -1e-300, 1e-17, -1e-17, 0.5, -0.5, 0.6931471805599453,
		-0.6931471805599453, 1.0, -1.0, 20.0, -20.0, 36.7, -36.7, 40.0, -40.0, 700.0, -700.0,
	708.5, -708.5, 745.2, -745.2, 800.0, -800.0, 1e300, -1e300};
	int			nedge = (int) (sizeof(edge) / sizeof(edge[0]));
	double		worst_p = 0,
				worst_l = 0,
				want_sum = 0,
				got_sum;

	dml_rng_seed(&rng, 4242);
	for (int i = 0; i < N; i++)
	{
		double		u = dml_rng_uniform(&rng);

		z[i] = i < nedge ? edge[i] : (u < 0.5 ? 30.0 : 3.0) * (2 * dml_rng_uniform(&rng) - 1);
		ed[i] = 2 * dml_rng_uniform(&rng) - 1;
		label[i] = dml_rng_uniform(&rng) < 0.5;
	}
	got_sum = dml_logit_probs(z, label, N, pr, true);
	for (int i = 0; i < N; i++)
	{
		double		p,
					l = ref_logit_row(z[i], label[i], &p),
					gl;

		want_sum += l;
		/* below e^-708 (z < -708) the rows give e^-708: 1e-300 absolute */
		worst_p = fmax(worst_p, fmax(fabs(pr[i] - p) - 1e-300, 0) / fmax(p, 1e-300));
		(void) dml_logit_probs(&z[i], &label[i], 1, &p, false);
		gl = dml_logit_probs(&z[i], &label[i], 1, &p, true);
		/* relative to the terms' size: z - y z cancels where the loss is small */
		worst_l = fmax(worst_l, fmax(fabs(gl - l) - 1e-300, 0) / fmax(fabs(l) + fabs(z[i]), 1e-300));
	}
	check(worst_p <= 4e-16, "logit rows: probabilities within 2 ulp of libm's (1e-300 absolute)", "worst relative %.3g", worst_p);
	check(worst_l <= 4e-16, "logit rows: losses within 2 ulp of libm's (of |loss| + |z|; 1e-300 absolute)",
		  "worst relative %.3g", worst_l);
	check_num("logit rows: the losses' sum", got_sum, want_sum, 0, 1e-14);
	check(dml_logit_probs(z, label, N, pr, false) == 0, "logit rows: no loss asked, 0", NULL);
	{
		double		nanz = NAN,
					p;
		int			one = 1;

		check(isnan(dml_logit_probs(&nanz, &one, 1, &p, true)) && isnan(p),
			  "logit rows: a NaN logit gives NaN", NULL);
	}

	/* the line search's sums, every row and every third */
	for (int stride = 1; stride <= 3; stride += 2)
	{
		double		got[3],
					want[3] = {0, 0, 0},
					t = 0.37;
		char		name[80];

		double		sq,
					want_sq = 0;

		dml_logit_line(z, ed, label, N, stride, t, true, got, &sq);
		for (int j = 0; j < N; j += stride)
		{
			double		p,
						s1;

			want[0] += ref_logit_row(z[j] - t * ed[j], label[j], &p);
			want[1] -= ed[j] * (p - label[j]);
			want[2] += ed[j] * ed[j] * p * (1 - p);
			s1 = ed[j] * (p - label[j]);
			want_sq += s1 * s1;
		}
		snprintf(name, sizeof(name), "logit line, stride %d: squared terms of the first derivative", stride);
		check_num(name, sq, want_sq, 1e-12, 1e-12);
		{
			double		again[3];

			dml_logit_line(z, ed, label, N, stride, t, true, again, NULL);
			snprintf(name, sizeof(name), "logit line, stride %d: the same sums with and without the squares", stride);
			check(memcmp(again, got, sizeof(again)) == 0, name, NULL);
		}
		snprintf(name, sizeof(name), "logit line, stride %d: loss", stride);
		check_num(name, got[0], want[0], 0, 1e-14);
		snprintf(name, sizeof(name), "logit line, stride %d: first derivative", stride);
		check_num(name, got[1], want[1], 1e-12, 1e-12);
		snprintf(name, sizeof(name), "logit line, stride %d: second derivative", stride);
		check_num(name, got[2], want[2], 1e-12, 1e-12);
	}

	/* dml_logit_stats against the per-row form, with rows skipped and a block boundary crossed */
	{
		double		beta[D + 1],
					g[D + 1] = {0},
					H[(D + 1) * (D + 1)] = {0},
					wg[D + 1] = {0},
					wH[(D + 1) * (D + 1)] = {0},
					nll,
					wnll = 0,
					eg = 0,
					eH = 0;

		for (int c = 0; c <= D; c++)
			beta[c] = 2 * dml_rng_uniform(&rng) - 1;
		for (int i = 0; i < N; i++)
		{
			for (int c = 0; c < D; c++)
				X[i * D + c] = 4 * dml_rng_uniform(&rng) - 2;
			y[i] = dml_rng_uniform(&rng) < 0.4;
			skip[i] = i % 11 == 3;
		}
		nll = dml_logit_stats(g, H, X, y, skip, N, D, beta);
		for (int i = 0; i < N; i++)
		{
			double		eta = beta[D],
						p,
						zr[D + 1];

			if (skip[i])
				continue;
			for (int c = 0; c < D; c++)
				eta += beta[c] * X[i * D + c];
			wnll += ref_logit_row(eta, y[i], &p);
			for (int c = 0; c < D; c++)
				zr[c] = X[i * D + c];
			zr[D] = 1;
			for (int a = 0; a <= D; a++)
			{
				wg[a] += (p - y[i]) * zr[a];
				for (int b = 0; b <= D; b++)
					wH[a * (D + 1) + b] += p * (1 - p) * zr[a] * zr[b];
			}
		}
		for (int a = 0; a <= D; a++)
		{
			eg = fmax(eg, fabs(g[a] - wg[a]) / (1 + fabs(wg[a])));
			for (int b = 0; b <= D; b++)
				eH = fmax(eH, fabs(H[a * (D + 1) + b] - wH[a * (D + 1) + b]) /
						  (1 + fabs(wH[a * (D + 1) + b])));
		}
		check_num("logit stats: the negative log-likelihood", nll, wnll, 0, 1e-13);
		check(eg <= 1e-12, "logit stats: the gradient", "worst %.3g", eg);
		check(eH <= 1e-12, "logit stats: the Hessian", "worst %.3g", eH);
		{
			/* without the Hessian (the polish's stop test): the same gradient and sum, bit for bit */
			double		g0[D + 1] = {0},
						nll0 = dml_logit_stats(g0, NULL, X, y, skip, N, D, beta);

			check(nll0 == nll && memcmp(g0, g, sizeof(g)) == 0,
				  "logit stats without the Hessian: the same gradient and sum, bit for bit", NULL);
		}
	}
}

static void
test_fused(void)
{
	DmlRng		rng;
	const int	Bs[] = {1, 7, 16, 37, 256};
	const int	Cs[] = {1, 5, 20, 25, 32, 33};

	dml_rng_seed(&rng, 2020);
	/* one output (linear, logistic): every shape and row count, each option on its own */
	for (int l = 0; l < 2; l++)
		for (int ci = 0; ci < 6; ci++)
			for (int bi = 0; bi < 5; bi++)
			{
				DmlLoss		loss = (DmlLoss) l;

				fused_case(loss, Cs[ci], 1, Bs[bi], false, 1.0f, false, 1.0, &rng);
				if (loss == DML_LOSS_BCE)
					fused_case(loss, Cs[ci], 1, Bs[bi], true, 1.0f, false, 1.0, &rng);
				fused_case(loss, Cs[ci], 1, Bs[bi], loss == DML_LOSS_BCE, 1.0f / 256, true, 1.0, &rng);
			}
	/* logits far out (|z| to about 100): the loss's stable forms */
	fused_case(DML_LOSS_BCE, 20, 1, 256, false, 1.0f, false, 150.0, &rng);
	fused_case(DML_LOSS_BCE, 20, 1, 256, true, 0.5f, false, 150.0, &rng);
	fused_case(DML_LOSS_MSE, 20, 1, 256, false, 0.5f, true, 150.0, &rng);

	/* a bad label or a NaN feature poisons the loss and every gradient, as in the reference */
	for (int l = 0; l < 2; l++)
	{
		DmlNet		net;
		DmlWork		work;
		float		X[16 * 6],
					y[16],
					g[2][7];
		double		loss[2];
		bool		poisoned = true;

		for (int t = l == 0 ? 1 : 0; t < 2; t++)
		{
			fused_data(&net, (DmlLoss) l, 6, 1, 16, 1.0, &rng, X, y);
			dml_work_alloc(&work, &net, 16);
			if (t == 0)
				y[5] = 2.0f;	/* not a class: its weight is NaN */
			else
				X[3 * 6 + 2] = NAN;
			work.class_weight = t == 0 ? (const float[]) {1, 2} : NULL;
			for (int f = 0; f < 2; f++)
			{
				work.unfused = f == 0;
				loss[f] = dml_net_gradient(&net, &work, g[f], X, y, 16, 1.0f);
			}
			for (int f = 0; f < 2; f++)
			{
				poisoned = poisoned && isnan(loss[f]);
				for (int i = 0; i < 7; i++)
					if (!isnan(g[f][i]))
						poisoned = false;
			}
			dml_work_free(&work);
			dml_net_free(&net);
		}
		check(poisoned, l == 1 ? "fused bce: a bad class-weight label or a NaN feature gives NaN, as the reference" :
			  "fused mse: a NaN feature gives NaN, as the reference", NULL);
	}

	/* L2 in the optimizer: 50 SGD steps with weight decay reach the same weights */
	for (int l = 0; l < 2; l++)
	{
		DmlNet		net[2];
		DmlWork		work;
		int			n = 400,
					C = 12;
		float	   *X = malloc(sizeof(float) * n * C),
				   *y = malloc(sizeof(float) * n),
				   *g = malloc(sizeof(float) * (C + 1));
		double		want[64];
		char		name[96];

		fused_data(&net[0], (DmlLoss) l, C, 1, n, 1.0, &rng, X, y);
		dml_net_alloc(&net[1], 1, net[0].sizes, DML_ACT_IDENTITY, (DmlLoss) l);
		memcpy(net[1].params, net[0].params, sizeof(float) * net[0].nparams);
		dml_work_alloc(&work, &net[0], 32);
		for (int f = 0; f < 2; f++)
		{
			work.unfused = f == 0;
			for (int step = 0; step < 50; step++)
			{
				int			lo = (step * 32) % (n - 32);

				dml_net_gradient(&net[f], &work, g, X + (size_t) lo * C, y + lo, 32, 1.0f / 32);
				sgd_update(net[f].params, g, net[f].nparams, 0.1f, 0.01f);
			}
		}
		for (size_t i = 0; i < net[0].nparams; i++)
			want[i] = net[0].params[i];
		snprintf(name, sizeof(name), "fused %s: SGD with weight decay, 50 steps, the reference path's weights",
				 l == 0 ? "mse" : "bce");
		check_vec(name, net[1].params, want, net[0].nparams, 1e-5, 1e-5);
		dml_work_free(&work);
		dml_net_free(&net[0]);
		dml_net_free(&net[1]);
		free(X), free(y), free(g);
	}

	/* L-BFGS with the L2 penalty, and OWL-QN with L1 too: the same optimum */
	for (int l = 0; l < 2; l++)
		for (int withl1 = 0; withl1 < 2; withl1++)
		{
			DmlNet		net;
			DmlWork		work;
			int			n = 300,
						C = 8;
			float	   *X = malloc(sizeof(float) * n * C),
					   *y = malloc(sizeof(float) * n),
					   *grads;
			float		cw[2] = {0.5f, 2.0f};
			double	   *x[2],
						obj[2];
			unsigned char *mask;
			double		worst = 0;
			char		name[128];

			fused_data(&net, (DmlLoss) l, C, 1, n, 1.0, &rng, X, y);
			grads = malloc(sizeof(float) * net.nparams);
			mask = malloc(net.nparams);
			dml_net_weight_mask(&net, mask);
			dml_work_alloc(&work, &net, 64);
			work.class_weight = l == 1 ? cw : NULL;
			for (int f = 0; f < 2; f++)
			{
				FusedObjective o = {&net, &work, X, y, n, 1.0, grads};
				DmlLbfgsProblem pb = {.n = net.nparams, .objective = fused_objective, .arg = &o,
				.owner = true, .max_iter = 300, .gtol = 1e-4, .l1 = withl1 ? 3.0 : 0, .l1_mask = mask};
				DmlLbfgs	lb;
				DmlLbfgsResult out;

				x[f] = calloc(net.nparams, sizeof(double));
				work.unfused = f == 0;
				dml_lbfgs_alloc(&lb, net.nparams, DML_LBFGS_DEFAULT_M);
				dml_lbfgs_minimize(&pb, &lb, x[f], &out);
				obj[f] = out.objective;
				dml_lbfgs_free(&lb);
			}
			for (size_t i = 0; i < net.nparams; i++)
				worst = fmax(worst, fabs(x[0][i] - x[1][i]));
			snprintf(name, sizeof(name), "fused %s: %s reaches the reference path's optimum",
					 l == 1 ? "bce class-weighted" : "mse", withl1 ? "OWL-QN (L1 + L2)" : "L-BFGS (L2)");
			check(close_to(obj[1], obj[0], 0, 1e-6) && worst < 2e-3, name,
				  "objective %.12g vs %.12g, worst |x difference| %g", obj[1], obj[0], worst);
			dml_work_free(&work);
			dml_net_free(&net);
			free(X), free(y), free(grads), free(mask), free(x[0]), free(x[1]);
		}

	/* the gather copies the rows asked for, prefetching past the batch or not */
	{
		float		Xs[50 * 3],
					ys[50],
					Xb[8 * 3],
					yb[8];
		int			idx[12] = {49, 3, 17, 0, 22, 22, 8, 41, 5, 6, 7, 9};
		bool		same = true;

		for (int i = 0; i < 50 * 3; i++)
			Xs[i] = (float) i;
		for (int i = 0; i < 50; i++)
			ys[i] = (float) -i;
		for (int avail = 8; avail <= 12; avail += 4)
		{
			dml_gather_rows(Xs, ys, 3, idx, 8, avail, Xb, yb);
			for (int b = 0; b < 8; b++)
				same = same && yb[b] == ys[idx[b]] &&
					memcmp(Xb + b * 3, Xs + idx[b] * 3, sizeof(float) * 3) == 0;
		}
		check(same, "dml_gather_rows copies the rows of idx", NULL);
	}
	/* runs of consecutive rows (the block shuffle's), within and across batches */
	{
		enum
		{
			N = 300, D = 5, B = 32, M = 256
		};
		float	   *Xs = malloc(sizeof(float) * N * D),
				   *ys = malloc(sizeof(float) * N),
					Xb[B * D],
					yb[B];
		int			idx[M];
		bool		same = true;
		DmlRng		rng;

		for (int i = 0; i < N * D; i++)
			Xs[i] = (float) i;
		for (int i = 0; i < N; i++)
			ys[i] = (float) -i;
		dml_rng_seed(&rng, 5);
		for (int k = 0; k < M;)
		{
			/* a run of 1 to 40 rows from a random start */
			int			len = 1 + (int) (dml_rng_next(&rng) % 40),
						r = (int) (dml_rng_next(&rng) % (N - 40));

			for (int j = 0; j < len && k < M; j++)
				idx[k++] = r + j;
		}
		for (int pos = 0; pos < M; pos += B)
		{
			dml_gather_rows(Xs, ys, D, idx + pos, B, M - pos, Xb, yb);
			for (int b = 0; b < B; b++)
				same = same && yb[b] == ys[idx[pos + b]] &&
					memcmp(Xb + b * D, Xs + idx[pos + b] * D, sizeof(float) * D) == 0;
		}
		check(same, "dml_gather_rows copies runs of consecutive rows", NULL);
		free(Xs);
		free(ys);
	}
	/*
	 * the block shuffle's epoch a block at a time: the same rows as the
	 * index gather over the epoch's row order, for every start and batch
	 * size, with the short block at every place in the order (and none)
	 */
	{
		enum
		{
			D = 3, C = 7
		};
		float		Xs[103 * D],
					ys[103],
					Xa[40 * D],
					ya[40],
					Xc[40 * D],
					yc[40];
		int			order[15],
					idx[103];
		bool		same = true;
		DmlRng		rng;

		for (int i = 0; i < 103 * D; i++)
			Xs[i] = (float) i;
		for (int i = 0; i < 103; i++)
			ys[i] = (float) -i;
		dml_rng_seed(&rng, 9);
		for (int n = 98; n <= 103; n += 5)	/* 14 blocks of 7; 15, the last of 5 */
		{
			int			nb = (n + C - 1) / C;

			for (int at = 0; at < nb; at++)
			{
				DmlBlockOrder bo;
				int			k = 0;

				for (int q = 0; q < nb; q++)
					order[q] = q;
				dml_shuffle(order, nb, &rng);
				for (int q = 0; q < nb; q++)
					if (order[q] == nb - 1)
					{
						order[q] = order[at];
						order[at] = nb - 1;
					}
				for (int q = 0; q < nb; q++)
					for (int r = order[q] * C; r < n && r < (order[q] + 1) * C; r++)
						idx[k++] = r;
				dml_block_order_init(&bo, order, nb, C, n);
				same = same && k == n;
				for (int B = 1; B <= 40; B += 13)
					for (int pos = 0; pos < n; pos++)
					{
						int			c = n - pos < B ? n - pos : B;

						dml_gather_rows(Xs, ys, D, idx + pos, c, n - pos, Xa, ya);
						memset(Xc, 0, sizeof(Xc));
						dml_gather_blocks(Xs, ys, D, &bo, pos, c, Xc, yc);
						same = same && memcmp(Xa, Xc, sizeof(float) * D * c) == 0 &&
							memcmp(ya, yc, sizeof(float) * c) == 0;
					}
			}
		}
		check(same, "dml_gather_blocks takes the rows of the block order's row indices", NULL);
	}
}

/*
 * The block shuffle's tiles (common.c, net.c): dml_tile_blocks lays each
 * block out a feature at a time and back, bit for bit; dml_block_runs's
 * runs hold the rows and labels that dml_gather_blocks copies, bit for
 * bit; and dml_net_gradient_tiles gives dml_net_gradient's gradient and
 * loss over those rows to float32 rounding (as fused_case's tolerances),
 * for blocks of whole and partial vectors, the short block, and steps
 * that start and end inside a block.
 */
static void
test_tiles(void)
{
	static const int Cs[] = {1, 2, 7, 16, 20, 32};
	static const int cs[] = {5, 16, 48};
	static const int Bs[] = {1, 13, 64, 256};
	DmlRng		rng;
	bool		layout = true,
				back = true,
				rows = true,
				applies = true;
	float		cw[2] = {0.75f, 1.5f};

	dml_rng_seed(&rng, 4242);
	for (size_t ci = 0; ci < sizeof(Cs) / sizeof(Cs[0]); ci++)
		for (size_t ki = 0; ki < sizeof(cs) / sizeof(cs[0]); ki++)
		{
			int			C = Cs[ci],
						c = cs[ki],
						n = 3 * c + c / 2 + 1;	/* the last block short */
			float	   *X = malloc(sizeof(float) * n * C),
					   *T = malloc(sizeof(float) * n * C);

			fill_uniform(X, (size_t) n * C, &rng, -1, 1);
			memcpy(T, X, sizeof(float) * n * C);
			layout = layout && dml_tile_blocks(T, C, c, n, true);
			for (int lo = 0; lo < n; lo += c)
			{
				int			len = n - lo < c ? n - lo : c;

				for (int r = 0; r < len; r++)
					for (int j = 0; j < C; j++)
						layout = layout && T[(size_t) lo * C + (size_t) j * len + r] ==
							X[(size_t) (lo + r) * C + j];
			}
			back = back && dml_tile_blocks(T, C, c, n, false) &&
				memcmp(T, X, sizeof(float) * n * C) == 0;
			free(X);
			free(T);
		}
	check(layout, "dml_tile_blocks: feature j of a block's row r at j * len + r", NULL);
	check(back, "dml_tile_blocks: back to rows, bit for bit", NULL);

	for (int l = 0; l < 2; l++)
		for (size_t ci = 0; ci < sizeof(Cs) / sizeof(Cs[0]); ci++)
			for (size_t ki = 0; ki < sizeof(cs) / sizeof(cs[0]); ki++)
				for (size_t bi = 0; bi < sizeof(Bs) / sizeof(Bs[0]); bi++)
				{
					DmlLoss		loss = l ? DML_LOSS_BCE : DML_LOSS_MSE;
					int			C = Cs[ci],
								c = cs[ki],
								B = Bs[bi],
								n = 2 * B + 3 * c + 3,
								nb = (n + c - 1) / c;
					bool		weighted = l && bi % 2 == 1;
					float		scale = bi == 0 ? 1.0f : 1.0f / B;
					DmlNet		net;
					DmlWork		work;
					float	   *X = malloc(sizeof(float) * n * C),
							   *T = malloc(sizeof(float) * n * C),
							   *y = malloc(sizeof(float) * n),
							   *Xb = malloc(sizeof(float) * B * C),
							   *yb = malloc(sizeof(float) * B),
							   *yt = malloc(sizeof(float) * B),
							   *gr,
							   *gt;
					double	   *want;
					int		   *order = malloc(sizeof(int) * nb);
					DmlTileRun *runs = malloc(sizeof(DmlTileRun) * (B / c + 3));
					DmlBlockOrder bo;
					char		name[200];

					fused_data(&net, loss, C, 1, n, 1.0, &rng, X, y);
					memcpy(T, X, sizeof(float) * n * C);
					dml_tile_blocks(T, C, c, n, true);
					for (int q = 0; q < nb; q++)
						order[q] = q;
					dml_shuffle(order, nb, &rng);
					dml_block_order_init(&bo, order, nb, c, n);
					dml_work_alloc(&work, &net, B);
					work.class_weight = weighted ? cw : NULL;
					gr = malloc(sizeof(float) * net.nparams);
					gt = malloc(sizeof(float) * net.nparams);
					want = malloc(sizeof(double) * net.nparams);
					applies = applies && dml_net_tile_applies(&net, &work, B) == (dml_simd() >= 256);
					/* the first step, one inside, and the last (short) one */
					for (int t = 0; t < 3; t++)
					{
						int			pos = t == 0 ? 0 : t == 1 ? c / 2 + 1 : n - (n % B ? n % B : B),
									cnt = n - pos < B ? n - pos : B,
									nr = dml_block_runs(T, y, C, &bo, pos, cnt, runs, yt),
									k = 0;
						double		lr,
									lt,
									big = 0;

						dml_gather_blocks(X, y, C, &bo, pos, cnt, Xb, yb);
						rows = rows && nr <= B / c + 3 && memcmp(yb, yt, sizeof(float) * cnt) == 0;
						for (int q = 0; q < nr; q++)
							for (int r = 0; r < runs[q].len; r++, k++)
								for (int j = 0; j < C; j++)
									rows = rows && runs[q].T[(size_t) j * runs[q].ld + r] ==
										Xb[(size_t) k * C + j];
						rows = rows && k == cnt;
						if (!dml_net_tile_applies(&net, &work, cnt))
							continue;
						for (size_t i = 0; i < net.nparams; i++)
							gr[i] = gt[i] = 1e30f;
						lr = dml_net_gradient(&net, &work, gr, Xb, yb, cnt, scale);
						lt = dml_net_gradient_tiles(&net, &work, gt, runs, nr, yt, cnt, scale);
						for (size_t i = 0; i < net.nparams; i++)
						{
							want[i] = gr[i];
							big = fmax(big, fabs(gr[i]));
						}
						snprintf(name, sizeof(name), "tiles %s C=%d blocks of %d B=%d step at %d%s: gradient as the rows'",
								 l ? "bce" : "mse", C, c, cnt, pos, weighted ? " class-weighted" : "");
						check_vec(name, gt, want, net.nparams, 2e-5 * big, 1e-5);
						snprintf(name, sizeof(name), "tiles %s C=%d blocks of %d B=%d step at %d%s: loss as the rows'",
								 l ? "bce" : "mse", C, c, cnt, pos, weighted ? " class-weighted" : "");
						check(close_to(lt, lr, 1e-6, 1e-5) && isfinite(lt), name, "tiles %.9g rows %.9g", lt, lr);
					}
					dml_work_free(&work);
					dml_net_free(&net);
					free(X), free(T), free(y), free(Xb), free(yb), free(yt), free(gr), free(gt);
					free(want), free(order), free(runs);
				}
	check(rows, "dml_block_runs: the runs hold the rows and labels dml_gather_blocks copies", NULL);
	check(applies, "dml_net_tile_applies: one-output nets of up to 32 inputs where dml's kernels run", NULL);
}

/* ---------------------------------------------------------------------
 * The model blob
 * --------------------------------------------------------------------- */

/* a small 3-4-2 softmax model with every float set */
static void
make_small_model(DmlModel *m)
{
	int			sizes[3] = {3, 4, 2};
	DmlRng		rng;

	if (dml_model_alloc(m, 2, sizes, DML_ACT_TANH, DML_LOSS_SOFTMAX) != DML_OK)
	{
		fprintf(stderr, "dml_model_alloc failed\n");
		exit(2);
	}
	dml_rng_seed(&rng, 77);
	fill_uniform(m->net.params, m->net.nparams, &rng, -1, 1);
	fill_uniform(m->in_mean, 3, &rng, -1, 1);
	fill_uniform(m->in_scale, 3, &rng, 0.5, 2);
	fill_uniform(m->out_mean, 2, &rng, -1, 1);
	fill_uniform(m->out_scale, 2, &rng, 0.5, 2);
}

/* rewrite the trailing CRC after editing a blob */
static void
fix_crc(unsigned char *buf, size_t len)
{
	uint32_t	c = dml_crc32(buf, len - 4);

	buf[len - 4] = c & 0xFF;
	buf[len - 3] = (c >> 8) & 0xFF;
	buf[len - 2] = (c >> 16) & 0xFF;
	buf[len - 1] = (c >> 24) & 0xFF;
}

/* the model blob: round trip, truncation, corruption, bad headers */
static void
test_format(void)
{
	DmlModel	m,
				back,
				sentinel;
	size_t		len;
	unsigned char *blob,
			   *copy;
	char		err[256];
	DmlStatus	st;

	make_small_model(&m);
	len = dml_model_serialized_size(&m);
	/* 24 + 3 sizes * 4, floats 2*3 + 2*2 + (3*4+4 + 4*2+2 = 26), checksum */
	check(len == 24 + 12 + 4 * (6 + 4 + 26) + 4, "dml_model_serialized_size", "%zu", len);
	blob = malloc(len);
	copy = malloc(len);
	dml_model_serialize(&m, blob);

	/* round trip, bit for bit */
	st = dml_model_parse(&back, blob, len, err, sizeof(err));
	if (st != DML_OK)
		check(0, "serialize -> parse round trip", "parse failed: %s", err);
	else
	{
		int			same = back.net.nlayers == 2 && back.net.act == DML_ACT_TANH &&
			back.net.loss == DML_LOSS_SOFTMAX && back.net.nparams == m.net.nparams &&
			memcmp(back.net.sizes, m.net.sizes, sizeof(int) * 3) == 0 &&
			memcmp(back.net.params, m.net.params, sizeof(float) * m.net.nparams) == 0 &&
			memcmp(back.in_mean, m.in_mean, sizeof(float) * 3) == 0 &&
			memcmp(back.in_scale, m.in_scale, sizeof(float) * 3) == 0 &&
			memcmp(back.out_mean, m.out_mean, sizeof(float) * 2) == 0 &&
			memcmp(back.out_scale, m.out_scale, sizeof(float) * 2) == 0;

		check(same, "serialize -> parse round trip is bit-exact", NULL);
		dml_model_serialize(&back, copy);
		check(memcmp(copy, blob, len) == 0, "parse -> serialize gives the same bytes", NULL);
		dml_model_free(&back);
	}

	/* every truncation is a format error, and *m is left alone */
	{
		int			bad = 0,
					touched = 0;

		for (size_t cut = 0; cut < len; cut++)
		{
			unsigned char *t = malloc(cut > 0 ? cut : 1);

			memcpy(t, blob, cut);
			memset(&sentinel, 0xA5, sizeof(sentinel));
			memset(&back, 0xA5, sizeof(back));
			err[0] = '\0';
			st = dml_model_parse(&back, t, cut, err, sizeof(err));
			if (st != DML_ERR_FORMAT || err[0] == '\0')
			{
				bad++;
				printf("# truncated to %zu bytes: status %d\n", cut, st);
				if (st == DML_OK)
					dml_model_free(&back);
			}
			else if (memcmp(&back, &sentinel, sizeof(back)) != 0)
				touched++;
			free(t);
		}
		check(bad == 0, "every truncation rejected with DML_ERR_FORMAT and a message",
			  "%d of %zu lengths not", bad, len);
		check(touched == 0, "a failed parse leaves *m untouched", "%d times written", touched);
	}

	/* every single-byte corruption is rejected; in the floats, by the CRC */
	{
		int			accepted = 0,
					not_crc = 0;
		size_t		floats_from = 24 + 12;

		for (size_t i = 0; i < len; i++)
		{
			for (int bit = 0; bit < 8; bit += 3)
			{
				memcpy(copy, blob, len);
				copy[i] ^= (unsigned char) (1 << bit);
				st = dml_model_parse(&back, copy, len, err, sizeof(err));
				if (st == DML_OK)
				{
					accepted++;
					dml_model_free(&back);
				}
				else if (i >= floats_from && st != DML_ERR_CHECKSUM)
					not_crc++;
			}
		}
		check(accepted == 0, "every single-byte corruption rejected", "%d accepted", accepted);
		check(not_crc == 0, "corrupted floats or CRC rejected with DML_ERR_CHECKSUM",
			  "%d other statuses", not_crc);
	}

	/* wrong magic, wrong version, with a valid CRC so the header check is what fails */
	{
		memcpy(copy, blob, len);
		copy[0] ^= 0xFF;
		fix_crc(copy, len);
		st = dml_model_parse(&back, copy, len, err, sizeof(err));
		check(st == DML_ERR_FORMAT && strstr(err, "magic") != NULL,
			  "wrong magic rejected", "status %d: %s", st, err);
		memcpy(copy, blob, len);
		copy[4] = DML_FORMAT_VERSION + 1;
		fix_crc(copy, len);
		st = dml_model_parse(&back, copy, len, err, sizeof(err));
		check(st == DML_ERR_FORMAT && strstr(err, "version") != NULL,
			  "wrong version rejected", "status %d: %s", st, err);
		/* a stated length that disagrees with the buffer */
		memcpy(copy, blob, len);
		copy[8] ^= 0x04;
		fix_crc(copy, len);
		st = dml_model_parse(&back, copy, len, err, sizeof(err));
		check(st == DML_ERR_FORMAT, "wrong stated length rejected", "status %d: %s", st, err);
		/* a huge layer size must not allocate or read past the end */
		memcpy(copy, blob, len);
		copy[24 + 4 + 3] = 0x7F;
		fix_crc(copy, len);
		st = dml_model_parse(&back, copy, len, err, sizeof(err));
		check(st == DML_ERR_FORMAT, "out-of-range layer size rejected", "status %d: %s", st, err);
	}

	/* the CRC itself: the standard check value of "123456789" */
	check(dml_crc32((const unsigned char *) "123456789", 9) == 0xCBF43926u,
		  "dml_crc32 check value", "0x%08X", dml_crc32((const unsigned char *) "123456789", 9));

	free(blob);
	free(copy);
	dml_model_free(&m);
}

/* ---------------------------------------------------------------------
 * Prediction
 * --------------------------------------------------------------------- */

/* dml_model_predict against hand computations */
static void
test_predict(void)
{
	/*
	 * Linear regression: W = (2, -1), b = 0.5, in_mean = (1, 0),
	 * in_scale = (0.5, 2), out_mean 10, out_scale 3.
	 * x = (3, 1):     std (1, 2),    z = 2 - 2 + 0.5 = 0.5, y = 11.5
	 * x = (1, -0.25): std (0, -0.5), z = 0.5 + 0.5 = 1,     y = 13
	 */
	{
		DmlModel	m;
		int			sizes[2] = {2, 1};
		float		X[4] = {3.0f, 1.0f, 1.0f, -0.25f},
					out[2],
				   *scratch;

		dml_model_alloc(&m, 1, sizes, DML_ACT_IDENTITY, DML_LOSS_MSE);
		m.net.params[0] = 2.0f;
		m.net.params[1] = -1.0f;
		m.net.params[2] = 0.5f;
		m.in_mean[0] = 1.0f;
		m.in_scale[0] = 0.5f;
		m.in_scale[1] = 2.0f;
		m.out_mean[0] = 10.0f;
		m.out_scale[0] = 3.0f;
		scratch = malloc(sizeof(float) * dml_model_scratch_floats(&m, 2));
		dml_model_predict(&m, out, X, 2, scratch);
		check(close_to(out[0], 11.5, 1e-6, 0) && close_to(out[1], 13.0, 1e-6, 0),
			  "dml_model_predict linear regression by hand", "%g %g", out[0], out[1]);
		free(scratch);
		dml_model_free(&m);
	}

	/*
	 * MLP 2-2-2, relu, softmax.  W1 = [[1,-1],[0.5,0.5]], b1 = (0,-1),
	 * W2 = [[1,2],[-1,0]], b2 = (0,0.5).
	 * x = (2, 1):  h = relu(1, 0.5) = (1, 0.5), z = (2, -0.5),
	 *              p = (1, e^-2.5) / (1 + e^-2.5) = (0.924141820, 0.075858180)
	 * x = (-1, 0): h = relu(-1, -1.5) = 0,     z = (0, 0.5),
	 *              p = (0.377540669, 0.622459331)
	 */
	{
		DmlModel	m;
		int			sizes[3] = {2, 2, 2};
		const float p[12] = {1, -1, 0.5f, 0.5f, 0, -1, 1, 2, -1, 0, 0, 0.5f};
		float		X[4] = {2.0f, 1.0f, -1.0f, 0.0f},
					out[4],
				   *scratch;
		double		want[4] = {0.924141820, 0.075858180, 0.377540669, 0.622459331};
		int			bad = 0;

		dml_model_alloc(&m, 2, sizes, DML_ACT_RELU, DML_LOSS_SOFTMAX);
		memcpy(m.net.params, p, sizeof(p));
		scratch = malloc(sizeof(float) * dml_model_scratch_floats(&m, 2));
		dml_model_predict(&m, out, X, 2, scratch);
		for (int i = 0; i < 4; i++)
			if (!close_to(out[i], want[i], 1e-6, 1e-6))
				bad++;
		check(bad == 0, "dml_model_predict relu MLP softmax by hand",
			  "%g %g %g %g", out[0], out[1], out[2], out[3]);
		free(scratch);
		dml_model_free(&m);
	}
}

/* ---------------------------------------------------------------------
 * Metrics
 * --------------------------------------------------------------------- */

/* the number after "key": in a JSON text, NAN when absent */
static double
json_number(const char *json, const char *key)
{
	char		pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	p = strstr(json, pat);
	return p ? strtod(p + strlen(pat), NULL) : NAN;
}

/* metrics sums and JSON on hand cases */
static void
test_metrics(void)
{
	/*
	 * Three classes, six rows.  truth 0 0 1 1 2 2, predicted 0 1 1 1 2 0
	 * (the predicted class gets 0.8, the others 0.1).
	 * confusion [true][pred] = [[1,1,0],[0,2,0],[1,0,1]], accuracy 4/6.
	 * F1: class 0 2*1/(2+2) = 0.5, class 1 2*2/(2+3) = 0.8,
	 *     class 2 2*1/(2+1) = 2/3; macro (0.5 + 0.8 + 2/3) / 3 = 0.655555...
	 * log loss: p(true) = 0.8 four times, 0.1 twice:
	 *     -(4 ln 0.8 + 2 ln 0.1) / 6 = 0.916290732
	 */
	{
		DmlMetrics	m;
		const float y[6] = {0, 0, 1, 1, 2, 2};
		const int	guess[6] = {0, 1, 1, 1, 2, 0};
		float		pred[18];
		char		json[512],
					tiny[8];
		size_t		need;

		for (int b = 0; b < 6; b++)
			for (int k = 0; k < 3; k++)
				pred[b * 3 + k] = k == guess[b] ? 0.8f : 0.1f;
		dml_metrics_init(&m, DML_LOSS_SOFTMAX, 3);
		/* added in two parts, as two ranks' sums would be */
		dml_metrics_add(&m, pred, y, 4);
		dml_metrics_add(&m, pred + 12, y + 4, 2);
		need = dml_metrics_json(&m, json, sizeof(json));
		printf("# %s\n", json);
		check_num("metrics accuracy", json_number(json, "accuracy"), 4.0 / 6.0, 1e-9, 0);
		check_num("metrics score is accuracy", dml_metrics_score(&m), 4.0 / 6.0, 1e-12, 0);
		check_num("metrics macro F1", json_number(json, "macro_f1"), 0.6555555556, 1e-9, 0);
		check_num("metrics log loss", json_number(json, "log_loss"), 0.916290732, 1e-6, 1e-6);
		check_num("metrics rows", json_number(json, "rows"), 6, 0, 0);
		check(strstr(json, "\"confusion\": [[1, 1, 0], [0, 2, 0], [1, 0, 1]]") != NULL,
			  "metrics confusion matrix", "%s", json);
		check(need == strlen(json) + 1 && dml_metrics_json(&m, tiny, sizeof(tiny)) == need &&
			  strlen(tiny) == sizeof(tiny) - 1,
			  "dml_metrics_json reports the length it needs when truncated", NULL);
		dml_metrics_free(&m);
	}

	/*
	 * Regression: y = 1 2 3 4, pred = 1.5 2 2.5 4.
	 * SSE 0.5, mse 0.125, mae 0.25, SST 5 (mean 2.5), R^2 = 1 - 0.5/5 = 0.9
	 */
	{
		DmlMetrics	m;
		const float y[4] = {1, 2, 3, 4},
					pred[4] = {1.5f, 2, 2.5f, 4};
		char		json[256];

		dml_metrics_init(&m, DML_LOSS_MSE, 1);
		dml_metrics_add(&m, pred, y, 4);
		dml_metrics_json(&m, json, sizeof(json));
		printf("# %s\n", json);
		check_num("metrics R2", json_number(json, "r2"), 0.9, 1e-9, 0);
		check_num("metrics mse", json_number(json, "mse"), 0.125, 1e-12, 0);
		check_num("metrics mae", json_number(json, "mae"), 0.25, 1e-12, 0);
		check_num("metrics score is R2", dml_metrics_score(&m), 0.9, 1e-12, 0);
		dml_metrics_reset(&m);
		dml_metrics_json(&m, json, sizeof(json));
		check(strstr(json, "\"r2\": null") != NULL, "metrics with no rows write null, not NaN",
			  "%s", json);
		dml_metrics_free(&m);
	}

	/* BCE: p(1) = 0.9 0.2 0.6 for y = 1 0 0: guesses 1 0 1, accuracy 2/3 */
	{
		DmlMetrics	m;
		const float y[3] = {1, 0, 0},
					pred[3] = {0.9f, 0.2f, 0.6f};
		char		json[256];

		dml_metrics_init(&m, DML_LOSS_BCE, 1);
		dml_metrics_add(&m, pred, y, 3);
		dml_metrics_json(&m, json, sizeof(json));
		check(close_to(dml_metrics_score(&m), 2.0 / 3.0, 1e-12, 0) &&
			  strstr(json, "\"confusion\": [[1, 1], [0, 1]]") != NULL,
			  "metrics binary accuracy and confusion", "%s", json);
		dml_metrics_free(&m);
	}
}

/* run every group and print the tally */
/* ---------------------------------------------------------------------
 * TSQR least squares (solve.c) on NIST StRD problems generated exactly
 * ---------------------------------------------------------------------
 */

/* log relative error: correct significant digits of got against cert (absolute when cert is 0) */
static double
lre(double got, double cert)
{
	double		e = cert != 0 ? fabs(got - cert) / fabs(cert) : fabs(got - cert);

	return e == 0 ? 15.0 : fmin(15.0, -log10(e));
}

/*
 * Wampler1 (y = 1 + x + ... + x^5) and Wampler2 (y = 1 + 0.1 x + ... +
 * 1e-5 x^5), x = 0..20: the data are their definitions, so they are
 * exact.  Certified: the coefficients, every standard error 0.  The rows
 * are factored in nblocks blocks whose R factors are then stacked, as
 * ranks (or parallel workers) combine them; LRE >= 9 everywhere is the
 * issue's bar (numpy's lstsq gets 9.7 on Wampler1's worst).
 */
static void
test_tsqr_wampler(int which, int nblocks)
{
	const int	n = 21,
				q = 7,
				p = 6;
	double		Z[21 * 7],
				R[7 * 7],
				Rb[7 * 7];
	double		coef[6];
	DmlLsq		ls;
	DmlStatus	st;
	double		worst = 15,
				worst_se = 15;
	char		name[96];

	for (int k = 0; k <= 5; k++)
		coef[k] = which == 1 ? 1.0 : pow(10.0, -k);
	for (int i = 0; i < n; i++)
	{
		double		x = i,
					y = 0;

		/* columns x, ..., x^5, intercept, y; y summed from the top power, in exact integer steps where it can be */
		for (int k = 5; k >= 0; k--)
			y = y * x + coef[k];
		for (int k = 1; k <= 5; k++)
			Z[i * q + k - 1] = pow(x, k);
		Z[i * q + 5] = 1.0;
		Z[i * q + 6] = y;
	}
	memset(R, 0, sizeof(R));
	for (int b = 0; b < nblocks; b++)
	{
		int			lo = n * b / nblocks,
					hi = n * (b + 1) / nblocks;

		memset(Rb, 0, sizeof(Rb));
		dml_qr_stack(Rb, Z + lo * q, hi - lo, q);
		dml_qr_stack(R, Rb, q, q);
	}
	st = dml_lsq_solve(&ls, R, q, n, false);
	for (int k = 0; k < 5 && st == DML_OK; k++)
		worst = fmin(worst, lre(ls.coef[k], coef[k + 1]));
	if (st == DML_OK)
		worst = fmin(worst, lre(ls.coef[5], coef[0]));
	for (int k = 0; k < p && st == DML_OK; k++)
		worst_se = fmin(worst_se, lre(sqrt(ls.rss / (n - p) * ls.cov[k * p + k]), 0.0));
	snprintf(name, sizeof(name), "TSQR Wampler%d, %d block%s: coefficients LRE >= 9", which,
			 nblocks, nblocks > 1 ? "s" : "");
	check(st == DML_OK && worst >= 9, name, "status %d, worst LRE %.2f", st, worst);
	snprintf(name, sizeof(name), "TSQR Wampler%d, %d block%s: standard errors LRE >= 9", which,
			 nblocks, nblocks > 1 ? "s" : "");
	check(st == DML_OK && worst_se >= 9, name, "status %d, worst LRE %.2f", st, worst_se);
	dml_lsq_free(&ls);
}

/* collinear columns are named; min_norm gives the minimum-norm solution */
static void
test_tsqr_rank(void)
{
	/* columns a, 2a, b, intercept; y = a + b + 1 exactly */
	const int	n = 8,
				q = 5;
	double		Z[8 * 5],
				R[25] = {0};
	DmlLsq		ls;
	DmlStatus	st;

	for (int i = 0; i < n; i++)
	{
		double		a = i,
					b = (i * 7) % 5;

		Z[i * q + 0] = a;
		Z[i * q + 1] = 2 * a;
		Z[i * q + 2] = b;
		Z[i * q + 3] = 1;
		Z[i * q + 4] = a + b + 1;
	}
	dml_qr_stack(R, Z, n, q);
	st = dml_lsq_solve(&ls, R, q, n, false);
	check(st == DML_ERR_SINGULAR && ls.rank == 3 && ls.ndropped == 1 &&
		  (ls.dropped[0] == 0 || ls.dropped[0] == 1),
		  "TSQR rank-deficient: one of the collinear pair named", "status %d rank %d dropped %d (%d)",
		  st, ls.rank, ls.ndropped, ls.ndropped ? ls.dropped[0] : -1);
	dml_lsq_free(&ls);
	/* minimum norm: a's weight 1 is split as w + 2 v = 1 with w^2 + v^2 least: w = 0.2, v = 0.4 */
	st = dml_lsq_solve(&ls, R, q, n, true);
	check(st == DML_OK && close_to(ls.coef[0], 0.2, 1e-12, 0) && close_to(ls.coef[1], 0.4, 1e-12, 0) &&
		  close_to(ls.coef[2], 1, 1e-12, 0) && close_to(ls.coef[3], 1, 1e-12, 0),
		  "TSQR min_norm: the minimum-norm solution", "status %d: %g %g %g %g", st,
		  ls.coef[0], ls.coef[1], ls.coef[2], ls.coef[3]);
	dml_lsq_free(&ls);
}

/* p-values against scipy.stats (printed with repr: 16-17 digits) */
static void
test_distributions(void)
{
	check(close_to(dml_t_pvalue(2.0, 10), 0.07338803477074039, 0, 1e-12) &&
		  close_to(dml_t_pvalue(-12.5, 3), 0.0011036313310960576, 0, 1e-12) &&
		  close_to(dml_t_pvalue(0.3, 1000), 0.7642395041672442, 0, 1e-12),
		  "Student t two-sided p-values", "%.17g %.17g %.17g", dml_t_pvalue(2.0, 10),
		  dml_t_pvalue(-12.5, 3), dml_t_pvalue(0.3, 1000));
	check(close_to(dml_f_pvalue(3.2, 4, 20), 0.03483162372878264, 0, 1e-12) &&
		  close_to(dml_f_pvalue(330.285, 6, 9), 4.984053422648472e-10, 0, 1e-10),
		  "F upper-tail p-values", "%.17g %.17g", dml_f_pvalue(3.2, 4, 20),
		  dml_f_pvalue(330.285, 6, 9));
	check(close_to(dml_z_pvalue(3.1), 0.0019352064264367126, 0, 1e-12) &&
		  close_to(dml_incbeta(2.5, 0.5, 0.3), 0.01892712407194565, 0, 1e-12),
		  "normal p-value and incomplete beta", "%.17g %.17g", dml_z_pvalue(3.1),
		  dml_incbeta(2.5, 0.5, 0.3));
}

/*
 * Adam flushes subnormals in its own loop only: the caller's floating-point
 * control word is the same after it, and a weight whose gradient is zero and
 * whose first moment is subnormal takes the same value as without the flush
 */
static void
test_adam_subnormal(void)
{
	float		params[2] = {0.25f, -1e-3f},
				m[2] = {1e-39f, -3e-39f},
				v[2] = {1e-8f, 2e-9f},
				g[2] = {0.0f, 0.0f};
	int			same = 1;
#if defined(__x86_64__) || defined(__SSE__)
	unsigned int before = __builtin_ia32_stmxcsr(),
				after;

	adam_update(params, m, v, g, 2, 0.001f, 0.9f, 0.999f, 1e-8f, 0.0f, 1000);
	after = __builtin_ia32_stmxcsr();
	same = before == after;
#else
	adam_update(params, m, v, g, 2, 0.001f, 0.9f, 0.999f, 1e-8f, 0.0f, 1000);
#endif
	check(same && params[0] == 0.25f && params[1] == -1e-3f && m[0] == 0.0f && m[1] == 0.0f &&
		  v[0] > 0.0f && v[1] > 0.0f,
		  "adam: subnormal moments flushed in its loop only, weights as without",
		  "params %.9g %.9g m %g %g", params[0], params[1], m[0], m[1]);
}

/* n values from the standard normal, in order */
static void
fill_normal(float *p, size_t n, DmlRng *rng)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (float) dml_rng_normal(rng);
}

/*
 * The OpenBLAS core type the worker forces: none for a core with AVX2 kernels
 * (any case) or no name; for the SSE3 fallback, a core this CPU can run that
 * is itself left alone, and none where the CPU lacks AVX2 and FMA.
 */
/*
 * Skinny layers (layers.c: at most 12 outputs, AVX-512 or AVX2) against sgemm: the
 * forward pass and the weight gradient, overwritten and accumulated, over
 * odd row counts and column counts off the vector width.  Where the CPU
 * or the build has no skinny kernels both sides are sgemm.
 */
static void
test_skinny(void)
{
	static const int Bs[] = {2, 3, 7, 64, 257};
	static const int Cs[] = {1, 5, 16, 17, 31, 33, 128, 784};
	DmlRng		rng;
	double		worst = 0;
	bool		finite = true;
	int			shapes = 0;

	dml_rng_seed(&rng, 77);
	for (int bi = 0; bi < 5; bi++)
		for (int ci = 0; ci < 8; ci++)
			for (int OC = 1; OC <= 13; OC++)
			{
				int			B = Bs[bi],
							C = Cs[ci];
				float	   *x = malloc(sizeof(float) * B * C),
						   *w = malloc(sizeof(float) * OC * C),
						   *bias = malloc(sizeof(float) * OC),
						   *dout = malloc(sizeof(float) * B * OC),
						   *o[2],
						   *g[2],
						   *gb[2];

				fill_normal(x, (size_t) B * C, &rng);
				fill_normal(w, (size_t) OC * C, &rng);
				fill_normal(bias, OC, &rng);
				fill_normal(dout, (size_t) B * OC, &rng);
				for (int v = 0; v < 2; v++)
				{
					o[v] = malloc(sizeof(float) * B * OC);
					g[v] = malloc(sizeof(float) * OC * C);
					gb[v] = malloc(sizeof(float) * OC);
					dml_set_skinny(v == 1);
					dense_forward(o[v], x, w, bias, B, C, OC);
					/* overwritten, then accumulated onto itself: twice the sum */
					dense_backward_acc(NULL, g[v], gb[v], dout, x, w, B, C, OC, false);
					dense_backward_acc(NULL, g[v], gb[v], dout, x, w, B, C, OC, true);
				}
				dml_set_skinny(true);
				/* relative to the sum of the products' magnitudes, about sqrt(C) */
				for (int i = 0; i < B * OC; i++)
				{
					double		e = fabs((double) o[1][i] - o[0][i]) / (sqrt((double) C) + 1);

					finite = finite && isfinite(o[1][i]);
					worst = e > worst ? e : worst;
				}
				for (int i = 0; i < OC * C; i++)
				{
					double		e = fabs((double) g[1][i] - g[0][i]) / (sqrt((double) B) + 1);

					finite = finite && isfinite(g[1][i]);
					worst = e > worst ? e : worst;
				}
				shapes++;
				for (int v = 0; v < 2; v++)
					free(o[v]), free(g[v]), free(gb[v]);
				free(x), free(w), free(bias), free(dout);
			}
	check(finite && worst < 2e-5, "skinny layers agree with sgemm (forward, weight gradient)",
		  "worst scaled difference %g over %d shapes", worst, shapes);
	/* softmax over rows read in place: the gathered minibatch's gradient, bit for bit */
	{
		enum
		{
			N = 500, C = 70, K = 10, B = 37
		};
		int			sizes[2] = {C, K};
		float	   *X = malloc(sizeof(float) * N * C),
				   *y = malloc(sizeof(float) * N),
					Xb[B * C],
					yb[B],
					cw[K];
		int			idx[N];
		DmlNet		net;
		DmlWork		work;
		bool		same = true,
					same_fwd = true,
					applies;

		for (int i = 0; i < N * C; i++)
			X[i] = (float) dml_rng_normal(&rng);
		for (int i = 0; i < N; i++)
		{
			y[i] = (float) (dml_rng_next(&rng) % K);
			idx[i] = i;
		}
		for (int k = 0; k < K; k++)
			cw[k] = 0.5f + 0.1f * k;
		dml_shuffle(idx, N, &rng);
		dml_net_alloc(&net, 1, sizes, DML_ACT_IDENTITY, DML_LOSS_SOFTMAX);
		dml_net_init(&net, 3);
		dml_work_alloc(&work, &net, B);
		applies = dml_net_rows_applies(&net, &work, B);
		for (int weighted = 0; weighted < 2 && applies; weighted++)
			for (int pos = 0; pos + B <= N; pos += B)
			{
				float	   *g0 = malloc(sizeof(float) * net.nparams),
						   *g1 = malloc(sizeof(float) * net.nparams);
				double		l0,
							l1;

				work.class_weight = weighted ? cw : NULL;
				dml_gather_rows(X, y, C, idx + pos, B, N - pos, Xb, yb);
				l0 = dml_net_gradient(&net, &work, g0, Xb, yb, B, 1.0f / 300);
				l1 = dml_net_gradient_rows(&net, &work, g1, X, NULL, idx + pos, B, N - pos, yb,
										   1.0f / 300);
				same = same && l0 == l1 && memcmp(g0, g1, sizeof(float) * net.nparams) == 0;
				if (!weighted)
				{
					/* the evaluation's forward pass (train_evaluate) */
					float		o0[B * K];

					memcpy(o0, dml_net_forward(&net, &work, Xb, B), sizeof(o0));
					same_fwd = same_fwd &&
						memcmp(o0, dml_net_forward_rows(&net, &work, X, NULL, idx + pos, B, N - pos),
							   sizeof(o0)) == 0;
				}
				free(g0);
				free(g1);
			}
		if (applies)
		{
			check(same, "softmax over rows read in place: the gathered rows' gradient, bit for bit",
				  NULL);
			check(same_fwd, "softmax logits of rows read in place: the gathered rows', bit for bit",
				  NULL);
		}
		else
			printf("# rows read in place do not run on this CPU and build: not compared\n");
		dml_work_free(&work);
		dml_net_free(&net);
		free(X);
		free(y);
	}
	/*
	 * byte rows (DmlRows8): pixels 0..255, then pixels / 255 as
	 * dml-load-idx writes them, found to be bytes and standardized as
	 * prepare_data does; the same logits and gradient as the float32 rows,
	 * bit for bit
	 */
	for (int div = 1; div <= 255; div += 254)
	{
		enum
		{
			N = 300, C = 70, K = 10, B = 37
		};
		int			sizes[2] = {C, K};
		float	   *X = malloc(sizeof(float) * N * C),
				   *y = malloc(sizeof(float) * N),
					mean[C],
					scale[C],
					yb[B],
					v[C];
		uint8_t    *X8 = malloc(N * C),
					u8[C];
		int			idx[N];
		DmlNet		net;
		DmlWork		work;
		DmlRows8	r8 = {X8, mean, scale, (float) div, 1.0f / (float) div};
		bool		bytes = true,
					same = true,
					rejects = true;

		for (int i = 0; i < N * C; i++)
			X[i] = (float) (dml_rng_next(&rng) % 256) / (float) div;
		/* a constant column, whose scale is 0 */
		for (int i = 0; i < N; i++)
			X[i * C + 5] = 17.0f / (float) div;
		for (int i = 0; i < N; i++)
			bytes = bytes && dml_rows8_row(X8 + (size_t) i * C, X + (size_t) i * C, C, (float) div);
		check(bytes, "byte rows: pixels are found to be bytes", "divisor %d", div);
		/* not bytes: a value one ulp off, a NaN, 256, half a byte */
		memcpy(v, X, sizeof(v));
		v[7] = nextafterf(v[7], 1e30f);
		rejects = rejects && !dml_rows8_row(u8, v, C, (float) div);
		v[7] = NAN;
		rejects = rejects && !dml_rows8_row(u8, v, C, (float) div);
		v[7] = 256.0f / (float) div;
		rejects = rejects && !dml_rows8_row(u8, v, C, (float) div);
		v[7] = 0.5f / (float) div;
		rejects = rejects && !dml_rows8_row(u8, v, C, (float) div);
		check(rejects, "byte rows: a value one ulp off, a NaN, 256 or half a byte is not one",
			  "divisor %d", div);
		for (int c = 0; c < C; c++)
		{
			double		s = 0,
						s2 = 0;

			for (int i = 0; i < N; i++)
			{
				s += X[i * C + c];
				s2 += (double) X[i * C + c] * X[i * C + c];
			}
			mean[c] = (float) (s / N);
			scale[c] = c == 5 ? 0.0f : (float) (1.0 / sqrt(s2 / N - (s / N) * (s / N)));
		}
		for (int i = 0; i < N * C; i++)
			X[i] = (X[i] - mean[i % C]) * scale[i % C];
		for (int i = 0; i < N; i++)
		{
			y[i] = (float) (dml_rng_next(&rng) % K);
			idx[i] = i;
		}
		dml_shuffle(idx, N, &rng);
		/*
		 * an MLP's minibatch gathered from the bytes: the float32 rows'
		 * gather, bit for bit, for odd and even batches, the last rows'
		 * (avail: nothing read past the end), and a batch of one
		 */
		{
			float	   *g0 = malloc(sizeof(float) * N * C),
					   *g1 = malloc(sizeof(float) * N * C),
						y0[N],
						y1[N];
			bool		gsame = bytes;
			int			widths[] = {1, 2, B, 64, N - 3};

			for (int w = 0; w < 5; w++)
				for (int pos = 0; pos + widths[w] <= N; pos += 97)
				{
					int			nb = widths[w];

					memset(g1, 0xff, sizeof(float) * N * C);
					dml_gather_rows(X, y, C, idx + pos, nb, N - pos, g0, y0);
					dml_rows8_gather(&r8, y, C, idx + pos, nb, N - pos, g1, y1);
					gsame = gsame && memcmp(g0, g1, sizeof(float) * nb * C) == 0 &&
						memcmp(y0, y1, sizeof(float) * nb) == 0 &&
						g1[(size_t) nb * C] != g1[(size_t) nb * C];	/* nothing written past */
				}
			check(gsame, "byte rows gathered (an MLP's minibatch): the float32 rows' gather, bit for bit",
				  "divisor %d, %s", div, dml_rows8_gather_applies() ? "dml's kernels" : "C");
			free(g0);
			free(g1);
		}
		dml_net_alloc(&net, 1, sizes, DML_ACT_IDENTITY, DML_LOSS_SOFTMAX);
		dml_net_init(&net, 5);
		dml_work_alloc(&work, &net, B);
		if (bytes && dml_net_rows_applies(&net, &work, B))
		{
			for (int pos = 0; pos + B <= N; pos += B)
			{
				float	   *g0 = malloc(sizeof(float) * net.nparams),
						   *g1 = malloc(sizeof(float) * net.nparams),
							o0[B * K];
				double		l0,
							l1;

				for (int i = 0; i < B; i++)
					yb[i] = y[idx[pos + i]];
				memcpy(o0, dml_net_forward_rows(&net, &work, X, NULL, idx + pos, B, N - pos),
					   sizeof(o0));
				same = same && memcmp(o0, dml_net_forward_rows(&net, &work, NULL, &r8, idx + pos,
															   B, N - pos), sizeof(o0)) == 0;
				l0 = dml_net_gradient_rows(&net, &work, g0, X, NULL, idx + pos, B, N - pos, yb,
										   1.0f / 300);
				l1 = dml_net_gradient_rows(&net, &work, g1, NULL, &r8, idx + pos, B, N - pos, yb,
										   1.0f / 300);
				same = same && l0 == l1 && memcmp(g0, g1, sizeof(float) * net.nparams) == 0;
				free(g0);
				free(g1);
			}
			check(same, "softmax over byte rows: the float32 rows' logits and gradient, bit for bit",
				  "divisor %d", div);
		}
		else
			printf("# byte rows do not run on this CPU and build: not compared\n");
		dml_work_free(&work);
		dml_net_free(&net);
		free(X);
		free(X8);
		free(y);
	}
	printf("# skinny kernels %s on this CPU and build (2 x 10 layer: %s)\n",
		   dml_skinny_applies(2, 10) ? "in use" : "not used", dml_skinny_applies(2, 10) ? "skinny" : "sgemm");
}

/*
 * The Hessian's register tiles (logit.c, AVX-512 or AVX2), made for each model
 * size p: two calls' sums against a plain double loop, every entry of the
 * 24 x 24 (past p: zero), and exactly symmetric; M rows cross the tiles'
 * chunks of 128.  Each entry must also equal, bit for bit, the sum of its
 * products in row order by one fused multiply-add a row (fma), which is
 * what every grouping of the tiles computes.
 */
static void
test_hess_tiles(void)
{
	enum
	{
		P = DML_HESS_TILE_P, M = 300
	};
	double	   *Z = malloc(sizeof(double) * M * P);
	DmlRng		rng;

	if (!dml_hess_tiles_ok(21))
	{
		printf("# the Hessian's tiles do not run on this CPU and build: not compared\n");
		free(Z);
		return;
	}
	dml_rng_seed(&rng, 24);
	for (int p = 1; p <= P; p++)
	{
		double		Hs[P * P] = {0},
					ref[P * P] = {0},
					ordered[P * P] = {0},
					worst = 0;
		bool		symmetric = true,
					same = true;

		for (int i = 0; i < M; i++)
			for (int c = 0; c < P; c++)
				Z[(size_t) i * P + c] = c < p ? dml_rng_normal(&rng) : 0;
		dml_hess_tiles(Hs, Z, 170, p);
		dml_hess_tiles(Hs, Z + (size_t) 170 * P, M - 170, p);
		for (int i = 0; i < M; i++)
			for (int c = 0; c < P; c++)
				for (int k = 0; k < P; k++)
				{
					ref[c * P + k] += Z[(size_t) i * P + c] * Z[(size_t) i * P + k];
					ordered[c * P + k] = fma(Z[(size_t) i * P + c], Z[(size_t) i * P + k],
											 ordered[c * P + k]);
				}
		for (int c = 0; c < P; c++)
			for (int k = 0; k < P; k++)
			{
				double		e = fabs(Hs[c * P + k] - ref[c * P + k]) / (fabs(ref[c * P + k]) + 1);

				worst = e > worst ? e : worst;
				symmetric = symmetric && Hs[c * P + k] == Hs[k * P + c];
				/* the lower triangle is summed; the upper is its mirror */
				same = same && Hs[c * P + k] == ordered[(c > k ? c : k) * P + (c > k ? k : c)];
			}
		char		name[112];

		snprintf(name, sizeof(name), "the Hessian's tiles, p = %d: every entry of two calls' sums, symmetric", p);
		check(worst < 1e-12 && symmetric, name, "worst relative difference %g, symmetric %d",
			  worst, symmetric);
		snprintf(name, sizeof(name), "the Hessian's tiles, p = %d: each entry its row-order fused sum, bit for bit", p);
		check(same, name, NULL);
	}
	free(Z);
}

/*
 * The float32 Newton statistics' inputs and their double sums, for the
 * row kernel's test and the panels': pr (rows 5 and 200 where the model
 * is sure, 1e-40) and labels for B rows; g and ref (P + 1) set to c, H and
 * Href (P, P) to c % 7 (the kernels add to them), Habs zero
 */
static void
newton_stats_inputs(DmlRng *rng, int B, double *pr, int *label, double *g, double *ref,
					double *H, double *Href, double *Habs)
{
	enum
	{
		P = DML_HESS_TILE_P
	};

	for (int i = 0; i < B; i++)
	{
		pr[i] = i == 5 || i == 200 ? 1e-40 : dml_rng_uniform(rng);
		label[i] = i % 3 == 0;
	}
	for (int c = 0; c <= P; c++)
		g[c] = ref[c] = c;
	for (int c = 0; c < P * P; c++)
	{
		H[c] = Href[c] = c % 7;
		Habs[c] = 0;
	}
}

/*
 * ref (d + 1) += sum_i (pr_i - y_i) [x_i, 1] and the lower triangle of
 * Href += sum_i pr_i (1 - pr_i) [x_i, 1] [x_i, 1]' in double over B rows of
 * X, ld apart; gabs (or NULL) and Habs += the sums of the terms' sizes
 */
static void
newton_stats_ref(const float *X, size_t ld, int B, int d, const double *pr, const int *label,
				 double *ref, double *gabs, double *Href, double *Habs)
{
	enum
	{
		P = DML_HESS_TILE_P
	};

	for (int i = 0; i < B; i++)
	{
		double		r = pr[i] - label[i],
					w = pr[i] * (1 - pr[i]);

		for (int c = 0; c <= d; c++)
		{
			double		xc = c < d ? X[(size_t) i * ld + c] : 1;

			ref[c] += r * xc;
			if (gabs)
				gabs[c] += fabs(r * xc);
			for (int k = 0; k <= c; k++)
			{
				double		xk = k < d ? X[(size_t) i * ld + k] : 1;

				Href[c * P + k] += w * xc * xk;
				Habs[c * P + k] += fabs(w * xc * xk);
			}
		}
	}
}

/*
 * H (P, P) against the double sums: the largest error of its lower
 * triangle's first p rows against the sizes of their terms (Habs), into
 * *worst; the entries outside it as they were (Href's, *kept) and every
 * entry finite (*finite)
 */
static void
newton_h_check(const double *H, const double *Href, const double *Habs, int p, double *worst,
			   bool *kept, bool *finite)
{
	enum
	{
		P = DML_HESS_TILE_P
	};

	for (int c = 0; c < P; c++)
		for (int k = 0; k < P; k++)
		{
			*finite = *finite && isfinite(H[c * P + k]);
			if (k > c || c >= p)
				*kept = *kept && H[c * P + k] == Href[c * P + k];
			else
				*worst = fmax(*worst, fabs(H[c * P + k] - Href[c * P + k]) / (Habs[c * P + k] + 1e-300));
		}
}

/*
 * The float32 Newton iterations' statistics (dml_logit_stats32, AVX-512 or
 * AVX2), for rows as they lie (d apart) and with a column more, over 300
 * rows (crossing the 128-row chunks), two calls added up: the gradient
 * against a double loop to 1e-12, and every entry of H's lower triangle
 * against a double loop to 1e-5 of the sum of its terms' magnitudes (the
 * bound of float32 products summed in float32 over a chunk of 128 rows:
 * 128 roundings of 2^-24 each, and the products' own); the entries above
 * the diagonal as they were.  Two rows have p (1 - p) near 1e-40, whose
 * products are subnormal floats (flushed to zero): the sums stay finite.
 */
static void
test_newton_stats32(void)
{
	enum
	{
		P = DML_HESS_TILE_P, B = 300
	};
	static const int dims[] = {1, 7, 8, 15, 16, 20, 23};
	float	   *X = malloc(sizeof(float) * B * P);
	double		pr[B];
	int			label[B];
	DmlRng		rng;

	if (!dml_hess_tiles_ok(21))
	{
		printf("# the Newton statistics kernel does not run on this CPU and build: not compared\n");
		free(X);
		return;
	}
	dml_rng_seed(&rng, 25);
	for (int s = 0; s < (int) (sizeof(dims) / sizeof(dims[0])); s++)
		for (int extra = 0; extra <= 1; extra++)
		{
			int			d = dims[s],
						ld = d + extra,
						p = d + 1;
			double		g[P + 1],
						ref[P + 1],
						H[P * P],
						Href[P * P],
						Habs[P * P],
						worst_g = 0,
						worst_h = 0;
			bool		upper_kept = true,
						finite = true;

			for (int i = 0; i < B * P; i++)
				X[i] = (float) dml_rng_normal(&rng);
			newton_stats_inputs(&rng, B, pr, label, g, ref, H, Href, Habs);
			dml_logit_stats32(X, 170, d, ld, pr, label, g, H, X + (size_t) 170 * ld, B - 170);
			dml_logit_stats32(X + (size_t) 170 * ld, B - 170, d, ld, pr + 170, label + 170, g, H,
							  NULL, 0);
			newton_stats_ref(X, ld, B, d, pr, label, ref, NULL, Href, Habs);
			for (int c = 0; c <= P; c++)
			{
				double		e = fabs(g[c] - ref[c]) / (fabs(ref[c]) + 1);

				worst_g = e > worst_g ? e : worst_g;
				finite = finite && isfinite(g[c]);
			}
			newton_h_check(H, Href, Habs, p, &worst_h, &upper_kept, &finite);
			char		name[112];

			snprintf(name, sizeof(name), "the Newton statistics in float32, d = %d, rows %d apart: gradient and Hessian", d, ld);
			check(worst_g < 1e-12 && worst_h < 1e-5 && upper_kept && finite, name,
				  "gradient %g, Hessian %g of its terms, the rest kept %d, finite %d",
				  worst_g, worst_h, upper_kept, finite);
		}
	free(X);
}

/*
 * Row panels (logit.c, panel.h) over G groups of 16 rows of d inputs at X
 * (row-major): copied into Pk and laid out as panels there, their
 * statistics with pr and label summed into g (d + 1) and Hs
 * (DML_HESS_TILE_P squared), in two calls (7 groups, then the rest) and
 * one flush
 */
static void
panel_run(const float *X, float *Pk, int G, int d, const double *pr, const int *label,
		  double *g, double *Hs)
{
	int			p = d + 1;
	float	   *lanes = calloc(dml_panel_lanes(p), sizeof(float));
	double	   *dlanes = calloc(dml_panel_lanes(p), sizeof(double));

	memcpy(Pk, X, sizeof(float) * G * DML_PANEL * d);
	dml_panel_layout(Pk, G, d, true);
	dml_panel_stats(Pk, 7, d, pr, label, lanes, Pk + (size_t) 7 * DML_PANEL * d, G - 7);
	dml_panel_stats(Pk + (size_t) 7 * DML_PANEL * d, G - 7, d, pr + 7 * DML_PANEL,
					label + 7 * DML_PANEL, lanes, NULL, 0);
	dml_panel_flush(lanes, dlanes, p);
	dml_panel_sum(dlanes, p, g, Hs);
	free(lanes);
	free(dlanes);
}

/*
 * The row panels against double sums: the packing moves each value to
 * its lane, the logits and the gradient and Hessian (float32 products and
 * lane sums) agree with double to float32 rounding of their terms, and
 * the entries outside the lower triangle are left as they were
 */
static void
test_newton_panels(void)
{
	enum
	{
		P = DML_HESS_TILE_P, G = 19, B = G * DML_PANEL
	};
	static const int dims[] = {1, 7, 8, 15, 16, 20, 23};
	float	   *X = malloc(sizeof(float) * B * P),
			   *Pk = malloc(sizeof(float) * B * P),
				out[B];
	double		pr[B];
	float		v[P];
	int			label[B];
	DmlRng		rng;

	if (!dml_hess_tiles_ok(21))
	{
		printf("# the row panels' kernels do not run on this CPU and build: not compared\n");
		free(X);
		free(Pk);
		return;
	}
	dml_rng_seed(&rng, 27);
	for (int s = 0; s < (int) (sizeof(dims) / sizeof(dims[0])); s++)
	{
		int			d = dims[s],
					p = d + 1;
		double		g[P + 1],
					ref[P + 1],
					gabs[P + 1],
					H[P * P],
					Href[P * P],
					Habs[P * P],
					worst_g = 0,
					worst_h = 0,
					worst_dot = 0;
		bool		packed = true,
					back = true,
					upper_kept = true,
					finite = true;
		char		name[112];

		for (int i = 0; i < B * d; i++)
			X[i] = (float) dml_rng_normal(&rng);
		for (int c = 0; c <= d; c++)
			v[c] = (float) dml_rng_normal(&rng);
		newton_stats_inputs(&rng, B, pr, label, g, ref, H, Href, Habs);
		memset(gabs, 0, sizeof(gabs));
		panel_run(X, Pk, G, d, pr, label, g, H);
		newton_stats_ref(X, d, B, d, pr, label, ref, gabs, Href, Habs);
		for (int i = 0; i < B; i++)
			for (int c = 0; c < d; c++)
				packed = packed && Pk[(size_t) (i / DML_PANEL) * DML_PANEL * d + c * DML_PANEL +
									  i % DML_PANEL] == X[(size_t) i * d + c];
		dml_panel_dot(out, Pk, G, d, v);
		dml_panel_layout(Pk, G, d, false);
		back = memcmp(Pk, X, sizeof(float) * B * d) == 0;
		for (int i = 0; i < B; i++)
		{
			double		z = v[d],
						za = fabs(v[d]);

			for (int c = 0; c < d; c++)
			{
				z += (double) v[c] * X[(size_t) i * d + c];
				za += fabs((double) v[c] * X[(size_t) i * d + c]);
			}
			worst_dot = fmax(worst_dot, fabs(out[i] - z) / za);
		}
		for (int c = 0; c < p; c++)
		{
			worst_g = fmax(worst_g, fabs(g[c] - ref[c]) / (gabs[c] + 1e-300));
			finite = finite && isfinite(g[c]);
		}
		for (int c = p; c <= P; c++)
			upper_kept = upper_kept && g[c] == c;
		newton_h_check(H, Href, Habs, p, &worst_h, &upper_kept, &finite);
		snprintf(name, sizeof(name), "the row panels, d = %d: laid out and back, logits, gradient and Hessian", d);
		check(packed && back && worst_dot < 1e-5 && worst_g < 1e-5 && worst_h < 1e-5 && upper_kept &&
			  finite, name,
			  "laid out %d, back %d, logits %g, gradient %g, Hessian %g of their terms, the rest kept %d, finite %d",
			  packed, back, worst_dot, worst_g, worst_h, upper_kept, finite);
	}
	free(X);
	free(Pk);
}

/* the tests of dml's own kernels (kernels/simd.h), run for each instruction set */
/*
 * dml_dense_rows (a model's hidden layers at inference) against double
 * sums: bias plus the products, ReLU or none, every output within float32
 * rounding of its terms' magnitudes; nothing written past OC in a row or
 * past the last row; a row's outputs the same bits alone as among others;
 * and dml_model_predict on it against the sgemm path
 */
static void
test_dense_rows(void)
{
	static const int shapes[][3] = {
		{1, 1, 1}, {5, 3, 17}, {37, 20, 64}, {13, 64, 5}, {70, 100, 33}, {6, 7, 16},
		{11, 9, 100}, {8, 2, 129}
	};
	DmlRng		rng;
	int			bad_sum = 0,
				bad_pad = 0,
				bad_alone = 0;

	dml_rng_seed(&rng, 31);
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (int relu = 0; relu < 2; relu++)
		{
			int			B = shapes[s][0],
						C = shapes[s][1],
						OC = shapes[s][2],
						ldi = C + 3,
						ldo = OC + 5;
			float	   *X = malloc(sizeof(float) * B * ldi),
					   *W = malloc(sizeof(float) * OC * C),
					   *b = malloc(sizeof(float) * OC),
					   *WT = malloc(sizeof(float) * dml_dense_rows_floats(C, OC)),
					   *out = malloc(sizeof(float) * (B + 1) * ldo),
					   *one = malloc(sizeof(float) * ldo);
			const float sentinel = -12345.0f;

			fill_uniform(X, (size_t) B * ldi, &rng, -2, 2);
			fill_uniform(W, (size_t) OC * C, &rng, -1, 1);
			fill_uniform(b, OC, &rng, -1, 1);
			for (int i = 0; i < (B + 1) * ldo; i++)
				out[i] = sentinel;
			dml_dense_rows_weights(WT, W, b, C, OC);
			dml_dense_rows(out, ldo, X, ldi, WT, B, C, OC, relu);
			for (int r = 0; r < B; r++)
			{
				for (int o = 0; o < OC; o++)
				{
					double		z = b[o],
								mag = fabs(b[o]);

					for (int c = 0; c < C; c++)
					{
						z += (double) W[o * C + c] * X[r * ldi + c];
						mag += fabs((double) W[o * C + c] * X[r * ldi + c]);
					}
					if (relu && z < 0)
						z = 0;
					if (!(fabs(out[r * ldo + o] - z) <= 4e-7 * (C + 1) * mag + 1e-30))
						bad_sum++;
				}
				for (int o = OC; o < ldo; o++)
					bad_pad += out[r * ldo + o] != sentinel;
				/* the row alone */
				dml_dense_rows(one, ldo, X + r * ldi, ldi, WT, 1, C, OC, relu);
				bad_alone += memcmp(one, out + r * ldo, sizeof(float) * OC) != 0;
			}
			for (int o = 0; o < ldo; o++)
				bad_pad += out[B * ldo + o] != sentinel;
			free(X);
			free(W);
			free(b);
			free(WT);
			free(out);
			free(one);
		}
	check(bad_sum == 0, "dml_dense_rows: bias plus products (and ReLU) within float32 rounding of double sums",
		  "%d outputs off", bad_sum);
	check(bad_pad == 0, "dml_dense_rows: nothing written past a row's outputs or the last row",
		  "%d floats written", bad_pad);
	check(bad_alone == 0, "dml_dense_rows: a row's outputs alone are its outputs among other rows, bit for bit",
		  "%d rows differ", bad_alone);
	{
		/* dml_model_predict: hidden layers on dml_dense_rows against sgemm's */
		DmlModel	m;
		int			sizes[4] = {5, 17, 64, 3},
					B = 40;
		float		X[40 * 5],
					out[2][40 * 3],
				   *scratch;
		double		diff = 0;

		dml_model_alloc(&m, 3, sizes, DML_ACT_RELU, DML_LOSS_SOFTMAX);
		dml_net_init(&m.net, 5);
		fill_uniform(m.net.params, m.net.nparams, &rng, -0.5, 0.5);
		fill_uniform(m.in_mean, 5, &rng, -1, 1);
		fill_uniform(m.in_scale, 5, &rng, 0.5, 2);
		fill_uniform(X, B * 5, &rng, -3, 3);
		scratch = malloc(sizeof(float) * dml_model_scratch_floats(&m, B));
		dml_model_predict(&m, out[0], X, B, scratch);
		dml_set_skinny(false);	/* every layer on sgemm */
		dml_model_predict(&m, out[1], X, B, scratch);
		dml_set_skinny(true);
		for (int i = 0; i < B * 3; i++)
			diff = fmax(diff, fabs(out[0][i] - out[1][i]));
		{
			/* the same rows in batches of 2, 3 and 7: the same bits as in one batch */
			int			bad = 0;

			for (int k = 0; k < 3; k++)
			{
				int			bs = k == 0 ? 2 : k == 1 ? 3 : 7;

				for (int b0 = 0; b0 + 2 <= B; b0 += bs)
				{
					int			nb = B - b0 < bs ? B - b0 : bs;

					if (nb < 2)
						break;
					dml_model_predict(&m, out[1] + b0 * 3, X + b0 * 5, nb, scratch);
					bad += memcmp(out[1] + b0 * 3, out[0] + b0 * 3, sizeof(float) * nb * 3) != 0;
				}
			}
			check(dml_simd() == 0 || bad == 0,
				  "dml_model_predict: a row's probabilities the same bits in batches of 2, 3, 7 and 40",
				  "%d batches differ", bad);
		}
		check(dml_simd() == 0 || dml_dense_rows_applies(17, 64), "dml_dense_rows runs for a layer of 17 x 64",
			  NULL);
		check(diff <= 1e-5, "dml_model_predict on dml_dense_rows and on sgemm: the same probabilities to 1e-5",
			  "largest difference %g", diff);
		{
			/*
			 * prepared (the weights laid out once): a batch gives the same
			 * bits, and a row alone runs as in a batch, the same bits too
			 */
			int			bad_batch,
						bad_alone = 0;
			float	   *s1;

			dml_model_prepare(&m);
			check(m.rows_wt != NULL, "dml_model_prepare lays out the hidden layers' weights", NULL);
			free(scratch);
			scratch = malloc(sizeof(float) * dml_model_scratch_floats(&m, B));
			s1 = malloc(sizeof(float) * dml_model_scratch_floats(&m, 1));
			dml_model_predict(&m, out[1], X, B, scratch);
			bad_batch = memcmp(out[1], out[0], sizeof(float) * B * 3) != 0;
			for (int b = 0; b < B; b++)
			{
				float		one[3];

				dml_model_predict(&m, one, X + b * 5, 1, s1);
				bad_alone += memcmp(one, out[0] + b * 3, sizeof(one)) != 0;
			}
			check(bad_batch == 0, "dml_model_predict, prepared: a batch the same bits as not prepared",
				  NULL);
			check(dml_simd() == 0 || bad_alone == 0,
				  "dml_model_predict, prepared: a row alone the same bits as in a batch",
				  "%d rows differ", bad_alone);
			free(s1);
		}
		free(scratch);
		dml_model_free(&m);
	}
	{
		/*
		 * a hidden layer over 64 outputs (sgemm in a batch): a prepared
		 * model's row alone stays on sgemv there, within 1e-5 of the batch
		 */
		DmlModel	m;
		int			sizes[4] = {5, 17, 80, 3},
					B = 9;
		float		X[9 * 5],
					out[9 * 3],
					one[3],
				   *scratch,
				   *s1;
		double		diff = 0;

		dml_model_alloc(&m, 3, sizes, DML_ACT_RELU, DML_LOSS_SOFTMAX);
		dml_net_init(&m.net, 5);
		fill_uniform(m.net.params, m.net.nparams, &rng, -0.5, 0.5);
		fill_uniform(X, B * 5, &rng, -3, 3);
		dml_model_prepare(&m);
		scratch = malloc(sizeof(float) * dml_model_scratch_floats(&m, B));
		s1 = malloc(sizeof(float) * dml_model_scratch_floats(&m, 1));
		dml_model_predict(&m, out, X, B, scratch);
		for (int b = 0; b < B; b++)
		{
			dml_model_predict(&m, one, X + b * 5, 1, s1);
			for (int k = 0; k < 3; k++)
				diff = fmax(diff, fabs(one[k] - out[b * 3 + k]));
		}
		check(diff <= 1e-5, "dml_model_predict, prepared, a layer of 80: a row alone within 1e-5 of the batch",
			  "largest difference %g", diff);
		free(scratch);
		free(s1);
		dml_model_free(&m);
	}
}

/*
 * The dense layers' products (gemm.h's kernel on AVX-512, sgemm elsewhere
 * and with dml_set_gemm(false)) against sums in double: the forward pass
 * with its bias and ReLU, the weight gradient overwritten and accumulated,
 * and the input gradient through ReLU's derivative.  The shapes cross the
 * kernel's edges: rows not a multiple of its 6, columns of its 16 and 64,
 * K of its 16 and of its blocks (128).  Then the fused activations give
 * the bits of the separate passes (activation_forward, _backward).
 */
static double
gemm_ref_err(const float *got, const double *ref, const double *mag, int n, int K, int *wrong)
{
	double		worst = 0;

	for (int i = 0; i < n; i++)
	{
		double		e = fabs(got[i] - ref[i]) / (mag[i] + 1e-30);

		if (!(e <= 1.2e-7 * (K + 2)))
			(*wrong)++;
		worst = e > worst ? e : worst;
	}
	return worst;
}

/*
 * ref (M x N) = init + a b in double, a's (i, k) at a[i ars + k acs] and
 * b's (k, j) at b[k brs + j bcs], init bias[j] (or c0 where bias is NULL);
 * mag the same sums of magnitudes
 */
static void
gemm_ref(double *ref, double *mag, const float *a, long ars, long acs, const float *b,
		 long brs, long bcs, int M, int N, int K, const float *bias, double c0)
{
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++)
		{
			double		sum = bias ? bias[j] : c0,
						m = fabs(sum);

			for (int k = 0; k < K; k++)
			{
				double		t = (double) a[i * ars + k * acs] * b[k * brs + j * bcs];

				sum += t;
				m += fabs(t);
			}
			ref[(size_t) i * N + j] = sum;
			mag[(size_t) i * N + j] = m;
		}
}

static void
test_gemm(void)
{
	static const int Ms[] = {2, 5, 6, 7, 13, 131, 300};
	static const int Ns[] = {13, 16, 17, 64, 65, 200};
	static const int Ks[] = {2, 3, 16, 17, 128, 129, 300};
	DmlRng		rng;
	bool		amx_ran = false;

	dml_rng_seed(&rng, 91);
	for (int g = 2; g >= 0; g--)
	{
		int			wrong[3] = {0, 0, 0},
					shapes = 0,
					fused_differ = 0;
		double		worst[3] = {0, 0, 0};
		char		name[160];
		bool		amx = dml_set_amx(g == 2);
		const char *on = amx ? "on AMX (rows, columns >= 32, K >= 64) and dml's kernel" :
			g == 2 && dml_simd() >= 512 ? "on dml's kernel (no AMX here)" :
			g >= 1 && dml_simd() >= 512 ? "on dml's kernel" : "on sgemm";

		dml_set_gemm(g >= 1);
		for (int mi = 0; mi < 7; mi++)
			for (int ni = 0; ni < 6; ni++)
				for (int ki = 0; ki < 7; ki++)
				{
					int			B = Ms[mi],
								OC = Ns[ni],
								C = Ks[ki];
					float	   *x = malloc(sizeof(float) * B * C),
							   *w = malloc(sizeof(float) * OC * C),
							   *bias = malloc(sizeof(float) * OC),
							   *dout = malloc(sizeof(float) * B * OC),
							   *out = malloc(sizeof(float) * B * OC),
							   *sep = malloc(sizeof(float) * B * OC),
							   *dw = malloc(sizeof(float) * OC * C),
							   *db = malloc(sizeof(float) * OC),
							   *dx = malloc(sizeof(float) * B * C),
							   *dx2 = malloc(sizeof(float) * B * C);
					double	   *ref = malloc(sizeof(double) * B * C * 2 + sizeof(double) * B * OC * 2 + sizeof(double) * OC * C * 2),
							   *mag = ref + (size_t) B * OC,
							   *wref = mag + (size_t) B * OC,
							   *wmag = wref + (size_t) OC * C,
							   *xref = wmag + (size_t) OC * C,
							   *xmag = xref + (size_t) B * C;

					/* inputs as a ReLU's outputs: a third 0, one NaN */
					for (int i = 0; i < B * C; i++)
						x[i] = dml_rng_next(&rng) % 3 == 0 ? 0.0f : (float) fabs(dml_rng_normal(&rng));
					x[B * C / 2] = NAN;
					fill_normal(w, (size_t) OC * C, &rng);
					fill_normal(bias, OC, &rng);
					fill_normal(dout, (size_t) B * OC, &rng);
					gemm_ref(ref, mag, x, C, 1, w, 1, C, B, OC, C, bias, 0.0);
					for (int i = 0; i < B * OC; i++)
						ref[i] = ref[i] > 0 ? ref[i] : 0;
					gemm_ref(wref, wmag, dout, 1, OC, x, C, 1, OC, C, B, NULL, 1.5);
					gemm_ref(xref, xmag, dout, OC, 1, w, C, 1, B, C, OC, NULL, 0.0);
					for (int i = 0; i < B * C; i++)
						xref[i] = x[i] > 0 ? xref[i] : 0;

					dense_forward_act(out, x, w, bias, B, C, OC, DML_ACT_RELU);
					dense_forward(sep, x, w, bias, B, C, OC);
					activation_forward(sep, sep, (size_t) B * OC, DML_ACT_RELU);
					fused_differ += memcmp(out, sep, sizeof(float) * B * OC) != 0;
					/* the NaN's row is NaN before ReLU, 0 after (activation_forward's rule) */
					for (int o = 0; o < OC; o++)
					{
						size_t		i = (size_t) (B * C / 2) / C * OC + o;

						wrong[0] += out[i] != 0.0f;
						out[i] = 0.0f;
						ref[i] = 0.0;
						mag[i] = 1.0;
					}
					worst[0] = fmax(worst[0], gemm_ref_err(out, ref, mag, B * OC, C, &wrong[0]));

					/* overwritten, then accumulated onto 1.5 (the NaN's column NaN) */
					dense_backward_act(NULL, dw, db, dout, x, w, B, C, OC, false, DML_ACT_RELU);
					for (int i = 0; i < OC * C; i++)
						dw[i] = 1.5f;
					dense_backward_act(dx, dw, db, dout, x, w, B, C, OC, true, DML_ACT_RELU);
					for (int o = 0; o < OC; o++)
					{
						size_t		i = (size_t) o * C + (B * C / 2) % C;

						wrong[1] += !isnan(dw[i]);
						dw[i] = 0.0f;
						wref[i] = 0.0;
						wmag[i] = 1.0;
					}
					worst[1] = fmax(worst[1], gemm_ref_err(dw, wref, wmag, OC * C, B, &wrong[1]));
					worst[2] = fmax(worst[2], gemm_ref_err(dx, xref, xmag, B * C, OC, &wrong[2]));
					dense_backward_act(dx2, dw, db, dout, x, w, B, C, OC, false, DML_ACT_IDENTITY);
					activation_backward(dx2, dx2, x, (size_t) B * C, DML_ACT_RELU);
					fused_differ += memcmp(dx, dx2, sizeof(float) * B * C) != 0;
					shapes++;
					free(x), free(w), free(bias), free(dout), free(out), free(sep);
					free(dw), free(db), free(dx), free(dx2), free(ref);
				}
		snprintf(name, sizeof(name), "dense layers' products %s against double sums, %d shapes: forward + bias + ReLU",
				 on, shapes);
		check(wrong[0] == 0, name, "%d values off, worst %g", wrong[0], worst[0]);
		snprintf(name, sizeof(name), "dense layers' products %s: weight gradient overwritten and accumulated", on);
		check(wrong[1] == 0, name, "%d values off, worst %g", wrong[1], worst[1]);
		snprintf(name, sizeof(name), "dense layers' products %s: input gradient through ReLU's derivative", on);
		check(wrong[2] == 0, name, "%d values off, worst %g", wrong[2], worst[2]);
		snprintf(name, sizeof(name), "dense layers' products %s: the fused activations give the separate passes' bits", on);
		check(fused_differ == 0, name, "%d of %d products differ", fused_differ, 2 * shapes);
		amx_ran |= amx;
	}
	/*
	 * AMX's three parts against float32 at the MLP's shapes: the bound above
	 * is loose (K ulps); the six products' worst error (relative to the sum
	 * of the products' magnitudes) stays within 2x the float32 kernel's or
	 * 2^-22 (a part's product left out is 2^-16 of a value)
	 */
	if (amx_ran)
	{
		static const int sh[][5] = {{128, 256, 784, 0, 1}, {256, 784, 128, 1, 0}, {128, 256, 128, 0, 0}, {300, 64, 200, 1, 1}};
		double		wa[4],
					wd[4];
		bool		ok = true;
		char		what[400] = "";

		dml_set_gemm(true);
		for (int q = 0; q < 4; q++)
		{
			int			M = sh[q][0],
						N = sh[q][1],
						K = sh[q][2];
			bool		ta = sh[q][3],
						tb = sh[q][4];
			float	   *a = malloc(sizeof(float) * M * K),
					   *b = malloc(sizeof(float) * K * N),
					   *c = malloc(sizeof(float) * M * N);
			double	   *ref = malloc(sizeof(double) * M * N * 2),
					   *mag = ref + (size_t) M * N;
			int			dummy = 0;

			fill_normal(a, (size_t) M * K, &rng);
			fill_normal(b, (size_t) K * N, &rng);
			gemm_ref(ref, mag, a, ta ? 1 : K, ta ? M : 1, b, tb ? 1 : N, tb ? K : 1, M, N, K, NULL, 0.0);
			for (int g = 0; g < 2; g++)
			{
				dml_set_amx(g == 0);
				dml_gemm(ta, tb, M, N, K, a, ta ? M : K, b, tb ? K : N, false, c, N);
				(g == 0 ? wa : wd)[q] = gemm_ref_err(c, ref, mag, M * N, K, &dummy);
			}
			ok &= wa[q] <= 2 * fmax(wd[q], 0x1p-23);
			snprintf(what + strlen(what), sizeof(what) - strlen(what), "%s%dx%dx%d: %.3g against %.3g",
					 q ? ", " : "", M, N, K, wa[q], wd[q]);
			free(a), free(b), free(c), free(ref);
		}
		dml_set_amx(false);
		check(ok, "dense layers' products on AMX at the MLP's shapes: worst errors within 2x dml's float32 kernel's or 2^-22",
			  "%s", what);
	}
	dml_set_gemm(true);
	/* AMX where the CPU says it has it (and Linux grants the tiles) */
	{
		FILE	   *f = fopen("/proc/cpuinfo", "r");
		char		line[8192];
		bool		listed = false,
					granted;

		while (f && fgets(line, sizeof(line), f))
			if (strncmp(line, "flags", 5) == 0)
			{
				listed = strstr(line, " amx_bf16") && strstr(line, " amx_tile") && strstr(line, " avx512bw");
				break;
			}
		if (f)
			fclose(f);
		/* and Linux grants this process the tiles' state (5.16 on) */
#ifdef SYS_arch_prctl
		granted = listed && syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */ , 18) == 0;
#else
		granted = false;
#endif
		check(dml_set_amx(true) == (granted && dml_simd() >= 512),
			  "the layers' products run on AMX exactly where /proc/cpuinfo lists amx_bf16, amx_tile and avx512bw and Linux grants the tiles",
			  "listed %d, granted %d", listed, granted);
		dml_set_amx(false);
	}
	/* where it runs: a minibatch on AVX-512, up to a C of 1 MB */
	{
		float	   *a = calloc(600 * 600, sizeof(float)),
				   *b = calloc(600 * 600, sizeof(float)),
				   *c = calloc(600 * 600, sizeof(float));
		bool		small = dml_gemm(false, false, 8, 16, 8, a, 8, b, 16, false, c, 16),
					large = dml_gemm(false, false, 600, 600, 8, a, 8, b, 600, false, c, 600);

		check(small == (dml_simd() >= 512) && !large, "dml_gemm runs on AVX-512 alone, and not past a C of 1 MB",
			  "8 x 16 x 8: %d, 600 x 600 x 8: %d", small, large);
		free(a), free(b), free(c);
	}
}

static void
test_simd_kernels(void)
{
	test_fused();
	test_tiles();
	test_skinny();
	test_gemm();
	test_hess_tiles();
	test_newton_stats32();
	test_newton_panels();
	if (dml_simd() >= 256)
		test_dense_rows();
}

/*
 * The AVX-512 and AVX2 copies of the kernels whose every output sums in
 * row order give the same bits: the Hessian's tiles, the float32 Newton
 * statistics, and the byte rows' check; where the CPU has both
 */
static void
test_simd_twins(void)
{
	enum
	{
		P = DML_HESS_TILE_P, M = 300, N = 64, C = 50
	};
	double	   *Z = malloc(sizeof(double) * M * P),
			   *Zp = malloc(sizeof(double) * M * P),
				H[2][P * P],
				g[2][P + 1],
				pr[M];
	float		pr2[2][M];
	float	   *X = malloc(sizeof(float) * M * P);
	float		v[N * C];
	uint8_t		u8[2][N * C];
	int			label[M];
	bool		ok8[2][N],
				same_h = true,
				same_rows = true,
				same_panels = true,
				same_bytes = true;
	DmlRng		rng;

	if (dml_simd() < 512)
	{
		printf("# one instruction set's kernels on this CPU: the AVX-512 and AVX2 copies not compared\n");
		free(Z);
		free(Zp);
		free(X);
		return;
	}
	dml_rng_seed(&rng, 26);
	for (int i = 0; i < M * P; i++)
		Z[i] = dml_rng_normal(&rng);
	for (int i = 0; i < M * P; i++)
		X[i] = (float) dml_rng_normal(&rng);
	for (int i = 0; i < M; i++)
	{
		pr[i] = dml_rng_uniform(&rng);
		label[i] = i % 3 == 0;
	}
	/* pixels / 255, every fourth row with one value off by an ulp */
	for (int i = 0; i < N * C; i++)
		v[i] = (float) ((int) (dml_rng_uniform(&rng) * 256) % 256) / 255.0f;
	for (int i = 0; i < N; i += 4)
		v[i * C + i % C] = nextafterf(v[i * C + i % C], 2.0f);
	for (int p = 1; p <= P; p++)
	{
		/* dml_hess_tiles's contract: the rows' columns past p are zero */
		for (int i = 0; i < M; i++)
			for (int c = 0; c < P; c++)
				Zp[i * P + c] = c < p ? Z[i * P + c] : 0;
		for (int t = 0; t < 2; t++)
		{
			dml_set_simd(t == 0 ? 512 : 256);
			memset(H[t], 0, sizeof(H[t]));
			dml_hess_tiles(H[t], Zp, 170, p);
			dml_hess_tiles(H[t], Zp + (size_t) 170 * P, M - 170, p);
		}
		same_h = same_h && memcmp(H[0], H[1], sizeof(H[0])) == 0;
	}
	for (int d = 1; d < P; d += 3)
	{
		for (int t = 0; t < 2; t++)
		{
			dml_set_simd(t == 0 ? 512 : 256);
			for (int c = 0; c <= P; c++)
				g[t][c] = c;
			memset(H[t], 0, sizeof(H[t]));
			dml_logit_stats32(X, M, d, P, pr, label, g[t], H[t], NULL, 0);
		}
		same_rows = same_rows && memcmp(g[0], g[1], sizeof(g[0])) == 0 &&
			memcmp(H[0], H[1], sizeof(H[0])) == 0;
	}
	memset(pr2, 0, sizeof(pr2));
	for (int d = 1; d < P; d += 3)
	{
		/* the row panels: M rows are 18 panels and a part, of which 18 are taken */
		float	   *Pk = malloc(sizeof(float) * M * P);

		for (int t = 0; t < 2; t++)
		{
			dml_set_simd(t == 0 ? 512 : 256);
			for (int c = 0; c <= P; c++)
				g[t][c] = c;
			memset(H[t], 0, sizeof(H[t]));
			panel_run(X, Pk, M / DML_PANEL, d, pr, label, g[t], H[t]);
			dml_panel_dot(pr2[t], Pk, M / DML_PANEL, d, X);
		}
		same_panels = same_panels && memcmp(g[0], g[1], sizeof(g[0])) == 0 &&
			memcmp(H[0], H[1], sizeof(H[0])) == 0 &&
			memcmp(pr2[0], pr2[1], sizeof(pr2[0])) == 0;
		free(Pk);
	}
	for (int t = 0; t < 2; t++)
	{
		dml_set_simd(t == 0 ? 512 : 256);
		for (int i = 0; i < N; i++)
			ok8[t][i] = dml_rows8_row(u8[t] + i * C, v + i * C, C, 255.0f);
	}
	dml_set_simd(512);
	for (int i = 0; i < N; i++)
		same_bytes = same_bytes && ok8[0][i] == ok8[1][i] && ok8[0][i] == (i % 4 != 0) &&
			(!ok8[0][i] || memcmp(u8[0] + i * C, u8[1] + i * C, C) == 0);
	{
		/* the hidden layers at inference: each output its own lane's sum, in input order */
		float		Wd[20 * 70],
					bd[70],
				   *WT = malloc(sizeof(float) * dml_dense_rows_floats(20, 70)),
					o[2][13 * 70];

		for (int i = 0; i < 20 * 70; i++)
			Wd[i] = (float) dml_rng_normal(&rng);
		for (int i = 0; i < 70; i++)
			bd[i] = (float) dml_rng_normal(&rng);
		dml_dense_rows_weights(WT, Wd, bd, 20, 70);
		for (int t = 0; t < 2; t++)
		{
			dml_set_simd(t == 0 ? 512 : 256);
			dml_dense_rows(o[t], 70, X, 20, WT, 13, 20, 70, true);
		}
		dml_set_simd(512);
		check(memcmp(o[0], o[1], sizeof(o[0])) == 0,
			  "dml_dense_rows on AVX-512 and on AVX2: the same outputs, bit for bit", NULL);
		free(WT);
	}
	check(same_h, "the Hessian's tiles on AVX-512 and on AVX2: the same sums, bit for bit (p = 1..24)", NULL);
	check(same_rows, "the Newton statistics in float32 on AVX-512 and on AVX2: the same gradient and Hessian, bit for bit", NULL);
	check(same_panels, "the row panels on AVX-512 and on AVX2: the same logits, gradient and Hessian, bit for bit", NULL);
	check(same_bytes, "the byte rows' check on AVX-512 and on AVX2: the same rows kept, the same bytes", NULL);
	free(Z);
	free(Zp);
	free(X);
}

static void
test_blas_core(void)
{
	const char *forced = dml_blas_core_override("Prescott");
	int			avx2 = 0,
				avx512 = 0;

#if defined(__x86_64__) && defined(__GNUC__)
	__builtin_cpu_init();
	avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		__builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#endif
	check(dml_blas_core_override("Haswell") == NULL &&
		  dml_blas_core_override("skylakex") == NULL &&
		  dml_blas_core_override("Cooperlake") == NULL &&
		  dml_blas_core_override("Zen") == NULL &&
		  dml_blas_core_override(NULL) == NULL,
		  "BLAS core: AVX2 kernels and no name are left alone", "");
	check(avx2 ? forced != NULL && dml_blas_core_override(forced) == NULL &&
		  strcmp(forced, avx512 ? "SkylakeX" : "Haswell") == 0 : forced == NULL,
		  "BLAS core: the SSE3 fallback is replaced by what this CPU runs",
		  "avx2 %d avx512 %d forced %s", avx2, avx512, forced ? forced : "(none)");
	check(dml_blas_core_override("Sandybridge") == (avx2 ? forced : NULL),
		  "BLAS core: an AVX-only core too", "");
}

/* a float64 model round-trips bit for bit as format version 2 and predicts in float64 */
static void
test_format_f64(void)
{
	int			sizes[2] = {2, 1};
	DmlModel	m,
				back;
	unsigned char *blob;
	size_t		len;
	char		err[256];
	DmlStatus	st;
	double		x[2] = {1e8 + 1, 3},
				out;

	dml_model_alloc(&m, 1, sizes, DML_ACT_IDENTITY, DML_LOSS_MSE);
	dml_model_make_f64(&m);
	/* y = 0.1 + (1/3) x0 - x1: not representable in float32 */
	m.params64[0] = 1.0 / 3;
	m.params64[1] = -1;
	m.params64[2] = 0.1;
	dml_model_sync_f32(&m);
	len = dml_model_serialized_size(&m);
	blob = malloc(len);
	dml_model_serialize(&m, blob);
	st = dml_model_parse(&back, blob, len, err, sizeof(err));
	check(st == DML_OK && back.precision == 64 && blob[4] == 2 &&
		  memcmp(back.params64, m.params64, 3 * sizeof(double)) == 0,
		  "float64 model round-trips as version 2", "status %d: %s", st, err);
	if (st == DML_OK)
	{
		dml_model_predict64(&back, &out, x, 1);
		check(out == 0.1 + (1e8 + 1) / 3 - 3 || fabs(out - (0.1 + (1e8 + 1) / 3 - 3)) <= 1e-8,
			  "float64 predict keeps float64 digits", "%.17g", out);
		dml_model_free(&back);
	}
	/* the v2 header with a precision it does not know is rejected */
	blob[24] = 16;
	{
		uint32_t	crc = dml_crc32(blob, len - 4);

		for (int i = 0; i < 4; i++)
			blob[len - 4 + i] = (crc >> (8 * i)) & 0xFF;
	}
	st = dml_model_parse(&back, blob, len, err, sizeof(err));
	check(st == DML_ERR_FORMAT && strstr(err, "precision") != NULL,
		  "unknown precision rejected", "status %d: %s", st, err);
	free(blob);
	dml_model_free(&m);
}

/*
 * dml_big_realloc as load.c grows a row array (doubling from 4096 rows, then
 * a spill's smaller block) and frees it: the contents kept through every
 * step (malloc's memory, a mapping grown in place or moved, shrunk, back to
 * malloc's) and the mappings aligned to 2 MB.  Every other step a page is
 * mapped just after the array, so that the next growth must move it.
 */
static void
test_big_realloc(void)
{
	const size_t row = 80,
				two_mb = (size_t) 2 << 20;
	size_t		cap = 0;
	unsigned char *p = NULL;
	void	   *blocker = NULL;
	bool		kept = true,
				aligned = true;
	int			blocked = 0,
				moved_when_blocked = 0;

	for (size_t want = 4096; want <= 131072; want *= 2)
	{
		unsigned char *q = dml_big_realloc(p, row * cap, row * want);

		if (q == NULL)
		{
			check(false, "dml_big_realloc grows a row array", "out of memory at %zu rows", want);
			return;
		}
		if (blocker != NULL)
		{
			blocked++;
			moved_when_blocked += q != p;
			munmap(blocker, 4096);
			blocker = NULL;
		}
		for (size_t i = 0; i < row * cap; i++)
			kept = kept && q[i] == (unsigned char) (i * 7 + i / 4096);
		if (row * want >= DML_BIG_MIN)
			aligned = aligned && ((uintptr_t) q & (two_mb - 1)) == 0;
		for (size_t i = row * cap; i < row * want; i++)
			q[i] = (unsigned char) (i * 7 + i / 4096);
		p = q;
		cap = want;
		if (row * cap >= DML_BIG_MIN && (cap / 4096) % 2 == 0)
		{
			unsigned char *after = p + ((row * cap + two_mb - 1) & ~(two_mb - 1));

			blocker = mmap(after, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
						   -1, 0);
			if (blocker == MAP_FAILED || blocker != (void *) after)
			{
				if (blocker != MAP_FAILED)
					munmap(blocker, 4096);
				blocker = NULL;
			}
		}
	}
	if (blocker != NULL)
		munmap(blocker, 4096);
	check(kept, "dml_big_realloc keeps the rows through growth", NULL);
	check(aligned, "dml_big_realloc's mappings are aligned to 2 MB", NULL);
	check(blocked > 0 && moved_when_blocked == blocked,
		  "dml_big_realloc moves a mapping that cannot grow in place",
		  "%d of %d blocked growths moved", moved_when_blocked, blocked);
	/* a spill's block: fewer rows, then fewer than DML_BIG_MIN bytes */
	p = dml_big_realloc(p, row * cap, row * 40000);
	for (size_t i = 0; p && i < row * 40000; i++)
		kept = kept && p[i] == (unsigned char) (i * 7 + i / 4096);
	check(p != NULL && kept, "dml_big_realloc keeps the rows through shrinking", NULL);
	p = dml_big_realloc(p, row * 40000, row * 1000);
	for (size_t i = 0; p && i < row * 1000; i++)
		kept = kept && p[i] == (unsigned char) (i * 7 + i / 4096);
	check(p != NULL && kept, "dml_big_realloc keeps the rows back in malloc's memory", NULL);
	dml_big_free(p, row * 1000);
}

/* the step's arrays on cache lines: aligned at every size, calloc's zeros, no overflow */
static void
test_lines(void)
{
	bool		aligned = true,
				zero = true;

	for (size_t n = 0; n <= 4099; n += n < 70 ? 1 : 1009)
	{
		/* a small allocation between, so the next does not start where this one did */
		void	   *pad = malloc(n % 48 + 1);
		float	   *m = dml_malloc_lines(n, sizeof(float));
		float	   *c = dml_calloc_lines(n, sizeof(float));

		aligned = aligned && m && c && ((uintptr_t) m % DML_LINE) == 0 &&
			((uintptr_t) c % DML_LINE) == 0;
		for (size_t i = 0; c && i < n; i++)
			zero = zero && c[i] == 0.0f;
		for (size_t i = 0; m && i < n; i++)
			m[i] = (float) i;	/* the whole size is writable (valgrind, ASan) */
		free(m);
		free(c);
		free(pad);
	}
	check(aligned, "dml_malloc_lines and dml_calloc_lines align to a cache line", NULL);
	check(zero, "dml_calloc_lines zeroes", NULL);
	check(dml_malloc_lines(SIZE_MAX / 2, 4) == NULL && dml_calloc_lines(SIZE_MAX / 2, 4) == NULL,
		  "dml_malloc_lines and dml_calloc_lines refuse a size that overflows", NULL);
}

/* the scalar loop dml_cols_dot_d must equal: products rounded, then added, column by column */
__attribute__((noinline, optimize("fp-contract=off"))) static double
cols_dot_ref(const float *X, size_t ld, int64_t i, int d, const double *v)
{
	double		s = v[d];

	for (int c = 0; c < d; c++)
		s += v[c] * X[(size_t) c * ld + i];
	return s;
}

/*
 * dml_cols_dot_d (the Newton sample's logits) against the scalar loop it
 * replaced, bit for bit, over runs that end inside a vector and past its
 * 512-row blocks; dml_panel_flush adds each lane and zeroes it
 */
static void
test_cols_dot(void)
{
	static const int ns[] = {1, 7, 511, 513, 1029};
	static const int ds[] = {1, 5, 20, 23};
	DmlRng		rng;

	dml_rng_seed(&rng, 61);
	for (int a = 0; a < (int) (sizeof(ns) / sizeof(ns[0])); a++)
		for (int b = 0; b < (int) (sizeof(ds) / sizeof(ds[0])); b++)
		{
			int			n = ns[a],
						d = ds[b];
			size_t		ld = (size_t) n + 3;
			float	   *X = malloc(sizeof(float) * ld * d);
			double	   *out = malloc(sizeof(double) * n),
						v[24];
			int			differ = 0;
			char		name[96];

			for (size_t i = 0; i < ld * d; i++)
				X[i] = (float) dml_rng_normal(&rng);
			for (int c = 0; c <= d; c++)
				v[c] = dml_rng_normal(&rng) / 3;
			dml_cols_dot_d(out, X, ld, n, d, v);
			for (int i = 0; i < n; i++)
				differ += out[i] != cols_dot_ref(X, ld, i, d, v);
			snprintf(name, sizeof(name), "the sample's logits (dml_cols_dot_d), %d rows of %d: the scalar loop's bits", n, d);
			check(differ == 0, name, "%d of %d rows differ", differ, n);
			free(X);
			free(out);
		}
	{
		int			p = 21;
		size_t		n = dml_panel_lanes(p);
		float	   *lanes = malloc(sizeof(float) * n),
				   *l0 = malloc(sizeof(float) * n);
		double	   *dl = malloc(sizeof(double) * n),
				   *d0 = malloc(sizeof(double) * n);
		int			bad = 0;

		for (size_t i = 0; i < n; i++)
		{
			l0[i] = lanes[i] = (float) dml_rng_normal(&rng);
			d0[i] = dl[i] = dml_rng_normal(&rng) * 1e3;
		}
		dml_panel_flush(lanes, dl, p);
		for (size_t i = 0; i < n; i++)
			bad += dl[i] != d0[i] + (double) l0[i] || lanes[i] != 0;
		check(bad == 0, "dml_panel_flush: each lane added in double and zeroed", "%d of %zu lanes wrong", bad, n);
		free(lanes);
		free(l0);
		free(dl);
		free(d0);
	}
}

int
main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	test_dense();
	test_activations();
	test_loss_gradients();
	test_loss_stability();
	test_softmax_exp();
	test_net_gradients();
	test_optimizers();
	test_schedules();
	test_rng();
	test_cholesky();
	test_lbfgs();
	test_logit_rows();
	test_tsqr_wampler(1, 1);
	test_tsqr_wampler(1, 3);
	test_tsqr_wampler(2, 1);
	test_tsqr_wampler(2, 3);
	test_tsqr_rank();
	test_distributions();
	test_big_realloc();
	test_lines();
	test_cols_dot();
	/* dml's own kernels, once for each instruction set this CPU has */
	if (dml_simd() == 0)
	{
		printf("# dml's own kernels do not run on this CPU and build: the reference paths only\n");
		test_simd_kernels();
	}
	else
		for (int isa = 512; isa >= 256; isa -= 256)
		{
			dml_set_simd(isa);
			if (dml_simd() != isa)
			{
				printf("# the %s kernels do not run on this CPU: not tested\n",
					   isa == 512 ? "AVX-512" : "AVX2");
				continue;
			}
			simd_tag = isa == 512 ? "[avx512] " : "[avx2] ";
			test_simd_kernels();
			simd_tag = "";
		}
	dml_set_simd(512);
	test_simd_twins();
	test_blas_core();
	test_adam_subnormal();
	test_format_f64();
	test_format();
	test_predict();
	test_metrics();
	printf("%d passed, %d failed\n", npassed, nfailed);
	return nfailed > 0 ? 1 : 0;
}
