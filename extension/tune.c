/*-------------------------------------------------------------------------
 *
 * tune.c
 *	  dml_tune: model selection.  Many configurations of dml_train over the
 *	  same data, compared on a validation metric; every trial a row of
 *	  dml.trials, the best kept as the next version of the name and
 *	  deployed.
 *
 * search maps dml_train argument names to a list of values (grid) or to a
 * distribution ({"uniform": [a, b]}, {"log_uniform": [a, b]},
 * {"choice": [...]}) for random search.  It is parsed once, here, into
 * dimensions; every error in it is reported before anything trains.
 *
 * Strategies:
 *	 grid     every combination of the lists, in order (the last argument
 *	          varies fastest)
 *	 random   trials samples, drawn with pg_prng seeded by seed, so the
 *	          same seed gives the same search
 *	 halving  successive halving over epochs: every configuration trains
 *	          epochs / 2^k epochs, the better half goes on to twice as
 *	          many, until one has the full epochs; the others are "stopped
 *	          early".  A trial's last epoch of a rung is checkpointed
 *	          (checkpoint_last) and its next rung resumes from it, as a
 *	          background job resumes: the survivor's model is exactly
 *	          dml_train's at full epochs (same seed, same split), and a
 *	          search of 8 configurations at 5 epochs trains 8 + 3 + 3 = 14
 *	          epochs where a grid trains 40.  Trials fitted inside the
 *	          server send no checkpoint and start each rung over.
 *
 * Each trial is dml_train itself (called through its C entry, as a
 * background job does), in a subtransaction: a trial that fails (a model
 * that diverged to non-finite weights, an impossible combination) is
 * rolled back, recorded as failed, and the search goes on.  A query
 * cancel is not a failed trial: it ends the search.  The calling
 * transaction exports one snapshot before the first trial, and every
 * trial's workers read under it (DmlTuneSnapshot), so all trials see the
 * same rows.  Trials that read the same rows share one job of workers
 * (DmlTuneResident, coordinator/supervise.c): it loads and prepares them
 * once, and each trial's dml_train hands it its settings instead of
 * launching, so a search is one launch and one load.
 *
 * Every trial stores its model as a version while the search runs; at the
 * end the models not kept are deleted and the best one takes the next
 * version after those the name had, and is pinned (dml.deployments).
 *
 * Catalog SQL runs as the extension's owner (DmlOwnerQuery) with fully
 * qualified names.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/pg_prng.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "parser/parse_func.h"
#include "portability/instr_time.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "dml.h"
#include "jobs.h"

#define DML_TUNE_MAX_TRIALS	1000
#define DML_TUNE_RANDOM_TRIALS	10	/* random search without trials */
#define DML_TUNE_HALVING_TRIALS	8	/* halving over distributions without trials */
#define DML_TUNE_COLS		9

/* dml_train's argument positions used here (sql/dml.sql) */
#define TA_NAME			0
#define TA_MODEL		4
#define TA_HIDDEN		5
#define TA_ACTIVATION	6
#define TA_OPTIMIZER	7
#define TA_LR			8
#define TA_BATCH		9
#define TA_EPOCHS		10
#define TA_DECAY		11
#define TA_PATIENCE		13
#define TA_SEED			17
#define TA_TOPK			24
#define TA_CLASS_WEIGHT	27
#define TA_L1_RATIO		28

/* dml_tune's own arguments */
#define TU_SEARCH		5
#define TU_STRATEGY		6
#define TU_TRIALS		7
#define TU_METRIC		8
#define TU_KEEP			31

/* dml_tune's argument types, in order (sql/dml.sql) */
const Oid	DmlTuneArgTypes[DML_TUNE_NARGS] = {
	TEXTOID, REGCLASSOID, TEXTOID, TEXTARRAYOID, TEXTOID, JSONBOID, TEXTOID, INT4OID,
	TEXTOID, FLOAT8OID, INT4ARRAYOID, TEXTOID, TEXTOID, FLOAT8OID, INT4OID, INT4OID,
	FLOAT8OID, INT4OID, TEXTOID, INT4OID, TEXTOID, INT8OID, JSONBOID, TEXTOID,
	INT4OID, INT4OID, INT4OID, TEXTOID, FLOAT8OID, FLOAT8OID, TEXTARRAYOID, TEXTOID,
	TEXTOID, FLOAT8OID
};

/* dml_tune's argument i is dml_train's tune_to_train[i], or -1: its own */
static const int tune_to_train[DML_TUNE_NARGS] = {
	0, 1, 2, 3, 4,				/* name, relation, target, features, model */
	-1, -1, -1, -1,				/* search, strategy, trials, metric */
	12,							/* validation */
	5, 6, 7, 8, 9, 10, 11,		/* hidden .. weight_decay */
	13, 14, 15, 16, 17, 18,		/* patience .. options */
	19, 20, 21, 22, 23, 24, 25, 26,	/* sync .. hosts */
	-1,							/* keep */
	27, 28						/* class_weight, l1_ratio */
};

typedef enum TuneType
{
	TT_FLOAT,
	TT_INT,
	TT_TEXT,
	TT_INTS						/* an int4[] (hidden) */
} TuneType;

/* the dml_train arguments a search may vary */
static const struct
{
	const char *name;
	int			arg;			/* dml_train's position */
	TuneType	type;
}			searchable[] = {
	{"learning_rate", TA_LR, TT_FLOAT},
	{"weight_decay", TA_DECAY, TT_FLOAT},
	{"topk_ratio", TA_TOPK, TT_FLOAT},
	{"l1_ratio", TA_L1_RATIO, TT_FLOAT},
	{"batch_size", TA_BATCH, TT_INT},
	{"epochs", TA_EPOCHS, TT_INT},
	{"patience", TA_PATIENCE, TT_INT},
	{"hidden", TA_HIDDEN, TT_INTS},
	{"activation", TA_ACTIVATION, TT_TEXT},
	{"optimizer", TA_OPTIMIZER, TT_TEXT},
	{"model", TA_MODEL, TT_TEXT},
	{"class_weight", TA_CLASS_WEIGHT, TT_TEXT}
};

