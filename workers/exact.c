/*-------------------------------------------------------------------------
 *
 * exact.c
 *	  Exact solvers: linear regression by a distributed QR factorization
 *	  (TSQR) and logistic/softmax regression by Newton's method (IRLS).
 *
 * Least squares reads the raw float64 rows (load.c keeps them for this
 * job), each rank factors its own, the R factors meet up a reduction tree
 * and every rank solves the same triangular system (kernels/lsq.c); the
 * condition number is the data's, not its square as with the normal
 * equations.  Newton sums per-rank statistics (the gradient in double and
 * the Hessian in float32 blocks summed in double), one all-reduce merges
 * them, and every rank solves the same small system with a Cholesky
 * factorization, so the replicas agree bit for bit; its inputs are
 * standardized (prepare.c), which keeps the systems well conditioned.  An
 * intercept column of ones is appended.  weight_decay adds N *
 * weight_decay / 2 times the squared standardized weights (not the
 * intercept's), the same penalty the gradient optimizers apply.
 *
 * A slice spilled to disk (stream.c) is read block by block in row order
 * wherever the rows in memory would be read: the QR, each Newton
 * iteration's statistics and direction passes (newton_pass cuts the same
 * chunks of training rows either way, so the sums are the same), the
 * float64 polish and the robust covariance's meat.  Newton's per-row
 * logits (eta, eta_d: 16 (K - 1) bytes a training row) and labels stay in
 * memory, within what the budget leaves for rows.
 *
 * A Newton iteration over rows in memory reads them once (train_newton):
 * the statistics pass, which also makes the logits of the step the
 * iteration before located on a sample of the rows, moves eta by it and
 * measures the loss there.  Spilled slices, small ones and an iteration
 * limit's last iteration read them twice: the statistics pass, and the
 * direction's logits pass, which for binary models also sums the line
 * search's first trial (the full step) while each block's logits are in
 * cache; only a search that goes past its first trial reads eta and eta_d
 * again.
 *
 *-------------------------------------------------------------------------
 */
#include <cblas.h>
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "protocol.h"
#include "worker.h"

#define CHUNK 1024				/* rows factored at a time, at least */

/*
 * rows factored at a time: a QR of [R; block] costs (q + block) q^2, so at
 * least 2q rows keep R's share small
 */
static int
chunk_size(int q)
{
	return CHUNK > 2 * q ? CHUNK : 2 * q;
}

/* Z (B, d + 2) = [x, 1, y] raw float64 rows, for the training rows from *pos */
static int
chunk_rows(const Dataset *ds, int64_t *pos, double *Z)
{
	int			B = 0;
	int			d = ds->d;
	int			cap = chunk_size(d + 2);

	while (*pos < ds->n && B < cap)
	{
		int64_t		i = (*pos)++;
		double	   *z = Z + (size_t) B * (d + 2);

		if (ds->val[i])
			continue;
		memcpy(z, ds->Xd + (size_t) i * d, sizeof(double) * d);
		z[d] = 1.0;
		z[d + 1] = ds->yd[i];
		B++;
	}
	return B;
}

typedef struct ExactScan
{
	double	   *R;
	double	   *Z;
	int			q;
	double		n;
} ExactScan;

/* a spilled block's training rows stacked into R, a chunk at a time */
static void
exact_block(const Dataset *v, void *arg)
{
	ExactScan  *es = arg;
	int64_t		pos = 0;
	int			B;

	while ((B = chunk_rows(v, &pos, es->Z)) > 0)
	{
		if (dml_qr_stack(es->R, es->Z, B, es->q) != DML_OK)
			worker_fail("out of memory in the QR factorization");
		es->n += B;
	}
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
		const DmlFeature *ft = &spec->features[f];

		if (ft->kind != DML_FEAT_CAT)
			continue;
		for (int k = 0; k < Kf; k++)
			for (int c = ft->offset; c < ft->offset + ft->width; c++)
			{
				size_t		i = (size_t) k * p + c;

				A[i * q + i] += 1e-6 * n;
			}
	}
}

/*
 * add_onehot_ridge on the raw scale: the same 1e-6 n on a one-hot input's
 * standardized weight theta = beta / scale is 1e-6 n / scale^2 on beta.  A
 * is (p, p), one block.
 */
static void
add_onehot_ridge_scaled(double *A, int p, const WorkerSpec *spec, double n, const double *scale)
{
	for (int f = 0; f < spec->nfeatures; f++)
	{
		const DmlFeature *ft = &spec->features[f];

		if (ft->kind == DML_FEAT_CAT)
			for (int c = ft->offset; c < ft->offset + ft->width; c++)
				A[(size_t) c * p + c] += 1e-6 * n / (scale[c] * scale[c]);
	}
}

/* one epoch-like progress message for a solver iteration */
static void
report(int iter, double loss, double rows, double secs, double bytes, double across)
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
	p.bytes_across = across;
	if (worker_rank == 0)
		control_send(DML_MSG_PROGRESS, &p, sizeof(p), NULL, 0);
}

/*
 * TSQR's reduction: a binomial tree over the data ranks, each R (q, q)
 * stacked on its partner's at every level (rank r + s sends to r when r is
 * a multiple of 2s), then rank 0's R broadcast, so every rank holds the
 * same factor.  log2(world) steps of one q x q message.
 */
static void
tsqr_reduce(double *R, int q)
{
	MPI_Comm	comm = *(MPI_Comm *) comm_data_handle();
	size_t		qq = (size_t) q * q;
	double	   *Rb = malloc(sizeof(double) * qq);

	if (!Rb)
		worker_fail("out of memory for a %d x %d factor", q, q);
	for (int s = 1; s < worker_world; s <<= 1)
	{
		if (worker_rank & s)
		{
			MPI_Send(R, (int) qq, MPI_DOUBLE, worker_rank - s, 0, comm);
			comm_count_p2p(sizeof(double) * (double) qq, worker_rank - s);
			break;
		}
		if (worker_rank + s < worker_world)
		{
			MPI_Recv(Rb, (int) qq, MPI_DOUBLE, worker_rank + s, 0, comm, MPI_STATUS_IGNORE);
			if (dml_qr_stack(R, Rb, q, q) != DML_OK)
				worker_fail("out of memory in the QR factorization");
		}
	}
	comm_bcast(R, sizeof(double) * qq, 0);
	free(Rb);
}

/* the name of input c for the statistics: the feature, its element, or its level */
static char *
input_name(const WorkerSpec *spec, int c)
{
	char		buf[512];

	for (int f = 0; f < spec->nfeatures; f++)
	{
		const DmlFeature *ft = &spec->features[f];

		if (c < ft->offset || c >= ft->offset + ft->width)
			continue;
		if (ft->kind == DML_FEAT_NUM)
			return strdup(ft->name);
		if (ft->kind == DML_FEAT_VEC)
			snprintf(buf, sizeof(buf), "%s[%d]", ft->name, c - ft->offset + 1);
		else
		{
			snprintf(buf, sizeof(buf), "%s", ft->name);
			for (int l = 0; l < ft->nlevels; l++)
				if (ft->level_slot[l] == c - ft->offset)
					snprintf(buf, sizeof(buf), "%s=%s", ft->name, ft->levels[l]);
		}
		return strdup(buf);
	}
	return strdup("?");
}

typedef struct MeatScan
{
	const double *b;
	int			logistic;
	double	   *M;				/* (p, p) and the row count after it */
} MeatScan;

/* the meat of the sandwich over rows in memory or a spilled block's */
static void
meat_rows(const Dataset *ds, void *arg)
{
	MeatScan   *ms = arg;
	const double *b = ms->b;
	int			d = ds->d,
				p = d + 1;
	double	   *r = malloc(sizeof(double) * (ds->n ? ds->n : 1));

	if (!r)
		worker_fail("out of memory for a %d x %d covariance", p, p);
	for (int64_t i = 0; i < ds->n; i++)
	{
		const double *x = ds->Xd + (size_t) i * d;
		double		eta = b[d];

		for (int c = 0; c < d; c++)
			eta += b[c] * x[c];
		if (ms->logistic)
			r[i] = ds->y[i] - (eta >= 0 ? 1.0 / (1.0 + exp(-eta)) : exp(eta) / (1.0 + exp(eta)));
		else
			r[i] = ds->yd[i] - eta;
		ms->M[(size_t) p * p] += ds->val[i] ? 0 : 1;
	}
	if (dml_hc_meat(ms->M, ds->Xd, r, ds->val, ds->n, d) != DML_OK)
		worker_fail("out of memory for a %d x %d covariance", p, p);
	free(r);
}

/*
 * robust_cov
 *		The HC0 or HC1 covariance (kernels/robust.c) of a fit b (d + 1, the
 *		intercept last) with model-based covariance C (d + 1, d + 1) and
 *		rank parameters: one more pass over this rank's float64 rows (or its
 *		spill's blocks) for the residuals' meat, all-reduced.  y - fitted
 *		for least squares; for logistic regression (y the 0/1 labels) y - p,
 *		the score's factor.  *V gets a malloc'd (d + 1, d + 1) matrix.
 */
static void
robust_cov(const Dataset *ds, const WorkerSpec *spec, const double *b, const double *C,
		   int rank, int logistic, double **V)
{
	int			d = ds->d,
				p = d + 1;
	double	   *M = calloc((size_t) p * p + 1, sizeof(double));
	double		n = 0;
	MeatScan	ms = {b, logistic, M};

	*V = malloc(sizeof(double) * p * p);
	if (!M || !*V)
		worker_fail("out of memory for a %d x %d covariance", p, p);
	if (ds->spill)
		stream_scan(ds->spill, 0, meat_rows, &ms);
	meat_rows(ds, &ms);
	comm_allreduce_double(M, (size_t) p * p + 1);
	n = M[(size_t) p * p];
	/* HC1: n / (n - rank), statsmodels' small-sample factor */
	if (dml_sandwich(*V, C, M, p, spec->cov_type == DML_COV_HC1 && n > rank ? n / (n - rank) : 1.0) != DML_OK)
		worker_fail("out of memory for a %d x %d covariance", p, p);
	free(M);
}

/*
 * train_exact
 *		Least squares (ridge with weight_decay) by TSQR: each rank factors
 *		its float64 rows [x, 1, y] block by block, the R factors meet up a
 *		reduction tree, and every rank solves the same small triangular
 *		system (kernels/lsq.c), with the rank-revealing step: collinear
 *		features are named, or solved in the minimum-norm sense.
 */
