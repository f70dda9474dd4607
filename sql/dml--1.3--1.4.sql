/* dml 1.3 -> 1.4 */

\echo Use "ALTER EXTENSION dml UPDATE TO '1.4'" to load this file. \quit

/*
 * Each issue's schema changes after 1.3 (the third wave's second release),
 * in the order they landed, each section opened by a comment naming its
 * issue.  sql/dml.sql is the whole 1.4 install script; regress/t/upgrade.sh
 * checks that installs updated from 1.0, 1.1, 1.2 and 1.3 have the same
 * objects as a fresh one.
 */

/* -- issue 20: the array form's ARRAY[...] passed as its elements (predict_plan.c) */
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

ALTER FUNCTION @extschema@.dml_predict(text, float8[]) SUPPORT dml.predict_support;
ALTER FUNCTION @extschema@.dml_predict_class(text, float8[]) SUPPORT dml.predict_support;
ALTER FUNCTION @extschema@.dml_predict_proba(text, float8[]) SUPPORT dml.predict_support;
