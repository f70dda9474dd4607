/*-------------------------------------------------------------------------
 *
 * prepare.c
 *	  Global feature preparation: the data checks, the NULL policy, and
 *	  standardization from statistics reduced over every rank (never one
 *	  rank's slice alone).  A spilled slice (stream.c) is prepared in one
 *	  pass over its blocks and standardized as each block is read.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "comm.h"
#include "worker.h"

/* drop rows where keep[i] is 0, in place */
static void
compact(Dataset *ds, const unsigned char *keep)
{
	int64_t		w = 0;

	for (int64_t i = 0; i < ds->n; i++)
	{
		if (!keep[i])
			continue;
		if (w != i)
		{
			memmove(ds->X + (size_t) w * ds->d, ds->X + (size_t) i * ds->d, sizeof(float) * ds->d);
			ds->y[w] = ds->y[i];
			ds->val[w] = ds->val[i];
			if (ds->wide)
			{
				memmove(ds->Xd + (size_t) w * ds->d, ds->Xd + (size_t) i * ds->d,
						sizeof(double) * ds->d);
				ds->yd[w] = ds->yd[i];
			}
		}
		w++;
	}
	ds->n = w;
}

/* whether row i has a NULL (NaN) feature */
static int
row_has_null(const Dataset *ds, int64_t i)
{
	const float *x = ds->X + (size_t) i * ds->d;

	for (int c = 0; c < ds->d; c++)
		if (isnan(x[c]))
			return 1;
	return 0;
}

/*
 * NaN (a NULL) tested by the value's bits: a float comparison may trap, so
 * under -ftrapping-math GCC turns none into a select, and the column loops
 * around them stayed scalar
 */
static inline int
nan_bits_f32(float v)
{
	uint32_t	bits;

	memcpy(&bits, &v, sizeof(bits));
	return (bits & 0x7fffffffu) > 0x7f800000u;
}

