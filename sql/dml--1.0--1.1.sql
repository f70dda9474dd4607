/* dml 1.0 -> 1.1 */

\echo Use "ALTER EXTENSION dml UPDATE TO '1.1'" to load this file. \quit

/*
 * Issue 15: training runs to convergence by default and says why it
 * stopped (dml_train's result and the last dml.epochs row: stopped);
 * weight_decay and patience default to NULL, chosen by model kind.
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
WHERE dml.can_use(m.owner, m.name);

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
	topk_ratio		float8 DEFAULT 0.01)
RETURNS dml.train_result
AS 'MODULE_PATHNAME', 'dml_train'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
