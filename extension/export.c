/*-------------------------------------------------------------------------
 *
 * export.c
 *	  dml_export and dml_import: a model version out as ONNX or as dml's
 *	  own package, and in from either.
 *
 * Export reads the version a name resolves to (deployed, else newest),
 * for roles that may see its details (the owner, or a grant with details:
 * an export holds the statistics and the metrics).  Import adds a version
 * under the same rule as training (DmlCheckNameForTraining: not on a
 * standby; a name that exists needs the right to it), after everything
 * in the bytes has been checked: the ONNX graph or the package by their
 * readers (onnx.c, package.c), the weights by kernels/format.c's parser,
 * and the spec, which predict trusts, against the model's shapes
 * (check_spec).  Where the model came from goes into metrics->'origin'.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "dml.h"
#include "onnx.h"
#include "package.h"

#define DML_IMPORT_MAX_NAME		200		/* as dml.models' CHECK says */

/* ---------------------------------------------------------------------
 * Export
 * --------------------------------------------------------------------- */

typedef struct ModelRow
{
	char	   *kind;
	char	   *spec;
	char	   *metrics;
	bytea	   *weights;
} ModelRow;

/* the catalog row of model version id, read as the extension's owner */
static void
read_model_row(int64 id, ModelRow *row)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(id)};
	MemoryContext caller = CurrentMemoryContext;

	SPI_connect();
	DmlOwnerQuery("SELECT kind, spec::pg_catalog.text, metrics::pg_catalog.text, weights "
				  "FROM dml.models WHERE id OPERATOR(pg_catalog.=) $1",
				  1, argtypes, values, true, 1);
	if (SPI_processed != 1)
		elog(ERROR, "dml: model %lld vanished", (long long) id);
	{
		MemoryContext spi = MemoryContextSwitchTo(caller);
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	td = SPI_tuptable->tupdesc;

		row->kind = SPI_getvalue(tup, td, 1);
		row->spec = SPI_getvalue(tup, td, 2);
		row->metrics = SPI_getvalue(tup, td, 3);
		row->weights = DatumGetByteaPCopy(DmlSpiValue(0, 4));
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
}

/* an uninitialized bytea of n bytes, or the error that n is too large */
static bytea *
new_bytea(size_t n)
{
	bytea	   *b;

	if (n > MaxAllocSize - VARHDRSZ)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("model of %zu bytes is larger than a bytea can hold", n)));
	b = palloc(VARHDRSZ + n);
	SET_VARSIZE(b, VARHDRSZ + n);
	return b;
}

static bytea *
bytes_to_bytea(const unsigned char *p, size_t n)
{
	bytea	   *b = new_bytea(n);

	memcpy(VARDATA(b), p, n);
	return b;
}

static bytea *
export_onnx(DmlCachedModel *cm, ModelRow *row)
{
	DmlOnnxExport info;
	const char *keys[5] = {"dml.name", "dml.version", "dml.kind", "dml.spec", "dml.target"};
	const char *vals[5];
	unsigned char *out;
	size_t		outlen;
	char		errbuf[256];
	DmlStatus	st;
	bytea	   *result;

	memset(&info, 0, sizeof(info));
	if (cm->model.net.loss != DML_LOSS_MSE)
	{
		info.classes = (const char *const *) cm->classes;
		info.nclasses = cm->nclasses;
	}
	vals[0] = cm->name;
	vals[1] = psprintf("%d", cm->version);
	vals[2] = row->kind;
	vals[3] = row->spec;
	vals[4] = cm->target ? cm->target : "";
	info.nmeta = 5;
	info.meta_keys = keys;
	info.meta_values = vals;
	info.doc = psprintf("dml model %s version %d (%s); input \"features\" is the float array "
						"dml_predict takes", cm->name, cm->version, row->kind);
	st = dml_onnx_write(&cm->model, &info, &out, &outlen, errbuf, sizeof(errbuf));
	if (st == DML_ERR_NOMEM)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("%s", errbuf)));
	if (st != DML_OK)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("model \"%s\" cannot be written as ONNX", cm->name),
				 errdetail("%s", errbuf)));
	PG_TRY();
	{
		result = bytes_to_bytea(out, outlen);
	}
	PG_FINALLY();
	{
		free(out);
	}
	PG_END_TRY();
	return result;
}

