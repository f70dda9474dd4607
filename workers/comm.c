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
#include <unistd.h>

#include "comm.h"
#include "worker.h"

static double sync_bytes = 0;

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
	MPI_Comm_rank(MPI_COMM_WORLD, &worker_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &worker_world);
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

		mpiCheck(MPI_Allreduce(MPI_IN_PLACE, buf + off, (int) c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
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

		mpiCheck(MPI_Allreduce(MPI_IN_PLACE, buf + off, (int) c, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
	}
	count(n * sizeof(double));
}

void
comm_allreduce_max_i64(int64_t *buf, int n)
{
	if (worker_world == 1)
		return;
	mpiCheck(MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD));
}

/* buf[rank] of every rank into buf on every rank */
void
comm_allgather_i64(int64_t *buf)
{
	if (worker_world == 1)
		return;
	mpiCheck(MPI_Allgather(MPI_IN_PLACE, 1, MPI_INT64_T, buf, 1, MPI_INT64_T, MPI_COMM_WORLD));
}

void
comm_bcast(void *buf, size_t bytes, int root)
{
	if (worker_world == 1)
		return;
	for (size_t off = 0; off < bytes; off += 1u << 30)
	{
		size_t		c = bytes - off < (1u << 30) ? bytes - off : (1u << 30);

		mpiCheck(MPI_Bcast((char *) buf + off, (int) c, MPI_BYTE, root, MPI_COMM_WORLD));
	}
}

/* count bytes another transport (NCCL) moved for the whole job */
void
comm_count_bytes(double ring_bytes)
{
	count((size_t) ring_bytes);
}

double
comm_job_bytes(void)
{
	return sync_bytes;
}

void
comm_barrier(void)
{
	mpiCheck(MPI_Barrier(MPI_COMM_WORLD));
}

void
comm_abort(int code)
{
	fflush(stdout);
	fflush(stderr);
	MPI_Abort(MPI_COMM_WORLD, code);
	_exit(code);
}
