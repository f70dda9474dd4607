/* dml 1.0 -> 1.1 */

\echo Use "ALTER EXTENSION dml UPDATE TO '1.1'" to load this file. \quit

-- issue 14: dml_train takes max_seconds, a time budget for training
DROP FUNCTION @extschema@.dml_train(text, regclass, text, text[], text, integer[], text, text,
	float8, integer, integer, float8, float8, integer, text, integer, text, bigint, jsonb,
	text, integer, integer, integer, text, float8);

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
	weight_decay	float8 DEFAULT 0,
	validation		float8 DEFAULT 0,
	patience		integer DEFAULT 0,
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
