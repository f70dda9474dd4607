/* dml: distributed machine learning inside PostgreSQL */

\echo Use "CREATE EXTENSION dml" to load this file. \quit

/*
 * The catalog lives in schema dml; the functions and the dml_models view
 * live in the extension's schema (@extschema@, public by default).
 *
 * Nobody but the extension's owner can read or write the catalog tables:
 * the C functions touch them as that owner, after checking the caller's
 * rights on the model (owner, member of the owner, or granted), and roles
 * see their models through the dml_models view.
 */
CREATE SCHEMA dml;
REVOKE ALL ON SCHEMA dml FROM PUBLIC;

CREATE SEQUENCE dml.models_id_seq;

CREATE TABLE dml.models (
	id			bigint PRIMARY KEY DEFAULT nextval('dml.models_id_seq'),
	name		text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
	version		integer NOT NULL CHECK (version > 0),
	owner		regrole NOT NULL,	/* regrole: a dump names the role, not its oid */
	created		timestamptz NOT NULL DEFAULT now(),
	kind		text NOT NULL,
	device		text NOT NULL,
	spec		jsonb NOT NULL,
	weights		bytea NOT NULL,
	metrics		jsonb NOT NULL DEFAULT '{}',
	UNIQUE (name, version)
);
ALTER SEQUENCE dml.models_id_seq OWNED BY dml.models.id;
/*
 * Weights are float32s that pglz cannot shrink: kept out of line without
 * trying (the try cost 45 ms on each 1 MB model stored).
 */
ALTER TABLE dml.models ALTER COLUMN weights SET STORAGE EXTERNAL;

CREATE TABLE dml.epochs (
	model_id	bigint NOT NULL REFERENCES dml.models (id)
				ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
	restarts	integer NOT NULL DEFAULT 0,
	epoch		integer NOT NULL,
	loss		float8,
	val_loss	float8,
	val_metric	float8,
	rows_per_second float8,
	seconds		float8,
	bytes_sent	bigint,
	staleness	integer,		/* ps, ssp, async: most clocks/updates behind */
	recorded	timestamptz NOT NULL DEFAULT clock_timestamp(),
	stopped		text,			/* the last epoch: why training stopped */
	bytes_within bigint,		/* of bytes_sent: between ranks on one host */
	bytes_across bigint,		/* of bytes_sent: between hosts */
	hosts		text[],			/* the host of each rank (rank r at r + 1) */
	PRIMARY KEY (model_id, restarts, epoch)
);

/*
 * A model name belongs to one role, the owner of its versions (every
 * version of a name has the same owner).  Deployments and grants belong to
 * the name and that owner: they go away with the name's last version, and
 * a grant made under one owner never applies to a later model of the same
 * name by another.
 */

/* the version dml_predict uses for a name, when pinned by dml_deploy */
CREATE TABLE dml.deployments (
	name		text NOT NULL,
	version		integer NOT NULL,
	owner		regrole NOT NULL,
	PRIMARY KEY (name, owner)
);

/* roles a model name is shared with, by dml_grant; details: the grantee
 * also sees the spec's statistics, vocabularies and the metrics */
CREATE TABLE dml.grants (
	name		text NOT NULL,
	grantee		regrole NOT NULL,
	owner		regrole NOT NULL,
	details		boolean NOT NULL DEFAULT true,
	PRIMARY KEY (name, owner, grantee)
);

REVOKE ALL ON dml.models, dml.epochs, dml.deployments, dml.grants FROM PUBLIC;
REVOKE ALL ON SEQUENCE dml.models_id_seq FROM PUBLIC;

/*
 * The catalog is user data: pg_dump and pg_dumpall dump the rows of these
 * tables (and the sequence's position), so a restore keeps every model,
 * version, deployment, grant and epoch.  regress/t/backup.sh checks that
 * every table and sequence of schema dml is marked.
 */
