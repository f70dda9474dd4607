/*-------------------------------------------------------------------------
 *
 * predict_table.c
 *	  The dml_predict_table procedure in the backend, and what both of its
 *	  paths share: the target table and the writer that fills it.
 *
 * In the backend the relation is read through SPI as the caller (so
 * privileges and row-level security apply), DML_BATCH_ROWS rows at a time
 * are encoded into one matrix and the model runs on it with GEMM.  The rows
 * come through a DestReceiver of its own, without tuple copies, and go in
 * through the table AM's multi-insert (DmlPredictWriter, shared with the
 * worker path in predict_table_worker.c).
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
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/varlena.h"

#include "coordinator.h"
#include "heap_pages.h"
#include "hosts.h"
#include "predict_table.h"
#include "shards.h"
#include "dml.h"
#include "predict.h"

/* quoted, qualified name of relid */
char *
DmlRelSqlName(Oid relid)
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
char *
DmlFeatureList(DmlCachedModel *cm)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < cm->nfeatures; i++)
		appendStringInfo(&buf, "%s%s", i ? ", " : "", quote_identifier(cm->features[i].name));
	return buf.data;
}

/* the estimated rows of a relation, for deciding on progress NOTICEs */
double
DmlEstimatedRows(Oid relid)
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

/* ---------------------------------------------------------------------
 * The target table and the writer (both paths)
 * --------------------------------------------------------------------- */

/*
 * DmlPredictTargetCreate
 *		Check the target name and id column, then create the table in the
 *		caller's transaction: (id, prediction float8) for regression,
 *		(id, prediction text, probability float8) for classification.  The
 *		caller is connected to SPI.
 */
void
DmlPredictTargetCreate(DmlPredictTarget *t)
{
	bool		classifier = t->cm->model.net.loss != DML_LOSS_MSE;
	const char *idcol;
	char	   *idtype;
	char	   *ddl;

	if (OidIsValid(RangeVarGetRelid(t->rv, NoLock, true)))
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_TABLE),
				 errmsg("relation \"%s\" already exists", t->target),
				 errhint("Drop it first, or choose another target name.")));
	t->qtarget = t->rv->schemaname ? quote_qualified_identifier(t->rv->schemaname, t->rv->relname)
		: pstrdup(quote_identifier(t->rv->relname));
	DmlPredictTargetIdColumn(t);
	t->progress = DmlEstimatedRows(t->source) >= DML_PROGRESS_MIN_ROWS;

	idcol = t->id_column ? quote_identifier(t->id_column) : "row_number";
	idtype = format_type_be_qualified(t->id_type);
	ddl = classifier ?
		psprintf("CREATE TABLE %s (%s %s, prediction text, probability float8)",
				 t->qtarget, idcol, idtype) :
		psprintf("CREATE TABLE %s (%s %s, prediction float8)", t->qtarget, idcol, idtype);
	if (SPI_execute(ddl, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "dml: creating %s failed", t->qtarget);
	CommandCounterIncrement();
	t->out_relid = RangeVarGetRelid(t->rv, NoLock, false);
}

/* DmlPredictTargetIdColumn: check the id column and take its type */
void
DmlPredictTargetIdColumn(DmlPredictTarget *t)
{
	if (t->id_column)
	{
		t->id_attnum = get_attnum(t->source, t->id_column);
		if (t->id_attnum == InvalidAttrNumber || t->id_attnum < 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" of relation \"%s\" does not exist",
							t->id_column, get_rel_name(t->source))));
		t->id_type = get_atttype(t->source, t->id_attnum);
	}
	else
		t->id_type = INT8OID;	/* row number */
}

/*
 * A row whose layout is fixed (an int4 or int8 id that is not NULL) is
 * made by copying a template tuple, one per class, and patching the id and
 * the float8s in place: no heap_form_tuple, and the heap takes the tuple
 * as it is.  Where the value is in template tup's data: the offset of
 * each attribute, walked as heap_deform_tuple walks it.
 */
static void
template_offsets(TupleDesc td, HeapTuple tup, int *offs)
{
	char	   *tp = (char *) tup->t_data + tup->t_data->t_hoff;
	bits8	   *bp = HeapTupleHasNulls(tup) ? tup->t_data->t_bits : NULL;
	uint32		off = 0;

	for (int a = 0; a < td->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(td, a);

		if (bp != NULL && att_isnull(a, bp))
		{
			offs[a] = -1;		/* a NULL takes no room */
			continue;
		}
		if (att->attlen == -1)
			off = att_align_pointer(off, att->attalign, -1, tp + off);
		else
			off = att_align_nominal(off, att->attalign);
		offs[a] = off;
		off = att_addlength_pointer(off, att->attlen, tp + off);
	}
}

