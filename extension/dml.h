/*-------------------------------------------------------------------------
 *
 * dml.h
 *	  Interface of the backend part of dml: settings, catalog access, the
 *	  per-backend model cache, and feature extraction for predict.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_H
#define DML_H

#include "postgres.h"

#include "access/tupdesc.h"
#include "fmgr.h"
#include "utils/jsonb.h"

#include "jobspec.h"
#include "kernels.h"
#include "settings.h"

/* Settings (dml.c; those the coordinator reads are in coordinator/settings.h) */
#define DML_DEFAULT_WORKERS		2
#define DML_DEFAULT_MAX_MODEL_PARAMETERS	50000000	/* 200 MB of float32 */

extern int	dml_workers;
extern int	dml_max_workers;
extern int	dml_max_model_parameters;
extern char *dml_device;
extern int	dml_max_restarts;
extern int	dml_checkpoint_every;
extern bool dml_test_hooks;
extern int	dml_worker_memory;	/* kB */
extern int	dml_spill_limit;	/* kB; -1: no limit */

/* exact.c: linear least squares in one pass inside the server */
struct DmlJob;
struct DmlJobResult;
extern bool DmlExactInServer(struct DmlJob *job);
extern void DmlCheckCovType(struct DmlJob *job);
extern void DmlCheckL1Ratio(struct DmlJob *job, double l1_ratio);
/* class_weight.c */
extern void DmlClassWeight(struct DmlJob *job, const char *arg);
extern float *DmlClassWeightValues(struct DmlJob *job, const float *y, int64 n);
extern bool DmlInServerData(struct DmlJob *job);

/* catalog.c: every access runs as the extension's owner */
typedef struct DmlCatalogUser
{
	Oid			saved_userid;
	int			saved_sec_context;
	int			guc_nest_level;	/* of the fixed search_path */
} DmlCatalogUser;

/* what a role may do with a model name, in increasing order */
typedef enum DmlAccess
{
	DML_ACCESS_NONE,			/* it "does not exist" for this role */
	DML_ACCESS_USE,				/* predict and evaluate (granted) */
	DML_ACCESS_DETAILS,			/* also read statistics, vocabularies, metrics */
	DML_ACCESS_OWNER			/* also train versions, deploy, drop, grant */
} DmlAccess;

/*
 * The library needs the schema of its own version (DML_SCHEMA_VERSION, the
 * Makefile's EXTVERSION): every SQL-callable function begins with
 * DML_REQUIRE_SCHEMA(), before it reads an argument (an older schema's
 * function may pass fewer), so a database still at an older version gets
 * one clear error naming ALTER EXTENSION dml UPDATE.  Checked once per
 * backend, again after a schema or function changes anywhere (catalog.c).
 */
extern bool dml_schema_ok;
extern void DmlCheckSchemaVersion(void);
#define DML_REQUIRE_SCHEMA() \
	do { if (unlikely(!dml_schema_ok)) DmlCheckSchemaVersion(); } while (0)

extern Oid	DmlExtensionOwner(void);
extern Oid	DmlExtensionSchema(void);
extern void DmlBecomeOwner(DmlCatalogUser *save);
extern void DmlRestoreUser(DmlCatalogUser *save);
extern int	DmlOwnerQuery(const char *sql, int nargs, Oid *argtypes, Datum *values,
						  bool read_only, long limit);
extern Datum DmlSpiValue(uint64 r, int i);
extern Oid	DmlNameOwner(const char *name);
extern bool DmlRoleCanUse(Oid owner, const char *name);
extern Oid	DmlCheckAccess(const char *name, DmlAccess need);
extern DmlAccess DmlRoleAccess(Oid owner, const char *name);
extern void DmlCheckWritable(const char *what);
extern int64 DmlNextModelId(void);
extern int	DmlStoreModel(int64 id, const char *name, Oid owner, const char *kind,
						  const char *device, const char *spec_json,
						  bytea *weights, const char *metrics_json);
extern void DmlStoreEpoch(int64 model_id, int restarts, int epoch, double loss,
						  double val_loss, double val_metric,
						  double rows_per_second, double seconds,
						  double bytes_sent, double bytes_across, double staleness,
						  List *rank_hosts);
extern void DmlFlushEpochs(void);
extern void DmlDiscardEpochs(void);
extern Oid	DmlCheckNameForTraining(const char *name);
extern void DmlCheckWritable(const char *what);
extern void DmlMarkLastEpoch(int64 model_id, const char *stopped);
extern void DmlCatalogChanged(void);

/* roles.c */
extern void DmlInstallRoleHooks(void);

/* manage.c */
extern void DmlForgetName(const char *name, Oid owner);

/* modelcache.c: parsed models by name, revalidated once per snapshot */
typedef struct DmlCachedModel
{
	char		name[NAMEDATALEN * 4];
	int64		id;
	int			version;
	Oid			owner;
	char	   *kind;
	DmlModel	model;
	int			nfeatures;
	DmlFeature *features;
	int			nclasses;
	char	  **classes;		/* labels as text, in output order */
	Oid			label_type;		/* type of the training target */
	char	   *target;			/* target column name */
	float	   *scratch;		/* dml_model_scratch_floats(model, 1) */
	float	   *input;			/* one row of raw inputs */
	float	   *output;			/* one row of outputs */
	double	   *input64;		/* float64 models: the row at full precision, else NULL */
	double	   *output64;		/* float64 models: their outputs, else NULL */
	/* one-layer models: standardization folded into the weights */
	float	   *fold_w;			/* (K, C), or NULL for deeper networks */
	float	   *fold_b;			/* (K) */
	uint64		checked;		/* validation stamp */
	MemoryContext cxt;			/* owns features, classes, kind */
} DmlCachedModel;

extern DmlCachedModel *DmlGetModel(const char *name);

/*
 * A batch's scratch for dml_model_predict over rows rows, in the current
 * memory context, on a cache line: palloc gives 8 or 16 bytes, and the
 * batch's activations are rows of whole lines for dml_dense_rows's stores
 */
static inline float *
DmlBatchScratch(const DmlModel *model, int rows)
{
	return (float *) TYPEALIGN(DML_LINE, palloc(sizeof(float) *
												dml_model_scratch_floats(model, rows) + DML_LINE));
}
extern uint64 DmlValidationStamp(void);
extern void DmlModelPredictOne(DmlCachedModel *cm);
extern void DmlParseSpec(DmlCachedModel *cm, Jsonb *spec, MemoryContext cxt);

#endif							/* DML_H */
