/*-------------------------------------------------------------------------
 *
 * modelcache.c
 *	  Parsed models by name, per backend.
 *
 * A name resolves to the deployed version, else the newest.  The cache is
 * revalidated once per snapshot: the first call under a new snapshot (in
 * practice, each statement) looks the name up again with one index probe,
 * and reloads the weights only when the resolved model id changed.  So a
 * new version is used by the next statement after it commits, a statement
 * gets consistent answers throughout, and a stale version is never served.
 * Writes by this backend (train, deploy, drop) bump a generation counter
 * that forces the look-up even under the same snapshot.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "compat.h"
#include "dml.h"

extern uint64 dml_catalog_generation;

static HTAB *model_cache = NULL;
static MemoryContext cache_cxt = NULL;

/*
 * DmlValidationStamp
 *		A stamp that changes with the snapshot, the user and our own catalog
 *		writes: a cached model checked under the same stamp is still right.
 */
uint64
DmlValidationStamp(void)
{
	uint64		h = dml_catalog_generation * 0x9E3779B97F4A7C15ull;

	h ^= (uint64) DML_MY_LXID << 32;
	h ^= (uint64) GetUserId() * 0x94D049BB133111EBull;
	if (ActiveSnapshotSet())
	{
		Snapshot	s = GetActiveSnapshot();

		h ^= ((uint64) s->xmin << 17) ^ ((uint64) s->xmax << 3) ^
			((uint64) s->curcid * 0xBF58476D1CE4E5B9ull);
	}
	return h ? h : 1;
}

/* release what an entry owns */
static void
free_entry(DmlCachedModel *cm)
{
	if (cm->model.net.params)
		dml_model_free(&cm->model);
	cm->model.net.params = NULL;
	if (cm->scratch)
		free(cm->scratch);
	cm->scratch = NULL;
	if (cm->input64)
		free(cm->input64);
	cm->input64 = cm->output64 = NULL;
	if (cm->cxt)
		MemoryContextDelete(cm->cxt);
	cm->cxt = NULL;
	cm->id = 0;
}

/* the value of key in a JSON object, or NULL when absent or JSON null */
static JsonbValue *
spec_get(JsonbContainer *obj, const char *key, JsonbValue *res)
{
	JsonbValue *v = getKeyJsonValueFromContainer(obj, key, strlen(key), res);

	return v == NULL || v->type == jbvNull ? NULL : v;
}

/* a JSON string as a C string in the current memory context, or NULL */
static char *
spec_string(JsonbValue *v)
{
	if (v == NULL || v->type != jbvString)
		return NULL;
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/* a JSON number as an int64; def when absent or not a number */
static int64
spec_int(JsonbValue *v, int64 def)
{
	if (v == NULL || v->type != jbvNumeric)
		return def;
	return DatumGetInt64(DirectFunctionCall1(numeric_int8, NumericGetDatum(v->val.numeric)));
}

/* the elements of a JSON array as C strings (NULL elements as NULL) */
static char **
spec_strings(JsonbValue *arr, int *n)
{
	char	  **out;

	*n = 0;
	if (arr == NULL || arr->type != jbvBinary || !JsonContainerIsArray(arr->val.binary.data))
		return palloc(sizeof(char *));
	*n = JsonContainerSize(arr->val.binary.data);
	out = palloc(sizeof(char *) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
		out[i] = spec_string(getIthJsonbValueFromContainer(arr->val.binary.data, i));
	return out;
}

static int
cmp_levels(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/*
 * DmlParseSpec
 *		Features (with one-hot levels), classes, the label type and the
 *		target from a model's spec, allocated in cxt.  Read with the jsonb
 *		C API: no SQL runs.
 */
void
DmlParseSpec(DmlCachedModel *cm, Jsonb *spec, MemoryContext cxt)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	JsonbContainer *root = &spec->root;
	JsonbValue	buf;
	JsonbValue *feats = spec_get(root, "features", &buf);
	JsonbContainer *fc;

	if (feats == NULL || feats->type != jbvBinary || !JsonContainerIsArray(feats->val.binary.data))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("spec of model \"%s\" has no feature list", cm->name)));
	fc = feats->val.binary.data;
	cm->nfeatures = JsonContainerSize(fc);
	cm->features = palloc0(sizeof(DmlFeature) * Max(cm->nfeatures, 1));
	for (int i = 0; i < cm->nfeatures; i++)
	{
		JsonbValue *fv = getIthJsonbValueFromContainer(fc, i);
		DmlFeature *f = &cm->features[i];
		JsonbValue	b1;
		char	   *kind;

		if (fv == NULL || fv->type != jbvBinary || !JsonContainerIsObject(fv->val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("spec of model \"%s\" has a malformed feature", cm->name)));
		f->name = spec_string(spec_get(fv->val.binary.data, "name", &b1));
		kind = spec_string(spec_get(fv->val.binary.data, "kind", &b1));
		if (f->name == NULL || kind == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("spec of model \"%s\" has a malformed feature", cm->name)));
		f->kind = strcmp(kind, "vec") == 0 ? DML_FEAT_VEC :
			strcmp(kind, "cat") == 0 ? DML_FEAT_CAT : DML_FEAT_NUM;
		f->width = (int) spec_int(spec_get(fv->val.binary.data, "width", &b1), 1);
		if (f->kind == DML_FEAT_CAT)
		{
			char	  **sorted = spec_strings(spec_get(fv->val.binary.data, "levels", &b1),
											  &f->nlevels);

			f->levels = palloc(sizeof(char *) * Max(f->nlevels, 1));
			f->level_slot = palloc(sizeof(int) * Max(f->nlevels, 1));
			/* levels sorted bytewise for bsearch, remembering each one's slot */
			for (int j = 0; j < f->nlevels; j++)
				f->levels[j] = sorted[j] ? sorted[j] : "";
			qsort(f->levels, f->nlevels, sizeof(char *), cmp_levels);
			for (int j = 0; j < f->nlevels; j++)
				for (int k = 0; k < f->nlevels; k++)
					if (strcmp(f->levels[j], sorted[k] ? sorted[k] : "") == 0)
						f->level_slot[j] = k;
		}
	}
	cm->classes = spec_strings(spec_get(root, "classes", &buf), &cm->nclasses);
	cm->label_type = (Oid) spec_int(spec_get(root, "label_type", &buf), InvalidOid);
	cm->target = spec_string(spec_get(root, "target", &buf));
	MemoryContextSwitchTo(old);
}