/* the templates, when the id type allows them */
static void
writer_templates(DmlPredictWriter *w)
{
	TupleDesc	td = RelationGetDescr(w->rel);
	Oid			idtype = TupleDescAttr(td, 0)->atttypid;
	int			n = w->classifier ? w->t->cm->nclasses : 1;
	Datum		values[3] = {0, 0, 0};
	bool		nulls[3] = {false, false, false};
	int			offs[3];

	if (idtype != INT4OID && idtype != INT8OID)
		return;
	w->id_len = idtype == INT4OID ? 4 : 8;
	w->templates = palloc(sizeof(HeapTuple) * n);
	values[0] = idtype == INT4OID ? Int32GetDatum(0) : Int64GetDatum(0);
	for (int k = 0; k < n; k++)
	{
		values[1] = w->classifier ? w->labels[k] : Float8GetDatum(0);
		values[2] = Float8GetDatum(0);
		w->templates[k] = heap_form_tuple(td, values, nulls);
	}
	template_offsets(td, w->templates[0], offs);
	w->id_off = offs[0];
	w->value_off = offs[1];
	if (w->classifier)
	{
		/* the label's length differs by class, and so does where p goes */
		w->prob_offs = palloc(sizeof(int) * n);
		for (int k = 0; k < n; k++)
		{
			template_offsets(td, w->templates[k], offs);
			w->prob_offs[k] = offs[2];
		}
	}
}

/*
 * DmlPredictWriterBegin
 *		Open the new table.  It is new and ours, without indexes, triggers
 *		or policies.  Where its rows are made from templates (an int id or
 *		row numbers) and DmlHeapPagesBegin takes it, its pages are written
 *		directly (heap_pages.c).  Otherwise rows go in through the table
 *		AM's multi-insert with a bulk-insert state, as COPY FROM does,
 *		WAL-logged as any insert; a new table has no free space to look up,
 *		so the free space map is skipped, as CREATE TABLE AS does.
 */
void
DmlPredictWriterBegin(DmlPredictWriter *w, DmlPredictTarget *t)
{
	DmlCachedModel *cm = t->cm;
	TupleDesc	td;

	memset(w, 0, sizeof(*w));
	w->t = t;
	w->K = cm->model.net.sizes[cm->model.net.nlayers];
	w->classifier = cm->model.net.loss != DML_LOSS_MSE;
	if (w->classifier)
	{
		w->labels = palloc(sizeof(Datum) * Max(cm->nclasses, 1));
		for (int k = 0; k < cm->nclasses; k++)
			w->labels[k] = CStringGetTextDatum(cm->classes[k]);
	}
	w->cxt = AllocSetContextCreate(CurrentMemoryContext, "dml predict insert",
								   ALLOCSET_DEFAULT_SIZES);
	if (t->rows)
	{
		Oid			outfn;
		bool		varlena;

		getTypeOutputInfo(t->id_type, &outfn, &varlena);
		fmgr_info(outfn, &w->id_out);
		w->row_tmpl = palloc0(sizeof(*w->row_tmpl) *
							  (w->classifier ? Max(cm->nclasses, 1) : 1));
		return;
	}
	w->rel = table_open(t->out_relid, RowExclusiveLock);
	td = RelationGetDescr(w->rel);
	writer_templates(w);
	if (w->templates != NULL)
	{
		bool		fit = true;

		for (int k = 0; k < (w->classifier ? cm->nclasses : 1); k++)
			fit = fit && w->templates[k]->t_len <= DML_HEAP_PAGES_MAX_TUPLE;
		if (fit)
			w->pages = DmlHeapPagesBegin(w->rel);
	}
	if (w->pages != NULL)
		return;
	w->bistate = GetBulkInsertState();
	w->cid = GetCurrentCommandId(true);
	w->vslots = palloc(sizeof(TupleTableSlot *) * DML_BATCH_ROWS);
	w->hslots = palloc(sizeof(TupleTableSlot *) * DML_BATCH_ROWS);
	w->use = palloc(sizeof(TupleTableSlot *) * DML_BATCH_ROWS);
	for (int r = 0; r < DML_BATCH_ROWS; r++)
	{
		w->vslots[r] = MakeSingleTupleTableSlot(td, &TTSOpsVirtual);
		w->hslots[r] = MakeSingleTupleTableSlot(td, &TTSOpsHeapTuple);
	}
}

/* a copy of class k's template: its id and values set */
static void
template_patch(DmlPredictWriter *w, HeapTupleHeader th, int k, Datum id, double value,
			   double prob)
{
	char	   *data = (char *) th + th->t_hoff;

	if (w->id_len == 4)
	{
		int32		v = DatumGetInt32(id);

		memcpy(data + w->id_off, &v, 4);
	}
	else
	{
		int64		v = DatumGetInt64(id);

		memcpy(data + w->id_off, &v, 8);
	}
	if (w->classifier)
		memcpy(data + w->prob_offs[k], &prob, 8);
	else
		memcpy(data + w->value_off, &value, 8);
}

/* one row from its class's template; id and values patched in */
static HeapTuple
row_from_template(DmlPredictWriter *w, int k, Datum id, double value, double prob)
{
	HeapTuple	tmpl = w->templates[k];
	HeapTuple	tup = MemoryContextAlloc(w->cxt, HEAPTUPLESIZE + tmpl->t_len);

	tup->t_len = tmpl->t_len;
	ItemPointerSetInvalid(&tup->t_self);
	tup->t_tableOid = InvalidOid;
	tup->t_data = (HeapTupleHeader) ((char *) tup + HEAPTUPLESIZE);
	memcpy(tup->t_data, tmpl->t_data, tmpl->t_len);
	template_patch(w, tup->t_data, k, id, value, prob);
	return tup;
}

/* the predicted class k of output row o, and its probability */
static int
predicted_class(DmlCachedModel *cm, const float *o, const double *o64, double *p)
{
	int			k = DmlPredictedClass(cm, o);

	if (o64)
		*p = cm->model.net.loss == DML_LOSS_BCE ? (k ? o64[0] : 1.0 - o64[0]) : o64[k];
	else
		*p = cm->model.net.loss == DML_LOSS_BCE ? (k ? o[0] : 1.0 - o[0]) : o[k];
	return k;
}