static bytea *
export_package(ModelRow *row)
{
	DmlPackage	p;
	size_t		n;
	bytea	   *result;

	p.part[DML_PACKAGE_KIND] = (unsigned char *) row->kind;
	p.len[DML_PACKAGE_KIND] = strlen(row->kind);
	p.part[DML_PACKAGE_SPEC] = (unsigned char *) row->spec;
	p.len[DML_PACKAGE_SPEC] = strlen(row->spec);
	p.part[DML_PACKAGE_METRICS] = (unsigned char *) row->metrics;
	p.len[DML_PACKAGE_METRICS] = strlen(row->metrics);
	p.part[DML_PACKAGE_WEIGHTS] = (unsigned char *) VARDATA_ANY(row->weights);
	p.len[DML_PACKAGE_WEIGHTS] = VARSIZE_ANY_EXHDR(row->weights);
	n = dml_package_size(&p);
	result = new_bytea(n);
	dml_package_write(&p, (unsigned char *) VARDATA(result));
	return result;
}

PG_FUNCTION_INFO_V1(dml_export);

/*
 * dml_export(model text, format text DEFAULT 'onnx') RETURNS bytea
 */
Datum
dml_export(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *format = text_to_cstring(PG_GETARG_TEXT_PP(1));
	DmlCachedModel *cm;
	ModelRow	row;

	if (strcmp(format, "onnx") != 0 && strcmp(format, "dml") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown export format \"%s\"", format),
				 errhint("Use 'onnx' or 'dml'.")));
	cm = DmlGetModel(name);		/* the right to use it, checked */
	/* an export holds the statistics and metrics: not for predict-only grants */
	if (DmlRoleAccess(cm->owner, name) < DML_ACCESS_DETAILS)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to export model \"%s\"", name),
				 errdetail("The model is shared with this role for prediction only."),
				 errhint("The owner can share it with dml_grant(name, role, details => true).")));
	read_model_row(cm->id, &row);
	if (strcmp(format, "dml") == 0)
		PG_RETURN_BYTEA_P(export_package(&row));
	PG_RETURN_BYTEA_P(export_onnx(cm, &row));
}

/* ---------------------------------------------------------------------
 * Import
 * --------------------------------------------------------------------- */

/*
 * check_spec
 *		The spec predict will trust, checked against the model: features
 *		with names, known kinds and widths adding up to the inputs,
 *		one-hot levels as many as their width and distinct, as many
 *		distinct class labels as the model has classes (none for
 *		regression), a label type that exists, a target name.
 */
static void
check_spec(const char *spec, const DmlModel *m, const char *what)
{
	const DmlNet *net = &m->net;
	int			K = net->sizes[net->nlayers];
	int			nclasses = net->loss == DML_LOSS_MSE ? 0 : net->loss == DML_LOSS_BCE ? 2 : K;
	Oid			argtypes[3] = {TEXTOID, INT4OID, INT4OID};
	Datum		values[3];
	MemoryContext caller = CurrentMemoryContext;
	char	   *problem = NULL;

	values[0] = CStringGetTextDatum(spec);
	values[1] = Int32GetDatum(net->sizes[0]);
	values[2] = Int32GetDatum(nclasses);
	SPI_connect();
	if (DmlOwnerQuery(
							  "WITH s AS (SELECT $1::jsonb AS j), "
							  "f AS (SELECT e.i, e.f, e.f->>'kind' AS kind, "
							  "  CASE WHEN e.f->>'width' ~ '^[0-9]{1,6}$' THEN (e.f->>'width')::int END AS w "
							  "  FROM s, jsonb_array_elements(CASE jsonb_typeof(s.j->'features') "
							  "  WHEN 'array' THEN s.j->'features' ELSE '[]' END) "
							  "  WITH ORDINALITY AS e(f, i)), "
							  "bad AS (SELECT i FROM f WHERE jsonb_typeof(f) <> 'object' "
							  "  OR jsonb_typeof(f->'name') IS DISTINCT FROM 'string' "
							  "  OR length(f->>'name') NOT BETWEEN 1 AND 63 "
							  "  OR kind IS NULL OR kind NOT IN ('num', 'vec', 'cat') "
							  "  OR jsonb_typeof(f->'width') IS DISTINCT FROM 'number' "
							  "  OR w IS NULL OR w < 1 OR (kind = 'num' AND w <> 1) "
							  "  OR (kind = 'cat' AND (jsonb_typeof(f->'levels') IS DISTINCT FROM 'array' "
							  "    OR jsonb_array_length(f->'levels') <> w "
							  "    OR EXISTS (SELECT FROM jsonb_array_elements(f->'levels') l "
							  "      WHERE jsonb_typeof(l) <> 'string') "
							  "    OR (SELECT count(DISTINCT l) FROM jsonb_array_elements_text(f->'levels') l) <> w))) "
							  "SELECT CASE "
							  "WHEN jsonb_typeof(j) <> 'object' THEN 'it is not a JSON object' "
							  "WHEN NOT EXISTS (SELECT FROM f) THEN 'it lists no features' "
							  "WHEN EXISTS (SELECT FROM bad) THEN format('feature %s needs a name of 1 to 63 "
							  "  characters, a kind (num, vec, cat), a width (1 for num) and, one-hot, as many "
							  "  distinct text levels as its width', (SELECT min(i) FROM bad)) "
							  "WHEN (SELECT sum(w) FROM f) <> $2 "
							  "  THEN format('its features make %s inputs but the model takes %s', "
							  "    (SELECT sum(w) FROM f), $2) "
							  "WHEN $3 = 0 AND jsonb_typeof(j->'classes') = 'array' "
							  "  AND jsonb_array_length(j->'classes') > 0 "
							  "  THEN 'a regression model has no classes' "
							  "WHEN $3 > 0 AND (jsonb_typeof(j->'classes') IS DISTINCT FROM 'array' "
							  "  OR jsonb_array_length(j->'classes') <> $3 "
							  "  OR EXISTS (SELECT FROM jsonb_array_elements(j->'classes') c "
							  "    WHERE jsonb_typeof(c) <> 'string') "
							  "  OR (SELECT count(DISTINCT c) FROM jsonb_array_elements_text(j->'classes') c) <> $3) "
							  "  THEN format('the model has %s classes; the spec needs as many distinct "
							  "text labels', $3) "
							  "WHEN jsonb_typeof(j->'label_type') IS DISTINCT FROM 'number' "
							  "  OR j->>'label_type' !~ '^[0-9]{1,10}$' "
							  "  OR NOT EXISTS (SELECT FROM pg_catalog.pg_type t WHERE t.oid::text = j->>'label_type') "
							  "  THEN 'its label_type is not a type of this database' "
							  "WHEN jsonb_typeof(j->'target') IS DISTINCT FROM 'string' "
							  "  OR length(j->>'target') NOT BETWEEN 1 AND 63 "
							  "  THEN 'it names no target column' "
							  "END FROM s",
							  3, argtypes, values, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "dml: checking a model spec failed");
	problem = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	if (problem)
		problem = MemoryContextStrdup(caller, problem);
	SPI_finish();
	if (problem)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the spec of the %s does not fit its model", what),
				 errdetail("The spec: %s.", problem)));
}

