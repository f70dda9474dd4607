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
 *	 a model name belongs to one role, the owner of all its versions;
 *	 a role may use it when it has the privileges of that owner, or when
 *	 the name was granted, under that owner, to a role whose privileges it
 *	 has (dml_grant); only roles with the owner's privileges manage it
 *	 (add versions, deploy, drop, grant, revoke).
 *
 * Owner context (DmlBecomeOwner) sets search_path to pg_catalog, pg_temp
 * for its duration, and every statement in it names its tables, functions
 * and operators with their schema: no function or operator of the caller's
 * choosing can run as the owner.  (It cannot be a security-restricted
 * operation: dml.epochs' foreign key is a deferred trigger, which those
 * may not queue.)
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
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "dml.h"
#include "jobs.h"

/* bumped by every catalog write in this backend, seen by the model cache */
uint64		dml_catalog_generation = 1;

/*
 * The schema version check (dml.h): a database whose extension is at
 * another version than the library's fails every function with a hint,
 * instead of some SQL error about a missing column (or worse: an older
 * dml_train's SQL declaration passes fewer arguments than this library
 * reads).  The answer "right version" is cached for the backend; dropping
 * and re-creating the extension drops schema dml, and every update script
 * creates or replaces functions, so a change of either kind (NAMESPACEOID,
 * PROCOID invalidations, from any session) has the next call read
 * pg_extension again.  A wrong version is never cached: the call after
 * ALTER EXTENSION dml UPDATE works.  Inside CREATE/ALTER EXTENSION's own
 * scripts the check is skipped (the row already names the target version).
 */
#ifndef DML_SCHEMA_VERSION
#error "DML_SCHEMA_VERSION must be defined (the Makefile's EXTVERSION)"
#endif

bool		dml_schema_ok = false;

static void
schema_changed(Datum arg, int cacheid, uint32 hashvalue)
{
	dml_schema_ok = false;
}

/* the installed version of extension dml, palloc'd, or NULL when it is not installed */
static char *
installed_version(void)
{
	Relation	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	char	   *version = NULL;

	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum("dml"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		bool		isnull;
		Datum		d = heap_getattr(tup, Anum_pg_extension_extversion,
									 RelationGetDescr(rel), &isnull);

		if (!isnull)
			version = text_to_cstring(DatumGetTextPP(d));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return version;
}

/* is version a older than b?  (major.minor, compared as numbers) */
static bool
version_before(const char *a, const char *b)
{
	int			amaj = 0,
				amin = 0,
				bmaj = 0,
				bmin = 0;

	(void) sscanf(a, "%d.%d", &amaj, &amin);
	(void) sscanf(b, "%d.%d", &bmaj, &bmin);
	return amaj < bmaj || (amaj == bmaj && amin < bmin);
}

/*
 * DmlCheckSchemaVersion
 *		Error unless extension dml in this database is at the library's
 *		version; DML_REQUIRE_SCHEMA() calls it until it has said yes.
 */
void
DmlCheckSchemaVersion(void)
{
	static bool registered = false;
	char	   *version;

	if (creating_extension || IsBinaryUpgrade || !IsTransactionState())
		return;
	if (!registered)
	{
		CacheRegisterSyscacheCallback(NAMESPACEOID, schema_changed, (Datum) 0);
		CacheRegisterSyscacheCallback(PROCOID, schema_changed, (Datum) 0);
		registered = true;
	}
	version = installed_version();
	if (version == NULL)
		return;					/* the function's own look-ups say so */
	if (strcmp(version, DML_SCHEMA_VERSION) == 0)
	{
		dml_schema_ok = true;
		return;
	}
	if (version_before(version, DML_SCHEMA_VERSION))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension \"dml\" is at version %s, but its library needs version %s",
						version, DML_SCHEMA_VERSION),
				 errhint("Run ALTER EXTENSION dml UPDATE in this database.")));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("extension \"dml\" is at version %s, but its library needs version %s",
					version, DML_SCHEMA_VERSION),
			 errhint("Install the library of dml %s in this server.", version)));
}

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