/*
 * Output row r's prediction: the value (regression), or the class
 * (returned; 0 for regression) and its probability
 */
static int
row_prediction(DmlPredictWriter *w, const float *out, const double *out64, int r,
			   double *value, double *p)
{
	const float *o = out + (size_t) r * w->K;
	const double *o64 = out64 ? out64 + (size_t) r * w->K : NULL;

	*value = 0;
	*p = 0;
	if (!w->classifier)
	{
		*value = o64 ? o64[0] : o[0];
		return 0;
	}
	return predicted_class(w->t->cm, o, o64, p);
}

/* the target table's columns of a row: (id, prediction) or (id, class, probability) */
static void
row_values(DmlPredictWriter *w, Datum id, bool idnull, int k, double value, double p,
		   Datum *values, bool *nulls)
{
	values[0] = id;
	nulls[0] = idnull;
	nulls[1] = false;
	if (!w->classifier)
		values[1] = Float8GetDatum(value);
	else
	{
		values[1] = w->labels[k];
		values[2] = Float8GetDatum(p);
		nulls[2] = false;
	}
}

/*
 * dml_predict_rows's columns after the id: value (regression), or label
 * and probability (classification); the others NULL
 */
static void
rows_columns(DmlPredictWriter *w, int k, double value, double p, Datum *values, bool *nulls)
{
	nulls[1] = nulls[2] = nulls[3] = true;
	if (!w->classifier)
	{
		values[1] = Float8GetDatum(value);
		nulls[1] = false;
	}
	else
	{
		values[2] = w->labels[k];
		values[3] = Float8GetDatum(p);
		nulls[2] = nulls[3] = false;
	}
}

/*
 * dml_predict_rows: a row made from a template, one per class and length
 * of the id's text up to DML_ROW_ID_MAX
 */
#define DML_ROW_ID_MAX	64

typedef struct DmlRowTemplate
{
	HeapTuple	tup;			/* NULL until first needed */
	int			id_off;			/* where the id's characters go in its data */
	int			f8_off;			/* and the float8 (value, or probability) */
} DmlRowTemplate;

/*
 * dml_predict_rows's row of class k (0 for regression) whose id's text is
 * len characters (at most DML_ROW_ID_MAX): formed once by heap_form_tuple
 * with a placeholder id of that length, and after that copied into the
 * tuplestore with the id's characters and the float8 (the value, or the
 * class's probability) set in place, as dml_predict_table's templates are
 * onto its pages.  The templates live as long as the writer, in the
 * context its batches' context was made in.
 */
static DmlRowTemplate *
row_template(DmlPredictWriter *w, int k, int len)
{
	MemoryContext keep = MemoryContextGetParent(w->cxt);
	DmlRowTemplate *rt;

	if (w->row_tmpl[k] == NULL)
		w->row_tmpl[k] = MemoryContextAllocZero(keep, sizeof(DmlRowTemplate) * (DML_ROW_ID_MAX + 1));
	rt = &w->row_tmpl[k][len];
	if (rt->tup == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(keep);
		char		digits[DML_ROW_ID_MAX];
		Datum		values[4] = {0, 0, 0, 0};
		bool		nulls[4];
		int			offs[4];
		int			f8 = w->classifier ? 3 : 1;
		char	   *data;

		memset(digits, '0', len);
		values[0] = PointerGetDatum(cstring_to_text_with_len(digits, len));
		nulls[0] = false;
		rows_columns(w, k, 0, 0, values, nulls);
		rt->tup = heap_form_tuple(w->t->rows_desc, values, nulls);
		template_offsets(w->t->rows_desc, rt->tup, offs);
		data = (char *) rt->tup->t_data + rt->tup->t_data->t_hoff;
		rt->id_off = offs[0] + (VARATT_IS_SHORT(data + offs[0]) ? VARHDRSZ_SHORT : VARHDRSZ);
		rt->f8_off = offs[f8];
		MemoryContextSwitchTo(old);
	}
	return rt;
}

/*
 * dml_predict_rows: B rows into the tuplestore as (id text, value float8,
 * label text, probability float8): value for regression, label and
 * probability for classification.
 */