void
train_exact(Dataset *ds, const WorkerSpec *spec, TrainResult *res)
{
	DmlModel   *m = &res->model;
	int			d = ds->d;
	int			q = d + 2;
	double	   *R = calloc((size_t) q * q, sizeof(double));
	double	   *Z = malloc(sizeof(double) * chunk_size(q) * q);
	double	   *penalty = calloc(d ? d : 1, sizeof(double));
	double		t0 = dml_clock_seconds();
	double		bytes0 = comm_job_bytes(),
				across0 = comm_job_bytes_across();
	double		n = 0;
	int64_t		pos = 0;
	int			B;
	DmlLsqFit	fit;
	DmlStatus	st;

	if (!R || !Z || !penalty || !ds->wide)
		worker_fail("out of memory for a %d x %d factor", q, q);
	if (ds->spill)
	{
		/* a spilled slice: the same factorization, block by block */
		ExactScan	es = {R, Z, q, 0};

		stream_scan(ds->spill, 0, exact_block, &es);
		n = es.n;
	}
	while ((B = chunk_rows(ds, &pos, Z)) > 0)
	{
		if (dml_qr_stack(R, Z, B, q) != DML_OK)
			worker_fail("out of memory in the QR factorization");
		n += B;
	}
	comm_allreduce_double(&n, 1);
	tsqr_reduce(R, q);

	if (dml_lsq_moments(&fit, R, d, n) != DML_OK)
		worker_fail("out of memory for the fit");
	/*
	 * ridge on every input; a tiny one on one-hot levels (the dummy-variable
	 * trap); a constant column is standardized to zero, as the other
	 * solvers do, and a ridge row holds its coefficient at 0
	 */
	for (int c = 0; c < d; c++)
	{
		penalty[c] = n * spec->weight_decay / 2;
		if (fit.sd[c] <= 1e-12 * fmax(1.0, fabs(fit.mu[c])))
		{
			fit.sd[c] = 0;
			penalty[c] = 1.0;
		}
	}
	for (int f = 0; f < spec->nfeatures; f++)
		if (spec->features[f].kind == DML_FEAT_CAT)
			for (int c = spec->features[f].offset;
				 c < spec->features[f].offset + spec->features[f].width; c++)
				penalty[c] += 1e-6 * n;
	st = dml_lsq_fit(&fit, R, penalty, spec->rank_min_norm);
	if (st == DML_ERR_SINGULAR && fit.ls.ndropped > 0)
	{
		char		names[1024] = "";
		size_t		len = 0;

		for (int k = 0; k < fit.ls.ndropped && len < sizeof(names) - 1; k++)
		{
			int			j = fit.ls.dropped[k];
			char	   *nm = j < d ? input_name(spec, j) : strdup("(Intercept)");

			len += snprintf(names + len, sizeof(names) - len, "%s\"%s\"", k ? ", " : "", nm);
			free(nm);
		}
		worker_user_error("22000|Remove %s, add weight_decay, or pass options => '{\"rank_deficient\": \"min_norm\"}' for the minimum-norm solution.|"
						  "the features are collinear: %s %s a linear combination of the others",
						  fit.ls.ndropped == 1 ? "it" : "them", names,
						  fit.ls.ndropped == 1 ? "is" : "are");
	}
	if (st != DML_OK)
		worker_fail("least-squares solve failed: %s", dml_status_string(st));
	if (spec->cov_type != DML_COV_NONROBUST && !fit.penalized)
		robust_cov(ds, spec, fit.ls.coef, fit.ls.cov, fit.ls.rank, 0, &fit.robust);
	fit.cov_type = dml_job_name(DML_NAMES_COV, spec->cov_type);
	if (dml_lsq_fit_model(&fit, m) != DML_OK)
		worker_fail("out of memory for the model");
	{
		char	  **terms = malloc(sizeof(char *) * (d ? d : 1));
		size_t		len;

		for (int c = 0; c < d; c++)
			terms[c] = input_name(spec, c);
		len = dml_lsq_fit_json(&fit, (const char *const *) terms, NULL, 0);
		res->statistics_json = malloc(len);
		if (!res->statistics_json)
			worker_fail("out of memory");
		dml_lsq_fit_json(&fit, (const char *const *) terms, res->statistics_json, len);
		for (int c = 0; c < d; c++)
			free(terms[c]);
		free(terms);
	}

	res->epochs_run = 1;
	res->stopped = DML_STOP_CONVERGED;
	res->final_loss = fit.rss / n;
	res->train_seconds = dml_clock_seconds() - t0;
	res->rows_per_second = res->train_seconds > 0 ? n / res->train_seconds : 0;
	report(1, res->final_loss, n, res->train_seconds, comm_job_bytes() - bytes0,
		   comm_job_bytes_across() - across0);
	dml_lsq_fit_free(&fit);
	free(R);
	free(Z);
	free(penalty);
}

/* ---------------------------------------------------------------------
 * Newton's method for logistic and softmax regression
 *
 * Each iteration costs one statistics pass over the rows (gradient and
 * Hessian at theta, one all-reduce); the step length along the Newton
 * direction is then found by a one-dimensional Newton search on the
 * per-row logits eta = Z theta and eta_d = Z delta, so each trial step is
 * a sweep over two vectors and an all-reduce of three numbers, not a pass
 * over the data.  The first step (from theta = 0, the least-squares
 * direction) lands near the optimum's scale at once, which plain step
 * halving takes several passes to reach; near the optimum the search
 * accepts t = 1 after one trial, the usual quadratic phase of Newton's
 * method.  On synth_1m the float32 iterations read the rows 3 times (5,
 * with the direction's logits a pass of their own; plain step halving
 * took 10 passes).
 *
 * With at least NEWTON_SAMPLE_MIN rows a sample on every rank, the search
 * runs on every NEWTON_SAMPLE-th row (newton_locate; its eta_d made from
 * those rows alone), and the next statistics pass makes the step's logits
 * block by block as it reads the rows, moves eta, and measures the loss
 * the step reached: one pass an iteration where the direction's logits took a pass
 * of their own and the search's trials more.  A step whose loss is not
 * below the point's it left is searched again on every row (rare: on
 * synth_1m none is).  Otherwise eta_d takes a pass of its own
 * (newton_logits) and the search reads every row.
 *
 * Precision: eta, the loss and every sum across blocks are double.  The
 * Hessian's products run in float32 on the float32 rows: binary models'
 * summed in float32 over each 128-row chunk in register tiles
 * (dml_logit_stats32, whose gradient is double throughout), softmax's over
 * a block of NEWTON_BLOCK rows (SYRK on sqrt(w) * Z, or GEMM for the
 * off-diagonal blocks, and the gradient as residuals times Z), as do
 * eta_d's (eta moves by t * eta_d, so it carries that rounding too).  The
 * Hessian only steers, so its rounding changes the path, not the point of
 * convergence; a block's float32 gradient sum is off by about 1e-7 of its
 * terms, which moves the optimum by far less than the float32 weights
 * that store it; the float64 polish (on float64 rows) then takes the
 * float32 iterations' optimum to the float64 one.
 *
 * theta has q = Kf * p entries, Kf = free logits (1 for logistic, K - 1
 * for softmax with the last class as the reference, which keeps the
 * Hessian nonsingular), row-major (Kf, p), p = d + 1 with the intercept
 * last.
 * --------------------------------------------------------------------- */

#define NEWTON_BLOCK 2048		/* rows per float32 Hessian block */
#define NEWTON_SAMPLE 16		/* every n-th row for locating a step */
#define NEWTON_SAMPLE_MIN 4096	/* sampled only with this many rows per sample */
#define NEWTON_MAX_STEP 16.0	/* longest step, in Newton steps: separable data
								 * would otherwise send theta to infinity in one
								 * search */

typedef struct Newton
{
	Dataset    *ds;
	int			d;				/* inputs */
	int			p;				/* d + 1 */
	int			Kf;				/* free logits */
	int			binary;
	size_t		q;				/* Kf * p */
	int64_t		nt;				/* training rows of this rank */
	int64_t    *rows;			/* (nt) their indexes in ds; NULL when spilled */
	int		   *label;			/* (nt) class index */
	double	   *eta;			/* (nt, Kf) Z theta */
	double	   *eta_d;			/* (nt, Kf) Z delta */
	double		step;			/* eta -= step eta_d is still to be done (by the next statistics pass) */
	const float *step_vf;		/* (Kf, p) or NULL: the step is along this direction, whose
								 * logits the next statistics pass makes from the rows it
								 * reads (eta_d is not written) */
	double	   *s_eta;			/* newton_sample's rows: eta, eta_d and labels */
	double	   *s_eta_d;
	int		   *s_label;
	float	   *s_x;			/* and their rows, column c at s_x + c s_cap */
	int64_t		s_cap;
	int			s_copied;		/* s_x and s_label are filled (by the first statistics pass) */
	int			s_eta_ok;		/* s_eta is eta's (the last statistics pass copied it) */
	double		n;				/* training rows of every rank */
	double		lambda;			/* weight decay */
	int			precise;		/* Hessian blocks in double (after a float32 one failed) */
	int			raw;			/* this chunk's Zb is ds's rows (B, d), no 1 appended */
	/*
	 * Row panels (newton_panels): the next pass lays out each chunk of
	 * rows as panels before it reads it (pack), and from then on every
	 * pass reads them so (newton_on_panels: ds->panel_rows set): the first
	 * nt / DML_PANEL * DML_PANEL training rows in groups of DML_PANEL a
	 * feature at a time, the rest as rows after them, in ds's place
	 */
	int			pack;
	float	   *lanes;			/* the statistics pass's lanes (dml_panel_stats) */
	double	   *dlanes;			/* and their chunks' sums */
} Newton;

#define NEWTON_PANEL_RUN 128	/* panel rows a statistics run takes in turn: 8 panels, PANEL_SUB */

/* rows of a chunk at training row j0 among the whole groups of DML_PANEL */
static inline int
newton_whole_rows(const Newton *nw, int64_t j0, int B)
{
	int64_t		n = nw->nt / DML_PANEL * DML_PANEL - j0;

	return n <= 0 ? 0 : n < B ? (int) n : B;
}

/* whether the training rows lie in panels now (a pass laid them out) */
static inline bool
newton_on_panels(const Newton *nw)
{
	return nw->ds->panel_rows > 0;
}

/* the rows of a chunk at training row j0 that lie in panels now */
static inline int
newton_panel_rows(const Newton *nw, int64_t j0, int B)
{
	return newton_on_panels(nw) ? newton_whole_rows(nw, j0, B) : 0;
}

/*
 * what a pass does with training rows j0 .. j0 + B - 1, as [x, 1] in Zb
 * (B, p), or, when nw->raw, as the B rows of ds themselves (B, d)
 */
typedef void (*NewtonChunkFn) (Newton *nw, int64_t j0, int B, const float *Zb, void *arg);

typedef struct NewtonScan
{
	Newton	   *nw;
	NewtonChunkFn fn;
	void	   *arg;
	float	   *Zb;
	int			B;				/* rows in Zb */
	int64_t		j0;				/* the training row Zb starts at */
} NewtonScan;

/* a spilled block's training rows, in order, into chunks of NEWTON_BLOCK */
static void
newton_scan_block(const Dataset *v, void *arg)
{
	NewtonScan *ns = arg;
	int			d = ns->nw->d,
				p = ns->nw->p;

	for (int64_t i = 0; i < v->n; i++)
	{
		if (v->val[i])
			continue;
		memcpy(ns->Zb + (size_t) ns->B * p, v->X + (size_t) i * d, sizeof(float) * d);
		ns->Zb[(size_t) ns->B * p + d] = 1.0f;
		if (++ns->B == NEWTON_BLOCK)
		{
			ns->fn(ns->nw, ns->j0, ns->B, ns->Zb, ns->arg);
			ns->j0 += ns->B;
			ns->B = 0;
		}
	}
}

/*
 * newton_pass
 *		fn on every chunk of NEWTON_BLOCK training rows (the last may be
 *		short) as [x, 1] in float32, in row order: from memory, or read
 *		from the spill block by block.  The chunks are the same either way,
 *		so a streamed fit sums the same products in the same order.  With
 *		raw_ok, fn also takes rows as they lie in memory (nw->raw) where a
 *		chunk's rows are consecutive there.
 */
