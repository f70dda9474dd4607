/*-------------------------------------------------------------------------
 *
 * train_plan.c
 *	  dml_train's plan: what the arguments and the data imply.  The kind
 *	  of model, its labels, loss and outputs; the network's shape; the
 *	  defaults that depend on the model and the size of the data (the
 *	  optimizer, learning rate, epochs or the convergence budget); the
 *	  synchronization; and how the workers read the rows.
 *
 * Labels are read with SPI under the caller's own privileges.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "compat.h"

#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/acl.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

#include "coordinator.h"
#include "shards.h"
#include "dml.h"
#include "train.h"
#include "jobs.h"

#define DML_AUTO_MAX_CLASSES	32		/* integer targets with more are regression */
#define DML_EXACT_MAX_INPUTS	500		/* normal equations by default */
#define DML_DEFAULT_HIDDEN		100	/* scikit-learn's MLP: one layer of 100 */

/*
 * Training without epochs runs until it converges.  Minibatch optimizers
 * stop when the loss (validation loss with validation > 0) has not
 * improved by DML_DEFAULT_TOLERANCE of itself for DML_DEFAULT_PATIENCE
 * epochs (their learning rate cut tenfold after half as many: schedule
 * plateau), within a budget of DML_DEFAULT_MAX_STEPS optimizer steps and
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
/* weight_decay of an MLP trained by minibatches without epochs */
#define DML_DEFAULT_MLP_DECAY	5e-4

/* ---------------------------------------------------------------------
 * Model kind and labels
 * --------------------------------------------------------------------- */

/*
 * What the relation's rows answered, kept for the rest of the statement:
 * the ordered labels of a target (the first `limit` of them) and the rows
 * counted up to a limit.  The queries read with the statement's snapshot
 * (SPI read-only) as the same role, so asking again in the same statement
 * gets the same answer: dml_train's plan asks for the labels twice (auto
 * classification, then the classes), and each of dml_tune's trials asks
 * what the first one did (two scans of the table a trial, every one the
 * same).  Kept in TopTransactionContext; valid in the transaction, the
 * statement (dml_tune's trials are subtransactions of its statement) and
 * the role that asked.
 */
typedef struct RelFacts
{
	LocalTransactionId lxid;
	CommandId	cid;			/* the statement's snapshot's command */
	Oid			user;
	Oid			relid;
	AttrNumber	attnum;			/* labels: of this column */
	List	   *labels;			/* the first labels_limit of them (or all: fewer) */
	int			labels_limit;	/* 0: none kept */
	int64		count_limit;	/* 0: no count kept */
	int64		count;
} RelFacts;

static RelFacts rel_facts;

/* are the kept facts this statement's, about relid? */
static bool
rel_facts_hold(Oid relid)
{
	Snapshot	snap = ActiveSnapshotSet() ? GetActiveSnapshot() : NULL;

	return snap != NULL && rel_facts.relid == relid && rel_facts.lxid == DML_MY_LXID &&
		rel_facts.cid == snap->curcid && rel_facts.user == GetUserId();
}

/* start keeping facts about relid in this statement */
static void
rel_facts_take(Oid relid)
{
	if (rel_facts_hold(relid))
		return;
	memset(&rel_facts, 0, sizeof(rel_facts));
	rel_facts.lxid = DML_MY_LXID;
	rel_facts.cid = GetActiveSnapshot()->curcid;
	rel_facts.user = GetUserId();
	rel_facts.relid = relid;
}

