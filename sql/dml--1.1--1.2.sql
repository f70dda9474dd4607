/* dml 1.1 -> 1.2 */

\echo Use "ALTER EXTENSION dml UPDATE TO '1.2'" to load this file. \quit

/*
 * Each issue's schema changes of the third wave, in the order they landed,
 * each section opened by a comment naming its issue.  sql/dml.sql is the
 * whole 1.2 install script; regress/t/upgrade.sh checks that an install
 * updated from 1.0 (through 1.1) has the same objects as a fresh one.
 */

/*
 * Issue 22: softmax regression by Newton has statistics too, one equation
 * per class against the first class; dml_summary says which (class).
 */
DROP FUNCTION @extschema@.dml_summary(text);
CREATE FUNCTION @extschema@.dml_summary(model text)
RETURNS TABLE (term text, coefficient float8, std_error float8, statistic float8,
			   p_value float8, odds_ratio float8, class text)
AS 'MODULE_PATHNAME', 'dml_summary'
LANGUAGE C STABLE STRICT;

/*
 * Issue 15: class_weight ('balanced', or a JSON object of label -> weight)
 * for classification, and l1_ratio (elastic net by OWL-QN), dml_train's
 * 28th and 29th arguments and dml_train_async's.
 */
DROP FUNCTION @extschema@.dml_train(text, regclass, text, text[], text, integer[], text, text,
	float8, integer, integer, float8, float8, integer, text, integer, text, bigint, jsonb, text,
	integer, integer, integer, text, float8, float8, text[]);
CREATE FUNCTION @extschema@.dml_train(
	name			text,
	relation		regclass,
	target			text,
	features		text[] DEFAULT NULL,
	model			text DEFAULT 'auto',
	hidden			integer[] DEFAULT NULL,
	activation		text DEFAULT 'relu',
	optimizer		text DEFAULT NULL,
	learning_rate	float8 DEFAULT NULL,
	batch_size		integer DEFAULT NULL,
	epochs			integer DEFAULT NULL,
	weight_decay	float8 DEFAULT NULL,
	validation		float8 DEFAULT NULL,
	patience		integer DEFAULT NULL,
	nulls			text DEFAULT 'error',
	workers			integer DEFAULT NULL,
	device			text DEFAULT NULL,
	seed			bigint DEFAULT 42,
	options			jsonb DEFAULT '{}',
	sync			text DEFAULT 'allreduce',
	servers			integer DEFAULT NULL,
	staleness		integer DEFAULT 0,
	average_every	integer DEFAULT 1,
	compression		text DEFAULT 'none',
	topk_ratio		float8 DEFAULT 0.01,
	max_seconds		float8 DEFAULT NULL,
	hosts			text[] DEFAULT NULL,
	class_weight	text DEFAULT NULL,
	l1_ratio		float8 DEFAULT NULL)
RETURNS dml.train_result
AS 'MODULE_PATHNAME', 'dml_train'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

DROP FUNCTION @extschema@.dml_train_async(text, regclass, text, text[], text, integer[], text, text,
	float8, integer, integer, float8, float8, integer, text, integer, text, bigint, jsonb, text,
	integer, integer, integer, text, float8, float8, text[]);
