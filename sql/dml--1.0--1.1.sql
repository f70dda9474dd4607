/* dml 1.0 -> 1.1 */

\echo Use "ALTER EXTENSION dml UPDATE TO '1.1'" to load this file. \quit

/*
 * Security (ownership): a model name belongs to one role.  Versions that a
 * grantee added under its own name go to the name's first owner; grants
 * and deployments are keyed by the name and its owner, and those of names
 * without versions go.  dml_grant takes details => false to share a model
 * for prediction only.
 */
UPDATE dml.models m SET owner = f.owner
FROM (SELECT DISTINCT ON (name) name, owner FROM dml.models ORDER BY name, version) f
WHERE m.name = f.name AND m.owner <> f.owner;

ALTER TABLE dml.deployments ADD COLUMN owner oid;
UPDATE dml.deployments d SET owner = m.owner FROM dml.models m WHERE m.name = d.name;
DELETE FROM dml.deployments WHERE owner IS NULL;
ALTER TABLE dml.deployments ALTER COLUMN owner SET NOT NULL,
	DROP CONSTRAINT deployments_pkey, ADD PRIMARY KEY (name, owner);

ALTER TABLE dml.grants ADD COLUMN owner oid,
	ADD COLUMN details boolean NOT NULL DEFAULT true;
UPDATE dml.grants g SET owner = m.owner FROM dml.models m WHERE m.name = g.name;
DELETE FROM dml.grants WHERE owner IS NULL;
ALTER TABLE dml.grants ALTER COLUMN owner SET NOT NULL,
	DROP CONSTRAINT grants_pkey, ADD PRIMARY KEY (name, owner, grantee);

DROP FUNCTION @extschema@.dml_grant(text, regrole);
CREATE FUNCTION @extschema@.dml_grant(name text, role regrole, details boolean DEFAULT true)
RETURNS void
AS 'MODULE_PATHNAME', 'dml_grant'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION dml.can_see_details(owner oid, name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dml_can_see_details'
LANGUAGE C STABLE STRICT PARALLEL SAFE;
GRANT EXECUTE ON FUNCTION dml.can_see_details(oid, text) TO PUBLIC;

CREATE OR REPLACE VIEW @extschema@.dml_models AS
SELECT m.id, m.name, m.version, m.owner::regrole AS owner, m.kind, m.device,
	   CASE WHEN dml.can_see_details(m.owner, m.name) THEN m.spec -> 'features'
			ELSE (SELECT jsonb_agg(jsonb_build_object('name', f -> 'name', 'kind', f -> 'kind'))
				  FROM jsonb_array_elements(m.spec -> 'features') f) END AS features,
	   m.spec -> 'classes' AS classes,
	   m.created,
	   (d.version IS NOT DISTINCT FROM m.version OR
		(d.version IS NULL AND m.version = (SELECT max(version) FROM dml.models m2
											WHERE m2.name = m.name))) AS deployed,
	   CASE WHEN dml.can_see_details(m.owner, m.name) THEN m.metrics END AS metrics
FROM dml.models m
LEFT JOIN dml.deployments d ON d.name = m.name AND d.owner = m.owner
WHERE dml.can_use(m.owner, m.name);

CREATE OR REPLACE VIEW @extschema@.dml_epochs AS
SELECT m.name, m.version, e.restarts, e.epoch, e.loss, e.val_loss, e.val_metric,
	   e.rows_per_second, e.seconds, e.bytes_sent, e.staleness, e.recorded
FROM dml.epochs e JOIN dml.models m ON m.id = e.model_id
WHERE dml.can_see_details(m.owner, m.name);

/*
 * Issue 14: dml_train takes max_seconds, a time budget for training.
 * Issue 15: training runs to convergence by default and says why it
 * stopped (dml_train's result and the last dml.epochs row: stopped);
 * weight_decay, validation and patience default to NULL, chosen by the
 * model kind and whether epochs is given.
 */
DROP FUNCTION @extschema@.dml_train(text, regclass, text, text[], text, integer[], text, text,
	float8, integer, integer, float8, float8, integer, text, integer, text, bigint, jsonb,
	text, integer, integer, integer, text, float8);
ALTER TYPE dml.train_result ADD ATTRIBUTE stopped text;
ALTER TABLE dml.epochs ADD COLUMN stopped text;
CREATE OR REPLACE VIEW @extschema@.dml_epochs AS
SELECT m.name, m.version, e.restarts, e.epoch, e.loss, e.val_loss, e.val_metric,
	   e.rows_per_second, e.seconds, e.bytes_sent, e.staleness, e.recorded, e.stopped
FROM dml.epochs e JOIN dml.models m ON m.id = e.model_id
WHERE dml.can_see_details(m.owner, m.name);

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
	max_seconds		float8 DEFAULT NULL)
