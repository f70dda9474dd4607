/*-------------------------------------------------------------------------
 *
 * predict.c
 *	  Row-level inference: dml_predict, dml_predict_class and
 *	  dml_predict_proba, each by feature array or by row.
 *
 * The array form takes the model's input vector as numbers: each numeric
 * feature's value, each array feature's elements, and for a text feature
 * its one-hot block.  The record form takes the features from the row by
 * the column names stored with the model and encodes them as training did.
 * Standardization is applied inside dml_model_predict, from the weights.
 *
 * The column form (dml.predict_cols and its class and proba twins) is what
 * the planner turns the record form into when the row is a table's own row
 * (predict_plan.c): the model name, the table's column names, then every
 * column as an argument of its own.  It finds the features among the
 * columns by name, as the record form does in the row, so the results are
 * the same to the bit; the executor only deforms the scan tuple, with no
 * composite datum built per row and taken apart again here.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "compat.h"

#include <math.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

#include "dml.h"
#include "predict.h"

/* ---------------------------------------------------------------------
 * Values to floats
 * --------------------------------------------------------------------- */

/* a scalar datum as double; false for types that are not numbers */
bool
DmlDatumToDouble(Datum d, Oid typid, double *out)
{
	switch (typid)
	{
		case FLOAT8OID:
			*out = DatumGetFloat8(d);
			return true;
		case FLOAT4OID:
			*out = DatumGetFloat4(d);
			return true;
		case INT2OID:
			*out = DatumGetInt16(d);
			return true;
		case INT4OID:
			*out = DatumGetInt32(d);
			return true;
		case INT8OID:
			*out = (double) DatumGetInt64(d);
			return true;
		case NUMERICOID:
			*out = DatumGetFloat8(DirectFunctionCall1(numeric_float8, d));
			return true;
		case BOOLOID:
			*out = DatumGetBool(d) ? 1.0 : 0.0;
			return true;
	}
	return false;
}

/* the feature's name, or its position in the array form */
static void
check_finite(double v, const char *name, int position)
{
	if (isfinite(v))
		return;
	if (name)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("feature \"%s\" is NaN or infinite", name),
				 errhint("Models predict from finite numbers only.")));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("feature %d is NaN or infinite", position),
			 errhint("Models predict from finite numbers only.")));
}

static int
cmp_level(const void *key, const void *elem)
{
	return strcmp((const char *) key, *(char *const *) elem);
}

/*
 * DmlFeatureInputs
 *		Write feature f's inputs for one value at dst (f->width floats).
 */
void
DmlFeatureInputs(const DmlFeature *f, float *dst, Datum value, bool isnull, Oid typid)
{
	double		v;

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("feature \"%s\" is NULL", f->name),
				 errhint("Replace NULLs before predicting, e.g. with coalesce().")));
	typid = getBaseType(typid);
	switch (f->kind)
	{
		case DML_FEAT_NUM:
			if (!DmlDatumToDouble(value, typid, &v))
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("feature \"%s\" has type %s, expected a number or boolean",
								f->name, format_type_be(typid))));
			check_finite(v, f->name, 0);
			dst[0] = (float) v;
			break;
		case DML_FEAT_VEC:
			{
				ArrayType  *arr;
				Oid			elt;
				int16		typlen;
				bool		typbyval;
				char		typalign;
				Datum	   *elems;
				bool	   *enulls;
				int			n;

				elt = get_element_type(typid);
				if (!OidIsValid(elt))
					ereport(ERROR,
							(errcode(ERRCODE_DATATYPE_MISMATCH),
							 errmsg("feature \"%s\" has type %s, expected an array of numbers",
									f->name, format_type_be(typid))));
				arr = DatumGetArrayTypeP(value);
				get_typlenbyvalalign(elt, &typlen, &typbyval, &typalign);
				deconstruct_array(arr, elt, typlen, typbyval, typalign, &elems, &enulls, &n);
				if (n != f->width)
					ereport(ERROR,
							(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
							 errmsg("feature \"%s\" has %d elements, the model expects %d",
									f->name, n, f->width)));
				for (int i = 0; i < n; i++)
				{
					if (enulls[i])
						ereport(ERROR,
								(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
								 errmsg("feature \"%s\" has a NULL element at position %d",
										f->name, i + 1)));
					if (!DmlDatumToDouble(elems[i], elt, &v))
						ereport(ERROR,
								(errcode(ERRCODE_DATATYPE_MISMATCH),
								 errmsg("feature \"%s\" has elements of type %s, expected numbers",
										f->name, format_type_be(elt))));
					check_finite(v, f->name, 0);
					dst[i] = (float) v;
				}
				break;
			}
		case DML_FEAT_CAT:
			{
				Oid			outfn;
				bool		varlena;
				char	   *s;
				char	  **hit;

				getTypeOutputInfo(typid, &outfn, &varlena);
				s = OidOutputFunctionCall(outfn, value);
				memset(dst, 0, sizeof(float) * f->width);
				hit = bsearch(s, f->levels, f->nlevels, sizeof(char *), cmp_level);
				/* a level never seen in training is all zeros */
				if (hit)
					dst[f->level_slot[hit - f->levels]] = 1.0f;
				break;
			}
	}
}

