/* dml 1.1 -> 1.2 */

\echo Use "ALTER EXTENSION dml UPDATE TO '1.2'" to load this file. \quit

/*
 * Each issue's schema changes of the third wave, in the order they landed,
 * each section opened by a comment naming its issue.  sql/dml.sql is the
 * whole 1.2 install script; regress/t/upgrade.sh checks that an install
 * updated from 1.0 (through 1.1) has the same objects as a fresh one.
 */

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
	keep			text DEFAULT 'best')
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
	keep			text DEFAULT 'best')
RETURNS bigint
AS 'MODULE_PATHNAME', 'dml_tune_async'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