static void
newton_pass(Newton *nw, NewtonChunkFn fn, void *arg, bool raw_ok)
{
	int			d = nw->d,
				p = nw->p;
	float	   *Zb = malloc(sizeof(float) * NEWTON_BLOCK * p);
	/* this pass lays out the rows as panels (every chunk is consecutive: newton_panels) */
	bool		lay = nw->pack && raw_ok && !nw->ds->spill;

	if (!Zb)
		worker_fail("out of memory");
	if (lay)
	{
		/* each chunk laid out as it comes, before fn reads it (below) */
		nw->ds->panel_row0 = nw->rows[0];
		nw->ds->panel_rows = nw->nt / DML_PANEL * DML_PANEL;
	}
	if (nw->ds->spill)
	{
		NewtonScan	ns = {nw, fn, arg, Zb, 0, 0};

		stream_scan(nw->ds->spill, 0, newton_scan_block, &ns);
		if (ns.B > 0)
			fn(nw, ns.j0, ns.B, Zb, arg);
		if (ns.j0 + ns.B != nw->nt)
			worker_fail("the spill gave %lld training rows, not %lld",
						(long long) (ns.j0 + ns.B), (long long) nw->nt);
	}
	else
		for (int64_t j0 = 0; j0 < nw->nt; j0 += NEWTON_BLOCK)
		{
			int			B = (int) (nw->nt - j0 < NEWTON_BLOCK ? nw->nt - j0 : NEWTON_BLOCK);

			if (newton_on_panels(nw))
			{
				/* panels, then rows: the chunk's fn reads both where they lie */
				float	   *x = nw->ds->X + (size_t) (nw->rows[0] + j0) * d;

				if (!raw_ok)
					worker_fail("a Newton pass over row panels that takes copies");
				/* the laying pass: the chunk's rows as panels, in their place, first */
				if (lay)
					dml_panel_layout(x, newton_whole_rows(nw, j0, B) / DML_PANEL, d, true);
				nw->raw = 1;
				fn(nw, j0, B, x, arg);
				nw->raw = 0;
				continue;
			}
			/*
			 * consecutive rows go to a chunk that takes them as they lie
			 * (the copy with a 1 appended was 9% of a logistic job's
			 * worker samples: two passes an iteration)
			 */
			if (raw_ok && nw->rows[j0 + B - 1] - nw->rows[j0] == B - 1)
			{
				nw->raw = 1;
				fn(nw, j0, B, nw->ds->X + (size_t) nw->rows[j0] * d, arg);
				nw->raw = 0;
				continue;
			}
			for (int i = 0; i < B; i++)
			{
				memcpy(Zb + (size_t) i * p, nw->ds->X + (size_t) nw->rows[j0 + i] * d, sizeof(float) * d);
				Zb[(size_t) i * p + d] = 1.0f;
			}
			fn(nw, j0, B, Zb, arg);
		}
	nw->pack = 0;
	free(Zb);
}

/*
 * out (nt, Kf) = Z v^T for v (Kf, p): float32 products of the float32 rows
 * (the direction's logits, which only move eta; see newton_stats)
 */
typedef struct LogitsPass
{
	const float *vf;			/* (Kf, p) */
	float	   *ob;				/* (NEWTON_BLOCK, Kf) */
	double	   *out;
	double	   *first;			/* binary: the line search's sums at t = 1, or NULL */
} LogitsPass;

/*
 * out (B, Kf) = the logits of vf (Kf, p) of one chunk's rows, in float32
 * products; its first np rows (binary) in row panels, the rest as rows
 */
static void
newton_chunk_logits(const Newton *nw, int B, int np, const float *Zb, const float *vf,
					float *ob, double *out)
{
	int			p = nw->p,
				d = nw->d,
				Kf = nw->Kf;

	if (np > 0)
	{
		dml_panel_dot(ob, Zb, np / DML_PANEL, d, vf);
		for (int i = 0; i < np; i++)
			out[i] = ob[i];
		B -= np;
		Zb += (size_t) np * d;
		out += np;
	}
	if (B == 0)
		return;
	if (nw->raw)
	{
		/*
		 * the rows as they lie: the slopes' products, then the intercepts;
		 * one logit a row by SGEMV (SGEMM's packing copies were 6% of a
		 * logistic job's worker samples)
		 */
		if (Kf == 1)
		{
			memset(ob, 0, sizeof(float) * B);
			dml_rows_dot(ob, Zb, vf, B, d);
		}
		else
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, Kf, d, 1.0f, Zb, d,
						vf, p, 0.0f, ob, Kf);
		for (int i = 0; i < B; i++)
			for (int k = 0; k < Kf; k++)
				out[(size_t) i * Kf + k] = ob[(size_t) i * Kf + k] + vf[(size_t) k * p + d];
	}
	else
	{
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, Kf, p, 1.0f, Zb, p,
					vf, p, 0.0f, ob, Kf);
		for (size_t i = 0; i < (size_t) B * Kf; i++)
			out[i] = ob[i];
	}
}

static void
newton_logits_chunk(Newton *nw, int64_t j0, int B, const float *Zb, void *arg)
{
	LogitsPass *lp = arg;

	newton_chunk_logits(nw, B, newton_panel_rows(nw, j0, B), Zb, lp->vf, lp->ob,
						lp->out + (size_t) j0 * nw->Kf);
	if (lp->first)
	{
		/*
		 * the search's first trial, the full step, while the block's
		 * logits are in cache: one pass over eta and eta_d fewer
		 */
		double		o[3];

		dml_logit_line(nw->eta + j0, lp->out + j0, nw->label + j0, B, 1, 1.0, true, o, NULL);
		for (int i = 0; i < 3; i++)
			lp->first[i] += o[i];
	}
}

/*
 * out (nt, Kf) = the rows' logits of v (Kf, p); for binary models, first
 * (3, or NULL) gets this rank's sums of newton_line at t = 1
 */
static void
newton_logits(Newton *nw, const double *v, double *out, double *first, bool raw_ok)
{
	int			p = nw->p,
				Kf = nw->Kf;
	float	   *vf = malloc(sizeof(float) * Kf * p);
	float	   *ob = malloc(sizeof(float) * NEWTON_BLOCK * Kf);
	LogitsPass	lp = {vf, ob, out, nw->binary ? first : NULL};

	if (!vf || !ob)
		worker_fail("out of memory");
	for (size_t i = 0; i < (size_t) Kf * p; i++)
		vf[i] = (float) v[i];
	if (lp.first)
		lp.first[0] = lp.first[1] = lp.first[2] = 0;
	newton_pass(nw, newton_logits_chunk, &lp, raw_ok);
	free(vf);
	free(ob);
}

/*
 * Softmax: probabilities of one row from its free logits e (Kf), the
 * reference class's logit 0: pr (Kf) for the free classes.  Returns the
 * row's loss when want_loss, else 0.  (Logistic regression's rows go
 * through kernels/logit.c's vectorized dml_logit_probs and dml_logit_line.)
 */
static inline double
newton_row(const double *e, int Kf, int label, double *pr, int want_loss)
{
	double		mx = 0,
				den;

	for (int k = 0; k < Kf; k++)
		mx = e[k] > mx ? e[k] : mx;
	den = exp(-mx);				/* the reference class, logit 0 */
	for (int k = 0; k < Kf; k++)
		den += (pr[k] = exp(e[k] - mx));
	for (int k = 0; k < Kf; k++)
		pr[k] /= den;
	return want_loss ? log(den) + mx - (label < Kf ? e[label] : 0) : 0;
}

/*
 * H (q, q) lower blocks += Z' diag(w_kl) Z over one block of B rows,
 * w_kl = p_k (1{k = l} - p_l) from the probabilities P (B, Kf): in float32
 * (SYRK on sqrt(w) Z for the diagonal blocks, GEMM otherwise) with Zb, or,
 * when nw->precise, in double with Zd.  Scratch: W (B, p) and Hs (p, p) of
 * the same type.
 */
static void
newton_hessian_block(const Newton *nw, int B, const double *P, const float *Zb,
					 const double *Zd, void *W, void *Hs, double *H)
{
	int			p = nw->p,
				Kf = nw->Kf;
	size_t		q = nw->q;

	for (int k = 0; k < Kf; k++)
		for (int l = 0; l <= k; l++)
		{
			double	   *dst = H + ((size_t) k * p) * q + (size_t) l * p;

			for (int i = 0; i < B; i++)
			{
				const double *pr = P + (size_t) i * Kf;
				/* sqrt(w) on both sides for the diagonal blocks (SYRK) */
				double		a = k == l ? sqrt(pr[k] * (1 - pr[k])) : -pr[k] * pr[l];

				if (nw->precise)
					for (int c = 0; c < p; c++)
						((double *) W)[(size_t) i * p + c] = a * Zd[(size_t) i * p + c];
				else
					for (int c = 0; c < p; c++)
						((float *) W)[(size_t) i * p + c] = (float) a * Zb[(size_t) i * p + c];
			}
			if (nw->precise)
			{
				double	   *Hd = Hs;

				if (k == l)
					cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, p, B, 1.0, W, p, 0.0, Hd, p);
				else
					cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, p, p, B, 1.0, Zd, p,
								W, p, 0.0, Hd, p);
				for (int i = 0; i < p; i++)
					for (int c = 0; c < (k == l ? i + 1 : p); c++)
						dst[(size_t) i * q + c] += Hd[(size_t) i * p + c];
			}
			else
			{
				float	   *Hf = Hs;

				if (k == l)
					cblas_ssyrk(CblasRowMajor, CblasLower, CblasTrans, p, B, 1.0f, W, p, 0.0f, Hf, p);
				else
					cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, p, p, B, 1.0f, Zb, p,
								W, p, 0.0f, Hf, p);
				/* SYRK leaves the upper triangle as it was: only the lower is added */
				for (int i = 0; i < p; i++)
					for (int c = 0; c < (k == l ? i + 1 : p); c++)
						dst[(size_t) i * q + c] += Hf[(size_t) i * p + c];
			}
		}
}

/*
 * The sample's arrays (newton_sample), for every NEWTON_SAMPLE-th training
 * row; the next statistics pass fills its rows and labels
 */
static void
newton_sample_alloc(Newton *nw)
{
	int64_t		cap = nw->nt / NEWTON_SAMPLE + 1;

	nw->s_cap = cap;
	nw->s_eta = malloc(sizeof(double) * cap * nw->Kf);
	nw->s_eta_d = malloc(sizeof(double) * cap * nw->Kf);
	nw->s_label = malloc(sizeof(int) * cap);
	nw->s_x = malloc(sizeof(float) * cap * nw->d);
	if (!nw->s_eta || !nw->s_eta_d || !nw->s_label || !nw->s_x)
		worker_fail("out of memory");
}

/*
 * A statistics pass's chunk of training rows j0 .. j0 + B - 1 (Zb, each ld
 * floats, the first d the row's), once its eta is at theta: the sampled
 * ones' eta (every NEWTON_SAMPLE-th row's) into s_eta, and on the first
 * pass their rows into s_x, a column after another, and their labels into
 * s_label, while they are in cache
 */
static void
newton_sample_rows(Newton *nw, int64_t j0, int B, const float *Zb, int ld)
{
	int64_t		j = (j0 + NEWTON_SAMPLE - 1) / NEWTON_SAMPLE * NEWTON_SAMPLE;
	int			Kf = nw->Kf;

	for (; j < j0 + B; j += NEWTON_SAMPLE)
	{
		int64_t		i = j / NEWTON_SAMPLE;

		for (int k = 0; k < Kf; k++)
			nw->s_eta[(size_t) i * Kf + k] = nw->eta[(size_t) j * Kf + k];
		if (!nw->s_copied)
		{
			const float *x = Zb + (size_t) (j - j0) * ld;
			int			stride = 1;

			if (j - j0 < newton_panel_rows(nw, j0, B))
			{
				x = dml_panel_row(Zb, j - j0, nw->d);
				stride = DML_PANEL;
			}
			for (int c = 0; c < nw->d; c++)
				nw->s_x[(size_t) c * nw->s_cap + i] = x[(size_t) c * stride];
			nw->s_label[i] = nw->label[j];
		}
	}
}

