/*-------------------------------------------------------------------------
 *
 * predict.c
 *	  A predict job (dml_predict_table(..., device => 'gpu')): read the
 *	  slice over libpq as the caller, under the caller's snapshot, run the
 *	  model on it in big blocks on a GPU (or the CPU), and stream (id,
 *	  prediction) blocks to the coordinator, which writes them into the
 *	  target table in the caller's transaction (a table this worker could
 *	  not see: it is not committed).
 *
 * The backend chose each column's SQL expression so that values arrive as
 * dml_predict reads them (extension/predict_table_worker.c): numbers as float8,
 * arrays as float8[], categories as their type's output text, the row id
 * in its own binary format, passed through untouched.  Encoding and its
 * checks mirror DmlFeatureInputs (extension/predict.c) down to the
 * messages and SQLSTATEs: a NULL feature, a non-finite number or an array
 * of the wrong length ends the job with the error dml_predict raises.
 * Standardization and the output function are the kernels' own
 * (dml_model_standardize, dml_model_finish); on the CPU the whole of
 * dml_model_predict runs on the same 1,024-row batches as in the backend,
 * so only a GPU's network in between can round differently.
 *
 * A float64 model (the exact solvers', weights format 2) is predicted as
 * dml_predict predicts it: inputs kept in float64, dml_model_predict64,
 * and the outputs sent as float64, on the CPU.  The GPU kernels are
 * float32, so a float64 model asked onto a GPU runs on the worker's CPU
 * instead, and the job's log line says so; one layer is cheap there.
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "libpq-fe.h"

#include "comm.h"
#ifdef DML_HAVE_CUDA
#include "cuda_kernels.h"
#endif
#include "protocol.h"
#include "worker.h"

#define CPU_ROWS		1024		/* rows per dml_model_predict, as the backend */
#define BLOCK_MIN_ROWS	1024
#define BLOCK_MAX_ROWS	65536		/* rows per GPU forward pass and per message */
#define BLOCK_BYTES		(32u << 20) /* inputs + outputs of one block, at most */

/* The job's state: the model, where it runs, the block being filled */
typedef struct Predictor
{
	const WorkerSpec *spec;
	DmlModel	m;
	int			C;
	int			K;
	int			gpu;			/* device index, or -1 for the CPU */
	int			block;			/* rows per block */
	int			B;				/* rows in the block */
	float	   *X;				/* (block, C) raw inputs */
	double	   *Xd;				/* float64 model: (block, C) raw inputs in float64 */
	char	   *msg;			/* 12-byte header, then out or out64 copied */
	float	   *out;			/* (block, K) */
	double	   *out64;			/* float64 model: (block, K) */
	float	   *scratch;		/* CPU: dml_model_predict's */
	char	   *ids;			/* per row: int32 length, bytes */
	size_t		idlen;
	size_t		idcap;
	int64_t		sent;
#ifdef DML_HAVE_CUDA
	DmlGpuNet	g;
	float	   *X_dev;			/* (block, C) */
#endif
} Predictor;

/* ---------------------------------------------------------------------
 * The errors dml_predict raises, raised here with the same words
 * --------------------------------------------------------------------- */

static void
feature_null(const DmlFeature *ft)
{
	worker_user_error("22004|Replace NULLs before predicting, e.g. with coalesce().|"
					  "feature \"%s\" is NULL", ft->name);
}

static void
feature_not_finite(const DmlFeature *ft)
{
	worker_user_error("22023|Models predict from finite numbers only.|"
					  "feature \"%s\" is NaN or infinite", ft->name);
}

/* a failed query: its SQLSTATE, message and hint, relayed as they are */
static void
relay_error(PGconn *conn, PGresult *res, const char *what)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	const char *hint = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_HINT) : NULL;

	if (state && strlen(state) == 5 && msg)
		worker_user_error("%s|%s|%s", state, hint && !strchr(hint, '|') ? hint : "", msg);
	worker_fail("%s failed: %s", what, PQerrorMessage(conn));
}

/* ---------------------------------------------------------------------
 * Decoding one row of the binary COPY
 * --------------------------------------------------------------------- */

