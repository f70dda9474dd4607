/*-------------------------------------------------------------------------
 *
 * manage.c
 *	  Model versions and access: dml_deploy, dml_drop_model, dml_grant,
 *	  dml_revoke.
 *
 * Each checks the caller's right first (using a name needs the owner's
 * privileges or a grant; granting and revoking need the owner's
 * privileges), then writes the catalog as the extension's owner.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"

#include "dml.h"

/* owners of a name's versions (or one version); error when none */
static List *
name_owners(const char *name, int version, bool has_version)
{
	DmlCatalogUser save;
	Oid			argtypes[2] = {TEXTOID, INT4OID};
	Datum		values[2];
	List	   *owners = NIL;

	values[0] = CStringGetTextDatum(name);
	values[1] = Int32GetDatum(version);
	DmlBecomeOwner(&save);
	SPI_connect();
	if (SPI_execute_with_args(has_version ?
							  "SELECT DISTINCT owner FROM dml.models WHERE name = $1 AND version = $2" :
							  "SELECT DISTINCT owner FROM dml.models WHERE name = $1",
							  has_version ? 2 : 1, argtypes, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "dml: reading dml.models failed");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		owners = lappend_oid(owners, DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
																	SPI_tuptable->tupdesc, 1, &isnull)));
	}
	SPI_finish();
	DmlRestoreUser(&save);
	if (owners == NIL)
	{
		if (has_version)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("model \"%s\" has no version %d", name, version)));
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" does not exist", name)));
	}
	return owners;
}

/* the caller may use every listed owner's versions of name */
static void
check_use(const char *name, List *owners)
{
	ListCell   *lc;

	foreach(lc, owners)
		if (!DmlRoleCanUse(lfirst_oid(lc), name))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied for model \"%s\"", name),
					 errhint("The model's owner can share it with dml_grant.")));
}

/* the caller has the privileges of every owner of name */
static void
check_owner(const char *name, List *owners)
{
	ListCell   *lc;

	foreach(lc, owners)
		if (!has_privs_of_role(GetUserId(), lfirst_oid(lc)))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("must be owner of model \"%s\"", name)));
}

/* run one catalog statement as the extension's owner */
static uint64
owner_exec(const char *sql, int nargs, Oid *argtypes, Datum *values)
{
	DmlCatalogUser save;
	uint64		n;
	int			rc;

	DmlBecomeOwner(&save);
	SPI_connect();
	rc = SPI_execute_with_args(sql, nargs, argtypes, values, NULL, false, 0);
	if (rc < 0)
		elog(ERROR, "dml: catalog statement failed: %s", SPI_result_code_string(rc));
	n = SPI_processed;
	SPI_finish();
	DmlRestoreUser(&save);
	DmlCatalogChanged();
	return n;
}

PG_FUNCTION_INFO_V1(dml_deploy);

/* dml_deploy(name, version): pin a version; NULL version unpins */
Datum
dml_deploy(PG_FUNCTION_ARGS)
{
	char	   *name;
	Oid			argtypes[2] = {TEXTOID, INT4OID};
	Datum		values[2];

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("model name must not be NULL")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	values[0] = CStringGetTextDatum(name);
	if (PG_ARGISNULL(1))
	{
		check_use(name, name_owners(name, 0, false));
		owner_exec("DELETE FROM dml.deployments WHERE name = $1", 1, argtypes, values);
		PG_RETURN_VOID();
	}
	values[1] = Int32GetDatum(PG_GETARG_INT32(1));
	check_use(name, name_owners(name, PG_GETARG_INT32(1), true));
	owner_exec("INSERT INTO dml.deployments (name, version) VALUES ($1, $2) "
			   "ON CONFLICT (name) DO UPDATE SET version = excluded.version",
			   2, argtypes, values);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(dml_drop_model);

/* dml_drop_model(name, version DEFAULT NULL): drop one or every version */
Datum
dml_drop_model(PG_FUNCTION_ARGS)
{
	char	   *name;
	Oid			argtypes[2] = {TEXTOID, INT4OID};
	Datum		values[2];
	uint64		n;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("model name must not be NULL")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	values[0] = CStringGetTextDatum(name);
	if (PG_ARGISNULL(1))
	{
		check_use(name, name_owners(name, 0, false));
		n = owner_exec("DELETE FROM dml.models WHERE name = $1", 1, argtypes, values);
		owner_exec("DELETE FROM dml.deployments WHERE name = $1", 1, argtypes, values);
		owner_exec("DELETE FROM dml.grants WHERE name = $1", 1, argtypes, values);
		PG_RETURN_INT32((int32) n);
	}
	values[1] = Int32GetDatum(PG_GETARG_INT32(1));
	check_use(name, name_owners(name, PG_GETARG_INT32(1), true));
	n = owner_exec("DELETE FROM dml.models WHERE name = $1 AND version = $2", 2, argtypes, values);
	/* a pin on the dropped version goes with it: predict falls back to the newest */
	owner_exec("DELETE FROM dml.deployments WHERE name = $1 AND version = $2", 2, argtypes, values);
	PG_RETURN_INT32((int32) n);
}

PG_FUNCTION_INFO_V1(dml_grant);

/* dml_grant(name, role): let role use the model */
Datum
dml_grant(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Oid			argtypes[2] = {TEXTOID, OIDOID};
	Datum		values[2];

	check_owner(name, name_owners(name, 0, false));
	values[0] = CStringGetTextDatum(name);
	values[1] = ObjectIdGetDatum(PG_GETARG_OID(1));
	owner_exec("INSERT INTO dml.grants (name, grantee) VALUES ($1, $2) ON CONFLICT DO NOTHING",
			   2, argtypes, values);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(dml_revoke);

/* dml_revoke(name, role): take the grant back */
Datum
dml_revoke(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Oid			argtypes[2] = {TEXTOID, OIDOID};
	Datum		values[2];

	check_owner(name, name_owners(name, 0, false));
	values[0] = CStringGetTextDatum(name);
	values[1] = ObjectIdGetDatum(PG_GETARG_OID(1));
	owner_exec("DELETE FROM dml.grants WHERE name = $1 AND grantee = $2", 2, argtypes, values);
	PG_RETURN_VOID();
}