/* the kind dml names a model of this shape */
static const char *
kind_of(const DmlModel *m)
{
	DmlKind		kind = m->net.nlayers > 1 ? DML_KIND_MLP :
		m->net.loss == DML_LOSS_MSE ? DML_KIND_LINEAR :
		m->net.loss == DML_LOSS_BCE ? DML_KIND_LOGISTIC : DML_KIND_SOFTMAX;

	return dml_job_name(DML_NAMES_KIND, kind);
}

/* a text[] argument as C strings (NULL elements refused) */
static char **
text_array(ArrayType *arr, const char *argname, int *n)
{
	Datum	   *elems;
	bool	   *nulls;
	char	  **out;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("%s must be a one-dimensional array", argname)));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, n);
	out = palloc(sizeof(char *) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not hold NULL", argname)));
		out[i] = TextDatumGetCString(elems[i]);
	}
	return out;
}

/* the value of an ONNX metadata entry, or NULL */
static const char *
onnx_meta(const DmlOnnxImport *info, const char *key)
{
	for (int i = 0; i < info->nmeta; i++)
		if (strcmp(info->meta_keys[i], key) == 0)
			return info->meta_values[i];
	return NULL;
}

/*
 * The spec of an imported ONNX graph: its features are the columns named
 * by inputs (one per input, or one array column for all of them), else
 * those of a dml export's own spec; its classes are classes, else the
 * export's, else the output indexes.
 */