#define SEARCHABLE_HINT "Arguments a search may vary: learning_rate, weight_decay, topk_ratio, " \
	"l1_ratio, batch_size, epochs, patience, hidden, activation, optimizer, model and class_weight."

typedef enum TuneDist
{
	TD_LIST,					/* a list of values (grid), or choice */
	TD_UNIFORM,
	TD_LOG_UNIFORM
} TuneDist;

/* one value of an argument */
typedef struct TuneValue
{
	double		num;			/* TT_FLOAT, TT_INT */
	char	   *str;			/* TT_TEXT */
	int			nints;			/* TT_INTS */
	int			ints[16];
} TuneValue;

/* one argument of the search */
typedef struct TuneDim
{
	int			param;			/* index into searchable[] */
	TuneDist	dist;
	bool		choice;			/* {"choice": [...]}: random only */
	int			nvalues;
	TuneValue  *values;
	double		lo,
				hi;				/* uniform, log_uniform */
} TuneDim;

/* one trial: a value per dimension, then what came of it */
typedef struct TuneTrial
{
	int			number;			/* 1-based */
	TuneValue  *values;			/* [ndims] */
	char	   *args_json;		/* the values, as a JSON object */
	char	   *state;			/* finished, stopped early, failed */
	double		metric;			/* NaN: none */
	int			epochs;			/* run by its last rung */
	int			budget;			/* epochs given to its last rung (halving) */
	double		seconds;		/* all its rungs */
	int64		model_id;		/* its last rung's model, 0 for none */
	int			version;
	char	   *error;
	char	   *epoch_json;		/* its last rung's epochs */
	char	   *ckpt;			/* halving: its last epoch's checkpoint, for the next rung */
	uint32		ckpt_len;
} TuneTrial;

typedef struct TuneSearch
{
	int64		search_id;
	int			ndims;
	TuneDim    *dims;
	const char *metric;			/* NULL: accuracy or r2, by the model */
	bool		lower_better;
	int			ntrials;
	TuneTrial  *trials;
} TuneSearch;

/* ---------------------------------------------------------------------
 * Parsing search
 * --------------------------------------------------------------------- */

static void
search_error(const char *msg, const char *arg, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg(msg, arg),
			 hint ? errhint("%s", hint) : 0));
}

static double
jnum(JsonbValue *v)
{
	return DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(v->val.numeric)));
}

/* a JSON array's elements as JsonbValues */
static JsonbValue *
array_elems(JsonbValue *arr, int *n)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	JsonbValue *out;
	int			cap = 8;

	*n = 0;
	out = palloc(sizeof(JsonbValue) * cap);
	if (arr->type != jbvBinary)
		return out;
	it = JsonbIteratorInit(arr->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok != WJB_ELEM)
			continue;
		if (*n == cap)
			out = repalloc(out, sizeof(JsonbValue) * (cap *= 2));
		out[(*n)++] = v;
	}
	return out;
}

static bool
is_array(JsonbValue *v)
{
	return v->type == jbvBinary && JsonContainerIsArray(v->val.binary.data) &&
		!JsonContainerIsScalar(v->val.binary.data);
}

static bool
is_object(JsonbValue *v)
{
	return v->type == jbvBinary && JsonContainerIsObject(v->val.binary.data);
}

/* one value of argument p from JSON, checked for its type */
static TuneValue
parse_value(int p, JsonbValue *v)
{
	TuneValue	out;
	const char *name = searchable[p].name;

	memset(&out, 0, sizeof(out));
	switch (searchable[p].type)
	{
		case TT_FLOAT:
		case TT_INT:
			if (v->type != jbvNumeric)
				search_error("search values of \"%s\" must be numbers", name, NULL);
			out.num = jnum(v);
			if (searchable[p].type == TT_INT && (out.num != floor(out.num) || fabs(out.num) > INT_MAX))
				search_error("search values of \"%s\" must be integers", name, NULL);
			break;
		case TT_TEXT:
			if (v->type != jbvString)
				search_error("search values of \"%s\" must be strings", name, NULL);
			out.str = pnstrdup(v->val.string.val, v->val.string.len);
			break;
		case TT_INTS:
			{
				int			n = 0;
				JsonbValue *e;

				/* hidden: [64, 32] is one value; 64 means [64] */
				if (v->type == jbvNumeric)
				{
					e = v;
					n = 1;
				}
				else if (is_array(v))
					e = array_elems(v, &n);
				else
					e = NULL;
				if (e == NULL || n < 1 || n > 15)
					search_error("search values of \"%s\" must be arrays of 1 to 15 layer sizes",
								 name, "Each value is one network's hidden layers, as in {\"hidden\": [[64], [128, 64]]}.");
				for (int i = 0; i < n; i++)
				{
					if (e[i].type != jbvNumeric || jnum(&e[i]) != floor(jnum(&e[i])) ||
						jnum(&e[i]) < 1 || jnum(&e[i]) > 16384)
						search_error("search values of \"%s\" must be arrays of layer sizes from 1 to 16384",
									 name, NULL);
					out.ints[i] = (int) jnum(&e[i]);
				}
				out.nints = n;
			}
			break;
	}
	return out;
}

/* the values of a list (grid, or choice) */
static void
parse_list(TuneDim *d, JsonbValue *arr, const char *what)
{
	int			n;
	JsonbValue *e = array_elems(arr, &n);

	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("search %s for \"%s\" is empty", what, searchable[d->param].name),
				 errhint("Give at least one value.")));
	d->nvalues = n;
	d->values = palloc(sizeof(TuneValue) * n);
	for (int i = 0; i < n; i++)
		d->values[i] = parse_value(d->param, &e[i]);
}