CREATE FUNCTION @extschema@.dml_train_async(
	name			text,
	relation		regclass,
	target			text,
	features		text[] DEFAULT NULL,
	model			text DEFAULT 'auto',
	hidden			integer[] DEFAULT NULL,
	activation		text DEFAULT 'relu',
	optimizer		text DEFAULT NULL,
	learning_rate	float8 DEFAULT NULL,
	batch_size		integer DEFAULT NULL,
	epochs			integer DEFAULT NULL,
	weight_decay	float8 DEFAULT NULL,
	validation		float8 DEFAULT NULL,
	patience		integer DEFAULT NULL,
	nulls			text DEFAULT 'error',
	workers			integer DEFAULT NULL,
	device			text DEFAULT NULL,
	seed			bigint DEFAULT 42,
	options			jsonb DEFAULT '{}',
	sync			text DEFAULT 'allreduce',
	servers			integer DEFAULT NULL,
	staleness		integer DEFAULT 0,
	average_every	integer DEFAULT 1,
	compression		text DEFAULT 'none',
	topk_ratio		float8 DEFAULT 0.01,
	max_seconds		float8 DEFAULT NULL,
	hosts			text[] DEFAULT NULL,
	class_weight	text DEFAULT NULL,
	l1_ratio		float8 DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dml_train_async'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

/* ---- issue 19: a job's owner is a regrole, as the other role columns ---- */

/*
 * A dump then names the job's owner, so a restore into a cluster where the
 * role has another oid keeps it.  dml.jobs reads the column and dml_wait
 * returns the view's row type: both are made again around the change.
 */
DROP FUNCTION @extschema@.dml_wait(bigint, interval);
DROP VIEW dml.jobs;
ALTER TABLE dml.job_runs ALTER COLUMN owner TYPE regrole;

/*
 * dml.jobs: the jobs the calling role may see, with the live epoch, loss
 * and time left of running ones from dml.progress.  A running job whose
 * process is gone reads as failed, with the reason.
 */
CREATE VIEW dml.jobs WITH (security_barrier) AS
SELECT j.id, j.name, j.owner,
	   CASE WHEN l.lost IS NOT NULL THEN 'failed' ELSE j.state END AS state,
	   j.args, j.submitted, j.started,
	   CASE WHEN l.lost IS NOT NULL THEN NULL ELSE j.finished END AS finished,
	   COALESCE(p.epoch, j.epoch) AS epoch, COALESCE(p.epochs, j.epochs) AS epochs,
	   COALESCE(p.loss, j.loss) AS loss,
	   COALESCE(p.metric, j.metric) AS metric,
	   COALESCE(p.rows_per_second, j.rows_per_second) AS rows_per_second,
	   p.eta, j.model_id, j.resumes,
	   COALESCE(l.lost, j.error_message) AS error_message,
	   j.error_detail,
	   CASE WHEN l.lost IS NOT NULL THEN '57P01' ELSE j.error_sqlstate END AS error_sqlstate
FROM dml.job_runs j
LEFT JOIN dml.progress_rows() p ON p.job = j.id AND j.state = 'running'
LEFT JOIN LATERAL (SELECT CASE WHEN j.state = 'running'
						  THEN dml.job_lost(j.pid, j.owner, j.server_started) END AS lost) l ON true
WHERE dml.job_visible(j.owner);

/* wait until a job ends (or timeout passes) and return its row */
CREATE FUNCTION @extschema@.dml_wait(job bigint, timeout interval DEFAULT NULL)
RETURNS dml.jobs
AS 'MODULE_PATHNAME', 'dml_wait' LANGUAGE C VOLATILE PARALLEL UNSAFE;

GRANT SELECT ON dml.jobs TO PUBLIC;

/* ---- issue 16: the step within the epoch, a job's epochs while it runs ---- */

/*
 * dml.progress_rows gives step and steps: its row type changes, so it is
 * made again with the views that read it, and dml_wait, which returns
 * dml.jobs' row type.
 */
DROP FUNCTION @extschema@.dml_wait(bigint, interval);
DROP VIEW dml.jobs;
DROP VIEW dml.progress;
DROP FUNCTION dml.progress_rows();

/* every training running in the cluster, from shared memory */
CREATE FUNCTION dml.progress_rows(
	OUT pid integer, OUT job bigint, OUT database oid, OUT owner oid, OUT name text,
	OUT phase text, OUT ranks integer, OUT hosts text, OUT epoch integer,
	OUT epochs integer, OUT restarts integer, OUT loss float8, OUT metric float8,
	OUT rows_per_second float8, OUT started timestamptz, OUT updated timestamptz,
	OUT eta interval, OUT step integer, OUT steps integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dml_progress' LANGUAGE C VOLATILE;

/*
 * dml.progress: one row per running training (dml_train or a job) that the
 * calling role may see: its own and those of roles whose privileges it
 * has; every one with pg_read_all_stats.  epoch is the last finished one;
 * step of steps is how far rank 0 is into the next (NULL until it says,
 * and for the solvers that take whole passes: exact, Newton, L-BFGS).
 */
CREATE VIEW dml.progress AS
SELECT p.pid, p.job, d.datname AS database, p.owner::regrole AS owner, p.name, p.phase,
	   p.ranks, p.hosts, p.epoch, p.epochs, p.restarts, p.loss, p.metric,
	   p.rows_per_second, p.started, p.updated, p.eta, p.step, p.steps
FROM dml.progress_rows() p
LEFT JOIN pg_catalog.pg_database d ON d.oid = p.database;

/*
 * dml.jobs: the jobs the calling role may see, with the live epoch, loss
 * and time left of running ones from dml.progress.  A running job whose
 * process is gone reads as failed, with the reason.
 */
CREATE VIEW dml.jobs WITH (security_barrier) AS
SELECT j.id, j.name, j.owner,
	   CASE WHEN l.lost IS NOT NULL THEN 'failed' ELSE j.state END AS state,
	   j.args, j.submitted, j.started,
	   CASE WHEN l.lost IS NOT NULL THEN NULL ELSE j.finished END AS finished,
	   COALESCE(p.epoch, j.epoch) AS epoch, COALESCE(p.epochs, j.epochs) AS epochs,
	   COALESCE(p.loss, j.loss) AS loss,
	   COALESCE(p.metric, j.metric) AS metric,
	   COALESCE(p.rows_per_second, j.rows_per_second) AS rows_per_second,
	   p.eta, j.model_id, j.resumes,
	   COALESCE(l.lost, j.error_message) AS error_message,
	   j.error_detail,
	   CASE WHEN l.lost IS NOT NULL THEN '57P01' ELSE j.error_sqlstate END AS error_sqlstate
FROM dml.job_runs j
LEFT JOIN dml.progress_rows() p ON p.job = j.id AND j.state = 'running'
LEFT JOIN LATERAL (SELECT CASE WHEN j.state = 'running'
						  THEN dml.job_lost(j.pid, j.owner, j.server_started) END AS lost) l ON true
WHERE dml.job_visible(j.owner);

/* wait until a job ends (or timeout passes) and return its row */
CREATE FUNCTION @extschema@.dml_wait(job bigint, timeout interval DEFAULT NULL)
RETURNS dml.jobs
AS 'MODULE_PATHNAME', 'dml_wait' LANGUAGE C VOLATILE PARALLEL UNSAFE;

/*
 * A job's dml.epochs rows, for the roles that may see the job: while it
 * runs, each epoch's row as soon as the epoch ends (dml.epochs has them
 * only once the job's model commits); once it succeeded, its model's rows.
 */
CREATE FUNCTION @extschema@.dml_job_epochs(job bigint,
	OUT restarts integer, OUT epoch integer, OUT loss float8, OUT val_loss float8,
	OUT val_metric float8, OUT rows_per_second float8, OUT seconds float8,
	OUT bytes_sent bigint, OUT staleness integer, OUT recorded timestamptz,
	OUT stopped text, OUT bytes_within bigint, OUT bytes_across bigint, OUT hosts text[])
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dml_job_epochs' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

GRANT EXECUTE ON FUNCTION dml.progress_rows() TO PUBLIC;
GRANT SELECT ON dml.jobs, dml.progress TO PUBLIC;

/* ---- issue 17: model selection (dml_tune, dml.trials, dml_trials) ---- */

/*
 * dml.trials: one row per trial of every dml_tune search: the arguments
 * it varied, its state (finished, stopped early by halving, failed), the
 * metric it was judged on, its epochs and the per-epoch figures of its
 * last run, and its model while one is kept.  Read through dml_trials
 * (the caller's own searches and those of roles whose privileges it has);
 * the C functions write it as the extension's owner.
 */
CREATE SEQUENCE dml.trials_search_seq;

CREATE TABLE dml.trials (
	search_id		bigint NOT NULL,
	trial			integer NOT NULL CHECK (trial > 0),
	name			text NOT NULL,
	owner			regrole NOT NULL,
	strategy		text NOT NULL CHECK (strategy IN ('grid', 'random', 'halving')),
	arguments		jsonb NOT NULL,
	state			text NOT NULL CHECK (state IN ('finished', 'stopped early', 'failed')),
	metric_name		text NOT NULL,
	metric			float8,
	epochs			integer,
	seconds			float8 NOT NULL,
	model_id		bigint,			/* kept: the model of this trial (keep => 'all', or the best) */
	epoch_metrics	jsonb,			/* [{epoch, loss, val_loss, val_metric, seconds}, ...] */
	error			text,			/* failed: why */
	created			timestamptz NOT NULL DEFAULT clock_timestamp(),
	PRIMARY KEY (search_id, trial)
);
REVOKE ALL ON dml.trials FROM PUBLIC;
REVOKE ALL ON SEQUENCE dml.trials_search_seq FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('dml.trials', '');
SELECT pg_catalog.pg_extension_config_dump('dml.trials_search_seq', '');

CREATE VIEW @extschema@.dml_trials WITH (security_barrier) AS
SELECT t.search_id, t.trial, t.name, t.owner, t.strategy, t.arguments, t.state,
	   t.metric_name, t.metric, t.epochs, t.seconds, t.model_id, m.version,
	   t.epoch_metrics, t.error, t.created
FROM dml.trials t
LEFT JOIN dml.models m ON m.id = t.model_id
WHERE dml.job_visible(t.owner::oid);
GRANT SELECT ON @extschema@.dml_trials TO PUBLIC;

/*
 * dml_tune: train the configurations search describes (grid, random or
 * successive halving) with dml_train's other arguments fixed, keep the
 * best as the next version of name and deploy it; one row per trial,
 * best first.
 */
CREATE FUNCTION @extschema@.dml_tune(
	name			text,
	relation		regclass,
	target			text,
	features		text[] DEFAULT NULL,
	model			text DEFAULT 'auto',
	search			jsonb DEFAULT NULL,
	strategy		text DEFAULT 'grid',
	trials			integer DEFAULT NULL,
	metric			text DEFAULT NULL,
	validation		float8 DEFAULT 0.2,
	hidden			integer[] DEFAULT NULL,
	activation		text DEFAULT 'relu',
	optimizer		text DEFAULT NULL,
	learning_rate	float8 DEFAULT NULL,
	batch_size		integer DEFAULT NULL,
	epochs			integer DEFAULT NULL,
	weight_decay	float8 DEFAULT NULL,
	patience		integer DEFAULT NULL,
	nulls			text DEFAULT 'error',
	workers			integer DEFAULT NULL,
	device			text DEFAULT NULL,
	seed			bigint DEFAULT 42,
	options			jsonb DEFAULT '{}',
	sync			text DEFAULT 'allreduce',
	servers			integer DEFAULT NULL,
	staleness		integer DEFAULT 0,
	average_every	integer DEFAULT 1,
	compression		text DEFAULT 'none',
	topk_ratio		float8 DEFAULT 0.01,
	max_seconds		float8 DEFAULT NULL,
	hosts			text[] DEFAULT NULL,
	keep			text DEFAULT 'best',
	class_weight	text DEFAULT NULL,
	l1_ratio		float8 DEFAULT NULL)
RETURNS TABLE (search_id bigint, trial integer, arguments jsonb, metric_value float8,
			   epochs_run integer, seconds float8, state text, model_id bigint, version integer)
AS 'MODULE_PATHNAME', 'dml_tune'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

/* a background job runs dml_train or, for dml_tune_async, dml_tune */
ALTER TABLE dml.job_runs ADD COLUMN function text NOT NULL DEFAULT 'dml_train'
	CHECK (function IN ('dml_train', 'dml_tune'));

/*
 * dml_tune_async: dml_tune's arguments; queues the search as a background
 * job (dml.job_runs.function 'dml_tune') and returns the job id.  Its
 * trials show in dml.progress (phase "trial i of n") as they run.
 */
CREATE FUNCTION @extschema@.dml_tune_async(
	name			text,
	relation		regclass,
	target			text,
	features		text[] DEFAULT NULL,
	model			text DEFAULT 'auto',
	search			jsonb DEFAULT NULL,
	strategy		text DEFAULT 'grid',
	trials			integer DEFAULT NULL,
	metric			text DEFAULT NULL,
	validation		float8 DEFAULT 0.2,
	hidden			integer[] DEFAULT NULL,
	activation		text DEFAULT 'relu',
	optimizer		text DEFAULT NULL,
	learning_rate	float8 DEFAULT NULL,
	batch_size		integer DEFAULT NULL,
	epochs			integer DEFAULT NULL,
	weight_decay	float8 DEFAULT NULL,
	patience		integer DEFAULT NULL,
	nulls			text DEFAULT 'error',
	workers			integer DEFAULT NULL,
	device			text DEFAULT NULL,
	seed			bigint DEFAULT 42,
	options			jsonb DEFAULT '{}',
	sync			text DEFAULT 'allreduce',
	servers			integer DEFAULT NULL,
	staleness		integer DEFAULT 0,
	average_every	integer DEFAULT 1,
	compression		text DEFAULT 'none',
	topk_ratio		float8 DEFAULT 0.01,
	max_seconds		float8 DEFAULT NULL,
	hosts			text[] DEFAULT NULL,
	keep			text DEFAULT 'best',
	class_weight	text DEFAULT NULL,
	l1_ratio		float8 DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dml_tune_async'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
