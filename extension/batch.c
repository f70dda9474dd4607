/*-------------------------------------------------------------------------
 *
 * batch.c
 *	  Inference over whole relations: dml_evaluate and the
 *	  dml_predict_table procedure.
 *
 * Both read the relation through an SPI cursor as the caller (so
 * privileges and row-level security apply), encode DML_BATCH_ROWS rows at
 * a time into one matrix and run the model on it with GEMM.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "executor/tuptable.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/varlena.h"

#include "dml.h"
#include "predict.h"

#define DML_BATCH_ROWS			1024
#define DML_PROGRESS_ROWS		100000	/* NOTICE every this many rows... */
#define DML_PROGRESS_MIN_ROWS	200000	/* ...on tables estimated at least this large */

/* quoted, qualified name of relid */
static char *
rel_sql_name(Oid relid)
{
	char	   *nsp = get_namespace_name(get_rel_namespace(relid));
	char	   *rel = get_rel_name(relid);

	if (nsp == NULL || rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	return quote_qualified_identifier(nsp, rel);
}

/* "f1", "f2", ... of the model, quoted, for a SELECT list */
static char *
feature_list(DmlCachedModel *cm)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < cm->nfeatures; i++)
		appendStringInfo(&buf, "%s%s", i ? ", " : "", quote_identifier(cm->features[i].name));
	return buf.data;
}

/* encode row of the cursor's tuple table into dst; features are columns 1..n */
static void
encode_row(DmlCachedModel *cm, HeapTuple tup, TupleDesc td, float *dst)
{
	for (int i = 0; i < cm->nfeatures; i++)
	{
		bool		isnull;
		Datum		v = SPI_getbinval(tup, td, i + 1, &isnull);
		const DmlFeature *f = &cm->features[i];

		/* plain float8 columns skip the general conversion */
		if (f->kind == DML_FEAT_NUM && !isnull && TupleDescAttr(td, i)->atttypid == FLOAT8OID &&
			isfinite(DatumGetFloat8(v)))
			dst[0] = (float) DatumGetFloat8(v);
		else
			DmlFeatureInputs(f, dst, v, isnull, TupleDescAttr(td, i)->atttypid);
		dst += f->width;
	}
}

/* index of a label among the model's classes, -1 when unseen */
static int
class_index(DmlCachedModel *cm, const char *label)
{
	for (int k = 0; k < cm->nclasses; k++)
		if (strcmp(cm->classes[k], label) == 0)
			return k;
	return -1;
}

/* the estimated rows of a relation, for deciding on progress NOTICEs */
static double
estimated_rows(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	double		n = 0;

	if (HeapTupleIsValid(tup))
	{
		n = ((Form_pg_class) GETSTRUCT(tup))->reltuples;
		ReleaseSysCache(tup);
	}
	return n;
}

PG_FUNCTION_INFO_V1(dml_evaluate);

