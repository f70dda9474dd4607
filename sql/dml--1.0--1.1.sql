/* dml 1.0 -> 1.1 */

\echo Use "ALTER EXTENSION dml UPDATE TO '1.1'" to load this file. \quit

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
