/*-------------------------------------------------------------------------
 *
 * login.c
 *	  How a job's workers log in to PostgreSQL: as the calling role, with
 *	  PostgreSQL's own authentication, never as a superuser that then sets
 *	  its role.
 *
 * A worker reads user data on the caller's behalf, and user code runs in
 * its session (functions in views, row-level security policies, column
 * defaults of a view).  SET ROLE is no boundary against such code (RESET
 * ROLE undoes it), so the worker's session user must be the caller:
 *
 *	 on this server's socket: peer authentication with a map that lets the
 *	 server's OS user log in as the role (that OS user is the superuser
 *	 already, so the map grants nothing new);
 *	 over TCP (dml.conninfo): scram with a password file, or TLS client
 *	 certificates with a certificate map.
 *
 * Before a job starts, the coordinator logs in once as the workers will
 * (never blocking: latch and socket together) and checks session_user, so
 * a server that is not set up for it fails the call before any worker or
 * user code runs, with the lines to add in the hint.  The check is
 * remembered per role and connection string for the backend's life.
 *
 * Worker sessions are read-only, run with search_path pg_catalog, pg_temp
 * and carry the caller's statement_timeout.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <pwd.h>
#include <unistd.h>

#include "access/htup_details.h"
#include "catalog/pg_authid.h"
#include "commands/dbcommands.h"
#include "lib/stringinfo.h"
#include "libpq-fe.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/postmaster.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "coordinator.h"

#define DML_LOGIN_TIMEOUT_MS	30000

/* role and connection string of the last login that passed the check */
static Oid	checked_role = InvalidOid;
static char *checked_conninfo = NULL;

/* key='value' for a libpq connection string, the value quoted as libpq reads it */
void
DmlAppendConnValue(StringInfo buf, const char *key, const char *value)
{
	appendStringInfo(buf, "%s='", key);
	for (const char *p = value; *p; p++)
	{
		if (*p == '\'' || *p == '\\')
			appendStringInfoChar(buf, '\\');
		appendStringInfoChar(buf, *p);
	}
	appendStringInfoString(buf, "' ");
}

/*
 * DmlWorkerConninfo
 *		The connection string of a job's workers: dml.conninfo, or this
 *		server's first Unix socket; then always the caller as the user
 *		(later keywords win, so dml.conninfo cannot name another), this
 *		database, and the session settings of a worker.
 */
char *
DmlWorkerConninfo(Oid role)
{
	StringInfoData buf;
	StringInfoData opts;

	initStringInfo(&buf);
	if (dml_conninfo && dml_conninfo[0])
		appendStringInfo(&buf, "%s ", dml_conninfo);
	else
	{
		char	   *dirs = pstrdup(Unix_socket_directories ? Unix_socket_directories : "");
		char	   *first = strtok(dirs, ",");

		while (first && *first == ' ')
			first++;
		DmlAppendConnValue(&buf, "host", first && *first ? first : "127.0.0.1");
		appendStringInfo(&buf, "port=%d ", PostPortNumber);
	}
	DmlAppendConnValue(&buf, "user", GetUserNameFromId(role, false));
	DmlAppendConnValue(&buf, "dbname", get_database_name(MyDatabaseId));
	initStringInfo(&opts);
	appendStringInfoString(&opts, "-c search_path=pg_catalog,pg_temp "
						   "-c default_transaction_read_only=on");
	if (StatementTimeout > 0)
		appendStringInfo(&opts, " -c statement_timeout=%d", StatementTimeout);
	DmlAppendConnValue(&buf, "options", opts.data);
	appendStringInfoString(&buf, "application_name='dml-worker'");
	return buf.data;
}

/* the OS user this server runs as */
static const char *
server_os_user(void)
{
	struct passwd *pw = getpwuid(geteuid());

	return pw ? pw->pw_name : "postgres";
}

/* the error for a login that failed or came out as someone else */
static void
login_error(const char *rolename, const char *why)
{
	const char *os = server_os_user();

	if (dml_conninfo && dml_conninfo[0])
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg("dml's workers cannot log in as role \"%s\"", rolename),
				 errdetail("%s", why),
				 errhint("Workers connect with dml.conninfo as the calling role. Let the server's OS user \"%s\" "
						 "authenticate as \"%s\": a password in its ~/.pgpass with scram-sha-256 in pg_hba.conf, "
						 "or a TLS client certificate with \"hostssl all all ADDRESS cert map=dml\" and "
						 "\"dml %s %s\" in pg_ident.conf.",
						 os, rolename, os, rolename)));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
			 errmsg("dml's workers cannot log in as role \"%s\"", rolename),
			 errdetail("%s", why),
			 errhint("Workers log in on the server's socket as the calling role. In pg_hba.conf, before other "
					 "\"local\" lines: \"local all all peer map=dml\". In pg_ident.conf: \"dml /^(.*)$ \\1\" "
					 "and \"dml %s %s\" (on PostgreSQL 16 and later \"dml %s all\" serves every role). "
					 "Then SELECT pg_reload_conf().",
					 os, rolename, os)));
}

