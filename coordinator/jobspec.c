/*-------------------------------------------------------------------------
 *
 * jobspec.c
 *	  The names of the job contract's enums (jobspec.h), for the SQL
 *	  boundary, the serialized job and the stored spec.  Plain C: built into
 *	  the extension and into dml-worker.
 *
 *-------------------------------------------------------------------------
 */
#include <string.h>

#include "jobspec.h"

static const char *const optimizer_names[] = {"sgd", "momentum", "nesterov", "adam", "exact", "newton", "lbfgs", NULL};
static const char *const schedule_names[] = {"constant", "step", "cosine", "plateau", NULL};
static const char *const sync_names[] = {"allreduce", "ps", "ssp", "async", "gossip", "average", NULL};
static const char *const compression_names[] = {"none", "fp16", "topk", NULL};
static const char *const nulls_names[] = {"error", "skip", "impute", NULL};
static const char *const device_names[] = {"auto", "cpu", "gpu", NULL};
static const char *const kind_names[] = {"linear", "logistic", "softmax", "mlp", "auto", NULL};
/* kernels.h's DmlLoss and DmlAct, in the order of their values */
static const char *const loss_names[] = {"mse", "bce", "softmax", NULL};
static const char *const activation_names[] = {"identity", "relu", "tanh", "sigmoid", NULL};
static const char *const cov_names[] = {"nonrobust", "HC0", "HC1", NULL};
static const char *const shuffle_names[] = {"auto", "rows", "blocks", NULL};

static const char *const *const lists[] = {
	[DML_NAMES_OPTIMIZER] = optimizer_names,
	[DML_NAMES_SCHEDULE] = schedule_names,
	[DML_NAMES_SYNC] = sync_names,
	[DML_NAMES_COMPRESSION] = compression_names,
	[DML_NAMES_NULLS] = nulls_names,
	[DML_NAMES_DEVICE] = device_names,
	[DML_NAMES_KIND] = kind_names,
	[DML_NAMES_LOSS] = loss_names,
	[DML_NAMES_ACTIVATION] = activation_names,
	[DML_NAMES_COV] = cov_names,
	[DML_NAMES_SHUFFLE] = shuffle_names,
};

/* the name of value in list which; "?" out of range */
const char *
dml_job_name(DmlJobNames which, int value)
{
	const char *const *names = lists[which];

	for (int i = 0; names[i]; i++)
		if (i == value)
			return names[i];
	return "?";
}

/* f's levels in one-hot order: order[slot], f->nlevels of them */
void
dml_feature_levels_in_order(const DmlFeature *f, const char **order)
{
	for (int i = 0; i < f->nlevels; i++)
		order[f->level_slot[i]] = f->levels[i];
}

/* the value named name in list which, or -1 */
int
dml_job_parse(DmlJobNames which, const char *name)
{
	const char *const *names = lists[which];

	for (int i = 0; name && names[i]; i++)
		if (strcmp(names[i], name) == 0)
			return i;
	return -1;
}