/* dml_evaluate(model, relation): the training metrics on a relation */
Datum
dml_evaluate(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Oid			relid = PG_GETARG_OID(1);
	DmlCachedModel *cm = DmlGetModel(name);
	int			C = cm->model.net.sizes[0];
	int			K = cm->model.net.sizes[cm->model.net.nlayers];
	bool		classifier = cm->model.net.loss != DML_LOSS_MSE;
	float	   *X = palloc(sizeof(float) * DML_BATCH_ROWS * C);
	float	   *out = palloc(sizeof(float) * DML_BATCH_ROWS * K);
	float	   *y = palloc(sizeof(float) * DML_BATCH_ROWS * K);
	float	   *scratch = palloc(sizeof(float) * dml_model_scratch_floats(&cm->model, DML_BATCH_ROWS));
	DmlMetrics	met;
	Portal		portal;
	SPIPlanPtr	plan;
	char	   *sql;
	int64		unseen = 0;
	size_t		jlen;
	char	   *json;

	if (cm->target == NULL)
		elog(ERROR, "dml: model \"%s\" has no target in its spec", name);
	if (dml_metrics_init(&met, cm->model.net.loss, classifier ? cm->nclasses : K) != DML_OK)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	sql = psprintf("SELECT %s, %s%s FROM %s WHERE %s IS NOT NULL",
				   feature_list(cm), quote_identifier(cm->target),
				   classifier ? "::text" : "::float8", rel_sql_name(relid),
				   quote_identifier(cm->target));

	SPI_connect();
	plan = SPI_prepare(sql, 0, NULL);
	if (plan == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("relation \"%s\" lacks the columns of model \"%s\"", get_rel_name(relid), name),
				 errdetail("%s", SPI_result_code_string(SPI_result))));
	portal = SPI_cursor_open(NULL, plan, NULL, NULL, true);
	for (;;)
	{
		int			B = 0;

		SPI_cursor_fetch(portal, true, DML_BATCH_ROWS);
		if (SPI_processed == 0)
			break;
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	tup = SPI_tuptable->vals[r];
			TupleDesc	td = SPI_tuptable->tupdesc;
			bool		isnull;

			if (classifier)
			{
				char	   *label = SPI_getvalue(tup, td, cm->nfeatures + 1);
				int			k = class_index(cm, label);

				if (k < 0)
				{
					unseen++;
					continue;
				}
				y[B] = (float) k;
			}
			else
				y[B] = (float) DatumGetFloat8(SPI_getbinval(tup, td, cm->nfeatures + 1, &isnull));
			encode_row(cm, tup, td, X + (size_t) B * C);
			B++;
		}
		if (B > 0)
		{
			dml_model_predict(&cm->model, out, X, B, scratch);
			dml_metrics_add(&met, out, y, B);
		}
		SPI_freetuptable(SPI_tuptable);
		CHECK_FOR_INTERRUPTS();
	}
	SPI_cursor_close(portal);
	SPI_finish();

	if (unseen > 0)
		ereport(NOTICE,
				(errmsg("skipped " INT64_FORMAT " rows whose label the model never saw", unseen)));
	if (met.v[DML_MET_N] == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("relation \"%s\" has no rows to evaluate on", get_rel_name(relid))));
	jlen = dml_metrics_json(&met, NULL, 0);
	json = palloc(jlen);
	dml_metrics_json(&met, json, jlen);
	dml_metrics_free(&met);
	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(json)));
}

PG_FUNCTION_INFO_V1(dml_predict_table);

/*
 * dml_predict_table(model, source, target, id_column): create table target
 * with (id_column, prediction) for regression or (id_column, prediction
 * text, probability float8) for classification, filled in blocks.
 */
