/* dml 1.2 -> 1.3 */

\echo Use "ALTER EXTENSION dml UPDATE TO '1.3'" to load this file. \quit

/*
 * Each issue's schema changes after 1.2 (the third wave's first release),
 * in the order they landed, each section opened by a comment naming its
 * issue.  sql/dml.sql is the whole 1.3 install script; regress/t/upgrade.sh
 * checks that installs updated from 1.0, 1.1 and 1.2 have the same objects
 * as a fresh one.
 */

/* --- issue 19: a job's relation is a regclass -------------------------------
 * As the owner columns are regroles: a dump of the ended jobs' history names
 * the table, so a restore into another database or cluster, where the table
 * has another oid, still shows which table a job trained on (an oid would
 * point at nothing there, or at another relation).  oid and regclass share
 * their storage: nothing is rewritten.
 */
ALTER TABLE dml.job_runs ALTER COLUMN relation TYPE regclass;

/* --- issue 19: batch inference on a hot standby -----------------------------
 * dml_predict_table creates a table, which a standby cannot (temporary ones
 * included); dml_predict_rows gives the same predictions as rows.
 */
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
 * Issues 23 and 24 (batch inference across ranks): dml_predict_table takes
 * workers => N, ranks placed over dml.hosts, a sharded source read on its
 * shards' hosts.
 */
DROP PROCEDURE @extschema@.dml_predict_table(text, regclass, text, text, text);
CREATE PROCEDURE @extschema@.dml_predict_table(
	model		text,
	source		regclass,
	target		text,
	id_column	text DEFAULT NULL,
	device		text DEFAULT 'cpu',
	workers		integer DEFAULT NULL)
AS 'MODULE_PATHNAME', 'dml_predict_table'
LANGUAGE C;