/*
 * whether the statistics pass runs on the float32 tiles (binary, at most
 * 24 parameters, AVX-512 or AVX2), which take the rows as they lie in
 * memory, where other passes take [x, 1] copies
 */
static bool
newton_tiles(const Newton *nw)
{
	return nw->binary && !nw->precise && dml_hess_tiles_ok(nw->p);
}

/*
 * The statistics pass at the current eta: gradient g (q) and the lower
 * blocks of the Hessian H (q, q), all-reduced, weight decay included.
 * Returns the loss when want_loss (the line search knows it otherwise).
 */
typedef struct StatsPass
{
	double	   *Zd;				/* (NEWTON_BLOCK, p) when precise */
	double	   *Ht;				/* tiles: the Hessian's sum (24, 24) */
	double	   *W;				/* weighted rows */
	double	   *Hs;
	double	   *P;				/* probabilities */
	float	   *R;				/* residuals */
	float	   *Gb;
	float	   *ob;				/* (NEWTON_BLOCK, Kf) when the pass makes the step's logits */
	double	   *ed;				/* (NEWTON_BLOCK, Kf) and those logits */
	double	   *G;
	double	   *H;
	double		loss;
	int			want_loss;
} StatsPass;

/*
 * The last iteration's step, block by block as the pass reads eta: eta of
 * training rows j0 .. j0 + B - 1 -= step eta_d, with eta_d, where the step
 * was located on a sample of the rows, made from the rows this pass reads
 * anyway (Zb, its first np in panels; as newton_logits makes them) into
 * the block's own scratch: eta_d (8 MB for synth_1m) is not written, which
 * its first pass took 15 ms to fault in
 */
static void
newton_step_eta(Newton *nw, StatsPass *sp, int64_t j0, int B, int np, const float *Zb)
{
	int			Kf = nw->Kf;
	double	   *e = nw->eta + (size_t) j0 * Kf;
	const double *ed = nw->eta_d + (size_t) j0 * Kf;

	if (nw->step == 0)
		return;
	if (nw->step_vf)
	{
		newton_chunk_logits(nw, B, np, Zb, nw->step_vf, sp->ob, sp->ed);
		ed = sp->ed;
	}
	for (size_t i = 0; i < (size_t) B * Kf; i++)
		e[i] -= nw->step * ed[i];
}

/* one chunk's probabilities and loss in double; G (Kf, p) += R' Z; H += its block */
static void
newton_stats_chunk(Newton *nw, int64_t j0, int B, const float *Zb, void *arg)
{
	StatsPass  *sp = arg;
	int			p = nw->p,
				Kf = nw->Kf;
	size_t		q = nw->q;
	int			np = newton_panel_rows(nw, j0, B);

	if (np > 0)
	{
		/*
		 * row panels (binary, the tiles' sizes): a run of them at a time,
		 * while it is in L1, the step's logits and eta moved, the sample's
		 * eta (and on the first pass its rows), the probabilities and the
		 * statistics' lanes; the chunk's lanes then flushed into double
		 */
		int			d = nw->d;

		for (int s0 = 0; s0 < np; s0 += NEWTON_PANEL_RUN)
		{
			int			b = np - s0 < NEWTON_PANEL_RUN ? np - s0 : NEWTON_PANEL_RUN;
			int64_t		j = j0 + s0;
			const float *Zs = Zb + (size_t) s0 * d;

			newton_step_eta(nw, sp, j, b, b, Zs);
			if (nw->s_x)
				newton_sample_rows(nw, j, b, Zs, d);
			sp->loss += dml_logit_probs(nw->eta + j, nw->label + j, b, sp->P, sp->want_loss);
			/* the next run's panels, where the panels go on (asked for meanwhile) */
			int64_t		after = nw->ds->panel_rows - (j + b);

			dml_panel_stats(Zs, b / DML_PANEL, d, sp->P, nw->label + j, nw->lanes,
							Zs + (size_t) b * d,
							(int) (after < NEWTON_PANEL_RUN ? (after > 0 ? after : 0) :
								   NEWTON_PANEL_RUN) / DML_PANEL);
		}
		dml_panel_flush(nw->lanes, nw->dlanes, p);
		if (np == B)
			return;
		/* the rows after the panels, as rows */
		j0 += np;
		B -= np;
		Zb += (size_t) np * d;
	}
	newton_step_eta(nw, sp, j0, B, 0, Zb);
	if (nw->s_x)
		newton_sample_rows(nw, j0, B, Zb, nw->raw ? nw->d : p);
	if (nw->binary)
	{
		/* one logit a row: the block's probabilities in one vectorized pass */
		sp->loss += dml_logit_probs(nw->eta + j0, nw->label + j0, B, sp->P, sp->want_loss);
		if (sp->Ht)
		{
			/*
			 * binary, at most 24 parameters, AVX-512 or AVX2: one read of the
			 * rows gives the gradient (in double) and the Hessian (in
			 * float32 register tiles, chunk sums added in double), in
			 * about a third of the time OpenBLAS's SSYRK on 256 x 21
			 * took (it spent as long packing as computing), and half of
			 * the float64 tiles' the polish uses
			 */
			/* the next chunk's rows where they lie (newton_pass goes on in order) */
			const float *next = NULL;
			int			nnext = 0;

			if (nw->raw && j0 + B < nw->nt)
			{
				next = nw->ds->X + (size_t) nw->rows[j0 + B] * nw->d;
				nnext = nw->nt - (j0 + B) < NEWTON_BLOCK ? (int) (nw->nt - (j0 + B)) : NEWTON_BLOCK;
			}
			dml_logit_stats32(Zb, B, nw->d, nw->raw ? nw->d : nw->p, sp->P, nw->label + j0,
							  sp->G, sp->Ht, next, nnext);
			return;
		}
		for (int i = 0; i < B; i++)
			sp->R[i] = (float) (sp->P[i] - nw->label[j0 + i]);
	}
	else
		for (int i = 0; i < B; i++)
		{
			int64_t		j = j0 + i;
			double	   *pr = sp->P + (size_t) i * Kf;

			sp->loss += newton_row(nw->eta + (size_t) j * Kf, Kf, nw->label[j], pr,
								   sp->want_loss);
			for (int k = 0; k < Kf; k++)
				sp->R[(size_t) i * Kf + k] = (float) (pr[k] - (nw->label[j] == k));
		}
	cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Kf, p, B, 1.0f, sp->R, Kf, Zb, p,
				0.0f, sp->Gb, p);
	for (size_t i = 0; i < q; i++)
		sp->G[i] += sp->Gb[i];
	if (sp->Zd)
		for (size_t i = 0; i < (size_t) B * p; i++)
			sp->Zd[i] = Zb[i];
	newton_hessian_block(nw, B, sp->P, Zb, sp->Zd, sp->W, sp->Hs, sp->H);
}

/*
 * dataset_unpanel
 *		ds's rows that Newton's method left as row panels, back as rows
 *		(where anything but its passes and the final metrics reads them)
 */
void
dataset_unpanel(Dataset *ds)
{
	if (ds->panel_rows > 0)
		dml_panel_layout(ds->X + (size_t) ds->panel_row0 * ds->d, ds->panel_rows / DML_PANEL,
						 ds->d, false);
	ds->panel_rows = 0;
}

/*
 * newton_panels
 *		Row panels from the next pass on (on), or no more (off: the rows
 *		back as rows).  On only where the statistics pass runs the
 *		float32 kernels (binary, the tiles' sizes, AVX-512 or AVX2), the
 *		rows are in memory and consecutive there, and there is a panel.
 *		The next pass lays out each chunk as panels in its place before
 *		it reads it (in L2 then); every pass from there on reads panels,
 *		whose 16 rows are the lanes of a vector, an input one load: the
 *		Hessian takes 14.4 multiply-adds a row at 21 parameters where the
 *		row tiles take 26, and the gradient 1.3 more in the same register
 *		blocks.  The rows stay panels after the iterations: the float64
 *		polish reads ds's float64 rows, and the final metrics read panels
 *		(train.c); a resident job's next trial has them back as rows.
 */
static void
newton_panels(Newton *nw, bool on)
{
	if (!on)
	{
		dataset_unpanel(nw->ds);
		nw->pack = 0;
		return;
	}
	if (nw->ds->spill || !newton_tiles(nw) || nw->nt < DML_PANEL ||
		nw->rows[nw->nt - 1] - nw->rows[0] != nw->nt - 1)
		return;
	nw->lanes = calloc(dml_panel_lanes(nw->p), sizeof(float));
	nw->dlanes = calloc(dml_panel_lanes(nw->p), sizeof(double));
	if (!nw->lanes || !nw->dlanes)
		worker_fail("out of memory for the Newton statistics");
	nw->pack = 1;
}

static double
newton_stats(Newton *nw, const double *theta, double *g, double *H, int want_loss)
{
	int			d = nw->d,
				p = nw->p,
				Kf = nw->Kf;
	size_t		q = nw->q;
	StatsPass	sp;
	double	   *G;
	double		loss;

	memset(&sp, 0, sizeof(sp));
	sp.Zd = nw->precise ? malloc(sizeof(double) * NEWTON_BLOCK * p) : NULL;
	if (newton_tiles(nw))
	{
		sp.Ht = calloc((size_t) DML_HESS_TILE_P * DML_HESS_TILE_P, sizeof(double));
		if (!sp.Ht)
			worker_fail("out of memory for the Newton statistics");
	}
	sp.W = malloc(sizeof(double) * NEWTON_BLOCK * p);
	sp.Hs = malloc(sizeof(double) * p * p);
	sp.P = malloc(sizeof(double) * NEWTON_BLOCK * Kf);
	sp.R = malloc(sizeof(float) * NEWTON_BLOCK * Kf);
	sp.Gb = malloc(sizeof(float) * q);
	sp.ob = nw->step_vf ? malloc(sizeof(float) * NEWTON_BLOCK * Kf) : NULL;
	sp.ed = nw->step_vf ? malloc(sizeof(double) * NEWTON_BLOCK * Kf) : NULL;
	sp.G = G = calloc(q + 1, sizeof(double));
	sp.H = H;
	sp.want_loss = want_loss;
	if ((nw->precise && !sp.Zd) || !sp.W || !sp.Hs || !sp.P || !sp.R || !sp.Gb || !G ||
		(nw->step_vf && (!sp.ob || !sp.ed)))
		worker_fail("out of memory for the Newton statistics");
	memset(H, 0, sizeof(double) * q * q);
	if (newton_on_panels(nw) || nw->pack)
		memset(nw->dlanes, 0, sizeof(double) * dml_panel_lanes(p));
	/* the tiles' chunk takes rows as they lie; the SYRK blocks need [x, 1] */
	newton_pass(nw, newton_stats_chunk, &sp, sp.Ht != NULL);
	if (nw->s_x)
	{
		/* newton_sample_rows filled the sample's rows, and its eta is this pass's */
		nw->s_copied = 1;
		nw->s_eta_ok = 1;
	}
	nw->step = 0;				/* eta is at theta now */
	nw->step_vf = NULL;
	if (newton_on_panels(nw))
		dml_panel_sum(nw->dlanes, p, G, sp.Ht);
	if (sp.Ht)
		/* binary: q = p; the lower half, as the blocks fill it */
		for (int i = 0; i < p; i++)
			for (int c = 0; c <= i; c++)
				H[(size_t) i * q + c] += sp.Ht[(size_t) i * DML_HESS_TILE_P + c];
	G[q] = sp.loss;
	comm_allreduce_double(G, q + 1);
	comm_allreduce_double(H, q * q);
	loss = G[q];
	/* the weight decay penalty, intercepts excluded */
	for (int k = 0; k < Kf; k++)
		for (int c = 0; c < d; c++)
		{
			double		t = theta[(size_t) k * p + c];

			loss += nw->n * nw->lambda / 2 * t * t;
			G[(size_t) k * p + c] += nw->n * nw->lambda * t;
			H[((size_t) k * p + c) * q + (size_t) k * p + c] += nw->n * nw->lambda;
		}
	memcpy(g, G, sizeof(double) * q);
	free(sp.Zd);
	free(sp.Ht);
	free(sp.W);
	free(sp.Hs);
	free(sp.P);
	free(sp.R);
	free(sp.Gb);
	free(sp.ob);
	free(sp.ed);
	free(G);
	return loss;
}

