/*-------------------------------------------------------------------------
 *
 * summary.c
 *	  dml_summary and dml_summary_fit: the statistics of an exact fit, the
 *	  table R's summary(lm) prints.
 *
 * The exact solvers work the statistics out while they fit (the
 * coefficients, their standard errors from (X'X)^-1, the sums of squares,
 * the rank and the condition number) and store them in the model's
 * metrics under "statistics", numbers written with 17 significant digits
 * so float64 round-trips exactly.  These functions only read them back
 * and derive what follows: t or z statistics, p-values (kernels/stats.c),
 * odds ratios.  No data pass.
 *
 * The model is resolved as dml_predict resolves it (the deployed version,
 * else the newest).  The statistics are a model's details: the caller must
 * own it, be a member of the owner, or have been granted it with details
 * (DML_ACCESS_DETAILS).  A model one may not use is reported exactly as a
 * model that does not exist, so the error tells nothing about others'
 * models.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "dml.h"
#include "kernels.h"

typedef struct Statistics
{
	Jsonb	   *json;			/* metrics -> 'statistics' */
	char	   *method;			/* "ols", "logit" or "mnlogit" */
} Statistics;

/*
 * The statistics of the model name resolves to, for a caller allowed to
 * read its details; for a name the caller may not use, the error of a
 * name that does not exist (DmlCheckAccess).
 */
static Statistics
model_statistics(const char *name)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1];
	Statistics	s = {NULL, NULL};
	DmlCachedModel *cm;
	bool		isnull = true;
	Datum		json = (Datum) 0;

	DmlCheckAccess(name, DML_ACCESS_DETAILS);
	cm = DmlGetModel(name);		/* the version predict would use */
	values[0] = Int64GetDatum(cm->id);
	SPI_connect();
	DmlOwnerQuery("SELECT m.metrics OPERATOR(pg_catalog.->) 'statistics' FROM dml.models m "
				  "WHERE m.id OPERATOR(pg_catalog.=) $1", 1, argtypes, values, true, 1);
	if (SPI_processed == 1)
	{
		json = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		if (!isnull)
			json = SPI_datumTransfer(json, false, -1);
	}
	SPI_finish();
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("model \"%s\" has no statistics of its fit", name),
				 errhint("dml_summary covers linear regression by optimizer => 'exact' and logistic and softmax regression by optimizer => 'newton'; train the model again with this version of dml if it is one.")));
	s.json = DatumGetJsonbP(json);
	{
		JsonbValue *v = getKeyJsonValueFromContainer(&s.json->root, "method", 6, NULL);

		s.method = v && v->type == jbvString ? pnstrdup(v->val.string.val, v->val.string.len) : "";
	}
	return s;
}

/* a number of the statistics: NaN when absent or null */
static double
stat_number(const Statistics *s, const char *key)
{
	JsonbValue *v = getKeyJsonValueFromContainer(&s->json->root, key, strlen(key), NULL);

	if (v == NULL || v->type != jbvNumeric)
		return NAN;
	return DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(v->val.numeric)));
}

/* whether the statistics' key is the string value */
static bool
stat_is(const Statistics *s, const char *key, const char *value)
{
	JsonbValue *v = getKeyJsonValueFromContainer(&s->json->root, key, strlen(key), NULL);

	return v != NULL && v->type == jbvString && v->val.string.len == strlen(value) &&
		memcmp(v->val.string.val, value, v->val.string.len) == 0;
}

/* element i of an array of the statistics: a number (NaN for null), or *text for strings */
static double
stat_element(const Statistics *s, const char *key, int i, char **text)
{
	JsonbValue *arr = getKeyJsonValueFromContainer(&s->json->root, key, strlen(key), NULL);
	JsonbValue *v;

	if (arr == NULL || arr->type != jbvBinary)
		elog(ERROR, "dml: model statistics lack \"%s\"", key);
	v = getIthJsonbValueFromContainer(arr->val.binary.data, i);
	if (v == NULL)
		elog(ERROR, "dml: model statistics \"%s\" have no element %d", key, i);
	if (text && v->type == jbvString)
		*text = pnstrdup(v->val.string.val, v->val.string.len);
	if (v->type != jbvNumeric)
		return NAN;
	return DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(v->val.numeric)));
}

