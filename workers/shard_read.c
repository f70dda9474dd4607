/*-------------------------------------------------------------------------
 *
 * shard_read.c
 *	  Read this rank's slices of shards: each from its own server (the
 *	  foreign server of a postgres_fdw leaf), as the role of the caller's
 *	  user mapping, under the snapshot the coordinator exported there.
 *
 * The connection string comes with the job (coordinator/shards.c): the
 * server's libpq options, the mapping's role and, when the mapping has
 * one, its password; else libpq's password file on this rank's host.  It
 * is never printed: libpq's messages do not show a password, and ours name
 * the server only.  Every rank reading a server imports the one snapshot
 * exported there, so the server's shard is read as of one moment; shards
 * on different servers are not one snapshot.
 *
 * A server that cannot be reached ends the rank as a lost connection does
 * (the coordinator restarts the job, probing the server first, or fails
 * naming it); an error of the query itself (permissions, a missing column)
 * fails the job at once, naming the server.
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libpq-fe.h"

#include "worker.h"

/* run a command on a shard's server, or end the rank naming the server */
static void
shard_exec(PGconn *conn, const SpecShard *sh, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);
	char		what[300];

	snprintf(what, sizeof(what), "a transaction on shard server \"%s\"", sh->name ? sh->name : "?");
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		worker_fail_query(conn, res, what);
	PQclear(res);
}

/*
 * shard_connect
 *		Connect to shard server k (1-based) with the job's connection
 *		string, after checking that the job gave it one and a snapshot
 *		that can be quoted into SET TRANSACTION SNAPSHOT; the caller then
 *		opens the read-only transaction under that snapshot (training
 *		here, batch inference in predict.c, each with its own error path).
 */
PGconn *
shard_connect(const WorkerSpec *spec, int k)
{
	const SpecShard *sh = &spec->shards[k - 1];
	PGconn	   *conn;

	if (!sh->conninfo || !sh->snapshot || strlen(sh->snapshot) > 200 ||
		strspn(sh->snapshot, "0123456789ABCDEFabcdef-") != strlen(sh->snapshot))
		worker_fail("the job's shard server %d is incomplete", k);
	conn = PQconnectdb(sh->conninfo);
	if (PQstatus(conn) != CONNECTION_OK)
		worker_fail("could not connect to shard server \"%s\": %s",
					sh->name ? sh->name : "?", PQerrorMessage(conn));
	return conn;
}

/*
 * load_shard_slices
 *		Read every shard slice of this rank, one connection per server.
 */
void
load_shard_slices(Dataset *ds, const WorkerSpec *spec, int rank)
{
	for (int k = 1; k <= spec->nshards; k++)
	{
		const SpecShard *sh = &spec->shards[k - 1];
		PGconn	   *conn = NULL;
		char		sql[300];

		for (int i = 0; i < spec->nslices; i++)
		{
			const SpecSlice *s = &spec->slices[i];

			if (s->shard != k || s->rank != rank)
				continue;
			if (conn == NULL)
			{
				conn = shard_connect(spec, k);
				shard_exec(conn, sh, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
				snprintf(sql, sizeof(sql), "SET TRANSACTION SNAPSHOT '%s'", sh->snapshot);
				shard_exec(conn, sh, sql);
			}
			load_copy_plain(conn, ds, spec, s->query);
		}
		if (conn)
		{
			shard_exec(conn, sh, "COMMIT");
			PQfinish(conn);
		}
	}
}