/*
 * The loss at theta - t delta and its first two derivatives in t, from
 * the logits eta and eta_d of nt rows with these labels (or this rank's
 * sums, when the logits pass made them), all-reduced; the penalty is added
 * from theta and delta.  With stride > 1 only every stride-th row is read;
 * with scale > 1 the rows are a sample: the loss is left out (out[0] = 0)
 * and the sums are scaled up, an estimate of the derivatives for locating
 * the step, never for accepting it.  noise (or NULL; binary rows, no
 * sums): newton_sample_noise's figure for these rows at this t, in the
 * same all-reduce.
 */
static void
newton_line_on(const Newton *nw, const double *eta, const double *eta_d, const int *lab,
			   int64_t nt, int stride, double scale, const double *theta, const double *delta,
			   double t, const double *sums, double out[3], double *noise)
{
	int			Kf = nw->Kf,
				p = nw->p;
	double	   *e = malloc(sizeof(double) * 2 * Kf),
			   *pr = e + Kf;
	double		loss = 0,
				f1 = 0,
				f2 = 0,
				sq = 0,
				all[4];

	if (!e)
		worker_fail("out of memory");
	if (sums)
	{
		/* the binary full step's, summed by the logits pass */
		loss = sums[0];
		f1 = sums[1];
		f2 = sums[2];
	}
	else if (nw->binary)
	{
		/* one logit a row: vectorized (kernels/logit.c) */
		dml_logit_line(eta, eta_d, lab, nt, stride, t, scale == 1, out, noise ? &sq : NULL);
		loss = out[0];
		f1 = out[1];
		f2 = out[2];
	}
	else
		for (int64_t j = 0; j < nt; j += stride)
		{
			const double *e0 = eta + (size_t) j * Kf;
			const double *ed = eta_d + (size_t) j * Kf;
			int			label = lab[j];
			double		s1 = 0,
						s2 = 0,
						m = 0;

			for (int k = 0; k < Kf; k++)
				e[k] = e0[k] - t * ed[k];
			loss += newton_row(e, Kf, label, pr, scale == 1);
			/* d/dt = -sum_k ed_k (p_k - y_k); d2/dt2 = sum_k ed_k^2 p_k - (sum_k ed_k p_k)^2 */
			for (int k = 0; k < Kf; k++)
			{
				s1 += ed[k] * (pr[k] - (label == k));
				s2 += ed[k] * ed[k] * pr[k];
				m += ed[k] * pr[k];
			}
			f1 -= s1;
			f2 += s2 - m * m;
		}
	free(e);
	all[0] = loss;
	all[1] = f1 * scale;
	all[2] = f2 * scale;
	/* the noise's sum, scaled as the derivatives are (see newton_sample_noise) */
	all[3] = sq * scale * scale;
	comm_allreduce_double(all, noise ? 4 : 3);
	memcpy(out, all, sizeof(double) * 3);
	if (noise)
		*noise = all[3];
	for (int k = 0; k < Kf; k++)
		for (int c = 0; c < p - 1; c++)
		{
			double		th = theta[(size_t) k * p + c],
						dl = delta[(size_t) k * p + c];

			if (scale == 1)
				out[0] += nw->n * nw->lambda / 2 * (th - t * dl) * (th - t * dl);
			out[1] -= nw->n * nw->lambda * dl * (th - t * dl);
			out[2] += nw->n * nw->lambda * dl * dl;
		}
}

/* newton_line_on over this rank's training rows, every stride-th */
static void
newton_line(const Newton *nw, const double *theta, const double *delta, double t, int stride,
			const double *sums, double out[3])
{
	newton_line_on(nw, nw->eta, nw->eta_d, nw->label, nw->nt, stride, stride, theta, delta, t,
				   sums, out, NULL);
}

/* the next trial of a one-dimensional Newton search from t, within bounds */
static double
newton_next_step(double t, const double v[3])
{
	double		next = t - v[1] / v[2];

	next = fmin(fmax(next, t / 4), t * 4);
	return fmin(next, NEWTON_MAX_STEP);
}

/*
 * The step length along -delta from the point with loss L: a safeguarded
 * one-dimensional Newton search from t = 1, halving while the loss does
 * not decrease, at most NEWTON_MAX_STEP, stopping when the next trial
 * would move t by less than 1%.  Near the optimum t = 1 is accepted after
 * one trial.  When the first trial says the step is far from 1 (the first
 * iterations, far from the optimum) the search runs on a sample of the
 * rows, every NEWTON_SAMPLE-th, and the full loss is evaluated only at the
 * point it finds.  Returns the best t found, 0 when no trial decreased the
 * loss; *best gets its loss.
 */
static double
newton_search(const Newton *nw, const double *theta, const double *delta, double L,
			  const double *first, double *best)
{
	double		t = 1.0,
				best_t = 0;
	int			sampled = 0;
	int			stride = nw->n >= 16.0 * NEWTON_SAMPLE_MIN ? NEWTON_SAMPLE : 1;

	*best = L;
	for (int tries = 0; tries < 40; tries++)
	{
		double		v[3],
					next;

		/* the full step's sums may come from the logits pass (first) */
		newton_line(nw, theta, delta, t, 1, tries == 0 ? first : NULL, v);
		if (!(v[0] <= *best))
		{
			if (best_t > 0)
				break;			/* overshot a point already found */
			t /= 2;
			continue;
		}
		best_t = t;
		*best = v[0];
		if (!(v[2] > 0))
			break;
		next = newton_next_step(t, v);
		/* close enough: the outer iteration corrects the rest */
		if (fabs(next - t) <= 1e-2 * t || (t >= NEWTON_MAX_STEP && next >= t))
			break;
		if (!sampled && stride > 1 && fabs(next - t) > 0.25 * t)
		{
			/* far from the full step: locate it on the sample */
			sampled = 1;
			for (int k = 0; k < 40; k++)
			{
				double		u = next;

				newton_line(nw, theta, delta, u, stride, NULL, v);
				if (!(v[2] > 0))
					break;
				next = newton_next_step(u, v);
				if (fabs(next - u) <= 1e-2 * u)
					break;
			}
		}
		t = next;
	}
	return best_t;
}

/*
 * The sample newton_locate works on: every NEWTON_SAMPLE-th training
 * row's eta and label, and eta_d, the logits of delta, in double from its
 * float32 row, in nw->s_eta, s_eta_d and s_label, so that each trial reads
 * 20 bytes a sampled row (Kf = 1), not a line of each array.  The statistics
 * passes copy what they can as they read it (newton_sample_rows): the
 * sampled rows' eta each pass, and the first pass their rows (a
 * sixteenth, 5 MB for synth_1m) and labels, a column at a time.  Here each
 * sampled row's eta_d sums the same products in the same order as one
 * row's dot product, a run's rows side by side (their sums independent,
 * so they vectorize), from memory in order and not a row's memory latency
 * each (gathered from ds and eta, where sampled rows lie stride apart, a
 * call took about 5 ms for synth_1m with the lines asked for ahead; from
 * the copies 1.1-1.8 ms; vectorized across the rows by dml_cols_dot_d,
 * whose products are rounded before they are added as this file's
 * baseline build rounds them, 0.3-0.6 ms then).  The same floats summed in
 * the same order give the same eta_d as before, bit for bit.  Returns the
 * sample's rows.
 */
#define NEWTON_SAMPLE_RUN 512	/* sampled rows whose logits are made together */

static int64_t
newton_sample(Newton *nw, const double *delta)
{
	int			d = nw->d,
				p = nw->p,
				Kf = nw->Kf;
	int64_t		ns = (nw->nt + NEWTON_SAMPLE - 1) / NEWTON_SAMPLE;
	double		col[NEWTON_SAMPLE_RUN];

	if (!nw->s_eta_ok)
		worker_fail("the Newton sample's rows were not copied");
	if (Kf == 1)
	{
		/* binary: the logits straight into eta_d */
		dml_cols_dot_d(nw->s_eta_d, nw->s_x, nw->s_cap, ns, d, delta);
		return ns;
	}
	for (int64_t i0 = 0; i0 < ns; i0 += NEWTON_SAMPLE_RUN)
	{
		int			R = ns - i0 < NEWTON_SAMPLE_RUN ? (int) (ns - i0) : NEWTON_SAMPLE_RUN;

		for (int k = 0; k < Kf; k++)
		{
			dml_cols_dot_d(col, nw->s_x + i0, nw->s_cap, R, d, delta + (size_t) k * p);
			for (int i = 0; i < R; i++)
				nw->s_eta_d[(size_t) (i0 + i) * Kf + k] = col[i];
		}
	}
	return ns;
}

/*
 * The sample's noise in the derivative at the full step: stride^2 times
 * the sum over the sample's ns rows of each row's squared term of d/dt
 * (newton_line_on's s1), all-reduced: the variance the sampled d/dt would
 * have if its terms were independent draws around a mean of 0, which is
 * where every row puts it at the best step.  Softmax models; a binary
 * model's comes with newton_locate's first trial (dml_logit_line's sq),
 * from the probabilities that trial makes anyway, in its all-reduce (its
 * own pass over the sample and all-reduce took 0.15-0.45 ms of a 2-worker
 * iteration over 1,000,000 rows).
 */
static double
newton_sample_noise(const Newton *nw, int64_t ns, int stride)
{
	int			Kf = nw->Kf;
	double	   *e = malloc(sizeof(double) * 2 * Kf),
			   *pr = e + Kf;
	double		s2 = 0;

	if (!e)
		worker_fail("out of memory");
	for (int64_t j = 0; j < ns; j++)
	{
		const double *e0 = nw->s_eta + (size_t) j * Kf;
		const double *ed = nw->s_eta_d + (size_t) j * Kf;
		int			label = nw->s_label[j];
		double		s1 = 0;

		for (int k = 0; k < Kf; k++)
			e[k] = e0[k] - ed[k];
		newton_row(e, Kf, label, pr, 0);
		for (int k = 0; k < Kf; k++)
			s1 += ed[k] * (pr[k] - (label == k));
		s2 += s1 * s1;
	}
	free(e);
	s2 *= (double) stride * stride;
	comm_allreduce_double(&s2, 1);
	return s2;
}

