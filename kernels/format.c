/*-------------------------------------------------------------------------
 *
 * format.c
 *	  The model blob stored in dml.models.weights: serialize, parse with
 *	  every field validated before use, and predict.
 *
 * The parser is the one piece of kernel code that reads bytes a user can
 * write (a superuser can UPDATE dml.models), so it trusts nothing: the
 * length is checked before each read, shapes against DML_MAX_*, sizes
 * against the stated length, and the CRC-32 last of all.  It is fuzzed by
 * regress/fuzz/fuzz_format.c.
 *
 *-------------------------------------------------------------------------
 */
#include "kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CRC-32 (IEEE 802.3, reflected 0xEDB88320), table built on first use */
uint32_t
dml_crc32(const unsigned char *buf, size_t len)
{
	static uint32_t table[256];
	static int	ready = 0;
	uint32_t	crc = 0xFFFFFFFFu;

	if (!ready)
	{
		for (uint32_t i = 0; i < 256; i++)
		{
			uint32_t	c = i;

			for (int k = 0; k < 8; k++)
				c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
			table[i] = c;
		}
		ready = 1;
	}
	for (size_t i = 0; i < len; i++)
		crc = table[(crc ^ buf[i]) & 0xFF] ^ (crc >> 8);
	return crc ^ 0xFFFFFFFFu;
}

/* allocate a model: network plus standardization vectors (identity) */
DmlStatus
dml_model_alloc(DmlModel *m, int nlayers, const int *sizes, DmlAct act,
				DmlLoss loss)
{
	DmlStatus	st;
	int			C,
				K;

	memset(m, 0, sizeof(*m));
	m->precision = 32;
	if ((st = dml_net_alloc(&m->net, nlayers, sizes, act, loss)) != DML_OK)
		return st;
	C = sizes[0];
	K = sizes[nlayers];
	m->in_mean = calloc(C, sizeof(float));
	m->in_scale = malloc(C * sizeof(float));
	m->out_mean = calloc(K, sizeof(float));
	m->out_scale = malloc(K * sizeof(float));
	if (!m->in_mean || !m->in_scale || !m->out_mean || !m->out_scale)
	{
		dml_model_free(m);
		return DML_ERR_NOMEM;
	}
	for (int i = 0; i < C; i++)
		m->in_scale[i] = 1.0f;
	for (int k = 0; k < K; k++)
		m->out_scale[k] = 1.0f;
	return DML_OK;
}

void
dml_model_free(DmlModel *m)
{
	dml_net_free(&m->net);
	free(m->in_mean);
	free(m->in_scale);
	free(m->out_mean);
	free(m->out_scale);
	free(m->params64);
	free(m->rows_wt);
	m->rows_wt = NULL;
	m->in_mean = m->in_scale = m->out_mean = m->out_scale = NULL;
	m->params64 = m->in_mean64 = m->in_scale64 = m->out_mean64 = m->out_scale64 = NULL;
	m->precision = 32;
}

/* values of a model's five vectors together: in_mean, in_scale, out_mean, out_scale, params */
static size_t
body_values(const DmlNet *net)
{
	return 2 * (size_t) net->sizes[0] + 2 * (size_t) net->sizes[net->nlayers] +
		net->nparams;
}

/*
 * dml_model_make_f64
 *		Give m float64 vectors (one block: params, then in_mean, in_scale,
 *		out_mean, out_scale), widened from the float32 ones.
 */
DmlStatus
dml_model_make_f64(DmlModel *m)
{
	int			C = m->net.sizes[0];
	int			K = m->net.sizes[m->net.nlayers];
	double	   *v;

	if (m->net.nlayers != 1)
		return DML_ERR_ARG;
	if (m->precision == 64)
		return DML_OK;
	v = malloc(sizeof(double) * body_values(&m->net));
	if (v == NULL)
		return DML_ERR_NOMEM;
	m->params64 = v;
	m->in_mean64 = v + m->net.nparams;
	m->in_scale64 = m->in_mean64 + C;
	m->out_mean64 = m->in_scale64 + C;
	m->out_scale64 = m->out_mean64 + K;
	for (size_t i = 0; i < m->net.nparams; i++)
		m->params64[i] = m->net.params[i];
	for (int c = 0; c < C; c++)
	{
		m->in_mean64[c] = m->in_mean[c];
		m->in_scale64[c] = m->in_scale[c];
	}
	for (int k = 0; k < K; k++)
	{
		m->out_mean64[k] = m->out_mean[k];
		m->out_scale64[k] = m->out_scale[k];
	}
	m->precision = 64;
	return DML_OK;
}