/* wait for conn's socket (or the latch), with a deadline */
static void
wait_socket(PGconn *conn, int events, TimestampTz deadline, const char *rolename)
{
	long		ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
	int			rc;

	if (ms <= 0)
		login_error(rolename, "The server did not answer in time.");
	rc = WaitLatchOrSocket(MyLatch, WL_EXIT_ON_PM_DEATH | WL_LATCH_SET | WL_TIMEOUT | events,
						   PQsocket(conn), ms, PG_WAIT_EXTENSION);
	if (rc & WL_LATCH_SET)
	{
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/* connect, never blocking; an error when it fails */
static void
login(PGconn *conn, TimestampTz deadline, const char *rolename)
{
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;

	if (PQstatus(conn) == CONNECTION_BAD)
		login_error(rolename, PQerrorMessage(conn));
	while (st != PGRES_POLLING_OK)
	{
		if (st == PGRES_POLLING_FAILED)
			login_error(rolename, pchomp(PQerrorMessage(conn)));
		wait_socket(conn, st == PGRES_POLLING_READING ? WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE,
					deadline, rolename);
		st = PQconnectPoll(conn);
	}
}

/* session_user of conn, never blocking */
static char *
session_user_of(PGconn *conn, TimestampTz deadline, const char *rolename)
{
	PGresult   *res;
	char	   *user = NULL;

	if (!PQsendQuery(conn, "SELECT session_user"))
		login_error(rolename, pchomp(PQerrorMessage(conn)));
	for (;;)
	{
		while (PQisBusy(conn))
		{
			wait_socket(conn, WL_SOCKET_READABLE, deadline, rolename);
			if (!PQconsumeInput(conn))
				login_error(rolename, pchomp(PQerrorMessage(conn)));
		}
		res = PQgetResult(conn);
		if (res == NULL)
			break;
		if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
			user = pstrdup(PQgetvalue(res, 0, 0));
		PQclear(res);
	}
	if (user == NULL)
		login_error(rolename, pchomp(PQerrorMessage(conn)));
	return user;
}

/*
 * DmlCheckWorkerLogin
 *		Log in as a job's workers will, with conninfo, and check that the
 *		session user is the role; an error with the configuration to add
 *		when it is not.
 */
void
DmlCheckWorkerLogin(const char *conninfo, Oid role)
{
	char	   *rolename = GetUserNameFromId(role, false);
	HeapTuple	tup;
	bool		canlogin;
	PGconn	   *volatile conn = NULL;
	char	   *user;
	TimestampTz deadline;

	if (role == checked_role && checked_conninfo && strcmp(conninfo, checked_conninfo) == 0)
		return;

	tup = SearchSysCache1(AUTHOID, ObjectIdGetDatum(role));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for role %u", role);
	canlogin = ((Form_pg_authid) GETSTRUCT(tup))->rolcanlogin;
	ReleaseSysCache(tup);
	if (!canlogin)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION),
				 errmsg("role \"%s\" cannot log in, and dml's workers log in as the calling role", rolename),
				 errdetail("Workers read the data in sessions of their own, as the role that called."),
				 errhint("ALTER ROLE %s LOGIN, or call as a role that can log in.",
						 quote_identifier(rolename))));

	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), DML_LOGIN_TIMEOUT_MS);
	PG_TRY();
	{
		conn = PQconnectStart(conninfo);
		if (conn == NULL)
			ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
		login(conn, deadline, rolename);
		user = session_user_of(conn, deadline, rolename);
		if (strcmp(user, rolename) != 0)
			login_error(rolename, psprintf("The workers' session user would be \"%s\".", user));
	}
	PG_FINALLY();
	{
		if (conn)
			PQfinish(conn);
	}
	PG_END_TRY();

	checked_role = role;
	if (checked_conninfo)
		pfree(checked_conninfo);
	checked_conninfo = MemoryContextStrdup(TopMemoryContext, conninfo);
}
