/*-------------------------------------------------------------------------
 *
 * onnx.h
 *	  dml models as ONNX graphs, and ONNX graphs as dml models.
 *
 * The messages are onnx.proto's (Debian's libonnx-dev), compiled to C with
 * protoc-c at build time; nothing here writes or reads the wire format by
 * hand.  Like kernels/, this part includes no postgres.h: it returns a
 * DmlStatus and a message, so the backend turns it into ereport() and the
 * fuzzer (regress/fuzz) links it alone.
 *
 * Export writes opset DML_ONNX_OPSET:
 *
 *	 features (N, C) -> Sub(in_mean) -> Mul(in_scale)
 *	   -> [Gemm(W_l, b_l, transB=1) -> Relu|Tanh|Sigmoid] ... -> Gemm
 *	   -> regression: Mul(out_scale) -> Add(out_mean)   output "prediction" (N, K)
 *	      logistic:   Sigmoid                           outputs "probability" (N, 1),
 *	                                                    "probabilities" (N, 2), "label" (N, 1)
 *	      softmax:    Softmax(axis 1)                   outputs "probabilities" (N, K),
 *	                                                    "label" (N, 1)
 *
 * "label" is the class label as a string (Gather from the labels).
 *
 * Import reads the first output of the graph back to its one input and
 * accepts the chain dml can run: standardization (Sub, Add, Mul, Div with
 * constants, BatchNormalization, ai.onnx.ml Scaler), dense layers (Gemm,
 * or MatMul then Add), one kind of hidden activation (Relu, Tanh,
 * Sigmoid), and at the end Softmax, Sigmoid (one output) or an affine map
 * of a regression output.  Identity, Flatten of a matrix and Cast to float
 * pass through.  Anything else on that path is an error naming the
 * operator.  Nodes off the path (a label branch) do not matter.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_ONNX_H
#define DML_ONNX_H

#include "kernels.h"

#define DML_ONNX_OPSET		13
#define DML_ONNX_IR_VERSION	7		/* the IR version of opset 13 */
#define DML_ONNX_MAX_BYTES	((size_t) 1 << 30)	/* largest graph read */
#define DML_ONNX_MAX_NODES	4096	/* nodes in a graph read */

typedef struct DmlOnnxExport
{
	const char *const *classes;	/* labels as text (classifiers), else NULL */
	int			nclasses;
	int			nmeta;			/* metadata_props, key and value pairs */
	const char *const *meta_keys;
	const char *const *meta_values;
	const char *doc;			/* the model's doc_string */
} DmlOnnxExport;

/*
 * The graph of model m; *out is malloc'd (*outlen bytes), the caller frees
 * it.
 */
extern DmlStatus dml_onnx_write(const DmlModel *m, const DmlOnnxExport *info,
								unsigned char **out, size_t *outlen,
								char *errbuf, size_t errlen);

/* what an import found besides the model */
typedef struct DmlOnnxImport
{
	char		input_name[128];	/* the graph's input tensor */
	char		ops[512];		/* the operators of the path, in order */
	int			nmeta;			/* metadata_props (malloc'd strings) */
	char	  **meta_keys;
	char	  **meta_values;
	char		producer[128];	/* producer_name producer_version */
	int64_t		opset;			/* of the default domain */
} DmlOnnxImport;

/*
 * Parse an ONNX model; on success *m owns fresh allocations and *info
 * holds what else was found (free with dml_onnx_import_free).  On failure
 * nothing is allocated and errbuf says why.
 */
extern DmlStatus dml_onnx_read(DmlModel *m, DmlOnnxImport *info,
							   const unsigned char *buf, size_t len,
							   char *errbuf, size_t errlen);
extern void dml_onnx_import_free(DmlOnnxImport *info);

#endif							/* DML_ONNX_H */