/* a float8 column value, NULL when not finite */
static Datum
float_or_null(double v, bool *isnull)
{
	*isnull = !isfinite(v);
	return Float8GetDatum(v);
}

PG_FUNCTION_INFO_V1(dml_summary);

/*
 * dml_summary(model text)
 *		One row per coefficient, the intercept first: term, coefficient (on
 *		the raw scale), std_error, statistic (t for least squares, z for
 *		logistic regression), p_value (two-sided), odds_ratio (logistic),
 *		and class: for softmax ("mnlogit"), the class whose equation
 *		against the reference class (the first) the row belongs to, the
 *		equations one after another as statsmodels' MNLogit lists them;
 *		NULL otherwise.
 */
Datum
dml_summary(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Statistics	s = model_statistics(name);
	bool		mnlogit = strcmp(s.method, "mnlogit") == 0;
	bool		logit = mnlogit || strcmp(s.method, "logit") == 0;
	/* robust standard errors: normal p-values for least squares too (statsmodels) */
	bool		z = logit || stat_is(&s, "statistic", "z");
	double		df = stat_number(&s, "df_resid");
	JsonbValue *terms = getKeyJsonValueFromContainer(&s.json->root, "terms", 5, NULL);
	JsonbValue *classes = mnlogit ?
		getKeyJsonValueFromContainer(&s.json->root, "classes", 7, NULL) : NULL;
	int			nterms,
				nequations = 1;

	if (terms == NULL || terms->type != jbvBinary)
		elog(ERROR, "dml: model statistics lack \"terms\"");
	nterms = JsonContainerSize(terms->val.binary.data);
	if (mnlogit)
	{
		if (classes == NULL || classes->type != jbvBinary)
			elog(ERROR, "dml: model statistics lack \"classes\"");
		nequations = JsonContainerSize(classes->val.binary.data);
	}
	InitMaterializedSRF(fcinfo, 0);
	for (int j = 0; j < nequations; j++)
		for (int i = 0; i < nterms; i++)
		{
			Datum		values[7];
			bool		nulls[7] = {false};
			char	   *term = NULL,
					   *cls = NULL;
			double		coef,
						se,
						stat;

			stat_element(&s, "terms", i, &term);
			coef = stat_element(&s, "coefficients", j * nterms + i, NULL);
			se = stat_element(&s, "std_errors", j * nterms + i, NULL);
			stat = se > 0 ? coef / se : NAN;
			values[0] = CStringGetTextDatum(term ? term : "");
			values[1] = float_or_null(coef, &nulls[1]);
			values[2] = float_or_null(se, &nulls[2]);
			values[3] = float_or_null(stat, &nulls[3]);
			values[4] = float_or_null(z ? dml_z_pvalue(stat) : dml_t_pvalue(stat, df), &nulls[4]);
			values[5] = float_or_null(logit ? exp(coef) : NAN, &nulls[5]);
			if (mnlogit)
				stat_element(&s, "classes", j, &cls);
			values[6] = cls ? CStringGetTextDatum(cls) : (Datum) 0;
			nulls[6] = cls == NULL;
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(dml_summary_fit);

/*
 * dml_summary_fit(model text)
 *		One row: method, n, df_model, df_resid, r2, adj_r2,
 *		residual_std_error, f_statistic, f_p_value, log_likelihood, aic,
 *		bic, condition_number (NULL where a figure does not apply).
 */
Datum
dml_summary_fit(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Statistics	s = model_statistics(name);
	static const char *const keys[] = {
		"df_model", "df_resid", "r2", "adj_r2", "residual_std_error", "f", "f_p_value",
		"log_likelihood", "aic", "bic", "condition_number"
	};
	Datum		values[13];
	bool		nulls[13] = {false};
	double		n = stat_number(&s, "n");

	InitMaterializedSRF(fcinfo, 0);
	values[0] = CStringGetTextDatum(s.method);
	values[1] = Int64GetDatum((int64) n);
	nulls[1] = !isfinite(n);
	for (int k = 0; k < lengthof(keys); k++)
		values[2 + k] = float_or_null(stat_number(&s, keys[k]), &nulls[2 + k]);
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	return (Datum) 0;
}