/*
 * DmlFeatureInputsWide
 *		DmlFeatureInputs, and when dst64 is not NULL (a float64 model) the
 *		same inputs in float64 there: numbers at full precision, one-hot
 *		levels and vector elements (float32 already) widened.
 */
void
DmlFeatureInputsWide(const DmlFeature *f, float *dst, double *dst64, Datum value, bool isnull,
					 Oid typid)
{
	double		v;

	DmlFeatureInputs(f, dst, value, isnull, typid);
	if (dst64 == NULL)
		return;
	if (f->kind == DML_FEAT_NUM && DmlDatumToDouble(value, getBaseType(typid), &v))
		dst64[0] = v;
	else
		for (int i = 0; i < f->width; i++)
			dst64[i] = dst[i];
}

/*
 * feature_inputs
 *		DmlFeatureInputs, with plain float8 columns read straight: the
 *		record and column forms' per-feature step.  Returns the width.
 */
static inline int
feature_inputs(const DmlFeature *f, float *dst, double *dst64, Datum value, bool isnull,
			   Oid typid)
{
	if (f->kind == DML_FEAT_NUM && typid == FLOAT8OID && !isnull)
	{
		double		v = DatumGetFloat8(value);

		if (isfinite(v))
		{
			dst[0] = (float) v;
			if (dst64)
				dst64[0] = v;
			return 1;
		}
	}
	DmlFeatureInputsWide(f, dst, dst64, value, isnull, typid);
	return f->width;
}

/* a feature of the model that the row lacks */
static void
missing_column_error(DmlCachedModel *cm, int feature)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_COLUMN),
			 errmsg("row has no column \"%s\", a feature of model \"%s\"",
					cm->features[feature].name, cm->name),
			 errhint("Pass a row with the model's feature columns, e.g. SELECT dml_predict('m', t) FROM t.")));
}

/* ---------------------------------------------------------------------
 * Inputs from an array, a record or columns
 * --------------------------------------------------------------------- */

/* the model's input vector from a float8[] */
static void
inputs_from_array(DmlCachedModel *cm, ArrayType *arr)
{
	int			n;
	Datum	   *elems;
	bool	   *enulls;
	int			C = cm->model.net.sizes[0];

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("features must be a one-dimensional array")));
	if (!ARR_HASNULL(arr) && ARR_NDIM(arr) == 1 && ARR_DIMS(arr)[0] == C)
	{
		/* the common case: read the float8s in place */
		const double *v = (const double *) ARR_DATA_PTR(arr);
		bool		finite = true;

		for (int i = 0; i < C; i++)
		{
			cm->input[i] = (float) v[i];
			finite &= isfinite(v[i]);
		}
		if (cm->input64)
			memcpy(cm->input64, v, sizeof(double) * C);
		if (finite)
			return;
	}
	deconstruct_array(arr, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &elems, &enulls, &n);
	if (n != C)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("model \"%s\" expects %d features, got %d", cm->name, C, n)));
	for (int i = 0; i < n; i++)
	{
		double		v;

		if (enulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("feature %d is NULL", i + 1),
					 errhint("Replace NULLs before predicting, e.g. with coalesce().")));
		v = DatumGetFloat8(elems[i]);
		check_finite(v, NULL, i + 1);
		cm->input[i] = (float) v;
		if (cm->input64)
			cm->input64[i] = v;
	}
}

/*
 * The model's input vector from the values form's arguments 1..n, each a
 * float8 (the array form's elements, as the planner passed them): the
 * array form's checks in its order, so its errors.
 */
