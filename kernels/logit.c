/*-------------------------------------------------------------------------
 *
 * logit.c
 *	  Logistic and multinomial (softmax) regression in float64 on the raw
 *	  rows: the log-likelihood's gradient and Hessian over a set of rows
 *	  (summed across ranks by the caller), and the statistics of the fit as
 *	  JSON for dml_summary.
 *
 * The workers' Newton iterations (workers/exact.c) run in float32 blocks
 * on standardized rows; their result is then polished by full Newton steps
 * computed here in float64 on the raw rows.  Near the optimum Newton
 * converges quadratically, so one or two steps reach the float64 maximum
 * of the likelihood, and the Hessian there gives the standard errors,
 * (X'WX)^-1, as statsmodels' Logit and R's glm report them.
 *
 * beta has p = d + 1 entries: the d slopes on the raw inputs, then the
 * intercept.
 *
 *-------------------------------------------------------------------------
 */
#include "kernels.h"

#include <cblas.h>
#include <stdbool.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LOGIT_BLOCK 256			/* rows per SYRK of the Hessian */

/*
 * e^x for x <= 0 in double, branch-free so that a loop of it vectorizes
 * (libm's exp is a call per row): x = n ln 2 + r with |r| <= ln 2 / 2 (ln 2
 * in two parts, Cephes' split), e^r by its Taylor series to r^13 (the
 * rest is below 5e-18 of it), times 2^n built in the exponent bits; about
 * 1 ulp.  Below -708 it gives e^-708 (it only meets 1 + e here, where the
 * difference is far below 1's ulp), and a NaN stays NaN.
 */
DML_FUSE_MATH static inline double
exp_neg(double x)
{
	double		n,
				r,
				p;
	union
	{
		uint64_t	u;
		double		f;
	}			big,
				two_n;

	x = x < -708.0 ? -708.0 : x;
	/*
	 * round to nearest by adding and taking away 1.5 * 2^52; the sum's low
	 * bits are n itself, which gives 2^n's exponent bits with integer adds
	 * and shifts only (a double-to-integer conversion would not vectorize
	 * below AVX-512)
	 */
	big.f = x * 1.4426950408889634074 + 6755399441055744.0;
	n = big.f - 6755399441055744.0;
	r = x - n * 6.93145751953125e-1;
	r = r - n * 1.42860682030941723212e-6;
	{
		/*
		 * 1/2 + r/3! + ... + r^11/13! by Estrin's scheme: pairs, then pairs
		 * of pairs with r^2, r^4 and r^8, a chain of 4 multiply-adds
		 * instead of 11 (the loops that call this are bound by its latency)
		 */
		double		r2 = r * r,
					r4 = r2 * r2,
					a0 = 1.0 / 2 + r * (1.0 / 6),
					a1 = 1.0 / 24 + r * (1.0 / 120),
					a2 = 1.0 / 720 + r * (1.0 / 5040),
					a3 = 1.0 / 40320 + r * (1.0 / 362880),
					a4 = 1.0 / 3628800 + r * (1.0 / 39916800),
					a5 = 1.0 / 479001600 + r * (1.0 / 6227020800.0),
					b0 = a0 + r2 * a1,
					b1 = a2 + r2 * a3,
					b2 = a4 + r2 * a5;

		p = (b0 + r4 * b1) + (r4 * r4) * b2;
	}
	p = p * r * r + r + 1.0;
	two_n.u = (big.u + 1023) << 52;
	return p * two_n.f;
}

/*
 * log(1 + u) for 0 <= u <= 1 as 2 atanh(s), s = u / (2 + u) <= 1/3: the
 * odd series to s^35 is within double rounding (the next term is below
 * 2e-18 of s), and exact as u -> 0.
 */
DML_FUSE_MATH static inline double
log1p_unit(double u)
{
	double		s = u / (2.0 + u);
	double		s2 = s * s;
	/*
	 * 1 + s2/3 + ... + s2^17/35: the terms from s2^4 on by Estrin's scheme
	 * (see exp_neg), pairs joined with s2^2, s2^4 and s2^12, then the
	 * first four by Horner's, where most of the value is and rounding
	 * counts most (Estrin's throughout went just past the 2 ulp of libm's
	 * that the unit tests allow): a chain of 7 multiply-adds, not 17
	 */
	double		x2 = s2 * s2,
				x4 = x2 * x2,
				a1 = 1.0 / 5 + s2 * (1.0 / 7),
				a2 = 1.0 / 9 + s2 * (1.0 / 11),
				a3 = 1.0 / 13 + s2 * (1.0 / 15),
				a4 = 1.0 / 17 + s2 * (1.0 / 19),
				a5 = 1.0 / 21 + s2 * (1.0 / 23),
				a6 = 1.0 / 25 + s2 * (1.0 / 27),
				a7 = 1.0 / 29 + s2 * (1.0 / 31),
				a8 = 1.0 / 33 + s2 * (1.0 / 35),
				b1 = a2 + x2 * a3,
				b2 = a4 + x2 * a5,
				b3 = a6 + x2 * a7,
				c1 = b2 + x4 * b3,
				t = (b1 + x4 * c1) + (x4 * x4 * x4) * a8,
				p = 1.0 + s2 * (1.0 / 3 + s2 * (a1 + x2 * t));

	return 2.0 * s * p;
}

