/*-------------------------------------------------------------------------
 *
 * roles.c
 *	  Roles that own models or hold grants, handled as PostgreSQL handles
 *	  roles that own objects.
 *
 * A model's owner and a grant's grantee are role OIDs in dml's tables,
 * which pg_shdepend knows nothing of.  So that a role is never dropped
 * from under its models (and its OID later reused by a new role that would
 * inherit them), dml hooks the three commands:
 *
 *	 DROP ROLE r            refused while r owns models or holds grants in
 *	                        this database, naming how many
 *	 DROP OWNED BY r        also drops r's models (with their history,
 *	                        deployments and grants) and r's grants
 *	 REASSIGN OWNED BY r TO s   also gives r's models to s
 *
 * as PostgreSQL does for tables, in the current database.  The hooks are
 * in place in every session when dml is in shared_preload_libraries (the
 * documented setup), else only in sessions that have loaded dml.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "dml.h"

static object_access_hook_type prev_object_access_hook = NULL;
static ProcessUtility_hook_type prev_process_utility_hook = NULL;

/* whether dml's catalog exists in this database */
static bool
dml_installed(void)
{
	return OidIsValid(get_namespace_oid("dml", true)) &&
		OidIsValid(get_relname_relid("models", get_namespace_oid("dml", true)));
}

/* count(*) of one catalog query with one oid parameter, as the owner */
static int64
count_for_role(const char *sql, Oid role)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(role)};
	int64		n;

	SPI_connect();
	DmlOwnerQuery(sql, 1, argtypes, values, true, 1);
	n = DatumGetInt64(DmlSpiValue(0, 1));
	SPI_finish();
	return n;
}

/* DROP ROLE: refused while the role owns models or holds grants here */
static void
check_role_drop(Oid role)
{
	int64		models;
	int64		grants;

	if (!dml_installed())
		return;
	models = count_for_role("SELECT pg_catalog.count(*) FROM dml.models "
							"WHERE owner OPERATOR(pg_catalog.=) $1", role);
	grants = count_for_role("SELECT pg_catalog.count(*) FROM dml.grants "
							"WHERE grantee OPERATOR(pg_catalog.=) $1", role);
	if (models > 0 || grants > 0)
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("role \"%s\" cannot be dropped because some dml models depend on it",
						GetUserNameFromId(role, false)),
				 errdetail("It owns %lld model versions and holds %lld model grants in database \"%s\".",
						   (long long) models, (long long) grants,
						   get_database_name(MyDatabaseId)),
				 errhint("Drop or give away its models first: DROP OWNED BY or REASSIGN OWNED BY, or dml_drop_model.")));
}

static void
dml_object_access(ObjectAccessType access, Oid classId, Oid objectId, int subId, void *arg)
{
	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);
	if (access == OAT_DROP && classId == AuthIdRelationId)
		check_role_drop(objectId);
}

/* one catalog write with one or two oid parameters, as the owner */
static void
write_for_role(const char *sql, Oid a, Oid b)
{
	Oid			argtypes[2] = {OIDOID, OIDOID};
	Datum		values[2] = {ObjectIdGetDatum(a), ObjectIdGetDatum(b)};

	SPI_connect();
	DmlOwnerQuery(sql, OidIsValid(b) ? 2 : 1, argtypes, values, false, 0);
	SPI_finish();
	DmlCatalogChanged();
}

/* DROP OWNED BY role: its models and their grants, deployments; its grants */
static void
drop_owned(Oid role)
{
	write_for_role("DELETE FROM dml.deployments WHERE owner OPERATOR(pg_catalog.=) $1", role, InvalidOid);
	write_for_role("DELETE FROM dml.grants WHERE owner OPERATOR(pg_catalog.=) $1 "
				   "OR grantee OPERATOR(pg_catalog.=) $1", role, InvalidOid);
	write_for_role("DELETE FROM dml.models WHERE owner OPERATOR(pg_catalog.=) $1", role, InvalidOid);
}

/* REASSIGN OWNED BY role TO newrole: its model names, with their grants */
static void
reassign_owned(Oid role, Oid newrole)
{
	write_for_role("UPDATE dml.models SET owner = $2 WHERE owner OPERATOR(pg_catalog.=) $1", role, newrole);
	write_for_role("UPDATE dml.deployments SET owner = $2 WHERE owner OPERATOR(pg_catalog.=) $1", role, newrole);
	write_for_role("UPDATE dml.grants SET owner = $2 WHERE owner OPERATOR(pg_catalog.=) $1", role, newrole);
}

static void
dml_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
					ProcessUtilityContext context, ParamListInfo params,
					QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *stmt = pstmt->utilityStmt;

	if (prev_process_utility_hook)
		prev_process_utility_hook(pstmt, queryString, readOnlyTree, context, params,
								  queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);

	/* PostgreSQL has checked the caller's rights on every role by now */
	if (IsA(stmt, DropOwnedStmt) && dml_installed())
	{
		ListCell   *lc;

		foreach(lc, ((DropOwnedStmt *) stmt)->roles)
			drop_owned(get_rolespec_oid(lfirst(lc), false));
	}
	else if (IsA(stmt, ReassignOwnedStmt) && dml_installed())
	{
		ReassignOwnedStmt *r = (ReassignOwnedStmt *) stmt;
		Oid			newrole = get_rolespec_oid(r->newrole, false);
		ListCell   *lc;

		foreach(lc, r->roles)
			reassign_owned(get_rolespec_oid(lfirst(lc), false), newrole);
	}
}

/*
 * DmlInstallRoleHooks
 *		Called once from _PG_init.
 */
void
DmlInstallRoleHooks(void)
{
	prev_object_access_hook = object_access_hook;
	object_access_hook = dml_object_access;
	prev_process_utility_hook = ProcessUtility_hook;
	ProcessUtility_hook = dml_process_utility;
}
