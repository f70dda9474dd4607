/*-------------------------------------------------------------------------
 *
 * predict_table_worker.c
 *	  dml_predict_table(..., device => 'gpu'): the model runs in one
 *	  dml-worker, never inside the backend.
 *
 * The backend checks everything it can first (the source's columns and
 * the caller's privileges, by planning the SELECT as the caller; the
 * feature types; the id type's binary format), creates the target table
 * in the caller's transaction, exports the caller's snapshot, and starts
 * a predict job through the coordinator (launch.c, supervise.c), as
 * dml_train starts a training job.  The worker connects as the caller
 * (SET ROLE, so privileges and row-level security apply), imports the
 * snapshot, reads the source with binary COPY, runs the model on a GPU in
 * big blocks and streams (id, outputs) blocks back over the control
 * socket; each block is written here, through the same DmlPredictWriter
 * as the in-backend path, into a table the worker could not even see.
 *
 * The worker reads each feature as dml_predict reads it: numbers through
 * the same float8 conversion, arrays as float8[] (their elements through
 * the same conversion), categories as their type's output text; so the
 * inputs are bit for bit those of the in-backend path, and standardization
 * and the output function are the same kernels' (dml_model_standardize,
 * dml_model_finish).  Only a GPU's GEMMs round differently.
 *
 * Like training, the worker sees the data as of the caller's snapshot,
 * without the caller's own uncommitted changes to the source.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <dirent.h>
#include <unistd.h>

#include "access/relation.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "predict_table.h"
#include "coordinator.h"
#include "shards.h"
#include "dml.h"
#include "predict.h"

/* ---------------------------------------------------------------------
 * What the worker reads
 * --------------------------------------------------------------------- */

static bool
is_number_type(Oid t)
{
	return t == FLOAT8OID || t == FLOAT4OID || t == INT2OID || t == INT4OID ||
		t == INT8OID || t == NUMERICOID;
}

/*
 * The SQL expression the worker reads feature f from, for a column of type
 * typid, with the type errors DmlFeatureInputs would raise on the first row
 * (the expression itself is DmlPredictColumnExpr's, plan.c).
 */
static char *
feature_expr(const DmlFeature *f, Oid typid)
{
	DmlFeature	g = *f;
	Oid			t = getBaseType(typid);
	Oid			elt;

	switch (f->kind)
	{
		case DML_FEAT_NUM:
			if (t != BOOLOID && !is_number_type(t))
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("feature \"%s\" has type %s, expected a number or boolean",
								f->name, format_type_be(t))));
			break;
		case DML_FEAT_VEC:
			elt = get_element_type(t);
			if (!OidIsValid(elt))
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("feature \"%s\" has type %s, expected an array of numbers",
								f->name, format_type_be(t))));
			if (elt != BOOLOID && !is_number_type(elt))
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("feature \"%s\" has elements of type %s, expected numbers",
								f->name, format_type_be(elt))));
			break;
		case DML_FEAT_CAT:
			break;
	}
	g.typid = t;
	return DmlPredictColumnExpr(&g, quote_identifier(f->name));
}

/*
 * The feature columns for the job: copies of the cached model's (the
 * coordinator writes each one's levels in one-hot order), with the base
 * type and the expression each rank reads (the cached model is not ours to
 * change)
 */
static List *
spec_columns(DmlCachedModel *cm, TupleDesc td)
{
	List	   *cols = NIL;

	for (int i = 0; i < cm->nfeatures; i++)
	{
		DmlFeature *f = palloc(sizeof(DmlFeature));

		*f = cm->features[i];
		f->typid = getBaseType(TupleDescAttr(td, i)->atttypid);
		f->expr = feature_expr(&cm->features[i], TupleDescAttr(td, i)->atttypid);
		cols = lappend(cols, f);
	}
	return cols;
}

/*
 * Whether the ranks read this server's table slices as dml.pack_rows64
 * blocks (one value a slice, built by the server, as training reads them:
 * about a third of the server's time of a binary COPY of the same float8
 * columns): every feature a number and the id absent or an integer, which
 * goes as the block's int8 target.  The features come in float64, so the
 * ranks convert and check them as dml_predict does.  Shards' servers, which
 * need not have dml, and views (read whole) keep COPY.
 */