/*
 * Subnormals flushed to zero (FTZ and DAZ, dml_subnormals_off) around the
 * double kernels below (dml_logit_probs, dml_logit_line, dml_logit_stats).  A row the model is
 * sure of (|z| over about 21) puts log1p_unit's higher powers of s, and
 * the polish's products sqrt(p (1 - p))^2 x^2, in the subnormals, where
 * each vector operation takes a microcode assist: over 128 logits in L1,
 * dml_logit_probs took 2.4 ns a row with |z| below 20 and 6.9 with |z| up
 * to 40.  What changes is a term below 2.2e-308, far under half an ulp of
 * the sums it goes into.  One row's own value changes: past |z| of 707.7
 * s = e / (2 + e) is subnormal (e >= e^-708, exp_neg's floor), so
 * log1p_unit gives 0 where it gave e, and a row there whose label agrees
 * loses 0 where it lost under 4.5e-308.
 */
/*
 * One row of the binary logistic loss at logit z: the probability
 * 1 / (1 + e^-z) and log(1 + e^z) - y z, with e = e^-|z| shared (no
 * overflow either side).
 */
DML_FUSE_MATH static inline double
logit_row(double z, double y, double *pr)
{
	double		e = exp_neg(-fabs(z));
	double		q = 1.0 / (1.0 + e);

	*pr = (z >= 0 ? 1.0 : e) * q;
	return (z > 0 ? z : 0) + log1p_unit(e) - y * z;
}

/*
 * Rows go in groups of LOGIT_ROWS: a group's values are computed in one
 * vectorized loop into arrays, and summed in row order after it (a sum
 * inside the loop would keep it from vectorizing: GCC does not reorder a
 * floating-point sum).
 */
#define LOGIT_ROWS 16

/*
 * dml_logit_probs
 *		For n logits z and labels (0 or 1): pr (n) = the probabilities,
 *		and the sum of the rows' log-losses (0 unless want_loss).  In
 *		double, vectorized (no libm calls); each value within about 2 ulp
 *		of libm's exp and log1p.
 */
DML_VECTORIZE DML_FUSE_MATH double
dml_logit_probs(const double *z, const int *label, int64_t n, double *pr, bool want_loss)
{
	double		sum = 0;
	unsigned int csr = dml_subnormals_off();

	for (int64_t i0 = 0; i0 < n; i0 += LOGIT_ROWS)
	{
		int			R = n - i0 < LOGIT_ROWS ? (int) (n - i0) : LOGIT_ROWS;
		double		loss[LOGIT_ROWS];

		for (int i = 0; i < R; i++)
			loss[i] = logit_row(z[i0 + i], label[i0 + i], &pr[i0 + i]);
		for (int i = 0; i < R; i++)
			sum += loss[i];
	}
	dml_subnormals_back(csr);
	return want_loss ? sum : 0;
}

/* one row of dml_logit_line: its loss and its terms of the two derivatives */
DML_FUSE_MATH static inline void
logit_line_row(double e0, double ed, int label, double t, double *loss, double *d1, double *d2)
{
	double		pr;

	*loss = logit_row(e0 - t * ed, label, &pr);
	*d1 = ed * (pr - label);
	*d2 = ed * ed * (pr * (1 - pr));
}

/*
 * dml_logit_line
 *		Along a line of logits z = e0 - t ed, over every stride-th of n
 *		rows with labels (0 or 1): out[0] = the sum of the log-losses (0
 *		unless want_loss), out[1] = d/dt = -sum ed (p - y) and out[2] =
 *		d2/dt2 = sum ed^2 p (1 - p).  Vectorized as dml_logit_probs.
 *		sq (or NULL): the sum of the squares of d/dt's terms, (ed (p -
 *		y))^2, each rounded, then added in row order (the Newton sample's
 *		noise, workers/exact.c's newton_locate, from the same
 *		probabilities as the first trial's).
 */