/* Distinct labels of the target, in the type's order, as text */
List *
target_classes(Oid relid, DmlFeature *target, int limit)
{
	const char *qcol = quote_identifier(target->name);
	List	   *sharded;
	List	   *labels;
	ListCell   *lc;
	MemoryContext old;

	if (DmlShardsDistinct(relid, target->name, limit, true, &sharded))
		return sharded;			/* listed on each shard's server */
	if (rel_facts_hold(relid) && rel_facts.labels_limit > 0 && rel_facts.attnum == target->attnum &&
		(limit <= rel_facts.labels_limit || list_length(rel_facts.labels) < rel_facts.labels_limit))
	{
		labels = NIL;
		for (int i = 0; i < list_length(rel_facts.labels) && i < limit; i++)
			labels = lappend(labels, pstrdup(list_nth(rel_facts.labels, i)));
		return labels;
	}
	labels = spi_text_column(psprintf("SELECT s.v::text FROM (SELECT DISTINCT %s AS v FROM %s "
									  "WHERE %s IS NOT NULL) s ORDER BY s.v",
									  qcol, rel_sql_name(relid), qcol), limit);
	if (!ActiveSnapshotSet())
		return labels;
	rel_facts_take(relid);
	list_free_deep(rel_facts.labels);
	old = MemoryContextSwitchTo(TopTransactionContext);
	rel_facts.labels = NIL;
	foreach(lc, labels)
		rel_facts.labels = lappend(rel_facts.labels, pstrdup(lfirst(lc)));
	MemoryContextSwitchTo(old);
	rel_facts.attnum = target->attnum;
	rel_facts.labels_limit = limit;
	return labels;
}

/*
 * The target's labels, checked: at least 2, at most DML_MAX_CLASSES, and 2
 * for logistic regression; then the kind, loss and outputs they imply.
 * The list comes from SQL, or from the workers (discover_classes).
 */
void
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
	if (job->kind == DML_KIND_LOGISTIC && n != 2)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("logistic regression needs 2 labels, but column \"%s\" has %d",
						job->target.name, n),
				 errhint("Use model => 'softmax' for more than two classes.")));
	job->classes = classes;
	if (job->kind == DML_KIND_AUTO)
		job->kind = n == 2 ? DML_KIND_LOGISTIC : DML_KIND_SOFTMAX;
	job->loss = n == 2 && job->kind != DML_KIND_SOFTMAX ? DML_LOSS_BCE : DML_LOSS_SOFTMAX;
	job->noutputs = job->loss == DML_LOSS_BCE ? 1 : n;
}

