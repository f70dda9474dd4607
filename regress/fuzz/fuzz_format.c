/*-------------------------------------------------------------------------
 *
 * fuzz_format.c
 *	  libFuzzer target for the model blob parser (kernels/format.c).
 *
 * Arbitrary bytes go to dml_model_parse.  A rejected blob must leave the
 * model untouched and say why in errbuf; an accepted one must predict
 * (B = 1 takes the sgemv path, B = 3 the sgemm path) on fixed inputs
 * without a memory error, give probabilities in [0, 1] for logistic and
 * softmax models, serialize back to the very same bytes, and parse again
 * to the same model.  Any broken promise calls abort(), which libFuzzer
 * reports as a crash.
 *
 * Random bytes almost never carry a right length and CRC, so this target
 * mostly exercises the header checks; fuzz_format_body.c adds a custom
 * mutator that repairs both to reach the shape checks and prediction.
 * replay.c runs the same checks over the saved corpus and crash inputs
 * without the fuzzer runtime.
 *
 *-------------------------------------------------------------------------
 */
#include "kernels.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* rows of the second prediction: B > 1 takes the sgemm path */
#define FUZZ_ROWS_MAX 3

/* report a broken promise and crash so the fuzzer saves the input */
#define FUZZ_CHECK(cond, ...) \
	do { \
		if (!(cond)) \
		{ \
			fprintf(stderr, "fuzz_format: %s:%d: check failed: %s: ", \
					__FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
			abort(); \
		} \
	} while (0)

/* fixed, varied feature values: row b, column c */
static float
fuzz_feature(int b, int c)
{
	static const float v[] = {0.0f, 1.0f, -1.0f, 0.5f, 3.25f, -7.0f, 1e-3f, 100.0f};

	return v[(b * 5 + c * 3) % 8] + (float) c * 0.125f;
}

/* two models hold the same shapes and bitwise-equal floats */
static int
fuzz_models_equal(const DmlModel *a, const DmlModel *b)
{
	const DmlNet *na = &a->net;
	const DmlNet *nb = &b->net;
	int			C = na->sizes[0];
	int			K = na->sizes[na->nlayers];

	if (na->nlayers != nb->nlayers || na->act != nb->act ||
		na->loss != nb->loss || na->nparams != nb->nparams)
		return 0;
	if (memcmp(na->sizes, nb->sizes, sizeof(int) * (na->nlayers + 1)) != 0)
		return 0;
	return memcmp(a->in_mean, b->in_mean, sizeof(float) * C) == 0 &&
		memcmp(a->in_scale, b->in_scale, sizeof(float) * C) == 0 &&
		memcmp(a->out_mean, b->out_mean, sizeof(float) * K) == 0 &&
		memcmp(a->out_scale, b->out_scale, sizeof(float) * K) == 0 &&
		memcmp(na->params, nb->params, sizeof(float) * na->nparams) == 0;
}

/* predict B rows of fixed features; check what the output function promises */
static void
fuzz_predict(const DmlModel *m, int B)
{
	int			C = m->net.sizes[0];
	int			K = m->net.sizes[m->net.nlayers];
	size_t		nscratch = dml_model_scratch_floats(m, B);
	float	   *X = malloc(sizeof(float) * (size_t) B * C);
	float	   *out = malloc(sizeof(float) * (size_t) B * K);
	float	   *scratch = malloc(sizeof(float) * nscratch);

	FUZZ_CHECK(X && out && scratch, "out of memory for %d rows", B);
	FUZZ_CHECK(nscratch >= (size_t) B * C, "scratch %zu floats for %d x %d inputs",
			   nscratch, B, C);
	for (int b = 0; b < B; b++)
		for (int c = 0; c < C; c++)
			X[(size_t) b * C + c] = fuzz_feature(b, c);
	dml_model_predict(m, out, X, B, scratch);
	if (m->net.loss != DML_LOSS_MSE)
		for (size_t i = 0; i < (size_t) B * K; i++)
			FUZZ_CHECK(isnan(out[i]) || (out[i] >= 0.0f && out[i] <= 1.0f),
					   "probability %g out of [0, 1]", (double) out[i]);
	free(X);
	free(out);
	free(scratch);
}

/* every check on one input; aborts on a broken promise */
static void
fuzz_check_blob(const uint8_t *data, size_t size)
{
	DmlModel	m,
				m2,
				untouched;
	DmlStatus	st;
	char		errbuf[256];
	unsigned char *again;
	size_t		len;

	memset(&m, 0xA5, sizeof(m));
	memcpy(&untouched, &m, sizeof(m));
	errbuf[0] = '\0';
	st = dml_model_parse(&m, data, size, errbuf, sizeof(errbuf));
	if (st != DML_OK)
	{
		FUZZ_CHECK(st == DML_ERR_FORMAT || st == DML_ERR_CHECKSUM ||
				   st == DML_ERR_NOMEM, "unexpected status %d", (int) st);
		FUZZ_CHECK(memcmp(&m, &untouched, sizeof(m)) == 0,
				   "failed parse wrote the model (%s)", errbuf);
		FUZZ_CHECK(errbuf[0] != '\0' && memchr(errbuf, '\0', sizeof(errbuf)),
				   "failed parse left no message");
		return;
	}

	/* the accepted model is consistent with the bytes it came from */
	FUZZ_CHECK(m.net.nlayers >= 1 && m.net.nlayers <= DML_MAX_LAYERS,
			   "nlayers %d", m.net.nlayers);
	for (int l = 0; l <= m.net.nlayers; l++)
		FUZZ_CHECK(m.net.sizes[l] >= 1 && m.net.sizes[l] <= DML_MAX_WIDTH,
				   "sizes[%d] = %d", l, m.net.sizes[l]);
	FUZZ_CHECK(m.net.nparams == dml_net_param_count(m.net.nlayers, m.net.sizes),
			   "nparams %zu", m.net.nparams);
	len = dml_model_serialized_size(&m);
	FUZZ_CHECK(len == size, "serialized size %zu for a %zu-byte input", len, size);

	fuzz_predict(&m, 1);
	fuzz_predict(&m, FUZZ_ROWS_MAX);

	/* round trip: same bytes out, same model back */
	again = malloc(len);
	FUZZ_CHECK(again != NULL, "out of memory for %zu bytes", len);
	dml_model_serialize(&m, again);
	FUZZ_CHECK(memcmp(again, data, size) == 0, "re-serialized blob differs");
	st = dml_model_parse(&m2, again, len, errbuf, sizeof(errbuf));
	FUZZ_CHECK(st == DML_OK, "re-serialized blob rejected: %s", errbuf);
	FUZZ_CHECK(fuzz_models_equal(&m, &m2), "re-parsed model differs");
	dml_model_free(&m2);
	free(again);
	dml_model_free(&m);
}

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_check_blob(data, size);
	return 0;
}