DML_VECTORIZE DML_FUSE_MATH void
dml_logit_line(const double *e0, const double *ed, const int *label, int64_t n, int stride,
			   double t, bool want_loss, double out[3], double *sq)
{
	int64_t		rows = n > 0 ? (n - 1) / stride + 1 : 0;
	double		sq_sum = 0;
	unsigned int csr = dml_subnormals_off();

	out[0] = out[1] = out[2] = 0;
	for (int64_t i0 = 0; i0 < rows; i0 += LOGIT_ROWS)
	{
		int			R = rows - i0 < LOGIT_ROWS ? (int) (rows - i0) : LOGIT_ROWS;
		double		loss[LOGIT_ROWS],
					d1[LOGIT_ROWS],
					d2[LOGIT_ROWS],
					d1sq[LOGIT_ROWS];

		if (stride == 1)
			for (int i = 0; i < R; i++)
				logit_line_row(e0[i0 + i], ed[i0 + i], label[i0 + i], t, &loss[i], &d1[i], &d2[i]);
		else
			for (int i = 0; i < R; i++)
			{
				int64_t		j = (i0 + i) * stride;

				logit_line_row(e0[j], ed[j], label[j], t, &loss[i], &d1[i], &d2[i]);
			}
		for (int i = 0; i < R; i++)
		{
			out[0] += loss[i];
			out[1] -= d1[i];
			out[2] += d2[i];
		}
		if (sq)
		{
			for (int i = 0; i < R; i++)
				d1sq[i] = d1[i] * d1[i];
			for (int i = 0; i < R; i++)
				sq_sum += d1sq[i];
		}
	}
	if (!want_loss)
		out[0] = 0;
	if (sq)
		*sq = sq_sum;
	dml_subnormals_back(csr);
}

/* rows' probabilities, losses and sqrt(p (1 - p)) from their logits z */
DML_VECTORIZE DML_FUSE_MATH static void
logit_block(const double *z, const double *y, int B, double *pr, double *loss, double *sw)
{
	for (int i = 0; i < B; i++)
	{
		loss[i] = logit_row(z[i], y[i], &pr[i]);
		sw[i] = sqrt(pr[i] * (1 - pr[i]));
	}
}

/*
 * The Hessian's sum over a block of rows, for up to HESS_TILE_P
 * parameters, on kernels of dml's own (hess.h, for AVX-512 and for AVX2
 * with FMA): OpenBLAS's DSYRK at p = 21 ran far below the machine's peak
 * (its packing copies took as long as its kernel), half of a polish pass.
 * Here H (24 x 24, the rows padded with zeros) is summed in tiles of a
 * vector's width of columns, each tile's rows held in registers while the
 * block's rows stream through: per row, one fused multiply-add for each
 * tile row on or below the diagonal.  Every entry sums its products in
 * row order, so H is the same bit for bit on either instruction set.
 * Other CPUs, wider models, and the builds for one instruction set
 * (DML_NO_CLONES: the unit tests' _sse2 and _avx2) take DSYRK.
 */
#define HESS_TILE_P DML_HESS_TILE_P
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(DML_NO_CLONES)
#define HESS_TILES 1
/* rows of Z a chunk: 24 KB, which stays in L1 while each tile reads it */
#define HESS_CHUNK 128

/* panels a row-block of W holds (panel.h): 128 rows, 13 KB at 24 parameters */
#define PANEL_SUB 8

#define SIMD_ISA 512
#include "simd.h"
#include "hess.h"
#include "panel.h"
#undef SIMD_ISA
#define SIMD_ISA 256
#include "simd.h"
#include "hess.h"
#include "panel.h"
#undef SIMD_ISA

static bool
hess_tiles_ok(int p)
{
	return p <= HESS_TILE_P && dml_simd() >= 256;
}
#else
#define HESS_TILES 0
#endif

/* whether dml_hess_tiles runs on this CPU for p parameters */
bool
dml_hess_tiles_ok(int p)
{
#if HESS_TILES
	return hess_tiles_ok(p);
#else
	return false;
#endif
}

/*
 * The float32 Newton iterations' statistics over B float32 rows x_i of d
 * inputs, ld apart (only the first d of each are read), with their
 * probabilities pr and labels (0 or 1): g (d + 1) += sum_i (pr_i - y_i)
 * [x_i, 1] in double, and the lower triangle of Hs (DML_HESS_TILE_P,
 * DML_HESS_TILE_P) += sum_i pr_i (1 - pr_i) [x_i, 1] [x_i, 1]'.  H's
 * products and their sums over each chunk of 128 rows are float32, the
 * chunks' sums are added in double: about half the time of the float64
 * tiles' (a float vector has twice the lanes), for a Hessian that only
 * steers (the float32 iterations, and the float64 polish's first step).
 * next (or NULL): the first nnext rows, ld apart, of the caller's next
 * call, whose lines are asked for into L2 as this call's rows are read:
 * a pass that goes through its rows in order then finds each chunk there
 * (in a /tmp loop over 1,000,000 x 20, the statistics pass with the
 * step's logits took 26-33 ms with them, 34-42 without).  Only where
 * dml_hess_tiles_ok(d + 1) said so.
 */
