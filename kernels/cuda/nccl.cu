/*-------------------------------------------------------------------------
 *
 * nccl.cu
 *	  The gradient all-reduce between GPU ranks, and its watchdog.
 *
 * The communicator is created non-blocking (config.blocking = 0): every
 * NCCL call returns at once, possibly with ncclInProgress, and progress is
 * read with ncclCommGetAsyncError.  That is what lets a rank notice a dead
 * peer (an error, or no progress by the deadline) and abort the
 * communicator instead of hanging in a collective forever; the caller then
 * ends the whole job (MPI_Abort).  MPI itself is not called here: the
 * worker broadcasts the unique id's bytes.
 *
 *-------------------------------------------------------------------------
 */
#include "clock.h"
#include "common.cuh"

#include <nccl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static_assert(sizeof(ncclUniqueId) == DML_NCCL_ID_BYTES,
			  "DML_NCCL_ID_BYTES must match ncclUniqueId");

struct DmlNccl
{
	ncclComm_t	comm;			/* NULL once aborted or destroyed */
	int			nranks;
	int			rank;
	double		timeout_s;		/* for init, enqueue and finalize */
};

/* an NCCL call that must not fail (ncclInProgress is not a failure) */
#define NCCL_CHECK(call) \
	do { \
		ncclResult_t r_ = (call); \
		if (r_ != ncclSuccess && r_ != ncclInProgress) \
			return dml_cuda_fail(DML_ERR_NCCL, __FILE__, __LINE__, "%s: %s", \
								 #call, ncclGetErrorString(r_)); \
	} while (0)

/* a short pause between polls */
static void
nap(void)
{
	struct timespec ts = {0, 200 * 1000};	/* 200 us */

	nanosleep(&ts, NULL);
}

/* the communicator's async state: DML_OK, or an error naming what NCCL said */
static int
comm_state(ncclComm_t comm, int *in_progress, const char *file, int line)
{
	ncclResult_t async = ncclSuccess;
	ncclResult_t r = ncclCommGetAsyncError(comm, &async);

	if (r != ncclSuccess)
		return dml_cuda_fail(DML_ERR_NCCL, file, line, "ncclCommGetAsyncError: %s",
							 ncclGetErrorString(r));
	*in_progress = async == ncclInProgress;
	if (async != ncclSuccess && async != ncclInProgress)
	{
		const char *detail = ncclGetLastError(comm);

		return dml_cuda_fail(DML_ERR_NCCL, file, line, "NCCL communicator failed: %s%s%s",
							 ncclGetErrorString(async), detail && *detail ? ": " : "",
							 detail ? detail : "");
	}
	return DML_OK;
}

/* poll until the last non-blocking call has finished, or timeout_s */
static int
wait_ready(ncclComm_t comm, double timeout_s, const char *what)
{
	double		start = dml_clock_seconds();

	for (;;)
	{
		int			busy = 0;

		STATUS_CHECK(comm_state(comm, &busy, __FILE__, __LINE__));
		if (!busy)
			return DML_OK;
		if (dml_clock_seconds() - start > timeout_s)
			return dml_cuda_fail(DML_ERR_TIMEOUT, __FILE__, __LINE__,
								 "%s did not finish within %.0f s", what, timeout_s);
		nap();
	}
}

/* a fresh unique id, as bytes for MPI_Bcast */
static int
nccl_unique_id(unsigned char *id)
{
	ncclUniqueId uid;

	NCCL_CHECK(ncclGetUniqueId(&uid));
	memcpy(id, &uid, sizeof(uid));
	return DML_OK;
}

/* a unique id for rank 0 to broadcast */
int
dml_nccl_unique_id(unsigned char *id, char *errbuf, size_t errlen)
{
	int			st = nccl_unique_id(id);

	if (st != DML_OK)
		dml_cuda_copy_error(errbuf, errlen);
	return st;
}

/* create the non-blocking communicator and wait for it */
static int
nccl_init(DmlNccl *c, const unsigned char *id, int nranks, int rank, int device)
{
	ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
	ncclUniqueId uid;

	ARG_CHECK(nranks >= 1 && rank >= 0 && rank < nranks);
	config.blocking = 0;
	memcpy(&uid, id, sizeof(uid));
	CUDA_CHECK(cudaSetDevice(device));
	NCCL_CHECK(ncclCommInitRankConfig(&c->comm, nranks, uid, rank, &config));
	return wait_ready(c->comm, c->timeout_s, "ncclCommInitRankConfig");
}

/* join the communicator of nranks as rank, on device */
int
dml_nccl_init(DmlNccl **comm, const unsigned char *id, int nranks, int rank,
			  int device, double timeout_s, char *errbuf, size_t errlen)
{
	DmlNccl    *c = (DmlNccl *) calloc(1, sizeof(DmlNccl));
	int			st;

	*comm = NULL;
	if (c == NULL)
	{
		dml_cuda_fail(DML_ERR_NOMEM, __FILE__, __LINE__, "out of memory");
		dml_cuda_copy_error(errbuf, errlen);
		return DML_ERR_NOMEM;
	}
	c->nranks = nranks;
	c->rank = rank;
	c->timeout_s = timeout_s > 0 ? timeout_s : 300.0;
	st = nccl_init(c, id, nranks, rank, device);
	if (st != DML_OK)
	{
		dml_cuda_copy_error(errbuf, errlen);
		dml_nccl_abort(c);
		return st;
	}
	*comm = c;
	return DML_OK;
}

/* enqueue the in-place sum and wait for the enqueue */
static int
nccl_allreduce_sum(DmlNccl *c, float *buf, size_t n, cudaStream_t stream)
{
	if (c->comm == NULL)
		return dml_cuda_fail(DML_ERR_NCCL, __FILE__, __LINE__, "communicator was aborted");
	NCCL_CHECK(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, c->comm, stream));
	/* the enqueue may still be in progress (first use connects peers) */
	return wait_ready(c->comm, c->timeout_s, "ncclAllReduce enqueue");
}

