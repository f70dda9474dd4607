/* dml 1.2 -> 1.3 */

\echo Use "ALTER EXTENSION dml UPDATE TO '1.3'" to load this file. \quit

/*
 * Each issue's schema changes after 1.2 (the third wave's first release),
 * in the order they landed, each section opened by a comment naming its
 * issue.  sql/dml.sql is the whole 1.3 install script; regress/t/upgrade.sh
 * checks that installs updated from 1.0, 1.1 and 1.2 have the same objects
 * as a fresh one.
 */

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
