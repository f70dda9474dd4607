/*-------------------------------------------------------------------------
 *
 * train.h
 *	  dml_train's steps, one file per concern:
 *
 *	  train_args.c     the SQL arguments: checked, and strings made enums
 *	  train_columns.c  the relation's columns: target and features resolved
 *	  train_plan.c     the model and its defaults: kind, labels, shape,
 *	                   optimizer, synchronization, how rows are read
 *	  train.c          dml_train: the steps in order, and the run itself
 *	  train_store.c    the model that came back: checked and stored
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_TRAIN_H
#define DML_TRAIN_H

#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "nodes/pg_list.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"

#include "coordinator.h"

/* What the arguments say beyond the job's own members */
typedef struct TrainArgs
{
	char	   *model;			/* the model argument: 'auto' when NULL */
	char	   *optimizer;		/* NULL: chosen by the data (train_plan.c) */
	bool		features_null;	/* the features argument is NULL: the default ones */
	List	   *feature_names;	/* of char *, as named */
} TrainArgs;

/* ---------------------------------------------------------------------
 * Types
 * --------------------------------------------------------------------- */

static inline bool
type_is_numeric(Oid t)
{
	return t == INT2OID || t == INT4OID || t == INT8OID || t == FLOAT4OID ||
		t == FLOAT8OID || t == NUMERICOID;
}

static inline bool
type_is_integer(Oid t)
{
	return t == INT2OID || t == INT4OID || t == INT8OID;
}

static inline bool
type_is_vector(Oid t)
{
	return t == FLOAT4ARRAYOID || t == FLOAT8ARRAYOID ||
		t == INT4ARRAYOID || t == INT2ARRAYOID || t == INT8ARRAYOID ||
		t == NUMERICARRAYOID;
}

static inline bool
type_is_text(Oid t)
{
	return t == TEXTOID || t == VARCHAROID || t == BPCHAROID || t == NAMEOID ||
		type_is_enum(t);
}

/* train_args.c */
extern void train_read_relation(DmlJob *job, FunctionCallInfo fcinfo);
extern void train_read_settings(DmlJob *job, FunctionCallInfo fcinfo, TrainArgs *args);
extern void range_error(const char *arg, const char *detail);
extern int	job_choice(DmlJobNames which, const char *value, const char *noun, const char *hint);
extern void apply_options(DmlJob *job, Jsonb *options);
extern void choose_sync(DmlJob *job, FunctionCallInfo fcinfo);

/* train_columns.c */
extern void resolve_column(Oid relid, const char *name, DmlFeature *col, const char *what);
extern char *rel_sql_name(Oid relid);
extern List *spi_text_column(const char *sql, int limit);
extern void train_resolve_features(DmlJob *job, TrainArgs *args);
extern void train_prepare_features(DmlJob *job);

/* train_plan.c */
extern void train_plan(DmlJob *job, TrainArgs *args, FunctionCallInfo fcinfo);
extern List *target_classes(Oid relid, DmlFeature *target, int limit);
extern void set_classes(DmlJob *job, List *classes);

/* train_store.c */
extern int	train_store(DmlJob *job, DmlJobResult *result, int64 model_id, Oid owner,
						const char **stopped);

#endif							/* DML_TRAIN_H */