/* load the weights and spec of model id into cm */
static void
load_model(DmlCachedModel *cm, int64 id)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(id)};
	bool		isnull;
	bytea	   *w;
	char		errbuf[256];
	DmlModel	m;
	DmlStatus	st;
	MemoryContext entry_cxt;

	DmlOwnerQuery("SELECT weights, spec, kind FROM dml.models WHERE id OPERATOR(pg_catalog.=) $1",
				  1, argtypes, values, true, 1);
	if (SPI_processed != 1)
		elog(ERROR, "dml: model %lld vanished", (long long) id);
	w = DatumGetByteaPP(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	st = dml_model_parse(&m, (unsigned char *) VARDATA_ANY(w), VARSIZE_ANY_EXHDR(w),
						 errbuf, sizeof(errbuf));
	if (st != DML_OK)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("weights of model \"%s\" are not a valid model", cm->name),
				 errdetail("%s", errbuf),
				 errhint("Drop this version with dml_drop_model and train it again.")));

	free_entry(cm);
	cm->model = m;
	entry_cxt = AllocSetContextCreate(cache_cxt, "dml cached model", ALLOCSET_SMALL_SIZES);
	cm->cxt = entry_cxt;
	cm->kind = MemoryContextStrdup(entry_cxt, SPI_getvalue(SPI_tuptable->vals[0],
														   SPI_tuptable->tupdesc, 3));
	DmlParseSpec(cm, DatumGetJsonbP(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
												  2, &isnull)), entry_cxt);
	{
		int			width = 0;

		for (int i = 0; i < cm->nfeatures; i++)
			width += cm->features[i].width;
		if (width != m.net.sizes[0])
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("model \"%s\" has %d inputs but its spec describes %d",
							cm->name, m.net.sizes[0], width)));
	}
	/* the hidden layers' weights laid out once for dml_dense_rows (format.c) */
	if (m.precision == 32 && dml_model_prepare(&cm->model) != DML_OK)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	m = cm->model;
	/* on whole cache lines, as the prepared weights (dml_malloc_lines) */
	cm->scratch = dml_malloc_lines(dml_model_scratch_floats(&m, 1) + m.net.sizes[0] +
								   m.net.sizes[m.net.nlayers], sizeof(float));
	if (cm->scratch == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	cm->input = cm->scratch + dml_model_scratch_floats(&m, 1);
	cm->output = cm->input + m.net.sizes[0];
	if (m.precision == 64)
	{
		cm->input64 = malloc(sizeof(double) * (m.net.sizes[0] + m.net.sizes[m.net.nlayers]));
		if (cm->input64 == NULL)
			ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
		cm->output64 = cm->input64 + m.net.sizes[0];
	}
	cm->fold_w = NULL;
	cm->fold_b = NULL;
	if (m.net.nlayers == 1)
	{
		int			C = m.net.sizes[0];
		int			K = m.net.sizes[1];

		/* W (x - mean) * scale + b = (W * scale) x + (b - sum W * scale * mean) */
		cm->fold_w = MemoryContextAlloc(entry_cxt, sizeof(float) * K * C);
		cm->fold_b = MemoryContextAlloc(entry_cxt, sizeof(float) * K);
		for (int k = 0; k < K; k++)
		{
			double		b = m.net.params[(size_t) K * C + k];

			for (int c = 0; c < C; c++)
			{
				float		w = m.net.params[(size_t) k * C + c] * m.in_scale[c];

				cm->fold_w[(size_t) k * C + c] = w;
				b -= (double) w * m.in_mean[c];
			}
			cm->fold_b[k] = (float) b;
		}
	}
	cm->id = id;
}

