/*-------------------------------------------------------------------------
 *
 * train.c
 *	  dml_train: check the arguments, resolve every name through the
 *	  catalog, hand a job to the coordinator, store the model.
 *
 * Nothing user-supplied is pasted into SQL: relations are resolved to OIDs
 * (regclass), columns to attribute numbers, and both are written back with
 * quote_identifier.  Labels and vocabularies are read with SPI under the
 * caller's own privileges.  The caller must hold SELECT on the relation or
 * on every column used, checked before anything is launched; the workers
 * then read as the caller (SET ROLE), so row-level security applies.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "coordinator.h"
#include "dml.h"
#include "hosts.h"
#include "jobs.h"

#define DML_AUTO_MAX_CLASSES	32		/* integer targets with more are regression */
#define DML_MAX_LEVELS			1000	/* levels of a one-hot feature */
#define DML_MAX_EPOCHS			100000
#define DML_MAX_BATCH			10000000
#define DML_EXACT_MAX_INPUTS	500		/* normal equations by default */
#define DML_DEFAULT_BATCH		256
#define DML_DEFAULT_HIDDEN		64

/*
 * Training without epochs runs until it converges.  Minibatch optimizers
 * stop when the loss (validation loss with validation > 0) has not
 * improved by DML_DEFAULT_TOLERANCE of itself for DML_DEFAULT_PATIENCE
 * epochs, within a budget of DML_DEFAULT_MAX_STEPS optimizer steps and
 * DML_DEFAULT_MAX_EPOCHS epochs; L-BFGS when its gradient is small or an
 * iteration no longer lowers the loss, within DML_DEFAULT_LBFGS_ITERS
 * iterations for linear models and twice that for MLPs (scikit-learn's
 * max_iter is 100 for logistic regression, 200 for its MLP); Newton within
 * 25 iterations.
 */
#define DML_DEFAULT_MAX_EPOCHS	200
#define DML_DEFAULT_MAX_STEPS	20000
#define DML_DEFAULT_PATIENCE	10
#define DML_DEFAULT_TOLERANCE	1e-4
#define DML_DEFAULT_VALIDATION	0.1
#define DML_DEFAULT_LBFGS_ITERS	100	/* linear models; MLPs twice as many */
#define DML_DEFAULT_NEWTON_ITERS 25

/*
 * Newton's method costs about n q^2 per iteration (the Hessian, q
 * parameters) and converges in some 5-10; L-BFGS about 2 n q per
 * evaluation and needs tens to hundreds.  Measured on this project's
 * machine (bench/datasets.py), Newton is the faster below about
 * DML_NEWTON_MAX_PARAMS parameters, L-BFGS above.  Tables small enough to
 * fit in the server (fit.c) take L-BFGS there: no job to start at all.
 */
#define DML_NEWTON_MAX_PARAMS	64
/* MLPs on tables up to this many rows train full-batch by L-BFGS */
#define DML_LBFGS_MAX_ROWS		20000
/* weight_decay of logistic and softmax regression: this over the rows */
#define DML_DEFAULT_GLM_PENALTY	0.1
/* rows counted at most, for the defaults above and weight_decay's */
#define DML_COUNT_LIMIT			1000000

/* ---------------------------------------------------------------------
 * Types
 * --------------------------------------------------------------------- */

static bool
type_is_numeric(Oid t)
{
	return t == INT2OID || t == INT4OID || t == INT8OID || t == FLOAT4OID ||
		t == FLOAT8OID || t == NUMERICOID;
}

static bool
type_is_integer(Oid t)
{
	return t == INT2OID || t == INT4OID || t == INT8OID;
}

static bool
type_is_vector(Oid t)
{
	return t == FLOAT4ARRAYOID || t == FLOAT8ARRAYOID ||
		t == INT4ARRAYOID || t == INT2ARRAYOID || t == INT8ARRAYOID ||
		t == NUMERICARRAYOID;
}

static bool
type_is_text(Oid t)
{
	return t == TEXTOID || t == VARCHAROID || t == BPCHAROID || t == NAMEOID ||
		type_is_enum(t);
}

/* ---------------------------------------------------------------------
 * Arguments
 * --------------------------------------------------------------------- */

/* text argument or NULL */
static char *
arg_text(FunctionCallInfo fcinfo, int i)
{
	return PG_ARGISNULL(i) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(i));
}

static void
range_error(const char *arg, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s is out of range", arg),
			 errdetail("%s", detail)));
}

/*
 * The enum value (jobspec.h) of an option given as text: where strings
 * from SQL become enums, the only place.  Unknown: "unknown <noun>".
 */
static int
job_choice(DmlJobNames which, const char *value, const char *noun, const char *hint)
{
	int			v = dml_job_parse(which, value);

	if (v < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown %s \"%s\"", noun, value),
				 errhint("%s", hint)));
	return v;
}

/* one option of the options jsonb */
static void
apply_option(DmlJob *job, const char *key, JsonbValue *v)
{
	double		num = 0;
	char	   *str = NULL;

	if (v->type == jbvNumeric)
		num = DatumGetFloat8(DirectFunctionCall1(numeric_float8,
												 NumericGetDatum(v->val.numeric)));
	else if (v->type == jbvString)
		str = pnstrdup(v->val.string.val, v->val.string.len);
	else if (v->type == jbvBool)
		num = v->val.boolean ? 1 : 0;

#define NUMERIC_OPT(nm, field, lo, hi) \
	if (strcmp(key, nm) == 0) { \
		if (v->type != jbvNumeric || !(num >= (lo) && num <= (hi))) \
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), \
							errmsg("option \"%s\" must be a number between %g and %g", nm, \
								   (double) (lo), (double) (hi)))); \
		field = num; return; }
#define INTEGER_OPT(nm, field, lo, hi) \
	if (strcmp(key, nm) == 0) { \
		if (v->type != jbvNumeric || !(num >= (lo) && num <= (hi)) || num != floor(num)) \
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), \
							errmsg("option \"%s\" must be an integer between %d and %d", nm, \
								   (int) (lo), (int) (hi)))); \
		field = (int) num; return; }

	NUMERIC_OPT("momentum", job->momentum, 0, 0.999999);
	NUMERIC_OPT("beta1", job->beta1, 0, 0.999999);
	NUMERIC_OPT("beta2", job->beta2, 0, 0.99999999);
	NUMERIC_OPT("eps", job->eps, 1e-12, 1);
	INTEGER_OPT("step_size", job->step_size, 1, 1000000);
	NUMERIC_OPT("gamma", job->gamma, 1e-6, 1);
	NUMERIC_OPT("tolerance", job->tolerance, 0, 1);
	INTEGER_OPT("max_restarts", job->max_restarts, 0, 100);
	INTEGER_OPT("checkpoint_every", job->checkpoint_every, 0, 1000000);
	INTEGER_OPT("epoch_timeout", job->epoch_timeout, 0, 86400 * 7);
	if (strcmp(key, "schedule") == 0)
	{
		int			sched = dml_job_parse(DML_NAMES_SCHEDULE, str);

		if (sched < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"schedule\" must be \"constant\", \"step\" or \"cosine\"")));
		job->schedule = (DmlSchedule) sched;
		return;
	}
	if (strcmp(key, "nesterov") == 0)
	{
		if (v->type != jbvBool)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"nesterov\" must be a boolean")));
		if (v->val.boolean && job->optimizer == DML_JOB_OPT_MOMENTUM)
			job->optimizer = DML_JOB_OPT_NESTEROV;
		return;
	}
	/* on by default: the job keeps the negation */
