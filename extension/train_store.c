/*-------------------------------------------------------------------------
 *
 * train_store.c
 *	  dml_train's result: the model that came back checked (it parses,
 *	  its weights are finite, its shape is the job's), its spec written
 *	  (features, encodings, standardization, classes, the settings
 *	  jobspec.h marks as stored), and both kept in dml.models.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/json.h"

#include "coordinator.h"
#include "shards.h"
#include "dml.h"
#include "train.h"

/* ---------------------------------------------------------------------
 * The spec
 * --------------------------------------------------------------------- */

/* JSON string, escaped */
static void
json_str(StringInfo buf, const char *s)
{
	escape_json(buf, s);
}

/* the spec jsonb: features, encodings, standardization, classes, settings */
static char *
spec_json(DmlJob *job, const DmlModel *m)
{
	StringInfoData buf;
	ListCell   *lc;
	int			pos = 0;
	bool		first = true;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"relation\": ");
	json_str(&buf, rel_sql_name(job->relid));
	appendStringInfoString(&buf, ", \"target\": ");
	json_str(&buf, job->target.name);
	appendStringInfo(&buf, ", \"target_type\": ");
	json_str(&buf, format_type_be(job->label_type));
	appendStringInfo(&buf, ", \"label_type\": %u", job->label_type);
	appendStringInfoString(&buf, ", \"features\": [");
	foreach(lc, job->features)
	{
		DmlFeature *col = lfirst(lc);

		appendStringInfoString(&buf, first ? "{" : ", {");
		first = false;
		appendStringInfoString(&buf, "\"name\": ");
		json_str(&buf, col->name);
		appendStringInfo(&buf, ", \"kind\": \"%s\", \"width\": %d",
						 col->kind == DML_FEAT_NUM ? "num" : col->kind == DML_FEAT_VEC ? "vec" : "cat",
						 col->width);
		if (col->kind == DML_FEAT_NUM && m != NULL)
			appendStringInfo(&buf, ", \"mean\": %.9g, \"std\": %.9g",
							 m->in_mean[pos], m->in_scale[pos] > 0 ? 1.0 / m->in_scale[pos] : 0.0);
		if (col->kind == DML_FEAT_CAT)
		{
			const char **order = palloc(sizeof(char *) * Max(col->nlevels, 1));

			dml_feature_levels_in_order(col, order);
			appendStringInfoString(&buf, ", \"levels\": [");
			for (int i = 0; i < col->nlevels; i++)
			{
				if (i > 0)
					appendStringInfoString(&buf, ", ");
				json_str(&buf, order[i]);
			}
			appendStringInfoChar(&buf, ']');
		}
		appendStringInfoChar(&buf, '}');
		pos += col->width;
	}
	appendStringInfoString(&buf, "]");
	if (job->classification)
	{
		appendStringInfoString(&buf, ", \"classes\": [");
		first = true;
		foreach(lc, job->classes)
		{
			if (!first)
				appendStringInfoString(&buf, ", ");
			first = false;
			json_str(&buf, lfirst(lc));
		}
		appendStringInfoChar(&buf, ']');
	}
	else
		appendStringInfoString(&buf, ", \"classes\": null");
	appendStringInfo(&buf, ", \"inputs\": %d, \"outputs\": %d, \"loss\": \"%s\"",
					 job->ninputs, job->noutputs, dml_job_name(DML_NAMES_LOSS, job->loss));
	appendStringInfoString(&buf, ", \"hidden\": [");
	for (int i = 0; i < job->nhidden; i++)
		appendStringInfo(&buf, "%s%d", i ? ", " : "", job->hidden[i]);
	appendStringInfo(&buf, "], \"activation\": \"%s\"",
					 dml_job_name(DML_NAMES_ACTIVATION, job->activation));

	/* linear regression: coefficients in the data's own units */
	if (m != NULL && job->kind == DML_KIND_LINEAR && m->net.nlayers == 1)
	{
		const float *w = m->net.params;
		double		b = m->net.params[job->ninputs];
		double		ys = m->out_scale[0];

		appendStringInfoString(&buf, ", \"coefficients\": [");
		for (int c = 0; c < job->ninputs; c++)
		{
			double		coef = w[c] * m->in_scale[c] * ys;

			b -= w[c] * m->in_scale[c] * m->in_mean[c];
			appendStringInfo(&buf, "%s%.9g", c ? ", " : "", coef);
		}
		appendStringInfo(&buf, "], \"intercept\": %.9g", b * ys + m->out_mean[0]);
	}
	/* the settings jobspec.h's table marks as stored */
	appendStringInfo(&buf, ", \"hyperparameters\": {\"workers\": %d", job->workers);