/* room for n more id bytes */
static void
ids_reserve(Predictor *pr, size_t n)
{
	if (pr->idlen + n <= pr->idcap)
		return;
	pr->idcap = (pr->idlen + n) * 2;
	pr->ids = realloc(pr->ids, pr->idcap);
	if (pr->ids == NULL)
		worker_fail("out of memory for %zu bytes of row ids", pr->idcap);
}

/* a float8[] in array_send's format into dst (width floats), and widened into dstd */
static void
decode_vector(const DmlFeature *ft, float *dst, double *dstd, const char *p, int len)
{
	const char *end = p + len;
	int			ndim;
	int64_t		n = 1;

	if (len < 12)
		worker_fail("malformed array for feature \"%s\"", ft->name);
	ndim = (int) be32(p);
	p += 12;					/* ndim, has-nulls flag, element type */
	if (ndim < 0 || ndim > 6 || end - p < 8 * ndim)
		worker_fail("malformed array for feature \"%s\"", ft->name);
	if (ndim == 0)
		n = 0;
	for (int d = 0; d < ndim; d++, p += 8)
		n *= (int32_t) be32(p);
	if (n != ft->width)
		worker_user_error("2202E||feature \"%s\" has %lld elements, the model expects %d",
						  ft->name, (long long) n, ft->width);
	for (int i = 0; i < n; i++)
	{
		int			elen;
		double		v;

		if (end - p < 4)
			worker_fail("malformed array for feature \"%s\"", ft->name);
		elen = (int32_t) be32(p);
		p += 4;
		if (elen < 0)
			worker_user_error("22004||feature \"%s\" has a NULL element at position %d",
							  ft->name, i + 1);
		if (elen != 8 || end - p < 8)
			worker_fail("malformed array element for feature \"%s\"", ft->name);
		v = be_double(p);
		p += 8;
		if (!isfinite(v))
			feature_not_finite(ft);
		dst[i] = (float) v;
		/*
		 * float64 models see vector elements in float32, widened: so they
		 * were loaded for training (load.c) and dml_predict reads them
		 */
		if (dstd)
			dstd[i] = dst[i];
	}
}

/* decode one row (after its field count) into the block; returns where the next begins */
static const char *
decode_row(Predictor *pr, const char *p, const char *end)
{
	const WorkerSpec *spec = pr->spec;
	float	   *x = pr->X + (size_t) pr->B * pr->C;
	double	   *xd = pr->Xd ? pr->Xd + (size_t) pr->B * pr->C : NULL;
	int			len;

	if (spec->has_id)
	{
		if (end - p < 4)
			worker_fail("truncated COPY row");
		len = (int32_t) be32(p);
		if (len > 0 && end - p - 4 < len)
			worker_fail("truncated COPY row");
		/* the id goes back as it came: length, then its binary form */
		ids_reserve(pr, 4 + (len > 0 ? len : 0));
		memcpy(pr->ids + pr->idlen, &len, 4);
		if (len > 0)
			memcpy(pr->ids + pr->idlen + 4, p + 4, len);
		pr->idlen += 4 + (len > 0 ? len : 0);
		p += 4 + (len > 0 ? len : 0);
	}
	for (int fi = 0; fi < spec->nfeatures; fi++)
	{
		const DmlFeature *ft = &spec->features[fi];
		float	   *dst = x + ft->offset;
		double	   *dstd = xd ? xd + ft->offset : NULL;

		if (end - p < 4)
			worker_fail("truncated COPY row");
		len = (int32_t) be32(p);
		p += 4;
		if (len < 0)
			feature_null(ft);
		if (end - p < len)
			worker_fail("truncated COPY row");
		switch (ft->kind)
		{
			case DML_FEAT_NUM:
				{
					double		v;

					if (len != 8)
						worker_fail("feature \"%s\" arrived as %d bytes, not a float8", ft->name, len);
					v = be_double(p);
					if (!isfinite(v))
						feature_not_finite(ft);
					dst[0] = (float) v;
					if (dstd)
						dstd[0] = v;
					break;
				}
			case DML_FEAT_VEC:
				decode_vector(ft, dst, dstd, p, len);
				break;
			case DML_FEAT_CAT:
				feature_onehot(ft, p, len, dst);
				if (dstd)
					for (int w = 0; w < ft->width; w++)
						dstd[w] = dst[w];	/* 0 or 1 */
				break;
		}
		p += len;
	}
	pr->B++;
	return p;
}

