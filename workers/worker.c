/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  dml-worker: main program of one MPI rank.
 *
 *	  dml-worker <spec>
 *
 * Started by mpirun, which the coordinator started in the backend.  Every
 * rank reads the spec and its slices; rank 0 also talks to the coordinator
 * over the control socket: HELLO with every rank's pid, PROGRESS per
 * epoch, CHECKPOINTs, and at the end the MODEL (or an ERROR).  A predict
 * job (predict.c) sends blocks of PREDICTIONS and DONE instead.
 *
 * A rank never outlives its job: it asks for SIGKILL when its parent
 * (mpirun) dies, and rank 0 ends the job when the coordinator's end of the
 * control socket closes.
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "libpq-fe.h"

#include "comm.h"
#ifdef DML_HAVE_CUDA
#include "cuda_kernels.h"
#endif
#include "protocol.h"
#include "sync.h"
#include "worker.h"

int			worker_rank = 0;
int			worker_world = 1;
char		worker_host[256] = "?";

double
wall_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
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
	if (worker_rank == 0 && control_connected())
	{
		n = snprintf(payload, sizeof(payload), "\nrank %d on %s: %s\n", worker_rank, worker_host, msg);
		control_send(DML_MSG_ERROR, payload, (size_t) n < sizeof(payload) ? (size_t) n : sizeof(payload) - 1, NULL, 0);
	}
	comm_abort(2);
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
		control_send(DML_MSG_ERROR, payload, (size_t) n < sizeof(payload) ? (size_t) n : sizeof(payload) - 1, NULL, 0);
	}
	/* every rank found the same; end together, the servers too */
	sync_stop_servers();
	comm_barrier();
	comm_finalize();
	exit(2);
}

/*
 * Fault injection (tests only; the backend passes it on only when
 * dml.test_hooks is on).  "rank:epoch:how", how = kill | exit | drop | hang,
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
	else if (strncmp(how, "exit", 4) == 0)
		_exit(17);
	else if (strncmp(how, "hang", 4) == 0)
		for (;;)
			pause();
}

/* every rank's host, as JSON, for the metrics (rank 0; send_hello) */
static char *rank_hosts_json = NULL;

#define HOST_NAME_BYTES 64

/*
 * rank 0 tells the coordinator every rank's pid (those on its own host:
 * a pid on another host means nothing to the backend) and host
 */
static void
send_hello(void)
{
	int			pid = (int) getpid();
	char		me[HOST_NAME_BYTES];
	int		   *pids = world_rank == 0 ? malloc(sizeof(int) * world_size) : NULL;
	char	   *hosts = world_rank == 0 ? malloc((size_t) HOST_NAME_BYTES * world_size) : NULL;

	memset(me, 0, sizeof(me));
	memcpy(me, worker_host, strnlen(worker_host, sizeof(me) - 1));
	MPI_Gather(&pid, 1, MPI_INT, pids, 1, MPI_INT, 0, MPI_COMM_WORLD);
	MPI_Gather(me, HOST_NAME_BYTES, MPI_CHAR, hosts, HOST_NAME_BYTES, MPI_CHAR, 0, MPI_COMM_WORLD);
	if (world_rank == 0)
	{
		size_t		cap = 32 + (12 + HOST_NAME_BYTES + 4) * (size_t) world_size;
		char	   *text = malloc(cap);
		size_t		len = snprintf(text, cap, "pids"),
					jlen = 0;

		rank_hosts_json = malloc(cap);
		for (int r = 0; r < world_size; r++)
			len += snprintf(text + len, cap - len, " %d", comm_elsewhere(r) ? 0 : pids[r]);
		len += snprintf(text + len, cap - len, "\nhosts");
		for (int r = 0; r < world_size; r++)
		{
			const char *h = hosts + (size_t) HOST_NAME_BYTES * r;

			len += snprintf(text + len, cap - len, " %s", h);
			jlen += snprintf(rank_hosts_json + jlen, cap - jlen, "%s\"%s\"", r ? ", " : "[", h);
		}
		snprintf(rank_hosts_json + jlen, cap - jlen, "]");
		control_send(DML_MSG_HELLO, text, len, NULL, 0);
		free(text);
		free(pids);
		free(hosts);
	}
}

/*
 * The device this rank trains on: a GPU index, or -1 for the CPU.  One
 * rank per GPU (NCCL cannot share a GPU between ranks), so 'auto' uses the
 * GPUs only when every host has one for each of its ranks; 'gpu' without
 * them is an error.  Every rank reaches the same decision.
 */