static void
inputs_from_values(FunctionCallInfo fcinfo, DmlCachedModel *cm)
{
	int			n = PG_NARGS() - 1;
	int			C = cm->model.net.sizes[0];

	if (n != C)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("model \"%s\" expects %d features, got %d", cm->name, C, n)));
	for (int i = 0; i < n; i++)
	{
		double		v;

		if (PG_ARGISNULL(i + 1))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("feature %d is NULL", i + 1),
					 errhint("Replace NULLs before predicting, e.g. with coalesce().")));
		v = PG_GETARG_FLOAT8(i + 1);
		check_finite(v, NULL, i + 1);
		cm->input[i] = (float) v;
		if (cm->input64)
			cm->input64[i] = v;
	}
}

/*
 * Per call site (fn_extra): the model name last asked for, the cached model
 * it resolved to, and the stamp it was checked under; the row mapping of
 * the record form or the column form.  Most calls then cost a memcmp and a
 * stamp.
 */
typedef struct CallCache
{
	int			namelen;
	char		name[NAMEDATALEN * 4];
	DmlCachedModel *cm;
	uint64		stamp;
	struct RecordMap *map;
	struct ColumnMap *cols;
	bool		acl_checked;	/* column form: EXECUTE on the record form; values form: on the array form */
} CallCache;

static CallCache *
call_cache(FunctionCallInfo fcinfo)
{
	if (fcinfo->flinfo->fn_extra == NULL)
		fcinfo->flinfo->fn_extra = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt,
														  sizeof(CallCache));
	return fcinfo->flinfo->fn_extra;
}

/* per call site: where the model's features sit in the row type */
typedef struct RecordMap
{
	Oid			typid;
	int32		typmod;
	int64		model_id;
	TupleDesc	td;				/* copy, in fn_mcxt */
	Datum	   *values;			/* (natts) */
	bool	   *nulls;
	int		   *attnums;		/* per model feature, 0-based */
	Oid		   *types;
} RecordMap;

/* the model's input vector from a row */
static void
inputs_from_record(FunctionCallInfo fcinfo, DmlCachedModel *cm, HeapTupleHeader rec)
{
	Oid			typid = HeapTupleHeaderGetTypeId(rec);
	int32		typmod = HeapTupleHeaderGetTypMod(rec);
	CallCache  *cc = call_cache(fcinfo);
	RecordMap  *map = cc->map;
	HeapTupleData tuple;
	float	   *dst = cm->input;
	double	   *dst64 = cm->input64;	/* float64 models only */

	if (map == NULL || map->typid != typid || map->typmod != typmod ||
		map->model_id != cm->id)
	{
		MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
		TupleDesc	td = lookup_rowtype_tupdesc(typid, typmod);

		map = palloc0(sizeof(RecordMap));
		map->typid = typid;
		map->typmod = typmod;
		map->model_id = cm->id;
		map->td = CreateTupleDescCopy(td);
		ReleaseTupleDesc(td);
		map->values = palloc(sizeof(Datum) * Max(map->td->natts, 1));
		map->nulls = palloc(sizeof(bool) * Max(map->td->natts, 1));
		map->attnums = palloc(sizeof(int) * Max(cm->nfeatures, 1));
		map->types = palloc(sizeof(Oid) * Max(cm->nfeatures, 1));
		MemoryContextSwitchTo(old);
		for (int i = 0; i < cm->nfeatures; i++)
		{
			map->attnums[i] = -1;
			for (int a = 0; a < map->td->natts; a++)
			{
				Form_pg_attribute att = TupleDescAttr(map->td, a);

				if (!att->attisdropped && strcmp(NameStr(att->attname), cm->features[i].name) == 0)
				{
					map->attnums[i] = a;
					map->types[i] = att->atttypid;
					break;
				}
			}
			if (map->attnums[i] < 0)
				missing_column_error(cm, i);
		}
		cc->map = map;
	}

	tuple.t_len = HeapTupleHeaderGetDatumLength(rec);
	ItemPointerSetInvalid(&tuple.t_self);
	tuple.t_tableOid = InvalidOid;
	tuple.t_data = rec;
	heap_deform_tuple(&tuple, map->td, map->values, map->nulls);
	for (int i = 0; i < cm->nfeatures; i++)
	{
		int			a = map->attnums[i];
		int			w = feature_inputs(&cm->features[i], dst, dst64, map->values[a],
									   map->nulls[a], map->types[i]);

		dst += w;
		dst64 = dst64 ? dst64 + w : NULL;
	}
}