/* {"uniform": [a, b]} and the others */
static void
parse_distribution(TuneDim *d, JsonbValue *obj)
{
	JsonbIterator *it = JsonbIteratorInit(obj->val.binary.data);
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *kind = NULL;
	int			nkeys = 0;
	const char *name = searchable[d->param].name;
	bool		numeric = searchable[d->param].type == TT_FLOAT || searchable[d->param].type == TT_INT;

	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
		{
			kind = pnstrdup(v.val.string.val, v.val.string.len);
			nkeys++;
			continue;
		}
		if (tok != WJB_VALUE || nkeys != 1)
			continue;
		if (strcmp(kind, "choice") == 0)
		{
			if (!is_array(&v))
				search_error("search distribution \"choice\" for \"%s\" must be a list of values", name, NULL);
			d->dist = TD_LIST;
			d->choice = true;
			parse_list(d, &v, "choice");
		}
		else if (strcmp(kind, "uniform") == 0 || strcmp(kind, "log_uniform") == 0)
		{
			int			n;
			JsonbValue *e;

			if (!numeric)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("search distribution \"%s\" needs a numeric argument, but \"%s\" is not numeric",
								kind, name),
						 errhint("Search \"%s\" with a list of values, or {\"choice\": [...]}.", name)));
			e = is_array(&v) ? array_elems(&v, &n) : (n = 0, NULL);
			if (n != 2 || e[0].type != jbvNumeric || e[1].type != jbvNumeric)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("search distribution \"%s\" for \"%s\" must be [low, high]", kind, name)));
			d->dist = strcmp(kind, "uniform") == 0 ? TD_UNIFORM : TD_LOG_UNIFORM;
			d->lo = jnum(&e[0]);
			d->hi = jnum(&e[1]);
			if (!(d->lo <= d->hi) || (d->dist == TD_LOG_UNIFORM && !(d->lo > 0)))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("search distribution \"%s\" for \"%s\" needs low <= high%s",
								kind, name, d->dist == TD_LOG_UNIFORM ? " and low > 0" : "")));
		}
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown search distribution \"%s\" for \"%s\"", kind, name),
					 errhint("Distributions are {\"uniform\": [a, b]}, {\"log_uniform\": [a, b]} and {\"choice\": [...]}.")));
	}
	if (nkeys != 1)
		search_error("a search distribution for \"%s\" must have exactly one key", name,
					 "Distributions are {\"uniform\": [a, b]}, {\"log_uniform\": [a, b]} and {\"choice\": [...]}.");
}

/* search jsonb into dimensions */
static void
parse_search(TuneSearch *s, Jsonb *search)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			cap;
	int			p = -1;

	if (!JB_ROOT_IS_OBJECT(search) || JB_ROOT_IS_SCALAR(search))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("search must be a JSON object"),
				 errhint("Map argument names to lists of values or distributions, as in {\"learning_rate\": [0.01, 0.1]}.")));
	cap = Max(JB_ROOT_COUNT(search), 1);
	s->dims = palloc0(sizeof(TuneDim) * cap);
	s->ndims = 0;
	it = JsonbIteratorInit(&search->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
		{
			char	   *key = pnstrdup(v.val.string.val, v.val.string.len);

			p = -1;
			for (int i = 0; i < lengthof(searchable); i++)
				if (strcmp(key, searchable[i].name) == 0)
					p = i;
			if (p < 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("search names unknown argument \"%s\"", key),
						 errhint(SEARCHABLE_HINT)));
		}
		else if (tok == WJB_VALUE)
		{
			TuneDim    *d = &s->dims[s->ndims++];

			d->param = p;
			if (is_array(&v))
			{
				d->dist = TD_LIST;
				parse_list(d, &v, "list");
			}
			else if (is_object(&v))
				parse_distribution(d, &v);
			else
				search_error("search value of \"%s\" must be a list of values or a distribution",
							 searchable[p].name,
							 "Give a list, as in [0.01, 0.1], or {\"uniform\": [a, b]}, {\"log_uniform\": [a, b]} or {\"choice\": [...]}.");
		}
	}
	if (s->ndims == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("search names no argument"),
				 errhint(SEARCHABLE_HINT)));
}

/* ---------------------------------------------------------------------
 * Trials
 * --------------------------------------------------------------------- */

/* the value's JSON text */
static void
value_json(StringInfo buf, int p, const TuneValue *v)
{
	switch (searchable[p].type)
	{
		case TT_FLOAT:
			appendStringInfo(buf, "%.17g", v->num);
			break;
		case TT_INT:
			appendStringInfo(buf, "%d", (int) v->num);
			break;
		case TT_TEXT:
			escape_json(buf, v->str);
			break;
		case TT_INTS:
			appendStringInfoChar(buf, '[');
			for (int i = 0; i < v->nints; i++)
				appendStringInfo(buf, "%s%d", i ? ", " : "", v->ints[i]);
			appendStringInfoChar(buf, ']');
			break;
	}
}

static void
finish_trial(TuneSearch *s, TuneTrial *t, int number)
{
	StringInfoData buf;

	t->number = number;
	t->state = "failed";
	t->metric = NAN;
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int d = 0; d < s->ndims; d++)
	{
		appendStringInfoString(&buf, d ? ", " : "");
		escape_json(&buf, searchable[s->dims[d].param].name);
		appendStringInfoString(&buf, ": ");
		value_json(&buf, s->dims[d].param, &t->values[d]);
	}
	appendStringInfoChar(&buf, '}');
	t->args_json = buf.data;
}

/* every combination of the lists; the last dimension varies fastest */
static void
make_grid(TuneSearch *s)
{
	double		n = 1;
	int			idx[64] = {0};

	for (int d = 0; d < s->ndims; d++)
	{
		if (s->dims[d].dist != TD_LIST || s->dims[d].choice)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("grid search needs a list of values for \"%s\"",
							searchable[s->dims[d].param].name),
					 errhint("Use strategy => 'random' (or 'halving' with trials) to sample distributions.")));
		n *= s->dims[d].nvalues;
	}
	if (n > DML_TUNE_MAX_TRIALS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the grid has %.0f configurations, more than %d", n, DML_TUNE_MAX_TRIALS),
				 errhint("Search fewer values, or sample them with strategy => 'random'.")));
	s->ntrials = (int) n;
	s->trials = palloc0(sizeof(TuneTrial) * s->ntrials);
	for (int t = 0; t < s->ntrials; t++)
	{
		TuneTrial  *tr = &s->trials[t];

		tr->values = palloc(sizeof(TuneValue) * s->ndims);
		for (int d = 0; d < s->ndims; d++)
			tr->values[d] = s->dims[d].values[idx[d]];
		finish_trial(s, tr, t + 1);
		for (int d = s->ndims - 1; d >= 0; d--)
		{
			if (++idx[d] < s->dims[d].nvalues)
				break;
			idx[d] = 0;
		}
	}
}