static void
writer_put_rows(DmlPredictWriter *w, const Datum *ids, const bool *idnulls,
				const float *out, const double *out64, int B)
{
	MemoryContext old = MemoryContextSwitchTo(w->cxt);

	for (int r = 0; r < B; r++)
	{
		Datum		values[4] = {0, 0, 0, 0};
		bool		nulls[4] = {false}; /* the id's; the rest rows_columns sets */
		double		value,
					p;
		int			k = row_prediction(w, out, out64, r, &value, &p);

		if (ids == NULL || !idnulls[r])
		{
			char		digits[MAXINT8LEN + 1];
			const char *id = digits;
			int			len;

			/* the id as text: an int's as int8out writes it, else its type's */
			if (ids == NULL)
				len = pg_lltoa(w->done + r + 1, digits);
			else if (w->t->id_type == INT8OID)
				len = pg_lltoa(DatumGetInt64(ids[r]), digits);
			else if (w->t->id_type == INT4OID)
				len = pg_lltoa(DatumGetInt32(ids[r]), digits);
			else
			{
				id = OutputFunctionCall(&w->id_out, ids[r]);
				len = strlen(id);
			}
			if (len <= DML_ROW_ID_MAX)
			{
				DmlRowTemplate *rt = row_template(w, k, len);
				char	   *data = (char *) rt->tup->t_data + rt->tup->t_data->t_hoff;
				double		f8 = w->classifier ? p : value;

				memcpy(data + rt->id_off, id, len);
				memcpy(data + rt->f8_off, &f8, sizeof(double));
				tuplestore_puttuple(w->t->rows, rt->tup);
				continue;
			}
			values[0] = PointerGetDatum(cstring_to_text_with_len(id, len));
		}
		else
			nulls[0] = true;
		rows_columns(w, k, value, p, values, nulls);
		tuplestore_putvalues(w->t->rows, w->t->rows_desc, values, nulls);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(w->cxt);
	w->done += B;
}

/*
 * B rows straight onto the table's pages: a copy of the class's template
 * set in place on the page, or (a NULL id) a tuple formed as the heap
 * would form it
 */
static void
writer_put_pages(DmlPredictWriter *w, const Datum *ids, const bool *idnulls,
				 const float *out, const double *out64, int B)
{
	TupleDesc	td = RelationGetDescr(w->rel);

	for (int r = 0; r < B; r++)
	{
		Datum		id = ids ? ids[r] : Int64GetDatum(w->done + r + 1);
		double		value,
					p;
		int			k = row_prediction(w, out, out64, r, &value, &p);

		if (ids == NULL || !idnulls[r])
		{
			HeapTuple	tmpl = w->templates[k];

			template_patch(w, DmlHeapPagesAdd(w->pages, tmpl->t_data, tmpl->t_len),
						   k, id, value, p);
		}
		else
		{
			Datum		values[3];
			bool		nulls[3];
			HeapTuple	tup;

			row_values(w, (Datum) 0, true, k, value, p, values, nulls);
			tup = heap_form_tuple(td, values, nulls);
			DmlHeapPagesAdd(w->pages, tup->t_data, tup->t_len);
			heap_freetuple(tup);
		}
	}
	w->done += B;
}

/*
 * DmlPredictWriterPut
 *		Write B rows: ids (B) or, when ids is NULL, row numbers; out (B, K)
 *		the model's outputs as dml_model_predict gives them.
 */
void
DmlPredictWriterPut(DmlPredictWriter *w, const Datum *ids, const bool *idnulls,
					const float *out, const double *out64, int B)
{
	int64		before = w->done;
	MemoryContext old;

	if (w->t->rows)
	{
		writer_put_rows(w, ids, idnulls, out, out64, B);
		return;
	}
	if (w->pages != NULL)
	{
		writer_put_pages(w, ids, idnulls, out, out64, B);
		B = 0;
	}
	while (B > 0)
	{
		int			n = Min(B, DML_BATCH_ROWS);

		for (int r = 0; r < n; r++)
		{
			Datum		id = ids ? ids[r] : Int64GetDatum(w->done + r + 1);
			bool		idnull = ids ? idnulls[r] : false;
			double		value,
						p;
			int			k = row_prediction(w, out, out64, r, &value, &p);
			TupleTableSlot *slot;

			if (w->templates && !idnull)
			{
				slot = w->hslots[r];
				ExecStoreHeapTuple(row_from_template(w, k, id, value, p), slot, true);
			}
			else
			{
				slot = w->vslots[r];
				ExecClearTuple(slot);
				row_values(w, id, idnull, k, value, p, slot->tts_values, slot->tts_isnull);
				ExecStoreVirtualTuple(slot);
			}
			w->use[r] = slot;
		}
		/* the heap copies what it needs, so ids may go after this */
		old = MemoryContextSwitchTo(w->cxt);
		table_multi_insert(w->rel, w->use, n, w->cid, TABLE_INSERT_SKIP_FSM, w->bistate);
		MemoryContextSwitchTo(old);
		for (int r = 0; r < n; r++)
			if (w->use[r] == w->hslots[r])
				ExecClearTuple(w->hslots[r]);
		MemoryContextReset(w->cxt);
		w->done += n;
		out += (size_t) n * w->K;
		if (out64)
			out64 += (size_t) n * w->K;
		if (ids)
		{
			ids += n;
			idnulls += n;
		}
		B -= n;
	}
	if (w->t->progress && w->done / DML_PROGRESS_ROWS != before / DML_PROGRESS_ROWS)
		ereport(NOTICE, (errmsg("dml_predict_table: " INT64_FORMAT " rows predicted", w->done)));
}

/* DmlPredictWriterEnd: finish the pages or the bulk insert, and close the table */
void
DmlPredictWriterEnd(DmlPredictWriter *w)
{
	if (w->t->rows)
	{
		MemoryContextDelete(w->cxt);
		return;
	}
	if (w->pages != NULL)
		DmlHeapPagesEnd(w->pages);
	else
	{
		for (int r = 0; r < DML_BATCH_ROWS; r++)
		{
			ExecDropSingleTupleTableSlot(w->vslots[r]);
			ExecDropSingleTupleTableSlot(w->hslots[r]);
		}
		FreeBulkInsertState(w->bistate);
		table_finish_bulk_insert(w->rel, TABLE_INSERT_SKIP_FSM);
	}
	table_close(w->rel, NoLock);
	MemoryContextDelete(w->cxt);
	ereport(NOTICE,
			(errmsg("dml_predict_table: wrote " INT64_FORMAT " predictions to %s",
					w->done, w->t->qtarget)));
}

/* ---------------------------------------------------------------------
 * In the backend: the source through a DestReceiver of our own
 *
 * The SELECT runs through SPI as the caller, so privileges and row-level
 * security apply, but its rows come to PredictReceiver instead of an SPI
 * tuple table: no tuple is formed or copied.  Each row's features are
 * read from the slot's values straight into the float32 block, a plain
 * float8 column without any conversion; when the block is full the model
 * runs on it with GEMM and the writer inserts it.  Where the scan hands
 * over its own heap tuples and every column up to the last one used has a
 * fixed width, a row without nulls is read from the tuple's bytes at
 * offsets found once (direct_row), not deformed into the slot's values.
 * --------------------------------------------------------------------- */

/* how a feature column is read */
typedef enum ReadHow
{
	READ_GENERAL,				/* DmlFeatureInputs */
	READ_FLOAT8,				/* a float8 number */
	READ_NUMBER					/* another scalar DmlDatumToDouble reads as is */
} ReadHow;

typedef struct PredictReceiver
{
	DestReceiver pub;
	DmlCachedModel *cm;
	DmlPredictWriter *w;
	int			natts;			/* columns of the query */
	bool		whole_rows;		/* SELECT *: columns found by name */
	int		   *pos;			/* (nfeatures) each feature's column, 0-based */
	int			id_pos;
	int			fetch;			/* columns to deform: the last one used + 1 */
	bool		has_id;
	bool		id_byval;
	int16		id_len;
	Oid		   *types;			/* (nfeatures) base type of each column */
	ReadHow    *how;			/* (nfeatures) */
	int			C;
	int			B;				/* rows in the block */
	float	   *X;				/* (DML_BATCH_ROWS, C) */
	float	   *out;			/* (DML_BATCH_ROWS, K) */
	double	   *X64;			/* float64 models: X at full precision, else NULL */
	double	   *out64;			/* and their outputs in float64 */
	float	   *scratch;
	Datum	   *ids;
	bool	   *idnulls;
	const char *id_column;
	MemoryContext blockcxt;		/* by-reference ids and encoding garbage of a block */
	/* reading a heap tuple's bytes where they lie (direct_row) */
	bool		direct;			/* every feature float8, the id by value, SELECT * */
	TupleDesc	direct_td;		/* the descriptor off and id_off are for */
	bool		direct_ok;		/* whether direct_td's tuples can be read so */
	int		   *off;			/* (nfeatures) each feature's offset in a tuple without nulls */
	int			id_off;
} PredictReceiver;

/* predict and write the block */
static void
receiver_flush(PredictReceiver *pr)
{
	if (pr->B == 0)
		return;
	if (pr->X64)
	{
		/* a float64 model computes in float64; the float32 outputs pick the class */
		int			K = pr->cm->model.net.sizes[pr->cm->model.net.nlayers];

		dml_model_predict64(&pr->cm->model, pr->out64, pr->X64, pr->B);
		for (size_t i = 0; i < (size_t) pr->B * K; i++)
			pr->out[i] = (float) pr->out64[i];
	}
	else
		dml_model_predict(&pr->cm->model, pr->out, pr->X, pr->B, pr->scratch);
	DmlPredictWriterPut(pr->w, pr->has_id ? pr->ids : NULL, pr->idnulls, pr->out, pr->out64,
						pr->B);
	pr->B = 0;
	MemoryContextReset(pr->blockcxt);
	CHECK_FOR_INTERRUPTS();
}

/* the column of the query's result named name, 0-based */
static int
result_column(TupleDesc typeinfo, const char *name)
{
	for (int a = 0; a < typeinfo->natts; a++)
		if (!TupleDescAttr(typeinfo, a)->attisdropped &&
			strcmp(NameStr(TupleDescAttr(typeinfo, a)->attname), name) == 0)
			return a;
	elog(ERROR, "dml: predict query has no column \"%s\". Please report a bug.", name);
	return -1;					/* not reached */
}

static void
receiver_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
	PredictReceiver *pr = (PredictReceiver *) self;

	if (!pr->whole_rows && typeinfo->natts != pr->natts)
		elog(ERROR, "dml: predict query returned %d columns, expected %d. Please report a bug.",
			 typeinfo->natts, pr->natts);
	pr->fetch = 0;
	for (int i = 0; i < pr->cm->nfeatures; i++)
	{
		Oid			t;

		pr->pos[i] = pr->whole_rows ? result_column(typeinfo, pr->cm->features[i].name) : i;
		pr->fetch = Max(pr->fetch, pr->pos[i] + 1);
		t = getBaseType(TupleDescAttr(typeinfo, pr->pos[i])->atttypid);
		pr->types[i] = t;
		pr->how[i] = READ_GENERAL;
		/* the types DmlDatumToDouble reads without a lookup or allocation */
		if (pr->cm->features[i].kind == DML_FEAT_NUM)
		{
			if (t == FLOAT8OID)
				pr->how[i] = READ_FLOAT8;
			else if (t == FLOAT4OID || t == INT2OID || t == INT4OID || t == INT8OID ||
					 t == BOOLOID)
				pr->how[i] = READ_NUMBER;
		}
	}
	if (pr->has_id)
	{
		Form_pg_attribute att;

		pr->id_pos = pr->whole_rows ? result_column(typeinfo, pr->id_column) : pr->natts - 1;
		pr->fetch = Max(pr->fetch, pr->id_pos + 1);
		att = TupleDescAttr(typeinfo, pr->id_pos);
		pr->id_byval = att->attbyval;
		pr->id_len = att->attlen;
	}
	pr->direct = pr->whole_rows && (!pr->has_id || (pr->id_byval && pr->id_len > 0));
	for (int i = 0; i < pr->cm->nfeatures; i++)
		pr->direct &= pr->how[i] == READ_FLOAT8;
	pr->direct_td = NULL;
	pr->off = palloc(sizeof(int) * Max(pr->cm->nfeatures, 1));
}

