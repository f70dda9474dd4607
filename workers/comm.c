/*-------------------------------------------------------------------------
 *
 * comm.c
 *	  MPI for the training loop: in-place sum all-reduce of gradients and
 *	  statistics, with every call checked and its volume counted.
 *
 *-------------------------------------------------------------------------
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "half.h"
#include "worker.h"

static double sync_bytes = 0;	/* collectives: the same figure on every data rank */
static double p2p_local = 0;	/* point-to-point bytes this rank sent */
static double p2p_job = 0;		/* all ranks' point-to-point bytes, as of the last reduce */
static MPI_Comm data_comm = MPI_COMM_WORLD;	/* the ranks that hold data */

int			world_rank = 0;
int			world_size = 1;
int			server_count = 0;

#define mpiCheck(call) \
	do { int rc_ = (call); \
		 if (rc_ != MPI_SUCCESS) { \
			 char msg_[MPI_MAX_ERROR_STRING]; int len_ = 0; \
			 MPI_Error_string(rc_, msg_, &len_); \
			 worker_fail("MPI call %s failed: %s", #call, msg_); } } while (0)

/* MPI up, errors returned (not fatal) so we can report them */
void
comm_init(int *argc, char ***argv)
{
	MPI_Init(argc, argv);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &world_size);
	worker_rank = world_rank;
	worker_world = world_size;
}

/*
 * comm_split_roles
 *		The last `servers` ranks of the world hold parameters; the others
 *		hold data and are numbered 0..workers-1 in their own communicator,
 *		which every collective of the training loop uses.  World rank 0 is
 *		always data rank 0 (it talks to the coordinator).  A server keeps
 *		its world rank as worker_rank, for messages.
 */
void
comm_split_roles(int servers)
{
	int			is_server = world_rank >= world_size - servers;

	server_count = servers;
	if (servers <= 0)
		return;
	mpiCheck(MPI_Comm_split(MPI_COMM_WORLD, is_server, world_rank, &data_comm));
	if (is_server)
	{
		worker_rank = world_rank;
		worker_world = world_size - servers;
	}
	else
	{
		MPI_Comm_rank(data_comm, &worker_rank);
		MPI_Comm_size(data_comm, &worker_world);
	}
}

int
comm_is_server(void)
{
	return server_count > 0 && world_rank >= world_size - server_count;
}

void
comm_finalize(void)
{
	MPI_Finalize();
}

/* count what a ring all-reduce of bytes would put on the wire, all ranks */
static void
count(size_t bytes)
{
	if (worker_world > 1)
		sync_bytes += 2.0 * (worker_world - 1) * (double) bytes;
}

/* sum of buf over ranks, in place */
void
comm_allreduce_float(float *buf, size_t n)
{
	if (worker_world == 1)
		return;
	/* MPI counts are int: go in chunks for huge buffers */
	for (size_t off = 0; off < n; off += 1u << 30)
	{
		size_t		c = n - off < (1u << 30) ? n - off : (1u << 30);

		mpiCheck(MPI_Allreduce(MPI_IN_PLACE, buf + off, (int) c, MPI_FLOAT, MPI_SUM, data_comm));
	}
	count(n * sizeof(float));
}

void
comm_allreduce_double(double *buf, size_t n)
{
	if (worker_world == 1)
		return;
	for (size_t off = 0; off < n; off += 1u << 29)
	{
		size_t		c = n - off < (1u << 29) ? n - off : (1u << 29);

		mpiCheck(MPI_Allreduce(MPI_IN_PLACE, buf + off, (int) c, MPI_DOUBLE, MPI_SUM, data_comm));
	}
	count(n * sizeof(double));
}

void
comm_allreduce_max_i64(int64_t *buf, int n)
{
	if (worker_world == 1)
		return;
	mpiCheck(MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_INT64_T, MPI_MAX, data_comm));
}

void
comm_allreduce_max_float(float *buf, int n)
{
	if (worker_world == 1)
		return;
	mpiCheck(MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_MAX, data_comm));
}

void
comm_allreduce_max_double(double *buf, int n)
{
	if (worker_world == 1)
		return;
	mpiCheck(MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_MAX, data_comm));
}

/* elementwise sum of IEEE binary16 values, each partial sum rounded to binary16 */
static void
half_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
	(void) type;
	half_add(inout, in, (size_t) *len);
}