#define BOOLEAN_OFF_OPT(nm, off_field) \
	if (strcmp(key, nm) == 0) { \
		if (v->type != jbvBool) \
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), \
							errmsg("option \"%s\" must be a boolean", nm))); \
		off_field = !v->val.boolean; return; }

	BOOLEAN_OFF_OPT("in_server", job->no_in_server);
	BOOLEAN_OFF_OPT("shared_memory", job->no_shared_memory);
	if (strcmp(key, "rank_deficient") == 0)
	{
		if (str == NULL || (strcmp(str, "error") != 0 && strcmp(str, "min_norm") != 0))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"rank_deficient\" must be \"error\" or \"min_norm\""),
					 errhint("\"min_norm\" gives collinear features the minimum-norm solution, as lstsq does.")));
		job->rank_min_norm = strcmp(str, "min_norm") == 0;
		return;
	}
	if (strcmp(key, "load") == 0)
	{
		if (str == NULL || (strcmp(str, "auto") != 0 && strcmp(str, "copy") != 0))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"load\" must be \"auto\" or \"copy\""),
					 errhint("\"copy\" reads every job through binary COPY, for comparison.")));
		job->load_copy = strcmp(str, "copy") == 0;
		return;
	}
	INTEGER_OPT("window", job->window, 1, DML_WINDOW_MAX);
	if (strcmp(key, "spill") == 0)
	{
		if (str == NULL || (strcmp(str, "float32") != 0 && strcmp(str, "fp16") != 0))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"spill\" must be \"float32\" or \"fp16\""),
					 errhint("\"fp16\" halves the spill of inputs that fit a half float (up to 65504 in magnitude, about 3 significant digits).")));
		job->spill_fp16 = strcmp(str, "fp16") == 0;
		return;
	}
	if (strcmp(key, "memory") == 0)
	{
		int			kb;

		if (str == NULL || !parse_int(str, &kb, GUC_UNIT_KB, NULL) ||
			(int64) kb * 1024 < DML_MEMORY_MIN)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"memory\" must be an amount of memory of at least 8MB, such as \"512MB\"")));
		job->memory = (int64) kb * 1024;
		return;
	}
	if (strcmp(key, "fault") == 0)
	{
		if (!dml_test_hooks)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("option \"fault\" needs dml.test_hooks"),
					 errhint("A superuser can enable test hooks with SET dml.test_hooks = on.")));
		{
			int			rank,
						epoch,
						used = 0;
			char		how[8] = "";

			if (str == NULL ||
				sscanf(str, "%d:%d:%5[a-z]%n", &rank, &epoch, how, &used) != 3 ||
				(str[used] != '\0' && strcmp(str + used, "!") != 0) ||
				(strcmp(how, "kill") != 0 && strcmp(how, "exit") != 0 &&
				 strcmp(how, "drop") != 0 && strcmp(how, "hang") != 0) ||
				rank < 0 || epoch < 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("option \"fault\" must look like \"rank:epoch:how\""),
						 errhint("how is kill, exit, drop or hang, optionally followed by \"!\" to fault again after each restart.")));
		}
		job->fault = str;
		return;
	}
	if (strcmp(key, "straggler") == 0)
	{
		int			rank,
					ms,
					used = 0;

		if (!dml_test_hooks)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("option \"straggler\" needs dml.test_hooks"),
					 errhint("A superuser can enable test hooks with SET dml.test_hooks = on.")));
		double		p = 1;
		bool		any = str != NULL && str[0] == '*';

		if (str == NULL ||
			(any ? sscanf(str, "*:%d:%lf%n", &ms, &p, &used) != 2 :
			 (sscanf(str, "%d:%d%n", &rank, &ms, &used) != 2 || rank < 0)) ||
			str[used] != '\0' || ms < 1 || ms > 60000 || !(p > 0 && p <= 1))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"straggler\" must look like \"rank:milliseconds\" or \"*:milliseconds:probability\""),
					 errhint("\"1:5\" delays worker 1 by 5 ms every step; \"*:5:0.25\" delays each worker by 5 ms in a quarter of its steps.")));
		job->straggler = str;
		return;
	}
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unrecognized option \"%s\"", key),
			 errhint("Valid options are momentum, nesterov, beta1, beta2, eps, schedule, step_size, gamma, tolerance, max_restarts, checkpoint_every, epoch_timeout, in_server, load, shared_memory, rank_deficient, memory, window, spill, fault and straggler.")));
}

static void
apply_options(DmlJob *job, Jsonb *options)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *key = NULL;

	if (options == NULL)
		return;
	if (!JB_ROOT_IS_OBJECT(options))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("options must be a JSON object")));
	it = JsonbIteratorInit(&options->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
			key = pnstrdup(v.val.string.val, v.val.string.len);
		else if (tok == WJB_VALUE)
			apply_option(job, key, &v);
	}
}

/* ---------------------------------------------------------------------
 * Columns
 * --------------------------------------------------------------------- */