/* per call site of the column form: where the model's features sit among the arguments */
typedef struct ColumnMap
{
	int64		model_id;
	bool		stable;			/* the names argument is the same every call */
	int		   *argnos;			/* per model feature */
	Oid		   *types;
} ColumnMap;

/* the column form's first two arguments: the model and the column names */
#define COLUMNS_FIRST_VALUE 2

/*
 * check_record_form_acl
 *		The column form stands in for record form "proname" (argtype
 *		RECORDOID), the values form for its array form (FLOAT8ARRAYOID):
 *		the caller needs EXECUTE on that, as the executor would have
 *		checked had the planner left the call alone.
 */
static void
check_record_form_acl(const char *proname, Oid argtype)
{
	Oid			nsp = DmlExtensionSchema();
	char	   *schema = OidIsValid(nsp) ? get_namespace_name(nsp) : NULL;
	Oid			argtypes[2] = {TEXTOID, argtype};
	Oid			fn;
	AclResult	aclresult;

	if (schema == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"dml\" is not installed in this database")));
	fn = LookupFuncName(list_make2(makeString(schema), makeString(pstrdup(proname))),
						2, argtypes, false);
	aclresult = pg_proc_aclcheck(fn, GetUserId(), ACL_EXECUTE);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_FUNCTION, get_func_name(fn));
}

/* map the model's features to the column form's arguments, by name */
static ColumnMap *
column_map(FunctionCallInfo fcinfo, DmlCachedModel *cm)
{
	CallCache  *cc = call_cache(fcinfo);
	ArrayType  *names = PG_GETARG_ARRAYTYPE_P(1);
	int			ncols = PG_NARGS() - COLUMNS_FIRST_VALUE;
	Datum	   *elems;
	bool	   *enulls;
	int			n;
	char	  **colnames;
	ColumnMap  *map;

	deconstruct_array(names, TEXTOID, -1, false, TYPALIGN_INT, &elems, &enulls, &n);
	if (ARR_NDIM(names) > 1 || n != ncols)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%d column names for %d columns", n, ncols),
				 errhint("Pass one name per column value, in the same order.")));
	colnames = palloc(sizeof(char *) * Max(n, 1));
	for (int j = 0; j < n; j++)
		colnames[j] = enulls[j] ? NULL : TextDatumGetCString(elems[j]);

	if (cc->cols)
	{
		pfree(cc->cols->argnos);
		pfree(cc->cols->types);
		pfree(cc->cols);
		cc->cols = NULL;
	}
	map = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(ColumnMap));
	map->model_id = cm->id;
	map->stable = get_fn_expr_arg_stable(fcinfo->flinfo, 1);
	map->argnos = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(int) * Max(cm->nfeatures, 1));
	map->types = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(Oid) * Max(cm->nfeatures, 1));
	for (int i = 0; i < cm->nfeatures; i++)
	{
		int			j;

		for (j = 0; j < n; j++)
			if (colnames[j] && strcmp(colnames[j], cm->features[i].name) == 0)
				break;
		if (j == n)
			missing_column_error(cm, i);
		map->argnos[i] = COLUMNS_FIRST_VALUE + j;
		map->types[i] = get_fn_expr_argtype(fcinfo->flinfo, map->argnos[i]);
		if (!OidIsValid(map->types[i]))
			elog(ERROR, "could not determine the type of column \"%s\"", colnames[j]);
	}
	cc->cols = map;
	return map;
}

/* the model's input vector from the column form's arguments */
static void
inputs_from_columns(FunctionCallInfo fcinfo, DmlCachedModel *cm)
{
	CallCache  *cc = call_cache(fcinfo);
	ColumnMap  *map = cc->cols;
	float	   *dst = cm->input;
	double	   *dst64 = cm->input64;	/* float64 models only */

	if (map == NULL || map->model_id != cm->id || !map->stable)
		map = column_map(fcinfo, cm);
	for (int i = 0; i < cm->nfeatures; i++)
	{
		int			a = map->argnos[i];

		int			w = feature_inputs(&cm->features[i], dst, dst64, fcinfo->args[a].value,
									   fcinfo->args[a].isnull, map->types[i]);

		dst += w;
		dst64 = dst64 ? dst64 + w : NULL;
	}
}

/* ---------------------------------------------------------------------
 * Outputs
 * --------------------------------------------------------------------- */