/* the float32 vectors of a float64 model, rounded from the float64 ones */
void
dml_model_sync_f32(DmlModel *m)
{
	int			C = m->net.sizes[0];
	int			K = m->net.sizes[m->net.nlayers];

	if (m->precision != 64)
		return;
	for (size_t i = 0; i < m->net.nparams; i++)
		m->net.params[i] = (float) m->params64[i];
	for (int c = 0; c < C; c++)
	{
		m->in_mean[c] = (float) m->in_mean64[c];
		m->in_scale[c] = (float) m->in_scale64[c];
	}
	for (int k = 0; k < K; k++)
	{
		m->out_mean[k] = (float) m->out_mean64[k];
		m->out_scale[k] = (float) m->out_scale64[k];
	}
}

/* header bytes: version 2 adds the precision field */
static size_t
header_size(int nlayers, int version)
{
	return (version >= 2 ? 7 : 6) * 4 + (size_t) (nlayers + 1) * 4;
}

size_t
dml_model_serialized_size(const DmlModel *m)
{
	int			wide = m->precision == 64;

	return header_size(m->net.nlayers, wide ? 2 : 1) +
		(wide ? 8 : 4) * body_values(&m->net) + 4;
}

static unsigned char *
put_floats(unsigned char *p, const float *f, size_t n)
{
	for (size_t i = 0; i < n; i++, p += 4)
	{
		uint32_t	u;

		memcpy(&u, &f[i], 4);
		dml_put_le32(p, u);
	}
	return p;
}

static unsigned char *
put_doubles(unsigned char *p, const double *f, size_t n)
{
	for (size_t i = 0; i < n; i++, p += 8)
	{
		uint64_t	u;

		memcpy(&u, &f[i], 8);
		dml_put_le32(p, (uint32_t) u);
		dml_put_le32(p + 4, (uint32_t) (u >> 32));
	}
	return p;
}

static const unsigned char *
get_doubles(double *f, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++, p += 8)
	{
		uint64_t	u = (uint64_t) dml_get_le32(p) | ((uint64_t) dml_get_le32(p + 4) << 32);

		memcpy(&f[i], &u, 8);
	}
	return p;
}

static const unsigned char *
get_floats(float *f, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++, p += 4)
	{
		uint32_t	u = dml_get_le32(p);

		memcpy(&f[i], &u, 4);
	}
	return p;
}

/* write the blob; buf holds dml_model_serialized_size(m) bytes */
void
dml_model_serialize(const DmlModel *m, unsigned char *buf)
{
	const DmlNet *net = &m->net;
	size_t		total = dml_model_serialized_size(m);
	unsigned char *p = buf;
	int			C = net->sizes[0];
	int			K = net->sizes[net->nlayers];

	int			wide = m->precision == 64;

	dml_put_le32(p, DML_FORMAT_MAGIC);
	dml_put_le32(p + 4, wide ? DML_FORMAT_VERSION : DML_FORMAT_VERSION_F32);
	dml_put_le32(p + 8, (uint32_t) total);
	dml_put_le32(p + 12, (uint32_t) net->nlayers);
	dml_put_le32(p + 16, (uint32_t) net->act);
	dml_put_le32(p + 20, (uint32_t) net->loss);
	p += 24;
	if (wide)
	{
		dml_put_le32(p, 64);
		p += 4;
	}
	for (int l = 0; l <= net->nlayers; l++, p += 4)
		dml_put_le32(p, (uint32_t) net->sizes[l]);
	if (wide)
	{
		p = put_doubles(p, m->in_mean64, C);
		p = put_doubles(p, m->in_scale64, C);
		p = put_doubles(p, m->out_mean64, K);
		p = put_doubles(p, m->out_scale64, K);
		p = put_doubles(p, m->params64, net->nparams);
	}
	else
	{
		p = put_floats(p, m->in_mean, C);
		p = put_floats(p, m->in_scale, C);
		p = put_floats(p, m->out_mean, K);
		p = put_floats(p, m->out_scale, K);
		p = put_floats(p, net->params, net->nparams);
	}
	dml_put_le32(p, dml_crc32(buf, total - 4));
}