/* sum of fp16 values over the data ranks, in place; counted at 2 bytes a value */
void
comm_allreduce_half(uint16_t *buf, size_t n)
{
	static MPI_Op op = MPI_OP_NULL;

	if (worker_world == 1)
		return;
	if (op == MPI_OP_NULL)
		mpiCheck(MPI_Op_create(half_sum, 1, &op));
	for (size_t off = 0; off < n; off += 1u << 30)
	{
		size_t		c = n - off < (1u << 30) ? n - off : (1u << 30);

		mpiCheck(MPI_Allreduce(MPI_IN_PLACE, buf + off, (int) c, MPI_UINT16_T, op, data_comm));
	}
	count(n * sizeof(uint16_t));
}

/*
 * bytes from every data rank into recv (rank r's at r * bytes); counted as
 * a ring all-gather moves it: each rank sends (W - 1) blocks
 */
void
comm_allgather_bytes(const void *send, size_t bytes, void *recv)
{
	if (worker_world == 1)
	{
		memcpy(recv, send, bytes);
		return;
	}
	if (bytes > (1u << 30))
		worker_fail("all-gather of %zu bytes per rank is too large", bytes);
	mpiCheck(MPI_Allgather(send, (int) bytes, MPI_BYTE, recv, (int) bytes, MPI_BYTE, data_comm));
	sync_bytes += (double) worker_world * (worker_world - 1) * (double) bytes;
}

/* send n floats to data rank dest while receiving n from data rank src */
void
comm_sendrecv_float(const float *send, float *recv, size_t n, int dest, int src)
{
	if (n > (1u << 30))
		worker_fail("exchange of %zu values is too large", n);
	mpiCheck(MPI_Sendrecv(send, (int) n, MPI_FLOAT, dest, 7, recv, (int) n, MPI_FLOAT, src, 7,
						  data_comm, MPI_STATUS_IGNORE));
	p2p_local += (double) n * sizeof(float);
}

/* buf[rank] of every rank into buf on every rank */
void
comm_allgather_i64(int64_t *buf)
{
	if (worker_world == 1)
		return;
	mpiCheck(MPI_Allgather(MPI_IN_PLACE, 1, MPI_INT64_T, buf, 1, MPI_INT64_T, data_comm));
}

void
comm_bcast(void *buf, size_t bytes, int root)
{
	if (worker_world == 1)
		return;
	for (size_t off = 0; off < bytes; off += 1u << 30)
	{
		size_t		c = bytes - off < (1u << 30) ? bytes - off : (1u << 30);

		mpiCheck(MPI_Bcast((char *) buf + off, (int) c, MPI_BYTE, root, data_comm));
	}
}

/* count bytes another transport (NCCL) moved for the whole job */
void
comm_count_bytes(double ring_bytes)
{
	count((size_t) ring_bytes);
}

/* point-to-point bytes this rank put on the wire */
void
comm_count_p2p(double bytes)
{
	p2p_local += bytes;
}

/*
 * comm_reduce_p2p
 *		Every data rank learns the point-to-point bytes of all data ranks,
 *		plus extra (the servers' figure, known to every data rank alike).
 *		Collective over the data ranks.
 */
void
comm_reduce_p2p(double extra)
{
	double		v = p2p_local;

	if (worker_world > 1)
		mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, data_comm));
	p2p_job = v + extra;
}

double
comm_job_bytes(void)
{
	return sync_bytes + p2p_job;
}

void
comm_barrier(void)
{
	MPI_Request req;
	int			done = 0;

	/*
	 * Waiting, not spinning: a blocking MPI_Barrier polls a core flat out,
	 * and the ranks that finish loading first would take it from the
	 * backends still serving the others' rows.
	 */
	mpiCheck(MPI_Ibarrier(data_comm, &req));
	for (int i = 0; !done; i++)
	{
		mpiCheck(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
		if (!done && i >= 64)
		{
			struct timespec ts = {0, 100000};	/* 0.1 ms */

			nanosleep(&ts, NULL);
		}
	}
}

void *
comm_data_handle(void)
{
	return &data_comm;
}

void
comm_abort(int code)
{
	fflush(stdout);
	fflush(stderr);
	MPI_Abort(MPI_COMM_WORLD, code);
	_exit(code);
}
