/*-------------------------------------------------------------------------
 *
 * predict.c
 *	  A predict job (dml_predict_table(..., device => 'gpu' or workers =>
 *	  N)): each rank reads its slices over libpq as the caller, under the
 *	  caller's snapshot (a shard's from its own server, under the snapshot
 *	  exported there), runs the model on them in big blocks on a GPU (or
 *	  the CPU), and the (id, prediction) blocks go to the coordinator, which
 *	  writes them into the target table in the caller's transaction (a
 *	  table no worker could see: it is not committed).
 *
 * Rank 0 alone talks to the coordinator: the other ranks send their
 * blocks to it over MPI (the job's own channels: they may run on other
 * hosts), and it relays each one as it comes, between blocks of its own,
 * then DONE with the count of every rank's rows.  A rank's error goes to
 * rank 0 the same way, which reports it and ends the job.
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
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libpq-fe.h"

#include "comm.h"
#ifdef DML_HAVE_CUDA
#include "cuda_kernels.h"
#endif
#include "protocol.h"
#include "worker.h"

#define CPU_ROWS		1024		/* rows per dml_model_predict, as the backend */
#define BLOCK_MIN_ROWS	1024
#define TAG_BLOCK		0x7d01		/* a rank's block, as PREDICTIONS carries it */
#define TAG_END			0x7d02		/* a rank's end: int64 rows it sent */
#define TAG_ERROR		0x7d03		/* a rank's error, as ERROR carries it */
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
	int64_t		sent;			/* rows of this rank */
	char	   *out_msg;		/* a rank but 0: the whole block for MPI */
	size_t		out_cap;
	/* rank 0: what the other ranks sent */
	char	   *in_msg;
	size_t		in_cap;
	int64_t		relayed;		/* rows relayed */
	int64_t		ended_rows;		/* rows the ended ranks said they sent */
	int			ended;			/* ranks that ended */
#ifdef DML_HAVE_CUDA
	DmlGpuNet	g;
	float	   *X_dev;			/* (block, C) */
#endif
} Predictor;

/* ---------------------------------------------------------------------
 * The errors dml_predict raises, raised here with the same words
 * --------------------------------------------------------------------- */

/*
 * Whether rank 0 relays the other ranks' messages: from when every rank is
 * connected (connect_as_caller's collectives are behind them) on.
 */
static bool relaying = false;

/*
 * A user's error (fmt is "SQLSTATE|hint|message", as worker_user_error's):
 * with one rank, worker_user_error; with several, the ranks are not in
 * step (each reads its own rows), so rank 0 reports it at once and ends
 * the job, and any other rank sends it to rank 0, which does the same.
 * Before rank 0 relays (it may wait in a collective), another rank writes
 * it to the job's log as a final error (worker_fail_final), which the
 * coordinator raises as it is, and ends the job.
 */
static void predict_error(const char *fmt,...) __attribute__((format(printf, 1, 2), noreturn));

static void
predict_error(const char *fmt,...)
{
	char		msg[2048];
	char		payload[2100];
	char	   *a,
			   *b;
	va_list		ap;
	int			n;
	MPI_Request req;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (worker_world == 1)
		worker_user_error("%s", msg);
	a = strchr(msg, '|');
	b = a ? strchr(a + 1, '|') : NULL;
	if (a && b)
	{
		*a = '\0';
		*b = '\0';
		n = snprintf(payload, sizeof(payload), "%s\n%s\n%s", msg, b + 1, a + 1);
	}
	else
		n = snprintf(payload, sizeof(payload), "\n%s\n", msg);
	if (n >= (int) sizeof(payload))
		n = sizeof(payload) - 1;
	fprintf(stderr, "dml-worker error: rank %d on %s: %s\n", worker_rank, worker_host,
			a && b ? b + 1 : msg);
	fflush(stderr);
	if (worker_rank == 0)
	{
		control_send(DML_MSG_ERROR, payload, n, NULL, 0);
		worker_abort(2);
	}
	if (!relaying)
	{
		if (a && b)
			worker_fail_final_at(__FILE__, __LINE__, msg, a[1] ? a + 1 : NULL, "%s", b + 1);
		worker_fail("%s", msg);
	}
	MPI_Isend(payload, n, MPI_BYTE, 0, TAG_ERROR, MPI_COMM_WORLD, &req);
	comm_wait_all(1, &req);
	/* rank 0 ends the job */
	for (;;)
		pause();
}

