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
