/*-------------------------------------------------------------------------
 *
 * class_weight.c
 *	  dml_train's class_weight: 'balanced', or a JSON object of label ->
 *	  weight, as scikit-learn's class_weight defines them.
 *
 * The weights multiply each training row's loss by its class's weight, so
 * a rare class counts as much as a common one ('balanced': n / (K n_k),
 * the class counts taken over the training rows).  The argument is checked
 * and resolved here, at the SQL boundary: a map becomes the weights in
 * output order ("w0,w1,..." in the job), labels it does not name keep
 * weight 1; 'balanced' travels as it is and the workers count the classes
 * (workers/prepare.c), or the in-server fit does (DmlClassWeightValues).
 * The losses apply them (kernels/net.c, DmlWork.class_weight), for every
 * iterative optimizer on the CPU; Newton's and the exact solver's
 * statistics assume unweighted rows, and the GPU kernels have no weights,
 * so those are refused.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "coordinator.h"
#include "dml.h"

/*
 * DmlClassWeight
 *		Check class_weight (arg, NULL when not given) against job and set
 *		job->class_weight.  device 'auto' becomes 'cpu'.
 */
void
DmlClassWeight(DmlJob *job, const char *arg)
{
	Jsonb	   *jb;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			K;
	double	   *w;
	StringInfoData buf;

	job->class_weight = NULL;
	if (arg == NULL)
		return;
	if (!job->classification)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("class_weight applies to classification only"),
				 errhint("Target column \"%s\" is trained as a regression.", job->target.name)));
	if (job->optimizer == DML_JOB_OPT_NEWTON || job->optimizer == DML_JOB_OPT_EXACT)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("class_weight is not supported with optimizer \"%s\"",
						dml_job_name(DML_NAMES_OPTIMIZER, job->optimizer)),
				 errhint("Use optimizer => 'lbfgs' (or leave optimizer out).")));
	if (job->device == DML_DEVICE_GPU)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("class_weight is not supported on device 'gpu'"),
				 errhint("Use device => 'cpu' or 'auto'.")));
	/* the GPU kernels have no class weights: 'auto' trains on the CPU */
	job->device = DML_DEVICE_CPU;
	if (strcmp(arg, "balanced") == 0)
	{
		job->class_weight = "balanced";
		return;
	}
	if (job->discover_classes)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("class_weight as a map needs the labels before training"),
				 errhint("Use class_weight => 'balanced', or a target with fewer distinct labels.")));
	jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(arg)));
	if (!JB_ROOT_IS_OBJECT(jb))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("class_weight must be 'balanced' or a JSON object of label to weight"),
				 errhint("For example class_weight => '{\"yes\": 5, \"no\": 1}'.")));
	K = list_length(job->classes);
	w = palloc(sizeof(double) * K);
	for (int k = 0; k < K; k++)
		w[k] = 1.0;
	it = JsonbIteratorInit(&jb->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		char	   *label;
		int			k = 0;
		ListCell   *lc;
		double		x;

		if (tok != WJB_KEY)
			continue;
		label = pnstrdup(v.val.string.val, v.val.string.len);
		tok = JsonbIteratorNext(&it, &v, true);
		if (v.type != jbvNumeric)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("class_weight of label \"%s\" is not a number", label)));
		x = DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(v.val.numeric)));
		if (!(x >= 0 && isfinite(x)))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("class_weight of label \"%s\" must be a finite number at least 0", label)));
		foreach(lc, job->classes)
		{
			if (strcmp((char *) lfirst(lc), label) == 0)
				break;
			k++;
		}
		if (k >= K)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("class_weight names label \"%s\", which target column \"%s\" does not have",
							label, job->target.name)));
		w[k] = x;
	}
	initStringInfo(&buf);
	for (int k = 0; k < K; k++)
		appendStringInfo(&buf, "%s%.17g", k ? "," : "", w[k]);
	job->class_weight = buf.data;
}

/*
 * DmlClassWeightValues
 *		The weights by class index for the in-server fit: job's map, or
 *		'balanced' from the labels y (n) of the training rows.  palloc'd.
 */
float *
DmlClassWeightValues(DmlJob *job, const float *y, int64 n)
{
	int			K = list_length(job->classes);
	float	   *w = palloc(sizeof(float) * K);
	double	   *count = palloc0(sizeof(double) * K);
	char	   *p = job->class_weight;

	if (strcmp(job->class_weight, "balanced") != 0)
	{
		for (int k = 0; k < K; k++)
		{
			w[k] = (float) strtod(p, &p);
			if (*p == ',')
				p++;
		}
		return w;
	}
	for (int64 i = 0; i < n; i++)
		if (y[i] >= 0 && y[i] < K)
			count[(int) y[i]] += 1;
	for (int k = 0; k < K; k++)
		w[k] = count[k] > 0 ? (float) (n / (K * count[k])) : 0.0f;
	return w;
}