void
dml_logit_stats32(const float *X, int B, int d, size_t ld, const double *pr, const int *label,
				  double *g, double *Hs, const float *next, int nnext)
{
#if HESS_TILES
	/*
	 * Subnormals flushed to zero (FTZ and DAZ) in this kernel only: a row
	 * the model is sure of (p (1 - p) below about 1e-38, |logit| over 87)
	 * makes float products in the subnormals, where an operation can take
	 * a microcode assist (as Adam's did, kernels/optim.c).  What changes
	 * is a product below 1.2e-38 in H, far under the ridge of 1e-10 n
	 * train_newton adds, or an input below it in the gradient.
	 */
	unsigned int csr = dml_subnormals_off();

	SIMD_DISPATCH(logit_stats32, X, B, d, ld, pr, label, g, Hs, next, nnext);
	dml_subnormals_back(csr);
#endif
}

/*
 * Row panels (panel.h): groups of DML_PANEL consecutive rows of d inputs
 * stored a feature at a time.  dml_panel_layout turns the G groups at X
 * (16 G rows of d <= 23 inputs) from rows into panels (to_panels) or
 * back, in place, a group at a time; only where dml_hess_tiles_ok(d + 1).
 */
#if HESS_TILES
static inline __attribute__((always_inline)) void
panel_layout_d(float *X, int64_t G, const int d, bool to_panels)
{
	float		t[DML_PANEL * DML_HESS_TILE_P];

	for (int64_t g = 0; g < G; g++)
	{
		float	   *x = X + (size_t) g * d * DML_PANEL;

		memcpy(t, x, sizeof(float) * d * DML_PANEL);
		if (to_panels)
			for (int c = 0; c < d; c++)
				for (int l = 0; l < DML_PANEL; l++)
					x[c * DML_PANEL + l] = t[l * d + c];
		else
			for (int l = 0; l < DML_PANEL; l++)
				for (int c = 0; c < d; c++)
					x[l * d + c] = t[c * DML_PANEL + l];
	}
}

#endif

void
dml_panel_layout(float *X, int64_t G, int d, bool to_panels)
{
#if HESS_TILES
	/*
	 * each width its own loops, whose constant strides GCC vectorizes:
	 * 13 ms for 1,000,000 x 20 into panels where one loop for every
	 * width took 18 (d = 0: nothing to move)
	 */
	switch (d + 1)
	{
#define PANEL_LAYOUT_CASE(P) case P: panel_layout_d(X, G, P - 1, to_panels); break;
			HESS_EACH_P(PANEL_LAYOUT_CASE)
#undef PANEL_LAYOUT_CASE
		case DML_HESS_TILE_P:
			panel_layout_d(X, G, DML_HESS_TILE_P - 1, to_panels);
			break;
	}
#endif
}

/* floats of the lanes dml_panel_stats sums into, for p parameters */
size_t
dml_panel_lanes(int p)
{
	return ((size_t) p * (p + 1) / 2 + p) * DML_PANEL;
}

/*
 * out (16 G) = the logits v (d + 1: the slopes, then the intercept) of the
 * rows of G panels, in float32 (the intercept first, then each input's
 * multiply-add in order); only where dml_hess_tiles_ok(d + 1)
 */
void
dml_panel_dot(float *out, const float *Xp, int64_t G, int d, const float *v)
{
#if HESS_TILES
	SIMD_DISPATCH(panel_dot, out, Xp, G, d, v);
#endif
}

/*
 * The float32 Newton statistics over G panels of d inputs, with their rows'
 * probabilities pr and labels (16 G each): lanes (dml_panel_lanes(d + 1),
 * float, zero at first and after each dml_panel_flush) += each lane's sums
 * of w [x, 1] [x, 1]' (the lower triangle, row by row) and of (p - y) [x,
 * 1], w = p (1 - p), in float32 products and sums.  Flush at least every
 * 2,048 rows (128 products a lane).  next (or NULL): the gnext panels the
 * caller reads next, whose lines are asked for as the blocks run (panel.h).
 * Only where dml_hess_tiles_ok(d + 1).
 */