RETURNS dml.train_result
AS 'MODULE_PATHNAME', 'dml_train'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

/* ---------------------------------------------------------------------
 * Background training jobs and live progress (issue 16)
 * --------------------------------------------------------------------- */

/*
 * One row per job of dml_train_async: its arguments exactly as given (the
 * relation also by OID), the dml.* settings of the submitting session,
 * its state and, once it ends, its result or error.  Rows are read through
 * the dml.jobs view; the C functions write them as the extension's owner.
 */
CREATE SEQUENCE dml.jobs_id_seq;

CREATE TABLE dml.job_runs (
	id				bigint PRIMARY KEY DEFAULT nextval('dml.jobs_id_seq'),
	name			text NOT NULL,
	owner			oid NOT NULL,
	state			text NOT NULL DEFAULT 'queued'
					CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
	relation		oid NOT NULL,
	args			jsonb NOT NULL,
	settings		jsonb NOT NULL DEFAULT '{}',
	submitted		timestamptz NOT NULL DEFAULT clock_timestamp(),
	started			timestamptz,
	finished		timestamptz,
	epoch			integer,
	epochs			integer,
	loss			float8,
	metric			float8,
	rows_per_second	float8,
	model_id		bigint,
	resumes			integer NOT NULL DEFAULT 0,	/* times dml_resume queued it again */
	error_message	text,
	error_detail	text,
	error_sqlstate	text,
	pid				integer,		/* the worker that runs it */
	server_started	timestamptz		/* pg_postmaster_start_time() when it started */
);
ALTER SEQUENCE dml.jobs_id_seq OWNED BY dml.job_runs.id;
CREATE INDEX job_runs_open ON dml.job_runs (id) WHERE state IN ('queued', 'running');
REVOKE ALL ON dml.job_runs FROM PUBLIC;
REVOKE ALL ON SEQUENCE dml.jobs_id_seq FROM PUBLIC;

/* pg_dump keeps the history of ended jobs; a restore never shows one as running */
SELECT pg_catalog.pg_extension_config_dump('dml.job_runs',
	$$WHERE state IN ('succeeded', 'failed', 'cancelled')$$);
SELECT pg_catalog.pg_extension_config_dump('dml.jobs_id_seq', '');

/* may the calling role see (and cancel) a job of this owner? */
CREATE FUNCTION dml.job_visible(owner oid) RETURNS boolean
AS 'MODULE_PATHNAME', 'dml_job_visible' LANGUAGE C STABLE STRICT PARALLEL SAFE;

/* NULL while the process running a job lives, else why the job ended */
CREATE FUNCTION dml.job_lost(pid integer, owner oid, server_started timestamptz) RETURNS text
AS 'MODULE_PATHNAME', 'dml_job_lost' LANGUAGE C VOLATILE;

/* every training running in the cluster, from shared memory */
CREATE FUNCTION dml.progress_rows(
	OUT pid integer, OUT job bigint, OUT database oid, OUT owner oid, OUT name text,
	OUT phase text, OUT ranks integer, OUT hosts text, OUT epoch integer,
	OUT epochs integer, OUT restarts integer, OUT loss float8, OUT metric float8,
	OUT rows_per_second float8, OUT started timestamptz, OUT updated timestamptz,
	OUT eta interval)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dml_progress' LANGUAGE C VOLATILE;

/*
 * dml.progress: one row per running training (dml_train or a job) that the
 * calling role may see: its own and those of roles whose privileges it
 * has; every one with pg_read_all_stats.
 */
CREATE VIEW dml.progress AS
SELECT p.pid, p.job, d.datname AS database, p.owner::regrole AS owner, p.name, p.phase,
	   p.ranks, p.hosts, p.epoch, p.epochs, p.restarts, p.loss, p.metric,
	   p.rows_per_second, p.started, p.updated, p.eta
FROM dml.progress_rows() p
LEFT JOIN pg_catalog.pg_database d ON d.oid = p.database;

/*
 * dml.jobs: the jobs the calling role may see, with the live epoch, loss
 * and time left of running ones from dml.progress.  A running job whose
 * process is gone reads as failed, with the reason.
 */
CREATE VIEW dml.jobs WITH (security_barrier) AS
SELECT j.id, j.name, j.owner::regrole AS owner,
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

/* dml_train's arguments; queues the training and returns the job id */
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
	hosts			text[] DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dml_train_async'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

/* queue a failed or cancelled job again, to continue from its checkpoint */
CREATE FUNCTION @extschema@.dml_resume(job bigint) RETURNS bigint
AS 'MODULE_PATHNAME', 'dml_resume' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

/* end a queued or running job; false when it had already ended */
CREATE FUNCTION @extschema@.dml_cancel(job bigint) RETURNS boolean
AS 'MODULE_PATHNAME', 'dml_cancel' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