/* attribute of relid by name, with SELECT checked for the caller */
static void
resolve_column(Oid relid, const char *name, DmlColumn *col, const char *what)
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
static char *
rel_sql_name(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

/* Run a query returning one text column; returns the list of values */
static List *
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
prepare_feature(Oid relid, DmlColumn *col)
{
	const char *qcol = quote_identifier(col->name);
	char	   *rel = rel_sql_name(relid);

	if (type_is_numeric(col->typid))
	{
		col->kind = DML_COL_NUM;
		col->width = 1;
		col->expr = psprintf("%s::float8", qcol);
	}
	else if (col->typid == BOOLOID)
	{
		col->kind = DML_COL_NUM;
		col->width = 1;
		col->expr = psprintf("%s::int4::float8", qcol);
	}
	else if (type_is_vector(col->typid))
	{
		List	   *w;

		col->kind = DML_COL_VEC;
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
		col->kind = DML_COL_CAT;
		col->expr = psprintf("%s::text", qcol);
		col->vocab = spi_text_column(psprintf("SELECT v FROM (SELECT DISTINCT %s::text AS v FROM %s "
											  "WHERE %s IS NOT NULL) s ORDER BY v COLLATE \"C\"",
											  qcol, rel, qcol), DML_MAX_LEVELS + 1);
		if (list_length(col->vocab) > DML_MAX_LEVELS)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("column \"%s\" has more than %d distinct values", col->name, DML_MAX_LEVELS),
					 errhint("One-hot encoding is for categories; leave this column out of features.")));
		col->width = Max(list_length(col->vocab), 1);
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

/* ---------------------------------------------------------------------
 * Model kind and labels
 * --------------------------------------------------------------------- */

/* Distinct labels of the target, in the type's order, as text */
static List *
target_classes(Oid relid, DmlColumn *target, int limit)
{
	const char *qcol = quote_identifier(target->name);

	return spi_text_column(psprintf("SELECT s.v::text FROM (SELECT DISTINCT %s AS v FROM %s "
									"WHERE %s IS NOT NULL) s ORDER BY s.v",
									qcol, rel_sql_name(relid), qcol), limit);
}

/*
 * The target's labels, checked: at least 2, at most DML_MAX_CLASSES, and 2
 * for logistic regression; then the kind, loss and outputs they imply.
 * The list comes from SQL, or from the workers (discover_classes).
 */
static void
set_classes(DmlJob *job, List *classes)
{
	int			n = list_length(classes);

	if (n > DML_MAX_CLASSES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("target column \"%s\" has more than %d distinct labels",
						job->target.name, DML_MAX_CLASSES)));
	if (n < 2)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("target column \"%s\" has %d distinct label%s; classification needs at least 2",
						job->target.name, n, n == 1 ? "" : "s"),
				 n == 0 ?
				 errhint("The relation has no rows with a non-NULL target.") :
				 errhint("A model cannot learn from a single class.")));
	if (job->kind != NULL && strcmp(job->kind, "logistic") == 0 && n != 2)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("logistic regression needs 2 labels, but column \"%s\" has %d",
						job->target.name, n),
				 errhint("Use model => 'softmax' for more than two classes.")));
	job->classes = classes;
	if (job->kind == NULL)
		job->kind = n == 2 ? "logistic" : "softmax";
	job->loss = n == 2 && strcmp(job->kind, "softmax") != 0 ? "bce" : "softmax";
	job->noutputs = strcmp(job->loss, "bce") == 0 ? 1 : n;
}

/* settle kind, loss, outputs and classes */
static void
choose_kind(DmlJob *job, const char *model, const char *optimizer)
{
	Oid			t = job->target.typid;
	bool		numeric = type_is_numeric(t);
	bool		labelish = t == BOOLOID || type_is_integer(t) || type_is_text(t);

	if (!numeric && !labelish)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("target column \"%s\" has type %s", job->target.name, format_type_be(t)),
				 errhint("The target must be a number (regression) or a boolean, integer, text or enum label (classification).")));

	if (strcmp(model, "linear") == 0)
	{
		if (!numeric)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("linear regression needs a numeric target, but column \"%s\" has type %s",
							job->target.name, format_type_be(t)),
					 errhint("Use model => 'logistic' or 'softmax' to classify, or 'auto'.")));
		job->kind = "linear";
	}
	else if (strcmp(model, "logistic") == 0 || strcmp(model, "softmax") == 0)
	{
		if (!labelish)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("%s regression needs a label target, but column \"%s\" has type %s",
							model, job->target.name, format_type_be(t)),
					 errhint("Labels may be booleans, integers, text or enums.")));
		job->kind = pstrdup(model);
	}
	else if (strcmp(model, "mlp") == 0)
		job->kind = "mlp";
	else if (strcmp(model, "auto") == 0)
		job->kind = NULL;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown model kind \"%s\"", model),
				 errhint("Valid kinds are linear, logistic, softmax, mlp and auto.")));

	/* classification or regression */
	if (job->kind != NULL && strcmp(job->kind, "linear") == 0)
		job->classification = false;
	else if (job->kind != NULL && strcmp(job->kind, "mlp") != 0)
		job->classification = true;
	else if (t == BOOLOID || type_is_text(t))
		job->classification = true;
	else if (type_is_integer(t))
	{
		List	   *c = target_classes(job->relid, &job->target, DML_AUTO_MAX_CLASSES + 1);

		job->classification = list_length(c) <= DML_AUTO_MAX_CLASSES;
	}
	else
		job->classification = false;

	if (job->classification)
	{
		job->target.expr = psprintf("%s::text", quote_identifier(job->target.name));
		if (t == BOOLOID)
			job->label_keys = "bool";
		else if (type_is_integer(t))
			job->label_keys = "int";
		if (job->label_keys && job->kind != NULL &&
			(strcmp(job->kind, "logistic") == 0 ||
			 (strcmp(job->kind, "softmax") == 0 && optimizer != NULL && strcmp(optimizer, "newton") != 0)))
		{
			/*
			 * Integer or boolean labels of a model whose shape does not
			 * depend on how many there are (logistic has 2, or the
			 * optimizer is named): the workers list them while they load,
			 * which spares a scan of the table here (set_classes checks
			 * their list when it comes back).
			 */
			job->discover_classes = true;
			job->loss = strcmp(job->kind, "logistic") == 0 ? "bce" : "softmax";
			job->noutputs = strcmp(job->kind, "logistic") == 0 ? 1 : 0;
		}
		else
			set_classes(job, target_classes(job->relid, &job->target, DML_MAX_CLASSES + 1));
	}
	else
	{
		if (!numeric)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("regression needs a numeric target, but column \"%s\" has type %s",
							job->target.name, format_type_be(t))));
		if (job->kind == NULL)
			job->kind = "linear";
		job->target.expr = psprintf("%s::float8", quote_identifier(job->target.name));
		job->loss = "mse";
		job->noutputs = 1;
	}
	job->label_type = t;
}

/*
 * All-numeric jobs (numbers and booleans in, a number or an integer or
 * boolean label out) load through dml.pack_rows: one block per slice
 * instead of a COPY row per row.  Text and enum labels, one-hot and array
 * features keep the COPY path.
 */
static void
choose_packing(DmlJob *job)
{
	ListCell   *lc;
	const char *qcol = quote_identifier(job->target.name);

	job->pack_target = NULL;
	/* exact least squares and Newton's logistic read float64 rows: dml.pack_rows64 */
	job->pack_wide = (job->optimizer == DML_JOB_OPT_EXACT && !job->classification) ||
		(job->optimizer == DML_JOB_OPT_NEWTON && strcmp(job->loss, "bce") == 0);
	if (job->load_copy)
		return;
	/* dml.pack_rows takes its state, the target and the features as arguments */
	if (list_length(job->features) + 2 > FUNC_MAX_ARGS)
		return;
	foreach(lc, job->features)
		if (((DmlColumn *) lfirst(lc))->kind != DML_COL_NUM)
			return;
	if (!job->classification)
		job->pack_target = psprintf("%s::float8", qcol);
	else if (job->label_keys == NULL)
		return;					/* text or enum labels */
	else if (strcmp(job->label_keys, "bool") == 0)
		job->pack_target = psprintf("%s::int4::int8", qcol);
	else
		job->pack_target = psprintf("%s::int8", qcol);
}