static inline int
nan_bits_f64(double v)
{
	uint64_t	bits;

	memcpy(&bits, &v, sizeof(bits));
	return (bits & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
}

/*
 * step 3's sums over ds's rows: inputs and target of the training rows, and
 * every row.  The input sums run in local arrays the compiler may keep
 * apart from everything else (restrict), with NaN taken out by a select,
 * so the column loop vectorizes; they start from stats[] and go back there
 * at the end, so each is the same running sum in row order as before.
 * (Through stats[] itself GCC kept a scalar loop with a branch a value and
 * three loads and stores: 7% of the logistic job's worker samples.)
 */
static void
add_stats(const Dataset *ds, double *stats)
{
	int			d = ds->d;
	double	   *acc = calloc(3 * (size_t) (d ? d : 1), sizeof(double));
	double	   *restrict s1 = acc,
			   *restrict s2 = acc + d,
			   *restrict cnt = acc + 2 * (size_t) d;
	double		y1 = stats[3 * d],
				y2 = stats[3 * d + 1],
				ntrain = stats[3 * d + 2];

	if (acc == NULL)
		worker_fail("out of memory");
	/* from the sums so far: the same additions in the same order as one running sum */
	memcpy(acc, stats, sizeof(double) * 3 * d);
	for (int64_t i = 0; i < ds->n; i++)
	{
		const float *restrict x = ds->X + (size_t) i * d;

		if (ds->val[i])
			continue;
		for (int c = 0; c < d; c++)
		{
			float		v = x[c];
			int			ok = !nan_bits_f32(v);
			uint32_t	bits;
			double		w;

			/* NaN becomes +0 by a mask: a select on v would not vectorize either */
			memcpy(&bits, &v, sizeof(bits));
			bits &= -(uint32_t) ok;
			memcpy(&v, &bits, sizeof(v));
			w = v;
			s1[c] += w;
			s2[c] += w * w;
			cnt[c] += ok;
		}
		y1 += ds->y[i];
		y2 += (double) ds->y[i] * ds->y[i];
		ntrain += 1;
	}
	memcpy(stats, acc, sizeof(double) * 3 * d);
	stats[3 * d] = y1;
	stats[3 * d + 1] = y2;
	stats[3 * d + 2] = ntrain;
	stats[3 * d + 3] += (double) ds->n;
	free(acc);
}

typedef struct PrepBlock
{
	const WorkerSpec *spec;
	double	   *stats;
	int			skip;
} PrepBlock;

/*
 * One spilled block, raw: label keys to output indices, validation
 * membership, the NULL policy, the sums; the block keeps its kept rows.
 */
static void
prepare_block(Dataset *v, void *arg)
{
	PrepBlock  *pb = arg;
	const WorkerSpec *spec = pb->spec;
	unsigned char *keep = malloc(v->n ? v->n : 1);

	if (keep == NULL)
		worker_fail("out of memory");
	for (int64_t i = 0; i < v->n; i++)
	{
		if (v->keys && !isnan(v->y[i]))
		{
			v->y[i] = (float) load_label_of_key(spec, v->keys[i]);
			if (v->wide)
				v->yd[i] = v->y[i];
		}
		v->val[i] = spec->validation > 0 && load_held_out(v, i, spec->seed, spec->validation);
		keep[i] = !isnan(v->y[i]) && !(pb->skip && row_has_null(v, i));
	}
	compact(v, keep);
	free(keep);
	add_stats(v, pb->stats);
}

/*
 * class_weights
 *		ds->class_weight from class_weight => ...: the backend's weights by
 *		output index, or 'balanced' as scikit-learn defines it, n / (K n_k)
 *		over the training rows of every rank (validation rows left out).
 */
static void
class_weights(Dataset *ds, const WorkerSpec *spec)
{
	int			K = spec->nclasses;
	double	   *count = calloc(K + 1, sizeof(double));

	ds->class_weight = malloc(sizeof(float) * K);
	if (!count || !ds->class_weight)
		worker_fail("out of memory");
	if (strcmp(spec->class_weight, "balanced") != 0)
	{
		const char *p = spec->class_weight;

		for (int k = 0; k < K; k++)
		{
			char	   *end;

			ds->class_weight[k] = (float) strtod(p, &end);
			if (end == p || (*end != ',' && *end != '\0'))
				worker_fail("malformed class_weight \"%s\"", spec->class_weight);
			p = *end ? end + 1 : end;
		}
		free(count);
		return;
	}
	for (int64_t i = 0; i < ds->n; i++)
		if (!ds->val[i] && ds->y[i] >= 0 && ds->y[i] < K)
			count[(int) ds->y[i]] += 1;
	for (int k = 0; k < K; k++)
		count[K] += count[k];
	comm_allreduce_double(count, K + 1);
	for (int k = 0; k < K; k++)
		ds->class_weight[k] = count[k] > 0 ? (float) (count[K] / (K * count[k])) : 0.0f;
	free(count);
}

/* spec's network over d inputs, its parameters not yet set */
static void
alloc_model(DmlModel *model, const WorkerSpec *spec, int d)
{
	int			sizes[DML_MAX_LAYERS + 1];
	int			nlayers = spec->nhidden + 1;

	sizes[0] = d;
	for (int l = 0; l < spec->nhidden; l++)
		sizes[l + 1] = spec->hidden[l];
	sizes[nlayers] = spec->outputs;
	if (dml_model_alloc(model, nlayers, sizes, spec->activation, spec->loss) != DML_OK)
		worker_fail("out of memory for the model");
}

/*
 * Whether to look for the rows as bytes (DmlRows8) while standardizing
 * them: a model of one layer of 2 to 12 outputs trained by minibatches on
 * a CPU with the skinny kernels (softmax regression: train.c reads its
 * rows where they lie every step), or an MLP trained by minibatches on a
 * CPU where dml_rows8_gather runs (its row-shuffle steps gather the
 * minibatch from the bytes; not with "shuffle": "blocks", whose steps
 * gather float32 blocks), rows in memory, three epochs or more,
 * room in the budget for a byte a value beside them, and options
 * "byte_rows" not false.  The divisor is the first row's: 1 where its
 * inputs are bytes as they are, else 255 (pixels scaled to [0, 1]).  Any
 * value that is not a byte there drops them (prepare_data).
 */
static void
bytes_begin(Dataset *ds, const WorkerSpec *spec)
{
	int			d = ds->d;

	ds->X8 = NULL;
	if (!ds->bytes_ok || !spec->byte_rows || ds->spill || ds->n == 0 || d == 0 ||
		spec->optimizer == DML_JOB_OPT_EXACT ||
		spec->optimizer == DML_JOB_OPT_NEWTON || spec->optimizer == DML_JOB_OPT_LBFGS ||
		!(spec->nhidden > 0 ? dml_rows8_gather_applies() && spec->shuffle != DML_SHUFFLE_BLOCKS :
		  spec->outputs >= 2 && dml_skinny_applies(2, spec->outputs)) || spec->epochs < 3 ||
		(double) ds->n * (double) (stream_row_cost(spec) + d) > (double) stream_data_budget(spec))
		return;
	/*
	 * in 2 MB pages (from DML_BIG_MIN up): the steps read these rows in a
	 * random order, a row's 784 bytes at a time for Fashion-MNIST, and in 4
	 * KB pages nearly every row missed the TLB: the skinny forward pass
	 * over 54,000 x 784 bytes took 25.0 ms an epoch there against 19.9 in
	 * 2 MB pages (a /tmp loop alternating the two, AMD EPYC, KVM).  The
	 * float32 rows of wide tables stay in 4 KB pages (load.c): four times
	 * the bytes to clear at the first touch, which cost more than it gave.
	 */
	ds->X8 = dml_big_realloc(NULL, 0, (size_t) ds->n * d);
	if (ds->X8)
		ds->div8 = dml_rows8_row(ds->X8, ds->X, d, 1.0f) ? 1.0f : 255.0f;
}

/*
 * prepare_data
 *		Check and clean the rows, then standardize them in place; the
 *		statistics go into the model (allocated here).
 */
void
prepare_data(Dataset *ds, const WorkerSpec *spec, DmlModel *model)
{
	int			nf = spec->nfeatures;
	int			d = ds->d;
	size_t		nc = 3 * (size_t) nf + 4;
	double	   *counts = calloc(nc, sizeof(double));
	double	   *stats;
	unsigned char *keep;
	int			skip = spec->nulls == DML_NULLS_SKIP;
	int			impute = spec->nulls == DML_NULLS_IMPUTE;
	double		total,
				total_train;
	bool		any_null = false;	/* a NULL feature on some rank: NaN in its rows */

	/* 1. what every rank saw */
	for (int f = 0; f < nf; f++)
	{
		counts[f] = (double) ds->null_count[f];
		counts[nf + f] = (double) ds->bad_count[f];
		counts[2 * nf + f] = (double) ds->width_errors[f];
	}
	counts[3 * nf] = (double) ds->target_nulls;
	counts[3 * nf + 1] = (double) ds->target_bad;
	counts[3 * nf + 2] = (double) ds->unknown_labels;
	counts[3 * nf + 3] = (double) (ds->spill ? stream_loaded_rows(ds->spill) : ds->n);
	comm_allreduce_double(counts, nc);
	ds->rows_read = (int64_t) counts[3 * nf + 3];

	if (counts[3 * nf + 3] == 0)
		worker_user_error("22000|Training needs data: load rows first, or check row-level security policies.|"
						  "the relation has no rows");
	for (int f = 0; f < nf; f++)
	{
		if (counts[2 * nf + f] > 0)
			worker_user_error("22000|Every row's array must have the same length, %d here.|"
							  "array column \"%s\" has %.0f rows of another length or shape",
							  spec->features[f].width, spec->features[f].name, counts[2 * nf + f]);
		if (counts[nf + f] > 0)
			worker_user_error("22000|Leave such rows out with a view, e.g. WHERE %s NOT IN ('NaN', 'Infinity', '-Infinity'), or scale the column: it must fit a float32.|"
							  "column \"%s\" has %.0f NaN, infinite or out-of-range values",
							  spec->features[f].name, spec->features[f].name, counts[nf + f]);
		if (counts[f] >= counts[3 * nf + 3] && spec->features[f].kind != DML_FEAT_VEC)
			worker_user_error("22004|Leave the column out of features.|"
							  "column \"%s\" is NULL in every row", spec->features[f].name);
		any_null |= counts[f] > 0;
		if (counts[f] > 0 && !skip && !impute)
			worker_user_error("22004|Pass nulls => 'skip' to leave those rows out, or nulls => 'impute' to use the column's mean.|"
							  "column \"%s\" has %.0f NULL values", spec->features[f].name, counts[f]);
	}
	if (counts[3 * nf + 1] > 0)
		worker_user_error("22000|Leave such rows out with a view, or scale the target: it must fit a float32.|"
						  "the target has %.0f NaN, infinite or out-of-range values", counts[3 * nf + 1]);
	if (counts[3 * nf] > 0 && !skip && !impute)
		worker_user_error("22004|Pass nulls => 'skip' to leave rows without a target out.|"
						  "the target column has %.0f NULL values", counts[3 * nf]);
	if (counts[3 * nf + 2] > 0)
		worker_user_error("40001|Train again: the table changed while the job started.|"
						  "%.0f rows carry labels the coordinator did not see", counts[3 * nf + 2]);

	/*
	 * 2. the NULL policy: rows without a target always go; skip drops the
	 * rest.  3. statistics over the training rows of every rank.  A
	 * spilled slice does both in one pass over its blocks, which first
	 * maps listed label keys and holds rows out, as load_slices does in
	 * memory.
	 */
	stats = calloc(3 * (size_t) d + 4, sizeof(double));
	if (ds->spill)
	{
		PrepBlock	pb = {spec, stats, skip};

		stream_rewrite(ds->spill, prepare_block, &pb);
	}
	else
	{
		keep = malloc(ds->n ? ds->n : 1);
		for (int64_t i = 0; i < ds->n; i++)
			keep[i] = !isnan(ds->y[i]) && !(skip && row_has_null(ds, i));
		compact(ds, keep);
		free(keep);
		add_stats(ds, stats);
	}
	comm_allreduce_double(stats, 3 * (size_t) d + 4);
	total = stats[3 * d + 3];
	total_train = stats[3 * d + 2];
	if (total < 2)
		worker_user_error("22000|Training needs at least 2 rows with a target%s.|"
						  "only %.0f usable row%s", skip ? " and no NULL feature" : "",
						  total, total == 1 ? "" : "s");
	if (total_train < 1)
		worker_user_error("22023|Lower validation so that some rows remain for training.|"
						  "every row was held out for validation");

	/* 4. the model, with its standardization */
	alloc_model(model, spec, d);

	for (int f = 0; f < nf; f++)
	{
		const DmlFeature *ft = &spec->features[f];

		for (int c = ft->offset; c < ft->offset + ft->width; c++)
		{
			double		n = stats[2 * d + c];
			double		mean = n > 0 ? stats[c] / n : 0;
			double		var = n > 0 ? stats[d + c] / n - mean * mean : 0;
			double		sd = var > 0 ? sqrt(var) : 0;

			/*
			 * A constant input carries no information: it is standardized
			 * to zero (scale 0), so it contributes nothing, in training
			 * and at predict time alike; the backend names it (NOTICE, metrics).
			 */
			model->in_mean[c] = (float) mean;
			model->in_scale[c] = sd <= 1e-12 * fmax(1.0, fabs(mean)) ? 0.0f : (float) (1.0 / sd);
		}
	}
	if (spec->loss == DML_LOSS_MSE)
	{
		double		n = total_train;
		double		mean = stats[3 * d] / n;
		double		var = stats[3 * d + 1] / n - mean * mean;
		double		sd = var > 0 ? sqrt(var) : 0;

		model->out_mean[0] = (float) mean;
		model->out_scale[0] = sd > 1e-12 ? (float) sd : 1.0f;
	}

	/*
	 * 5. impute, then standardize in place; float64 rows stay raw (the QR
	 * needs no scaling).  A spilled slice is standardized as each block is
	 * read, by the same operations.
	 */
	if (ds->spill)
	{
		double	   *impute = NULL;

		if (ds->wide)
		{
			impute = malloc(sizeof(double) * (d ? d : 1));
			if (impute == NULL)
				worker_fail("out of memory");
			for (int c = 0; c < d; c++)
				impute[c] = stats[2 * d + c] > 0 ? stats[c] / stats[2 * d + c] : 0;
		}
		stream_set_transform(ds->spill, model, impute, spec->loss == DML_LOSS_MSE);
	}
	bytes_begin(ds, spec);
	{
		const float *restrict mean = model->in_mean,
				   *restrict scale = model->in_scale;

		for (int64_t i = 0; i < ds->n; i++)
		{
			float	   *restrict x = ds->X + (size_t) i * d;

			/* the raw row as bytes, while it is in cache */
			if (ds->X8 && !dml_rows8_row(ds->X8 + (size_t) i * d, x, d, ds->div8))
			{
				dml_big_free(ds->X8, (size_t) ds->n * d);
				ds->X8 = NULL;
			}

			/* float64 rows hold NaN only where a feature was NULL */
			if (ds->wide && any_null)
			{
				double	   *restrict xd = ds->Xd + (size_t) i * d;
				int			nan = 0;

				/* a read-only test first (it vectorizes); rows with a NULL are rare */
				for (int c = 0; c < d; c++)
					nan |= nan_bits_f64(xd[c]);
				if (nan)
					for (int c = 0; c < d; c++)
						if (isnan(xd[c]))
							xd[c] = stats[2 * d + c] > 0 ? stats[c] / stats[2 * d + c] : 0;
			}
			for (int c = 0; c < d; c++)
			{
				float		v = nan_bits_f32(x[c]) ? mean[c] : x[c];

				x[c] = (v - mean[c]) * scale[c];
			}
			if (spec->loss == DML_LOSS_MSE)
				ds->y[i] = (ds->y[i] - model->out_mean[0]) / model->out_scale[0];
		}
	}
	free(counts);
	free(stats);
	if (spec->class_weight && spec->classification)
		class_weights(ds, spec);
}

/*
 * prepare_trial
 *		A resident job's next trial (dml_tune): the rows stay as
 *		prepare_data left them, checked and standardized; the trial's model
 *		gets the first one's standardization, and the loss its class
 *		weights.  The coordinator sends a trial here only when it reads the
 *		same rows with the same transforms, loss and outputs as the first.
 */
void
prepare_trial(Dataset *ds, const WorkerSpec *spec, DmlModel *model, const DmlModel *first)
{
	int			d = ds->d;
	int			K = spec->outputs;

	alloc_model(model, spec, d);
	memcpy(model->in_mean, first->in_mean, sizeof(float) * d);
	memcpy(model->in_scale, first->in_scale, sizeof(float) * d);
	memcpy(model->out_mean, first->out_mean, sizeof(float) * K);
	memcpy(model->out_scale, first->out_scale, sizeof(float) * K);
	free(ds->class_weight);
	ds->class_weight = NULL;
	if (spec->class_weight && spec->classification)
		class_weights(ds, spec);
}
