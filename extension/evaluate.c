/*-------------------------------------------------------------------------
 *
 * evaluate.c
 *	  dml_evaluate: a model's metrics on a relation.
 *
 * The relation is read through SPI as the caller (so privileges and
 * row-level security apply); DML_BATCH_ROWS rows at a time are encoded
 * into one matrix and the model runs on it with GEMM.
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

#include "predict_table.h"
#include "dml.h"
#include "predict.h"

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

PG_FUNCTION_INFO_V1(dml_evaluate);

/* dml_evaluate(model, relation): the training metrics on a relation */
Datum
dml_evaluate(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Oid			relid = PG_GETARG_OID(1);
	DmlCachedModel *cm = DmlGetModel(name);
	int			C = cm->model.net.sizes[0];
	int			K = cm->model.net.sizes[cm->model.net.nlayers];
	bool		classifier = cm->model.net.loss != DML_LOSS_MSE;
	float	   *X = palloc(sizeof(float) * DML_BATCH_ROWS * C);
	float	   *out = palloc(sizeof(float) * DML_BATCH_ROWS * K);
	float	   *y = palloc(sizeof(float) * DML_BATCH_ROWS * K);
	float	   *scratch = DmlBatchScratch(&cm->model, DML_BATCH_ROWS);
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
				   DmlFeatureList(cm), quote_identifier(cm->target),
				   classifier ? "::text" : "::float8", DmlRelSqlName(relid),
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

