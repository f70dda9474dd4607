/*-------------------------------------------------------------------------
 *
 * manage.c
 *	  Model versions and access: dml_deploy, dml_drop_model, dml_grant,
 *	  dml_revoke.
 *
 * Each is for the name's owner (a role with the owner's privileges, or a
 * superuser) alone: a role the model is shared with may use it, not change
 * it.  A name the caller may not use at all "does not exist".  The catalog
 * is then written as the extension's owner (catalog.c).  Deployments and
 * grants belong to the name and its owner, and go with its last version.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/syscache.h"

#include "dml.h"

/* run one catalog write as the extension's owner; rows affected */
static uint64
owner_write(const char *sql, int nargs, Oid *argtypes, Datum *values)
{
	uint64		n;

	SPI_connect();
	DmlOwnerQuery(sql, nargs, argtypes, values, false, 0);
	n = SPI_processed;
	SPI_finish();
	DmlCatalogChanged();
	return n;
}

/* the name argument, which must not be NULL */
static char *
name_arg(FunctionCallInfo fcinfo)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("model name must not be NULL")));
	return text_to_cstring(PG_GETARG_TEXT_PP(0));
}

/* an error unless the owner's name has this version */
static void
check_version(const char *name, Oid owner, int version)
{
	Oid			argtypes[3] = {TEXTOID, OIDOID, INT4OID};
	Datum		values[3] = {CStringGetTextDatum(name), ObjectIdGetDatum(owner),
	Int32GetDatum(version)};
	bool		found;

	SPI_connect();
	DmlOwnerQuery("SELECT 1 FROM dml.models WHERE name OPERATOR(pg_catalog.=) $1 "
				  "AND owner OPERATOR(pg_catalog.=) $2 AND version OPERATOR(pg_catalog.=) $3",
				  3, argtypes, values, true, 1);
	found = SPI_processed > 0;
	SPI_finish();
	if (!found)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("model \"%s\" has no version %d", name, version)));
}

PG_FUNCTION_INFO_V1(dml_deploy);