/* n configurations drawn from the distributions with the seed */
static void
make_random(TuneSearch *s, int n, int64 seed)
{
	pg_prng_state rng;

	pg_prng_seed(&rng, (uint64) seed);
	s->ntrials = n;
	s->trials = palloc0(sizeof(TuneTrial) * n);
	for (int t = 0; t < n; t++)
	{
		TuneTrial  *tr = &s->trials[t];

		tr->values = palloc0(sizeof(TuneValue) * s->ndims);
		for (int d = 0; d < s->ndims; d++)
		{
			TuneDim    *dim = &s->dims[d];
			double		u = pg_prng_double(&rng);
			double		x;

			if (dim->dist == TD_LIST)
			{
				tr->values[d] = dim->values[Min((int) (u * dim->nvalues), dim->nvalues - 1)];
				continue;
			}
			if (dim->dist == TD_UNIFORM)
				x = dim->lo + u * (dim->hi - dim->lo);
			else
				x = exp(log(dim->lo) + u * (log(dim->hi) - log(dim->lo)));
			if (searchable[dim->param].type == TT_INT)
				x = Min(Max(rint(x), ceil(dim->lo)), floor(dim->hi));
			tr->values[d].num = x;
		}
		finish_trial(s, tr, t + 1);
	}
}

/* ---------------------------------------------------------------------
 * Running a trial
 * --------------------------------------------------------------------- */

/* dml_train's arguments for trial t: the fixed part, then its values */
static void
trial_args(TuneSearch *s, TuneTrial *t, const NullableDatum *fixed, NullableDatum *args, int epochs)
{
	memcpy(args, fixed, sizeof(NullableDatum) * DML_TRAIN_NARGS);
	for (int d = 0; d < s->ndims; d++)
	{
		int			p = s->dims[d].param;
		int			a = searchable[p].arg;
		TuneValue  *v = &t->values[d];

		args[a].isnull = false;
		switch (searchable[p].type)
		{
			case TT_FLOAT:
				args[a].value = Float8GetDatum(v->num);
				break;
			case TT_INT:
				args[a].value = Int32GetDatum((int32) v->num);
				break;
			case TT_TEXT:
				args[a].value = CStringGetTextDatum(v->str);
				break;
			case TT_INTS:
				{
					Datum		e[16];

					for (int i = 0; i < v->nints; i++)
						e[i] = Int32GetDatum(v->ints[i]);
					args[a].value = PointerGetDatum(construct_array(e, v->nints, INT4OID, 4, true,
																	TYPALIGN_INT));
				}
				break;
		}
	}
	if (epochs > 0)
	{
		args[TA_EPOCHS].isnull = false;
		args[TA_EPOCHS].value = Int32GetDatum(epochs);
	}
}

/* set when the metric asked for is not among the model's: an error, not a failed trial */
static bool metric_missing = false;

/* the trial's metric and epochs from its stored model, as the owner */
static void
read_trial_model(TuneSearch *s, TuneTrial *t)
{
	Oid			types[2] = {INT8OID, TEXTOID};
	Datum		values[2];
	bool		isnull;
	const char *metric = s->metric;

	/* not read-only: a fresh snapshot sees the model the trial just stored */
	SPI_connect();
	values[0] = Int64GetDatum(t->model_id);
	if (metric == NULL)
	{
		/* accuracy for classifiers, R2 for regression */
		DmlOwnerQuery("SELECT m.spec OPERATOR(pg_catalog.->) 'classes' "
					  "OPERATOR(pg_catalog.=) 'null'::pg_catalog.jsonb "
					  "FROM dml.models m WHERE m.id OPERATOR(pg_catalog.=) $1",
					  1, types, values, false, 1);
		if (SPI_processed != 1)
			elog(ERROR, "dml: trial %d's model " INT64_FORMAT " is gone (%d rows). Please report a bug.", t->number, t->model_id, (int) SPI_processed);
		metric = DatumGetBool(DmlSpiValue(0, 1)) ? "r2" : "accuracy";
	}
	values[1] = CStringGetTextDatum(metric);
	DmlOwnerQuery("SELECT (m.metrics OPERATOR(pg_catalog.->>) $2)::pg_catalog.float8, "
				  "(SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object("
				  "'epoch', e.epoch, 'loss', e.loss, 'val_loss', e.val_loss, "
				  "'val_metric', e.val_metric, 'seconds', e.seconds) ORDER BY e.restarts, e.epoch) "
				  "FROM dml.epochs e WHERE e.model_id OPERATOR(pg_catalog.=) m.id)::pg_catalog.text "
				  "FROM dml.models m WHERE m.id OPERATOR(pg_catalog.=) $1",
				  2, types, values, false, 1);
	if (SPI_processed != 1)
		elog(ERROR, "dml: trial %d's model " INT64_FORMAT " is gone (%d rows). Please report a bug.", t->number, t->model_id, (int) SPI_processed);
	t->metric = DatumGetFloat8(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	if (isnull)
		metric_missing = true;
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("metric \"%s\" does not apply to this model", metric),
				 errhint("Classifiers have accuracy, macro_f1 and log_loss; regression has r2, mse and mae.")));
	{
		char	   *ej = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
		MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);

		t->epoch_json = ej ? pstrdup(ej) : NULL;
		MemoryContextSwitchTo(old);
	}
	if (s->metric == NULL)
		s->metric = metric;
	SPI_finish();
}

