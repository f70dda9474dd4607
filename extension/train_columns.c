/*-------------------------------------------------------------------------
 *
 * train_columns.c
 *	  dml_train's columns: the target and the features resolved through
 *	  the catalog (SELECT checked for the caller), and each feature's kind,
 *	  width, vocabulary and the SQL expression the workers read.
 *
 * Nothing user-supplied is pasted into SQL: relations are resolved to OIDs
 * (regclass), columns to attribute numbers, and both are written back with
 * quote_identifier.  Vocabularies are read with SPI under the caller's own
 * privileges.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "coordinator.h"
#include "shards.h"
#include "dml.h"
#include "train.h"

#define DML_MAX_LEVELS			1000	/* levels of a one-hot feature */

/* ---------------------------------------------------------------------
 * Columns
 * --------------------------------------------------------------------- */

/* attribute of relid by name, with SELECT checked for the caller */
void
resolve_column(Oid relid, const char *name, DmlFeature *col, const char *what)
{
	AttrNumber	attnum = get_attnum(relid, name);
	Oid			typid;
	int32		typmod;
	Oid			collid;

	if (attnum == InvalidAttrNumber || attnum < 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						name, get_rel_name(relid)),
				 errhint("The %s must name a column of the relation.", what)));
	if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK &&
		pg_attribute_aclcheck(relid, attnum, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for column \"%s\" of relation \"%s\"",
						name, get_rel_name(relid))));
	get_atttypetypmodcoll(relid, attnum, &typid, &typmod, &collid);
	memset(col, 0, sizeof(*col));
	col->name = pstrdup(name);
	col->attnum = attnum;
	col->typid = getBaseType(typid);
}

/* quoted name of relid, schema-qualified */
char *
rel_sql_name(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

/* Run a query returning one text column; returns the list of values */
List *
spi_text_column(const char *sql, int limit)
{
	List	   *result = NIL;

	if (SPI_execute(sql, true, limit) != SPI_OK_SELECT)
		elog(ERROR, "dml: query failed: %s", sql);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *v = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);

		result = lappend(result, v ? v : pstrdup(""));
	}
	return result;
}

/* Set up a feature column: its kind, width, vocabulary and SQL expression */
static void
prepare_feature(Oid relid, DmlFeature *col)
{
	const char *qcol = quote_identifier(col->name);
	char	   *rel = rel_sql_name(relid);

	if (type_is_numeric(col->typid))
	{
		col->kind = DML_FEAT_NUM;
		col->width = 1;
		col->expr = psprintf("%s::float8", qcol);
	}
	else if (col->typid == BOOLOID)
	{
		col->kind = DML_FEAT_NUM;
		col->width = 1;
		col->expr = psprintf("%s::int4::float8", qcol);
	}
	else if (type_is_vector(col->typid))
	{
		List	   *w;

		col->kind = DML_FEAT_VEC;
		col->expr = psprintf("dml.vec_bytes(%s::float4[])", qcol);
		w = spi_text_column(psprintf("SELECT cardinality(%s) FROM %s WHERE %s IS NOT NULL LIMIT 1",
									 qcol, rel, qcol), 1);
		if (w == NIL)
			col->width = 0;		/* all NULL: the worker reports it */
		else
			col->width = atoi(linitial(w));
		if (w != NIL && col->width < 1)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("array column \"%s\" holds an empty array", col->name),
					 errhint("Every row's array must have the same, non-zero length.")));
		if (col->width == 0)
			col->width = 1;
	}
	else if (type_is_text(col->typid))
	{
		List	   *vocab;
		ListCell   *lv;

		col->kind = DML_FEAT_CAT;
		col->expr = psprintf("%s::text", qcol);
		if (!DmlShardsDistinct(relid, col->name, DML_MAX_LEVELS, false, &vocab))	/* on each shard */
			vocab = spi_text_column(psprintf("SELECT v FROM (SELECT DISTINCT %s::text AS v FROM %s "
											 "WHERE %s IS NOT NULL) s ORDER BY v COLLATE \"C\"",
											 qcol, rel, qcol), DML_MAX_LEVELS + 1);
		if (list_length(vocab) > DML_MAX_LEVELS)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("column \"%s\" has more than %d distinct values", col->name, DML_MAX_LEVELS),
					 errhint("One-hot encoding is for categories; leave this column out of features.")));
		/* in "C" order, which is strcmp's: each level's slot is its place */
		col->nlevels = list_length(vocab);
		col->levels = palloc(sizeof(char *) * Max(col->nlevels, 1));
		col->level_slot = palloc(sizeof(int) * Max(col->nlevels, 1));
		foreach(lv, vocab)
		{
			col->levels[foreach_current_index(lv)] = lfirst(lv);
			col->level_slot[foreach_current_index(lv)] = foreach_current_index(lv);
		}
		col->width = Max(col->nlevels, 1);
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" has type %s, which cannot be a feature",
						col->name, format_type_be(col->typid)),
				 errhint("Features may be numbers, booleans, text or enums, or arrays of numbers.")));
}

