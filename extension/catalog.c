/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  Reads and writes of dml.models, dml.epochs, dml.deployments and
 *	  dml.grants, and the access rule for models.
 *
 * The catalog tables grant nothing to PUBLIC.  Every access here runs as
 * the extension's owner (the owner of schema dml), through SPI with
 * parameters, after the caller's right to the model has been checked:
 *
 *	 a role may use a model name when it has the privileges of the role
 *	 that owns the version in question, or when the name was granted to a
 *	 role whose privileges it has (dml_grant).
 *
 * Writes happen in the caller's transaction, so a rolled-back transaction
 * leaves no model behind.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/syscache.h"

#include "dml.h"

/* bumped by every catalog write in this backend, seen by the model cache */
uint64		dml_catalog_generation = 1;

/*
 * DmlExtensionOwner
 *		The owner of schema dml, as whom catalog access runs.
 */
Oid
DmlExtensionOwner(void)
{
	Oid			nsp = get_namespace_oid("dml", true);
	HeapTuple	tup;
	Oid			owner;

	if (!OidIsValid(nsp))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("schema \"dml\" does not exist"),
				 errhint("Run CREATE EXTENSION dml in this database.")));
	tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nsp));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for namespace %u", nsp);
	owner = ((Form_pg_namespace) GETSTRUCT(tup))->nspowner;
	ReleaseSysCache(tup);
	return owner;
}

/*
 * DmlExtensionSchema
 *		The schema of dml's user-facing functions (@extschema@), or
 *		InvalidOid when the extension is not installed.  (PostgreSQL 15
 *		keeps its own get_extension_schema static.)
 */
Oid
DmlExtensionSchema(void)
{
	Relation	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			nsp = InvalidOid;

	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("dml"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		nsp = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return nsp;
}

/* run as the extension's owner until DmlRestoreUser */
void
DmlBecomeOwner(DmlCatalogUser *save)
{
	GetUserIdAndSecContext(&save->saved_userid, &save->saved_sec_context);
	SetUserIdAndSecContext(DmlExtensionOwner(),
						   save->saved_sec_context | SECURITY_LOCAL_USERID_CHANGE);
}

void
DmlRestoreUser(DmlCatalogUser *save)
{
	SetUserIdAndSecContext(save->saved_userid, save->saved_sec_context);
}

/* the model cache must look again */
void
DmlCatalogChanged(void)
{
	dml_catalog_generation++;
}

/*
 * DmlRoleCanUse
 *		May the current user use model name, whose version is owned by owner?
 */
bool
DmlRoleCanUse(Oid owner, const char *name)
{
	Oid			user = GetUserId();
	DmlCatalogUser save;
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];
	bool		ok = false;

	if (has_privs_of_role(user, owner))
		return true;

	values[0] = CStringGetTextDatum(name);
	DmlBecomeOwner(&save);
	SPI_connect();
	if (SPI_execute_with_args("SELECT grantee FROM dml.grants WHERE name = $1",
							  1, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "dml: reading dml.grants failed");
	for (uint64 i = 0; i < SPI_processed && !ok; i++)
	{
		bool		isnull;
		Oid			grantee = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
															 SPI_tuptable->tupdesc,
															 1, &isnull));

		if (!isnull && has_privs_of_role(user, grantee))
			ok = true;
	}
	SPI_finish();
	DmlRestoreUser(&save);
	return ok;
}

PG_FUNCTION_INFO_V1(dml_can_use);

/* dml.can_use(owner oid, name text): the row filter of the dml_models view */
Datum
dml_can_use(PG_FUNCTION_ARGS)
{
	Oid			owner = PG_GETARG_OID(0);
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(1));

	PG_RETURN_BOOL(DmlRoleCanUse(owner, name));
}

/*
 * DmlNextModelId
 *		A model id, taken before training so epochs can point at it.
 */
int64
DmlNextModelId(void)
{
	DmlCatalogUser save;
	int64		id;
	bool		isnull;

	DmlBecomeOwner(&save);
	SPI_connect();
	if (SPI_execute("SELECT nextval('dml.models_id_seq')", false, 1) != SPI_OK_SELECT)
		elog(ERROR, "dml: nextval failed");
	id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	DmlRestoreUser(&save);
	return id;
}

/*
 * DmlCheckNameForTraining
 *		Training a name that exists adds a version, which needs the right to
 *		use the name.  Checked before anything launches.
 */
void
DmlCheckNameForTraining(const char *name)
{
	DmlCatalogUser save;
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];
	Oid			owner = InvalidOid;
	bool		found = false;

	values[0] = CStringGetTextDatum(name);
	DmlBecomeOwner(&save);
	SPI_connect();
	if (SPI_execute_with_args("SELECT owner FROM dml.models WHERE name = $1 "
							  "ORDER BY version DESC LIMIT 1",
							  1, argtypes, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "dml: reading dml.models failed");
	if (SPI_processed > 0)
	{
		bool		isnull;

		owner = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
											   SPI_tuptable->tupdesc, 1, &isnull));
		found = true;
	}
	SPI_finish();
	DmlRestoreUser(&save);

	if (found && !DmlRoleCanUse(owner, name))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for model \"%s\"", name),
				 errdetail("The model belongs to role \"%s\".",
						   GetUserNameFromId(owner, true) ? GetUserNameFromId(owner, true) : "?"),
				 errhint("Choose another name, or ask the owner to run dml_grant.")));
}

/*
 * DmlCheckWritable
 *		A model is stored in dml.models: say so before anything is launched
 *		when this transaction cannot write (a hot standby, a read-only
 *		transaction), instead of failing at the catalog's sequence.
 */