/* wait until a job ends (or timeout passes) and return its row */
CREATE FUNCTION @extschema@.dml_wait(job bigint, timeout interval DEFAULT NULL)
RETURNS dml.jobs
AS 'MODULE_PATHNAME', 'dml_wait' LANGUAGE C VOLATILE PARALLEL UNSAFE;

GRANT EXECUTE ON FUNCTION dml.job_visible(oid), dml.job_lost(integer, oid, timestamptz),
	dml.progress_rows() TO PUBLIC;
GRANT SELECT ON dml.jobs, dml.progress TO PUBLIC;

/* ---- issue 22: exact models to certified accuracy ---- */

/*
 * dml.qr_cols(y, x1, ..., xd) and dml.qr(ARRAY[y, x1, ..., xd]): the rows
 * as the R factor of [x, 1, y], a parallel aggregate whose states combine
 * as a TSQR reduction tree (the in-server exact solver's pass)
 */
CREATE FUNCTION dml.qr_trans(internal, float8[]) RETURNS internal
AS 'MODULE_PATHNAME', 'dml_qr_trans' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION dml.qr_cols_trans(internal, VARIADIC "any") RETURNS internal
AS 'MODULE_PATHNAME', 'dml_qr_cols_trans' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE AGGREGATE dml.qr(float8[]) (
	SFUNC = dml.qr_trans,
	STYPE = internal,
	COMBINEFUNC = dml.xtx_combine,
	SERIALFUNC = dml.xtx_serialize,
	DESERIALFUNC = dml.xtx_deserialize,
	FINALFUNC = dml.xtx_final,
	PARALLEL = SAFE
);
CREATE AGGREGATE dml.qr_cols(VARIADIC "any") (
	SFUNC = dml.qr_cols_trans,
	STYPE = internal,
	COMBINEFUNC = dml.xtx_combine,
	SERIALFUNC = dml.xtx_serialize,
	DESERIALFUNC = dml.xtx_deserialize,
	FINALFUNC = dml.xtx_final,
	PARALLEL = SAFE
);
GRANT EXECUTE ON FUNCTION dml.qr_trans(internal, float8[]), dml.qr_cols_trans(internal, "any")
	TO PUBLIC;

/*
 * dml.pack_rows64(target, x1, ..., xn): dml.pack_rows with the features in
 * float64, for the workers' load of exact least squares
 */
CREATE FUNCTION dml.pack_rows64_trans(internal, VARIADIC "any") RETURNS internal
AS 'MODULE_PATHNAME', 'dml_pack_rows64_trans' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE AGGREGATE dml.pack_rows64(VARIADIC "any") (
	SFUNC = dml.pack_rows64_trans,
	STYPE = internal,
	FINALFUNC = dml.pack_rows_final
);
GRANT EXECUTE ON FUNCTION dml.pack_rows64_trans(internal, "any") TO PUBLIC;

/*
 * The statistics of an exact fit, as R's summary(lm) and MADlib's
 * linregr_train/logregr_train report them.  dml_summary: one row per
 * coefficient, the intercept first, on the raw scale of the features;
 * statistic is t for least squares and z for logistic regression;
 * odds_ratio = exp(coefficient) for logistic regression, else NULL.
 * dml_summary_fit: one row of model-level figures.  Both read the
 * deployed (else newest) version, with dml_predict's access rule.
 */
CREATE FUNCTION @extschema@.dml_summary(model text)
RETURNS TABLE (term text, coefficient float8, std_error float8, statistic float8,
			   p_value float8, odds_ratio float8)
AS 'MODULE_PATHNAME', 'dml_summary'
LANGUAGE C STABLE STRICT;

CREATE FUNCTION @extschema@.dml_summary_fit(model text)
RETURNS TABLE (method text, n bigint, df_model float8, df_resid float8, r2 float8,
			   adj_r2 float8, residual_std_error float8, f_statistic float8, f_p_value float8,
			   log_likelihood float8, aic float8, bic float8, condition_number float8)
AS 'MODULE_PATHNAME', 'dml_summary_fit'
LANGUAGE C STABLE STRICT;

/*
 * Training across hosts (issue 23): dml_train takes hosts (a subset of
 * dml.hosts for one job); dml.epochs splits bytes_sent into bytes between
 * ranks on one host and between hosts, and says which host ran each rank.
 */
ALTER TABLE dml.epochs ADD COLUMN bytes_within bigint,
	ADD COLUMN bytes_across bigint,
	ADD COLUMN hosts text[];

CREATE OR REPLACE VIEW @extschema@.dml_epochs AS
SELECT m.name, m.version, e.restarts, e.epoch, e.loss, e.val_loss, e.val_metric,
	   e.rows_per_second, e.seconds, e.bytes_sent, e.staleness, e.recorded, e.stopped,
	   e.bytes_within, e.bytes_across, e.hosts
