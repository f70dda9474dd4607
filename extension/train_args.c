/*-------------------------------------------------------------------------
 *
 * train_args.c
 *	  dml_train's SQL arguments: each checked once, with the user's error
 *	  messages, and each option given as text made the job's enum
 *	  (jobspec.h).  Where strings from SQL become enums: nothing after
 *	  this compares an option string.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>
#include <stdio.h>

#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"

#include "coordinator.h"
#include "dml.h"
#include "train.h"

#define DML_MAX_EPOCHS			100000
#define DML_MAX_BATCH			10000000
#define DML_DEFAULT_BATCH		256

/* ---------------------------------------------------------------------
 * Arguments
 * --------------------------------------------------------------------- */

/* text argument or NULL */
static char *
arg_text(FunctionCallInfo fcinfo, int i)
{
	return PG_ARGISNULL(i) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(i));
}

void
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
int
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
	INTEGER_OPT("window", job->window, 1, DML_WINDOW_MAX);
	if (strcmp(key, "tf32") == 0)
	{
		if (v->type != jbvBool)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"tf32\" must be true or false")));
		job->tf32 = v->val.boolean;
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
	if (strcmp(key, "spill") == 0)
	{
		if (str != NULL && strcmp(str, "float32") == 0)
			job->spill_format = DML_SPILL_FLOAT32;
		else if (str != NULL && strcmp(str, "fp16") == 0)
			job->spill_format = DML_SPILL_FP16;
		else if (str != NULL && strcmp(str, "int8") == 0)
			job->spill_format = DML_SPILL_INT8;
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"spill\" must be \"float32\", \"fp16\" or \"int8\""),
					 errhint("\"fp16\" halves the spill of inputs that fit a half float (up to 65504 in magnitude, about 3 significant digits); \"int8\" quarters it for integer-valued inputs such as pixels from 0 to 255, exactly.")));
		return;
	}
	if (strcmp(key, "shuffle") == 0)
	{
		int			sh = dml_job_parse(DML_NAMES_SHUFFLE, str);

		if (sh < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"shuffle\" must be \"auto\", \"rows\" or \"blocks\"")));
		job->shuffle = (DmlShuffle) sh;
		return;
	}
	if (strcmp(key, "schedule") == 0)
	{
		int			sched = dml_job_parse(DML_NAMES_SCHEDULE, str);

		if (sched < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"schedule\" must be \"constant\", \"step\", \"cosine\" or \"plateau\"")));
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
	/*
	 * a boolean option: the job keeps its negation (on by default: in_server,
	 * shared_memory, byte_rows, amx) or its value (off by default: balance, where
	 * on, two runs can differ in the float rounding)
	 */
#define BOOLEAN_OPT(nm, field, negated) \
	if (strcmp(key, nm) == 0) { \
		if (v->type != jbvBool) \
			ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), \
							errmsg("option \"%s\" must be a boolean", nm))); \
		field = (negated) ? !v->val.boolean : v->val.boolean; return; }

	BOOLEAN_OPT("in_server", job->no_in_server, true);
	BOOLEAN_OPT("shared_memory", job->no_shared_memory, true);
	BOOLEAN_OPT("byte_rows", job->no_byte_rows, true);
	BOOLEAN_OPT("amx", job->no_amx, true);
	BOOLEAN_OPT("balance", job->balance, false);
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
	if (strcmp(key, "cov") == 0)
	{
		/* statsmodels' names; the solvers that can use it are checked later (DmlCheckCovType) */
		int			cov = str ? dml_job_parse(DML_NAMES_COV, str) : -1;

		if (cov < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"cov\" must be \"nonrobust\", \"HC0\" or \"HC1\""),
					 errhint("HC0 and HC1 are heteroskedasticity-robust standard errors, as statsmodels' cov_type gives them.")));
		job->cov_type = (DmlCovType) cov;
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
				sscanf(str, "%d:%d:%7[a-z]%n", &rank, &epoch, how, &used) != 3 ||
				(str[used] != '\0' && strcmp(str + used, "!") != 0) ||
				(strcmp(how, "kill") != 0 && strcmp(how, "exit") != 0 &&
				 strcmp(how, "drop") != 0 && strcmp(how, "hang") != 0 &&
				 strcmp(how, "spoil") != 0 && strcmp(how, "unspill") != 0) ||
				rank < 0 || epoch < 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("option \"fault\" must look like \"rank:epoch:how\""),
						 errhint("how is kill, exit, drop, hang, spoil (the rank's spill damaged, then kill) or unspill (its spill removed, then kill), optionally followed by \"!\" to fault again after each restart.")));
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
			 errhint("Valid options are momentum, nesterov, beta1, beta2, eps, schedule, step_size, gamma, tolerance, max_restarts, checkpoint_every, epoch_timeout, in_server, load, shared_memory, byte_rows, amx, balance, shuffle, tf32, rank_deficient, cov, memory, window, spill, fault and straggler.")));
}

void
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
 * Synchronization
 * --------------------------------------------------------------------- */

/*
 * The synchronization arguments (sync, servers, staleness, average_every,
 * compression, topk_ratio), checked against each other and the optimizer.
 */
void
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
	if (job->tf32 && job->device == DML_DEVICE_CPU)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"tf32\" applies to training on a GPU"),
				 errhint("Use device => 'gpu' or 'auto' with it, or leave it out.")));
	if (job->device == DML_DEVICE_GPU &&
		(job->sync != DML_SYNC_ALLREDUCE || job->compression != DML_COMPRESS_NONE))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("GPU training synchronizes by NCCL all-reduce, uncompressed"),
				 errhint("Use device => 'cpu' or 'auto' with sync => '%s' or compression.", sync)));
}

/* ---------------------------------------------------------------------
 * dml_train's arguments
 * --------------------------------------------------------------------- */

/* name, relation and target: checked, the target resolved (SELECT checked) */
void
train_read_relation(DmlJob *job, FunctionCallInfo fcinfo)
{
	char		relkind;

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
}

/*
 * The settings: each checked and written into the job (NULL: the default,
 * or chosen later by train_plan.c), and the feature names.
 */
void
train_read_settings(DmlJob *job, FunctionCallInfo fcinfo, TrainArgs *args)
{
	/* hyperparameters */
	args->model = PG_ARGISNULL(4) ? "auto" : arg_text(fcinfo, 4);
	args->optimizer = arg_text(fcinfo, 7);
	{
		char	   *activation = PG_ARGISNULL(6) ? "relu" : arg_text(fcinfo, 6);
		int			act = dml_job_parse(DML_NAMES_ACTIVATION, activation);

		/* identity is the output layer's, not a hidden layer's */
		if (act < 0 || act == DML_ACT_IDENTITY)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown activation \"%s\"", activation),
					 errhint("Valid activations are relu, tanh and sigmoid.")));
		job->activation = (DmlAct) act;
	}
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

	/* features: NIL when NULL (train_columns.c takes the default ones) */
	args->feature_names = NIL;
	args->features_null = PG_ARGISNULL(3);
	if (!PG_ARGISNULL(3))
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
			args->feature_names = lappend(args->feature_names, TextDatumGetCString(elems[i]));
		}
	}
}