void
DmlCheckWritable(const char *what)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot %s on a hot standby", what),
				 errdetail("A trained model is stored in dml.models, and a standby cannot write."),
				 errhint("Train on the primary: the model reaches this standby by replication.")));
	if (XactReadOnly)
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot %s in a read-only transaction", what),
				 errdetail("A trained model is stored in dml.models, in the caller's transaction."),
				 errhint("Train in a read-write transaction (check default_transaction_read_only).")));
}

/*
 * DmlMarkLastEpoch
 *		Record on the training's last dml.epochs row why it stopped.
 */
void
DmlMarkLastEpoch(int64 model_id, const char *stopped)
{
	DmlCatalogUser save;
	Oid			argtypes[2] = {INT8OID, TEXTOID};
	Datum		values[2];

	values[0] = Int64GetDatum(model_id);
	values[1] = CStringGetTextDatum(stopped);
	DmlBecomeOwner(&save);
	SPI_connect();
	if (SPI_execute_with_args("UPDATE dml.epochs SET stopped = $2 WHERE model_id = $1 AND "
							  "(restarts, epoch) = (SELECT restarts, epoch FROM dml.epochs "
							  "WHERE model_id = $1 ORDER BY restarts DESC, epoch DESC LIMIT 1)",
							  2, argtypes, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "dml: updating dml.epochs failed");
	SPI_finish();
	DmlRestoreUser(&save);
}

/*
 * DmlStoreModel
 *		Insert a model version; returns the version number.  The name is
 *		locked for the rest of the transaction so that concurrent trainings
 *		of one name get consecutive versions.
 */
int
DmlStoreModel(int64 id, const char *name, const char *kind, const char *device,
			  const char *spec_json, bytea *weights, const char *metrics_json)
{
	DmlCatalogUser save;
	Oid			owner = GetUserId();
	Oid			argtypes[8] = {INT8OID, TEXTOID, OIDOID, TEXTOID, TEXTOID, TEXTOID,
	BYTEAOID, TEXTOID};
	Datum		values[8];
	Oid			lockargs[1] = {TEXTOID};
	Datum		lockvals[1];
	int			version;
	bool		isnull;

	lockvals[0] = CStringGetTextDatum(name);
	values[0] = Int64GetDatum(id);
	values[1] = CStringGetTextDatum(name);
	values[2] = ObjectIdGetDatum(owner);
	values[3] = CStringGetTextDatum(kind);
	values[4] = CStringGetTextDatum(device);
	values[5] = CStringGetTextDatum(spec_json);
	values[6] = PointerGetDatum(weights);
	values[7] = CStringGetTextDatum(metrics_json);

	DmlBecomeOwner(&save);
	SPI_connect();
	if (SPI_execute_with_args("SELECT pg_advisory_xact_lock(hashtext('dml.models'), hashtext($1))",
							  1, lockargs, lockvals, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "dml: locking model name failed");
	if (SPI_execute_with_args("INSERT INTO dml.models "
							  "(id, name, version, owner, kind, device, spec, weights, metrics) "
							  "SELECT $1, $2, coalesce(max(version), 0) + 1, $3, $4, $5, "
							  "$6::jsonb, $7, $8::jsonb FROM dml.models WHERE name = $2 "
							  "RETURNING version",
							  8, argtypes, values, NULL, false, 1) != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "dml: inserting into dml.models failed");
	version = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	DmlRestoreUser(&save);
	DmlCatalogChanged();
	return version;
}

/* a float8 Datum that is SQL NULL when not finite */
static Datum
float_or_null(double v, char *nulls, int i)
{
	if (isnan(v))
	{
		nulls[i] = 'n';
		return (Datum) 0;
	}
	nulls[i] = ' ';
	return Float8GetDatum(v);
}

/*
 * DmlStoreEpoch
 *		One row of dml.epochs, in the caller's transaction.
 */
void
DmlStoreEpoch(int64 model_id, int restarts, int epoch, double loss,
			  double val_loss, double val_metric, double rows_per_second,
			  double seconds, double bytes_sent, double staleness)
{
	DmlCatalogUser save;
	Oid			argtypes[10] = {INT8OID, INT4OID, INT4OID, FLOAT8OID, FLOAT8OID,
	FLOAT8OID, FLOAT8OID, FLOAT8OID, INT8OID, INT4OID};
	Datum		values[10];
	char		nulls[11] = "          ";

	values[0] = Int64GetDatum(model_id);
	values[1] = Int32GetDatum(restarts);
	values[2] = Int32GetDatum(epoch);
	values[3] = float_or_null(loss, nulls, 3);
	values[4] = float_or_null(val_loss, nulls, 4);
	values[5] = float_or_null(val_metric, nulls, 5);
	values[6] = float_or_null(rows_per_second, nulls, 6);
	values[7] = float_or_null(seconds, nulls, 7);
	values[8] = Int64GetDatum((int64) bytes_sent);
	values[9] = Int32GetDatum(isnan(staleness) ? 0 : (int32) staleness);
	if (isnan(staleness))
		nulls[9] = 'n';

	DmlBecomeOwner(&save);
	SPI_connect();
	if (SPI_execute_with_args("INSERT INTO dml.epochs (model_id, restarts, epoch, loss, "
							  "val_loss, val_metric, rows_per_second, seconds, bytes_sent, "
							  "staleness) "
							  "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) "
							  "ON CONFLICT (model_id, restarts, epoch) DO NOTHING",
							  10, argtypes, values, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "dml: inserting into dml.epochs failed");
	SPI_finish();
	DmlRestoreUser(&save);
}