/*
 * DmlGetModel
 *		The model a name resolves to now, checked for the caller's access.
 */
DmlCachedModel *
DmlGetModel(const char *name)
{
	uint64		stamp = DmlValidationStamp();
	DmlCachedModel *cm;
	bool		found;
	bool		exists;
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];
	int64		id = 0;
	int			version = 0;
	Oid			owner = InvalidOid;

	if (strlen(name) >= NAMEDATALEN * 4)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", name)));
	if (model_cache == NULL)
	{
		HASHCTL		ctl;

		cache_cxt = AllocSetContextCreate(TopMemoryContext, "dml model cache",
										  ALLOCSET_DEFAULT_SIZES);
		ctl.keysize = NAMEDATALEN * 4;
		ctl.entrysize = sizeof(DmlCachedModel);
		ctl.hcxt = cache_cxt;
		model_cache = hash_create("dml models", 16, &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	cm = hash_search(model_cache, name, HASH_ENTER, &found);
	if (!found)
	{
		char		key[NAMEDATALEN * 4];

		strlcpy(key, cm->name, sizeof(key));
		memset(cm, 0, sizeof(*cm));
		strlcpy(cm->name, key, sizeof(cm->name));
	}
	if (found && cm->id != 0 && cm->checked == stamp)
		return cm;

	values[0] = CStringGetTextDatum(name);
	SPI_connect();
	DmlOwnerQuery("SELECT m.id, m.version, m.owner FROM dml.models m "
				  "WHERE m.name OPERATOR(pg_catalog.=) $1 AND m.version OPERATOR(pg_catalog.=) COALESCE("
				  "(SELECT d.version FROM dml.deployments d WHERE d.name OPERATOR(pg_catalog.=) $1 "
				  "AND d.owner OPERATOR(pg_catalog.=) m.owner), "
				  "(SELECT pg_catalog.max(m2.version) FROM dml.models m2 "
				  "WHERE m2.name OPERATOR(pg_catalog.=) $1))",
				  1, argtypes, values, true, 1);
	exists = SPI_processed > 0;
	if (exists)
	{
		id = DatumGetInt64(DmlSpiValue(0, 1));
		version = DatumGetInt32(DmlSpiValue(0, 2));
		owner = DatumGetObjectId(DmlSpiValue(0, 3));
	}
	/* the right to use it is checked as the caller, every time, first */
	if (!exists || !DmlRoleCanUse(owner, name))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", name),
				 errhint("dml_models lists the models you can use.")));
	if (cm->id != id)
	{
		cm->id = 0;
		cm->checked = 0;
		load_model(cm, id);
	}
	SPI_finish();

	cm->version = version;
	cm->owner = owner;
	cm->checked = stamp;
	return cm;
}

/*
 * DmlModelPredictOne
 *		cm->output = the model on the one row in cm->input.  float64
 *		models compute from cm->input64 into cm->output64 (and cm->output);
 *		other one-layer models take a straight loop over folded weights;
 *		deeper ones the kernels' path.
 */
void
DmlModelPredictOne(DmlCachedModel *cm)
{
	const DmlNet *net = &cm->model.net;

	if (cm->output64 != NULL)
	{
		/* a float64 model computes in float64; the float32 outputs are its rounding */
		dml_model_predict64(&cm->model, cm->output64, cm->input64, 1);
		for (int k = 0; k < net->sizes[net->nlayers]; k++)
			cm->output[k] = (float) cm->output64[k];
		return;
	}
	if (cm->fold_w != NULL)
	{
		int			C = net->sizes[0];
		int			K = net->sizes[1];

		for (int k = 0; k < K; k++)
		{
			const float *w = cm->fold_w + (size_t) k * C;
			float		z = cm->fold_b[k];

			for (int c = 0; c < C; c++)
				z += w[c] * cm->input[c];
			cm->output[k] = z;
		}
		dml_net_output(net, cm->output, 1);
		if (net->loss == DML_LOSS_MSE)
			for (int k = 0; k < K; k++)
				cm->output[k] = cm->output[k] * cm->model.out_scale[k] + cm->model.out_mean[k];
		return;
	}
	dml_model_predict(&cm->model, cm->output, cm->input, 1, cm->scratch);
}