Datum
dml_predict_table(PG_FUNCTION_ARGS)
{
	char	   *name;
	Oid			relid;
	char	   *target;
	char	   *id_column;
	DmlCachedModel *cm;
	RangeVar   *rv;
	char	   *qtarget;
	Oid			id_type = InvalidOid;
	int			C,
				K;
	bool		classifier;
	float	   *X,
			   *out,
			   *scratch;
	Datum	   *ids;
	bool	   *idnulls;
	SPIPlanPtr	plan;
	Portal		portal;
	Relation	out_rel;
	Oid			out_relid;
	BulkInsertState bistate;
	TupleTableSlot **slots;
	CommandId	cid;
	int64		done = 0;
	bool		progress;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("model, source and target must not be NULL")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	relid = PG_GETARG_OID(1);
	target = text_to_cstring(PG_GETARG_TEXT_PP(2));
	id_column = PG_ARGISNULL(3) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(3));

	cm = DmlGetModel(name);
	C = cm->model.net.sizes[0];
	K = cm->model.net.sizes[cm->model.net.nlayers];
	classifier = cm->model.net.loss != DML_LOSS_MSE;

	rv = makeRangeVarFromNameList(textToQualifiedNameList(PG_GETARG_TEXT_PP(2)));
	if (OidIsValid(RangeVarGetRelid(rv, NoLock, true)))
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_TABLE),
				 errmsg("relation \"%s\" already exists", target),
				 errhint("Drop it first, or choose another target name.")));
	qtarget = rv->schemaname ? quote_qualified_identifier(rv->schemaname, rv->relname)
		: pstrdup(quote_identifier(rv->relname));
	if (id_column)
	{
		AttrNumber	att = get_attnum(relid, id_column);

		if (att == InvalidAttrNumber || att < 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of relation \"%s\" does not exist",
							id_column, get_rel_name(relid))));
		id_type = get_atttype(relid, att);
	}
	else
		id_type = INT8OID;		/* row number */

	X = palloc(sizeof(float) * DML_BATCH_ROWS * C);
	out = palloc(sizeof(float) * DML_BATCH_ROWS * K);
	scratch = palloc(sizeof(float) * dml_model_scratch_floats(&cm->model, DML_BATCH_ROWS));
	ids = palloc(sizeof(Datum) * DML_BATCH_ROWS);
	idnulls = palloc(sizeof(bool) * DML_BATCH_ROWS);
	progress = estimated_rows(relid) >= DML_PROGRESS_MIN_ROWS;

	SPI_connect();
	{
		const char *idcol = id_column ? quote_identifier(id_column) : "row_number";
		char	   *idtype = format_type_be_qualified(id_type);
		char	   *ddl = classifier ?
			psprintf("CREATE TABLE %s (%s %s, prediction text, probability float8)",
					 qtarget, idcol, idtype) :
			psprintf("CREATE TABLE %s (%s %s, prediction float8)", qtarget, idcol, idtype);

		if (SPI_execute(ddl, false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "dml: creating %s failed", qtarget);
		CommandCounterIncrement();
		out_relid = RangeVarGetRelid(rv, NoLock, false);
		plan = SPI_prepare(psprintf("SELECT %s%s%s FROM %s", feature_list(cm),
									id_column ? ", " : "", id_column ? quote_identifier(id_column) : "",
									rel_sql_name(relid)), 0, NULL);
		if (plan == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("relation \"%s\" lacks the columns of model \"%s\"", get_rel_name(relid), name)));
	}
	/*
	 * The table is new and ours, without indexes, triggers or policies:
	 * rows go in through the table AM's multi-insert, as COPY FROM does.
	 */
	out_rel = table_open(out_relid, RowExclusiveLock);
	bistate = GetBulkInsertState();
	cid = GetCurrentCommandId(true);
	slots = palloc(sizeof(TupleTableSlot *) * DML_BATCH_ROWS);
	for (int r = 0; r < DML_BATCH_ROWS; r++)
		slots[r] = MakeSingleTupleTableSlot(RelationGetDescr(out_rel), &TTSOpsVirtual);

	portal = SPI_cursor_open(NULL, plan, NULL, NULL, true);
	for (;;)
	{
		int			B;
		MemoryContext tmp = AllocSetContextCreate(CurrentMemoryContext, "dml batch", ALLOCSET_DEFAULT_SIZES);
		MemoryContext old;

		SPI_cursor_fetch(portal, true, DML_BATCH_ROWS);
		B = (int) SPI_processed;
		if (B == 0)
		{
			MemoryContextDelete(tmp);
			break;
		}
		old = MemoryContextSwitchTo(tmp);
		for (int r = 0; r < B; r++)
		{
			HeapTuple	tup = SPI_tuptable->vals[r];
			TupleDesc	td = SPI_tuptable->tupdesc;

			encode_row(cm, tup, td, X + (size_t) r * C);
			if (id_column)
				ids[r] = SPI_getbinval(tup, td, cm->nfeatures + 1, &idnulls[r]);
			else
			{
				ids[r] = Int64GetDatum(done + r + 1);
				idnulls[r] = false;
			}
		}
		dml_model_predict(&cm->model, out, X, B, scratch);
		for (int r = 0; r < B; r++)
		{
			const float *o = out + (size_t) r * K;
			TupleTableSlot *slot = slots[r];

			ExecClearTuple(slot);
			slot->tts_values[0] = ids[r];
			slot->tts_isnull[0] = idnulls[r];
			slot->tts_isnull[1] = false;
			if (!classifier)
				slot->tts_values[1] = Float8GetDatum(o[0]);
			else
			{
				int			k = DmlPredictedClass(cm, o);
				double		p = cm->model.net.loss == DML_LOSS_BCE ? (k ? o[0] : 1.0 - o[0]) : o[k];

				slot->tts_values[1] = CStringGetTextDatum(cm->classes[k]);
				slot->tts_values[2] = Float8GetDatum(p);
				slot->tts_isnull[2] = false;
			}
			ExecStoreVirtualTuple(slot);
		}
		/* the heap copies the values, so the fetched rows can go after this */
		table_multi_insert(out_rel, slots, B, cid, 0, bistate);
		SPI_freetuptable(SPI_tuptable);
		MemoryContextSwitchTo(old);
		MemoryContextDelete(tmp);
		done += B;
		if (progress && done / DML_PROGRESS_ROWS != (done - B) / DML_PROGRESS_ROWS)
			ereport(NOTICE, (errmsg("dml_predict_table: " INT64_FORMAT " rows predicted", done)));
		CHECK_FOR_INTERRUPTS();
	}
	SPI_cursor_close(portal);
	for (int r = 0; r < DML_BATCH_ROWS; r++)
		ExecDropSingleTupleTableSlot(slots[r]);
	FreeBulkInsertState(bistate);
	table_finish_bulk_insert(out_rel, 0);
	table_close(out_rel, NoLock);
	SPI_finish();
	ereport(NOTICE,
			(errmsg("dml_predict_table: wrote " INT64_FORMAT " predictions to %s", done, qtarget)));
	PG_RETURN_VOID();
}