void
dml_panel_stats(const float *Xp, int G, int d, const double *pr, const int *label, float *lanes,
				const float *next, int gnext)
{
#if HESS_TILES
	/* subnormals flushed, as in dml_logit_stats32 */
	unsigned int csr = dml_subnormals_off();

	SIMD_DISPATCH(panel_stats, Xp, G, d, pr, label, lanes, next, next ? gnext : 0);
	dml_subnormals_back(csr);
#endif
}

/*
 * dlanes (double) += lanes (float), lane by lane; lanes = 0.  Vectorized
 * (the conversion and the add are exact and rounded alike in any width):
 * the baseline build's loop took 0.25 ms of a 2-worker Newton pass over
 * 500,000 rows a rank (244 flushes of 4,032 lanes at p = 21).
 */
DML_VECTORIZE void
dml_panel_flush(float *restrict lanes, double *restrict dlanes, int p)
{
	size_t		n = dml_panel_lanes(p);

	for (size_t i = 0; i < n; i++)
	{
		dlanes[i] += lanes[i];
		lanes[i] = 0;
	}
}

/*
 * dml_cols_dot_d
 *		out[i] = v[d] + sum_c v[c] x_c[i] for n rows of d float32 columns
 *		ld floats apart (column c at X + c ld), in double: each row's
 *		terms added in column order, each product rounded before its add
 *		(no fused multiply-add), so every CPU gets the bits of the scalar
 *		loop.  Vectorized across rows, COLS_DOT_RUN at a time (their sums
 *		stay in L1).  The Newton step's logits on the sample
 *		(workers/exact.c's newton_sample): in the baseline build's scalar
 *		loop 0.3 ms (warm) to 0.6 ms (cold) a rank for 31,250 rows of 20.
 */
#define COLS_DOT_RUN 512

DML_VECTORIZE __attribute__((optimize("fp-contract=off"))) void
dml_cols_dot_d(double *restrict out, const float *restrict X, size_t ld, int64_t n, int d,
			   const double *restrict v)
{
	for (int64_t i0 = 0; i0 < n; i0 += COLS_DOT_RUN)
	{
		int			R = n - i0 < COLS_DOT_RUN ? (int) (n - i0) : COLS_DOT_RUN;
		double	   *o = out + i0;

		for (int i = 0; i < R; i++)
			o[i] = v[d];
		for (int c = 0; c < d; c++)
		{
			const float *xc = X + (size_t) c * ld + i0;
			double		a = v[c];

			for (int i = 0; i < R; i++)
				o[i] += a * xc[i];
		}
	}
}

/*
 * The flushed lanes' sums, each entry's 16 lanes added in lane order: the
 * lower triangle of Hs (DML_HESS_TILE_P, DML_HESS_TILE_P) += the Hessian's
 * (the triangle's rows 0 .. p - 1), g (p) += the gradient (its row p)
 */
void
dml_panel_sum(const double *dlanes, int p, double *g, double *Hs)
{
	for (int i = 0; i <= p; i++)
		for (int k = 0; k < (i < p ? i + 1 : p); k++)
		{
			const double *l = dlanes + ((size_t) i * (i + 1) / 2 + k) * DML_PANEL;
			double		s = 0;

			for (int j = 0; j < DML_PANEL; j++)
				s += l[j];
			if (i < p)
				Hs[i * DML_HESS_TILE_P + k] += s;
			else
				g[k] += s;
		}
}

/*
 * Hs (DML_HESS_TILE_P, DML_HESS_TILE_P) += Z' Z over the m rows of Z
 * (m, DML_HESS_TILE_P), its columns past the model's p zero; only where
 * dml_hess_tiles_ok(p) said so
 */
void
dml_hess_tiles(double *Hs, const double *Z, int m, int p)
{
#if HESS_TILES
	SIMD_DISPATCH(hess_tiles, Hs, Z, m, p);
#endif
}

/*
 * dml_logit_stats
 *		Over the rows i < n of X (n, d) with y (n) in {0, 1}, skipping rows
 *		where skip[i] (may be NULL): g (p) += the gradient and H (p, p) +=
 *		the Hessian (full, symmetric) of the negative log-likelihood at
 *		beta.  Returns the negative log-likelihood's sum.  Per block of
 *		LOGIT_BLOCK rows: the logits (DGEMV), their probabilities and losses
 *		in one vectorized pass (logit_row, no libm calls), then the rows
 *		[x, 1] scaled by sqrt(p (1 - p)) summed into the Hessian (by
 *		dml_hess_tiles, else one DSYRK).  The sums run in row order.  With
 *		H NULL only the gradient and the sum, the same bits as with H.
 *		Subnormals are flushed to zero meanwhile (see dml_logit_probs).
 */
