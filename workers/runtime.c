/*-------------------------------------------------------------------------
 *
 * runtime.c
 *	  What every file of dml-worker uses: who this rank is (worker_rank,
 *	  worker_world, worker_host), failing fast (worker_fail and its kin,
 *	  which name rank, host, file and line and end the whole job), logging
 *	  in to PostgreSQL as the caller (worker_login), and the
 *	  fault-injection hook of the tests.  Below every other worker file: it
 *	  calls none of them, only MPI, libpq and the report hook that control.c
 *	  sets once rank 0 has a control socket.
 *
 *-------------------------------------------------------------------------
 */
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "libpq-fe.h"

#include "protocol.h"
#include "worker.h"

int			worker_rank = 0;
int			worker_world = 1;
char		worker_host[256] = "?";
void		(*worker_report) (uint32_t type, const void *payload, size_t len) = NULL;
void		(*worker_before_exit) (void) = NULL;

/* end the whole job now: mpirun ends every rank when one aborts */
void
worker_abort(int code)
{
	fflush(stdout);
	fflush(stderr);
	MPI_Abort(MPI_COMM_WORLD, code);
	_exit(code);
}

/* report to the coordinator (rank 0) and the log, then end the whole job */
void
worker_fail_at(const char *file, int line, const char *fmt,...)
{
	char		msg[2048];
	char		payload[2300];
	va_list		ap;
	int			n;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "dml-worker error: rank %d on %s: %s (%s:%d)\n",
			worker_rank, worker_host, msg, file, line);
	fflush(stderr);
	if (worker_rank == 0 && worker_report != NULL)
	{
		n = snprintf(payload, sizeof(payload), "\nrank %d on %s: %s\n", worker_rank, worker_host, msg);
		worker_report(DML_MSG_ERROR, payload, (size_t) n < sizeof(payload) ? (size_t) n : sizeof(payload) - 1);
	}
	worker_abort(2);
}

/*
 * Whether a failed query's SQLSTATE is worth a restart: lost connections,
 * a server shutting down, resources running out, a transaction rolled back
 * by a conflict.  Anything else (a SQL error, a privilege, bad data) would
 * happen again on every try.
 */
static int
sqlstate_transient(const char *state)
{
	return strncmp(state, "08", 2) == 0 || strncmp(state, "57P", 3) == 0 ||
		strncmp(state, "53", 2) == 0 || strncmp(state, "58", 2) == 0 ||
		strncmp(state, "40", 2) == 0;
}

/*
 * An error that would happen again on every try: report it with its
 * SQLSTATE (rank 0 over the control socket, every rank in the log as
 * "dml-worker final SQLSTATE message", which the coordinator looks for) so
 * the job fails at once instead of restarting, then end the job.
 */
void
worker_fail_final_at(const char *file, int line, const char *state, const char *hint,
					 const char *fmt,...)
{
	char		msg[2048];
	char		payload[4200];
	va_list		ap;
	int			n;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	for (char *p = msg; *p; p++)
		if (*p == '\n')
			*p = ' ';
	fprintf(stderr, "dml-worker error: rank %d on %s: %s (%s:%d)\n",
			worker_rank, worker_host, msg, file, line);
	fprintf(stderr, "dml-worker final %.5s %s\n", state, msg);
	fflush(stderr);
	if (worker_rank == 0 && worker_report != NULL)
	{
		n = snprintf(payload, sizeof(payload), "%.5s\n%s\n%s", state, msg,
					 hint && !strchr(hint, '\n') ? hint : "");
		worker_report(DML_MSG_ERROR, payload, (size_t) n < sizeof(payload) ? (size_t) n : sizeof(payload) - 1);
	}
	worker_abort(2);
}

/* a failed query on conn (res: its result, or NULL): final or restartable */
void
worker_fail_query_at(const char *file, int line, void *pgconn, void *pgres, const char *what)
{
	PGconn	   *conn = pgconn;
	PGresult   *res = pgres;
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;

	if (state && strlen(state) == 5 && msg && !sqlstate_transient(state) &&
		PQstatus(conn) == CONNECTION_OK)
		worker_fail_final_at(file, line, state,
							 PQresultErrorField(res, PG_DIAG_MESSAGE_HINT),
							 "%s", msg);
	worker_fail_at(file, line, "%s failed: %s", what, PQerrorMessage(conn));
}

