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
	m->in_mean = m->in_scale = m->out_mean = m->out_scale = NULL;
}

static size_t
header_size(int nlayers)
{
	return 6 * 4 + (size_t) (nlayers + 1) * 4;
}

/* float count after the header: standardization vectors and parameters */
static size_t
body_floats(const DmlNet *net)
{
	return 2 * (size_t) net->sizes[0] + 2 * (size_t) net->sizes[net->nlayers] +
		net->nparams;
}

size_t
dml_model_serialized_size(const DmlModel *m)
{
	return header_size(m->net.nlayers) + 4 * body_floats(&m->net) + 4;
}

static void
put_u32(unsigned char *p, uint32_t v)
{
	p[0] = v & 0xFF;
	p[1] = (v >> 8) & 0xFF;
	p[2] = (v >> 16) & 0xFF;
	p[3] = (v >> 24) & 0xFF;
}

static uint32_t
get_u32(const unsigned char *p)
{
	return (uint32_t) p[0] | ((uint32_t) p[1] << 8) |
		((uint32_t) p[2] << 16) | ((uint32_t) p[3] << 24);
}

static unsigned char *
put_floats(unsigned char *p, const float *f, size_t n)
{
	for (size_t i = 0; i < n; i++, p += 4)
	{
		uint32_t	u;

		memcpy(&u, &f[i], 4);
		put_u32(p, u);
	}
	return p;
}

static const unsigned char *
get_floats(float *f, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++, p += 4)
	{
		uint32_t	u = get_u32(p);

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

	put_u32(p, DML_FORMAT_MAGIC);
	put_u32(p + 4, DML_FORMAT_VERSION);
	put_u32(p + 8, (uint32_t) total);
	put_u32(p + 12, (uint32_t) net->nlayers);
	put_u32(p + 16, (uint32_t) net->act);
	put_u32(p + 20, (uint32_t) net->loss);
	p += 24;
	for (int l = 0; l <= net->nlayers; l++, p += 4)
		put_u32(p, (uint32_t) net->sizes[l]);
	p = put_floats(p, m->in_mean, C);
	p = put_floats(p, m->in_scale, C);
	p = put_floats(p, m->out_mean, K);
	p = put_floats(p, m->out_scale, K);
	p = put_floats(p, net->params, net->nparams);
	put_u32(p, dml_crc32(buf, total - 4));
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
				total;
	int			sizes[DML_MAX_LAYERS + 1];
	DmlModel	tmp;
	const unsigned char *p;
	size_t		need;

	if (len < 28)
		FAIL(DML_ERR_FORMAT, "model is %zu bytes, shorter than any header", len);
	if (get_u32(buf) != DML_FORMAT_MAGIC)
		FAIL(DML_ERR_FORMAT, "bad magic number 0x%08X", get_u32(buf));
	if (get_u32(buf + 4) != DML_FORMAT_VERSION)
		FAIL(DML_ERR_FORMAT, "unsupported format version %u (this build reads %d)",
			 get_u32(buf + 4), DML_FORMAT_VERSION);
	total = get_u32(buf + 8);
	if (total != len)
		FAIL(DML_ERR_FORMAT, "model states %u bytes but has %zu", total, len);
	nlayers = get_u32(buf + 12);
	act = get_u32(buf + 16);
	loss = get_u32(buf + 20);
	if (nlayers < 1 || nlayers > DML_MAX_LAYERS)
		FAIL(DML_ERR_FORMAT, "layer count %u out of range 1..%d", nlayers, DML_MAX_LAYERS);
	if (act > DML_ACT_SIGMOID)
		FAIL(DML_ERR_FORMAT, "unknown activation code %u", act);
	if (loss > DML_LOSS_SOFTMAX)
		FAIL(DML_ERR_FORMAT, "unknown loss code %u", loss);
	if (len < header_size(nlayers) + 4)
		FAIL(DML_ERR_FORMAT, "model truncated in its layer sizes");
	p = buf + 24;
	for (uint32_t l = 0; l <= nlayers; l++, p += 4)
	{
		uint32_t	s = get_u32(p);

		if (s < 1 || s > DML_MAX_WIDTH)
			FAIL(DML_ERR_FORMAT, "layer size %u out of range 1..%d", s, DML_MAX_WIDTH);
		sizes[l] = (int) s;
	}
	if (loss == DML_LOSS_BCE && sizes[nlayers] != 1)
		FAIL(DML_ERR_FORMAT, "logistic model with %d outputs", sizes[nlayers]);
	if (loss == DML_LOSS_SOFTMAX && sizes[nlayers] < 2)
		FAIL(DML_ERR_FORMAT, "softmax model with %d outputs", sizes[nlayers]);
	/* sizes are bounded, so this cannot overflow size_t */
	need = header_size(nlayers) + 4 * (2 * (size_t) sizes[0] + 2 * (size_t) sizes[nlayers] +
									   dml_net_param_count(nlayers, sizes)) + 4;
	if (need != len)
		FAIL(DML_ERR_FORMAT, "model shapes need %zu bytes but it has %zu", need, len);
	if (dml_crc32(buf, len - 4) != get_u32(buf + len - 4))
		FAIL(DML_ERR_CHECKSUM, "checksum mismatch: model is corrupted");

	if (dml_model_alloc(&tmp, nlayers, sizes, act, loss) != DML_OK)
		FAIL(DML_ERR_NOMEM, "out of memory for a model of %zu bytes", len);
	p = get_floats(tmp.in_mean, p, sizes[0]);
	p = get_floats(tmp.in_scale, p, sizes[0]);
	p = get_floats(tmp.out_mean, p, sizes[nlayers]);
	p = get_floats(tmp.out_scale, p, sizes[nlayers]);
	get_floats(tmp.net.params, p, tmp.net.nparams);
	*m = tmp;
	return DML_OK;
}

/* floats of scratch dml_model_predict needs for B rows */
size_t
dml_model_scratch_floats(const DmlModel *m, int B)
{
	int			w = 0;

	for (int l = 0; l <= m->net.nlayers; l++)
		if (m->net.sizes[l] > w)
			w = m->net.sizes[l];
	return 2 * (size_t) B * w;
}

/* Xs (B,C) = (X - in_mean) * in_scale, the network's inputs; in place allowed */
DML_VECTORIZE void
dml_model_standardize(const DmlModel *m, float *Xs, const float *X, int B)
{
	int			C = m->net.sizes[0];
	const float *mean = m->in_mean;
	const float *scale = m->in_scale;

	for (int b = 0; b < B; b++)
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
	size_t		half = dml_model_scratch_floats(m, B) / 2;
	float	   *buf[2] = {scratch, scratch + half};
	const float *inp;
	int			cur = 0;

	dml_model_standardize(m, buf[0], X, B);
	inp = buf[0];
	for (int l = 0; l < net->nlayers; l++)
	{
		int			OC = net->sizes[l + 1];
		float	   *dst = (l == net->nlayers - 1) ? out : buf[cur ^ 1];

		dense_forward(dst, inp, net->params + dml_net_weight_offset(net, l),
					  net->params + dml_net_bias_offset(net, l), B,
					  net->sizes[l], OC);
		if (l < net->nlayers - 1)
			activation_forward(dst, dst, (size_t) B * OC, net->act);
		inp = dst;
		cur ^= 1;
	}
	dml_model_finish(m, out, B);
}