#define JSON_INT(name, names) appendStringInfo(&buf, ", \"" #name "\": %d", job->name)
#define JSON_DBL(name, names) appendStringInfo(&buf, ", \"" #name "\": %.9g", job->name)
#define JSON_I64(name, names) appendStringInfo(&buf, ", \"" #name "\": " INT64_FORMAT, job->name)
#define JSON_STR(name, names) (appendStringInfoString(&buf, ", \"" #name "\": "), json_str(&buf, job->name))
#define JSON_OPT(name, names) do { if (job->name) JSON_STR(name, names); } while (0)
#define JSON_ENUM(name, names) \
	(appendStringInfoString(&buf, ", \"" #name "\": "), json_str(&buf, dml_job_name(names, job->name)))
#define JSON(type, name, stored, names) if (stored) JSON_##type(name, names);
	DML_JOB_SETTINGS(JSON)
#undef JSON
#undef JSON_INT
#undef JSON_DBL
#undef JSON_I64
#undef JSON_STR
#undef JSON_OPT
#undef JSON_ENUM
	appendStringInfoChar(&buf, '}');
	appendStringInfoString(&buf, ", \"snapshot\": ");
	json_str(&buf, job->snapshot);
	DmlShardsJson(job, &buf, false);
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/*
 * Numeric features that were constant over the training rows: the workers
 * standardized them to zero (scale 0), so they add nothing to the model.
 * Named in a NOTICE and in the metrics (constant_features); returns the
 * metrics with that member added.
 */
static char *
note_constant_features(DmlJob *job, const DmlModel *m, char *metrics)
{
	StringInfoData names;
	StringInfoData json;
	ListCell   *lc;
	int			pos = 0;
	int			count = 0;
	size_t		len = strlen(metrics);

	initStringInfo(&names);
	initStringInfo(&json);
	foreach(lc, job->features)
	{
		DmlFeature *col = lfirst(lc);

		if (col->kind == DML_FEAT_NUM && m->in_scale[pos] == 0)
		{
			appendStringInfo(&names, "%s%s", count ? ", " : "", quote_identifier(col->name));
			appendStringInfoString(&json, count ? ", " : "");
			escape_json(&json, col->name);
			count++;
		}
		pos += col->width;
	}
	if (count == 0 || len < 2 || metrics[len - 1] != '}')
		return metrics;
	ereport(NOTICE,
			(errmsg("%d feature%s constant in every training row, so left out of the model: %s",
					count, count == 1 ? " is" : "s are", names.data)));
	return psprintf("%.*s, \"constant_features\": [%s]}", (int) len - 1, metrics, json.data);
}

/*
 * The model that came back, checked and stored with its spec; returns its
 * version, and in stopped why training stopped.
 */
int
train_store(DmlJob *job, DmlJobResult *result, int64 model_id, Oid owner,
			const char **stopped)
{
	DmlModel	parsed;
	char		errbuf[256];
	char	   *spec;
	int			version;

	/* what came back must parse before it is stored */
	if (dml_model_parse(&parsed, (unsigned char *) VARDATA(result->weights),
						VARSIZE(result->weights) - VARHDRSZ, errbuf, sizeof(errbuf)) != DML_OK)
		elog(ERROR, "dml: worker sent a model that does not parse: %s. Please report a bug.", errbuf);
	for (size_t i = 0; i < parsed.net.nparams + 2 * (size_t) (job->ninputs + job->noutputs); i++)
		if (!isfinite(i < parsed.net.nparams ? parsed.net.params[i] :
					  i < parsed.net.nparams + job->ninputs ? parsed.in_mean[i - parsed.net.nparams] :
					  i < parsed.net.nparams + 2 * job->ninputs ? parsed.in_scale[i - parsed.net.nparams - job->ninputs] :
					  i < parsed.net.nparams + 2 * job->ninputs + job->noutputs ?
					  parsed.out_mean[i - parsed.net.nparams - 2 * job->ninputs] :
					  parsed.out_scale[i - parsed.net.nparams - 2 * job->ninputs - job->noutputs]))
			ereport(ERROR,
					(errcode(ERRCODE_FLOATING_POINT_EXCEPTION),
					 errmsg("training produced a model with non-finite weights"),
					 errhint("Lower learning_rate, or scale the data: float32 holds values up to about 3.4e38.")));
	if (parsed.net.sizes[0] != job->ninputs)
		elog(ERROR, "dml: worker model has %d inputs, expected %d. Please report a bug.",
			 parsed.net.sizes[0], job->ninputs);

	result->metrics_json = note_constant_features(job, &parsed, result->metrics_json);
	*stopped = dml_stop_name(result->stopped);
	spec = spec_json(job, &parsed);
	version = DmlStoreModel(model_id, job->name, owner, dml_job_name(DML_NAMES_KIND, job->kind),
							result->device, spec, result->weights, result->metrics_json);
	DmlMarkLastEpoch(model_id, *stopped);
	dml_model_free(&parsed);
	return version;
}