static char *
onnx_spec(const DmlModel *m, const DmlOnnxImport *info, ArrayType *inputs,
		  ArrayType *classes, const char *target)
{
	const DmlNet *net = &m->net;
	int			C = net->sizes[0];
	int			K = net->sizes[net->nlayers];
	int			nclasses = net->loss == DML_LOSS_MSE ? 0 : net->loss == DML_LOSS_BCE ? 2 : K;
	const char *dml_spec = onnx_meta(info, "dml.spec");
	StringInfoData s;
	char	  **names;
	int			nnames;
	Oid			label_type;

	if (inputs == NULL && classes == NULL && target == NULL && dml_spec != NULL)
		return pstrdup(dml_spec);	/* a dml export: checked like any spec */
	if (inputs == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the ONNX graph's input \"%s\" takes %d values; say which columns they are",
						info->input_name, C),
				 errhint("Pass inputs => ARRAY['col1', ...] (one column per value), or the name of one "
						 "real[] or float8[] column holding all %d.", C)));
	names = text_array(inputs, "inputs", &nnames);
	if (nnames != C && nnames != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("inputs names %d columns but the graph takes %d values", nnames, C),
				 errhint("Name one column per value, or one array column for all of them.")));
	initStringInfo(&s);
	appendStringInfoString(&s, "{\"features\": [");
	for (int i = 0; i < nnames; i++)
	{
		appendStringInfoString(&s, i ? ", {\"name\": " : "{\"name\": ");
		escape_json(&s, names[i]);
		appendStringInfo(&s, ", \"kind\": \"%s\", \"width\": %d}",
						 nnames == C ? "num" : "vec", nnames == C ? 1 : C);
	}
	appendStringInfoString(&s, "], \"classes\": ");
	if (nclasses == 0)
	{
		if (classes != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the graph is a regression model; it takes no classes")));
		appendStringInfoString(&s, "null");
		label_type = FLOAT8OID;
	}
	else
	{
		char	  **labels = NULL;
		int			nlabels = nclasses;

		if (classes != NULL)
		{
			labels = text_array(classes, "classes", &nlabels);
			if (nlabels != nclasses)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("classes has %d labels but the graph has %d classes",
								nlabels, nclasses)));
		}
		appendStringInfoChar(&s, '[');
		for (int k = 0; k < nclasses; k++)
		{
			if (k)
				appendStringInfoString(&s, ", ");
			escape_json(&s, labels ? labels[k] : psprintf("%d", k));
		}
		appendStringInfoChar(&s, ']');
		/* without labels the class is its index, which dml_predict returns */
		label_type = labels ? TEXTOID : INT4OID;
	}
	appendStringInfo(&s, ", \"label_type\": %u, \"target\": ", label_type);
	escape_json(&s, target ? target : "target");
	appendStringInfo(&s, ", \"inputs\": %d, \"outputs\": %d, \"loss\": \"%s\", \"hidden\": [",
					 C, K, dml_job_name(DML_NAMES_LOSS, net->loss));
	for (int l = 1; l < net->nlayers; l++)
		appendStringInfo(&s, "%s%d", l > 1 ? ", " : "", net->sizes[l]);
	appendStringInfo(&s, "], \"activation\": \"%s\"}", dml_act_name(net->act));
	return s.data;
}

/* metrics->'origin' of an import */
static char *
origin_json(const char *format, size_t nbytes, const DmlOnnxImport *info)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfo(&s, "{\"format\": \"%s\", \"bytes\": %zu, \"imported_by\": ", format, nbytes);
	escape_json(&s, GetUserNameFromId(GetUserId(), false));
	appendStringInfoString(&s, ", \"imported_at\": ");
	escape_json(&s, timestamptz_to_str(GetCurrentTransactionStartTimestamp()));
	if (info)
	{
		appendStringInfoString(&s, ", \"producer\": ");
		escape_json(&s, info->producer);
		appendStringInfo(&s, ", \"opset\": %lld, \"input\": ", (long long) info->opset);
		escape_json(&s, info->input_name);
		appendStringInfoString(&s, ", \"operators\": ");
		escape_json(&s, info->ops);
	}
	appendStringInfoChar(&s, '}');
	return s.data;
}

/* metrics with "origin" set, as JSON text (an object, or an error) */
static char *
with_origin(const char *metrics, const char *origin)
{
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	Datum		values[2] = {CStringGetTextDatum(metrics), CStringGetTextDatum(origin)};
	MemoryContext caller = CurrentMemoryContext;
	char	   *out;

	SPI_connect();
	if (DmlOwnerQuery("SELECT CASE jsonb_typeof($1::jsonb) WHEN 'object' THEN "
					  "($1::jsonb || jsonb_build_object('origin', $2::jsonb))::text END",
					  2, argtypes, values, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "dml: building metrics failed");
	out = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	if (out == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the package's metrics are not a JSON object")));
	out = MemoryContextStrdup(caller, out);
	SPI_finish();
	return out;
}

/* the bytes of a weights blob for m */
static bytea *
model_blob(const DmlModel *m)
{
	bytea	   *b = new_bytea(dml_model_serialized_size(m));

	dml_model_serialize(m, (unsigned char *) VARDATA(b));
	return b;
}

/* turn a reader's failure into an error */
static void
import_failed(DmlStatus st, const char *format, const char *errbuf)
{
	if (st == DML_ERR_NOMEM)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("%s", errbuf)));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("data is not %s model dml can import", format),
			 errdetail("%s", errbuf)));
}