/* the trial whose checkpoints the coordinator hands over (halving) */
static TuneTrial *ckpt_trial = NULL;

/* after a trial, or when an error ends the search */
static void
trial_hooks_off(void)
{
	DmlTuneTrial = DmlTuneTrials = 0;
	DmlCheckpointHook = NULL;
	DmlResumeCheckpoint = NULL;
	DmlResumeCheckpointLen = 0;
	DmlTuneCheckpointLast = false;
	ckpt_trial = NULL;
}

/* DmlCheckpointHook: keep the trial's newest checkpoint, for its next rung */
static void
keep_trial_checkpoint(const char *payload, uint32 len, int epoch)
{
	TuneTrial  *t = ckpt_trial;
	char	   *copy;

	if (t == NULL)
		return;
	copy = MemoryContextAlloc(TopTransactionContext, Max(len, 1));
	memcpy(copy, payload, len);
	if (t->ckpt != NULL)
		pfree(t->ckpt);
	t->ckpt = copy;
	t->ckpt_len = len;
}

/*
 * Run trial t with the given epochs (0: its own) in a subtransaction.
 * A failure is recorded in t; a query cancel ends the search.
 */
static void
run_trial(TuneSearch *s, TuneTrial *t, const NullableDatum *fixed, Oid fn, int epochs,
		  int rung, int rungs)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	NullableDatum args[DML_TRAIN_NARGS];
	instr_time	start,
				end;

	trial_args(s, t, fixed, args, epochs);
	metric_missing = false;
	if (rungs > 1)
		ereport(NOTICE, (errmsg("trial %d of %d (rung %d of %d, %d epochs): %s",
								t->number, s->ntrials, rung + 1, rungs, epochs, t->args_json)));
	else
		ereport(NOTICE, (errmsg("trial %d of %d: %s", t->number, s->ntrials, t->args_json)));
	DmlTuneTrial = t->number;
	DmlTuneTrials = s->ntrials;
	if (rungs > 1)
	{
		/*
		 * Halving: the trial goes on from its previous rung's last epoch
		 * (a resumed run gives the model an uninterrupted one would), and
		 * its last epoch is checkpointed for the next rung.  The in-server
		 * fit sends no checkpoint: its next rung starts over.
		 */
		char	   *resume = t->ckpt;

		DmlResumeCheckpoint = resume;
		DmlResumeCheckpointLen = resume ? t->ckpt_len : 0;
		t->ckpt = NULL;
		t->ckpt_len = 0;
		ckpt_trial = t;
		DmlCheckpointHook = keep_trial_checkpoint;
		DmlTuneCheckpointLast = true;
	}
	INSTR_TIME_SET_CURRENT(start);
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		bool		isnull;
		Datum		r = DmlCallTrain(fn, args, false, &isnull);
		HeapTupleHeader h;

		if (isnull)
			elog(ERROR, "dml: dml_train returned NULL. Please report a bug.");
		h = DatumGetHeapTupleHeader(r);
		t->model_id = DatumGetInt64(GetAttributeByNum(h, 1, &isnull));
		t->version = DatumGetInt32(GetAttributeByNum(h, 3, &isnull));
		t->epochs = DatumGetInt32(GetAttributeByNum(h, 4, &isnull));
		t->budget = epochs;
		read_trial_model(s, t);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		t->state = "finished";
		t->error = NULL;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		/* a cancel or a shutdown ends the search, not the trial */
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED || metric_missing ||
			edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN ||
			edata->elevel > ERROR)
		{
			trial_hooks_off();
			PG_RE_THROW();
		}
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		t->state = "failed";
		t->metric = NAN;
		t->model_id = 0;
		t->version = 0;
		t->epoch_json = NULL;
		t->error = edata->message ? pstrdup(edata->message) : "unknown error";
		ereport(NOTICE, (errmsg("trial %d failed: %s", t->number, t->error)));
	}
	PG_END_TRY();
	trial_hooks_off();
	INSTR_TIME_SET_CURRENT(end);
	INSTR_TIME_SUBTRACT(end, start);
	t->seconds += INSTR_TIME_GET_DOUBLE(end);
}

/* is a better than b?  Failed trials are worst; ties go to the first */
static bool
better(const TuneSearch *s, const TuneTrial *a, const TuneTrial *b)
{
	if (isnan(a->metric))
		return false;
	if (isnan(b->metric))
		return true;
	if (a->metric != b->metric)
		return s->lower_better ? a->metric < b->metric : a->metric > b->metric;
	return a->number < b->number;
}

static const TuneSearch *sort_search;

/* best first; trials that ended at a higher rung before lower ones */
static int
trial_cmp(const void *x, const void *y)
{
	const TuneTrial *a = *(TuneTrial * const *) x;
	const TuneTrial *b = *(TuneTrial * const *) y;

	if (a->budget != b->budget && !isnan(a->metric) && !isnan(b->metric))
		return a->budget > b->budget ? -1 : 1;
	if (better(sort_search, a, b))
		return -1;
	if (better(sort_search, b, a))
		return 1;
	return a->number - b->number;
}

static TuneTrial **
ranked(TuneSearch *s, TuneTrial **list, int n)
{
	TuneTrial **out = palloc(sizeof(TuneTrial *) * Max(n, 1));

	memcpy(out, list, sizeof(TuneTrial *) * n);
	sort_search = s;
	qsort(out, n, sizeof(TuneTrial *), trial_cmp);
	return out;
}

/* drop a trial's model (a rung it did not survive, or not kept) */
static void
drop_model(int64 id)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(id)};

	if (id == 0)
		return;
	SPI_connect();
	DmlOwnerQuery("DELETE FROM dml.models WHERE id OPERATOR(pg_catalog.=) $1",
				  1, types, values, false, 0);
	SPI_finish();
}

/*
 * Successive halving over epochs.  Rung r gives the survivors
 * full >> (rungs - 1 - r) epochs (the last rung all of them), and after
 * it the best n0 / eta^(r + 1) go on, rounded up, where eta is chosen so
 * that one is left for the last rung: 2 when full allows a rung per
 * halving of the trials (ceil(log2 n0) + 1 rungs), more when it does not
 * (8 trials at 5 epochs: rungs of 1, 2 and 5 epochs, keeping 3, then 1).
 */