/*
 * DmlBecomeOwner
 *		Run as the extension's owner until DmlRestoreUser, under
 *		search_path pg_catalog, pg_temp.  An error in between undoes both
 *		with the transaction.
 */
void
DmlBecomeOwner(DmlCatalogUser *save)
{
	Oid			owner = DmlExtensionOwner();

	GetUserIdAndSecContext(&save->saved_userid, &save->saved_sec_context);
	SetUserIdAndSecContext(owner, save->saved_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	save->guc_nest_level = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
}

void
DmlRestoreUser(DmlCatalogUser *save)
{
	AtEOXact_GUC(true, save->guc_nest_level);
	SetUserIdAndSecContext(save->saved_userid, save->saved_sec_context);
}

/* the model cache must look again */
void
DmlCatalogChanged(void)
{
	dml_catalog_generation++;
}

/*
 * DmlOwnerQuery
 *		Run one catalog statement as the extension's owner; returns the
 *		SPI result code.  The caller is connected to SPI.
 */
int
DmlOwnerQuery(const char *sql, int nargs, Oid *argtypes, Datum *values,
			  bool read_only, long limit)
{
	DmlCatalogUser save;
	int			rc;

	DmlBecomeOwner(&save);
	rc = SPI_execute_with_args(sql, nargs, argtypes, values, NULL, read_only, limit);
	DmlRestoreUser(&save);
	if (rc < 0)
		elog(ERROR, "dml: catalog statement failed: %s", SPI_result_code_string(rc));
	return rc;
}

/* column i of row r of the last SPI result as a Datum; NULL is an error */
Datum
DmlSpiValue(uint64 r, int i)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, i, &isnull);

	if (isnull)
		elog(ERROR, "dml: unexpected NULL in the catalog. Please report a bug.");
	return d;
}

/*
 * DmlNameOwner
 *		The role that owns model name (the owner of its newest version), or
 *		InvalidOid when the name has no version.
 */
Oid
DmlNameOwner(const char *name)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];
	Oid			owner = InvalidOid;

	values[0] = CStringGetTextDatum(name);
	SPI_connect();
	/* not read-only: a fresh snapshot sees this transaction's own changes */
	DmlOwnerQuery("SELECT owner FROM dml.models WHERE name OPERATOR(pg_catalog.=) $1 "
				  "ORDER BY version DESC LIMIT 1", 1, argtypes, values, false, 1);
	if (SPI_processed > 0)
		owner = DatumGetObjectId(DmlSpiValue(0, 1));
	SPI_finish();
	return owner;
}

/* what the calling role may do with a name owned by owner */
static DmlAccess
role_access(Oid owner, const char *name)
{
	Oid			user = GetUserId();
	Oid			argtypes[2] = {TEXTOID, OIDOID};
	Datum		values[2];
	DmlAccess	access = DML_ACCESS_NONE;

	if (!OidIsValid(owner))
		return DML_ACCESS_NONE;
	/* owners, members of the owner, superusers; a dropped owner: superusers */
	if (has_privs_of_role(user, owner))
		return DML_ACCESS_OWNER;

	values[0] = CStringGetTextDatum(name);
	values[1] = ObjectIdGetDatum(owner);
	SPI_connect();
	DmlOwnerQuery("SELECT grantee, details FROM dml.grants "
				  "WHERE name OPERATOR(pg_catalog.=) $1 AND owner OPERATOR(pg_catalog.=) $2",
				  2, argtypes, values, true, 0);
	for (uint64 i = 0; i < SPI_processed && access != DML_ACCESS_DETAILS; i++)
	{
		Oid			grantee = DatumGetObjectId(DmlSpiValue(i, 1));

		if (has_privs_of_role(user, grantee))
			access = DatumGetBool(DmlSpiValue(i, 2)) ? DML_ACCESS_DETAILS : DML_ACCESS_USE;
	}
	SPI_finish();
	return access;
}

/*
 * DmlRoleCanUse
 *		May the current user use model name, owned by owner?
 */
bool
DmlRoleCanUse(Oid owner, const char *name)
{
	return role_access(owner, name) >= DML_ACCESS_USE;
}