double
dml_logit_stats(double *g, double *H, const double *X, const double *y,
				const unsigned char *skip, int64_t n, int d, const double *beta)
{
	double		nll = 0;
	DmlSyrkRows acc;			/* DSYRK: rows [x, 1] scaled by sqrt(p (1 - p)) */
	double	   *Z = NULL,		/* tiles: the block's scaled rows (LOGIT_BLOCK, 24) */
			   *Hs = NULL;		/* tiles: the sum (24, 24) */
	bool		tiles = false,	/* the tiles sum the Hessian */
				by_dgemv = false;	/* the gradient by DGEMV, as beside the tiles */
	double		eta[LOGIT_BLOCK],
				pr[LOGIT_BLOCK],
				loss[LOGIT_BLOCK],
				sw[LOGIT_BLOCK],
				rs[LOGIT_BLOCK];	/* by_dgemv: residuals, 0 on skipped rows */
	unsigned int csr;

#if HESS_TILES
	by_dgemv = hess_tiles_ok(d + 1);
#endif
	tiles = by_dgemv && H != NULL;
	if (tiles)
	{
		Z = calloc((size_t) LOGIT_BLOCK * HESS_TILE_P, sizeof(double));
		Hs = calloc((size_t) HESS_TILE_P * HESS_TILE_P, sizeof(double));
		if (!Z || !Hs)
		{
			free(Z);
			free(Hs);
			return NAN;
		}
	}
	else if (H && dml_syrk_begin(&acc, d + 1) != DML_OK)
		return NAN;
	csr = dml_subnormals_off();
	for (int64_t i0 = 0; i0 < n; i0 += LOGIT_BLOCK)
	{
		int			B = n - i0 < LOGIT_BLOCK ? (int) (n - i0) : LOGIT_BLOCK;
		int			m = 0;		/* rows kept (the tiles' rows in Z) */

		/*
		 * the block's logits by one DGEMV (a dot product a row would be a
		 * chain of dependent adds), then its probabilities and losses in
		 * one vectorized pass
		 */
		for (int b = 0; b < B; b++)
			eta[b] = beta[d];
		cblas_dgemv(CblasRowMajor, CblasNoTrans, B, d, 1.0, X + (size_t) i0 * d, d, beta, 1,
					1.0, eta, 1);
		logit_block(eta, y + i0, B, pr, loss, sw);
		for (int b = 0; b < B; b++)
		{
			const double *x = X + (size_t) (i0 + b) * d;
			double		r = pr[b] - y[i0 + b];
			double	   *z;

			rs[b] = 0;
			if (skip && skip[i0 + b])
				continue;
			nll += loss[b];
			if (by_dgemv)
			{
				/*
				 * the gradient by one DGEMV below, skipped rows weighted
				 * 0 (the loader keeps finite rows only)
				 */
				rs[b] = r;
			}
			else
			{
				for (int c = 0; c < d; c++)
					g[c] += r * x[c];
				g[d] += r;
			}
			if (H)
			{
				/* the row [x, 1] scaled by sqrt(p (1 - p)), into Z or the DSYRK's rows */
				z = tiles ? Z + (size_t) m * HESS_TILE_P : dml_syrk_row(&acc);
				for (int c = 0; c < d; c++)
					z[c] = sw[b] * x[c];
				z[d] = sw[b];
			}
			m++;
		}
		if (by_dgemv && m > 0)
		{
			if (tiles)
				dml_hess_tiles(Hs, Z, m, d + 1);
			cblas_dgemv(CblasRowMajor, CblasTrans, B, d, 1.0, X + (size_t) i0 * d, d, rs, 1,
						1.0, g, 1);
			for (int b = 0; b < B; b++)
				g[d] += rs[b];
		}
	}
	dml_subnormals_back(csr);
	if (!H)
		return nll;
	if (!tiles)
	{
		dml_syrk_end(&acc, H);
		return nll;
	}
	for (int c = 0; c <= d; c++)
		for (int k = 0; k <= d; k++)
			H[(size_t) c * (d + 1) + k] += Hs[(size_t) c * HESS_TILE_P + k];
	free(Z);
	free(Hs);
	return nll;
}

/*
 * dml_logit_json
 *		The statistics of a logistic fit of n rows: terms (d input names)
 *		and coefficients beta (p, intercept last; written intercept first),
 *		standard errors from cov (p, p) = H^-1 (NULL when penalized: null),
 *		or a robust covariance named by cov_type (NULL: H^-1's),
 *		the log-likelihood llf and the intercept-only model's llnull, and
 *		from them McFadden's pseudo R^2 (reported as r2), AIC and BIC with
 *		p parameters, as statsmodels' Logit defines them.  Returns the
 *		length needed, terminator included.
 */