static void
run_halving(TuneSearch *s, const NullableDatum *fixed, Oid fn, int full)
{
	int			n0 = s->ntrials;
	int			n = n0;
	int			rungs = 1;
	double		eta;
	TuneTrial **alive = palloc(sizeof(TuneTrial *) * n);

	for (int i = 0; i < n; i++)
		alive[i] = &s->trials[i];
	while ((1 << (rungs - 1)) < n0 && (2 << (rungs - 1)) <= full)
		rungs++;
	eta = rungs > 1 ? pow((double) n0, 1.0 / (rungs - 1)) : 1;
	for (int r = 0; r < rungs && n > 0; r++)
	{
		int			epochs = r == rungs - 1 ? full : Max(full >> (rungs - 1 - r), 1);
		int			keep;
		TuneTrial **order;

		for (int i = 0; i < n; i++)
		{
			drop_model(alive[i]->model_id);	/* its previous rung's */
			alive[i]->model_id = 0;
			run_trial(s, alive[i], fixed, fn, epochs, r, rungs);
		}
		if (r == rungs - 1)
			break;
		order = ranked(s, alive, n);
		keep = (int) ceil(n0 / pow(eta, r + 1) - 1e-9);
		keep = Min(Max(keep, 1), n);
		for (int i = keep; i < n; i++)
			if (strcmp(order[i]->state, "finished") == 0)
				order[i]->state = "stopped early";
		/* failed ones never go on */
		while (keep > 0 && strcmp(order[keep - 1]->state, "failed") == 0)
			keep--;
		alive = order;
		n = keep;
	}
}

/* ---------------------------------------------------------------------
 * dml_tune
 * --------------------------------------------------------------------- */

#define ARG_NULL(i)	(a[(i)].isnull)
#define ARG_INT(i)	DatumGetInt32(a[(i)].value)

/* text argument i of a, or NULL */
static char *
arg_str(NullableDatum *a, int i)
{
	return a[i].isnull ? NULL : TextDatumGetCString(a[i].value);
}

/* the search's rows of dml.trials */
static void
store_trials(TuneSearch *s, int64 search_id, const char *name, Oid owner, const char *strategy)
{
	Oid			types[14] = {INT8OID, INT4OID, TEXTOID, OIDOID, TEXTOID, JSONBOID, TEXTOID,
	TEXTOID, FLOAT8OID, INT4OID, FLOAT8OID, INT8OID, TEXTOID, TEXTOID};

	SPI_connect();
	for (int i = 0; i < s->ntrials; i++)
	{
		TuneTrial  *t = &s->trials[i];
		Datum		values[14];
		char		nulls[14];

		memset(nulls, ' ', sizeof(nulls));
		values[0] = Int64GetDatum(search_id);
		values[1] = Int32GetDatum(t->number);
		values[2] = CStringGetTextDatum(name);
		values[3] = ObjectIdGetDatum(owner);
		values[4] = CStringGetTextDatum(strategy);
		values[5] = DirectFunctionCall1(jsonb_in, CStringGetDatum(t->args_json));
		values[6] = CStringGetTextDatum(t->state);
		values[7] = CStringGetTextDatum(s->metric ? s->metric : "accuracy");
		values[8] = Float8GetDatum(t->metric);
		if (isnan(t->metric))
			nulls[8] = 'n';
		values[9] = Int32GetDatum(t->epochs);
		if (strcmp(t->state, "failed") == 0 && t->epochs == 0)
			nulls[9] = 'n';
		values[10] = Float8GetDatum(t->seconds);
		values[11] = Int64GetDatum(t->model_id);
		if (t->model_id == 0)
			nulls[11] = 'n';
		values[12] = t->epoch_json ? CStringGetTextDatum(t->epoch_json) : (Datum) 0;
		if (t->epoch_json == NULL)
			nulls[12] = 'n';
		values[13] = t->error ? CStringGetTextDatum(t->error) : (Datum) 0;
		if (t->error == NULL)
			nulls[13] = 'n';
		{
			DmlCatalogUser save;
			int			rc;

			DmlBecomeOwner(&save);
			rc = SPI_execute_with_args("INSERT INTO dml.trials (search_id, trial, name, owner, strategy, "
									   "arguments, state, metric_name, metric, epochs, seconds, model_id, "
									   "epoch_metrics, error) "
									   "VALUES ($1, $2, $3, $4::pg_catalog.regrole, $5, $6, $7, $8, $9, "
									   "$10, $11, $12, $13::pg_catalog.jsonb, $14)",
									   14, types, values, nulls, false, 0);
			DmlRestoreUser(&save);
			if (rc != SPI_OK_INSERT)
				elog(ERROR, "dml: storing trial %d failed: %s", t->number, SPI_result_code_string(rc));
		}
	}
	SPI_finish();
}

/*
 * Keep the best trial's model as the next version after prior and pin it;
 * the others only with keep 'all' (then in trial order).  Returns the best.
 */