/* index of the predicted class of one output row */
int
DmlPredictedClass(DmlCachedModel *cm, const float *out)
{
	int			K = cm->model.net.sizes[cm->model.net.nlayers];
	int			best = 0;

	if (cm->model.net.loss == DML_LOSS_BCE)
		return out[0] >= 0.5f ? 1 : 0;
	for (int k = 1; k < K; k++)
		if (out[k] > out[best])
			best = k;
	return best;
}

/* a class label as float8, for labels that are numbers or booleans */
double
DmlLabelAsDouble(DmlCachedModel *cm, int cls)
{
	const char *label = cm->classes[cls];
	Oid			t = getBaseType(cm->label_type);

	if (t == BOOLOID)
		return strcmp(label, "true") == 0 ? 1.0 : 0.0;
	if (t == INT2OID || t == INT4OID || t == INT8OID || t == NUMERICOID ||
		t == FLOAT4OID || t == FLOAT8OID)
		return strtod(label, NULL);
	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("model \"%s\" predicts %s labels, not numbers", cm->name,
					format_type_be(cm->label_type)),
			 errhint("Use dml_predict_class for the label as text.")));
	return 0;					/* not reached */
}

static bool
is_classifier(DmlCachedModel *cm)
{
	return cm->model.net.loss != DML_LOSS_MSE;
}

/* run the model on cm->input into cm->output */
static void
run_model(DmlCachedModel *cm)
{
	DmlModelPredictOne(cm);
}

/* ---------------------------------------------------------------------
 * SQL functions
 * --------------------------------------------------------------------- */

/* the cached model for argument 0 */
static DmlCachedModel *
model_arg(FunctionCallInfo fcinfo)
{
	text	   *t = PG_GETARG_TEXT_PP(0);
	int			len = VARSIZE_ANY_EXHDR(t);
	CallCache  *cc = call_cache(fcinfo);
	uint64		stamp = DmlValidationStamp();
	char	   *name;

	if (cc->cm != NULL && cc->stamp == stamp && cc->namelen == len &&
		memcmp(cc->name, VARDATA_ANY(t), len) == 0)
		return cc->cm;
	name = text_to_cstring(t);
	cc->cm = DmlGetModel(name);
	cc->stamp = stamp;
	cc->namelen = len < (int) sizeof(cc->name) ? len : 0;
	memcpy(cc->name, name, cc->namelen);
	return cc->cm;
}

static Datum
predict_value(DmlCachedModel *cm)
{
	run_model(cm);
	if (!is_classifier(cm))
		return Float8GetDatum(cm->output64 ? cm->output64[0] : cm->output[0]);
	return Float8GetDatum(DmlLabelAsDouble(cm, DmlPredictedClass(cm, cm->output)));
}

static Datum
predict_class(DmlCachedModel *cm)
{
	run_model(cm);
	if (!is_classifier(cm))
		return CStringGetTextDatum(cm->output64 ? psprintf("%.17g", cm->output64[0]) :
								   psprintf("%.9g", cm->output[0]));
	return CStringGetTextDatum(cm->classes[DmlPredictedClass(cm, cm->output)]);
}