static void
packed_slices(DmlJob *job, DmlPredictTarget *t)
{
	ListCell   *lc;

	foreach(lc, job->features)
		if (((DmlFeature *) lfirst(lc))->kind != DML_FEAT_NUM)
			return;
	if (t->id_column && t->id_type != INT2OID && t->id_type != INT4OID && t->id_type != INT8OID)
		return;
	job->pack_wide = true;
	job->pack_target = t->id_column ?
		psprintf("%s::pg_catalog.int8", quote_identifier(t->id_column)) : "0::pg_catalog.int8";
	job->predict_id_bytes = !t->id_column ? 8 : t->id_type == INT2OID ? 2 : t->id_type == INT4OID ? 4 : 8;
}

/* the model as its blob, for the job directory */
static bytea *
model_blob(const DmlModel *m)
{
	size_t		len = dml_model_serialized_size(m);
	bytea	   *b = palloc(VARHDRSZ + len);

	SET_VARSIZE(b, VARHDRSZ + len);
	dml_model_serialize(m, (unsigned char *) VARDATA(b));
	return b;
}

/* ---------------------------------------------------------------------
 * Blocks coming back
 * --------------------------------------------------------------------- */

typedef struct BlockSink
{
	DmlPredictWriter *w;
	int			K;
	bool		has_id;
	Oid			id_type;
	FmgrInfo	id_recv;		/* the id type's binary input function */
	Oid			id_ioparam;
	float	   *out;			/* aligned copy of a block's outputs */
	double	   *out64;			/* a float64 model's */
	bool		wide;			/* the model is float64: outputs come as float64 */
	int			cap;			/* rows out, ids, idnulls hold */
	Datum	   *ids;
	bool	   *idnulls;
	MemoryContext keep;			/* out, ids, idnulls: the whole job */
	MemoryContext cxt;			/* one block's ids */
} BlockSink;

static inline uint64
be64(const unsigned char *p)
{
	uint64		v = 0;

	for (int i = 0; i < 8; i++)
		v = (v << 8) | p[i];
	return v;
}

/* one id in its type's binary format, as COPY FROM (FORMAT binary) reads it */
static Datum
receive_id(BlockSink *s, const char *p, int32 len)
{
	const unsigned char *u = (const unsigned char *) p;
	StringInfoData buf;
	Datum		d;

	if (s->id_type == INT4OID && len == 4)
		return Int32GetDatum((int32) ((uint32) u[0] << 24 | (uint32) u[1] << 16 |
									  (uint32) u[2] << 8 | u[3]));
	if (s->id_type == INT8OID && len == 8)
		return Int64GetDatum((int64) be64(u));
	buf.data = palloc(len + 1);
	memcpy(buf.data, p, len);
	buf.data[len] = '\0';
	buf.len = len;
	buf.maxlen = len + 1;
	buf.cursor = 0;
	d = ReceiveFunctionCall(&s->id_recv, &buf, s->id_ioparam, -1);
	if (buf.cursor != buf.len)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("incorrect binary data format in a row id from the worker")));
	return d;
}

