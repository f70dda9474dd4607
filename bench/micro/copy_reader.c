/*-------------------------------------------------------------------------
 *
 * copy_reader.c
 *	  The data-path baseline: read a query's rows with
 *	  COPY (SELECT ...) TO STDOUT (FORMAT binary) over libpq and discard them,
 *	  reporting rows/s and MB/s.  Nothing a worker does can load faster.
 *
 *	  copy_reader [-d CONNINFO] [-r REPEAT] [--text] -c QUERY
 *	  copy_reader [-d CONNINFO] [-r REPEAT] [--text] [-C COLUMNS] [-j SLICES] -t TABLE
 *
 *	  With -t the query is SELECT COLUMNS (default *) FROM TABLE; -j N forks
 *	  N readers, each on its own connection reading a contiguous block range
 *	  of the table (a TID Range Scan, as dml's workers read their slices),
 *	  and the rates are summed over the wall time of the slowest.  COLUMNS
 *	  and QUERY are SQL text: this is a benchmark tool, not a product one.
 *	  The connection comes from CONNINFO or the PG* environment.
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#define CR_MAX_SLICES	256

/* what one reader moved */
typedef struct CopyStats
{
	long long	rows;
	long long	bytes;
	double		seconds;		/* COPY only, not connecting */
	int			ok;
} CopyStats;

/* seconds on a monotonic clock */
static double
now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* connect or exit with libpq's message */
static PGconn *
connect_or_die(const char *conninfo)
{
	const char *keywords[] = {"dbname", "fallback_application_name", NULL};
	const char *values[] = {conninfo, "copy_reader", NULL};
	PGconn	   *conn = PQconnectdbParams(keywords, values, 1);

	if (conn == NULL || PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "copy_reader: could not connect: %s",
				conn ? PQerrorMessage(conn) : "out of memory\n");
		exit(1);
	}
	return conn;
}

/* run COPY (query) TO STDOUT on conn and discard the data */
static CopyStats
copy_discard(PGconn *conn, const char *query, int binary)
{
	CopyStats	st = {0, 0, 0.0, 0};
	size_t		len = strlen(query) + 64;
	char	   *sql = malloc(len);
	PGresult   *res;
	char	   *buf;
	int			n;
	double		t0;

	snprintf(sql, len, "COPY (%s) TO STDOUT (FORMAT %s)", query,
			 binary ? "binary" : "text");
	t0 = now_seconds();
	res = PQexec(conn, sql);
	if (PQresultStatus(res) != PGRES_COPY_OUT)
	{
		fprintf(stderr, "copy_reader: %s failed: %s", sql, PQerrorMessage(conn));
		PQclear(res);
		free(sql);
		return st;
	}
	PQclear(res);
	while ((n = PQgetCopyData(conn, &buf, 0)) > 0)
	{
		st.bytes += n;
		PQfreemem(buf);
	}
	if (n == -2)
		fprintf(stderr, "copy_reader: reading COPY data failed: %s", PQerrorMessage(conn));
	res = PQgetResult(conn);
	st.seconds = now_seconds() - t0;
	if (PQresultStatus(res) == PGRES_COMMAND_OK && n == -1)
	{
		st.rows = strtoll(PQcmdTuples(res), NULL, 10);
		st.ok = 1;
	}
	else
		fprintf(stderr, "copy_reader: COPY failed: %s", PQerrorMessage(conn));
	PQclear(res);
	while ((res = PQgetResult(conn)) != NULL)
		PQclear(res);
	free(sql);
	return st;
}

/* the table's quoted name and its size in blocks, via regclass */
static long
table_blocks(PGconn *conn, const char *table, char **quoted)
{
	const char *params[1] = {table};
	PGresult   *res = PQexecParams(conn,
								   "SELECT $1::regclass::text, "
								   "pg_relation_size($1::regclass) / "
								   "current_setting('block_size')::int",
								   1, NULL, params, NULL, NULL, 0);
	long		blocks;

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		fprintf(stderr, "copy_reader: table \"%s\": %s", table, PQerrorMessage(conn));
		exit(1);
	}
	*quoted = strdup(PQgetvalue(res, 0, 0));
	blocks = atol(PQgetvalue(res, 0, 1));
	PQclear(res);
	return blocks;
}