/* buf (n, device) summed across ranks in place, on stream */
int
dml_nccl_allreduce_sum(DmlNccl *comm, float *buf, size_t n, cudaStream_t stream,
					   char *errbuf, size_t errlen)
{
	int			st = nccl_allreduce_sum(comm, buf, n, stream);

	if (st != DML_OK)
		dml_cuda_copy_error(errbuf, errlen);
	return st;
}

/* watchdog poll: has the communicator failed? */
int
dml_nccl_poll(DmlNccl *comm, char *errbuf, size_t errlen)
{
	int			busy = 0;
	int			st;

	if (comm->comm == NULL)
		st = dml_cuda_fail(DML_ERR_NCCL, __FILE__, __LINE__, "communicator was aborted");
	else
		st = comm_state(comm->comm, &busy, __FILE__, __LINE__);
	if (st != DML_OK)
		dml_cuda_copy_error(errbuf, errlen);
	return st;
}

/* poll the stream and the communicator until done, failed or late */
static int
nccl_wait(DmlNccl *c, cudaStream_t stream, double timeout_s)
{
	double		start = dml_clock_seconds();

	if (c->comm == NULL)
		return dml_cuda_fail(DML_ERR_NCCL, __FILE__, __LINE__, "communicator was aborted");
	for (;;)
	{
		cudaError_t q = cudaStreamQuery(stream);
		int			busy = 0;
		int			st;

		if (q == cudaSuccess)
			return DML_OK;
		if (q != cudaErrorNotReady)
			return dml_cuda_fail(DML_ERR_CUDA, __FILE__, __LINE__, "cudaStreamQuery: %s",
								 cudaGetErrorString(q));
		if ((st = comm_state(c->comm, &busy, __FILE__, __LINE__)) != DML_OK)
			return st;
		if (dml_clock_seconds() - start > timeout_s)
			return dml_cuda_fail(DML_ERR_TIMEOUT, __FILE__, __LINE__,
								 "collective on rank %d of %d did not finish within %.1f s",
								 c->rank, c->nranks, timeout_s);
		nap();
	}
}

/* wait for stream; on error or timeout abort the communicator */
int
dml_nccl_wait(DmlNccl *comm, cudaStream_t stream, double timeout_s,
			  char *errbuf, size_t errlen)
{
	int			st = nccl_wait(comm, stream, timeout_s);

	if (st != DML_OK)
	{
		dml_cuda_copy_error(errbuf, errlen);
		if (comm->comm != NULL && st != DML_ERR_CUDA)
		{
			ncclCommAbort(comm->comm);
			comm->comm = NULL;
		}
	}
	return st;
}

/* tear down at once, whatever is in flight; frees comm */
void
dml_nccl_abort(DmlNccl *comm)
{
	if (comm == NULL)
		return;
	if (comm->comm != NULL)
		ncclCommAbort(comm->comm);
	free(comm);
}

/* orderly teardown after success (falls back to abort); frees comm */
void
dml_nccl_destroy(DmlNccl *comm)
{
	if (comm == NULL)
		return;
	if (comm->comm != NULL)
	{
		ncclResult_t r = ncclCommFinalize(comm->comm);

		if ((r != ncclSuccess && r != ncclInProgress) ||
			wait_ready(comm->comm, comm->timeout_s, "ncclCommFinalize") != DML_OK)
		{
			dml_nccl_abort(comm);
			return;
		}
		ncclCommDestroy(comm->comm);
	}
	free(comm);
}