#define FAIL(st, ...) \
	do { snprintf(errbuf, errlen, __VA_ARGS__); return (st); } while (0)

/* parse and validate; *m is written only on success */
DmlStatus
dml_model_parse(DmlModel *m, const unsigned char *buf, size_t len,
				char *errbuf, size_t errlen)
{
	uint32_t	nlayers,
				act,
				loss,
				total,
				version,
				precision = 32;
	int			sizes[DML_MAX_LAYERS + 1];
	DmlModel	tmp;
	const unsigned char *p;
	size_t		need;

	if (len < 28)
		FAIL(DML_ERR_FORMAT, "model is %zu bytes, shorter than any header", len);
	if (dml_get_le32(buf) != DML_FORMAT_MAGIC)
		FAIL(DML_ERR_FORMAT, "bad magic number 0x%08X", dml_get_le32(buf));
	version = dml_get_le32(buf + 4);
	if (version < 1 || version > DML_FORMAT_VERSION)
		FAIL(DML_ERR_FORMAT, "unsupported format version %u (this build reads 1 to %d)",
			 version, DML_FORMAT_VERSION);
	total = dml_get_le32(buf + 8);
	if (total != len)
		FAIL(DML_ERR_FORMAT, "model states %u bytes but has %zu", total, len);
	nlayers = dml_get_le32(buf + 12);
	act = dml_get_le32(buf + 16);
	loss = dml_get_le32(buf + 20);
	if (nlayers < 1 || nlayers > DML_MAX_LAYERS)
		FAIL(DML_ERR_FORMAT, "layer count %u out of range 1..%d", nlayers, DML_MAX_LAYERS);
	if (act > DML_ACT_SIGMOID)
		FAIL(DML_ERR_FORMAT, "unknown activation code %u", act);
	if (loss > DML_LOSS_SOFTMAX)
		FAIL(DML_ERR_FORMAT, "unknown loss code %u", loss);
	if (version >= 2)
	{
		precision = dml_get_le32(buf + 24);
		if (precision != 32 && precision != 64)
			FAIL(DML_ERR_FORMAT, "unknown precision %u", precision);
		if (precision == 64 && nlayers != 1)
			FAIL(DML_ERR_FORMAT, "float64 model with %u layers (only one is supported)", nlayers);
	}
	if (len < header_size(nlayers, version) + 4)
		FAIL(DML_ERR_FORMAT, "model truncated in its layer sizes");
	p = buf + (version >= 2 ? 28 : 24);
	for (uint32_t l = 0; l <= nlayers; l++, p += 4)
	{
		uint32_t	s = dml_get_le32(p);

		if (s < 1 || s > DML_MAX_WIDTH)
			FAIL(DML_ERR_FORMAT, "layer size %u out of range 1..%d", s, DML_MAX_WIDTH);
		sizes[l] = (int) s;
	}
	if (loss == DML_LOSS_BCE && sizes[nlayers] != 1)
		FAIL(DML_ERR_FORMAT, "logistic model with %d outputs", sizes[nlayers]);
	if (loss == DML_LOSS_SOFTMAX && sizes[nlayers] < 2)
		FAIL(DML_ERR_FORMAT, "softmax model with %d outputs", sizes[nlayers]);
	/* sizes are bounded, so this cannot overflow size_t */
	need = header_size(nlayers, version) +
		(precision / 8) * (2 * (size_t) sizes[0] + 2 * (size_t) sizes[nlayers] +
						   dml_net_param_count(nlayers, sizes)) + 4;
	if (need != len)
		FAIL(DML_ERR_FORMAT, "model shapes need %zu bytes but it has %zu", need, len);
	if (dml_crc32(buf, len - 4) != dml_get_le32(buf + len - 4))
		FAIL(DML_ERR_CHECKSUM, "checksum mismatch: model is corrupted");

	if (dml_model_alloc(&tmp, nlayers, sizes, act, loss) != DML_OK)
		FAIL(DML_ERR_NOMEM, "out of memory for a model of %zu bytes", len);
	if (precision == 64)
	{
		if (dml_model_make_f64(&tmp) != DML_OK)
		{
			dml_model_free(&tmp);
			FAIL(DML_ERR_NOMEM, "out of memory for a model of %zu bytes", len);
		}
		p = get_doubles(tmp.in_mean64, p, sizes[0]);
		p = get_doubles(tmp.in_scale64, p, sizes[0]);
		p = get_doubles(tmp.out_mean64, p, sizes[nlayers]);
		p = get_doubles(tmp.out_scale64, p, sizes[nlayers]);
		get_doubles(tmp.params64, p, tmp.net.nparams);
		dml_model_sync_f32(&tmp);
	}
	else
	{
		p = get_floats(tmp.in_mean, p, sizes[0]);
		p = get_floats(tmp.in_scale, p, sizes[0]);
		p = get_floats(tmp.out_mean, p, sizes[nlayers]);
		p = get_floats(tmp.out_scale, p, sizes[nlayers]);
		get_floats(tmp.net.params, p, tmp.net.nparams);
	}
	*m = tmp;
	return DML_OK;
}