/* settle kind, loss, outputs and classes */
static void
choose_kind(DmlJob *job, const char *model, const char *optimizer, bool class_weight)
{
	Oid			t = job->target.typid;
	bool		numeric = type_is_numeric(t);
	bool		labelish = t == BOOLOID || type_is_integer(t) || type_is_text(t);
	DmlKind		kind;

	if (!numeric && !labelish)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("target column \"%s\" has type %s", job->target.name, format_type_be(t)),
				 errhint("The target must be a number (regression) or a boolean, integer, text or enum label (classification).")));

	kind = job_choice(DML_NAMES_KIND, model, "model kind",
					  "Valid kinds are linear, logistic, softmax, mlp and auto.");
	if (kind == DML_KIND_LINEAR)
	{
		if (!numeric)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("linear regression needs a numeric target, but column \"%s\" has type %s",
							job->target.name, format_type_be(t)),
					 errhint("Use model => 'logistic' or 'softmax' to classify, or 'auto'.")));
	}
	else if (kind == DML_KIND_LOGISTIC || kind == DML_KIND_SOFTMAX)
	{
		if (!labelish)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("%s regression needs a label target, but column \"%s\" has type %s",
							model, job->target.name, format_type_be(t)),
					 errhint("Labels may be booleans, integers, text or enums.")));
	}
	job->kind = kind;

	/*
	 * dml_train_async's checks, in the calling session, of an MLP without
	 * class weights: nothing checked here depends on its labels but the
	 * model's size, checked here at its least (one output), so the labels
	 * are left to the job, which reads them as dml_train does and fails at
	 * once where they are wrong (one label, more than DML_MAX_CLASSES, an
	 * output layer past dml.max_model_parameters).  Listing them is a scan
	 * of the whole table (SELECT DISTINCT): 36 ms of Fashion-MNIST's 60,000
	 * rows, seconds of a large table, before the job id came back, and the
	 * job scanned again.
	 */
	if (DmlTrainCheckOnly && kind == DML_KIND_MLP && !class_weight &&
		(t == BOOLOID || type_is_integer(t) || type_is_text(t)))
	{
		job->classification = false;	/* not known here */
		job->loss = DML_LOSS_MSE;
		job->noutputs = 1;
		job->label_type = t;
		return;
	}

	/* classification or regression */
	if (job->kind == DML_KIND_LINEAR)
		job->classification = false;
	else if (job->kind != DML_KIND_AUTO && job->kind != DML_KIND_MLP)
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
		if (job->label_keys &&
			(job->kind == DML_KIND_LOGISTIC ||
			 (job->kind == DML_KIND_SOFTMAX && optimizer != NULL &&
			  dml_job_parse(DML_NAMES_OPTIMIZER, optimizer) != DML_JOB_OPT_NEWTON)))
		{
			/*
			 * Integer or boolean labels of a model whose shape does not
			 * depend on how many there are (logistic has 2, or the
			 * optimizer is named): the workers list them while they load,
			 * which spares a scan of the table here (set_classes checks
			 * their list when it comes back).
			 */
			job->discover_classes = true;
			job->loss = job->kind == DML_KIND_LOGISTIC ? DML_LOSS_BCE : DML_LOSS_SOFTMAX;
			job->noutputs = job->kind == DML_KIND_LOGISTIC ? 1 : 0;
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
		if (job->kind == DML_KIND_AUTO)
			job->kind = DML_KIND_LINEAR;
		job->target.expr = psprintf("%s::float8", quote_identifier(job->target.name));
		job->loss = DML_LOSS_MSE;
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
	/* exact least squares and Newton's logistic and softmax read float64 rows: dml.pack_rows64 */
	job->pack_wide = (job->optimizer == DML_JOB_OPT_EXACT && !job->classification) ||
		job->optimizer == DML_JOB_OPT_NEWTON;
	if (job->load_copy)
		return;
	/* dml.pack_rows takes its state, the target and the features as arguments */
	if (list_length(job->features) + 2 > FUNC_MAX_ARGS)
		return;
	foreach(lc, job->features)
		if (((DmlFeature *) lfirst(lc))->kind != DML_FEAT_NUM)
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


/*
 * A plain table's rows visible to the statement's snapshot, counted up to
 * limit by the table's own scan, or -1 where SQL must count them: another
 * kind of relation, row-level security on, or no table-wide SELECT (the
 * query then applies the column privileges, or fails as it should).  The
 * same count as SPI's "SELECT count(*) FROM (SELECT FROM t LIMIT n)"
 * (93 ms for a million rows, on the path of every dml_train), without the
 * executor's Limit and Aggregate nodes over the scan.
 */
static int64
count_rows_scan(Oid relid, int64 limit)
{
	Relation	rel;
	TableScanDesc scan;
	TupleTableSlot *slot;
	int64		n = 0;
	char		kind = get_rel_relkind(relid);

	if ((kind != RELKIND_RELATION && kind != RELKIND_MATVIEW) || !ActiveSnapshotSet() ||
		check_enable_rls(relid, InvalidOid, true) != RLS_NONE ||
		pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		return -1;
	rel = table_open(relid, AccessShareLock);
	/* no synchronized start: the same rows each time */
	scan = table_beginscan_strat(rel, GetActiveSnapshot(), 0, NULL, true, false);
	slot = table_slot_create(rel, NULL);
	while (n < limit && table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		if ((++n & 0xffff) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	return n;
}

/* rows of the relation, counted up to limit (a bounded scan) */
static int64
count_rows_upto(Oid relid, int64 limit)
{
	int64		sharded;
	int64		n;

	if (DmlShardsCountRows(relid, limit, &sharded))
		return sharded;			/* counted on each shard's server */
	if (rel_facts_hold(relid) && rel_facts.count_limit == limit)
		return rel_facts.count;
	n = count_rows_scan(relid, limit);
	if (n < 0)
	{
		if (SPI_execute(psprintf("SELECT count(*) FROM (SELECT FROM %s LIMIT " INT64_FORMAT ") s",
								 rel_sql_name(relid), limit), true, 1) != SPI_OK_SELECT ||
			SPI_processed != 1)
			elog(ERROR, "dml: counting the rows failed");
		n = pg_strtoint64(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
	}
	if (ActiveSnapshotSet())
	{
		rel_facts_take(relid);
		rel_facts.count_limit = limit;
		rel_facts.count = n;
	}
	return n;
}

/*
 * The defaults that depend on the kind of model and the size of the data:
 * the optimizer, learning rate, epochs (or the convergence budget),
 * patience, tolerance and weight_decay.
 */
static void
choose_optimizer(DmlJob *job, const char *optimizer, FunctionCallInfo fcinfo)
{
	bool		linear = job->kind == DML_KIND_LINEAR;
	bool		glm = job->kind == DML_KIND_LOGISTIC || job->kind == DML_KIND_SOFTMAX;
	int			nparams = (job->ninputs + 1) * job->noutputs;
	int64		bound;
	int64		rows;
	bool		auto_epochs = PG_ARGISNULL(10);

	/*
	 * The rows the choices below depend on are counted, and no more: a
	 * table small enough to fit in the server (rows x inputs within
	 * DML_FIT_MAX_VALUES), and for an MLP whether it trains full-batch.
	 * Below the bound the count is exact.  At or above it, the default
	 * weight_decay of logistic and softmax regression (a penalty over the
	 * rows) is worked out by the workers from the rows they read, which
	 * are the same rows: counting all of a million-row table here took
	 * 80-120 ms before the job started, 5% of a default logistic job.
	 */
	bound = DML_FIT_MAX_VALUES / Max(job->ninputs, 1) + 1;
	if (job->kind == DML_KIND_MLP)
		bound = Max(bound, DML_LBFGS_MAX_ROWS + 1);
	bound = Min(bound, DML_PENALTY_MAX_ROWS);
	rows = count_rows_upto(job->relid, bound);

	job->rows = rows;
	if (optimizer == NULL)
	{
		bool		small = (double) rows * job->ninputs <= DML_FIT_MAX_VALUES;
		/* a learning rate or batch size asks for minibatches */
		bool		minibatch = !PG_ARGISNULL(8) || !PG_ARGISNULL(9);
		/* class_weight and l1_ratio (27, 28) are L-BFGS's, not Newton's or exact's */
		bool		lbfgs_only = (PG_NARGS() > 27 && !PG_ARGISNULL(27)) ||
			(PG_NARGS() > 28 && !PG_ARGISNULL(28) && PG_GETARG_FLOAT8(28) > 0);

		if (lbfgs_only && (linear || glm))
			optimizer = minibatch ? "adam" : "lbfgs";
		else if (linear && job->ninputs <= DML_EXACT_MAX_INPUTS)
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
		job->epochs = DML_DEFAULT_LBFGS_ITERS * (job->kind == DML_KIND_MLP ? 2 : 1);
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
	 * Minibatch training without epochs cuts its learning rate tenfold
	 * when the watched loss has stalled for half the patience (schedule
	 * plateau), so patience ends a training only after a smaller step has
	 * had its chance too.  options may name another schedule.
	 */
	if (auto_epochs && job->optimizer != DML_JOB_OPT_EXACT &&
		job->optimizer != DML_JOB_OPT_NEWTON && job->optimizer != DML_JOB_OPT_LBFGS)
	{
		job->schedule = DML_SCHED_PLATEAU;
		job->step_size = Max((job->patience > 0 ? job->patience : DML_DEFAULT_PATIENCE) / 2, 1);
	}

	/*
	 * weight_decay: for logistic and softmax regression 0.1 / rows, which
	 * is scikit-learn's LogisticRegression with C = 10 (its penalty is the
	 * squared weights over 2C beside the summed loss; ours weight_decay / 2
	 * beside the mean loss).  Its default C = 1 acts on raw features; on
	 * standardized ones (ours) C = 1 cost a test row of iris in the dataset
	 * battery and C = 10 none elsewhere (bench/datasets.py).  A penalty
	 * keeps a separable problem's weights finite.  None for linear
	 * regression and MLPs trained by L-BFGS (scikit-learn's
	 * LinearRegression; MLPClassifier's alpha 1e-4 is divided by the rows).
	 * Spark's regParam defaults to 0.  An MLP trained by minibatches to
	 * convergence gets DML_DEFAULT_MLP_DECAY, the classic L2 weight decay
	 * of image classifiers (AlexNet's and VGG's 5e-4, the same coupled
	 * penalty as PyTorch's SGD weight_decay): stopped on its validation
	 * loss, an unpenalized network turns over-confident, its loss rises
	 * while its accuracy still improves, and it stops early.  On
	 * Fashion-MNIST's default MLP (seeds 42, 7, 1) test accuracy went from
	 * 0.885, 0.883, 0.884 to 0.891, 0.889, 0.888, in some 40 epochs
	 * instead of 25-29.
	 */
	job->weight_decay_rows = 0;
	if (PG_ARGISNULL(11))
	{
		if (!(glm && (job->optimizer == DML_JOB_OPT_NEWTON || job->optimizer == DML_JOB_OPT_LBFGS)))
			job->weight_decay = job->kind == DML_KIND_MLP && auto_epochs &&
				job->optimizer != DML_JOB_OPT_LBFGS ? DML_DEFAULT_MLP_DECAY : 0;
		else if (rows < bound)
			job->weight_decay = DML_DEFAULT_GLM_PENALTY / (double) Max(rows, 1);
		else
		{
			/* the count stopped (bound <= DML_PENALTY_MAX_ROWS): the workers' count */
			job->weight_decay_rows = DML_DEFAULT_GLM_PENALTY;
			job->weight_decay = DML_DEFAULT_GLM_PENALTY / (double) DML_PENALTY_MAX_ROWS;
		}
	}
}

/* the network's shape: hidden layers for an MLP */
static void
choose_shape(DmlJob *job, const char *model, FunctionCallInfo fcinfo)
{
	if (job->kind == DML_KIND_MLP || !PG_ARGISNULL(5))
	{
		if (dml_job_parse(DML_NAMES_KIND, model) != DML_KIND_AUTO && job->kind != DML_KIND_MLP &&
			!PG_ARGISNULL(5))
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
		job->kind = DML_KIND_MLP;
	}
}

/*
 * The plan, step by step: each step may raise the user's error, in the
 * order the regress tests expect.
 */
void
train_plan(DmlJob *job, TrainArgs *args, FunctionCallInfo fcinfo)
{
	/* 27 class_weight, 28 l1_ratio (issue 15) */
	char	   *class_weight = PG_NARGS() > 27 && !PG_ARGISNULL(27) ?
		text_to_cstring(PG_GETARG_TEXT_PP(27)) : NULL;

	choose_kind(job, args->model, args->optimizer, class_weight != NULL);
	train_prepare_features(job);
	choose_shape(job, args->model, fcinfo);
	check_model_size(job);
	choose_optimizer(job, args->optimizer, fcinfo);
	apply_options(job, PG_ARGISNULL(18) ? NULL : PG_GETARG_JSONB_P(18));
	DmlCheckCovType(job);
	DmlClassWeight(job, class_weight);
	DmlCheckL1Ratio(job, PG_NARGS() > 28 && !PG_ARGISNULL(28) ? PG_GETARG_FLOAT8(28) : 0);
	choose_sync(job, fcinfo);
	if (job->discover_classes && job->servers > 0)
	{
		/* parameter servers size the model before any data is read */
		job->discover_classes = false;
		set_classes(job, target_classes(job->relid, &job->target, DML_MAX_CLASSES + 1));
	}
	choose_packing(job);
}