/*
 * Where the columns of a tuple of descriptor td without nulls lie, as
 * heap_fill_tuple laid them out; direct_ok false unless every column up to
 * the last one used has a fixed width (then each one's offset is fixed, as
 * attcacheoff's), and the features are float8 columns of their names.
 */
static void
direct_offsets(PredictReceiver *pr, TupleDesc td)
{
	int		   *at = palloc(sizeof(int) * Max(pr->fetch, 1));
	int			off = 0;
	bool		ok = td->natts >= pr->fetch;

	for (int a = 0; ok && a < pr->fetch; a++)
	{
		Form_pg_attribute att = TupleDescAttr(td, a);

		ok = att->attlen > 0 && !att->attisdropped;
		off = att_align_nominal(off, att->attalign);
		at[a] = off;
		off += att->attlen;
	}
	for (int i = 0; ok && i < pr->cm->nfeatures; i++)
	{
		Form_pg_attribute att = TupleDescAttr(td, pr->pos[i]);

		ok = att->attlen == 8 && att->attbyval && getBaseType(att->atttypid) == FLOAT8OID &&
			strcmp(NameStr(att->attname), pr->cm->features[i].name) == 0;
		pr->off[i] = at[pr->pos[i]];
	}
	if (ok && pr->has_id)
	{
		Form_pg_attribute att = TupleDescAttr(td, pr->id_pos);

		ok = att->attlen == pr->id_len && att->attbyval &&
			strcmp(NameStr(att->attname), pr->id_column) == 0;
		pr->id_off = at[pr->id_pos];
	}
	pfree(at);
	pr->direct_td = td;
	pr->direct_ok = ok;
}