/* a PREDICTIONS payload: B, K, out (B, K), then B ids; written at once */
static void
on_block(const char *payload, uint32 len, void *arg)
{
	BlockSink  *s = arg;
	uint32		hdr[3];
	uint32		B;
	size_t		vsize = s->wide ? sizeof(double) : sizeof(float);
	size_t		outbytes;
	const char *p;
	const char *end = payload + len;
	MemoryContext old;

	if (len < sizeof(hdr))
		elog(ERROR, "dml: malformed PREDICTIONS from the worker. Please report a bug.");
	memcpy(hdr, payload, sizeof(hdr));
	B = hdr[0];
	if (hdr[1] != (uint32) s->K || hdr[2] != vsize || B == 0 ||
		B > (uint32) (MaxAllocSize / vsize / s->K))
		elog(ERROR, "dml: malformed PREDICTIONS from the worker. Please report a bug.");
	outbytes = vsize * (size_t) B * s->K;
	if (len - sizeof(hdr) < outbytes)
		elog(ERROR, "dml: malformed PREDICTIONS from the worker. Please report a bug.");
	if ((int) B > s->cap)
	{
		/* the payload is not aligned for floats: they are copied */
		s->cap = B;
		size_t		fbytes = sizeof(float) * (size_t) B * s->K;

		if (s->wide)
			s->out64 = s->out64 ? repalloc(s->out64, outbytes) : MemoryContextAlloc(s->keep, outbytes);
		s->out = s->out ? repalloc(s->out, fbytes) : MemoryContextAlloc(s->keep, fbytes);
		s->ids = s->ids ? repalloc(s->ids, sizeof(Datum) * B) :
			MemoryContextAlloc(s->keep, sizeof(Datum) * B);
		s->idnulls = s->idnulls ? repalloc(s->idnulls, sizeof(bool) * B) :
			MemoryContextAlloc(s->keep, sizeof(bool) * B);
	}
	memcpy(s->wide ? (void *) s->out64 : (void *) s->out, payload + sizeof(hdr), outbytes);
	/* as the backend's path: float64 outputs written, their float32 rounding picks the class */
	if (s->wide)
		for (size_t i = 0; i < (size_t) B * s->K; i++)
			s->out[i] = (float) s->out64[i];
	p = payload + sizeof(hdr) + outbytes;

	old = MemoryContextSwitchTo(s->cxt);
	if (s->has_id)
		for (uint32 r = 0; r < B; r++)
		{
			int32		idlen;

			if (end - p < 4)
				elog(ERROR, "dml: malformed PREDICTIONS from the worker. Please report a bug.");
			memcpy(&idlen, p, 4);
			p += 4;
			s->idnulls[r] = idlen < 0;
			s->ids[r] = (Datum) 0;
			if (idlen < 0)
				continue;
			if (end - p < idlen)
				elog(ERROR, "dml: malformed PREDICTIONS from the worker. Please report a bug.");
			s->ids[r] = receive_id(s, p, idlen);
			p += idlen;
		}
	if (p != end)
		elog(ERROR, "dml: malformed PREDICTIONS from the worker. Please report a bug.");
	MemoryContextSwitchTo(old);

	DmlPredictWriterPut(s->w, s->has_id ? s->ids : NULL, s->idnulls, s->out,
						s->wide ? s->out64 : NULL, (int) B);
	MemoryContextReset(s->cxt);
	CHECK_FOR_INTERRUPTS();
}

/* ---------------------------------------------------------------------
 * The job
 * --------------------------------------------------------------------- */

/*
 * DmlPredictTableInWorker
 *		Fill t's table (already created) from dml-workers on device ("gpu",
 *		"auto", or "cpu" for the workers' CPU kernels).  One worker reads
 *		the whole source with one query; several (workers > 1), or a
 *		sharded source, read slices planned as training plans them (plan.c,
 *		shards.c: a shard is read on its host, from its server), placed
 *		over dml.hosts as training places them.  Every block comes back
 *		through rank 0 and is written here.  The caller is connected to SPI.
 */