/* one pass: nslices readers (forked when more than one); summed stats, wall time */
static CopyStats
read_pass(const char *conninfo, const char *query, const char *table,
		  const char *columns, long blocks, int nslices, int binary)
{
	CopyStats	total = {0, 0, 0.0, 1};
	int			fds[2];
	double		t0 = now_seconds();

	if (table == NULL || nslices == 1)
	{
		PGconn	   *conn = connect_or_die(conninfo);
		char	   *q = NULL;

		if (table != NULL)
		{
			size_t		len = strlen(columns) + strlen(table) + 32;

			q = malloc(len);
			snprintf(q, len, "SELECT %s FROM %s", columns, table);
		}
		total = copy_discard(conn, q ? q : query, binary);
		PQfinish(conn);
		free(q);
		return total;
	}

	if (pipe(fds) != 0)
	{
		fprintf(stderr, "copy_reader: pipe: %s\n", strerror(errno));
		exit(1);
	}
	fflush(stdout);
	for (int s = 0; s < nslices; s++)
	{
		pid_t		pid = fork();

		if (pid < 0)
		{
			fprintf(stderr, "copy_reader: fork: %s\n", strerror(errno));
			exit(1);
		}
		if (pid == 0)
		{
			long		lo = blocks * s / nslices;
			long		hi = blocks * (s + 1) / nslices;
			size_t		len = strlen(columns) + strlen(table) + 128;
			char	   *q = malloc(len);
			PGconn	   *conn = connect_or_die(conninfo);
			CopyStats	st;

			close(fds[0]);
			/* the last slice is open-ended, in case the table grew */
			if (s == nslices - 1)
				snprintf(q, len, "SELECT %s FROM %s WHERE ctid >= '(%ld,0)'",
						 columns, table, lo);
			else
				snprintf(q, len, "SELECT %s FROM %s WHERE ctid >= '(%ld,0)' "
						 "AND ctid < '(%ld,0)'", columns, table, lo, hi);
			st = copy_discard(conn, q, binary);
			PQfinish(conn);
			if (write(fds[1], &st, sizeof(st)) != sizeof(st))
				_exit(1);
			_exit(st.ok ? 0 : 1);
		}
	}
	close(fds[1]);
	for (int s = 0; s < nslices; s++)
	{
		CopyStats	st;

		if (read(fds[0], &st, sizeof(st)) != sizeof(st))
		{
			total.ok = 0;
			break;
		}
		total.rows += st.rows;
		total.bytes += st.bytes;
		total.ok &= st.ok;
	}
	close(fds[0]);
	while (wait(NULL) > 0)
		;
	total.seconds = now_seconds() - t0;
	return total;
}

/* parse options, run the passes, print the table and the best as JSON */
int
main(int argc, char **argv)
{
	const char *conninfo = NULL;
	const char *query = NULL;
	const char *table_arg = NULL;
	const char *columns = "*";
	char	   *table = NULL;
	int			repeat = 3;
	int			nslices = 1;
	int			binary = 1;
	long		blocks = 0;
	CopyStats	best = {0, 0, 0.0, 0};
	int			failed = 0;

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "-d") == 0 && i + 1 < argc)
			conninfo = argv[++i];
		else if (strcmp(argv[i], "-c") == 0 && i + 1 < argc)
			query = argv[++i];
		else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc)
			table_arg = argv[++i];
		else if (strcmp(argv[i], "-C") == 0 && i + 1 < argc)
			columns = argv[++i];
		else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
			repeat = atoi(argv[++i]);
		else if (strcmp(argv[i], "-j") == 0 && i + 1 < argc)
			nslices = atoi(argv[++i]);
		else if (strcmp(argv[i], "--text") == 0)
			binary = 0;
		else
		{
			query = table_arg = NULL;
			break;
		}
	}
	if ((query == NULL) == (table_arg == NULL) || repeat < 1 || nslices < 1 ||
		nslices > CR_MAX_SLICES || (query != NULL && nslices != 1))
	{
		fprintf(stderr,
				"usage: %s [-d CONNINFO] [-r REPEAT] [--text] -c QUERY\n"
				"       %s [-d CONNINFO] [-r REPEAT] [--text] [-C COLUMNS] [-j SLICES] -t TABLE\n",
				argv[0], argv[0]);
		return 2;
	}
	if (table_arg != NULL)
	{
		PGconn	   *conn = connect_or_die(conninfo);

		blocks = table_blocks(conn, table_arg, &table);
		PQfinish(conn);
	}

	printf("copy_reader: COPY (%s%s%s%s) TO STDOUT (FORMAT %s), %d slice%s\n",
		   query ? query : "SELECT ", query ? "" : columns,
		   query ? "" : " FROM ", query ? "" : table, binary ? "binary" : "text",
		   nslices, nslices == 1 ? "" : "s");
	printf("%5s %12s %12s %9s %12s %10s\n", "pass", "rows", "MB", "seconds",
		   "rows/s", "MB/s");
	for (int r = 0; r < repeat; r++)
	{
		CopyStats	st = read_pass(conninfo, query, table, columns, blocks,
								   nslices, binary);

		if (!st.ok)
		{
			failed = 1;
			break;
		}
		printf("%5d %12lld %12.1f %9.3f %12.0f %10.1f\n", r + 1, st.rows,
			   st.bytes / 1e6, st.seconds, st.rows / st.seconds,
			   st.bytes / 1e6 / st.seconds);
		if (!best.ok || st.seconds < best.seconds)
			best = st;
	}
	if (failed)
		return 1;
	printf("{\"bench\": \"copy_reader\", \"format\": \"%s\", \"slices\": %d, "
		   "\"rows\": %lld, \"bytes\": %lld, \"best_s\": %.6f, \"rows_per_s\": %.1f, "
		   "\"mb_per_s\": %.2f}\n", binary ? "binary" : "text", nslices, best.rows,
		   best.bytes, best.seconds, best.rows / best.seconds,
		   best.bytes / 1e6 / best.seconds);
	free(table);
	return 0;
}