static TuneTrial *
keep_models(TuneSearch *s, const char *name, Oid owner, int prior, bool keep_all)
{
	TuneTrial **all = palloc(sizeof(TuneTrial *) * s->ntrials);
	TuneTrial **order;
	TuneTrial  *best;
	Oid			types[4] = {TEXTOID, OIDOID, INT4OID, INT8OID};
	Datum		values[4];

	for (int i = 0; i < s->ntrials; i++)
		all[i] = &s->trials[i];
	order = ranked(s, all, s->ntrials);
	best = order[0];
	if (strcmp(best->state, "failed") == 0)
		return NULL;
	if (!keep_all)
	{
		for (int i = 0; i < s->ntrials; i++)
			if (&s->trials[i] != best && s->trials[i].model_id != 0)
			{
				drop_model(s->trials[i].model_id);
				s->trials[i].model_id = 0;
				s->trials[i].version = 0;
			}
		values[0] = CStringGetTextDatum(name);
		values[1] = ObjectIdGetDatum(owner);
		values[2] = Int32GetDatum(prior + 1);
		values[3] = Int64GetDatum(best->model_id);
		SPI_connect();
		DmlOwnerQuery("UPDATE dml.models SET version = $3 WHERE id OPERATOR(pg_catalog.=) $4",
					  4, types, values, false, 0);
		SPI_finish();
		best->version = prior + 1;
	}
	else
	{
		/* halving: the rungs a trial did not finish left no model */
		int			v = prior;

		SPI_connect();
		/* out of the way first: the new numbers may be taken by others of the search */
		for (int i = 0; i < s->ntrials; i++)
			if (s->trials[i].model_id != 0)
			{
				values[3] = Int64GetDatum(s->trials[i].model_id);
				DmlOwnerQuery("UPDATE dml.models SET version = version OPERATOR(pg_catalog.+) 1000000 "
							  "WHERE id OPERATOR(pg_catalog.=) $1",
							  1, &types[3], &values[3], false, 0);
			}
		for (int i = 0; i < s->ntrials; i++)
			if (s->trials[i].model_id != 0)
			{
				values[0] = CStringGetTextDatum(name);
				values[1] = ObjectIdGetDatum(owner);
				values[2] = Int32GetDatum(++v);
				values[3] = Int64GetDatum(s->trials[i].model_id);
				DmlOwnerQuery("UPDATE dml.models SET version = $3 WHERE id OPERATOR(pg_catalog.=) $4",
							  4, types, values, false, 0);
				s->trials[i].version = v;
			}
		SPI_finish();
	}
	values[0] = CStringGetTextDatum(name);
	values[1] = ObjectIdGetDatum(owner);
	values[2] = Int32GetDatum(best->version);
	SPI_connect();
	DmlOwnerQuery("INSERT INTO dml.deployments (name, owner, version) VALUES ($1, $2, $3) "
				  "ON CONFLICT (name, owner) DO UPDATE SET version = excluded.version",
				  3, types, values, false, 0);
	SPI_finish();
	DmlCatalogChanged();
	return best;
}

/* the newest version the name has (0: none) */
static int
prior_version(const char *name)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(name)};
	bool		isnull;
	int			v;

	SPI_connect();
	DmlOwnerQuery("SELECT pg_catalog.max(version) FROM dml.models WHERE name OPERATOR(pg_catalog.=) $1",
				  1, types, values, false, 1);
	v = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	return isnull ? 0 : v;
}

/*
 * A search with dml_tune's arguments a: parse and check it, and with
 * check_only stop there (dml_tune_async); else run it, keep the best and
 * store the trials.  Returns the search, its trials filled in.
 */
static TuneSearch *
tune_run(NullableDatum *a, bool check_only)
{
	TuneSearch *sp = palloc0(sizeof(TuneSearch));
	TuneSearch	s;
	NullableDatum fixed[DML_TRAIN_NARGS];
	NullableDatum first[DML_TRAIN_NARGS];
	const char *strategy;
	const char *keep;
	char	   *name;
	Oid			fn;
	int			prior;
	int			full = 0;
	int64		search_id;
	int64		seed;
	bool		isnull;
	Oid			owner;

	DmlCheckWritable("tune a model");
	if (ARG_NULL(TU_SEARCH))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("search must not be NULL"),
				 errhint("Map argument names to lists of values or distributions, as in {\"learning_rate\": [0.01, 0.1]}.")));
	if (ARG_NULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("name, relation and target must not be NULL")));
	name = arg_str(a, 0);

	/* dml_train's fixed part */
	for (int i = 0; i < DML_TRAIN_NARGS; i++)
		fixed[i].isnull = true;
	for (int i = 0; i < DML_TUNE_NARGS; i++)
		if (tune_to_train[i] >= 0)
			fixed[tune_to_train[i]] = a[i];
	seed = fixed[TA_SEED].isnull ? 42 : DatumGetInt64(fixed[TA_SEED].value);

	memset(&s, 0, sizeof(s));
	parse_search(&s, DatumGetJsonbP(a[TU_SEARCH].value));
	s.metric = arg_str(a, TU_METRIC);
	if (s.metric != NULL)
	{
		static const char *const higher[] = {"accuracy", "macro_f1", "r2"};
		static const char *const lower[] = {"log_loss", "mse", "mae"};
		bool		known = false;

		for (int i = 0; i < lengthof(higher); i++)
			known |= strcmp(s.metric, higher[i]) == 0;
		for (int i = 0; i < lengthof(lower); i++)
			if (strcmp(s.metric, lower[i]) == 0)
				known = s.lower_better = true;
		if (!known)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown metric \"%s\"", s.metric),
					 errhint("Metrics are accuracy, macro_f1 and log_loss for classifiers, r2, mse and mae for regression.")));
	}
	keep = ARG_NULL(TU_KEEP) ? "best" : arg_str(a, TU_KEEP);
	if (strcmp(keep, "best") != 0 && strcmp(keep, "all") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("keep must be \"best\" or \"all\"")));

	strategy = ARG_NULL(TU_STRATEGY) ? "grid" : arg_str(a, TU_STRATEGY);
	if (!ARG_NULL(TU_TRIALS) &&
		(ARG_INT(TU_TRIALS) < 1 || ARG_INT(TU_TRIALS) > DML_TUNE_MAX_TRIALS))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("trials is out of range"),
				 errdetail("A search runs 1 to %d trials.", DML_TUNE_MAX_TRIALS)));
	if (strcmp(strategy, "grid") == 0)
	{
		if (!ARG_NULL(TU_TRIALS))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("trials applies to strategies random and halving"),
					 errhint("A grid runs every combination of its lists.")));
		make_grid(&s);
	}
	else if (strcmp(strategy, "random") == 0)
		make_random(&s, ARG_NULL(TU_TRIALS) ? DML_TUNE_RANDOM_TRIALS : ARG_INT(TU_TRIALS),
					seed);
	else if (strcmp(strategy, "halving") == 0)
	{
		bool		lists = true;

		for (int d = 0; d < s.ndims; d++)
		{
			lists &= s.dims[d].dist == TD_LIST && !s.dims[d].choice;
			if (searchable[s.dims[d].param].arg == TA_EPOCHS)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("halving spends epochs: search cannot vary \"epochs\""),
						 errhint("Give epochs => N, the budget of the best configuration.")));
		}
		if (fixed[TA_EPOCHS].isnull)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("halving needs epochs"),
					 errhint("Give epochs => N: the best configuration trains N epochs, the others fewer.")));
		full = DatumGetInt32(fixed[TA_EPOCHS].value);
		if (lists && ARG_NULL(TU_TRIALS))
			make_grid(&s);
		else
			make_random(&s, ARG_NULL(TU_TRIALS) ? DML_TUNE_HALVING_TRIALS : ARG_INT(TU_TRIALS),
						seed);
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown strategy \"%s\"", strategy),
				 errhint("Valid strategies are grid, random and halving.")));

	/* the first configuration's checks: a wrong relation, column or name fails here */
	fn = DmlTrainFunction();
	trial_args(&s, &s.trials[0], fixed, first, full > 0 ? 1 : 0);
	(void) DmlCallTrain(fn, first, true, &isnull);
	if (check_only)
		return NULL;

	/* one snapshot for every trial's workers */
	SPI_connect();
	if (SPI_execute("SELECT pg_catalog.pg_export_snapshot()", false, 1) != SPI_OK_SELECT)
		elog(ERROR, "dml: pg_export_snapshot failed");
	DmlTuneSnapshot = MemoryContextStrdup(TopTransactionContext,
										  SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	DmlOwnerQuery("SELECT pg_catalog.nextval('dml.trials_search_seq'::pg_catalog.regclass)",
				  0, NULL, NULL, false, 1);
	search_id = DatumGetInt64(DmlSpiValue(0, 1));
	SPI_finish();
	prior = prior_version(name);

	/* trials over the same rows share one job, which loads them once */
	DmlTuneResident = true;
	PG_TRY();
	{
		if (full > 0)
			run_halving(&s, fixed, fn, full);
		else
			for (int i = 0; i < s.ntrials; i++)
				run_trial(&s, &s.trials[i], fixed, fn, 0, 0, 1);
		DmlFinishResidentJob();
	}
	PG_FINALLY();
	{
		DmlTuneSnapshot = NULL;
		DmlTuneResident = false;
		DmlEndResidentJob();
	}
	PG_END_TRY();

	/* the name's owner: the caller, or a role it is a member of (as dml_train stores) */
	owner = DmlNameOwner(name);
	if (!OidIsValid(owner))
		owner = GetUserId();
	if (keep_models(&s, name, owner, prior, strcmp(keep, "all") == 0) == NULL)
		ereport(WARNING,
				(errmsg("every trial failed: no model was stored"),
				 errhint("dml.trials holds each trial's error.")));
	store_trials(&s, search_id, name, owner, strategy);

	s.search_id = search_id;
	*sp = s;
	return sp;
}

