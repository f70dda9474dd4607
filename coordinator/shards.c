/*-------------------------------------------------------------------------
 *
 * shards.c
 *	  Data on several PostgreSQL servers: a partitioned table whose leaves
 *	  are local tables or postgres_fdw foreign tables (or a postgres_fdw
 *	  foreign table alone, one shard), each shard read by ranks on the host
 *	  that holds it, straight from the shard's server.
 *
 * Each foreign leaf is resolved through the catalog to its server (the
 * foreign server's libpq options: host, port, dbname, ...), its remote
 * schema, table and column names (the foreign table's and its columns'
 * options), and the role the calling role's user mapping names, with the
 * mapping's password or, for a superuser's mapping without one, the libpq
 * password file of the host a rank runs on.  As postgres_fdw does, a role
 * that is not a superuser must have a password in its mapping and the
 * server must have asked for it: the OS user's password file and peer
 * authentication are not the caller's to use.
 *
 * The coordinator opens one connection per server, as the workers will
 * log in, before anything starts (so a missing user mapping, a server that
 * cannot be reached or a remote permission error fails the call naming
 * the server), and holds a REPEATABLE READ READ ONLY transaction there for
 * the job's life: its exported snapshot is the one every rank reading that
 * server imports, and the same transaction counts the rows, lists the
 * distinct labels and one-hot levels, and measures the remote tables (so
 * the coordinator's own questions move no rows through postgres_fdw).  Shards on different servers are not one snapshot;
 * each server's read is.  The connections close when the calling
 * transaction ends, whichever way.  A restart probes them: a server that
 * went away is connected again for a new snapshot (the shard is read
 * again), or the restart fails naming it.
 *
 * Placement: a shard's server is matched to the job's hosts (dml.hosts,
 * narrowed) by name or by address; its slices go to the ranks placed on
 * that host, cut into ctid ranges as plan.c cuts local tables.  Local
 * leaves go to the ranks on this server's host.  A shard whose host has no
 * rank is read over the network by all ranks, with a NOTICE, and the
 * metrics say which shard was read where.
 *
 * Ranks read a shard with binary COPY of plain columns (the shard's server
 * need not have dml), cast as the coordinator casts them here.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <netdb.h>
#include <sys/socket.h>

#include "access/table.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "lib/stringinfo.h"
#include "libpq-fe.h"
#include "miscadmin.h"
#include "nodes/value.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/array.h"
#include "catalog/pg_type.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "coordinator.h"
#include "hosts.h"
#include "shards.h"

#define DML_SHARD_CONNECT_TIMEOUT_MS	30000

/* the coordinator's connection to one server, for the calling transaction */
typedef struct ServerConn
{
	Oid			serverid;
	char	   *name;
	PGconn	   *conn;
	char	   *snapshot;
	char	   *snapshot_time;
} ServerConn;

static char *remote_column(Oid leaf, const char *name);

static List *server_conns = NIL;	/* of ServerConn *, in TopMemoryContext */
static bool callback_registered = false;

/* one leaf of the relation */
typedef struct Leaf
{
	Oid			relid;
	Oid			serverid;		/* InvalidOid: a table of this server */
} Leaf;

/* ---------------------------------------------------------------------
 * The catalog
 * --------------------------------------------------------------------- */

/* the server of a postgres_fdw foreign table, else InvalidOid */
static Oid
pgfdw_server(Oid relid, bool error)
{
	ForeignTable *ft = GetForeignTable(relid);
	ForeignServer *fs = GetForeignServer(ft->serverid);
	ForeignDataWrapper *fdw = GetForeignDataWrapper(fs->fdwid);

	if (strcmp(fdw->fdwname, "postgres_fdw") == 0)
		return ft->serverid;
	if (error)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("partition \"%s\" is a foreign table of wrapper \"%s\"",
						get_rel_name(relid), fdw->fdwname),
				 errdetail("dml reads the shards of postgres_fdw foreign tables from their servers."),
				 errhint("Train on a view over the partitioned table instead.")));
	return InvalidOid;
}

/* the leaves of relid (itself when it is not partitioned), in OID order */
static List *
shard_leaves(Oid relid)
{
	List	   *result = NIL;
	List	   *rels;
	ListCell   *lc;

	if (get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE)
		rels = find_all_inheritors(relid, AccessShareLock, NULL);
	else
		rels = list_make1_oid(relid);
	foreach(lc, rels)
	{
		Oid			child = lfirst_oid(lc);
		char		ck = get_rel_relkind(child);
		Leaf	   *leaf;

		if (ck == RELKIND_PARTITIONED_TABLE)
			continue;
		leaf = palloc0(sizeof(Leaf));
		leaf->relid = child;
		if (ck == RELKIND_FOREIGN_TABLE)
			leaf->serverid = pgfdw_server(child, true);
		else if (ck != RELKIND_RELATION && ck != RELKIND_MATVIEW)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("partition \"%s\" is not a table", get_rel_name(child)),
					 errhint("Train on a view over the partitioned table instead.")));
		result = lappend(result, leaf);
	}
	return result;
}

