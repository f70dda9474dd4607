/*-------------------------------------------------------------------------
 *
 * fuzz_import.c
 *	  libFuzzer target for dml_import's readers: the ONNX reader
 *	  (extension/onnx.c, over protobuf-c's unpacker) and dml's package
 *	  (extension/package.c, then kernels/format.c's parser).
 *
 * Every input goes to both.  A rejected input must leave a message and
 * allocate nothing (LeakSanitizer watches); an accepted ONNX graph must
 * give a model whose shapes are in range, that predicts on fixed inputs
 * without a memory error (probabilities in [0, 1]), and that written back
 * as ONNX reads again to the same shapes; an accepted package must point
 * its parts inside the input.  A broken promise calls abort(), which
 * libFuzzer reports as a crash.  replay.c (built with -DFUZZ_TARGET_FILE)
 * runs the same checks over corpus_import/ without the fuzzer runtime.
 *
 *-------------------------------------------------------------------------
 */
#include "kernels.h"
#include "onnx.h"
#include "package.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond, ...) \
	do { \
		if (!(cond)) \
		{ \
			fprintf(stderr, "fuzz_import: %s:%d: check failed: %s: ", \
					__FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
			abort(); \
		} \
	} while (0)

/* predict two rows of fixed features with m */
static void
fuzz_predict(const DmlModel *m)
{
	int			C = m->net.sizes[0];
	int			K = m->net.sizes[m->net.nlayers];
	int			B = 2;
	float	   *X = malloc(sizeof(float) * (size_t) B * C);
	float	   *out = malloc(sizeof(float) * (size_t) B * K);
	float	   *scratch = malloc(sizeof(float) * dml_model_scratch_floats(m, B));

	FUZZ_CHECK(X && out && scratch, "out of memory for %d x %d", C, K);
	for (size_t i = 0; i < (size_t) B * C; i++)
		X[i] = (float) ((int) (i % 7) - 3) * 0.5f;
	dml_model_predict(m, out, X, B, scratch);
	if (m->net.loss != DML_LOSS_MSE)
		for (size_t i = 0; i < (size_t) B * K; i++)
			FUZZ_CHECK(isnan(out[i]) || (out[i] >= 0.0f && out[i] <= 1.0f),
					   "probability %g out of [0, 1]", (double) out[i]);
	free(X);
	free(out);
	free(scratch);
}

static void
fuzz_onnx(const uint8_t *data, size_t size)
{
	DmlModel	m,
				m2;
	DmlOnnxImport info,
				info2;
	DmlOnnxExport ex;
	DmlStatus	st;
	char		errbuf[256] = "";
	unsigned char *out;
	size_t		outlen;
	static const char *const labels[] = {"a", "b", "c", "d", "e", "f", "g", "h"};
	const char **many = NULL;
	int			K;

	st = dml_onnx_read(&m, &info, data, size, errbuf, sizeof(errbuf));
	if (st != DML_OK)
	{
		FUZZ_CHECK(st == DML_ERR_FORMAT || st == DML_ERR_NOMEM, "status %d", (int) st);
		FUZZ_CHECK(errbuf[0] != '\0', "rejected with no message");
		FUZZ_CHECK(info.nmeta == 0 && info.meta_keys == NULL, "rejected but kept metadata");
		return;
	}
	FUZZ_CHECK(m.net.nlayers >= 1 && m.net.nlayers <= DML_MAX_LAYERS, "nlayers %d", m.net.nlayers);
	for (int l = 0; l <= m.net.nlayers; l++)
		FUZZ_CHECK(m.net.sizes[l] >= 1 && m.net.sizes[l] <= DML_MAX_WIDTH, "sizes[%d] %d", l,
				   m.net.sizes[l]);
	FUZZ_CHECK(memchr(info.ops, '\0', sizeof(info.ops)) && memchr(info.input_name, '\0',
																   sizeof(info.input_name)),
			   "unterminated strings");
	fuzz_predict(&m);

	/* written back as ONNX, it reads again to the same shapes */
	K = m.net.sizes[m.net.nlayers];
	memset(&ex, 0, sizeof(ex));
	if (m.net.loss != DML_LOSS_MSE)
	{
		ex.nclasses = m.net.loss == DML_LOSS_BCE ? 2 : K;
		many = malloc(sizeof(char *) * ex.nclasses);
		FUZZ_CHECK(many != NULL, "out of memory");
		for (int k = 0; k < ex.nclasses; k++)
			many[k] = labels[k % 8];
		ex.classes = many;
	}
	st = dml_onnx_write(&m, &ex, &out, &outlen, errbuf, sizeof(errbuf));
	FUZZ_CHECK(st == DML_OK, "cannot write back: %s", errbuf);
	st = dml_onnx_read(&m2, &info2, out, outlen, errbuf, sizeof(errbuf));
	FUZZ_CHECK(st == DML_OK, "written back, rejected: %s", errbuf);
	FUZZ_CHECK(m2.net.nlayers == m.net.nlayers && m2.net.loss == m.net.loss &&
			   memcmp(m2.net.sizes, m.net.sizes, sizeof(int) * (m.net.nlayers + 1)) == 0,
			   "written back, read as other shapes");
	dml_onnx_import_free(&info2);
	dml_model_free(&m2);
	free(out);
	free(many);
	dml_onnx_import_free(&info);
	dml_model_free(&m);
}

static void
fuzz_package(const uint8_t *data, size_t size)
{
	DmlPackage	p;
	DmlModel	m;
	DmlStatus	st;
	char		errbuf[256] = "";

	st = dml_package_read(&p, data, size, errbuf, sizeof(errbuf));
	if (st != DML_OK)
	{
		FUZZ_CHECK(st == DML_ERR_FORMAT || st == DML_ERR_CHECKSUM, "status %d", (int) st);
		FUZZ_CHECK(errbuf[0] != '\0', "rejected with no message");
		return;
	}
	for (int i = 0; i < DML_PACKAGE_PARTS; i++)
		FUZZ_CHECK(p.part[i] >= data && p.part[i] + p.len[i] <= data + size,
				   "part %d outside the input", i);
	st = dml_model_parse(&m, p.part[DML_PACKAGE_WEIGHTS], p.len[DML_PACKAGE_WEIGHTS],
						 errbuf, sizeof(errbuf));
	if (st == DML_OK)
	{
		fuzz_predict(&m);
		dml_model_free(&m);
	}
}

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_onnx(data, size);
	fuzz_package(data, size);
	return 0;
}