/* the calling role's access to model name, whose owner is owner */
DmlAccess
DmlRoleAccess(Oid owner, const char *name)
{
	return role_access(owner, name);
}

/*
 * DmlCheckAccess
 *		The calling role's access to model name, at least need; otherwise
 *		an error.  A name the role may not use at all "does not exist", so
 *		that the error tells nothing about names of others.  Returns the
 *		name's owner.
 */
Oid
DmlCheckAccess(const char *name, DmlAccess need)
{
	Oid			owner = DmlNameOwner(name);
	DmlAccess	access = role_access(owner, name);

	if (access == DML_ACCESS_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", name),
				 errhint("dml_models lists the models you can use.")));
	if (access < need)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of model \"%s\"", name),
				 errdetail("A role the model is shared with may use it, not change it."),
				 errhint("Choose another name to train a model of your own.")));
	return owner;
}

PG_FUNCTION_INFO_V1(dml_can_use);

/* dml.can_use(owner oid, name text): the row filter of the dml_models view */
Datum
dml_can_use(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	Oid			owner = PG_GETARG_OID(0);
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(1));

	PG_RETURN_BOOL(role_access(owner, name) >= DML_ACCESS_USE);
}

PG_FUNCTION_INFO_V1(dml_can_see_details);

/* dml.can_see_details(owner oid, name text): may the caller read the details */
Datum
dml_can_see_details(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	Oid			owner = PG_GETARG_OID(0);
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(1));

	PG_RETURN_BOOL(role_access(owner, name) >= DML_ACCESS_DETAILS);
}

/*
 * DmlNextModelId
 *		A model id, taken before training so epochs can point at it.
 */
int64
DmlNextModelId(void)
{
	int64		id;

	DmlCheckWritable("store a model");
	SPI_connect();
	DmlOwnerQuery("SELECT pg_catalog.nextval('dml.models_id_seq'::pg_catalog.regclass)",
				  0, NULL, NULL, false, 1);
	id = DatumGetInt64(DmlSpiValue(0, 1));
	SPI_finish();
	return id;
}

/*
 * DmlCheckWritable
 *		A clear error where no model can be stored: on a hot standby and in
 *		a read-only transaction (what the error would otherwise be is a
 *		nextval() failure).
 */
void
DmlCheckWritable(const char *what)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot %s on a hot standby", what),
				 errdetail("Models are stored in dml.models, which only the primary server can write."),
				 errhint("Train on the primary; the model reaches this standby by replication.")));
	if (XactReadOnly)
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot %s in a read-only transaction", what),
				 errhint("Run it in a read-write transaction.")));
}

/*
 * DmlCheckNameForTraining
 *		Training a name that exists adds a version, which only the name's
 *		owner (or a member of it) may do; a name another role owns cannot be
 *		taken.  Checked before anything launches.  Returns the owner the new
 *		version will have: the name's, else the caller.
 */
Oid
DmlCheckNameForTraining(const char *name)
{
	Oid			owner = DmlNameOwner(name);

	if (!OidIsValid(owner))
		return GetUserId();
	if (role_access(owner, name) == DML_ACCESS_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("model name \"%s\" is not available", name),
				 errdetail("Model names are shared by every role of the database, and this one is taken."),
				 errhint("Choose another name.")));
	return DmlCheckAccess(name, DML_ACCESS_OWNER);
}

/*
 * DmlMarkLastEpoch
 *		Record on the training's last dml.epochs row why it stopped.
 */
void
DmlMarkLastEpoch(int64 model_id, const char *stopped)
{
	Oid			argtypes[2] = {INT8OID, TEXTOID};
	Datum		values[2];

	values[0] = Int64GetDatum(model_id);
	values[1] = CStringGetTextDatum(stopped);
	SPI_connect();
	DmlOwnerQuery("UPDATE dml.epochs e SET stopped = $2 "
				  "WHERE e.model_id OPERATOR(pg_catalog.=) $1 "
				  "AND e.restarts OPERATOR(pg_catalog.=) (SELECT pg_catalog.max(restarts) "
				  "FROM dml.epochs WHERE model_id OPERATOR(pg_catalog.=) $1) "
				  "AND e.epoch OPERATOR(pg_catalog.=) (SELECT pg_catalog.max(epoch) FROM dml.epochs "
				  "WHERE model_id OPERATOR(pg_catalog.=) $1 "
				  "AND restarts OPERATOR(pg_catalog.=) e.restarts)",
				  2, argtypes, values, false, 0);
	SPI_finish();
}