/*
 * The step length along -delta, located on every NEWTON_SAMPLE-th row alone.  The
 * loss there is measured by the next statistics pass, over every row, which
 * also makes the direction's logits (so a step costs no pass of its own);
 * should that loss not be below this point's, train_newton searches again
 * on every row (newton_search).
 *
 * Far from the optimum (the first iterations) the sample says clearly
 * where along the direction the loss is least: there the one-dimensional
 * Newton search of newton_search runs on the sample's derivatives from
 * t = 1 until the next trial would move t by less than 1% (on synth_1m's
 * first iteration it ends at 9.336 where the search on every row ends at
 * 9.343).  Near the optimum the remaining step is as small as the
 * difference between the sample's optimum and the data's, and the
 * sample's derivative at the full step is mostly noise (there it sent t to
 * 0.64 where every row says 1.01): where that derivative is within
 * NEWTON_SAMPLE_Z of its standard deviation from the 0 that Newton's
 * quadratic model predicts, the step is the full one, t = 1, Newton's step
 * in its quadratic region.
 */
#define NEWTON_SAMPLE_Z 3.0

static double
newton_locate(Newton *nw, const double *theta, const double *delta)
{
	double		t = 1.0,
				noise;
	int			stride = NEWTON_SAMPLE;	/* the rows newton_sample holds */
	int64_t		ns = newton_sample(nw, delta);

	/*
	 * binary: the noise comes with the first trial (t = 1), from its
	 * probabilities, and in its all-reduce
	 */
	noise = nw->binary ? 0 : newton_sample_noise(nw, ns, stride);
	for (int tries = 0; tries < 40; tries++)
	{
		double		v[3],
					next;

		newton_line_on(nw, nw->s_eta, nw->s_eta_d, nw->s_label, ns, 1, stride, theta, delta,
					   t, NULL, v, tries == 0 && nw->binary ? &noise : NULL);
		if (tries == 0 && fabs(v[1]) <= NEWTON_SAMPLE_Z * sqrt(noise))
			break;				/* the full step: the sample cannot tell better */
		if (!(v[2] > 0))
			break;
		next = newton_next_step(t, v);
		if (fabs(next - t) <= 1e-2 * t || (t >= NEWTON_MAX_STEP && next >= t))
			break;
		t = next;
	}
	return t;
}

typedef struct PolishScan
{
	double	   *G;				/* gradient (q), loss, then what else is summed */
	double	   *H;
	const double *beta;
	int			K;				/* softmax: classes; 0: logistic */
} PolishScan;

/*
 * One pass of the float64 polish over rows in memory or a spilled block's:
 * logistic: G (p) += gradient, G[p] += loss, G[p + 1] += the labels' sum;
 * softmax: G (q) += gradient, G[q] += loss, G[q + 1 + k] += class k's rows;
 * H += the Hessian.
 */
static void
polish_rows(const Dataset *ds, void *arg)
{
	PolishScan *ps = arg;
	int			d = ds->d,
				p = d + 1;
	int64_t		n = ds->n;

	if (ps->K == 0)
	{
		double	   *y = malloc(sizeof(double) * (n ? n : 1));

		if (!y)
			worker_fail("out of memory");
		for (int64_t i = 0; i < n; i++)
			y[i] = ds->y[i];
		ps->G[p] += dml_logit_stats(ps->G, ps->H, ds->Xd, y, ds->val, n, d, ps->beta);
		for (int64_t i = 0; i < n; i++)
			ps->G[p + 1] += ds->val[i] ? 0 : y[i];
		free(y);
	}
	else
	{
		size_t		q = (size_t) (ps->K - 1) * p;
		int		   *label = malloc(sizeof(int) * (n ? n : 1));

		if (!label)
			worker_fail("out of memory");
		for (int64_t i = 0; i < n; i++)
			label[i] = (int) ds->y[i];
		ps->G[q] += dml_mnlogit_stats(ps->G, ps->H, ds->Xd, label, ds->val, n, d, ps->K, ps->beta);
		for (int64_t i = 0; i < n; i++)
			if (!ds->val[i])
				ps->G[q + 1 + label[i]] += 1;
		free(label);
	}
}

/* polish_rows over this rank's rows: its spill's blocks, then those in memory */
static void
polish_pass(const Dataset *ds, double *G, double *H, const double *beta, int K)
{
	PolishScan	ps = {G, H, beta, K};

	if (ds->spill)
		stream_scan(ds->spill, 0, polish_rows, &ps);
	polish_rows(ds, &ps);
}

/*
 * H (p, p) = the Hessian of the float32 iterations, H32 (their lower
 * blocks, on the standardized inputs (x - mean) * scale, the penalty
 * included), on the raw inputs of the float64 polish: with z = [x, 1]
 * and z_std = A z, theta' z_std = beta' z for beta = A' theta, so
 * H_beta = A^-1 H_theta A^-T, A^-1 = [diag(1 / scale), mean; 0, 1].  The
 * standardized penalty n lambda theta_c^2 / 2 becomes the raw one the
 * polish adds, n lambda beta_c^2 / (2 scale_c^2).  False (H untouched)
 * where an input is constant (scale 0): there the polish forms its own.
 */
static bool
polish_hessian_raw(const double *H32, const double *mean, const double *scale, int d, double *H)
{
	int			p = d + 1;
	double	   *M = malloc(sizeof(double) * p * p);

	if (!M)
		worker_fail("out of memory");
	for (int c = 0; c < d; c++)
		if (!(scale[c] > 0) || !isfinite(scale[c]))
		{
			free(M);
			return false;
		}
	/* M = A^-1 H_theta, H_theta from its lower triangle */
	for (int i = 0; i < p; i++)
		for (int j = 0; j < p; j++)
		{
			double		hij = i >= j ? H32[(size_t) i * p + j] : H32[(size_t) j * p + i],
						hdj = d >= j ? H32[(size_t) d * p + j] : H32[(size_t) j * p + d];

			M[(size_t) i * p + j] = i < d ? hij / scale[i] + mean[i] * hdj : hij;
		}
	/* H = M A^-T */
	for (int i = 0; i < p; i++)
	{
		for (int j = 0; j < d; j++)
			H[(size_t) i * p + j] = M[(size_t) i * p + j] / scale[j] + mean[j] * M[(size_t) i * p + d];
		H[(size_t) i * p + d] = M[(size_t) i * p + d];
	}
	free(M);
	return true;
}

/*
 * newton_polish64
 *		A binary logistic fit finished in float64: from theta (standardized
 *		inputs, float32 products) to beta on the raw float64 rows by full
 *		Newton steps (kernels/logit.c), summed across ranks, until a step
 *		would gain less than 1e-15 of the loss; then the model in float64
 *		and the statistics of the fit from the Hessian there.  The penalty
 *		is the float32 iterations' (weight_decay on the standardized
 *		weights; a tiny one in the Hessian only on one-hot levels), and
 *		makes the standard errors inapplicable (null).
 *
 *		Where they are null anyway, the final point's Hessian has no use
 *		but the test whether to stop: after the first step, a pass sums
 *		only the gradient and the loss, and the test solves with the
 *		Hessian of the point before (near the optimum it barely moves: the
 *		decrement it gives is of the same tiny size).  Should that say
 *		go on, the pass is made again with the Hessian and the step taken
 *		from it, so the steps are the ones the full passes took.  (A pass
 *		over 1,000,000 x 20 rows without the Hessian: 26 ms, with it 47.)
 *		There, too, the first step needs no Hessian of its own where H32,
 *		the float32 iterations' last one, is given (their last statistics
 *		pass was at theta or a full Newton step before it): on synth_1m
 *		the step it steered left a decrement of 4e-15, far under the
 *		test's 1e-15 of the loss (9e-11), so both of the polish's passes
 *		went without the Hessian.
 */
static void
newton_polish64(const Dataset *ds, const WorkerSpec *spec, const double *theta,
				const double *H32, double n, TrainResult *res)
{
	DmlModel   *m = &res->model;
	int			d = ds->d,
				p = d + 1;
	double	   *beta = malloc(sizeof(double) * p);
	double	   *G = malloc(sizeof(double) * (p + 2));	/* gradient, loss, label sum */
	double	   *H = malloc(sizeof(double) * p * p);
	double	   *L = malloc(sizeof(double) * p * p);
	double	   *delta = malloc(sizeof(double) * p);
	double		lambda = n * spec->weight_decay;
	bool		penalized = spec->weight_decay > 0,
				have_h;
	double		llf = 0,
				ybar;

	if (!beta || !G || !H || !L || !delta || dml_model_make_f64(m) != DML_OK)
		worker_fail("out of memory for a %d x %d Hessian", p, p);
	for (int f = 0; f < spec->nfeatures; f++)
		penalized |= spec->features[f].kind == DML_FEAT_CAT;
	/* the float32 iterations' H steers the first step, where the standard errors need none */
	have_h = penalized && H32 && polish_hessian_raw(H32, m->in_mean64, m->in_scale64, d, H);
	/* theta is on (x - mean) * scale: the raw slopes and intercept */
	beta[d] = theta[d];
	for (int c = 0; c < d; c++)
	{
		beta[c] = theta[c] * m->in_scale64[c];
		beta[d] -= beta[c] * m->in_mean64[c];
	}
	for (int iter = 0, again = 0; iter < 10; iter++)
	{
		double		decrement = 0;
		int			last;
		/*
		 * the standard errors null: after a step, the stop test on the
		 * last Hessian; the first step on the float32 iterations' (have_h)
		 */
		bool		hessian = !penalized || (iter == 0 && !have_h) || again;

		memset(G, 0, sizeof(double) * (p + 2));
		if (hessian)
			memset(H, 0, sizeof(double) * p * p);
		polish_pass(ds, G, hessian ? H : NULL, beta, 0);
		comm_allreduce_double(G, p + 2);
		if (hessian)
			comm_allreduce_double(H, (size_t) p * p);
		/* the penalty n lambda / 2 theta_c^2, theta_c = beta_c / scale_c */
		for (int c = 0; c < d; c++)
		{
			double		s2 = m->in_scale64[c] * m->in_scale64[c];

			G[p] += lambda / 2 * beta[c] * beta[c] / s2;
			G[c] += lambda * beta[c] / s2;
			if (hessian)
				H[(size_t) c * p + c] += lambda / s2;
		}
		llf = -G[p];
		ybar = G[p + 1] / n;
		memcpy(L, H, sizeof(double) * p * p);
		memcpy(delta, G, sizeof(double) * p);
		/* the float32 iterations' safeguards, on the raw scale: 1e-10 n on every weight */
		add_onehot_ridge_scaled(L, p, spec, n, m->in_scale64);
		for (int c = 0; c < d; c++)
			L[(size_t) c * p + c] += 1e-10 * n / (m->in_scale64[c] * m->in_scale64[c]);
		L[(size_t) d * p + d] += 1e-10 * n;
		if (dml_cholesky_solve(L, delta, p) != DML_OK)
		{
			/* numerically singular even so: keep the float32 optimum, without standard errors */
			penalized = true;
			break;
		}
		for (int a = 0; a < p; a++)
			decrement += G[a] * delta[a] / 2;
		last = !(decrement > 1e-15 * fmax(fabs(G[p]), 1e-300));
		if (last)
			break;
		if (!hessian && !(iter == 0 && have_h))
		{
			/* not there yet: this point's Hessian, and the step from it */
			again = 1;
			iter--;
			continue;
		}
		again = 0;
		for (int a = 0; a < p; a++)
			beta[a] -= delta[a];
	}
	/* the model: weights on (x - mean) * scale, the bias that gives beta's intercept */
	m->params64[d] = beta[d];
	for (int c = 0; c < d; c++)
	{
		m->params64[c] = beta[c] / m->in_scale64[c];
		m->params64[d] += beta[c] * m->in_mean64[c];
	}
	dml_model_sync_f32(m);
	/* the statistics: (X'WX)^-1 at the optimum */
	{
		char	  **terms = malloc(sizeof(char *) * (d ? d : 1));
		double		llnull = n * (ybar > 0 ? ybar * log(ybar) : 0) +
			n * (ybar < 1 ? (1 - ybar) * log(1 - ybar) : 0);
		bool		inverted = !penalized && dml_spd_inverse(H, p) == DML_OK;
		double	   *V = NULL;
		const char *cov_type = NULL;
		size_t		len;

		/* robust: H^-1 (sum_i (y_i - p_i)^2 z_i z_i') H^-1 */
		if (inverted && spec->cov_type != DML_COV_NONROBUST)
		{
			robust_cov(ds, spec, beta, H, p, 1, &V);
			cov_type = dml_job_name(DML_NAMES_COV, spec->cov_type);
		}
		for (int c = 0; c < d; c++)
			terms[c] = input_name(spec, c);
		len = dml_logit_json(beta, V ? V : inverted ? H : NULL, cov_type, d, n, llf, llnull,
							 (const char *const *) terms, NULL, 0);
		res->statistics_json = malloc(len);
		if (!res->statistics_json)
			worker_fail("out of memory");
		dml_logit_json(beta, V ? V : inverted ? H : NULL, cov_type, d, n, llf, llnull,
					   (const char *const *) terms, res->statistics_json, len);
		for (int c = 0; c < d; c++)
			free(terms[c]);
		free(terms);
		free(V);
	}
	res->final_loss = -llf / n;
	free(beta);
	free(G);
	free(H);
	free(L);
	free(delta);
}