/*
 * Whether dml_model_predict runs the hidden layers of B rows on
 * dml_dense_rows where their sizes allow (dml_dense_rows_applies): ReLU or
 * no activation, and two rows or more, or one row of a prepared model (a
 * row alone would pay the weights' transposition each call otherwise).
 * Where every hidden layer runs there and the output layer on its skinny
 * kernel, whose rows are each their own sums too, a row's prediction is
 * the same in every batch of two rows or more, wherever it falls in it: in
 * dml_predict_table's batches in the backend and on N ranks, and in
 * dml_evaluate's; and a prepared model's row alone (dml_predict's) runs as
 * two rows, itself twice, so it gets those bits too (predict_alone).
 */
static bool
predict_dense_rows(const DmlModel *m, int B)
{
	return m->net.nlayers >= 2 && (B >= 2 || m->rows_wt != NULL) &&
		(m->net.act == DML_ACT_RELU || m->net.act == DML_ACT_IDENTITY);
}

/* where hidden layer l's weights lie in m->rows_wt: after those of the layers before it */
static size_t
rows_wt_offset(const DmlModel *m, int l)
{
	size_t		off = 0;

	for (int h = 0; h < l; h++)
		if (m->net.sizes[h + 1] <= DML_DENSE_ROWS_MAX_OC)
			off += dml_dense_rows_floats(m->net.sizes[h], m->net.sizes[h + 1]);
	return off;
}

DmlStatus
dml_model_prepare(DmlModel *m)
{
	const DmlNet *net = &m->net;
	size_t		n = rows_wt_offset(m, net->nlayers - 1);

	free(m->rows_wt);
	m->rows_wt = NULL;
	if (n == 0 || !predict_dense_rows(m, 2))
		return DML_OK;
	/*
	 * on whole cache lines (each layer's rows are a whole number of them):
	 * from malloc they started 16, 32 or 48 bytes into a line, as the heap
	 * fell, and every 64-byte load of dml_dense_rows split across two;
	 * dml_predict of a 20-64-64-1 MLP over 1,000,000 rows took 0.74-0.79 s
	 * against 0.66-0.71 s on lines (six sessions each)
	 */
	m->rows_wt = dml_malloc_lines(n, sizeof(float));
	if (m->rows_wt == NULL)
		return DML_ERR_NOMEM;
	for (int l = 0; l < net->nlayers - 1; l++)
		if (net->sizes[l + 1] <= DML_DENSE_ROWS_MAX_OC)
			dml_dense_rows_weights(m->rows_wt + rows_wt_offset(m, l),
								   net->params + dml_net_weight_offset(net, l),
								   net->params + dml_net_bias_offset(net, l),
								   net->sizes[l], net->sizes[l + 1]);
	return DML_OK;
}