FROM dml.epochs e JOIN dml.models m ON m.id = e.model_id
WHERE dml.can_see_details(m.owner, m.name);

DROP FUNCTION @extschema@.dml_train(text, regclass, text, text[], text, integer[], text, text,
	float8, integer, integer, float8, float8, integer, text, integer, text, bigint, jsonb,
	text, integer, integer, integer, text, float8, float8);
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
	hosts			text[] DEFAULT NULL)
RETURNS dml.train_result
AS 'MODULE_PATHNAME', 'dml_train'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

/*
 * --- issue 19: the catalog survives pg_dump -------------------------------
 *
 * Role columns become regrole, so a dump writes role names and a restore
 * into another cluster (pg_dumpall) maps them to that cluster's roles; the
 * catalog tables and the id sequence are marked as configuration, so
 * pg_dump dumps their rows.  Views that read a changed column are dropped
 * and made again from their own definition and privileges (whatever an
 * earlier section of this script made of them).
 */
DO $travel$
DECLARE
	v			record;
	views		text[] := '{}';
	defs		text[] := '{}';
	grants		text[] := '{}';
	a			record;
	i			integer;
BEGIN
	FOR v IN
		SELECT DISTINCT c.oid, c.oid::pg_catalog.regclass::text AS qname,
			   pg_catalog.pg_get_viewdef(c.oid) AS def, c.relacl, c.relowner
		FROM pg_catalog.pg_depend d
		JOIN pg_catalog.pg_rewrite r ON d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass
			AND r.oid = d.objid
		JOIN pg_catalog.pg_class c ON c.oid = r.ev_class
		JOIN pg_catalog.pg_attribute att ON att.attrelid = d.refobjid AND att.attnum = d.refobjsubid
		WHERE d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass
		  AND c.oid <> d.refobjid
		  AND ((d.refobjid = 'dml.models'::pg_catalog.regclass AND att.attname = 'owner') OR
			   (d.refobjid = 'dml.deployments'::pg_catalog.regclass AND att.attname = 'owner') OR
			   (d.refobjid = 'dml.grants'::pg_catalog.regclass AND att.attname IN ('owner', 'grantee')))
	LOOP
		views := views || v.qname;
		defs := defs || v.def;
		FOR a IN SELECT * FROM pg_catalog.aclexplode(v.relacl) x WHERE x.grantee <> v.relowner
		LOOP
			grants := grants || pg_catalog.format('GRANT %s ON %s TO %s', a.privilege_type, v.qname,
				CASE WHEN a.grantee = 0 THEN 'PUBLIC'
					 ELSE a.grantee::pg_catalog.regrole::text END);
		END LOOP;
		EXECUTE pg_catalog.format('DROP VIEW %s', v.qname);
	END LOOP;

	ALTER TABLE dml.models ALTER COLUMN owner TYPE pg_catalog.regrole;
	ALTER TABLE dml.deployments ALTER COLUMN owner TYPE pg_catalog.regrole;
	ALTER TABLE dml.grants ALTER COLUMN grantee TYPE pg_catalog.regrole,
		ALTER COLUMN owner TYPE pg_catalog.regrole;

	FOR i IN 1 .. pg_catalog.array_length(views, 1) LOOP
		EXECUTE pg_catalog.format('CREATE VIEW %s AS %s', views[i], defs[i]);
	END LOOP;
	FOR i IN 1 .. pg_catalog.array_length(grants, 1) LOOP
		EXECUTE grants[i];
	END LOOP;
END
$travel$;

/*
 * Weights are float32s that pglz cannot shrink: kept out of line without
 * trying (the try cost 45 ms on each 1 MB model stored).
 */
ALTER TABLE dml.models ALTER COLUMN weights SET STORAGE EXTERNAL;

SELECT pg_catalog.pg_extension_config_dump('dml.models', '');
SELECT pg_catalog.pg_extension_config_dump('dml.models_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('dml.epochs', '');
SELECT pg_catalog.pg_extension_config_dump('dml.deployments', '');
SELECT pg_catalog.pg_extension_config_dump('dml.grants', '');

/* --- issue 19: models out of and into dml (export.c) ---------------------- */
/*
 * A model version out of and into dml: ONNX (opset 13), or dml's own
 * package for moving a model between dml databases (export.c)
 */
CREATE FUNCTION @extschema@.dml_export(model text, format text DEFAULT 'onnx')
RETURNS bytea
AS 'MODULE_PATHNAME', 'dml_export'
LANGUAGE C STABLE STRICT;

CREATE FUNCTION @extschema@.dml_import(
	name		text,
	data		bytea,
	format		text DEFAULT 'onnx',
	inputs		text[] DEFAULT NULL,
	classes		text[] DEFAULT NULL,
	target		text DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'dml_import'
LANGUAGE C VOLATILE CALLED ON NULL INPUT;