SELECT pg_catalog.pg_extension_config_dump('dml.models', '');
SELECT pg_catalog.pg_extension_config_dump('dml.models_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('dml.epochs', '');
SELECT pg_catalog.pg_extension_config_dump('dml.deployments', '');
SELECT pg_catalog.pg_extension_config_dump('dml.grants', '');

CREATE TYPE dml.train_result AS (
	model_id	bigint,
	name		text,
	version		integer,
	epochs		integer,
	final_loss	float8,
	seconds		float8,
	rows_per_second float8,
	workers		integer,
	device		text,
	kind		text,
	stopped		text		/* converged, patience, max epochs */
);

/*
 * dml_train: train a model on a table, view or partitioned table.
 * NULL arguments take defaults chosen by model kind (see README).
 */
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

/*
 * The column form of predict by row: dml.predict_support, the planner
 * support of the record forms below, turns dml_predict(m, t) with t a
 * table's row into dml.predict_cols(m, '{col,...}', t.col, ...), every
 * column of the table under its name, so the executor builds no composite
 * datum per row.  Not STRICT: a NULL column is a NULL feature, an error.
 */
CREATE FUNCTION dml.predict_support(internal) RETURNS internal
AS 'MODULE_PATHNAME', 'dml_predict_support' LANGUAGE C STRICT;

CREATE FUNCTION dml.predict_cols(model text, columns text[], VARIADIC "any")
RETURNS float8
AS 'MODULE_PATHNAME', 'dml_predict_cols'
LANGUAGE C STABLE PARALLEL SAFE;

CREATE FUNCTION dml.predict_class_cols(model text, columns text[], VARIADIC "any")
RETURNS text
AS 'MODULE_PATHNAME', 'dml_predict_class_cols'
LANGUAGE C STABLE PARALLEL SAFE;

CREATE FUNCTION dml.predict_proba_cols(model text, columns text[], VARIADIC "any")
RETURNS float8[]
AS 'MODULE_PATHNAME', 'dml_predict_proba_cols'
LANGUAGE C STABLE PARALLEL SAFE;

GRANT EXECUTE ON FUNCTION dml.predict_cols(text, text[], "any"),
	dml.predict_class_cols(text, text[], "any"), dml.predict_proba_cols(text, text[], "any")
	TO PUBLIC;

/*
 * The values form of predict by array (issue 20): dml.predict_support turns
 * dml_predict(m, ARRAY[x1, x2, ...]) into dml.predict_vals(m, x1, x2, ...),
 * so the executor builds no array per row.  Not STRICT: a NULL value is a
 * NULL feature, an error, as in the array.
 */
CREATE FUNCTION dml.predict_vals(model text, VARIADIC "any")
RETURNS float8
AS 'MODULE_PATHNAME', 'dml_predict_vals'
LANGUAGE C STABLE PARALLEL SAFE;

CREATE FUNCTION dml.predict_class_vals(model text, VARIADIC "any")
RETURNS text
AS 'MODULE_PATHNAME', 'dml_predict_class_vals'
LANGUAGE C STABLE PARALLEL SAFE;

CREATE FUNCTION dml.predict_proba_vals(model text, VARIADIC "any")
RETURNS float8[]
AS 'MODULE_PATHNAME', 'dml_predict_proba_vals'
LANGUAGE C STABLE PARALLEL SAFE;

GRANT EXECUTE ON FUNCTION dml.predict_vals(text, "any"),
	dml.predict_class_vals(text, "any"), dml.predict_proba_vals(text, "any")
	TO PUBLIC;

/* Per-row inference on the deployed (else newest) version of a model */
CREATE FUNCTION @extschema@.dml_predict(model text, features float8[])
RETURNS float8
AS 'MODULE_PATHNAME', 'dml_predict_array'
LANGUAGE C STABLE STRICT PARALLEL SAFE
SUPPORT dml.predict_support;

CREATE FUNCTION @extschema@.dml_predict(model text, "row" record)
RETURNS float8
AS 'MODULE_PATHNAME', 'dml_predict_record'
LANGUAGE C STABLE STRICT PARALLEL SAFE
SUPPORT dml.predict_support;

CREATE FUNCTION @extschema@.dml_predict_class(model text, features float8[])
RETURNS text
AS 'MODULE_PATHNAME', 'dml_predict_class_array'
LANGUAGE C STABLE STRICT PARALLEL SAFE
SUPPORT dml.predict_support;

CREATE FUNCTION @extschema@.dml_predict_class(model text, "row" record)
RETURNS text
AS 'MODULE_PATHNAME', 'dml_predict_class_record'
LANGUAGE C STABLE STRICT PARALLEL SAFE
SUPPORT dml.predict_support;

CREATE FUNCTION @extschema@.dml_predict_proba(model text, features float8[])
RETURNS float8[]
AS 'MODULE_PATHNAME', 'dml_predict_proba_array'
LANGUAGE C STABLE STRICT PARALLEL SAFE
SUPPORT dml.predict_support;

CREATE FUNCTION @extschema@.dml_predict_proba(model text, "row" record)
RETURNS float8[]
AS 'MODULE_PATHNAME', 'dml_predict_proba_record'
LANGUAGE C STABLE STRICT PARALLEL SAFE
SUPPORT dml.predict_support;

/* Pin the version predict uses; NULL unpins (newest again) */
CREATE FUNCTION @extschema@.dml_deploy(name text, version integer)
RETURNS void
AS 'MODULE_PATHNAME', 'dml_deploy'
LANGUAGE C VOLATILE CALLED ON NULL INPUT;

CREATE FUNCTION @extschema@.dml_drop_model(name text, version integer DEFAULT NULL)
RETURNS integer
AS 'MODULE_PATHNAME', 'dml_drop_model'
LANGUAGE C VOLATILE CALLED ON NULL INPUT;

CREATE FUNCTION @extschema@.dml_grant(name text, role regrole, details boolean DEFAULT true)
RETURNS void
AS 'MODULE_PATHNAME', 'dml_grant'
LANGUAGE C VOLATILE STRICT;

CREATE FUNCTION @extschema@.dml_revoke(name text, role regrole)
RETURNS void
AS 'MODULE_PATHNAME', 'dml_revoke'
LANGUAGE C VOLATILE STRICT;

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

/* Metrics of a model on a relation, as training reports them */
CREATE FUNCTION @extschema@.dml_evaluate(model text, relation regclass)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'dml_evaluate'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

/*
 * Batch inference into a new table, through GEMM in blocks: in the backend
 * (device 'cpu'), or in one dml-worker on a GPU ('gpu'; 'auto' when one is
 * visible), or on workers => N ranks over dml.hosts, each scoring its slice
 * (a sharded source's shards on their hosts)
 */
CREATE PROCEDURE @extschema@.dml_predict_table(
	model		text,
	source		regclass,
	target		text,
	id_column	text DEFAULT NULL,
	device		text DEFAULT 'cpu',
	workers		integer DEFAULT NULL)
AS 'MODULE_PATHNAME', 'dml_predict_table'
LANGUAGE C;

/*
 * Batch inference as rows: dml_predict_table's in-backend path (blocks,
 * GEMM) returning (id, value, label, probability) instead of writing a
 * table, so it also runs where no table can be created: a hot standby or a
 * read-only transaction.  value for regression; label and its probability
 * for classification; id is the id column's text form, or the row number.
 */
CREATE FUNCTION @extschema@.dml_predict_rows(
	model		text,
	source		regclass,
	id_column	text DEFAULT NULL,
	OUT id		text,
	OUT value	float8,
	OUT label	text,
	OUT probability float8)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dml_predict_rows'
LANGUAGE C STABLE;

/*
 * dml.xtx(ARRAY[y, x1, ..., xd]): the sufficient statistics of least
 * squares, as a parallel aggregate (the one-pass exact solver).
 */
CREATE FUNCTION dml.xtx_trans(internal, float8[]) RETURNS internal
AS 'MODULE_PATHNAME', 'dml_xtx_trans' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION dml.xtx_combine(internal, internal) RETURNS internal
AS 'MODULE_PATHNAME', 'dml_xtx_combine' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION dml.xtx_serialize(internal) RETURNS bytea
AS 'MODULE_PATHNAME', 'dml_xtx_serialize' LANGUAGE C STRICT PARALLEL SAFE;
CREATE FUNCTION dml.xtx_deserialize(bytea, internal) RETURNS internal
AS 'MODULE_PATHNAME', 'dml_xtx_deserialize' LANGUAGE C STRICT PARALLEL SAFE;
CREATE FUNCTION dml.xtx_final(internal) RETURNS float8[]
AS 'MODULE_PATHNAME', 'dml_xtx_final' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE AGGREGATE dml.xtx(float8[]) (
	SFUNC = dml.xtx_trans,
	STYPE = internal,
	COMBINEFUNC = dml.xtx_combine,
	SERIALFUNC = dml.xtx_serialize,
	DESERIALFUNC = dml.xtx_deserialize,
	FINALFUNC = dml.xtx_final,
	PARALLEL = SAFE
);
GRANT EXECUTE ON FUNCTION dml.xtx_trans(internal, float8[]), dml.xtx_combine(internal, internal),
	dml.xtx_serialize(internal), dml.xtx_deserialize(bytea, internal), dml.xtx_final(internal)
	TO PUBLIC;

/*
 * dml.xtx_cols(y, x1, ..., xd): the same statistics from float8 columns
 * passed one by one, with no array built per row (the in-server exact
 * solver's form; dml.xtx remains for more columns than a function takes).
 */
CREATE FUNCTION dml.xtx_cols_trans(internal, VARIADIC "any") RETURNS internal
AS 'MODULE_PATHNAME', 'dml_xtx_cols_trans' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE AGGREGATE dml.xtx_cols(VARIADIC "any") (
	SFUNC = dml.xtx_cols_trans,
	STYPE = internal,
	COMBINEFUNC = dml.xtx_combine,
	SERIALFUNC = dml.xtx_serialize,
	DESERIALFUNC = dml.xtx_deserialize,
	FINALFUNC = dml.xtx_final,
	PARALLEL = SAFE
);
GRANT EXECUTE ON FUNCTION dml.xtx_cols_trans(internal, "any") TO PUBLIC;

/* a numeric array as little-endian float32 bytes, for the workers' COPY */
CREATE FUNCTION dml.vec_bytes(anyarray) RETURNS bytea
AS 'MODULE_PATHNAME', 'dml_vec_bytes' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
GRANT EXECUTE ON FUNCTION dml.vec_bytes(anyarray) TO PUBLIC;

/*
 * float8 values as one field of little-endian float32 bytes (a NULL bitmap
 * after them when some are NULL), for the workers' COPY of numeric features
 */
CREATE FUNCTION dml.num_bytes(VARIADIC "any") RETURNS bytea
AS 'MODULE_PATHNAME', 'dml_num_bytes' LANGUAGE C IMMUTABLE PARALLEL SAFE;
GRANT EXECUTE ON FUNCTION dml.num_bytes("any") TO PUBLIC;

/*
 * A slice of rows as one bytea of float32s (target first, 8 bytes), for the
 * workers' load of all-numeric jobs: no per-row protocol (aggregate.c)
 */
CREATE FUNCTION dml.pack_rows_trans(internal, VARIADIC "any") RETURNS internal
AS 'MODULE_PATHNAME', 'dml_pack_rows_trans' LANGUAGE C CALLED ON NULL INPUT PARALLEL SAFE;
CREATE FUNCTION dml.pack_rows_final(internal) RETURNS bytea
AS 'MODULE_PATHNAME', 'dml_pack_rows_final' LANGUAGE C PARALLEL SAFE;
CREATE AGGREGATE dml.pack_rows(VARIADIC "any") (
	SFUNC = dml.pack_rows_trans,
	STYPE = internal,
	FINALFUNC = dml.pack_rows_final
);
GRANT EXECUTE ON FUNCTION dml.pack_rows_trans(internal, "any") TO PUBLIC;
GRANT EXECUTE ON FUNCTION dml.pack_rows_final(internal) TO PUBLIC;

/* true when the calling role may use a model name */
CREATE FUNCTION dml.can_use(owner oid, name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dml_can_use'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

/*
 * true when the calling role may also read a model's details: statistics
 * and vocabularies of its features, its metrics and training history
 * (owners, and grantees unless dml_grant(..., details => false))
 */
CREATE FUNCTION dml.can_see_details(owner oid, name text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'dml_can_see_details'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

/* The models the calling role may use */
CREATE VIEW @extschema@.dml_models AS
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

CREATE VIEW @extschema@.dml_epochs AS
SELECT m.name, m.version, e.restarts, e.epoch, e.loss, e.val_loss, e.val_metric,
	   e.rows_per_second, e.seconds, e.bytes_sent, e.staleness, e.recorded, e.stopped,
	   e.bytes_within, e.bytes_across, e.hosts
FROM dml.epochs e JOIN dml.models m ON m.id = e.model_id
WHERE dml.can_see_details(m.owner, m.name);

GRANT USAGE ON SCHEMA dml TO PUBLIC;
GRANT EXECUTE ON FUNCTION dml.can_use(oid, text), dml.can_see_details(oid, text) TO PUBLIC;
GRANT SELECT ON @extschema@.dml_models, @extschema@.dml_epochs TO PUBLIC;

/* ---------------------------------------------------------------------
 * Background training jobs and live progress (issue 16)
 * --------------------------------------------------------------------- */

/*
 * One row per job of dml_train_async: its arguments exactly as given (the
 * relation also as regclass), the dml.* settings of the submitting session,
 * its state and, once it ends, its result or error.  Rows are read through
 * the dml.jobs view; the C functions write them as the extension's owner.
 */
CREATE SEQUENCE dml.jobs_id_seq;

CREATE TABLE dml.job_runs (
	id				bigint PRIMARY KEY DEFAULT nextval('dml.jobs_id_seq'),
	name			text NOT NULL,
	owner			regrole NOT NULL,	/* regrole: a dump names the role, not its oid */
	state			text NOT NULL DEFAULT 'queued'
					CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
	relation		regclass NOT NULL,	/* regclass: a dump names the table, not its oid */
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
	server_started	timestamptz,	/* pg_postmaster_start_time() when it started */
	function		text NOT NULL DEFAULT 'dml_train'	/* what it runs (issue 17: dml_tune) */
					CHECK (function IN ('dml_train', 'dml_tune'))
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
	hosts			text[] DEFAULT NULL,
	class_weight	text DEFAULT NULL,
	l1_ratio		float8 DEFAULT NULL)
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
 * For softmax, one equation per class against the first class (as
 * statsmodels' MNLogit), class naming it; NULL for other models.
 * dml_summary_fit: one row of model-level figures.  Both read the
 * deployed (else newest) version, with dml_predict's access rule.
 */
CREATE FUNCTION @extschema@.dml_summary(model text)
RETURNS TABLE (term text, coefficient float8, std_error float8, statistic float8,
			   p_value float8, odds_ratio float8, class text)
AS 'MODULE_PATHNAME', 'dml_summary'
LANGUAGE C STABLE STRICT;

CREATE FUNCTION @extschema@.dml_summary_fit(model text)
RETURNS TABLE (method text, n bigint, df_model float8, df_resid float8, r2 float8,
			   adj_r2 float8, residual_std_error float8, f_statistic float8, f_p_value float8,
			   log_likelihood float8, aic float8, bic float8, condition_number float8)
AS 'MODULE_PATHNAME', 'dml_summary_fit'
LANGUAGE C STABLE STRICT;

/* ---------------------------------------------------------------------
 * Model selection (issue 17)
 * --------------------------------------------------------------------- */

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