size_t
dml_logit_json(const double *beta, const double *cov, const char *cov_type, int d, double n,
			   double llf, double llnull, const char *const *terms, char *buf, size_t len)
{
	size_t		pos = 0;
	int			p = d + 1;

	if (len > 0)
		buf[0] = '\0';
	dml_json_coefficients(buf, len, &pos, "logit", "newton", terms, d, beta, cov, 1.0);
	if (cov && cov_type)
		dml_json_add(buf, len, &pos, ", \"cov_type\": \"%s\"", cov_type);
	dml_json_add(buf, len, &pos, ", \"n\": %.0f, \"rank\": %d, \"df_model\": %d, \"df_resid\": %.0f",
		 n, p, p - 1, n - p);
	dml_json_num(buf, len, &pos, ", \"r2\": ", 1 - llf / llnull);
	dml_json_num(buf, len, &pos, ", \"log_likelihood\": ", llf);
	dml_json_num(buf, len, &pos, ", \"log_likelihood_null\": ", llnull);
	dml_json_num(buf, len, &pos, ", \"aic\": ", -2 * llf + 2 * p);
	dml_json_num(buf, len, &pos, ", \"bic\": ", -2 * llf + log(n) * p);
	dml_json_add(buf, len, &pos, "}");
	return pos + 1;
}

/*
 * dml_mnlogit_stats
 *		Multinomial logistic regression over the rows i < n of X (n, d)
 *		with labels label[i] in 0 .. K-1, skipping rows where skip[i]:
 *		beta (K-1, p) holds the free classes' coefficients (class K-1 is
 *		the reference, its logit 0), each block [slopes, intercept].  g (q)
 *		+= the gradient and H (q, q) += the Hessian (full) of the negative
 *		log-likelihood, q = (K-1) p; returns its sum.  Per block of rows
 *		and pair of classes k >= l, Z' diag(p_k (1{k=l} - p_l)) Z by one
 *		DGEMM; everything in float64.
 */
double
dml_mnlogit_stats(double *g, double *H, const double *X, const int *label,
				  const unsigned char *skip, int64_t n, int d, int K, const double *beta)
{
	int			p = d + 1,
				Kf = K - 1;
	size_t		q = (size_t) Kf * p;
	double		nll = 0;
	double	   *Z = malloc(sizeof(double) * LOGIT_BLOCK * p);	/* rows [x, 1] */
	double	   *W = malloc(sizeof(double) * LOGIT_BLOCK * p);	/* weighted rows */
	double	   *P = malloc(sizeof(double) * LOGIT_BLOCK * Kf);	/* probabilities */
	double	   *Hs = malloc(sizeof(double) * p * p);
	double	   *e = malloc(sizeof(double) * (Kf ? Kf : 1));
	int			B = 0;

	if (!Z || !W || !P || !Hs || !e)
	{
		free(Z);
		free(W);
		free(P);
		free(Hs);
		free(e);
		return NAN;
	}
	for (int64_t i = 0; i <= n; i++)
	{
		const double *x = X + (size_t) i * d;
		double		mx = 0,
					den;
		double	   *z,
				   *pr;

		if (B == LOGIT_BLOCK || (i == n && B > 0))
		{
			for (int k = 0; k < Kf; k++)
				for (int l = 0; l <= k; l++)
				{
					for (int r = 0; r < B; r++)
					{
						const double *pp = P + (size_t) r * Kf;
						double		a = pp[k] * ((k == l) - pp[l]);

						for (int c = 0; c < p; c++)
							W[(size_t) r * p + c] = a * Z[(size_t) r * p + c];
					}
					cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, p, p, B, 1.0, Z, p,
								W, p, 0.0, Hs, p);
					for (int a = 0; a < p; a++)
						for (int b = 0; b < p; b++)
						{
							H[((size_t) k * p + a) * q + (size_t) l * p + b] += Hs[(size_t) a * p + b];
							if (k != l)
								H[((size_t) l * p + b) * q + (size_t) k * p + a] += Hs[(size_t) a * p + b];
						}
				}
			B = 0;
		}
		if (i == n)
			break;
		if (skip && skip[i])
			continue;
		z = Z + (size_t) B * p;
		pr = P + (size_t) B * Kf;
		memcpy(z, x, sizeof(double) * d);
		z[d] = 1.0;
		for (int k = 0; k < Kf; k++)
		{
			const double *b = beta + (size_t) k * p;
			double		eta = b[d];

			for (int c = 0; c < d; c++)
				eta += b[c] * x[c];
			e[k] = eta;
			mx = eta > mx ? eta : mx;
		}
		den = exp(-mx);			/* the reference class */
		for (int k = 0; k < Kf; k++)
			den += (pr[k] = exp(e[k] - mx));
		for (int k = 0; k < Kf; k++)
		{
			double		r;

			pr[k] /= den;
			r = pr[k] - (label[i] == k);
			for (int c = 0; c < p; c++)
				g[(size_t) k * p + c] += r * z[c];
		}
		nll += log(den) + mx - (label[i] < Kf ? e[label[i]] : 0);
		B++;
	}
	free(Z);
	free(W);
	free(P);
	free(Hs);
	free(e);
	return nll;
}