/*
 * The lines of the tuples a page holds below this one's header, asked for
 * ahead: a page's tuples lie from its end down, one after another in the
 * order they were added, and a scan takes them in that order, so the next
 * ones usually lie just below (a prefetch of any other line costs little
 * and never faults).  Reading each tuple's first lines was about a fifth
 * of dml_predict_table's samples (synth_1m, MLP 20-64-64-1) without it, a
 * seventh with it.
 */
static inline void
prefetch_below(const char *p)
{
	for (int k = 1; k <= 6; k++)
		__builtin_prefetch(p - 64 * k);
}

/*
 * A row of the table read from its heap tuple's bytes, with no deforming
 * into the slot's values: the same float8 values, so the same block.
 * False (nothing to keep) where the tuple is not a heap tuple, has nulls
 * or fewer columns than its descriptor (added since), or a feature is not
 * finite: the caller then reads the row from the slot.
 */
static bool
direct_row(PredictReceiver *pr, TupleTableSlot *slot, float *dst, double *dst64, Datum *id)
{
	HeapTuple	tup;
	const char *tp;

	if (!TTS_IS_BUFFERTUPLE(slot) && !TTS_IS_HEAPTUPLE(slot))
		return false;
	if (slot->tts_tupleDescriptor != pr->direct_td)
		direct_offsets(pr, slot->tts_tupleDescriptor);
	tup = ((HeapTupleTableSlot *) slot)->tuple;
	if (!pr->direct_ok || tup == NULL || HeapTupleHasNulls(tup) ||
		HeapTupleHeaderGetNatts(tup->t_data) < pr->fetch)
		return false;
	tp = (const char *) tup->t_data + tup->t_data->t_hoff;
	prefetch_below((const char *) tup->t_data);
	for (int i = 0; i < pr->cm->nfeatures; i++)
	{
		double		v;

		memcpy(&v, tp + pr->off[i], sizeof(double));
		if (unlikely(!isfinite(v)))
			return false;
		dst[i] = (float) v;
		if (dst64)
			dst64[i] = v;
	}
	if (pr->has_id)
		*id = fetch_att(tp + pr->id_off, true, pr->id_len);
	return true;
}