/* every other numeric, boolean or numeric-array column, in column order */
static List *
default_features(Oid relid, AttrNumber target_att)
{
	List	   *result = NIL;
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	int			natts;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	natts = ((Form_pg_class) GETSTRUCT(tup))->relnatts;
	ReleaseSysCache(tup);

	for (AttrNumber a = 1; a <= natts; a++)
	{
		char	   *name = get_attname(relid, a, true);
		Oid			t;

		if (name == NULL || a == target_att)
			continue;			/* dropped or the target */
		t = getBaseType(get_atttype(relid, a));
		if (type_is_numeric(t) || t == BOOLOID || type_is_vector(t))
			result = lappend(result, name);
	}
	return result;
}

/*
 * The features: those named, or every other numeric, boolean or
 * numeric-array column; each resolved once.  Then a probe for rows.
 */
void
train_resolve_features(DmlJob *job, TrainArgs *args)
{
	List	   *feature_names = args->feature_names;
	ListCell   *lc;
	int64		probe_rows;

	if (feature_names == NIL && args->features_null)
		feature_names = default_features(job->relid, job->target.attnum);
	if (feature_names == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no feature columns"),
				 errhint("Name the features, or give the relation numeric columns besides the target.")));
	foreach(lc, feature_names)
	{
		DmlFeature *col = palloc0(sizeof(DmlFeature));
		ListCell   *lc2;

		resolve_column(job->relid, lfirst(lc), col, "feature");
		if (col->attnum == job->target.attnum)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("column \"%s\" is both the target and a feature", col->name)));
		foreach(lc2, job->features)
			if (((DmlFeature *) lfirst(lc2))->attnum == col->attnum)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("feature \"%s\" is listed twice", col->name)));
		job->features = lappend(job->features, col);
	}

	/* empty relation: say so before launching anything (shards: on their servers) */
	if (!DmlShardsCountRows(job->relid, 1, &probe_rows))
	{
		if (SPI_execute(psprintf("SELECT 1 FROM %s LIMIT 1", rel_sql_name(job->relid)), true, 1) != SPI_OK_SELECT)
			elog(ERROR, "dml: probing the relation failed");
		probe_rows = (int64) SPI_processed;
	}
	if (probe_rows == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("relation \"%s\" has no rows", get_rel_name(job->relid)),
				 errhint("Training needs data: load rows first, or check row-level security policies.")));
}

/* each feature's kind, width and vocabulary, and the inputs they add up to */
void
train_prepare_features(DmlJob *job)
{
	ListCell   *lc;

	foreach(lc, job->features)
	{
		DmlFeature *col = lfirst(lc);

		prepare_feature(job->relid, col);
		job->ninputs += col->width;
	}
}