/* ---------------------------------------------------------------------
 * Hosts
 * --------------------------------------------------------------------- */

/* dml_train's hosts: names, each once (checked against dml.hosts at launch) */
static List *
host_names(ArrayType *arr)
{
	Datum	   *elems;
	bool	   *enulls;
	int			n;
	List	   *names = NIL;

	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &enulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("hosts must name at least one host")));
	for (int i = 0; i < n; i++)
	{
		char	   *name;

		if (enulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("hosts must not contain NULL")));
		name = TextDatumGetCString(elems[i]);
		for (int j = 0; j < i; j++)
			if (strcmp(name, TextDatumGetCString(elems[j])) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("host \"%s\" is named twice in hosts", name)));
		names = lappend(names, name);
	}
	return names;
}

/* ---------------------------------------------------------------------
 * Progress and results
 * --------------------------------------------------------------------- */

typedef struct TrainProgress
{
	int64		model_id;
	bool		classification;
	bool		staleness;		/* the sync mode records staleness */
	DmlJob	   *job;			/* its rank_hosts */
} TrainProgress;

/* one NOTICE and one dml.epochs row per epoch */
static void
on_progress(const DmlProgress *p, void *arg)
{
	TrainProgress *tp = arg;
	double		secs = p->train_seconds > 0 ? p->train_seconds : p->seconds;
	double		rps = secs > 0 ? p->rows / secs : 0;

	char	   *stale = tp->staleness && !isnan(p->staleness) ?
		psprintf(", staleness %.0f", p->staleness) : "";

	if (isnan(p->val_loss))
		ereport(NOTICE,
				(errmsg("epoch %d: loss %.6g, %.0f rows/s%s", p->epoch, p->loss, rps, stale)));
	else
		ereport(NOTICE,
				(errmsg("epoch %d: loss %.6g, validation loss %.6g, validation %s %.4f, %.0f rows/s%s",
						p->epoch, p->loss, p->val_loss,
						tp->classification ? "accuracy" : "R2", p->val_metric, rps, stale)));
	DmlStoreEpoch(tp->model_id, p->restarts, p->epoch, p->loss, p->val_loss,
				  p->val_metric, rps, p->seconds, p->bytes_sent, p->bytes_across,
				  tp->staleness ? p->staleness : NAN, tp->job->rank_hosts);
	DmlProgressEpoch(p, rps);
}

/* JSON string, escaped */
static void
json_str(StringInfo buf, const char *s)
{
	escape_json(buf, s);
}

/* the spec jsonb: features, encodings, standardization, classes, settings */
static char *
spec_json(DmlJob *job, const DmlModel *m)
{
	StringInfoData buf;
	ListCell   *lc;
	int			pos = 0;
	bool		first = true;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"relation\": ");
	json_str(&buf, rel_sql_name(job->relid));
	appendStringInfoString(&buf, ", \"target\": ");
	json_str(&buf, job->target.name);
	appendStringInfo(&buf, ", \"target_type\": ");
	json_str(&buf, format_type_be(job->label_type));
	appendStringInfo(&buf, ", \"label_type\": %u", job->label_type);
	appendStringInfoString(&buf, ", \"features\": [");
	foreach(lc, job->features)
	{
		DmlColumn  *col = lfirst(lc);

		appendStringInfoString(&buf, first ? "{" : ", {");
		first = false;
		appendStringInfoString(&buf, "\"name\": ");
		json_str(&buf, col->name);
		appendStringInfo(&buf, ", \"kind\": \"%s\", \"width\": %d",
						 col->kind == DML_COL_NUM ? "num" : col->kind == DML_COL_VEC ? "vec" : "cat",
						 col->width);
		if (col->kind == DML_COL_NUM && m != NULL)
			appendStringInfo(&buf, ", \"mean\": %.9g, \"std\": %.9g",
							 m->in_mean[pos], m->in_scale[pos] > 0 ? 1.0 / m->in_scale[pos] : 0.0);
		if (col->kind == DML_COL_CAT)
		{
			ListCell   *lv;
			bool		f2 = true;

			appendStringInfoString(&buf, ", \"levels\": [");
			foreach(lv, col->vocab)
			{
				if (!f2)
					appendStringInfoString(&buf, ", ");
				f2 = false;
				json_str(&buf, lfirst(lv));
			}
			appendStringInfoChar(&buf, ']');
		}
		appendStringInfoChar(&buf, '}');
		pos += col->width;
	}
	appendStringInfoString(&buf, "]");
	if (job->classification)
	{
		appendStringInfoString(&buf, ", \"classes\": [");
		first = true;
		foreach(lc, job->classes)
		{
			if (!first)
				appendStringInfoString(&buf, ", ");
			first = false;
			json_str(&buf, lfirst(lc));
		}
		appendStringInfoChar(&buf, ']');
	}
	else
		appendStringInfoString(&buf, ", \"classes\": null");
	appendStringInfo(&buf, ", \"inputs\": %d, \"outputs\": %d, \"loss\": \"%s\"",
					 job->ninputs, job->noutputs, job->loss);
	appendStringInfoString(&buf, ", \"hidden\": [");
	for (int i = 0; i < job->nhidden; i++)
		appendStringInfo(&buf, "%s%d", i ? ", " : "", job->hidden[i]);
	appendStringInfo(&buf, "], \"activation\": \"%s\"", job->activation);

	/* linear regression: coefficients in the data's own units */
	if (m != NULL && strcmp(job->kind, "linear") == 0 && m->net.nlayers == 1)
	{
		const float *w = m->net.params;
		double		b = m->net.params[job->ninputs];
		double		ys = m->out_scale[0];

		appendStringInfoString(&buf, ", \"coefficients\": [");
		for (int c = 0; c < job->ninputs; c++)
		{
			double		coef = w[c] * m->in_scale[c] * ys;

			b -= w[c] * m->in_scale[c] * m->in_mean[c];
			appendStringInfo(&buf, "%s%.9g", c ? ", " : "", coef);
		}
		appendStringInfo(&buf, "], \"intercept\": %.9g", b * ys + m->out_mean[0]);
	}
	/* the settings jobspec.h's table marks as stored */
	appendStringInfo(&buf, ", \"hyperparameters\": {\"workers\": %d", job->workers);