static bool
receiver_receive(TupleTableSlot *slot, DestReceiver *self)
{
	PredictReceiver *pr = (PredictReceiver *) self;
	DmlCachedModel *cm = pr->cm;
	float	   *dst = pr->X + (size_t) pr->B * pr->C;
	double	   *dst64 = pr->X64 ? pr->X64 + (size_t) pr->B * pr->C : NULL;
	Datum	   *values;
	bool	   *isnull;
	MemoryContext old;

	if (pr->direct && direct_row(pr, slot, dst, dst64, &pr->ids[pr->B]))
	{
		pr->idnulls[pr->B] = false;
		if (++pr->B == DML_BATCH_ROWS)
			receiver_flush(pr);
		return true;
	}
	slot_getsomeattrs(slot, pr->fetch);
	values = slot->tts_values;
	isnull = slot->tts_isnull;
	for (int i = 0; i < cm->nfeatures; i++)
	{
		int			a = pr->pos[i];

		/* a scalar number: no lookup, no allocation */
		if (pr->how[i] == READ_FLOAT8 && !isnull[a])
		{
			double		v = DatumGetFloat8(values[a]);

			if (likely(isfinite(v)))
			{
				*dst++ = (float) v;
				if (dst64)
					*dst64++ = v;
				continue;
			}
		}
		else if (pr->how[i] == READ_NUMBER && !isnull[a])
		{
			double		v;

			(void) DmlDatumToDouble(values[a], pr->types[i], &v);
			if (likely(isfinite(v)))
			{
				*dst++ = (float) v;
				if (dst64)
					*dst64++ = v;
				continue;
			}
		}
		/* everything else, and every error, as dml_predict does it */
		old = MemoryContextSwitchTo(pr->blockcxt);
		DmlFeatureInputsWide(&cm->features[i], dst, dst64, values[a], isnull[a], pr->types[i]);
		MemoryContextSwitchTo(old);
		dst += cm->features[i].width;
		dst64 = dst64 ? dst64 + cm->features[i].width : NULL;
	}
	if (pr->has_id)
	{
		int			a = pr->id_pos;

		pr->idnulls[pr->B] = isnull[a];
		if (isnull[a])
			pr->ids[pr->B] = (Datum) 0;
		else if (pr->id_byval)
			pr->ids[pr->B] = values[a];
		else
		{
			old = MemoryContextSwitchTo(pr->blockcxt);
			pr->ids[pr->B] = datumCopy(values[a], false, pr->id_len);
			MemoryContextSwitchTo(old);
		}
	}
	if (++pr->B == DML_BATCH_ROWS)
		receiver_flush(pr);
	return true;
}

static void
receiver_shutdown(DestReceiver *self)
{
}

static void
receiver_destroy(DestReceiver *self)
{
}

/*
 * Whether the source can be read as SELECT *: a table (no view: its
 * columns would all be computed; no foreign table: all fetched) that the
 * caller may read whole, with every feature column there.  Then the scan
 * hands over its own tuples, deformed only as far as the last column used,
 * instead of projecting each row into a new slot.  Otherwise (column
 * privileges only, say) the columns are named, and errors come from there.
 */