/*
 * DmlStoreModel
 *		Insert a model version owned by owner; returns the version number.
 *		The name is locked for the rest of the transaction so that
 *		concurrent trainings of one name get consecutive versions, and the
 *		owner is checked again under the lock: a name taken meanwhile by
 *		another role is an error.
 */
int
DmlStoreModel(int64 id, const char *name, Oid owner, const char *kind, const char *device,
			  const char *spec_json, bytea *weights, const char *metrics_json)
{
	Oid			argtypes[8] = {INT8OID, TEXTOID, OIDOID, TEXTOID, TEXTOID, TEXTOID,
	BYTEAOID, TEXTOID};
	Datum		values[8];
	Oid			lockargs[1] = {TEXTOID};
	Datum		lockvals[1];
	Oid			now_owner;
	int			version;

	lockvals[0] = CStringGetTextDatum(name);
	values[0] = Int64GetDatum(id);
	values[1] = CStringGetTextDatum(name);
	values[2] = ObjectIdGetDatum(owner);
	values[3] = CStringGetTextDatum(kind);
	values[4] = CStringGetTextDatum(device);
	values[5] = CStringGetTextDatum(spec_json);
	values[6] = PointerGetDatum(weights);
	values[7] = CStringGetTextDatum(metrics_json);

	SPI_connect();
	DmlOwnerQuery("SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('dml.models'), "
				  "pg_catalog.hashtext($1))", 1, lockargs, lockvals, false, 1);
	now_owner = DmlNameOwner(name);
	if (OidIsValid(now_owner) && now_owner != owner)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("model name \"%s\" is not available", name),
				 errdetail("Another role trained a model of this name while this one trained."),
				 errhint("Choose another name.")));
	DmlOwnerQuery("INSERT INTO dml.models "
				  "(id, name, version, owner, kind, device, spec, weights, metrics) "
				  "SELECT $1, $2, COALESCE(pg_catalog.max(version), 0) "
				  "OPERATOR(pg_catalog.+) 1, $3, $4, $5, "
				  "$6::pg_catalog.jsonb, $7, $8::pg_catalog.jsonb FROM dml.models "
				  "WHERE name OPERATOR(pg_catalog.=) $2 RETURNING version",
				  8, argtypes, values, false, 1);
	version = DatumGetInt32(DmlSpiValue(0, 1));
	SPI_finish();
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
 * A job's dml.epochs rows wait in the backend while it runs (DmlStoreEpoch)
 * and go into the table when it has ended (DmlFlushEpochs).  The caller's
 * transaction shows them only at its commit anyway, and an INSERT while
 * the ranks ran took the backend 0.3-1.2 ms of a core that a rank needed
 * where each rank has one: a 2-worker Newton iteration on 1,000,000 x 20
 * (about 10 ms) waited 1 ms for it.  A background job's epoch is still
 * recorded at once (dml_job_epochs reads it while the job runs).  Rows
 * left by a statement that failed before its flush are dropped when the
 * next job begins (DmlDiscardEpochs): their transaction is gone, and with
 * it their model.
 */
#define PENDING_EPOCHS_MAX 1024	/* flushed early beyond this many */

typedef struct PendingEpoch
{
	Datum		values[13];
	char		nulls[14];
} PendingEpoch;

static MemoryContext pending_cxt = NULL;
static PendingEpoch *pending = NULL;
static int	npending = 0;

static const Oid epoch_argtypes[13] = {INT8OID, INT4OID, INT4OID, FLOAT8OID, FLOAT8OID,
	FLOAT8OID, FLOAT8OID, FLOAT8OID, INT8OID, INT4OID, INT8OID, INT8OID, TEXTARRAYOID};