#define JSON_INT(name, names) appendStringInfo(&buf, ", \"" #name "\": %d", job->name)
#define JSON_DBL(name, names) appendStringInfo(&buf, ", \"" #name "\": %.9g", job->name)
#define JSON_I64(name, names) appendStringInfo(&buf, ", \"" #name "\": " INT64_FORMAT, job->name)
#define JSON_STR(name, names) (appendStringInfoString(&buf, ", \"" #name "\": "), json_str(&buf, job->name))
#define JSON_OPT(name, names) do { if (job->name) JSON_STR(name, names); } while (0)
#define JSON_ENUM(name, names) \
	(appendStringInfoString(&buf, ", \"" #name "\": "), json_str(&buf, dml_job_name(names, job->name)))
#define JSON(type, name, stored, names) if (stored) JSON_##type(name, names);
	DML_JOB_SETTINGS(JSON)
#undef JSON
#undef JSON_INT
#undef JSON_DBL
#undef JSON_I64
#undef JSON_STR
#undef JSON_OPT
#undef JSON_ENUM
	appendStringInfoChar(&buf, '}');
	appendStringInfoString(&buf, ", \"snapshot\": ");
	json_str(&buf, job->snapshot);
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/*
 * Numeric features that were constant over the training rows: the workers
 * standardized them to zero (scale 0), so they add nothing to the model.
 * Named in a NOTICE and in the metrics (constant_features); returns the
 * metrics with that member added.
 */
static char *
note_constant_features(DmlJob *job, const DmlModel *m, char *metrics)
{
	StringInfoData names;
	StringInfoData json;
	ListCell   *lc;
	int			pos = 0;
	int			count = 0;
	size_t		len = strlen(metrics);

	initStringInfo(&names);
	initStringInfo(&json);
	foreach(lc, job->features)
	{
		DmlColumn  *col = lfirst(lc);

		if (col->kind == DML_COL_NUM && m->in_scale[pos] == 0)
		{
			appendStringInfo(&names, "%s%s", count ? ", " : "", quote_identifier(col->name));
			appendStringInfoString(&json, count ? ", " : "");
			escape_json(&json, col->name);
			count++;
		}
		pos += col->width;
	}
	if (count == 0 || len < 2 || metrics[len - 1] != '}')
		return metrics;
	ereport(NOTICE,
			(errmsg("%d feature%s constant in every training row, so left out of the model: %s",
					count, count == 1 ? " is" : "s are", names.data)));
	return psprintf("%.*s, \"constant_features\": [%s]}", (int) len - 1, metrics, json.data);
}

/* ---------------------------------------------------------------------
 * dml_train
 * --------------------------------------------------------------------- */

/*
 * The synchronization arguments (sync, servers, staleness, average_every,
 * compression, topk_ratio), checked against each other and the optimizer.
 */
static void
choose_sync(DmlJob *job, FunctionCallInfo fcinfo)
{
	bool		ps;
	bool		iterative = job->optimizer != DML_JOB_OPT_EXACT &&
		job->optimizer != DML_JOB_OPT_NEWTON && job->optimizer != DML_JOB_OPT_LBFGS;
	const char *sync = PG_ARGISNULL(19) ? "allreduce" : arg_text(fcinfo, 19);

	job->sync = job_choice(DML_NAMES_SYNC, sync, "sync mode",
						   "Valid modes are allreduce, ps, ssp, async, gossip and average.");
	ps = job->sync == DML_SYNC_PS || job->sync == DML_SYNC_SSP || job->sync == DML_SYNC_ASYNC;

	if (PG_ARGISNULL(20))
		job->servers = ps ? 1 : 0;
	else
	{
		job->servers = PG_GETARG_INT32(20);
		if (!ps && job->servers != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("servers apply to sync modes ps, ssp and async only"),
					 errhint("Use sync => 'ps', for example, together with servers.")));
		if (ps && (job->servers < 1 || job->servers > dml_max_workers))
			range_error("servers", psprintf("A parameter-server job has 1 to %d servers (dml.max_workers).",
											dml_max_workers));
	}

	job->staleness = PG_ARGISNULL(21) ? 0 : PG_GETARG_INT32(21);
	if (job->staleness < 0 || job->staleness > 100)
		range_error("staleness", "It is the clocks a worker may run ahead, 0 to 100.");
	if (job->staleness != 0 && job->sync != DML_SYNC_SSP)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("staleness applies to sync => 'ssp' only")));

	job->average_every = PG_ARGISNULL(22) ? 1 : PG_GETARG_INT32(22);
	if (job->average_every < 1 || job->average_every > 1000000)
		range_error("average_every", "It is the steps between model averagings, at least 1.");
	if (job->average_every != 1 && job->sync != DML_SYNC_AVERAGE)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("average_every applies to sync => 'average' only")));

	job->compression = job_choice(DML_NAMES_COMPRESSION,
								  PG_ARGISNULL(23) ? "none" : arg_text(fcinfo, 23), "compression",
								  "Valid compressions are none, fp16 and topk.");
	if (job->compression != DML_COMPRESS_NONE &&
		(job->sync == DML_SYNC_GOSSIP || job->sync == DML_SYNC_AVERAGE))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("compression applies to gradients: sync modes allreduce, ps, ssp and async"),
				 errhint("gossip and average exchange the parameters themselves, uncompressed.")));
	job->topk_ratio = PG_ARGISNULL(24) ? 0.01 : PG_GETARG_FLOAT8(24);
	if (!(job->topk_ratio > 0 && job->topk_ratio <= 1))
		range_error("topk_ratio", "It is the fraction of gradient values sent, greater than 0 and at most 1.");

	if (!iterative && (job->sync != DML_SYNC_ALLREDUCE || job->compression != DML_COMPRESS_NONE))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("optimizer \"%s\" takes one all-reduce per pass: sync modes and compression apply to iterative optimizers",
						dml_job_name(DML_NAMES_OPTIMIZER, job->optimizer)),
				 errhint("Use optimizer => 'sgd', 'momentum' or 'adam' with sync => '%s'.", sync)));
	if (job->device == DML_DEVICE_GPU &&
		(job->sync != DML_SYNC_ALLREDUCE || job->compression != DML_COMPRESS_NONE))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("GPU training synchronizes by NCCL all-reduce, uncompressed"),
				 errhint("Use device => 'cpu' or 'auto' with sync => '%s' or compression.", sync)));
}

/*
 * A model's parameters within dml.max_model_parameters, before anything
 * starts: every rank holds them, their gradients and the optimizer's state.
 */
static void
check_model_size(DmlJob *job)
{
	double		params = 0;
	int			in = job->ninputs;

	for (int i = 0; i < job->nhidden; i++)
	{
		params += ((double) in + 1) * job->hidden[i];
		in = job->hidden[i];
	}
	params += ((double) in + 1) * job->noutputs;
	if (params > dml_max_model_parameters)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("model would have %.0f parameters, more than dml.max_model_parameters (%d)",
						params, dml_max_model_parameters),
				 errdetail("Each worker holds the parameters, their gradients and the optimizer's state: about %.0f MB.",
						   params * 16 / 1e6),
				 errhint("Use fewer or smaller hidden layers; a superuser can raise dml.max_model_parameters.")));
}