/*
 * Whether a row alone runs as two rows (itself twice): a prepared model
 * every layer of which runs on dml's kernels at two rows, the hidden ones
 * on dml_dense_rows and the output layer on the skinny kernel, so that the
 * row's outputs are the bits a batch gives it.  Where a layer would run on
 * sgemm at two rows, sgemv on one row is faster and stays.  (A model of
 * one layer is never prepared: the model cache folds its standardization
 * into its weights for a row alone.)
 */
static bool
predict_alone(const DmlModel *m)
{
	const DmlNet *net = &m->net;

	if (m->rows_wt == NULL || !predict_dense_rows(m, 1) ||
		!dml_skinny_applies(2, net->sizes[net->nlayers]))
		return false;
	for (int l = 0; l < net->nlayers - 1; l++)
		if (!dml_dense_rows_applies(net->sizes[l], net->sizes[l + 1]))
			return false;
	return true;
}

/* the widest of the network's layers, inputs and outputs included */
static int
model_max_width(const DmlModel *m)
{
	int			w = 0;

	for (int l = 0; l <= m->net.nlayers; l++)
		if (m->net.sizes[l] > w)
			w = m->net.sizes[l];
	return w;
}

/* floats of scratch dml_model_predict needs for B rows */
size_t
dml_model_scratch_floats(const DmlModel *m, int B)
{
	int			w = model_max_width(m);
	size_t		wt = 0;

	/*
	 * and the largest weights dml_dense_rows may take, for batches of two
	 * rows or more of a model not prepared (a scratch for one row never
	 * transposes); a row alone may run as two
	 */
	for (int l = 0; B >= 2 && !m->rows_wt && l < m->net.nlayers - 1; l++)
		if (m->net.sizes[l + 1] <= DML_DENSE_ROWS_MAX_OC &&
			dml_dense_rows_floats(m->net.sizes[l], m->net.sizes[l + 1]) > wt)
			wt = dml_dense_rows_floats(m->net.sizes[l], m->net.sizes[l + 1]);
	return 2 * (size_t) (B < 2 ? 2 : B) * w + wt;
}

/*
 * Xs (B,C) = (X - in_mean) * in_scale, the network's inputs; in place
 * allowed.  Where a row is narrow (under STD_RUN_C inputs), 16 rows at a
 * time are one run of 16 C values, with the means and scales repeated 16
 * times: whole vectors, where a row of 20 took a vector and a tail of 4
 * (dml_predict_table's batches spent 3.8% of its time here).  The same
 * operations on each value either way.
 */
#define STD_RUN_C 64

DML_VECTORIZE void
dml_model_standardize(const DmlModel *m, float *Xs, const float *X, int B)
{
	int			C = m->net.sizes[0];
	const float *mean = m->in_mean;
	const float *scale = m->in_scale;
	int			b = 0;

	if (C < STD_RUN_C && B >= 16)
	{
		float		rm[16 * STD_RUN_C],
					rs[16 * STD_RUN_C];
		size_t		n = (size_t) 16 * C;

		for (int l = 0; l < 16; l++)
		{
			memcpy(rm + l * C, mean, sizeof(float) * C);
			memcpy(rs + l * C, scale, sizeof(float) * C);
		}
		for (; b + 16 <= B; b += 16)
		{
			const float *x = X + (size_t) b * C;
			float	   *xs = Xs + (size_t) b * C;

			for (size_t i = 0; i < n; i++)
				xs[i] = (x[i] - rm[i]) * rs[i];
		}
	}
	for (; b < B; b++)
	{
		const float *x = X + (size_t) b * C;
		float	   *xs = Xs + (size_t) b * C;

		for (int c = 0; c < C; c++)
			xs[c] = (x[c] - mean[c]) * scale[c];
	}
}