/* the label of output index k, for the statistics */
static char *
class_name(const WorkerSpec *spec, int k)
{
	char		buf[32];

	for (int i = 0; i < spec->nclasses; i++)
		if (spec->class_index && spec->class_index[i] == k && spec->classes[i])
			return strdup(spec->classes[i]);
	snprintf(buf, sizeof(buf), "%d", k);
	return strdup(buf);
}

/*
 * newton_polish64_mn
 *		newton_polish64 for softmax: theta (K-1, p) on standardized inputs,
 *		class K-1 the reference, to b on the raw float64 rows by full
 *		Newton steps (kernels/logit.c's dml_mnlogit_stats), the same
 *		penalty and safeguards as the float32 iterations; then the float64
 *		model and the statistics, which dml_mnlogit_json turns to the first
 *		class as the reference, as statsmodels' MNLogit reports them.  A
 *		constant input (scale 0) keeps slope 0 in every class.
 */
static void
newton_polish64_mn(const Dataset *ds, const WorkerSpec *spec, const double *theta, double n,
				   TrainResult *res)
{
	DmlModel   *m = &res->model;
	int			d = ds->d,
				p = d + 1,
				K = m->net.sizes[1],
				Kf = K - 1;
	size_t		q = (size_t) Kf * p;
	double	   *b = malloc(sizeof(double) * q);
	double	   *G = malloc(sizeof(double) * (q + 1 + K));	/* gradient, loss, class counts */
	double	   *H = malloc(sizeof(double) * q * q);
	double	   *L = malloc(sizeof(double) * q * q);
	double	   *delta = malloc(sizeof(double) * q);
	double		lambda = n * spec->weight_decay;
	bool		penalized = spec->weight_decay > 0;
	double		llf = 0,
				llnull = 0;

	if (!b || !G || !H || !L || !delta || dml_model_make_f64(m) != DML_OK)
		worker_fail("out of memory for a %zu x %zu Hessian", q, q);
	for (int f = 0; f < spec->nfeatures; f++)
		penalized |= spec->features[f].kind == DML_FEAT_CAT;
	for (int k = 0; k < Kf; k++)
	{
		const double *t = theta + (size_t) k * p;
		double	   *bk = b + (size_t) k * p;

		bk[d] = t[d];
		for (int c = 0; c < d; c++)
		{
			bk[c] = t[c] * m->in_scale64[c];
			bk[d] -= bk[c] * m->in_mean64[c];
		}
	}
	for (int iter = 0; iter < 10; iter++)
	{
		double		decrement = 0;

		memset(G, 0, sizeof(double) * (q + 1 + K));
		memset(H, 0, sizeof(double) * q * q);
		polish_pass(ds, G, H, b, K);
		comm_allreduce_double(G, q + 1 + K);
		comm_allreduce_double(H, q * q);
		for (int k = 0; k < Kf; k++)
			for (int c = 0; c < d; c++)
			{
				size_t		a = (size_t) k * p + c;
				double		s2 = m->in_scale64[c] * m->in_scale64[c];

				if (s2 == 0)
				{
					/* a constant input: its slope stays 0 (an identity row) */
					memset(H + a * q, 0, sizeof(double) * q);
					for (size_t r = 0; r < q; r++)
						H[r * q + a] = 0;
					H[a * q + a] = 1;
					G[a] = 0;
					continue;
				}
				G[q] += lambda / 2 * b[a] * b[a] / s2;
				G[a] += lambda * b[a] / s2;
				H[a * q + a] += lambda / s2;
			}
		llf = -G[q];
		memcpy(L, H, sizeof(double) * q * q);
		memcpy(delta, G, sizeof(double) * q);
		for (int k = 0; k < Kf; k++)
		{
			double	   *Lk = L + ((size_t) k * p) * q + (size_t) k * p;

			add_onehot_ridge_scaled(Lk, (int) q, spec, n, m->in_scale64);
			for (int c = 0; c < d; c++)
				if (m->in_scale64[c] > 0)
					Lk[(size_t) c * q + c] += 1e-10 * n / (m->in_scale64[c] * m->in_scale64[c]);
			Lk[(size_t) d * q + d] += 1e-10 * n;
		}
		if (dml_cholesky_solve(L, delta, (int) q) != DML_OK)
		{
			penalized = true;
			break;
		}
		for (size_t a = 0; a < q; a++)
			decrement += G[a] * delta[a] / 2;
		if (!(decrement > 1e-15 * fmax(fabs(G[q]), 1e-300)))
			break;
		for (size_t a = 0; a < q; a++)
			b[a] -= delta[a];
	}
	for (int k = 0; k < K; k++)
		if (G[q + 1 + k] > 0)
			llnull += G[q + 1 + k] * log(G[q + 1 + k] / n);
	/* the model: class k's weights on (x - mean) * scale and its bias; the last class 0 */
	memset(m->params64, 0, sizeof(double) * m->net.nparams);
	for (int k = 0; k < Kf; k++)
	{
		const double *bk = b + (size_t) k * p;
		double	   *bias = m->params64 + (size_t) K * d + k;

		*bias = bk[d];
		for (int c = 0; c < d; c++)
		{
			m->params64[(size_t) k * d + c] = m->in_scale64[c] > 0 ? bk[c] / m->in_scale64[c] : 0;
			*bias += bk[c] * m->in_mean64[c];
		}
	}
	dml_model_sync_f32(m);
	{
		char	  **terms = malloc(sizeof(char *) * (d ? d : 1));
		char	  **classes = malloc(sizeof(char *) * K);
		bool		inverted = !penalized && dml_spd_inverse(H, (int) q) == DML_OK;
		size_t		len;

		for (int c = 0; c < d; c++)
			terms[c] = input_name(spec, c);
		for (int k = 0; k < K; k++)
			classes[k] = class_name(spec, k);
		len = dml_mnlogit_json(b, inverted ? H : NULL, d, K, n, llf, llnull,
							   (const char *const *) terms, (const char *const *) classes,
							   NULL, 0);
		res->statistics_json = malloc(len);
		if (!res->statistics_json)
			worker_fail("out of memory");
		dml_mnlogit_json(b, inverted ? H : NULL, d, K, n, llf, llnull,
						 (const char *const *) terms, (const char *const *) classes,
						 res->statistics_json, len);
		for (int c = 0; c < d; c++)
			free(terms[c]);
		for (int k = 0; k < K; k++)
			free(classes[k]);
		free(terms);
		free(classes);
	}
	res->final_loss = -llf / n;
	free(b);
	free(G);
	free(H);
	free(L);
	free(delta);
}

/* a spilled block's training labels onto nw->label */
static void
newton_labels_block(const Dataset *v, void *arg)
{
	Newton	   *nw = arg;

	for (int64_t i = 0; i < v->n; i++)
		if (!v->val[i])
			nw->label[nw->nt++] = (int) v->y[i];
}

/*
 * With float64 rows (ds->wide) the float32 iterations hand over to the
 * float64 polish (newton_polish64), which takes full Newton steps until a
 * step would gain less than 1e-15 of the loss.  Once a nearly full step
 * was predicted to gain at most this share of the loss, the next float32
 * iteration would only measure what is left (quadratic convergence: about
 * its square, below float32's reach) and stop: the polish's first pass
 * measures it in float64 at the same point instead, one pass over the
 * rows fewer.  Where the step before was nearly full too, that iteration
 * takes its full step without a search (two passes fewer: the direction's
 * logits and the search's trial).
 */
#define NEWTON_HANDOVER	1e-6

/*
 * delta = H^-1 g: the lower blocks mirrored to the upper, the safeguards
 * added (a ridge of 1e-10 n, and on one-hot levels), then a Cholesky
 * solve, which overwrites H
 */
static DmlStatus
newton_direction(const Newton *nw, const WorkerSpec *spec, const double *g, double *H,
				 double *delta)
{
	size_t		q = nw->q;

	for (size_t i = 0; i < q; i++)
		for (size_t j = i + 1; j < q; j++)
			H[i * q + j] = H[j * q + i];
	for (size_t i = 0; i < q; i++)
		H[i * q + i] += 1e-10 * nw->n;	/* separable data: keep H positive definite */
	add_onehot_ridge(H, nw->p, nw->Kf, spec, nw->n);
	memcpy(delta, g, sizeof(double) * q);
	return dml_cholesky_solve(H, delta, (int) q);
}

/* where an iteration's time and bytes are counted from and to */
typedef struct NewtonClock
{
	double		t;
	double		bytes;
	double		across;
} NewtonClock;

static NewtonClock
newton_clock(void)
{
	NewtonClock c = {dml_clock_seconds(), comm_job_bytes(), comm_job_bytes_across()};

	return c;
}

/*
 * The search on every row (newton_search) from theta along -delta; theta
 * takes the step it found, and eta follows in the next statistics pass.
 * Returns the step, 0 when no trial decreased the loss.
 */
static double
newton_search_step(Newton *nw, double *theta, const double *delta, double loss,
				   const double *first, double *new_loss)
{
	double		step = newton_search(nw, theta, delta, loss, first, new_loss);

	if (step > 0)
	{
		for (size_t i = 0; i < nw->q; i++)
			theta[i] -= step * delta[i];
		nw->step = step;
	}
	return step;
}

/*
 * An iteration's end: its progress message (loss new_loss, its time and
 * bytes from *start to *end), then whether another follows (not done,
 * within epochs); if so it starts at *end
 */
static bool
newton_next(const WorkerSpec *spec, TrainResult *res, double n, int *iter, NewtonClock *start,
			const NewtonClock *end, double new_loss, bool done)
{
	res->final_loss = new_loss / n;
	res->epochs_run = *iter;
	report(*iter, res->final_loss, n, end->t - start->t, end->bytes - start->bytes,
		   end->across - start->across);
	if (done)
	{
		res->stopped = DML_STOP_CONVERGED;
		return false;
	}
	if (++*iter > spec->epochs)
		return false;
	*start = *end;
	maybe_inject_fault(spec, *iter, NULL);
	return true;
}

