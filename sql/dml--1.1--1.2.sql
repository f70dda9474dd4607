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