/* logits (B,K) into predictions in place: output function, regression mapped back */
void
dml_model_finish(const DmlModel *m, float *out, int B)
{
	const DmlNet *net = &m->net;
	int			K = net->sizes[net->nlayers];

	dml_net_output(net, out, B);
	if (net->loss == DML_LOSS_MSE)
		for (int b = 0; b < B; b++)
			for (int k = 0; k < K; k++)
				out[(size_t) b * K + k] =
					out[(size_t) b * K + k] * m->out_scale[k] + m->out_mean[k];
}

/* predictions out (B,K) for raw features X (B,C) */
void
dml_model_predict(const DmlModel *m, float *out, const float *X, int B,
				  float *scratch)
{
	const DmlNet *net = &m->net;
	bool		alone = B == 1 && predict_alone(m);
	int			Bx = alone ? 2 : B;
	size_t		half = (size_t) Bx * model_max_width(m);
	float	   *buf[2],
			   *WT;
	const float *inp;
	int			cur = 0;
	bool		rows = predict_dense_rows(m, B);

	buf[0] = scratch;
	buf[1] = scratch + half;
	WT = scratch + 2 * half;
	dml_model_standardize(m, buf[0], X, B);
	if (alone)
		memcpy(buf[0] + net->sizes[0], buf[0], sizeof(float) * net->sizes[0]);
	inp = buf[0];
	for (int l = 0; l < net->nlayers; l++)
	{
		int			C = net->sizes[l],
					OC = net->sizes[l + 1];
		bool		last = l == net->nlayers - 1;
		float	   *dst = last && !alone ? out : buf[cur ^ 1];
		const float *weight = net->params + dml_net_weight_offset(net, l),
				   *bias = net->params + dml_net_bias_offset(net, l);

		if (rows && !last && dml_dense_rows_applies(C, OC))
		{
			/* a hidden layer and its activation by dml's kernel (layers.c) */
			const float *wt = m->rows_wt ? m->rows_wt + rows_wt_offset(m, l) : WT;

			if (!m->rows_wt)
				dml_dense_rows_weights(WT, weight, bias, C, OC);
			dml_dense_rows(dst, OC, inp, C, wt, Bx, C, OC, net->act == DML_ACT_RELU);
			inp = dst;
			cur ^= 1;
			continue;
		}
		dense_forward_act(dst, inp, weight, bias, Bx, C, OC, last ? DML_ACT_IDENTITY : net->act);
		inp = dst;
		cur ^= 1;
	}
	if (alone)
		memcpy(out, inp, sizeof(float) * net->sizes[net->nlayers]);
	dml_model_finish(m, out, B);
}

/*
 * dml_model_predict64
 *		out (B,K) for X (B,C) in float64, for a float64 (one-layer) model:
 *		z = W ((x - in_mean) * in_scale) + b, the output function, and for
 *		regression y = z * out_scale + out_mean.
 */
void
dml_model_predict64(const DmlModel *m, double *out, const double *X, int B)
{
	const DmlNet *net = &m->net;
	int			C = net->sizes[0];
	int			K = net->sizes[1];
	const double *W = m->params64;
	const double *bias = m->params64 + (size_t) K * C;

	for (int r = 0; r < B; r++)
	{
		const double *x = X + (size_t) r * C;
		double	   *o = out + (size_t) r * K;

		for (int k = 0; k < K; k++)
		{
			double		z = bias[k];

			for (int c = 0; c < C; c++)
				z += W[(size_t) k * C + c] * ((x[c] - m->in_mean64[c]) * m->in_scale64[c]);
			o[k] = z;
		}
		if (net->loss == DML_LOSS_MSE)
			for (int k = 0; k < K; k++)
				o[k] = o[k] * m->out_scale64[k] + m->out_mean64[k];
		else if (net->loss == DML_LOSS_BCE)
			o[0] = o[0] >= 0 ? 1.0 / (1.0 + exp(-o[0])) : exp(o[0]) / (1.0 + exp(o[0]));
		else
		{
			double		mx = o[0],
						sum = 0;

			for (int k = 1; k < K; k++)
				mx = o[k] > mx ? o[k] : mx;
			for (int k = 0; k < K; k++)
				sum += (o[k] = exp(o[k] - mx));
			for (int k = 0; k < K; k++)
				o[k] /= sum;
		}
	}
}