PG_FUNCTION_INFO_V1(dml_import);

/*
 * dml_import(name text, data bytea, format text DEFAULT 'onnx',
 *			  inputs text[] DEFAULT NULL, classes text[] DEFAULT NULL,
 *			  target text DEFAULT NULL) RETURNS integer
 *		Store data as the next version of name; returns the version.
 */
Datum
dml_import(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	char	   *name;
	bytea	   *data;
	char	   *format;
	const unsigned char *buf;
	size_t		len;
	char		errbuf[256];
	DmlStatus	st;
	DmlModel	m;
	const char *kind;
	char	   *spec;
	char	   *metrics;
	bytea	   *weights;
	int64		id;
	int			version;
	Oid			owner;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("name, data and format must not be NULL")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	data = PG_GETARG_BYTEA_PP(1);
	format = text_to_cstring(PG_GETARG_TEXT_PP(2));
	buf = (const unsigned char *) VARDATA_ANY(data);
	len = VARSIZE_ANY_EXHDR(data);
	if (strlen(name) < 1 || strlen(name) > DML_IMPORT_MAX_NAME)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a model name has 1 to %d characters", DML_IMPORT_MAX_NAME)));
	if (strcmp(format, "onnx") != 0 && strcmp(format, "dml") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown import format \"%s\"", format),
				 errhint("Use 'onnx' or 'dml'.")));
	DmlCheckWritable("import a model");
	owner = DmlCheckNameForTraining(name);

	if (strcmp(format, "onnx") == 0)
	{
		DmlOnnxImport info;

		st = dml_onnx_read(&m, &info, buf, len, errbuf, sizeof(errbuf));
		if (st != DML_OK)
			import_failed(st, "an ONNX", errbuf);
		PG_TRY();
		{
			spec = onnx_spec(&m, &info, PG_ARGISNULL(3) ? NULL : PG_GETARG_ARRAYTYPE_P(3),
							 PG_ARGISNULL(4) ? NULL : PG_GETARG_ARRAYTYPE_P(4),
							 PG_ARGISNULL(5) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(5)));
			check_spec(spec, &m, "ONNX model");
			metrics = with_origin("{}", origin_json("onnx", len, &info));
			kind = kind_of(&m);
			weights = model_blob(&m);
		}
		PG_FINALLY();
		{
			dml_onnx_import_free(&info);
			dml_model_free(&m);
		}
		PG_END_TRY();
	}
	else
	{
		DmlPackage	p;
		char	   *pkind;

		if (!PG_ARGISNULL(3) || !PG_ARGISNULL(4) || !PG_ARGISNULL(5))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("a dml package brings its own inputs, classes and target"),
					 errhint("Leave inputs, classes and target out for format 'dml'.")));
		st = dml_package_read(&p, buf, len, errbuf, sizeof(errbuf));
		if (st != DML_OK)
			import_failed(st, "a dml", errbuf);
		st = dml_model_parse(&m, p.part[DML_PACKAGE_WEIGHTS], p.len[DML_PACKAGE_WEIGHTS],
							 errbuf, sizeof(errbuf));
		if (st != DML_OK)
			import_failed(st, "a dml", errbuf);
		pkind = pnstrdup((const char *) p.part[DML_PACKAGE_KIND], p.len[DML_PACKAGE_KIND]);
		spec = pnstrdup((const char *) p.part[DML_PACKAGE_SPEC], p.len[DML_PACKAGE_SPEC]);
		metrics = pnstrdup((const char *) p.part[DML_PACKAGE_METRICS], p.len[DML_PACKAGE_METRICS]);
		PG_TRY();
		{
			int			k = dml_job_parse(DML_NAMES_KIND, pkind);

			/* a stored model's kind: any but the model argument's 'auto' */
			if (k < 0 || k == DML_KIND_AUTO)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("data is not a dml model dml can import"),
						 errdetail("Unknown model kind \"%s\".", pkind)));
			check_spec(spec, &m, "package");
			metrics = with_origin(metrics, origin_json("dml", len, NULL));
		}
		PG_FINALLY();
		{
			dml_model_free(&m);
		}
		PG_END_TRY();
		kind = pkind;
		/* the blob as it came: a checked, older format version stays as it was */
		weights = bytes_to_bytea(p.part[DML_PACKAGE_WEIGHTS], p.len[DML_PACKAGE_WEIGHTS]);
	}

	id = DmlNextModelId();
	version = DmlStoreModel(id, name, owner, kind, "imported", spec, weights, metrics);
	PG_RETURN_INT32(version);
}
