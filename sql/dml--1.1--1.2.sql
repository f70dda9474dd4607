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