/*
 * DmlDiscardEpochs
 *		Forget epoch rows not yet stored (a job about to begin).
 */
void
DmlDiscardEpochs(void)
{
	if (pending_cxt != NULL)
		MemoryContextReset(pending_cxt);
	pending = NULL;
	npending = 0;
}

/*
 * DmlFlushEpochs
 *		The rows DmlStoreEpoch kept, into dml.epochs in the caller's
 *		transaction (one plan for all of them).
 */
void
DmlFlushEpochs(void)
{
	SPIPlanPtr	plan;

	if (npending == 0)
		return;
	SPI_connect();
	{
		DmlCatalogUser save;

		DmlBecomeOwner(&save);
		plan = SPI_prepare("INSERT INTO dml.epochs (model_id, restarts, epoch, loss, "
						   "val_loss, val_metric, rows_per_second, seconds, bytes_sent, "
						   "staleness, bytes_within, bytes_across, hosts) "
						   "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) "
						   "ON CONFLICT (model_id, restarts, epoch) DO NOTHING",
						   13, (Oid *) epoch_argtypes);
		if (plan == NULL)
			elog(ERROR, "dml: preparing the insert into dml.epochs failed: %s",
				 SPI_result_code_string(SPI_result));
		for (int i = 0; i < npending; i++)
			if (SPI_execute_plan(plan, pending[i].values, pending[i].nulls, false, 0) != SPI_OK_INSERT)
				elog(ERROR, "dml: inserting into dml.epochs failed");
		SPI_freeplan(plan);
		DmlRestoreUser(&save);
	}
	SPI_finish();
	DmlDiscardEpochs();
}

/*
 * DmlStoreEpoch
 *		One row of dml.epochs, in the caller's transaction: kept until
 *		DmlFlushEpochs (above).
 */
void
DmlStoreEpoch(int64 model_id, int restarts, int epoch, double loss,
			  double val_loss, double val_metric, double rows_per_second,
			  double seconds, double bytes_sent, double bytes_across, double staleness,
			  List *rank_hosts)
{
	PendingEpoch *row;
	Datum	   *values;
	char	   *nulls;
	Datum	   *hosts;
	int			nhosts = 0;
	ListCell   *lc;
	MemoryContext old;

	/* a background job's row is seen at once (dml_job_epochs), the table's at commit */
	if (DmlCurrentJobId != 0)
	{
		DmlJobEpoch e;

		memset(&e, 0, sizeof(e));
		e.restarts = restarts;
		e.epoch = epoch;
		e.loss = loss;
		e.val_loss = val_loss;
		e.val_metric = val_metric;
		e.rows_per_second = rows_per_second;
		e.seconds = seconds;
		e.bytes_sent = bytes_sent;
		e.bytes_across = bytes_across;
		e.staleness = staleness;
		e.recorded = GetCurrentTimestamp();
		DmlJobEpochRecord(&e);
	}

	if (npending == PENDING_EPOCHS_MAX)
		DmlFlushEpochs();
	if (pending_cxt == NULL)
		pending_cxt = AllocSetContextCreate(TopMemoryContext, "dml pending epochs",
											ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(pending_cxt);
	if (pending == NULL)
		pending = palloc(sizeof(PendingEpoch) * PENDING_EPOCHS_MAX);
	row = &pending[npending];
	values = row->values;
	nulls = row->nulls;
	memcpy(nulls, "             ", sizeof(row->nulls));
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
	values[10] = Int64GetDatum((int64) (bytes_sent - bytes_across));
	values[11] = Int64GetDatum((int64) bytes_across);
	hosts = palloc(sizeof(Datum) * (list_length(rank_hosts) + 1));
	foreach(lc, rank_hosts)
		hosts[nhosts++] = CStringGetTextDatum((char *) lfirst(lc));
	values[12] = PointerGetDatum(construct_array(hosts, nhosts, TEXTOID, -1, false, TYPALIGN_INT));
	if (nhosts == 0)
		nulls[12] = 'n';
	MemoryContextSwitchTo(old);
	npending++;
}