/*
 * DmlShardsIs
 *		Whether relid is read shard by shard: a postgres_fdw foreign table,
 *		or a partitioned table with one among its leaves whose leaves the
 *		caller may read directly (plan.c: else the parent is read whole
 *		through this server, as before).
 */
bool
DmlShardsIs(Oid relid)
{
	char		relkind = get_rel_relkind(relid);
	ListCell   *lc;

	if (relkind == RELKIND_FOREIGN_TABLE)
		return OidIsValid(pgfdw_server(relid, false));
	if (relkind != RELKIND_PARTITIONED_TABLE)
		return false;
	foreach(lc, find_all_inheritors(relid, AccessShareLock, NULL))
		if (get_rel_relkind(lfirst_oid(lc)) == RELKIND_FOREIGN_TABLE)
			return DmlLeavesReadable(relid);
	return false;
}

/* an option's value in a list of DefElem, or NULL */
static char *
option(List *options, const char *name)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *d = lfirst(lc);

		if (strcmp(d->defname, name) == 0)
			return defGetString(d);
	}
	return NULL;
}

/* whether a foreign server option is one of libpq's that we pass on */
static bool
libpq_option(const char *name)
{
	static const char *const own[] = {"user", "password", "options", "application_name",
	"fallback_application_name", "replication", "passfile", "service", "client_encoding", NULL};
	PQconninfoOption *defs = PQconndefaults();
	bool		found = false;

	for (int i = 0; own[i]; i++)
		if (strcmp(name, own[i]) == 0)
			return false;
	for (PQconninfoOption *o = defs; o && o->keyword; o++)
		found |= strcmp(o->keyword, name) == 0;
	PQconninfoFree(defs);
	return found;
}

/* whether the mapping lets a role that is not a superuser go without a password */
static bool
password_required(UserMapping *um)
{
	char	   *v = option(um->options, "password_required");

	return v == NULL || !(strcmp(v, "false") == 0 || strcmp(v, "off") == 0 || strcmp(v, "0") == 0);
}

/*
 * The connection string of a server for the calling role: the server's
 * libpq options, the role and password of the role's user mapping (an
 * error when it has none, or a role that is not a superuser has no
 * password there), the session settings of a reader.
 */
static char *
server_conninfo(Oid serverid, const char *appname)
{
	ForeignServer *fs = GetForeignServer(serverid);
	Oid			user = GetUserId();
	UserMapping *um;
	StringInfoData buf;
	ListCell   *lc;
	char	   *v;

	if (!SearchSysCacheExists2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(user),
							   ObjectIdGetDatum(serverid)) &&
		!SearchSysCacheExists2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(InvalidOid),
							   ObjectIdGetDatum(serverid)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role \"%s\" has no user mapping for server \"%s\"",
						GetUserNameFromId(user, false), fs->servername),
				 errdetail("dml's workers read each shard from its server as the role the user mapping names."),
				 errhint("CREATE USER MAPPING FOR %s SERVER %s OPTIONS (user '...', password '...').",
						 quote_identifier(GetUserNameFromId(user, false)),
						 quote_identifier(fs->servername))));
	um = GetUserMapping(user, serverid);
	if (!superuser_arg(user) && option(um->options, "password") == NULL && password_required(um))
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required to read shard server \"%s\"", fs->servername),
				 errdetail("A role that is not a superuser reads a shard with the password of its user mapping."),
				 errhint("Add a password to the user mapping.")));

	initStringInfo(&buf);
	foreach(lc, fs->options)
	{
		DefElem    *d = lfirst(lc);

		if (libpq_option(d->defname))
			DmlAppendConnValue(&buf, d->defname, defGetString(d));
	}
	v = option(um->options, "user");
	DmlAppendConnValue(&buf, "user", v ? v : GetUserNameFromId(user, false));
	if ((v = option(um->options, "password")) != NULL)
		DmlAppendConnValue(&buf, "password", v);
	if ((v = option(um->options, "sslcert")) != NULL)
		DmlAppendConnValue(&buf, "sslcert", v);
	if ((v = option(um->options, "sslkey")) != NULL)
		DmlAppendConnValue(&buf, "sslkey", v);
	DmlAppendConnValue(&buf, "options", "-c default_transaction_read_only=on -c search_path=pg_catalog,pg_temp");
	DmlAppendConnValue(&buf, "application_name", appname);
	return buf.data;
}