/* rows of the relation, counted up to limit (a bounded scan) */
static int64
count_rows_upto(Oid relid, int64 limit)
{
	if (SPI_execute(psprintf("SELECT count(*) FROM (SELECT FROM %s LIMIT " INT64_FORMAT ") s",
							 rel_sql_name(relid), limit), true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "dml: counting the rows failed");
	return pg_strtoint64(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
}

/*
 * The defaults that depend on the kind of model and the size of the data:
 * the optimizer, learning rate, epochs (or the convergence budget),
 * patience, tolerance and weight_decay.
 */
static void
choose_optimizer(DmlJob *job, const char *optimizer, FunctionCallInfo fcinfo)
{
	bool		linear = strcmp(job->kind, "linear") == 0;
	bool		glm = strcmp(job->kind, "logistic") == 0 || strcmp(job->kind, "softmax") == 0;
	int			nparams = (job->ninputs + 1) * job->noutputs;
	int64		rows = count_rows_upto(job->relid, DML_COUNT_LIMIT);
	bool		auto_epochs = PG_ARGISNULL(10);

	job->rows = rows;
	if (optimizer == NULL)
	{
		bool		small = (double) rows * job->ninputs <= DML_FIT_MAX_VALUES;
		/* a learning rate or batch size asks for minibatches */
		bool		minibatch = !PG_ARGISNULL(8) || !PG_ARGISNULL(9);

		if (linear && job->ninputs <= DML_EXACT_MAX_INPUTS)
			optimizer = "exact";
		else if (glm && nparams <= DML_NEWTON_MAX_PARAMS && !small)
			optimizer = "newton";
		else if (!minibatch && (linear || glm || rows <= DML_LBFGS_MAX_ROWS))
			optimizer = "lbfgs";
		else
			optimizer = "adam";
	}
	job->optimizer = job_choice(DML_NAMES_OPTIMIZER, optimizer, "optimizer",
								"Valid optimizers are sgd, momentum, nesterov, adam, lbfgs, exact and newton.");
	if (job->optimizer == DML_JOB_OPT_EXACT && !linear)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("optimizer \"exact\" solves linear regression only"),
				 errhint("Use optimizer => 'newton' or 'lbfgs' for logistic and softmax regression.")));
	if (job->optimizer == DML_JOB_OPT_NEWTON && !glm)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("optimizer \"newton\" fits logistic and softmax regression only"),
				 errhint("Use optimizer => 'exact' for linear regression.")));
	if (job->optimizer == DML_JOB_OPT_NEWTON && nparams > 4096)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("Newton's method needs a %d x %d Hessian, more than this build allows (4096)",
						nparams, nparams),
				 errhint("Use optimizer => 'lbfgs'.")));

	if (PG_ARGISNULL(8))
		job->learning_rate = job->optimizer == DML_JOB_OPT_ADAM ? 0.001 :
			job->optimizer == DML_JOB_OPT_SGD ? 0.1 : 0.05;

	/* explicit epochs mean exactly that many; else run to convergence */
	job->max_steps = 0;
	if (job->optimizer == DML_JOB_OPT_EXACT)
		job->tolerance = 1e-8;
	else if (job->optimizer == DML_JOB_OPT_NEWTON)
		job->tolerance = 1e-8;	/* relative decrease of the loss */
	else
		job->tolerance = DML_DEFAULT_TOLERANCE;	/* L-BFGS: largest gradient entry */
	if (!auto_epochs)
		;
	else if (job->optimizer == DML_JOB_OPT_EXACT)
		job->epochs = 1;
	else if (job->optimizer == DML_JOB_OPT_NEWTON)
		job->epochs = DML_DEFAULT_NEWTON_ITERS;
	else if (job->optimizer == DML_JOB_OPT_LBFGS)
		job->epochs = DML_DEFAULT_LBFGS_ITERS * (strcmp(job->kind, "mlp") == 0 ? 2 : 1);
	else
	{
		job->epochs = DML_DEFAULT_MAX_EPOCHS;
		job->max_steps = DML_DEFAULT_MAX_STEPS;
	}
	/*
	 * Minibatch training without epochs holds out DML_DEFAULT_VALIDATION of
	 * the rows and stops on their loss (scikit-learn's early_stopping
	 * fraction): on Fashion-MNIST's MLP that stopped at epoch 23 with 0.876
	 * test accuracy in 14 s, where the training loss ran the step budget
	 * out (170 epochs, 27 s) and overfitted to 0.866.
	 */
	if (PG_ARGISNULL(12) && auto_epochs && job->optimizer != DML_JOB_OPT_EXACT &&
		job->optimizer != DML_JOB_OPT_NEWTON && job->optimizer != DML_JOB_OPT_LBFGS)
		job->validation = DML_DEFAULT_VALIDATION;
	/* patience: on the validation loss, else (minibatch, no epochs) the training loss */
	if (PG_ARGISNULL(13))
		job->patience = auto_epochs &&
			(job->validation > 0 || (job->optimizer != DML_JOB_OPT_EXACT &&
									 job->optimizer != DML_JOB_OPT_NEWTON &&
									 job->optimizer != DML_JOB_OPT_LBFGS)) ?
			DML_DEFAULT_PATIENCE : 0;

	/*
	 * weight_decay: for logistic and softmax regression 0.1 / rows, which
	 * is scikit-learn's LogisticRegression with C = 10 (its penalty is the
	 * squared weights over 2C beside the summed loss; ours weight_decay / 2
	 * beside the mean loss).  Its default C = 1 acts on raw features; on
	 * standardized ones (ours) C = 1 cost a test row of iris in the dataset
	 * battery and C = 10 none elsewhere (bench/datasets.py).  A penalty
	 * keeps a separable problem's weights finite.  None for linear
	 * regression and MLPs (scikit-learn's LinearRegression; MLPClassifier's
	 * alpha 1e-4 is divided by the rows).  Spark's regParam defaults to 0.
	 */
	if (PG_ARGISNULL(11))
		job->weight_decay = glm && (job->optimizer == DML_JOB_OPT_NEWTON ||
									job->optimizer == DML_JOB_OPT_LBFGS) ?
			DML_DEFAULT_GLM_PENALTY / (double) Max(rows, 1) : 0;
}

PG_FUNCTION_INFO_V1(dml_train);

