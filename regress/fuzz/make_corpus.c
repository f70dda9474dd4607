/*-------------------------------------------------------------------------
 *
 * make_corpus.c
 *	  Write the fuzzer's seed corpus: valid model blobs of every shape the
 *	  format knows, and broken ones that each fail one check.
 *
 *	  make_corpus [DIR]		(default regress/fuzz/corpus)
 *
 * Valid blobs are built the way dml_train builds them (dml_model_alloc,
 * dml_net_init, dml_model_serialize) with non-trivial standardization.
 * Each broken blob is a valid one with one thing wrong, its CRC repaired
 * where that matters, so it is the named check that rejects it.  Every
 * file is parsed back: valid ones must parse, broken ones must not.
 *
 *-------------------------------------------------------------------------
 */
#include "kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *outdir = "regress/fuzz/corpus";
static int	nfiles = 0;
static size_t nbytes = 0;

#define DIE(...) \
	do { fprintf(stderr, "make_corpus: " __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

static void
put_u32(unsigned char *p, uint32_t v)
{
	p[0] = v & 0xFF;
	p[1] = (v >> 8) & 0xFF;
	p[2] = (v >> 16) & 0xFF;
	p[3] = (v >> 24) & 0xFF;
}

/* recompute the trailing CRC-32 of a blob of len bytes */
static void
fix_crc(unsigned char *buf, size_t len)
{
	put_u32(buf + len - 4, dml_crc32(buf, len - 4));
}

/* write one file and check that it parses (want_ok) or not */
static void
emit(const char *name, const unsigned char *buf, size_t len, int want_ok)
{
	char		path[1024];
	char		errbuf[256];
	DmlModel	m;
	DmlStatus	st;
	FILE	   *f;

	snprintf(path, sizeof(path), "%s/%s", outdir, name);
	if ((f = fopen(path, "wb")) == NULL)
		DIE("cannot write %s", path);
	if (len > 0 && fwrite(buf, 1, len, f) != len)
		DIE("short write to %s", path);
	if (fclose(f) != 0)
		DIE("cannot close %s", path);

	st = dml_model_parse(&m, buf, len, errbuf, sizeof(errbuf));
	if (st == DML_OK)
		dml_model_free(&m);
	if ((st == DML_OK) != want_ok)
		DIE("%s: expected %s, got %s (%s)", name, want_ok ? "a valid model" : "a rejection",
			st == DML_OK ? "a valid model" : "a rejection", st == DML_OK ? "" : errbuf);
	printf("%-28s %7zu bytes  %s\n", name, len, st == DML_OK ? "valid" : errbuf);
	nfiles++;
	nbytes += len;
}

/*
 * A serialized model of these shapes, initialized from seed, with
 * standardization vectors that are not the identity.  *len gets its size;
 * the caller frees the buffer.
 */
static unsigned char *
build(int nlayers, const int *sizes, DmlAct act, DmlLoss loss, uint64_t seed,
	  size_t *len)
{
	DmlModel	m;
	unsigned char *buf;
	int			C = sizes[0];
	int			K = sizes[nlayers];

	if (dml_model_alloc(&m, nlayers, sizes, act, loss) != DML_OK)
		DIE("cannot allocate a model");
	dml_net_init(&m.net, seed);
	for (int c = 0; c < C; c++)
	{
		m.in_mean[c] = 0.25f * (float) c - 1.0f;
		m.in_scale[c] = 1.0f / (1.0f + 0.5f * (float) c);
	}
	for (int k = 0; k < K; k++)
	{
		m.out_mean[k] = loss == DML_LOSS_MSE ? 10.0f + (float) k : 0.0f;
		m.out_scale[k] = loss == DML_LOSS_MSE ? 2.5f : 1.0f;
	}
	/* a few non-zero biases, so the bias reads are seen */
	for (int l = 0; l < nlayers; l++)
		m.net.params[dml_net_bias_offset(&m.net, l)] = 0.125f * (float) (l + 1);
	*len = dml_model_serialized_size(&m);
	if ((buf = malloc(*len)) == NULL)
		DIE("out of memory");
	dml_model_serialize(&m, buf);
	dml_model_free(&m);
	return buf;
}

/* a float64 one-layer model (format version 2) of these shapes */
static unsigned char *
build_f64(const int *sizes, DmlLoss loss, uint64_t seed, size_t *len)
{
	DmlModel	m;
	unsigned char *buf;

	if (dml_model_alloc(&m, 1, sizes, DML_ACT_IDENTITY, loss) != DML_OK)
		DIE("cannot allocate a model");
	dml_net_init(&m.net, seed);
	if (dml_model_make_f64(&m) != DML_OK)
		DIE("cannot allocate a model");
	for (int c = 0; c < sizes[0]; c++)
	{
		m.in_mean64[c] = 0.1 * c - 1.0;
		m.in_scale64[c] = 1.0 / 3.0;
	}
	m.params64[m.net.nparams - 1] = 0.1;
	dml_model_sync_f32(&m);
	*len = dml_model_serialized_size(&m);
	if ((buf = malloc(*len)) == NULL)
		DIE("out of memory");
	dml_model_serialize(&m, buf);
	dml_model_free(&m);
	return buf;
}

/* a copy of a blob */
static unsigned char *
copy(const unsigned char *buf, size_t len)
{
	unsigned char *c = malloc(len ? len : 1);

	if (c == NULL)
		DIE("out of memory");
	memcpy(c, buf, len);
	return c;
}

int
main(int argc, char **argv)
{
	static const char *act_file[] = {
		"mlp_5_8_4_3_identity.bin", "mlp_5_8_4_3_relu.bin",
		"mlp_5_8_4_3_tanh.bin", "mlp_5_8_4_3_sigmoid.bin"
	};
	static const DmlLoss act_loss[] = {
		DML_LOSS_MSE, DML_LOSS_SOFTMAX, DML_LOSS_SOFTMAX, DML_LOSS_MSE
	};
	int			linear[] = {3, 1};
	int			logistic[] = {4, 1};
	int			softmax[] = {4, 3};
	int			mlp[] = {5, 8, 4, 3};
	int			deep[DML_MAX_LAYERS + 1];
	int			wide[] = {300, 2};
	int			mse2[] = {3, 2};
	unsigned char *lin,
			   *b;
	size_t		linlen,
				len;

	if (argc > 1)
		outdir = argv[1];

	/* valid models */
	lin = build(1, linear, DML_ACT_IDENTITY, DML_LOSS_MSE, 1, &linlen);
	emit("linear_3_1.bin", lin, linlen, 1);
	b = build_f64(linear, DML_LOSS_MSE, 11, &len);
	emit("linear_f64_3_1.bin", b, len, 1);
	put_u32(b + 24, 48);
	fix_crc(b, len);
	emit("bad_precision.bin", b, len, 0);
	free(b);
	{
		int			logistic64[] = {4, 1};

		b = build_f64(logistic64, DML_LOSS_BCE, 12, &len);
		emit("logistic_f64_4_1.bin", b, len, 1);
		b[len - 5] ^= 0x01;
		emit("bad_crc_f64.bin", b, len, 0);
		free(b);
	}
	b = build(1, logistic, DML_ACT_IDENTITY, DML_LOSS_BCE, 2, &len);
	emit("logistic_4_1.bin", b, len, 1);
	free(b);
	b = build(1, softmax, DML_ACT_IDENTITY, DML_LOSS_SOFTMAX, 3, &len);
	emit("softmax_4_3.bin", b, len, 1);
	free(b);
	for (int a = DML_ACT_IDENTITY; a <= DML_ACT_SIGMOID; a++)
	{
		b = build(3, mlp, (DmlAct) a, act_loss[a], 10 + a, &len);
		emit(act_file[a], b, len, 1);
		free(b);
	}
	for (int l = 0; l <= DML_MAX_LAYERS; l++)
		deep[l] = 2;
	b = build(DML_MAX_LAYERS, deep, DML_ACT_TANH, DML_LOSS_SOFTMAX, 20, &len);
	emit("deep_16_layers.bin", b, len, 1);
	free(b);
	b = build(1, wide, DML_ACT_IDENTITY, DML_LOSS_SOFTMAX, 21, &len);
	emit("wide_300_2.bin", b, len, 1);
	free(b);

	/* broken models, each failing one check */
	emit("empty.bin", lin, 0, 0);
	emit("trunc_header.bin", lin, 20, 0);
	emit("trunc_sizes.bin", lin, 30, 0);
	emit("trunc_body.bin", lin, linlen - 8, 0);

	b = copy(lin, linlen);
	b[0] ^= 0x20;
	emit("bad_magic.bin", b, linlen, 0);
	free(b);

	b = copy(lin, linlen);
	put_u32(b + 4, DML_FORMAT_VERSION + 1);
	fix_crc(b, linlen);
	emit("bad_version.bin", b, linlen, 0);
	free(b);

	b = copy(lin, linlen);
	put_u32(b + 8, (uint32_t) linlen + 4);
	fix_crc(b, linlen);
	emit("bad_length.bin", b, linlen, 0);
	free(b);

	b = copy(lin, linlen);
	b[linlen - 12] ^= 0x01;		/* a parameter bit: only the CRC notices */
	emit("bad_crc.bin", b, linlen, 0);
	free(b);

	b = copy(lin, linlen);
	put_u32(b + 12, 0);
	fix_crc(b, linlen);
	emit("zero_layers.bin", b, linlen, 0);
	free(b);

	b = copy(lin, linlen);
	put_u32(b + 12, DML_MAX_LAYERS + 1);
	fix_crc(b, linlen);
	emit("too_many_layers.bin", b, linlen, 0);
	free(b);

	b = copy(lin, linlen);
	put_u32(b + 16, DML_ACT_SIGMOID + 1);
	fix_crc(b, linlen);
	emit("bad_act.bin", b, linlen, 0);
	free(b);

	b = copy(lin, linlen);
	put_u32(b + 20, DML_LOSS_SOFTMAX + 1);
	fix_crc(b, linlen);
	emit("bad_loss.bin", b, linlen, 0);
	free(b);

	b = copy(lin, linlen);
	put_u32(b + 24, 0);
	fix_crc(b, linlen);
	emit("zero_width.bin", b, linlen, 0);
	free(b);

	b = copy(lin, linlen);
	put_u32(b + 24, DML_MAX_WIDTH + 1);
	fix_crc(b, linlen);
	emit("too_wide.bin", b, linlen, 0);
	free(b);

	b = copy(lin, linlen);
	put_u32(b + 24, 4);			/* 4 inputs need 3 more floats than it has */
	fix_crc(b, linlen);
	emit("shape_mismatch.bin", b, linlen, 0);
	free(b);

	/* right size and CRC, but a logistic model must have one output */
	b = build(1, mse2, DML_ACT_IDENTITY, DML_LOSS_MSE, 4, &len);
	put_u32(b + 20, DML_LOSS_BCE);
	fix_crc(b, len);
	emit("logistic_2_outputs.bin", b, len, 0);
	free(b);

	/* and a softmax model at least two */
	b = copy(lin, linlen);
	put_u32(b + 20, DML_LOSS_SOFTMAX);
	fix_crc(b, linlen);
	emit("softmax_1_output.bin", b, linlen, 0);
	free(b);

	free(lin);
	printf("%d files, %zu bytes in %s\n", nfiles, nbytes, outdir);
	return 0;
}