/* dml_deploy(name, version): pin a version; NULL version unpins */
Datum
dml_deploy(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	char	   *name = name_arg(fcinfo);
	Oid			owner = DmlCheckAccess(name, DML_ACCESS_OWNER);
	Oid			argtypes[3] = {TEXTOID, OIDOID, INT4OID};
	Datum		values[3] = {CStringGetTextDatum(name), ObjectIdGetDatum(owner), 0};

	if (PG_ARGISNULL(1))
	{
		owner_write("DELETE FROM dml.deployments WHERE name OPERATOR(pg_catalog.=) $1 "
					"AND owner OPERATOR(pg_catalog.=) $2", 2, argtypes, values);
		PG_RETURN_VOID();
	}
	check_version(name, owner, PG_GETARG_INT32(1));
	values[2] = Int32GetDatum(PG_GETARG_INT32(1));
	owner_write("INSERT INTO dml.deployments (name, owner, version) VALUES ($1, $2, $3) "
				"ON CONFLICT (name, owner) DO UPDATE SET version = excluded.version",
				3, argtypes, values);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(dml_drop_model);

/*
 * dml_drop_model(name, version DEFAULT NULL): drop one or every version.
 * A pin on a dropped version goes with it (predict falls back to the
 * newest); with the last version go the name's deployment and grants.
 */
Datum
dml_drop_model(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	char	   *name = name_arg(fcinfo);
	Oid			owner = DmlCheckAccess(name, DML_ACCESS_OWNER);
	Oid			argtypes[3] = {TEXTOID, OIDOID, INT4OID};
	Datum		values[3] = {CStringGetTextDatum(name), ObjectIdGetDatum(owner), 0};
	uint64		n;

	if (PG_ARGISNULL(1))
		n = owner_write("DELETE FROM dml.models WHERE name OPERATOR(pg_catalog.=) $1 "
						"AND owner OPERATOR(pg_catalog.=) $2", 2, argtypes, values);
	else
	{
		check_version(name, owner, PG_GETARG_INT32(1));
		values[2] = Int32GetDatum(PG_GETARG_INT32(1));
		n = owner_write("DELETE FROM dml.models WHERE name OPERATOR(pg_catalog.=) $1 "
						"AND owner OPERATOR(pg_catalog.=) $2 AND version OPERATOR(pg_catalog.=) $3",
						3, argtypes, values);
		owner_write("DELETE FROM dml.deployments WHERE name OPERATOR(pg_catalog.=) $1 "
					"AND owner OPERATOR(pg_catalog.=) $2 AND version OPERATOR(pg_catalog.=) $3",
					3, argtypes, values);
	}
	DmlForgetName(name, owner);
	PG_RETURN_INT32((int32) n);
}

/*
 * DmlForgetName
 *		Remove the deployment and grants of name under owner when no version
 *		of it is left.
 */
void
DmlForgetName(const char *name, Oid owner)
{
	Oid			argtypes[2] = {TEXTOID, OIDOID};
	Datum		values[2] = {CStringGetTextDatum(name), ObjectIdGetDatum(owner)};

#define NO_VERSION_LEFT "name OPERATOR(pg_catalog.=) $1 AND owner OPERATOR(pg_catalog.=) $2 " \
	"AND NOT EXISTS (SELECT FROM dml.models m WHERE m.name OPERATOR(pg_catalog.=) $1 " \
	"AND m.owner OPERATOR(pg_catalog.=) $2)"
	owner_write("DELETE FROM dml.deployments WHERE " NO_VERSION_LEFT, 2, argtypes, values);
	owner_write("DELETE FROM dml.grants WHERE " NO_VERSION_LEFT, 2, argtypes, values);
#undef NO_VERSION_LEFT
}

/* the role argument: a role that exists */
static Oid
role_arg(FunctionCallInfo fcinfo)
{
	Oid			role = PG_GETARG_OID(1);

	if (!OidIsValid(role) || !SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(role)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role with OID %u does not exist", role)));
	return role;
}

PG_FUNCTION_INFO_V1(dml_grant);

/*
 * dml_grant(name, role, details DEFAULT true): let role use the model;
 * with details false it may predict with it but not read its statistics,
 * vocabularies, metrics or training history.
 */
Datum
dml_grant(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	char	   *name = name_arg(fcinfo);
	Oid			owner = DmlCheckAccess(name, DML_ACCESS_OWNER);
	Oid			argtypes[4] = {TEXTOID, OIDOID, OIDOID, BOOLOID};
	Datum		values[4];

	values[0] = CStringGetTextDatum(name);
	values[1] = ObjectIdGetDatum(owner);
	values[2] = ObjectIdGetDatum(role_arg(fcinfo));
	values[3] = BoolGetDatum(PG_GETARG_BOOL(2));
	owner_write("INSERT INTO dml.grants (name, owner, grantee, details) VALUES ($1, $2, $3, $4) "
				"ON CONFLICT (name, owner, grantee) DO UPDATE SET details = excluded.details",
				4, argtypes, values);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(dml_revoke);

/* dml_revoke(name, role): take the grant back */
Datum
dml_revoke(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	char	   *name = name_arg(fcinfo);
	Oid			owner = DmlCheckAccess(name, DML_ACCESS_OWNER);
	Oid			argtypes[3] = {TEXTOID, OIDOID, OIDOID};
	Datum		values[3];

	values[0] = CStringGetTextDatum(name);
	values[1] = ObjectIdGetDatum(owner);
	values[2] = ObjectIdGetDatum(role_arg(fcinfo));
	owner_write("DELETE FROM dml.grants WHERE name OPERATOR(pg_catalog.=) $1 "
				"AND owner OPERATOR(pg_catalog.=) $2 AND grantee OPERATOR(pg_catalog.=) $3",
				3, argtypes, values);
	PG_RETURN_VOID();
}