static bool
read_whole_rows(DmlPredictTarget *t)
{
	char		relkind = get_rel_relkind(t->source);

	if (relkind != RELKIND_RELATION && relkind != RELKIND_MATVIEW)
		return false;
	if (pg_class_aclcheck(t->source, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		return false;
	for (int i = 0; i < t->cm->nfeatures; i++)
		if (get_attnum(t->source, t->cm->features[i].name) <= 0)
			return false;
	return true;
}

/* the SELECT of features (and id) and its execution into the receiver */
static void
predict_in_backend(DmlPredictTarget *t)
{
	DmlCachedModel *cm = t->cm;
	DmlPredictWriter w;
	PredictReceiver pr;
	SPIExecuteOptions opts;
	int			K = cm->model.net.sizes[cm->model.net.nlayers];
	char	   *sql;

	memset(&pr, 0, sizeof(pr));
	pr.pub.receiveSlot = receiver_receive;
	pr.pub.rStartup = receiver_startup;
	pr.pub.rShutdown = receiver_shutdown;
	pr.pub.rDestroy = receiver_destroy;
	pr.pub.mydest = DestNone;
	pr.cm = cm;
	pr.w = &w;
	pr.has_id = t->id_column != NULL;
	pr.id_column = t->id_column;
	pr.natts = cm->nfeatures + (pr.has_id ? 1 : 0);
	pr.whole_rows = read_whole_rows(t);
	pr.pos = palloc(sizeof(int) * Max(cm->nfeatures, 1));
	pr.types = palloc(sizeof(Oid) * Max(cm->nfeatures, 1));
	pr.how = palloc(sizeof(ReadHow) * Max(cm->nfeatures, 1));
	pr.C = cm->model.net.sizes[0];
	pr.X = palloc(sizeof(float) * DML_BATCH_ROWS * pr.C);
	pr.out = palloc(sizeof(float) * DML_BATCH_ROWS * K);
	pr.X64 = pr.out64 = NULL;
	if (cm->model.precision == 64)
	{
		pr.X64 = palloc(sizeof(double) * DML_BATCH_ROWS * pr.C);
		pr.out64 = palloc(sizeof(double) * DML_BATCH_ROWS * K);
	}
	pr.scratch = DmlBatchScratch(&cm->model, DML_BATCH_ROWS);
	pr.ids = palloc(sizeof(Datum) * DML_BATCH_ROWS);
	pr.idnulls = palloc(sizeof(bool) * DML_BATCH_ROWS);
	pr.blockcxt = AllocSetContextCreate(CurrentMemoryContext, "dml predict block",
										ALLOCSET_DEFAULT_SIZES);

	if (pr.whole_rows)
		sql = psprintf("SELECT * FROM %s", DmlRelSqlName(t->source));
	else
		sql = psprintf("SELECT %s%s%s FROM %s", DmlFeatureList(cm),
					   t->id_column ? ", " : "", t->id_column ? quote_identifier(t->id_column) : "",
					   DmlRelSqlName(t->source));
	DmlPredictWriterBegin(&w, t);
	memset(&opts, 0, sizeof(opts));
	opts.read_only = true;
	opts.dest = &pr.pub;
	/* with a receiver of its own SPI says SPI_OK_UTILITY: rows were not kept */
	if (SPI_execute_extended(sql, &opts) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("relation \"%s\" lacks the columns of model \"%s\"",
						get_rel_name(t->source), t->model)));
	receiver_flush(&pr);
	DmlPredictWriterEnd(&w);
	MemoryContextDelete(pr.blockcxt);
}

PG_FUNCTION_INFO_V1(dml_predict_table);

/*
 * dml_predict_table(model, source, target, id_column, device, workers):
 * create table target with (id_column, prediction) for regression or
 * (id_column, prediction text, probability float8) for classification,
 * filled in blocks.  device 'cpu' runs the model here; 'gpu' in one
 * dml-worker on a GPU (predict_table_worker.c); 'auto' on a GPU when one is
 * visible and the build has CUDA, else here.  'worker-cpu', for tests only,
 * runs the worker's path on its CPU kernels.  workers => N > 1 runs N ranks
 * (on the CPU unless device says otherwise), each scoring its slice; a
 * sharded source always runs as ranks, each shard read on its host.
 */
Datum
dml_predict_table(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	DmlPredictTarget t;
	char	   *device;
	const char *worker_device = NULL;	/* NULL: in the backend */
	int			workers;		/* 0: not given */
	bool		sharded;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("model, source and target must not be NULL")));
	memset(&t, 0, sizeof(t));
	t.model = text_to_cstring(PG_GETARG_TEXT_PP(0));
	t.source = PG_GETARG_OID(1);
	t.target = text_to_cstring(PG_GETARG_TEXT_PP(2));
	t.id_column = PG_ARGISNULL(3) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(3));
	device = PG_NARGS() < 5 || PG_ARGISNULL(4) ? "cpu" : text_to_cstring(PG_GETARG_TEXT_PP(4));
	workers = PG_NARGS() < 6 || PG_ARGISNULL(5) ? 0 : PG_GETARG_INT32(5);
	if (PG_NARGS() >= 6 && !PG_ARGISNULL(5) && (workers < 1 || workers > DML_MAX_PREDICT_WORKERS))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("workers must be between 1 and %d", DML_MAX_PREDICT_WORKERS)));

	if (strcmp(device, "cpu") == 0)
		worker_device = NULL;
	else if (strcmp(device, "gpu") == 0)
	{
		if (!DmlBuildHasCuda())
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("device 'gpu' was asked for, but this build of dml has no CUDA support"),
					 errhint("Use device => 'cpu' (or 'auto'), or build dml with the CUDA toolkit.")));
		/* whether a GPU is there, the worker asks CUDA and says */
		worker_device = "gpu";
	}
	else if (strcmp(device, "auto") == 0)
		worker_device = DmlBuildHasCuda() && DmlGpuVisible() ? "auto" : NULL;
	else if (strcmp(device, "worker-cpu") == 0)
	{
		if (!dml_test_hooks)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("device \"worker-cpu\" needs dml.test_hooks"),
					 errhint("A superuser can enable test hooks with SET dml.test_hooks = on.")));
		worker_device = "cpu";
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown device \"%s\"", device),
				 errhint("Valid devices are cpu, gpu and auto.")));

	t.cm = DmlGetModel(t.model);
	t.rv = makeRangeVarFromNameList(textToQualifiedNameList(PG_GETARG_TEXT_PP(2)));

	/*
	 * Ranks (workers > 1), or a partitioned table with postgres_fdw leaves
	 * whose shards are read on their hosts: a job of workers, on the CPU
	 * unless a GPU was asked for.  Without workers, a sharded source gets
	 * one rank per host of dml.hosts (or one), so each shard's host has one.
	 */
	sharded = DmlShardsIs(t.source);
	if (sharded && workers == 0)
		workers = Max(list_length(DmlHostsChoose(NIL)), 1);
	if (workers == 0)
		workers = 1;
	if ((workers > 1 || sharded) && worker_device == NULL)
		worker_device = "cpu";

	SPI_connect();
	DmlPredictTargetCreate(&t);
	if (worker_device)
		DmlPredictTableInWorker(&t, worker_device, workers, sharded);
	else
		predict_in_backend(&t);
	SPI_finish();
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(dml_predict_rows);

/*
 * dml_predict_rows(model, source, id_column): dml_predict_table's backend
 * path as a set of rows (id text, value float8, label text, probability
 * float8) instead of a new table, for where no table can be created: a hot
 * standby (temporary tables included) or a read-only transaction.  The
 * source is read as the caller, in blocks, with GEMM, as dml_predict_table
 * reads it; the id is the id column's text form, or the row number.
 */
Datum
dml_predict_rows(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DmlPredictTarget t;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("model and source must not be NULL")));
	InitMaterializedSRF(fcinfo, 0);
	memset(&t, 0, sizeof(t));
	t.model = text_to_cstring(PG_GETARG_TEXT_PP(0));
	t.source = PG_GETARG_OID(1);
	t.id_column = PG_ARGISNULL(2) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(2));
	t.target = "dml_predict_rows";
	t.qtarget = t.target;
	t.rows = rsinfo->setResult;
	t.rows_desc = rsinfo->setDesc;
	t.cm = DmlGetModel(t.model);
	DmlPredictTargetIdColumn(&t);

	SPI_connect();
	predict_in_backend(&t);
	SPI_finish();
	return (Datum) 0;
}