/* ---------------------------------------------------------------------
 * The coordinator's connections, never blocking
 * --------------------------------------------------------------------- */

static void
close_all(void)
{
	ListCell   *lc;

	foreach(lc, server_conns)
	{
		ServerConn *sc = lfirst(lc);

		if (sc->conn)
			PQfinish(sc->conn);
		if (sc->snapshot)
			pfree(sc->snapshot);
		if (sc->snapshot_time)
			pfree(sc->snapshot_time);
		pfree(sc->name);
	}
	list_free_deep(server_conns);
	server_conns = NIL;
}

/* the calling transaction's end closes every connection (and its snapshot) */
static void
shards_xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
		close_all();
}

/* wait for the socket or the latch; an interrupt is honoured */
static void
wait_conn(PGconn *conn, int events, long ms)
{
	int			rc = WaitLatchOrSocket(MyLatch, WL_EXIT_ON_PM_DEATH | WL_LATCH_SET | WL_TIMEOUT | events,
									   PQsocket(conn), ms, PG_WAIT_EXTENSION);

	if (rc & WL_LATCH_SET)
		ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

static void
conn_error(const char *server, const char *what, PGconn *conn, PGresult *res)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	char	   *text = pchomp(msg ? msg : PQerrorMessage(conn));

	ereport(ERROR,
			(errcode(state && strlen(state) == 5 ?
					 MAKE_SQLSTATE(state[0], state[1], state[2], state[3], state[4]) :
					 ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
			 errmsg("%s shard server \"%s\" failed: %s", what, server, text),
			 errhint("The shard's rows are read from its server directly, as the role of the user mapping.")));
}

/* run sql with text parameters, never blocking; NULL when it failed (*res_error set) */
static PGresult *
try_query(PGconn *conn, const char *sql, int nparams, const char *const *params, PGresult **res_error)
{
	PGresult   *res,
			   *last = NULL;

	*res_error = NULL;
	if (!PQsendQueryParams(conn, sql, nparams, NULL, params, NULL, NULL, 0))
		return NULL;
	for (;;)
	{
		while (PQisBusy(conn))
		{
			wait_conn(conn, WL_SOCKET_READABLE, 1000);
			if (!PQconsumeInput(conn))
			{
				if (last)
					PQclear(last);
				return NULL;
			}
		}
		res = PQgetResult(conn);
		if (res == NULL)
			break;
		if (last)
			PQclear(last);
		last = res;
	}
	if (last && (PQresultStatus(last) == PGRES_TUPLES_OK || PQresultStatus(last) == PGRES_COMMAND_OK))
		return last;
	*res_error = last;
	return NULL;
}

static PGresult *
remote_query(ServerConn *sc, const char *what, const char *sql, int nparams, const char *const *params)
{
	PGresult   *err;
	PGresult   *res = try_query(sc->conn, sql, nparams, params, &err);

	if (res == NULL)
		conn_error(sc->name, what, sc->conn, err);
	return res;
}

/* connect as the workers will and export the snapshot they share */
static void
open_conn(ServerConn *sc)
{
	char	   *conninfo = server_conninfo(sc->serverid, "dml-coordinator");
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), DML_SHARD_CONNECT_TIMEOUT_MS);
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;
	PGresult   *res;
	UserMapping *um = GetUserMapping(GetUserId(), sc->serverid);

	sc->conn = PQconnectStart(conninfo);
	if (sc->conn == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	if (PQstatus(sc->conn) == CONNECTION_BAD)
		conn_error(sc->name, "connecting to", sc->conn, NULL);
	while (st != PGRES_POLLING_OK)
	{
		long		ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);

		if (st == PGRES_POLLING_FAILED)
			conn_error(sc->name, "connecting to", sc->conn, NULL);
		if (ms <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("connecting to shard server \"%s\" failed: it did not answer in time", sc->name)));
		wait_conn(sc->conn, st == PGRES_POLLING_READING ? WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE, ms);
		st = PQconnectPoll(sc->conn);
	}
	if (!superuser() && !PQconnectionUsedPassword(sc->conn) && password_required(um))
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required to read shard server \"%s\"", sc->name),
				 errdetail("Non-superuser cannot connect if the server does not request a password."),
				 errhint("Target server's authentication method must be changed.")));
	PQclear(remote_query(sc, "a transaction on", "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL));
	res = remote_query(sc, "exporting a snapshot on",
					   "SELECT pg_catalog.pg_export_snapshot(), pg_catalog.statement_timestamp()::text", 0, NULL);
	sc->snapshot = MemoryContextStrdup(TopMemoryContext, PQgetvalue(res, 0, 0));
	sc->snapshot_time = MemoryContextStrdup(TopMemoryContext, PQgetvalue(res, 0, 1));
	PQclear(res);
}

/* the transaction's connection to a server, opened on first use */
static ServerConn *
server_conn(Oid serverid)
{
	ListCell   *lc;
	ServerConn *sc;

	foreach(lc, server_conns)
	{
		sc = lfirst(lc);
		if (sc->serverid == serverid)
			return sc;
	}
	if (!callback_registered)
	{
		RegisterXactCallback(shards_xact_callback, NULL);
		callback_registered = true;
	}
	sc = MemoryContextAllocZero(TopMemoryContext, sizeof(ServerConn));
	sc->serverid = serverid;
	sc->name = MemoryContextStrdup(TopMemoryContext, GetForeignServer(serverid)->servername);
	{
		/* the list lives as long as the connections: SPI's context ends sooner */
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		server_conns = lappend(server_conns, sc);	/* closed at the end even if this fails */
		MemoryContextSwitchTo(old);
	}
	open_conn(sc);
	return sc;
}

/* a foreign leaf's remote relation, quoted: schema_name and table_name options */
static char *
remote_rel(Oid relid)
{
	ForeignTable *ft = GetForeignTable(relid);
	char	   *nsp = option(ft->options, "schema_name");
	char	   *rel = option(ft->options, "table_name");

	return quote_qualified_identifier(nsp ? nsp : get_namespace_name(get_rel_namespace(relid)),
									  rel ? rel : get_rel_name(relid));
}

/*
 * DmlShardsCountRows
 *		Rows of a sharded relation, counted up to limit per leaf on each
 *		leaf's server (no row crosses the network); false when relid is
 *		not sharded.  Needs an SPI connection.
 */
bool
DmlShardsCountRows(Oid relid, int64 limit, int64 *rows)
{
	ListCell   *lc;
	int64		total = 0;

	if (!DmlShardsIs(relid))
		return false;
	foreach(lc, shard_leaves(relid))
	{
		Leaf	   *leaf = lfirst(lc);
		char	   *sql;

		if (total >= limit)
			break;
		if (OidIsValid(leaf->serverid))
		{
			ServerConn *sc = server_conn(leaf->serverid);
			PGresult   *res;

			sql = psprintf("SELECT pg_catalog.count(*) FROM (SELECT FROM %s LIMIT " INT64_FORMAT ") s",
						   remote_rel(leaf->relid), limit);
			res = remote_query(sc, "counting rows on", sql, 0, NULL);
			total += pg_strtoint64(PQgetvalue(res, 0, 0));
			PQclear(res);
		}
		else
		{
			sql = psprintf("SELECT pg_catalog.count(*) FROM (SELECT FROM %s LIMIT " INT64_FORMAT ") s",
						   quote_qualified_identifier(get_namespace_name(get_rel_namespace(leaf->relid)),
													  get_rel_name(leaf->relid)), limit);
			if (SPI_execute(sql, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
				elog(ERROR, "dml: counting the rows failed");
			total += pg_strtoint64(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1));
		}
	}
	*rows = Min(total, limit);
	return true;
}

/*
 * DmlShardsDistinct
 *		The distinct non-NULL values of a column of a sharded relation, as
 *		text, at most limit + 1 of them (false when relid is not sharded):
 *		each leaf's listed on its own server, merged here and ordered as
 *		the column's type and collation order them (type_order), or
 *		bytewise as text.  Only distinct values cross the network.  Needs
 *		an SPI connection.
 */
bool
DmlShardsDistinct(Oid relid, const char *column, int limit, bool type_order, List **values)
{
	List	   *all = NIL;
	ListCell   *lc;
	Datum	   *elems;
	int			n = 0;
	AttrNumber	att = get_attnum(relid, column);
	Oid			typid;
	int32		typmod;
	Oid			collid;
	char	   *sql;
	Oid			argtypes[1] = {TEXTARRAYOID};
	Datum		args[1];

	if (!DmlShardsIs(relid))
		return false;
	get_atttypetypmodcoll(relid, att, &typid, &typmod, &collid);
	foreach(lc, shard_leaves(relid))
	{
		Leaf	   *leaf = lfirst(lc);

		if (OidIsValid(leaf->serverid))
		{
			ServerConn *sc = server_conn(leaf->serverid);
			const char *qcol = quote_identifier(remote_column(leaf->relid, column));
			PGresult   *res;

			sql = psprintf("SELECT DISTINCT %s::text FROM %s WHERE %s IS NOT NULL LIMIT %d",
						   qcol, remote_rel(leaf->relid), qcol, limit + 1);
			res = remote_query(sc, "listing values on", sql, 0, NULL);
			for (int i = 0; i < PQntuples(res); i++)
				all = lappend(all, pstrdup(PQgetvalue(res, i, 0)));
			PQclear(res);
		}
		else
		{
			const char *qcol = quote_identifier(column);

			sql = psprintf("SELECT DISTINCT %s::text FROM %s WHERE %s IS NOT NULL LIMIT %d", qcol,
						   quote_qualified_identifier(get_namespace_name(get_rel_namespace(leaf->relid)),
													  get_rel_name(leaf->relid)), qcol, limit + 1);
			if (SPI_execute(sql, true, 0) != SPI_OK_SELECT)
				elog(ERROR, "dml: listing values failed");
			for (uint64 i = 0; i < SPI_processed; i++)
				all = lappend(all, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
		}
	}
	elems = palloc(sizeof(Datum) * Max(list_length(all), 1));
	foreach(lc, all)
		elems[n++] = CStringGetTextDatum(lfirst(lc));
	args[0] = PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
	if (type_order)
		sql = psprintf("SELECT s.v::text FROM (SELECT DISTINCT u::%s%s%s AS v FROM pg_catalog.unnest($1) u) s ORDER BY s.v",
					   format_type_be_qualified(typid),
					   OidIsValid(collid) ? " COLLATE " : "",
					   OidIsValid(collid) ? generate_collation_name(collid) : "");
	else
		sql = "SELECT s.v FROM (SELECT DISTINCT u AS v FROM pg_catalog.unnest($1) u) s ORDER BY s.v COLLATE \"C\"";
	if (SPI_execute_with_args(sql, 1, argtypes, args, NULL, true, limit + 1) != SPI_OK_SELECT)
		elog(ERROR, "dml: ordering the listed values failed");
	*values = NIL;
	for (uint64 i = 0; i < SPI_processed; i++)
		*values = lappend(*values, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
	return true;
}

/* ---------------------------------------------------------------------
 * Placement and slices
 * --------------------------------------------------------------------- */

/* whether two host names (or addresses) name one address */
static bool
same_host(const char *a, const char *b)
{
	struct addrinfo hints = {0};
	struct addrinfo *ra = NULL,
			   *rb = NULL;
	bool		same = false;

	if (strcmp(a, b) == 0)
		return true;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(a, NULL, &hints, &ra) != 0)
		return false;
	if (getaddrinfo(b, NULL, &hints, &rb) == 0)
	{
		for (struct addrinfo *x = ra; x && !same; x = x->ai_next)
			for (struct addrinfo *y = rb; y && !same; y = y->ai_next)
				same = x->ai_family == y->ai_family && x->ai_addrlen == y->ai_addrlen &&
					memcmp(x->ai_addr, y->ai_addr, x->ai_addrlen) == 0;
		freeaddrinfo(rb);
	}
	freeaddrinfo(ra);
	return same;
}

/* a server on this host: no host (the socket), a socket directory, loopback */
static bool
local_server(const char *host)
{
	return host == NULL || host[0] == '\0' || host[0] == '/' || host[0] == '@' ||
		strcmp(host, "localhost") == 0 || strcmp(host, "127.0.0.1") == 0 || strcmp(host, "::1") == 0;
}

/* one reader group: the data ranks of one host */
typedef struct ReaderGroup
{
	char	   *host;			/* NULL: this server's host when no dml.hosts */
	int			first;
	int			count;
} ReaderGroup;

/*
 * The job's hosts and their data ranks, as launch.c places them (the
 * placement text of hosts.c: "a:2,b:2,c:1", this server's host first).
 */
static List *
placement_groups(DmlJob *job)
{
	List	   *groups = NIL;
	char	   *text;
	int			next = 0;

	if (job->hosts == NIL)
	{
		ReaderGroup	   *g = palloc0(sizeof(ReaderGroup));

		g->count = job->workers;
		return list_make1(g);
	}
	text = DmlHostsPlace(job->hosts, job->lost_hosts, job->workers + job->servers);
	for (char *tok = strtok(text, ","); tok; tok = strtok(NULL, ","))
	{
		char	   *colon = strrchr(tok, ':');
		ReaderGroup	   *g = palloc0(sizeof(ReaderGroup));

		*colon = '\0';
		g->host = pstrdup(tok);
		g->first = next;
		g->count = Max(0, Min(atoi(colon + 1), job->workers - next));
		next += atoi(colon + 1);
		groups = lappend(groups, g);
	}
	return groups;
}

/* the group (index) that reads a server on host, or -1 */
static int
group_of(List *groups, const char *host)
{
	ListCell   *lc;

	if (local_server(host))
		return 0;
	foreach(lc, groups)
	{
		ReaderGroup	   *g = lfirst(lc);

		if (g->count > 0 && g->host && same_host(host, g->host))
			return foreach_current_index(lc);
	}
	return -1;
}

/* the name of a foreign leaf's column on its server (column_name), NULL if none */
static char *
remote_column(Oid leaf, const char *name)
{
	AttrNumber	att = get_attnum(leaf, name);
	char	   *rname = NULL;
	ListCell   *lc;

	if (att == InvalidAttrNumber)
		return NULL;
	foreach(lc, GetForeignColumnOptions(leaf, att))
	{
		DefElem    *d = lfirst(lc);

		if (strcmp(d->defname, "column_name") == 0)
			rname = defGetString(d);
	}
	return rname ? rname : pstrdup(name);
}

/* a feature's or the target's expression with the remote column's name */
static char *
remote_expr(Oid leaf, DmlFeature *col)
{
	const char *qlocal = quote_identifier(col->name);
	char	   *rname = remote_column(leaf, col->name);

	if (rname == NULL)
		elog(ERROR, "dml: column \"%s\" of a shard has no remote expression. Please report a bug.", col->name);
	/* a predict job's: pg_catalog's casts only, arrays as float8[] (workers/predict.c) */
	if (col->expr == NULL)
		return DmlPredictColumnExpr(col, quote_identifier(rname));
	/*
	 * An array: the server need not have dml (dml.vec_bytes), so it sends
	 * float4[] in PostgreSQL's own binary array format, which the rank
	 * decodes (workers/load.c, decode_array_send).
	 */
	if (col->kind == DML_FEAT_VEC)
		return psprintf("%s::pg_catalog.float4[]", quote_identifier(rname));
	if (strncmp(col->expr, qlocal, strlen(qlocal)) != 0)
		elog(ERROR, "dml: column \"%s\" of a shard has no remote expression. Please report a bug.", col->name);
	/* the expression is the quoted name and its cast (extension/train.c) */
	return psprintf("%s%s", quote_identifier(rname), col->expr + strlen(qlocal));
}

/* the SELECT a rank runs on a shard's server for blocks [start, end) */
static char *
shard_query(DmlJob *job, Oid leaf, const char *rel, bool blocks, BlockNumber start, BlockNumber end)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	if (job->type == DML_JOB_PREDICT)
	{
		/* [the row id as it is,] the features as the model reads them */
		appendStringInfoString(&buf, "SELECT ");
		if (job->predict_id)
		{
			/* as this server's type, so its binary form is the one the backend receives */
			appendStringInfoString(&buf, quote_identifier(remote_column(leaf, job->target.name)));
			if (job->target.typid < FirstNormalObjectId)
				appendStringInfo(&buf, "::%s", format_type_be_qualified(job->target.typid));
			appendStringInfoString(&buf, ", ");
		}
		foreach(lc, job->features)
		{
			DmlFeature	f = *(DmlFeature *) lfirst(lc);

			f.expr = NULL;
			appendStringInfo(&buf, "%s%s", foreach_current_index(lc) ? ", " : "",
							 remote_expr(leaf, &f));
		}
	}
	else
	{
		appendStringInfo(&buf, "SELECT %s", remote_expr(leaf, &job->target));
		foreach(lc, job->features)
			appendStringInfo(&buf, ", %s", remote_expr(leaf, lfirst(lc)));
	}
	appendStringInfo(&buf, " FROM %s", rel);
	if (blocks && start > 0 && end != InvalidBlockNumber)
		appendStringInfo(&buf, " WHERE ctid >= '(%u,0)'::tid AND ctid < '(%u,0)'::tid", start, end);
	else if (blocks && start > 0)
		appendStringInfo(&buf, " WHERE ctid >= '(%u,0)'::tid", start);
	else if (blocks && end != InvalidBlockNumber)
		appendStringInfo(&buf, " WHERE ctid < '(%u,0)'::tid", end);
	return buf.data;
}

/* one leaf to read: where, how large, by which ranks */
typedef struct Unit
{
	Leaf	   *leaf;
	int			shard;			/* 1-based index in job->shard_servers, 0: local */
	char	   *rel;			/* remote relation, quoted */
	bool		blocks;			/* a table there: cut by ctid */
	uint64		nblocks;
	int			group;
} Unit;

/* the slices of the units of one group over ranks [first, first + count) */
static List *
cut_group(DmlJob *job, List *units, int group, int first, int count, BlockNumber max_blocks)
{
	List	   *slices = NIL;
	ListCell   *lc;
	uint64		total = 0,
				pos = 0;
	int			whole_next = 0;

	foreach(lc, units)
	{
		Unit	   *u = lfirst(lc);

		if (u->group == group && u->blocks)
			total += u->nblocks;
	}
	foreach(lc, units)
	{
		Unit	   *u = lfirst(lc);
		uint64		lstart = pos,
					lend = pos + u->nblocks;

		if (u->group != group)
			continue;
		if (!u->blocks)
		{
			/* a view or partitioned table there: one rank reads it whole */
			DmlSlice   *s = palloc0(sizeof(DmlSlice));

			s->rank = first + (whole_next++ % count);
			s->relid = u->leaf->relid;
			s->shard = u->shard;
			s->query = shard_query(job, u->leaf->relid, u->rel, false, 0, InvalidBlockNumber);
			slices = lappend(slices, s);
			continue;
		}
		for (int r = 0; r < count; r++)
		{
			uint64		rs = total * r / count,
						re = total * (r + 1) / count;
			uint64		s = Max(rs, lstart),
						e = Min(re, lend);
			bool		last_of_leaf = (e == lend);

			if (u->nblocks == 0)
			{
				if (r != count - 1)
					continue;
			}
			else if (s >= e)
				continue;
			do
			{
				uint64		ce = Min(e, s + max_blocks);
				DmlSlice   *slice = palloc0(sizeof(DmlSlice));

				slice->rank = first + r;
				slice->relid = u->leaf->relid;
				slice->start = (BlockNumber) (s - lstart);
				slice->end = (last_of_leaf && ce == e) ? InvalidBlockNumber : (BlockNumber) (ce - lstart);
				slice->shard = u->shard;
				if (u->shard > 0)
					slice->query = shard_query(job, u->leaf->relid, u->rel, true, slice->start, slice->end);
				slices = lappend(slices, slice);
				s = ce;
			} while (s < e);
		}
		pos = lend;
	}
	return slices;
}

/*
 * DmlShardsPlan
 *		The slices of a sharded relation (NIL when relid is not sharded):
 *		each shard's on the ranks of its host, the local leaves' on the
 *		ranks of this host; sets job->shard_servers and shard_reads.  After
 *		DmlJobSetLaunch (the hosts).
 */
List *
DmlShardsPlan(DmlJob *job, BlockNumber max_blocks)
{
	List	   *groups;
	List	   *units = NIL;
	List	   *slices = NIL;
	ListCell   *lc;

	if (!DmlShardsIs(job->relid))
		return NIL;
	groups = placement_groups(job);
	job->shard_servers = NIL;
	job->shard_reads = NIL;
	foreach(lc, shard_leaves(job->relid))
	{
		Leaf	   *leaf = lfirst(lc);
		Unit	   *u = palloc0(sizeof(Unit));
		DmlShardServer *ss = NULL;
		ReaderGroup	   *g;
		StringInfoData js;

		u->leaf = leaf;
		if (!OidIsValid(leaf->serverid))
		{
			Relation	rel = table_open(leaf->relid, AccessShareLock);

			u->nblocks = RelationGetNumberOfBlocks(rel);
			table_close(rel, NoLock);
			u->blocks = true;
			u->group = 0;
		}
		else
		{
			ServerConn *sc = server_conn(leaf->serverid);
			ListCell   *lc2;
			PGresult   *res;
			const char *param[1];

			foreach(lc2, job->shard_servers)
			{
				if (((DmlShardServer *) lfirst(lc2))->serverid == leaf->serverid)
				{
					ss = lfirst(lc2);
					u->shard = foreach_current_index(lc2) + 1;
				}
			}
			if (ss == NULL)
			{
				ForeignServer *fs = GetForeignServer(leaf->serverid);
				char	   *host = option(fs->options, "host");

				ss = palloc0(sizeof(DmlShardServer));
				ss->serverid = leaf->serverid;
				ss->name = fs->servername;
				ss->host = host ? host : (option(fs->options, "hostaddr") ? option(fs->options, "hostaddr") : "");
				ss->conninfo = server_conninfo(leaf->serverid, "dml-worker");
				ss->snapshot = sc->snapshot;
				ss->snapshot_time = sc->snapshot_time;
				ss->placed_host = group_of(groups, ss->host);
				job->shard_servers = lappend(job->shard_servers, ss);
				u->shard = list_length(job->shard_servers);
			}
			u->rel = remote_rel(leaf->relid);
			param[0] = u->rel;
			res = remote_query(sc, "reading the catalog of",
							   "SELECT c.relkind, pg_catalog.pg_relation_size(c.oid) / "
							   "pg_catalog.current_setting('block_size')::int8 "
							   "FROM pg_catalog.pg_class c WHERE c.oid = pg_catalog.to_regclass($1)",
							   1, param);
			if (PQntuples(res) != 1)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_TABLE),
						 errmsg("relation %s of foreign table \"%s\" does not exist on server \"%s\"",
								u->rel, get_rel_name(leaf->relid), ss->name)));
			u->blocks = PQgetvalue(res, 0, 0)[0] == RELKIND_RELATION ||
				PQgetvalue(res, 0, 0)[0] == RELKIND_MATVIEW;
			u->nblocks = u->blocks ? pg_strtoint64(PQgetvalue(res, 0, 1)) : 0;
			PQclear(res);
			u->group = ss->placed_host;
			if (u->group < 0)
				ereport(NOTICE,
						(errmsg("shard \"%s\" on server \"%s\" is read over the network",
								get_rel_name(leaf->relid), ss->name),
						 errdetail("No rank of the job runs on its host \"%s\".", ss->host),
						 errhint("A superuser lists the shards' hosts in dml.hosts, so ranks read each shard where it is.")));
		}
		units = lappend(units, u);

		/* what the metrics say of this leaf's read */
		g = u->group >= 0 ? list_nth(groups, u->group) : NULL;
		initStringInfo(&js);
		appendStringInfoString(&js, "{\"relation\": ");
		escape_json(&js, get_rel_name(leaf->relid));
		appendStringInfoString(&js, ", \"server\": ");
		escape_json(&js, ss ? ss->name : "");
		appendStringInfoString(&js, ", \"host\": ");
		escape_json(&js, g && g->host ? g->host : (ss ? ss->host : ""));
		if (g)
			appendStringInfo(&js, ", \"ranks\": [%d, %d], \"read\": \"on its host\"}",
							 g->first, g->first + g->count - 1);
		else
			appendStringInfo(&js, ", \"ranks\": [0, %d], \"read\": \"over the network\"}",
							 job->workers - 1);
		job->shard_reads = lappend(job->shard_reads, js.data);
	}
	for (int gi = -1; gi < list_length(groups); gi++)
	{
		ReaderGroup	   *g = gi >= 0 ? list_nth(groups, gi) : NULL;

		if (g && g->count == 0)
			continue;
		slices = list_concat(slices, cut_group(job, units, gi, g ? g->first : 0,
											   g ? g->count : job->workers, max_blocks));
	}
	return slices;
}