Datum
dml_train(PG_FUNCTION_ARGS)
{
	DmlJob	   *job = palloc0(sizeof(DmlJob));
	DmlJobResult result;
	TrainProgress tp;
	char	   *model;
	char	   *optimizer;
	List	   *feature_names = NIL;
	ListCell   *lc;
	TupleDesc	tupdesc;
	Datum		values[11];
	bool		nulls[11] = {0};
	const char *stopped;
	int64		model_id;
	int			version;
	DmlModel	parsed;
	char		errbuf[256];
	char		relkind;
	char	   *spec;
	bool		in_server;
	bool		fit_in_server;
	Oid			owner;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "dml_train must return a composite type");
	DmlCheckWritable("train a model");

	/* name, relation, target */
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("name, relation and target must not be NULL")));
	job->name = arg_text(fcinfo, 0);
	if (strlen(job->name) < 1 || strlen(job->name) > 200)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("model name must have 1 to 200 characters")));
	job->relid = PG_GETARG_OID(1);
	relkind = get_rel_relkind(job->relid);
	if (relkind == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", job->relid)));
	if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE &&
		relkind != RELKIND_VIEW && relkind != RELKIND_MATVIEW &&
		relkind != RELKIND_FOREIGN_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table, view or materialized view",
						get_rel_name(job->relid))));
	job->relkind = relkind;

	resolve_column(job->relid, arg_text(fcinfo, 2), &job->target, "target");

	/* hyperparameters */
	model = PG_ARGISNULL(4) ? "auto" : arg_text(fcinfo, 4);
	optimizer = arg_text(fcinfo, 7);
	job->activation = PG_ARGISNULL(6) ? "relu" : arg_text(fcinfo, 6);
	if (dml_act_parse(job->activation) < 0 || strcmp(job->activation, "identity") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown activation \"%s\"", job->activation),
				 errhint("Valid activations are relu, tanh and sigmoid.")));
	job->learning_rate = PG_ARGISNULL(8) ? 0 : PG_GETARG_FLOAT8(8);
	if (!PG_ARGISNULL(8) && !(job->learning_rate > 0 && job->learning_rate <= 100))
		range_error("learning_rate", "It must be greater than 0 and at most 100.");
	job->batch_size = PG_ARGISNULL(9) ? DML_DEFAULT_BATCH : PG_GETARG_INT32(9);
	if (job->batch_size < 1 || job->batch_size > DML_MAX_BATCH)
		range_error("batch_size", psprintf("It must be between 1 and %d rows per worker.", DML_MAX_BATCH));
	job->epochs = PG_ARGISNULL(10) ? 0 : PG_GETARG_INT32(10);
	if (!PG_ARGISNULL(10) && (job->epochs < 1 || job->epochs > DML_MAX_EPOCHS))
		range_error("epochs", psprintf("It must be between 1 and %d.", DML_MAX_EPOCHS));
	job->weight_decay = PG_ARGISNULL(11) ? 0 : PG_GETARG_FLOAT8(11);	/* NULL: choose_optimizer */
	if (!(job->weight_decay >= 0 && job->weight_decay <= 1e6))
		range_error("weight_decay", "It must be between 0 and 1e6.");
	job->validation = PG_ARGISNULL(12) ? 0 : PG_GETARG_FLOAT8(12);
	if (!(job->validation >= 0 && job->validation <= 0.9))
		range_error("validation", "It is the fraction of rows held out, between 0 and 0.9.");
	job->patience = PG_ARGISNULL(13) ? 0 : PG_GETARG_INT32(13);	/* NULL: choose_optimizer */
	if (job->patience < 0)
		range_error("patience", "It must be 0 (no early stopping) or more epochs.");
	job->nulls = job_choice(DML_NAMES_NULLS, PG_ARGISNULL(14) ? "error" : arg_text(fcinfo, 14),
							"NULL policy", "Valid policies are error, skip and impute.");
	job->workers = PG_ARGISNULL(15) ? dml_workers : PG_GETARG_INT32(15);
	if (job->workers < 1)
		range_error("workers", "A job needs at least 1 worker.");
	if (job->workers > dml_max_workers)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("workers is out of range"),
				 errdetail("%d workers were asked for; dml.max_workers is %d.",
						   job->workers, dml_max_workers),
				 errhint("A superuser can raise dml.max_workers.")));
	/* 26 hosts: a subset of dml.hosts for this job */
	job->host_names = PG_NARGS() > 26 && !PG_ARGISNULL(26) ? host_names(PG_GETARG_ARRAYTYPE_P(26)) : NIL;
	job->device = job_choice(DML_NAMES_DEVICE, PG_ARGISNULL(16) ? dml_device : arg_text(fcinfo, 16),
							 "device", "Valid devices are auto, cpu and gpu.");
	job->seed = PG_ARGISNULL(17) ? 42 : PG_GETARG_INT64(17);
	/* 24 topk_ratio (choose_sync), 25 max_seconds: a time budget, NULL for none */
	job->max_seconds = PG_NARGS() > 25 && !PG_ARGISNULL(25) ? PG_GETARG_FLOAT8(25) : 0;
	if (PG_NARGS() > 25 && !PG_ARGISNULL(25) &&
		!(job->max_seconds > 0 && job->max_seconds <= DML_MAX_SECONDS_MAX))
		range_error("max_seconds", "It is the seconds training may take, greater than 0 and at most a year.");
	job->momentum = 0.9;
	job->beta1 = 0.9;
	job->beta2 = 0.999;
	job->eps = 1e-8;
	job->schedule = DML_SCHED_CONSTANT;
	job->step_size = 10;
	job->gamma = 0.1;
	job->tolerance = 1e-8;
	job->max_restarts = dml_max_restarts;
	job->checkpoint_every = dml_checkpoint_every;
	job->memory = (int64) dml_worker_memory * 1024;
	job->window = DML_WINDOW_DEFAULT;
	job->spill_limit = dml_spill_limit < 0 ? 0 : (int64) dml_spill_limit * 1024;

	SPI_connect();

	/* features */
	if (PG_ARGISNULL(3))
		feature_names = default_features(job->relid, job->target.attnum);
	else
	{
		ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(3);
		Datum	   *elems;
		bool	   *enulls;
		int			n;

		deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &enulls, &n);
		for (int i = 0; i < n; i++)
		{
			if (enulls[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("features must not contain NULL")));
			feature_names = lappend(feature_names, TextDatumGetCString(elems[i]));
		}
	}
	if (feature_names == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no feature columns"),
				 errhint("Name the features, or give the relation numeric columns besides the target.")));
	foreach(lc, feature_names)
	{
		DmlColumn  *col = palloc0(sizeof(DmlColumn));
		ListCell   *lc2;

		resolve_column(job->relid, lfirst(lc), col, "feature");
		if (col->attnum == job->target.attnum)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("column \"%s\" is both the target and a feature", col->name)));
		foreach(lc2, job->features)
			if (((DmlColumn *) lfirst(lc2))->attnum == col->attnum)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("feature \"%s\" is listed twice", col->name)));
		job->features = lappend(job->features, col);
	}

	/* empty relation: say so before launching anything */
	if (SPI_execute(psprintf("SELECT 1 FROM %s LIMIT 1", rel_sql_name(job->relid)), true, 1) != SPI_OK_SELECT)
		elog(ERROR, "dml: probing the relation failed");
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("relation \"%s\" has no rows", get_rel_name(job->relid)),
				 errhint("Training needs data: load rows first, or check row-level security policies.")));

	choose_kind(job, model, optimizer);
	foreach(lc, job->features)
	{
		DmlColumn  *col = lfirst(lc);

		prepare_feature(job->relid, col);
		job->ninputs += col->width;
	}

	/* network shape */
	if (strcmp(job->kind, "mlp") == 0 || !PG_ARGISNULL(5))
	{
		if (strcmp(model, "auto") != 0 && strcmp(job->kind, "mlp") != 0 && !PG_ARGISNULL(5))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("hidden layers need model => 'mlp'")));
		if (PG_ARGISNULL(5))
		{
			job->nhidden = 1;
			job->hidden[0] = DML_DEFAULT_HIDDEN;
		}
		else
		{
			ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(5);
			Datum	   *elems;
			bool	   *enulls;
			int			n;

			deconstruct_array(arr, INT4OID, 4, true, TYPALIGN_INT, &elems, &enulls, &n);
			if (n < 1 || n > DML_MAX_LAYERS - 1)
				range_error("hidden", psprintf("An MLP has 1 to %d hidden layers.", DML_MAX_LAYERS - 1));
			for (int i = 0; i < n; i++)
			{
				if (enulls[i] || DatumGetInt32(elems[i]) < 1 || DatumGetInt32(elems[i]) > 16384)
					range_error("hidden", "Each hidden layer has 1 to 16384 units.");
				job->hidden[i] = DatumGetInt32(elems[i]);
			}
			job->nhidden = n;
		}
		job->kind = "mlp";
	}
	check_model_size(job);
	choose_optimizer(job, optimizer, fcinfo);
	apply_options(job, PG_ARGISNULL(18) ? NULL : PG_GETARG_JSONB_P(18));
	choose_sync(job, fcinfo);
	if (job->discover_classes && job->servers > 0)
	{
		/* parameter servers size the model before any data is read */
		job->discover_classes = false;
		set_classes(job, target_classes(job->relid, &job->target, DML_MAX_CLASSES + 1));
	}
	choose_packing(job);

	owner = DmlCheckNameForTraining(job->name);
	if (DmlTrainCheckOnly)
	{
		/* dml_train_async: the checks passed; the job does the rest */
		SPI_finish();
		PG_RETURN_NULL();
	}

	/* how to run it: one pass or a small fit in the server, or a job of workers */
	fit_in_server = DmlFitInServer(job);
	if (fit_in_server && job->discover_classes)
	{
		job->discover_classes = false;
		set_classes(job, target_classes(job->relid, &job->target, DML_MAX_CLASSES + 1));
	}
	in_server = fit_in_server || DmlExactInServer(job);
	DmlJobSetLaunch(job, !in_server,
					"dml_train in a subtransaction: workers read with a snapshot taken at job start");
	if (!in_server)
		job->slices = DmlPlanSlices(job->relid, job->relkind, job->workers,
									job->pack_target ? DML_SLICE_BLOCKS_PACKED : DML_SLICE_BLOCKS_COPY);

	model_id = DmlNextModelId();
	tp.model_id = model_id;
	tp.classification = job->classification;
	tp.staleness = job->servers > 0;
	tp.job = job;
	DmlProgressBegin(job, in_server);
	if (fit_in_server)
		DmlFitSolve(job, &result, on_progress, &tp);
	else if (in_server)
		DmlExactSolve(job, &result, on_progress, &tp);
	else
		DmlRunJob(job, &result, on_progress, &tp);
	if (job->discover_classes)
	{
		if (result.classes == NIL)
			elog(ERROR, "dml: the workers did not list the labels. Please report a bug.");
		set_classes(job, result.classes);
	}

	/* what came back must parse before it is stored */
	if (dml_model_parse(&parsed, (unsigned char *) VARDATA(result.weights),
						VARSIZE(result.weights) - VARHDRSZ, errbuf, sizeof(errbuf)) != DML_OK)
		elog(ERROR, "dml: worker sent a model that does not parse: %s. Please report a bug.", errbuf);
	for (size_t i = 0; i < parsed.net.nparams + 2 * (size_t) (job->ninputs + job->noutputs); i++)
		if (!isfinite(i < parsed.net.nparams ? parsed.net.params[i] :
					  i < parsed.net.nparams + job->ninputs ? parsed.in_mean[i - parsed.net.nparams] :
					  i < parsed.net.nparams + 2 * job->ninputs ? parsed.in_scale[i - parsed.net.nparams - job->ninputs] :
					  i < parsed.net.nparams + 2 * job->ninputs + job->noutputs ?
					  parsed.out_mean[i - parsed.net.nparams - 2 * job->ninputs] :
					  parsed.out_scale[i - parsed.net.nparams - 2 * job->ninputs - job->noutputs]))
			ereport(ERROR,
					(errcode(ERRCODE_FLOATING_POINT_EXCEPTION),
					 errmsg("training produced a model with non-finite weights"),
					 errhint("Lower learning_rate, or scale the data: float32 holds values up to about 3.4e38.")));
	if (parsed.net.sizes[0] != job->ninputs)
		elog(ERROR, "dml: worker model has %d inputs, expected %d. Please report a bug.",
			 parsed.net.sizes[0], job->ninputs);

	result.metrics_json = note_constant_features(job, &parsed, result.metrics_json);
	stopped = dml_stop_name(result.stopped);
	spec = spec_json(job, &parsed);
	version = DmlStoreModel(model_id, job->name, owner, job->kind, result.device, spec,
							result.weights, result.metrics_json);
	DmlMarkLastEpoch(model_id, stopped);
	dml_model_free(&parsed);
	DmlProgressEnd();

	/* the result row, in the caller's memory: SPI_finish frees what SPI allocated */
	{
		/* the result row lives in the caller's context, not SPI's */
		values[0] = Int64GetDatum(model_id);
		values[1] = SPI_datumTransfer(CStringGetTextDatum(job->name), false, -1);
		values[2] = Int32GetDatum(version);
		values[3] = Int32GetDatum(result.epochs_run);
		values[4] = Float8GetDatum(result.final_loss);
		values[5] = Float8GetDatum(result.seconds);
		values[6] = Float8GetDatum(result.rows_per_second);
		values[7] = Int32GetDatum(in_server ? 0 : job->workers);
		values[8] = SPI_datumTransfer(CStringGetTextDatum(result.device), false, -1);
		values[9] = SPI_datumTransfer(CStringGetTextDatum(job->kind), false, -1);
		values[10] = SPI_datumTransfer(CStringGetTextDatum(stopped), false, -1);
	}
	SPI_finish();
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}