/*
 * train_newton
 *		Newton's method with a line search.  Stops when the Newton
 *		decrement (the improvement a full step predicts) or the improvement
 *		of the step just taken is at most tolerance times the loss, or
 *		after epochs iterations.
 */
void
train_newton(Dataset *ds, const WorkerSpec *spec, TrainResult *res)
{
	DmlModel   *m = &res->model;
	int			K = m->net.sizes[1];
	Newton		nw;
	size_t		q;
	double	   *theta,
			   *g,
			   *H,
			   *delta;
	float	   *vf;
	double	   *H_last;			/* the last statistics pass's H (lower blocks) */
	double		loss = 0,
				last_step = 0,	/* the step the iteration before took */
				t_start = dml_clock_seconds();
	NewtonClock start,
				end = {0, 0, 0};
	int			iter,
				have_loss = 0,
				h_last = 0,
				sampled;
	size_t		eta_bytes;

	memset(&nw, 0, sizeof(nw));
	nw.ds = ds;
	nw.d = ds->d;
	nw.p = ds->d + 1;
	nw.binary = spec->loss == DML_LOSS_BCE;
	nw.Kf = nw.binary ? 1 : K - 1;
	nw.q = q = (size_t) nw.Kf * nw.p;
	nw.lambda = spec->weight_decay;
	if (ds->spill)
	{
		/* a spilled slice: the training rows' labels in row order, one pass */
		int64_t		nval;

		stream_counts(ds->spill, &nw.nt, &nval);
		nw.label = malloc(sizeof(int) * (nw.nt ? nw.nt : 1));
		if (!nw.label)
			worker_fail("out of memory for %lld labels", (long long) nw.nt);
		nw.nt = 0;
		stream_scan(ds->spill, 0, newton_labels_block, &nw);
	}
	else
	{
		nw.rows = malloc(sizeof(int64_t) * (ds->n ? ds->n : 1));
		nw.label = malloc(sizeof(int) * (ds->n ? ds->n : 1));
		if (!nw.rows || !nw.label)
			worker_fail("out of memory");
		for (int64_t i = 0; i < ds->n; i++)
			if (!ds->val[i])
			{
				nw.rows[nw.nt] = i;
				nw.label[nw.nt] = (int) ds->y[i];
				nw.nt++;
			}
	}
	nw.n = nw.nt;
	comm_allreduce_double(&nw.n, 1);
	{
		/*
		 * A spilled slice's per-row logits and labels stay in memory: they
		 * must fit what the budget leaves for rows, on every rank.
		 */
		double		per_row = 16.0 * nw.Kf + 4;
		double		need = ds->spill ? nw.nt * per_row : 0;
		double		room = (double) stream_data_budget(spec);
		double		over = need > room ? need : 0;

		comm_allreduce_max_double(&over, 1);
		if (over > 0)
			worker_user_error("53200|Give the job more memory (dml.worker_memory, options \"memory\"), or use an iterative optimizer such as lbfgs or adam.|"
							  "Newton's method keeps %.0f bytes a training row in memory, and a worker's rows need %.1f MB, more than the %.1f MB its memory of %lld MB leaves for rows",
							  per_row, over / 1048576.0, room / 1048576.0, (long long) (spec->memory >> 20));
	}
	/*
	 * in 2 MB pages where they are large (dml_big_realloc): each first
	 * write of a 4 KB page is a fault, 2,048 of them for synth_1m's eta_d
	 * in the pass that first writes it
	 */
	eta_bytes = sizeof(double) * (nw.nt ? nw.nt : 1) * nw.Kf;
	nw.eta = dml_big_realloc(NULL, 0, eta_bytes);
	nw.eta_d = dml_big_realloc(NULL, 0, eta_bytes);
	if (nw.eta)
		memset(nw.eta, 0, eta_bytes);
	theta = calloc(q, sizeof(double));
	g = malloc(sizeof(double) * q);
	H = malloc(sizeof(double) * q * q);
	delta = malloc(sizeof(double) * q);
	vf = malloc(sizeof(float) * q);
	H_last = malloc(sizeof(double) * q * q);
	if (!nw.label || !nw.eta || !nw.eta_d || !theta || !g || !H || !delta || !vf || !H_last)
		worker_fail("out of memory for a %zu x %zu Hessian", q, q);

	{
		/* located on a sample only where every rank holds its rows in memory */
		double		spilled = ds->spill != NULL;

		comm_allreduce_max_double(&spilled, 1);
		sampled = spilled == 0 && nw.n >= 16.0 * NEWTON_SAMPLE_MIN;
	}
	if (sampled)
		newton_sample_alloc(&nw);	/* the first pass fills its rows */
	newton_panels(&nw, true);	/* laid out by the first pass */
	{
		double		panels = nw.pack;

		comm_allreduce_double(&panels, 1);
		res->newton_panels = (int) panels;
	}
	res->newton = true;
	iter = 1;
	start = newton_clock();
	maybe_inject_fault(spec, iter, NULL);
	for (;;)
	{
		double		decrement = 0,
					step,
					new_loss;
		int			done = 0,
					have_stats = 0;

		if (nw.step_vf)
		{
			/*
			 * the step newton_locate found on the sample: this pass
			 * measures its loss on every row (and makes its logits), and
			 * its statistics are the next iteration's, whose time it
			 * counts in (each iteration one pass)
			 */
			double		t = nw.step;

			new_loss = newton_stats(&nw, theta, g, H, 1);
			have_stats = 1;
			last_step = t;
			if (!(new_loss <= loss))
			{
				/*
				 * not below: back to the point before (the direction's
				 * logits made again, as this pass made them), and the
				 * search on every row
				 */
				newton_logits(&nw, delta, nw.eta_d, NULL, newton_tiles(&nw));
				for (size_t i = 0; i < (size_t) nw.nt * nw.Kf; i++)
					nw.eta[i] += t * nw.eta_d[i];
				nw.s_eta_ok = 0;	/* until the next statistics pass */
				for (size_t i = 0; i < q; i++)
					theta[i] += t * delta[i];
				have_stats = 0;
				res->newton_again++;
				last_step = newton_search_step(&nw, theta, delta, loss, NULL, &new_loss);
				done = last_step == 0;	/* no descent left in float64 */
				/* the iteration took this pass and the search too */
				end = newton_clock();
			}
			if (loss - new_loss <= spec->tolerance * fmax(fabs(new_loss), 1e-300))
				done = 1;
			loss = new_loss;
			if (!newton_next(spec, res, nw.n, &iter, &start, &end, new_loss, done))
				break;
		}
		if (!have_stats)
		{
			/* statistics at theta; the loss comes with the first pass only */
			new_loss = newton_stats(&nw, theta, g, H, !have_loss);
			if (!have_loss)
				loss = new_loss;
			have_loss = 1;
		}
		for (;;)
		{
			/* H as summed (the lower blocks), for the float64 polish */
			memcpy(H_last, H, sizeof(double) * q * q);
			if (newton_direction(&nw, spec, g, H, delta) == DML_OK)
				break;
			if (nw.precise)
				worker_user_error("22000|Add weight_decay, or remove collinear features.|"
								  "the Hessian is singular at iteration %d", iter);
			/*
			 * Nearly singular (rare classes, near separation): float32
			 * rounding can tip it over, so from here on form it in double.
			 */
			newton_panels(&nw, false);	/* the double blocks take copies of rows */
			nw.precise = 1;
			res->newton_precise = iter;
			newton_stats(&nw, theta, g, H, 0);
		}
		for (size_t i = 0; i < q; i++)
			decrement += g[i] * delta[i] / 2;
		new_loss = loss;
		/* whether the polish starts at theta or a full step from it: H_last steers it */
		h_last = 0;
		if (decrement <= spec->tolerance * fmax(fabs(loss), 1e-300))
			done = h_last = 1;	/* a full step would gain less than tolerance */
		else if (ds->wide && fabs(last_step - 1) <= 0.25 &&
				 decrement <= NEWTON_HANDOVER * fmax(fabs(loss), 1e-300))
		{
			/*
			 * in Newton's quadratic region (the step before was nearly
			 * full) with at most NEWTON_HANDOVER of the loss to gain: the
			 * full step, unsearched, and the float64 polish, whose first
			 * pass measures the loss there (the search would have read
			 * the rows once more to accept t = 1)
			 */
			for (size_t i = 0; i < q; i++)
				theta[i] -= delta[i];
			done = h_last = 1;
		}
		else if (sampled && iter < spec->epochs)
		{
			/*
			 * the step located on the sample, and measured by the next
			 * statistics pass, which ends this iteration: one pass over
			 * the rows an iteration, not three (the direction's logits
			 * and the search's trials read them again).  The last
			 * iteration allowed searches on every row, so that the
			 * point it ends at is one whose loss was measured.
			 */
			step = newton_locate(&nw, theta, delta);
			res->newton_sampled++;
			for (size_t i = 0; i < q; i++)
			{
				vf[i] = (float) delta[i];
				theta[i] -= step * delta[i];
			}
			nw.step = step;
			nw.step_vf = vf;
			/* the iteration's end, reported once the next pass has measured its loss */
			end = newton_clock();
			continue;
		}
		else
		{
			double		first[3];

			newton_logits(&nw, delta, nw.eta_d, first, true);
			res->newton_full++;
			step = newton_search_step(&nw, theta, delta, loss, nw.binary ? first : NULL, &new_loss);
			last_step = step;
			if (step == 0)
				done = 1;		/* no descent left in float64 */
			else if (loss - new_loss <= spec->tolerance * fmax(fabs(new_loss), 1e-300))
				done = 1;
			else if (ds->wide && fabs(step - 1) <= 0.25 &&
					 decrement <= NEWTON_HANDOVER * fmax(fabs(loss), 1e-300))
				done = 1;		/* the float64 polish's first pass checks it */
		}
		loss = new_loss;
		end = newton_clock();
		if (!newton_next(spec, res, nw.n, &iter, &start, &end, new_loss, done))
			break;
	}
	if (ds->wide)
	{
		if (nw.binary)
			newton_polish64(ds, spec, theta, h_last ? H_last : NULL, nw.n, res);
		else
			newton_polish64_mn(ds, spec, theta, nw.n, res);
		goto done;
	}
	/* into the network: free logits from theta, the reference class zero */
	memset(m->net.params, 0, sizeof(float) * m->net.nparams);
	for (int k = 0; k < nw.Kf; k++)
	{
		for (int c = 0; c < ds->d; c++)
			m->net.params[(size_t) k * ds->d + c] = (float) theta[(size_t) k * nw.p + c];
		m->net.params[(size_t) K * ds->d + k] = (float) theta[(size_t) k * nw.p + ds->d];
	}
done:
	res->train_seconds = dml_clock_seconds() - t_start;
	res->rows_per_second = res->train_seconds > 0 ? nw.n * res->epochs_run / res->train_seconds : 0;
	free(nw.rows);
	free(nw.label);
	dml_big_free(nw.eta, eta_bytes);
	dml_big_free(nw.eta_d, eta_bytes);
	free(nw.s_eta);
	free(nw.s_eta_d);
	free(nw.s_label);
	free(nw.s_x);
	free(nw.lanes);
	free(nw.dlanes);
	free(theta);
	free(g);
	free(H);
	free(delta);
	free(vf);
	free(H_last);
}