/*
 * DmlShardsRefresh
 *		Before a restart: each server's transaction still open, or a new
 *		one (a new snapshot: the shard is read again); an error naming the
 *		server when it cannot be reached.
 */
void
DmlShardsRefresh(DmlJob *job)
{
	ListCell   *lc;

	foreach(lc, job->shard_servers)
	{
		DmlShardServer *ss = lfirst(lc);
		ServerConn *sc = server_conn(ss->serverid);
		PGresult   *err;
		PGresult   *res = NULL;

		if (PQstatus(sc->conn) == CONNECTION_OK)
			res = try_query(sc->conn, "SELECT 1", 0, NULL, &err);
		if (res != NULL)
		{
			PQclear(res);
			continue;
		}
		if (err)
			PQclear(err);
		PQfinish(sc->conn);
		sc->conn = NULL;
		open_conn(sc);	/* new strings: the old ones stay with the job until it ends */
		ss->snapshot = sc->snapshot;
		ss->snapshot_time = sc->snapshot_time;
		ereport(NOTICE,
				(errmsg("shard server \"%s\" is read again under a new snapshot", ss->name)));
	}
}

/*
 * DmlShardsJson
 *		For the stored spec: "shards": each server read, with its snapshot's
 *		time (metrics false); for the metrics: each leaf's read, where
 *		(metrics true).  Appends ", \"shards\": [...]" when the job had any.
 */
void
DmlShardsJson(const DmlJob *job, StringInfo buf, bool metrics)
{
	ListCell   *lc;

	if (job->shard_servers == NIL)
		return;
	appendStringInfoString(buf, metrics ? "\"shards\": [" : ", \"shards\": [");
	if (metrics)
	{
		foreach(lc, job->shard_reads)
			appendStringInfo(buf, "%s%s", foreach_current_index(lc) ? ", " : "", (char *) lfirst(lc));
		appendStringInfoString(buf, "], ");
		return;
	}
	foreach(lc, job->shard_servers)
	{
		DmlShardServer *ss = lfirst(lc);

		appendStringInfoString(buf, foreach_current_index(lc) ? ", {\"server\": " : "{\"server\": ");
		escape_json(buf, ss->name);
		appendStringInfoString(buf, ", \"host\": ");
		escape_json(buf, ss->host);
		appendStringInfoString(buf, ", \"snapshot_time\": ");
		escape_json(buf, ss->snapshot_time);
		appendStringInfoChar(buf, '}');
	}
	appendStringInfoChar(buf, ']');
}