/*
 * A mistake in the user's data, found by every rank after a reduction:
 * rank 0 sends "SQLSTATE\nmessage\nhint" so the backend raises it as is.
 * fmt is "SQLSTATE|hint|message format".
 */
void
worker_user_error(const char *fmt,...)
{
	char		msg[2048];
	va_list		ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (worker_rank == 0)
	{
		/* msg is "SQLSTATE|hint|message": turn the separators into newlines */
		char	   *a = strchr(msg, '|');
		char	   *b = a ? strchr(a + 1, '|') : NULL;
		char		payload[2100];
		int			n;

		if (a && b)
		{
			*a = '\0';
			*b = '\0';
			n = snprintf(payload, sizeof(payload), "%s\n%s\n%s", msg, b + 1, a + 1);
		}
		else
			n = snprintf(payload, sizeof(payload), "\n%s\n", msg);
		if (worker_report != NULL)
			worker_report(DML_MSG_ERROR, payload, (size_t) n < sizeof(payload) ? (size_t) n : sizeof(payload) - 1);
	}
	/* every rank found the same; end together, the servers too */
	if (worker_before_exit != NULL)
		worker_before_exit();
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Finalize();
	exit(2);
}

/*
 * Fault injection (tests only; the backend passes it on only when
 * dml.test_hooks is on).  "rank:epoch:how", how = kill | exit | drop | hang,
 * or spoil | unspill (the rank's spill damaged or removed, then killed),
 * with a trailing "!" to fault again after a restart.
 */
void
maybe_inject_fault(const WorkerSpec *spec, int epoch, void *pgconn)
{
	int			rank,
				at;
	char		how[32] = "";

	if (spec->fault == NULL ||
		sscanf(spec->fault, "%d:%d:%31s", &rank, &at, how) != 3 || rank != worker_rank)
		return;
	if (spec->attempt > 0 && strchr(how, '!') == NULL)
		return;
	if (strncmp(how, "drop", 4) == 0)
	{
		/* the database connection goes away under libpq, during the load */
		if (pgconn != NULL)
			shutdown(PQsocket((PGconn *) pgconn), SHUT_RDWR);
		return;
	}
	if (at != epoch || pgconn != NULL)
		return;
	fprintf(stderr, "dml-worker: rank %d injecting fault \"%s\" at epoch %d\n", worker_rank, how, epoch);
	fflush(stderr);
	if (strncmp(how, "kill", 4) == 0)
		kill(getpid(), SIGKILL);
	else if (strncmp(how, "spoil", 5) == 0 || strncmp(how, "unspill", 7) == 0)
	{
		/* this rank's spill damaged, or removed, then killed */
		stream_spoil(how[0] == 'u');
		kill(getpid(), SIGKILL);
	}
	else if (strncmp(how, "exit", 4) == 0)
		_exit(17);
	else if (strncmp(how, "hang", 4) == 0)
		for (;;)
			pause();
}

/*
 * worker_login
 *		Connect as the job's caller.  The session user must be the calling
 *		role itself (coordinator/login.c): user code runs in this session
 *		(view and policy functions), and a superuser that set its role could
 *		be reset by it.  Anything else is refused before a query runs.
 */
PGconn *
worker_login(const WorkerSpec *spec)
{
	PGconn	   *conn = PQconnectdb(spec->conninfo);
	PGresult   *res;

	if (PQstatus(conn) != CONNECTION_OK)
		worker_fail("could not connect to the database as role \"%s\": %s",
					spec->role, PQerrorMessage(conn));
	res = PQexec(conn, "SELECT session_user");
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		worker_fail("could not read the session user: %s", PQerrorMessage(conn));
	if (strcmp(PQgetvalue(res, 0, 0), spec->role) != 0)
		worker_fail("the worker's session user is \"%s\", not the caller \"%s\"",
					PQgetvalue(res, 0, 0), spec->role);
	PQclear(res);
	return conn;
}