/*
 * dml_mnlogit_json
 *		The statistics of a multinomial fit of n rows, as statsmodels'
 *		MNLogit reports them: the first class (classes[0]) is the
 *		reference, and each other class j has one equation of p
 *		coefficients, c_j = b_j - b_0, where b (K-1, p) are the fitted
 *		coefficients against the last class (b_{K-1} = 0); cov (q, q) is
 *		b's covariance H^-1 (NULL: standard errors null), turned into c's
 *		by the same differences.  Coefficients and standard errors are
 *		written equation by equation, the intercept first in each; llnull
 *		is the intercept-only model's log-likelihood.  Returns the length
 *		needed, terminator included.
 */
size_t
dml_mnlogit_json(const double *b, const double *cov, int d, int K, double n, double llf,
				 double llnull, const char *const *terms, const char *const *classes,
				 char *buf, size_t len)
{
	size_t		pos = 0;
	int			p = d + 1,
				Kf = K - 1;
	size_t		q = (size_t) Kf * p;
	int			nparams = Kf * p;

	/* b_k's element a (zero for the last class), and the covariance of two such */
#define MN_B(k, a) ((k) < Kf ? b[(size_t) (k) * p + (a)] : 0.0)
#define MN_COV(k, a, l, c) ((k) < Kf && (l) < Kf ? \
	cov[((size_t) (k) * p + (a)) * q + (size_t) (l) * p + (c)] : 0.0)

	if (len > 0)
		buf[0] = '\0';
	dml_json_add(buf, len, &pos, "{\"method\": \"mnlogit\", \"solver\": \"newton\", \"terms\": [");
	dml_json_str(buf, len, &pos, "", "(Intercept)");
	for (int c = 0; c < d; c++)
		dml_json_str(buf, len, &pos, ", ", terms[c]);
	dml_json_add(buf, len, &pos, "], \"reference\": ");
	dml_json_str(buf, len, &pos, "", classes[0]);
	dml_json_add(buf, len, &pos, ", \"classes\": [");
	for (int j = 1; j < K; j++)
		dml_json_str(buf, len, &pos, j > 1 ? ", " : "", classes[j]);
	dml_json_add(buf, len, &pos, "], \"coefficients\": [");
	for (int j = 1; j < K; j++)
		for (int k = 0; k <= d; k++)
		{
			int			a = k == 0 ? d : k - 1;

			dml_json_num(buf, len, &pos, j > 1 || k ? ", " : "", MN_B(j, a) - MN_B(0, a));
		}
	dml_json_add(buf, len, &pos, "], \"std_errors\": [");
	for (int j = 1; j < K; j++)
		for (int k = 0; k <= d; k++)
		{
			int			a = k == 0 ? d : k - 1;
			double		v = cov ? MN_COV(j, a, j, a) - 2 * MN_COV(j, a, 0, a) + MN_COV(0, a, 0, a) : NAN;

			dml_json_num(buf, len, &pos, j > 1 || k ? ", " : "", v >= 0 ? sqrt(v) : NAN);
		}
#undef MN_B
#undef MN_COV
	dml_json_add(buf, len, &pos, "], \"n\": %.0f, \"rank\": %d, \"df_model\": %d, \"df_resid\": %.0f",
				 n, nparams, nparams - Kf, n - nparams);
	dml_json_num(buf, len, &pos, ", \"r2\": ", 1 - llf / llnull);
	dml_json_num(buf, len, &pos, ", \"log_likelihood\": ", llf);
	dml_json_num(buf, len, &pos, ", \"log_likelihood_null\": ", llnull);
	dml_json_num(buf, len, &pos, ", \"aic\": ", -2 * llf + 2 * nparams);
	dml_json_num(buf, len, &pos, ", \"bic\": ", -2 * llf + log(n) * nparams);
	dml_json_add(buf, len, &pos, "}");
	return pos + 1;
}