void
DmlPredictTableInWorker(DmlPredictTarget *t, const char *device, int workers, bool sharded)
{
	DmlCachedModel *cm = t->cm;
	DmlJob	   *job = palloc0(sizeof(DmlJob));
	DmlJobResult result;
	DmlPredictWriter w;
	BlockSink	sink;
	StringInfoData q;
	TupleDesc	td;
	Relation	src;
	char	   *probe;

	/*
	 * Missing columns and privileges fail here, as the caller, with the
	 * errors the in-backend path gives; the column types come with it.
	 * WHERE false plans no scan at all: a foreign leaf is not connected to
	 * here (shards.c connects as the workers will, naming the server).
	 */
	probe = psprintf("SELECT %s%s%s FROM %s WHERE false", DmlFeatureList(cm),
					 t->id_column ? ", " : "", t->id_column ? quote_identifier(t->id_column) : "",
					 DmlRelSqlName(t->source));
	if (SPI_execute(probe, true, 0) != SPI_OK_SELECT)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("relation \"%s\" lacks the columns of model \"%s\"",
						get_rel_name(t->source), t->model)));
	td = SPI_tuptable->tupdesc;

	/* the worker's own SELECT: id as it is, features as dml_predict reads them */
	initStringInfo(&q);
	appendStringInfoString(&q, "SELECT ");
	memset(&sink, 0, sizeof(sink));
	if (t->id_column)
	{
		Oid			sendfn;
		Oid			recvfn;
		bool		varlena;

		/* the id travels in its binary format: both directions must exist */
		getTypeBinaryOutputInfo(t->id_type, &sendfn, &varlena);
		getTypeBinaryInputInfo(t->id_type, &recvfn, &sink.id_ioparam);
		fmgr_info(recvfn, &sink.id_recv);
		appendStringInfo(&q, "%s, ", quote_identifier(t->id_column));
	}
	for (int i = 0; i < cm->nfeatures; i++)
		appendStringInfo(&q, "%s%s", i ? ", " : "",
						 feature_expr(&cm->features[i], TupleDescAttr(td, i)->atttypid));
	appendStringInfo(&q, " FROM %s", DmlRelSqlName(t->source));

	/*
	 * A worker waiting for a lock this transaction holds would wait for
	 * ever, and the backend for it: refuse what would conflict with its
	 * AccessShareLock.
	 */
	src = relation_open(t->source, AccessShareLock);
	if (CheckRelationLockedByMe(src, AccessExclusiveLock, false))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("relation \"%s\" was altered in this transaction, so a worker cannot read it",
						RelationGetRelationName(src)),
				 errhint("Use device => 'cpu', or commit the change first.")));
	relation_close(src, NoLock);

	job->type = DML_JOB_PREDICT;
	job->name = t->model;
	job->relid = t->source;
	job->relkind = get_rel_relkind(t->source);
	job->features = spec_columns(cm, td);
	job->ninputs = cm->model.net.sizes[0];
	job->noutputs = cm->model.net.sizes[cm->model.net.nlayers];
	job->workers = workers;
	if (t->id_column)
	{
		/* the slices' first column (plan.c, shards.c) */
		job->target.name = t->id_column;
		job->target.expr = pstrdup(quote_identifier(t->id_column));
		job->target.typid = t->id_type;
	}
	if (dml_job_parse(DML_NAMES_DEVICE, device) < 0)
		elog(ERROR, "dml: unknown worker device \"%s\". Please report a bug.", device);
	job->device = (DmlDevice) dml_job_parse(DML_NAMES_DEVICE, device);
	job->model_blob = model_blob(&cm->model);
	job->predict_query = q.data;
	job->predict_id = t->id_column != NULL;
	DmlJobSetLaunch(job, true,
					"dml_predict_table in a subtransaction: the worker reads with a snapshot taken when it starts");
	job->max_restarts = 0;		/* written blocks cannot be taken back */
	job->checkpoint_every = 0;
	job->epoch_timeout = 0;
	if (workers > 1 || sharded)
		packed_slices(job, t);
	if (sharded)
		job->slices = DmlShardsPlan(job, job->pack_target ? DML_SLICE_BLOCKS_PACKED : DML_SLICE_BLOCKS_COPY);
	else if (workers > 1)
		job->slices = DmlPlanSlices(t->source, job->relkind, workers,
									job->pack_target ? DML_SLICE_BLOCKS_PACKED : DML_SLICE_BLOCKS_COPY);

	DmlPredictWriterBegin(&w, t);
	sink.w = &w;
	sink.K = job->noutputs;
	sink.has_id = t->id_column != NULL;
	sink.wide = cm->model.precision == 64;
	sink.id_type = t->id_type;
	sink.keep = CurrentMemoryContext;
	sink.cxt = AllocSetContextCreate(CurrentMemoryContext, "dml predict block",
									 ALLOCSET_DEFAULT_SIZES);
	job->on_block = on_block;
	job->block_arg = &sink;

	DmlRunJob(job, &result, NULL, NULL);
	if (workers > 1 || sharded)
	{
		StringInfoData hosts;
		ListCell   *lc;

		/* where the ranks ran, as rank 0 said (HELLO) */
		initStringInfo(&hosts);
		foreach(lc, job->rank_hosts)
			appendStringInfo(&hosts, "%s%s", foreach_current_index(lc) ? ", " : "",
							 (char *) lfirst(lc));
		ereport(NOTICE,
				(errmsg("dml_predict_table: %d ranks on hosts %s", workers, hosts.data)));
	}
	if (result.rows_predicted != w.done)
		elog(ERROR, "dml: the worker predicted " INT64_FORMAT " rows but sent " INT64_FORMAT ". Please report a bug.",
			 result.rows_predicted, w.done);
	DmlPredictWriterEnd(&w);
	MemoryContextDelete(sink.cxt);
}