static int
choose_device(const WorkerSpec *spec, int iterative)
{
	int			ngpu = 0;
	int			local_rank = 0,
				local_size = 1;
	int			enough,
				any;
	MPI_Comm	node;

#ifdef DML_HAVE_CUDA
	if (strcmp(spec->device, "cpu") != 0)
		ngpu = dml_gpu_device_count();
#endif
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
	MPI_Comm_rank(node, &local_rank);
	MPI_Comm_size(node, &local_size);
	MPI_Comm_free(&node);
	enough = ngpu >= local_size;
	any = ngpu > 0;
	MPI_Allreduce(MPI_IN_PLACE, &enough, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);

	if (strcmp(spec->device, "gpu") == 0)
	{
		if (!any)
			worker_user_error("55000|Use device => 'cpu' or 'auto' on a machine without a GPU.|"
							  "device 'gpu' was asked for, but %s",
#ifdef DML_HAVE_CUDA
							  "no CUDA device is visible to the workers"
#else
							  "this build of dml-worker has no CUDA support"
#endif
				);
		if (!enough)
			worker_user_error("55000|Ask for at most as many workers per host as it has GPUs.|"
							  "%d GPU workers on a host with %d GPUs: each GPU rank needs a GPU of its own",
							  local_size, ngpu);
		if (!iterative)
			worker_user_error("0A000|Use device => 'cpu' or 'auto', or an iterative optimizer such as adam.|"
							  "the exact and Newton solvers run on the CPU only");
	}
	if (strcmp(spec->device, "cpu") == 0 || !enough || !iterative)
		return -1;
	return local_rank;
}

int
main(int argc, char **argv)
{
	WorkerSpec	spec;
	Dataset		ds;
	TrainResult res;
	char		err[512];
	const char *device;
	int			gpu;
	int			iterative;
	double		t0 = wall_seconds();

	/* die with mpirun, whatever kills it */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	comm_init(&argc, &argv);
	gethostname(worker_host, sizeof(worker_host) - 1);
	if (argc != 2)
		worker_fail("usage: dml-worker <job spec>");
	if (spec_read(&spec, argv[1], err, sizeof(err)) != 0)
		worker_fail("%s", err);
	if (spec.world != world_size)
		worker_fail("job spec is for %d ranks but mpirun started %d", spec.world, world_size);
	comm_split_roles(spec.servers);

	if (worker_rank == 0)
	{
		control_connect(spec.socket);
		control_start_watchdog();
	}
	send_hello();
	if (spec.predict)
	{
		predict_run(&spec);
		comm_finalize();
		return 0;
	}

	iterative = strcmp(spec.optimizer, "exact") != 0 && strcmp(spec.optimizer, "newton") != 0;
	/* the GPU loop synchronizes by NCCL all-reduce, uncompressed; other modes run on the CPU */
	gpu = choose_device(&spec, iterative && strcmp(spec.sync, "allreduce") == 0 &&
						strcmp(spec.compression, "none") == 0);
	if (comm_is_server())
	{
		server_main(&spec);
		comm_finalize();
		return 0;
	}
	device = gpu >= 0 ? "gpu" : "cpu";
	if (worker_rank == 0)
	{
		char		line[256];
		int			n = snprintf(line, sizeof(line), "training %s on %s with %d worker%s",
								 spec.kind, gpu >= 0 ? "gpu" : "cpu", worker_world,
								 worker_world == 1 ? "" : "s");

		if (strcmp(spec.sync, "allreduce") != 0 || strcmp(spec.compression, "none") != 0)
			n += snprintf(line + n, sizeof(line) - n, ", sync %s%s%s", spec.sync,
						  strcmp(spec.compression, "none") != 0 ? ", compression " : "",
						  strcmp(spec.compression, "none") != 0 ? spec.compression : "");
		if (spec.servers > 0)
			n += snprintf(line + n, sizeof(line) - n, " and %d parameter server%s", spec.servers,
						  spec.servers == 1 ? "" : "s");

		control_send(DML_MSG_LOG, line, n, NULL, 0);
	}
	load_slices(&ds, &spec, worker_rank);
	comm_barrier();				/* the first to finish sleeps, not spins */

	memset(&res, 0, sizeof(res));
	prepare_data(&ds, &spec, &res.model);
	if (strcmp(spec.optimizer, "exact") == 0)
		train_exact(&ds, &spec, &res);
	else if (strcmp(spec.optimizer, "newton") == 0)
		train_newton(&ds, &spec, &res);
#ifdef DML_HAVE_CUDA
	else if (gpu >= 0)
		train_gpu(&ds, &spec, &res, gpu);
#endif
	else
		train_iterative(&ds, &spec, &res);

	{
		char	   *metrics = final_metrics(&ds, &spec, &res.model, &res);

		if (worker_rank == 0)
		{
			size_t		blen = dml_model_serialized_size(&res.model);
			size_t		mlen = strlen(metrics) + strlen(rank_hosts_json) + 160;
			unsigned char *msg = malloc(4 + blen);
			char	   *full = malloc(mlen);
			uint32_t	b32 = (uint32_t) blen;
			int			n;

			memcpy(msg, &b32, 4);
			dml_model_serialize(&res.model, msg + 4);
			/* the device and timing facts join the metrics object */
			n = snprintf(full, mlen, "{\"device\": \"%s\", \"total_seconds\": %.4f, \"hosts\": %s, %s",
						 device, wall_seconds() - t0, rank_hosts_json, metrics + 1);
			control_send(DML_MSG_MODEL, msg, 4 + blen, full, n);
			free(msg);
			free(full);
		}
	}
	comm_finalize();
	return 0;
}