/* ---------------------------------------------------------------------
 * Running the model on a block, and sending it
 * --------------------------------------------------------------------- */

#ifdef DML_HAVE_CUDA
#define gpuCheck(call) \
	do { int st_ = (call); \
		 if (st_ != DML_OK) \
			 worker_fail("%s failed on GPU %d: %s", #call, pr->gpu, errbuf); } while (0)

#define cudaRtCheck(call) \
	do { cudaError_t e_ = (call); \
		 if (e_ != cudaSuccess) \
			 worker_fail("%s failed on GPU %d: %s", #call, pr->gpu, cudaGetErrorString(e_)); } while (0)

/*
 * Blocks no bigger than half the device's free memory takes (activations
 * of every layer for the block, and its inputs): a very wide network gets
 * smaller blocks instead of an out-of-memory error.
 */
static void
gpu_fit_block(Predictor *pr)
{
	size_t		free_bytes = 0,
				total_bytes = 0;

	cudaRtCheck(cudaSetDevice(pr->gpu));
	cudaRtCheck(cudaMemGetInfo(&free_bytes, &total_bytes));
	while (pr->block > BLOCK_MIN_ROWS &&
		   dml_gpu_net_bytes(&pr->m.net, pr->block, DML_OPT_SGD) +
		   sizeof(float) * (size_t) pr->block * pr->C > free_bytes / 2)
		pr->block /= 2;
}

/* the network on the device, in strict FP32, and a block's input buffer */
static void
gpu_setup(Predictor *pr)
{
	char		errbuf[1024] = "";

	cudaRtCheck(cudaSetDevice(pr->gpu));
	gpuCheck(dml_gpu_net_alloc(&pr->g, &pr->m.net, pr->block, DML_OPT_SGD, pr->gpu, 0,
							   errbuf, sizeof(errbuf)));
	gpuCheck(dml_gpu_net_upload(&pr->g, pr->m.net.params, errbuf, sizeof(errbuf)));
	cudaRtCheck(cudaMalloc((void **) &pr->X_dev, sizeof(float) * (size_t) pr->block * pr->C));
}

/* out = the model on the block: standardized here, the network there, finished here */
static void
gpu_forward(Predictor *pr)
{
	char		errbuf[1024] = "";
	const float *logits;

	dml_model_standardize(&pr->m, pr->X, pr->X, pr->B);
	cudaRtCheck(cudaMemcpyAsync(pr->X_dev, pr->X, sizeof(float) * (size_t) pr->B * pr->C,
								cudaMemcpyHostToDevice, pr->g.stream));
	gpuCheck(dml_gpu_net_forward(&pr->g, &logits, pr->X_dev, pr->B, errbuf, sizeof(errbuf)));
	cudaRtCheck(cudaMemcpyAsync(pr->out, logits, sizeof(float) * (size_t) pr->B * pr->K,
								cudaMemcpyDeviceToHost, pr->g.stream));
	cudaRtCheck(cudaStreamSynchronize(pr->g.stream));
	dml_model_finish(&pr->m, pr->out, pr->B);
}
#endif

/* predict the block and send it: header, outputs, ids */
static void
flush_block(Predictor *pr)
{
	uint32_t	hdr[3];
	size_t		vsize = pr->Xd ? sizeof(double) : sizeof(float);

	if (pr->B == 0)
		return;
	if (pr->Xd)
		dml_model_predict64(&pr->m, pr->out64, pr->Xd, pr->B);
	else
#ifdef DML_HAVE_CUDA
	if (pr->gpu >= 0)
		gpu_forward(pr);
	else
#endif
		for (int lo = 0; lo < pr->B; lo += CPU_ROWS)
		{
			int			n = pr->B - lo < CPU_ROWS ? pr->B - lo : CPU_ROWS;

			dml_model_predict(&pr->m, pr->out + (size_t) lo * pr->K,
							  pr->X + (size_t) lo * pr->C, n, pr->scratch);
		}
	hdr[0] = (uint32_t) pr->B;
	hdr[1] = (uint32_t) pr->K;
	hdr[2] = (uint32_t) vsize;
	memcpy(pr->msg, hdr, sizeof(hdr));
	memcpy(pr->msg + sizeof(hdr), pr->Xd ? (void *) pr->out64 : (void *) pr->out,
		   vsize * (size_t) pr->B * pr->K);
	control_send(DML_MSG_PREDICTIONS, pr->msg, sizeof(hdr) + vsize * (size_t) pr->B * pr->K,
				 pr->ids, pr->idlen);
	pr->sent += pr->B;
	pr->B = 0;
	pr->idlen = 0;
}

/* ---------------------------------------------------------------------
 * Setup: model, device, connection
 * --------------------------------------------------------------------- */

/* the model blob that came with the job */
static void
read_model(Predictor *pr)
{
	char		err[256];

	if (dml_model_parse(&pr->m, pr->spec->attached, pr->spec->attached_len, err,
						sizeof(err)) != DML_OK)
		worker_fail("the model does not parse: %s", err);
	pr->C = pr->m.net.sizes[0];
	pr->K = pr->m.net.sizes[pr->m.net.nlayers];
	if (pr->C != pr->spec->ninputs || pr->K != pr->spec->outputs)
		worker_fail("the model has %d inputs and %d outputs, the spec says %d and %d",
					pr->C, pr->K, pr->spec->ninputs, pr->spec->outputs);
}

/*
 * The device: 'cpu' the CPU kernels, 'gpu' the first visible GPU or a
 * user error saying why there is none, 'auto' a GPU when there is one.
 */
static int
choose_device(const WorkerSpec *spec)
{
	int			ngpu = 0;

	if (spec->device == DML_DEVICE_CPU)
		return -1;
#ifdef DML_HAVE_CUDA
	ngpu = dml_gpu_device_count();
#endif
	if (ngpu > 0)
		return 0;
	if (spec->device == DML_DEVICE_GPU)
#ifdef DML_HAVE_CUDA
		worker_user_error("55000|Use device => 'cpu' (or 'auto') on a machine without a GPU.|"
						  "device 'gpu' was asked for, but no CUDA device is visible to the worker (%s)",
						  dml_cuda_last_error());
#else
		worker_user_error("55000|Use device => 'cpu' (or 'auto'), or build dml with the CUDA toolkit.|"
						  "device 'gpu' was asked for, but this build of dml-worker has no CUDA support");
#endif
	return -1;
}

/* run a command or relay its error */
static void
exec_ok(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);

	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		relay_error(conn, res, sql);
	PQclear(res);
}

/* connect as the caller, and see what the caller's snapshot sees */
static PGconn *
connect_as_caller(const WorkerSpec *spec)
{
	PGconn	   *conn = worker_login(spec);
	char		sql[512];

	/* text (categories, ids) as the server holds it, as the backend reads it */
	if (PQsetClientEncoding(conn, PQparameterStatus(conn, "server_encoding")) != 0)
		worker_fail("could not set the client encoding: %s", PQerrorMessage(conn));
	exec_ok(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
	if (spec->snapshot && spec->snapshot[0])
	{
		if (strlen(spec->snapshot) > 200 || strchr(spec->snapshot, '\''))
			worker_fail("malformed snapshot id");
		snprintf(sql, sizeof(sql), "SET TRANSACTION SNAPSHOT '%s'", spec->snapshot);
		exec_ok(conn, sql);
	}
	return conn;
}

/* one row into the block; a full block is run and sent */
static const char *
predict_row(void *arg, const char *p, const char *end)
{
	Predictor  *pr = arg;

	p = decode_row(pr, p, end);
	if (pr->B == pr->block)
		flush_block(pr);
	return p;
}

/* COPY the slice and predict it block by block */
static void
copy_and_predict(Predictor *pr, PGconn *conn, const char *query)
{
	size_t		qlen = strlen(query) + 64;
	char	   *sql = malloc(qlen);
	PGresult   *res;
	int			nfields = pr->spec->nfeatures + (pr->spec->has_id ? 1 : 0);

	snprintf(sql, qlen, "COPY (%s) TO STDOUT (FORMAT binary)", query);
	res = PQexec(conn, sql);
	if (PQresultStatus(res) != PGRES_COPY_OUT)
		relay_error(conn, res, "COPY");
	PQclear(res);
	free(sql);

	if (copy_rows(conn, nfields, predict_row, pr, NULL) == -2)
		relay_error(conn, PQgetResult(conn), "COPY");
	res = PQgetResult(conn);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		relay_error(conn, res, "COPY");
	PQclear(res);
	flush_block(pr);
}

/*
 * predict_run
 *		The whole predict job, on rank 0 (the job has one rank): every
 *		block goes to the coordinator as it is done, then DONE with the
 *		count.
 */
void
predict_run(const WorkerSpec *spec)
{
	Predictor	pr;
	PGconn	   *conn;
	char		line[512];
	int			n;
	size_t		row_bytes;
	bool		wide;

	if (worker_world != 1)
		worker_fail("a predict job runs on one rank, not %d", worker_world);
	memset(&pr, 0, sizeof(pr));
	pr.spec = spec;
	read_model(&pr);
	pr.gpu = choose_device(spec);
	wide = pr.m.precision == 64;
	if (wide && pr.gpu >= 0)
	{
		n = snprintf(line, sizeof(line), "dml_predict_table: the model is float64 and the GPU kernels are float32: predicting on the worker's cpu in float64 instead of gpu %d",
					 pr.gpu);
		control_send(DML_MSG_LOG, line, n < (int) sizeof(line) ? n : (int) sizeof(line) - 1, NULL, 0);
		pr.gpu = -1;
	}

	/* blocks as big as BLOCK_BYTES of inputs and outputs allow */
	row_bytes = sizeof(float) * ((size_t) pr.C + pr.K);
	if (wide)
		row_bytes += sizeof(double) * ((size_t) pr.C + 2 * pr.K);
	pr.block = (int) (BLOCK_BYTES / row_bytes);
	if (pr.block > BLOCK_MAX_ROWS)
		pr.block = BLOCK_MAX_ROWS;
	if (pr.block < BLOCK_MIN_ROWS)
		pr.block = BLOCK_MIN_ROWS;
#ifdef DML_HAVE_CUDA
	if (pr.gpu >= 0)
		gpu_fit_block(&pr);
#endif
	pr.X = malloc(sizeof(float) * (size_t) pr.block * pr.C);
	pr.Xd = wide ? malloc(sizeof(double) * (size_t) pr.block * pr.C) : NULL;
	pr.out = malloc(sizeof(float) * (size_t) pr.block * pr.K);
	pr.out64 = wide ? malloc(sizeof(double) * (size_t) pr.block * pr.K) : NULL;
	pr.msg = malloc(12 + (wide ? sizeof(double) : sizeof(float)) * (size_t) pr.block * pr.K);
	pr.scratch = malloc(sizeof(float) * dml_model_scratch_floats(&pr.m, CPU_ROWS));
	if (!pr.X || (wide && (!pr.Xd || !pr.out64)) || !pr.out || !pr.msg || !pr.scratch)
		worker_fail("out of memory for blocks of %d rows", pr.block);
#ifdef DML_HAVE_CUDA
	if (pr.gpu >= 0)
	{
		struct cudaDeviceProp prop;

		gpu_setup(&pr);
		if (cudaGetDeviceProperties(&prop, pr.gpu) != cudaSuccess)
			snprintf(prop.name, sizeof(prop.name), "?");
		n = snprintf(line, sizeof(line), "dml_predict_table: predicting on gpu %d (%s) in a worker, %d rows per block",
					 pr.gpu, prop.name, pr.block);
	}
	else
#endif
		n = snprintf(line, sizeof(line), "dml_predict_table: predicting on cpu in a worker%s, %d rows per block",
					 wide ? " in float64" : "", pr.block);
	control_send(DML_MSG_LOG, line, n < (int) sizeof(line) ? n : (int) sizeof(line) - 1, NULL, 0);

	conn = connect_as_caller(spec);
	for (int i = 0; i < spec->nslices; i++)
		if (spec->slices[i].rank == worker_rank)
			copy_and_predict(&pr, conn, spec->slices[i].query);
	exec_ok(conn, "COMMIT");
	PQfinish(conn);

	control_send(DML_MSG_DONE, &pr.sent, sizeof(pr.sent), NULL, 0);
#ifdef DML_HAVE_CUDA
	if (pr.gpu >= 0)
	{
		dml_gpu_net_free(&pr.g);
		cudaFree(pr.X_dev);
	}
#endif
	dml_model_free(&pr.m);
	free(pr.X);
	free(pr.Xd);
	free(pr.out);
	free(pr.out64);
	free(pr.msg);
	free(pr.scratch);
	free(pr.ids);
}