PG_FUNCTION_INFO_V1(dml_tune);

Datum
dml_tune(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TuneSearch *sp;
	TuneTrial **order;
	TuneTrial **all;

	DML_REQUIRE_SCHEMA();
	if (PG_NARGS() != DML_TUNE_NARGS)
		elog(ERROR, "dml: dml_tune has an unexpected signature. Please report a bug.");
	sp = tune_run(fcinfo->args, false);
	all = palloc(sizeof(TuneTrial *) * sp->ntrials);
	/* the rows, best first */
	InitMaterializedSRF(fcinfo, 0);
	for (int i = 0; i < sp->ntrials; i++)
		all[i] = &sp->trials[i];
	order = ranked(sp, all, sp->ntrials);
	for (int i = 0; i < sp->ntrials; i++)
	{
		TuneTrial  *t = order[i];
		Datum		values[DML_TUNE_COLS];
		bool		nulls[DML_TUNE_COLS] = {0};

		values[0] = Int64GetDatum(sp->search_id);
		values[1] = Int32GetDatum(t->number);
		values[2] = DirectFunctionCall1(jsonb_in, CStringGetDatum(t->args_json));
		values[3] = Float8GetDatum(t->metric);
		nulls[3] = isnan(t->metric);
		values[4] = Int32GetDatum(t->epochs);
		nulls[4] = strcmp(t->state, "failed") == 0 && t->epochs == 0;
		values[5] = Float8GetDatum(t->seconds);
		values[6] = CStringGetTextDatum(t->state);
		values[7] = Int64GetDatum(t->model_id);
		nulls[7] = t->model_id == 0;
		values[8] = Int32GetDatum(t->version);
		nulls[8] = t->model_id == 0;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * DmlTuneCheck
 *		dml_tune's checks on its arguments, without training (dml_tune_async).
 */
void
DmlTuneCheck(NullableDatum *args)
{
	(void) tune_run(args, true);
}

/*
 * DmlTuneRun
 *		A search with dml_tune's arguments (a background job); returns the
 *		best trial's model id, 0 when every trial failed.
 */
int64
DmlTuneRun(NullableDatum *args)
{
	TuneSearch *sp = tune_run(args, false);
	int64		best = 0;

	for (int i = 0; i < sp->ntrials; i++)
		if (sp->trials[i].model_id != 0 &&
			(best == 0 || better(sp, &sp->trials[i], &sp->trials[best - 1])))
			best = i + 1;
	return best == 0 ? 0 : sp->trials[best - 1].model_id;
}

/* dml_tune in the extension's schema */
Oid
DmlTuneFunction(void)
{
	Oid			nsp = DmlExtensionSchema();

	if (!OidIsValid(nsp))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"dml\" is not installed in this database")));
	return LookupFuncName(list_make2(makeString(get_namespace_name(nsp)), makeString("dml_tune")),
						  DML_TUNE_NARGS, DmlTuneArgTypes, false);
}