static void
feature_null(const DmlFeature *ft)
{
	predict_error("22004|Replace NULLs before predicting, e.g. with coalesce().|"
					  "feature \"%s\" is NULL", ft->name);
}

static void
feature_not_finite(const DmlFeature *ft)
{
	predict_error("22023|Models predict from finite numbers only.|"
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
		predict_error("%s|%s|%s", state, hint && !strchr(hint, '|') ? hint : "", msg);
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
		predict_error("2202E||feature \"%s\" has %lld elements, the model expects %d",
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
			predict_error("22004||feature \"%s\" has a NULL element at position %d",
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

/* ---------------------------------------------------------------------
 * Rank 0: the other ranks' blocks, relayed to the coordinator
 * --------------------------------------------------------------------- */

/* receive one message whose status st was probed, and relay or act on it */
static void
relay_one(Predictor *pr, MPI_Status *st)
{
	int			n = 0;
	uint32_t	hdr[3];

	MPI_Get_count(st, MPI_BYTE, &n);
	if ((size_t) n + 1 > pr->in_cap)
	{
		pr->in_cap = (size_t) n + 1;
		pr->in_msg = realloc(pr->in_msg, pr->in_cap);
		if (pr->in_msg == NULL)
			worker_fail("out of memory for a block of %d bytes from rank %d", n, st->MPI_SOURCE);
	}
	MPI_Recv(pr->in_msg, n, MPI_BYTE, st->MPI_SOURCE, st->MPI_TAG, MPI_COMM_WORLD,
			 MPI_STATUS_IGNORE);
	switch (st->MPI_TAG)
	{
		case TAG_BLOCK:
			if (n < (int) sizeof(hdr))
				worker_fail("a malformed block from rank %d", st->MPI_SOURCE);
			memcpy(hdr, pr->in_msg, sizeof(hdr));
			control_send(DML_MSG_PREDICTIONS, pr->in_msg, n, NULL, 0);
			pr->relayed += hdr[0];
			break;
		case TAG_END:
			{
				int64_t		rows;

				if (n != (int) sizeof(rows))
					worker_fail("a malformed end from rank %d", st->MPI_SOURCE);
				memcpy(&rows, pr->in_msg, sizeof(rows));
				pr->ended_rows += rows;
				pr->ended++;
				break;
			}
		case TAG_ERROR:
			/* the rank wrote it to the log too; the backend raises it as it is */
			control_send(DML_MSG_ERROR, pr->in_msg, n, NULL, 0);
			worker_abort(2);
			break;
		default:
			worker_fail("an unknown message (tag %d) from rank %d", st->MPI_TAG, st->MPI_SOURCE);
	}
}

/* relay what has come, without waiting */
static void
relay_ready(Predictor *pr)
{
	MPI_Status	st;
	int			found = 1;

	while (worker_world > 1)
	{
		MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &found, &st);
		if (!found)
			break;
		relay_one(pr, &st);
	}
}

/* relay until every other rank has ended */
static void
relay_rest(Predictor *pr)
{
	MPI_Status	st;

	while (pr->ended < worker_world - 1)
	{
		comm_probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
		relay_one(pr, &st);
	}
	if (pr->ended_rows != pr->relayed)
		worker_fail("the other ranks sent %lld rows but said %lld",
					(long long) pr->relayed, (long long) pr->ended_rows);
}

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
	if (worker_rank == 0)
	{
		control_send(DML_MSG_PREDICTIONS, pr->msg, sizeof(hdr) + vsize * (size_t) pr->B * pr->K,
					 pr->ids, pr->idlen);
		relay_ready(pr);
	}
	else
	{
		/* one message to rank 0, which relays it as it is */
		size_t		len = sizeof(hdr) + vsize * (size_t) pr->B * pr->K;
		MPI_Request req;

		if (len + pr->idlen > (size_t) INT32_MAX)
			worker_fail("a block of %d rows is too large to send", pr->B);
		if (len + pr->idlen > pr->out_cap)
		{
			pr->out_cap = len + pr->idlen;
			pr->out_msg = realloc(pr->out_msg, pr->out_cap);
			if (pr->out_msg == NULL)
				worker_fail("out of memory for a block of %zu bytes", pr->out_cap);
		}
		memcpy(pr->out_msg, pr->msg, len);
		if (pr->idlen)
			memcpy(pr->out_msg + len, pr->ids, pr->idlen);
		MPI_Isend(pr->out_msg, (int) (len + pr->idlen), MPI_BYTE, 0, TAG_BLOCK, MPI_COMM_WORLD, &req);
		comm_wait_all(1, &req);
	}
	pr->sent += pr->B;
	pr->B = 0;
	pr->idlen = 0;
}

/* ---------------------------------------------------------------------
 * Setup: model, device, connection
 * --------------------------------------------------------------------- */

/* the model blob that came with the job (to rank 0, which hands it on) */
static void
read_model(Predictor *pr)
{
	char		err[256];
	const unsigned char *blob = pr->spec->attached;
	uint64_t	len = pr->spec->attached_len;
	unsigned char *copy = NULL;

	if (worker_world > 1)
	{
		comm_bcast(&len, sizeof(len), 0);
		if (worker_rank != 0)
		{
			copy = malloc(len ? len : 1);
			if (copy == NULL)
				worker_fail("out of memory for a model of %llu bytes", (unsigned long long) len);
			blob = copy;
		}
		comm_bcast((void *) blob, len, 0);
	}
	if (dml_model_parse(&pr->m, blob, len, err, sizeof(err)) != DML_OK)
		worker_fail("the model does not parse: %s", err);
	/* the hidden layers' weights laid out once, not in every block (format.c) */
	if (pr->m.precision == 32 && dml_model_prepare(&pr->m) != DML_OK)
		worker_fail("out of memory for the model's weights");
	pr->C = pr->m.net.sizes[0];
	pr->K = pr->m.net.sizes[pr->m.net.nlayers];
	if (pr->C != pr->spec->ninputs || pr->K != pr->spec->outputs)
		worker_fail("the model has %d inputs and %d outputs, the spec says %d and %d",
					pr->C, pr->K, pr->spec->ninputs, pr->spec->outputs);
}

/*
 * The device: 'cpu' the CPU kernels, 'gpu' a visible GPU or a user error
 * saying why there is none, 'auto' a GPU when there is one.  The ranks of
 * one host take its GPUs in turn (by their rank on the host).
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
		return comm_local_rank() % ngpu;
	if (spec->device == DML_DEVICE_GPU)
#ifdef DML_HAVE_CUDA
		predict_error("55000|Use device => 'cpu' (or 'auto') on a machine without a GPU.|"
						  "device 'gpu' was asked for, but no CUDA device is visible to the worker (%s)",
						  dml_cuda_last_error());
#else
		predict_error("55000|Use device => 'cpu' (or 'auto'), or build dml with the CUDA toolkit.|"
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

/*
 * Connect as the caller, and see what the caller's snapshot sees.  Without
 * one (the caller was in a subtransaction) a job of several ranks still
 * reads one snapshot: rank 0 exports its own and the others import it, and
 * rank 0 keeps it open (a barrier) until every rank has.
 */
static PGconn *
connect_as_caller(const WorkerSpec *spec)
{
	PGconn	   *conn = worker_login(spec);
	char		sql[512];
	char		snapshot[256];
	bool		share = (!spec->snapshot || !spec->snapshot[0]) && worker_world > 1;

	/* text (categories, ids) as the server holds it, as the backend reads it */
	if (PQsetClientEncoding(conn, PQparameterStatus(conn, "server_encoding")) != 0)
		worker_fail("could not set the client encoding: %s", PQerrorMessage(conn));
	exec_ok(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
	snprintf(snapshot, sizeof(snapshot), "%s", spec->snapshot ? spec->snapshot : "");
	if (share)
	{
		if (worker_rank == 0)
		{
			PGresult   *res = PQexec(conn, "SELECT pg_catalog.pg_export_snapshot()");

			if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
				relay_error(conn, res, "pg_export_snapshot");
			snprintf(snapshot, sizeof(snapshot), "%s", PQgetvalue(res, 0, 0));
			PQclear(res);
		}
		comm_bcast(snapshot, sizeof(snapshot), 0);
	}
	if (snapshot[0] && !(share && worker_rank == 0))
	{
		if (strlen(snapshot) > 200 || strchr(snapshot, '\''))
			worker_fail("malformed snapshot id");
		snprintf(sql, sizeof(sql), "SET TRANSACTION SNAPSHOT '%s'", snapshot);
		exec_ok(conn, sql);
	}
	if (share)
		comm_barrier();
	return conn;
}

static void copy_and_predict(Predictor *pr, PGconn *conn, const char *query);

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

/*
 * This rank's slices of shards: each from its own server, as the role of
 * the caller's user mapping (the connection string came with the job),
 * under the snapshot the coordinator exported there, as shard_read.c
 * reads them for training.  Text arrives in the coordinating server's
 * encoding, as the model's levels are.
 */
static void
predict_shards(Predictor *pr, PGconn *home)
{
	const WorkerSpec *spec = pr->spec;

	for (int k = 1; k <= spec->nshards; k++)
	{
		const SpecShard *sh = &spec->shards[k - 1];
		PGconn	   *conn = NULL;
		char		sql[300];

		for (int i = 0; i < spec->nslices; i++)
		{
			const SpecSlice *s = &spec->slices[i];

			if (s->shard != k || s->rank != worker_rank)
				continue;
			if (conn == NULL)
			{
				conn = shard_connect(spec, k);
				if (PQsetClientEncoding(conn, PQparameterStatus(home, "server_encoding")) != 0)
					worker_fail("could not set the client encoding on shard server \"%s\": %s",
								sh->name ? sh->name : "?", PQerrorMessage(conn));
				exec_ok(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
				snprintf(sql, sizeof(sql), "SET TRANSACTION SNAPSHOT '%s'", sh->snapshot);
				exec_ok(conn, sql);
			}
			copy_and_predict(pr, conn, s->query);
		}
		if (conn)
		{
			exec_ok(conn, "COMMIT");
			PQfinish(conn);
		}
	}
}

static uint32_t
le32u(const char *p)
{
	const unsigned char *u = (const unsigned char *) p;

	return (uint32_t) u[0] | (uint32_t) u[1] << 8 | (uint32_t) u[2] << 16 | (uint32_t) u[3] << 24;
}

static uint64_t
le64(const char *p)
{
	const unsigned char *u = (const unsigned char *) p;
	uint64_t	v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | u[i];
	return v;
}

/*
 * One slice as a dml.pack_rows64 block (extension/aggregate.c has the
 * layout): the id as the int8 target, the features in float64, the NULLs
 * listed after the rows.  Each row is checked and converted as decode_row
 * does a COPY row (a NULL or non-finite feature is dml_predict's error);
 * the id goes back in its own type's binary format, big-endian, of
 * spec->id_bytes.
 */
static void
block_and_predict(Predictor *pr, PGconn *conn, const char *query)
{
	const WorkerSpec *spec = pr->spec;
	PGresult   *res = PQexecParams(conn, query, 0, NULL, NULL, NULL, NULL, 1);
	const char *p;
	const char *nulls;
	size_t		len,
				rowlen;
	uint32_t	nrows,
				n,
				nnulls,
				k = 0;

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		relay_error(conn, res, "reading a slice");
	if (PQntuples(res) != 1 || PQnfields(res) != 1)
		worker_fail("dml.pack_rows64 returned %d rows of %d columns", PQntuples(res), PQnfields(res));
	if (PQgetisnull(res, 0, 0))
	{
		PQclear(res);			/* no rows */
		return;
	}
	p = PQgetvalue(res, 0, 0);
	len = (size_t) PQgetlength(res, 0, 0);
	if (len < 24 || memcmp(p, "DMLB", 4) != 0 || le32u(p + 4) != 1)
		worker_fail("malformed dml.pack_rows64 block");
	nrows = le32u(p + 8);
	n = le32u(p + 12);
	nnulls = le32u(p + 16);
	rowlen = 8 + 8 * (size_t) n;
	if ((int) n != spec->nfeatures || n != (uint32_t) pr->C ||
		len != 24 + rowlen * nrows + 8 * (size_t) nnulls ||
		(le32u(p + 20) & 3) != 3)
		worker_fail("dml.pack_rows64 block does not match the job (%u rows of %u features)", nrows, n);
	nulls = p + 24 + rowlen * nrows;
	p += 24;
	for (uint32_t r = 0; r < nrows; r++, p += rowlen)
	{
		float	   *x = pr->X + (size_t) pr->B * pr->C;
		double	   *xd = pr->Xd ? pr->Xd + (size_t) pr->B * pr->C : NULL;
		int			id_null = 0;

		/* this row's NULLs (listed in row order) */
		for (; k < nnulls && le32u(nulls + 8 * (size_t) k) == r; k++)
		{
			int32_t		col = (int32_t) le32u(nulls + 8 * (size_t) k + 4);

			if (col < 0)
				id_null = 1;
			else if (col < (int32_t) n)
				feature_null(&spec->features[col]);
		}
		for (uint32_t c = 0; c < n; c++)
		{
			uint64_t	b = le64(p + 8 + 8 * (size_t) c);
			double		v;

			memcpy(&v, &b, 8);
			if (!isfinite(v))
				feature_not_finite(&spec->features[c]);
			x[c] = (float) v;
			if (xd)
				xd[c] = v;
		}
		if (spec->has_id)
		{
			int64_t		id = (int64_t) le64(p);
			int32_t		idlen = id_null ? -1 : spec->id_bytes;

			/* the id goes back as COPY would have sent it: length, big-endian value */
			ids_reserve(pr, 4 + (idlen > 0 ? idlen : 0));
			memcpy(pr->ids + pr->idlen, &idlen, 4);
			for (int i = 0; i < idlen; i++)
				pr->ids[pr->idlen + 4 + i] = (char) ((uint64_t) id >> (8 * (idlen - 1 - i)));
			pr->idlen += 4 + (idlen > 0 ? idlen : 0);
		}
		if (++pr->B == pr->block)
			flush_block(pr);
	}
	if (k != nnulls)
		worker_fail("malformed NULL list in a dml.pack_rows64 block");
	PQclear(res);
	flush_block(pr);
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
 *		The whole predict job, on every rank: each reads and predicts its
 *		slices; rank 0 sends its blocks to the coordinator as they are
 *		done and relays the other ranks' (which send theirs to it), then
 *		DONE with the count of all.
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
	char		ranks[64];

	memset(&pr, 0, sizeof(pr));
	pr.spec = spec;
	read_model(&pr);
	pr.gpu = choose_device(spec);
	wide = pr.m.precision == 64;
	if (worker_world == 1)
		snprintf(ranks, sizeof(ranks), "a worker");
	else
		snprintf(ranks, sizeof(ranks), "%d workers", worker_world);
	if (wide && pr.gpu >= 0)
	{
		n = snprintf(line, sizeof(line), "dml_predict_table: the model is float64 and the GPU kernels are float32: predicting on the worker's cpu in float64 instead of gpu %d",
					 pr.gpu);
		if (worker_rank == 0)
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
	pr.scratch = dml_malloc_lines(dml_model_scratch_floats(&pr.m, CPU_ROWS), sizeof(float));
	if (!pr.X || (wide && (!pr.Xd || !pr.out64)) || !pr.out || !pr.msg || !pr.scratch)
		worker_fail("out of memory for blocks of %d rows", pr.block);
#ifdef DML_HAVE_CUDA
	if (pr.gpu >= 0)
	{
		struct cudaDeviceProp prop;

		gpu_setup(&pr);
		if (cudaGetDeviceProperties(&prop, pr.gpu) != cudaSuccess)
			snprintf(prop.name, sizeof(prop.name), "?");
		n = snprintf(line, sizeof(line), "dml_predict_table: predicting on gpu %d (%s) in %s, %d rows per block",
					 pr.gpu, prop.name, ranks, pr.block);
	}
	else
#endif
		n = snprintf(line, sizeof(line), "dml_predict_table: predicting on cpu in %s%s, %d rows per block",
					 ranks, wide ? " in float64" : "", pr.block);
	if (worker_rank == 0)
		control_send(DML_MSG_LOG, line, n < (int) sizeof(line) ? n : (int) sizeof(line) - 1, NULL, 0);

	conn = connect_as_caller(spec);
	relaying = true;
	for (int i = 0; i < spec->nslices; i++)
	{
		const SpecSlice *sl = &spec->slices[i];

		if (sl->rank != worker_rank || sl->shard != 0)
			continue;
		if (spec->load_block && !sl->whole)
			block_and_predict(&pr, conn, sl->query);
		else
			copy_and_predict(&pr, conn, sl->query);
	}
	predict_shards(&pr, conn);
	exec_ok(conn, "COMMIT");
	PQfinish(conn);

	if (worker_rank == 0)
	{
		int64_t		all;

		relay_rest(&pr);
		all = pr.sent + pr.relayed;
		control_send(DML_MSG_DONE, &all, sizeof(all), NULL, 0);
	}
	else
	{
		MPI_Request req;

		MPI_Isend(&pr.sent, (int) sizeof(pr.sent), MPI_BYTE, 0, TAG_END, MPI_COMM_WORLD, &req);
		comm_wait_all(1, &req);
	}
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
	free(pr.out_msg);
	free(pr.in_msg);
}