static Datum
predict_proba(DmlCachedModel *cm)
{
	int			K = cm->nclasses;
	Datum	   *d;

	if (!is_classifier(cm))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("model \"%s\" is a regression model and has no class probabilities",
						cm->name),
				 errhint("Use dml_predict for its value.")));
	run_model(cm);
	d = palloc(sizeof(Datum) * K);
	if (cm->model.net.loss == DML_LOSS_BCE)
	{
		double		p1 = cm->output64 ? cm->output64[0] : cm->output[0];

		d[0] = Float8GetDatum(1.0 - p1);
		d[1] = Float8GetDatum(p1);
	}
	else
		for (int k = 0; k < K; k++)
			d[k] = Float8GetDatum(cm->output64 ? cm->output64[k] : cm->output[k]);
	return PointerGetDatum(construct_array(d, K, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

PG_FUNCTION_INFO_V1(dml_predict_array);
PG_FUNCTION_INFO_V1(dml_predict_record);
PG_FUNCTION_INFO_V1(dml_predict_class_array);
PG_FUNCTION_INFO_V1(dml_predict_class_record);
PG_FUNCTION_INFO_V1(dml_predict_proba_array);
PG_FUNCTION_INFO_V1(dml_predict_proba_record);
PG_FUNCTION_INFO_V1(dml_predict_cols);
PG_FUNCTION_INFO_V1(dml_predict_class_cols);
PG_FUNCTION_INFO_V1(dml_predict_proba_cols);
PG_FUNCTION_INFO_V1(dml_predict_vals);
PG_FUNCTION_INFO_V1(dml_predict_class_vals);
PG_FUNCTION_INFO_V1(dml_predict_proba_vals);

Datum
dml_predict_array(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	DmlCachedModel *cm = model_arg(fcinfo);

	inputs_from_array(cm, PG_GETARG_ARRAYTYPE_P(1));
	return predict_value(cm);
}

Datum
dml_predict_record(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	DmlCachedModel *cm = model_arg(fcinfo);

	inputs_from_record(fcinfo, cm, PG_GETARG_HEAPTUPLEHEADER(1));
	return predict_value(cm);
}

Datum
dml_predict_class_array(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	DmlCachedModel *cm = model_arg(fcinfo);

	inputs_from_array(cm, PG_GETARG_ARRAYTYPE_P(1));
	return predict_class(cm);
}

Datum
dml_predict_class_record(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	DmlCachedModel *cm = model_arg(fcinfo);

	inputs_from_record(fcinfo, cm, PG_GETARG_HEAPTUPLEHEADER(1));
	return predict_class(cm);
}

Datum
dml_predict_proba_array(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	DmlCachedModel *cm = model_arg(fcinfo);

	inputs_from_array(cm, PG_GETARG_ARRAYTYPE_P(1));
	return predict_proba(cm);
}

Datum
dml_predict_proba_record(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	DmlCachedModel *cm = model_arg(fcinfo);

	inputs_from_record(fcinfo, cm, PG_GETARG_HEAPTUPLEHEADER(1));
	return predict_proba(cm);
}

/*
 * A column form's call: EXECUTE on the record form it stands in for
 * checked once, then predict's result of the columns, or NULL for a NULL
 * model or names (the record form is STRICT; NULL columns are the
 * features' business).
 */
static Datum
columns_predict(FunctionCallInfo fcinfo, const char *record_form,
				Datum (*predict) (DmlCachedModel *))
{
	CallCache  *cc = call_cache(fcinfo);
	DmlCachedModel *cm;

	if (!cc->acl_checked)
	{
		check_record_form_acl(record_form, RECORDOID);
		cc->acl_checked = true;
	}
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	cm = model_arg(fcinfo);
	inputs_from_columns(fcinfo, cm);
	return predict(cm);
}

Datum
dml_predict_cols(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	return columns_predict(fcinfo, "dml_predict", predict_value);
}

Datum
dml_predict_class_cols(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	return columns_predict(fcinfo, "dml_predict_class", predict_class);
}

Datum
dml_predict_proba_cols(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	return columns_predict(fcinfo, "dml_predict_proba", predict_proba);
}

/*
 * A values form's call: its checks once (EXECUTE on the array form it
 * stands in for; every value a float8, passed one by one), then predict's
 * result of the values, or NULL for a NULL model (the array form is
 * STRICT; its array, ARRAY[...], is never NULL).
 */
static Datum
values_predict(FunctionCallInfo fcinfo, const char *array_form,
			   Datum (*predict) (DmlCachedModel *))
{
	CallCache  *cc = call_cache(fcinfo);
	DmlCachedModel *cm;

	if (!cc->acl_checked)
	{
		check_record_form_acl(array_form, FLOAT8ARRAYOID);
		/* called by hand, the values may be of any type */
		if (get_fn_expr_variadic(fcinfo->flinfo))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("dml.%s_vals takes its values one by one, not as VARIADIC", array_form + 4)));
		for (int i = 1; i < PG_NARGS(); i++)
			if (get_fn_expr_argtype(fcinfo->flinfo, i) != FLOAT8OID)
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("dml.%s_vals takes float8 values, but value %d is %s", array_form + 4,
								i, format_type_be(get_fn_expr_argtype(fcinfo->flinfo, i))),
						 errhint("Call %s(model, ARRAY[...]).", array_form)));
		cc->acl_checked = true;
	}
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	cm = model_arg(fcinfo);
	inputs_from_values(fcinfo, cm);
	return predict(cm);
}

Datum
dml_predict_vals(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	return values_predict(fcinfo, "dml_predict", predict_value);
}

Datum
dml_predict_class_vals(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	return values_predict(fcinfo, "dml_predict_class", predict_class);
}

Datum
dml_predict_proba_vals(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	return values_predict(fcinfo, "dml_predict_proba", predict_proba);
}
