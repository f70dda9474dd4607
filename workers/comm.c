/*-------------------------------------------------------------------------
 *
 * comm.c
 *	  MPI for the training loop: in-place sum all-reduce of gradients and
 *	  statistics, with every call checked and its volume counted.
 *
 *-------------------------------------------------------------------------
 */
#define _GNU_SOURCE
#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "comm.h"
#include "half.h"
#include "worker.h"

static double sync_bytes = 0;	/* collectives: the same figure on every data rank */
static double p2p_local = 0;	/* point-to-point bytes this rank sent */
static double p2p_job = 0;		/* all ranks' point-to-point bytes, as of the last reduce */
static MPI_Comm data_comm = MPI_COMM_WORLD;	/* the ranks that hold data */

/* waiting: poll this long, then nap NAP_NS between polls */
#define SPIN_OWN_NS		2000000		/* a core per rank: 2 ms */
#define SPIN_SHARED_NS	20000		/* ranks share cores: 20 us */
#define NAP_NS			50000
static int64_t spin_limit = SPIN_OWN_NS;
static int	host_oversubscribed(void);

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
	spin_limit = host_oversubscribed() ? SPIN_SHARED_NS : SPIN_OWN_NS;
}

/*
 * More ranks on this host than CPUs this process may run on: Open MPI
 * tells each rank how many of the job's ranks share its host.
 */
static int
host_oversubscribed(void)
{
	const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
	cpu_set_t	set;
	int			cpus;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 0;
	cpus = CPU_COUNT(&set);
	return (local ? atoi(local) : world_size) > cpus;
}

/* a polite spin: tells the core this thread is waiting */
static inline void
cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* sleep ns nanoseconds: a waiting rank gives its core away */
static void
nap(long ns)
{
	struct timespec ts = {0, ns};

	nanosleep(&ts, NULL);
}

/*
 * Message waits poll flat out while messages are flowing: for spin_limit
 * after the wait began, and for as long as the previous wait ended less
 * than ACTIVE_NS ago (a server answering steps, a worker in its step
 * rhythm).  A longer silence (the other ranks are loading their slices, or
 * a straggler is far behind) is waited out in naps.  Blocking MPI calls
 * poll flat out for as long as they wait, so on a host with more ranks
 * than cores the parameter servers, waiting for the first push, took the
 * cores from the workers and the PostgreSQL backends serving their slices
 * (a job of 4 workers and 2 servers sometimes took a minute to load
 * 8,000 rows).
 */
#define ACTIVE_NS		5000000		/* 5 ms */
static int64_t last_active = 0;

static void
wait_a_little(int64_t start)
{
	int64_t		now = dml_clock_ns();

	if (now - start > spin_limit && now - last_active > ACTIVE_NS)
		nap(NAP_NS);
}

/* as MPI_Waitall, waiting as above */
void
comm_wait_all(int n, MPI_Request *req)
{
	int64_t		start = dml_clock_ns();
	int			done = 0;

	for (;;)
	{
		mpiCheck(MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE));
		if (done)
			break;
		wait_a_little(start);
	}
	last_active = dml_clock_ns();
}

/* as MPI_Probe, waiting as above */
void
comm_probe(int source, int tag, MPI_Comm comm, MPI_Status *st)
{
	int64_t		start = dml_clock_ns();
	int			found = 0;

	for (;;)
	{
		mpiCheck(MPI_Iprobe(source, tag, comm, &found, st));
		if (found)
			break;
		wait_a_little(start);
	}
	last_active = dml_clock_ns();
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

/* rank 0's job text (*text, *len) to every rank of the world, which allocates it */
void
comm_share_job(char **text, size_t *len)
{
	uint64_t	n = *len;

	mpiCheck(MPI_Bcast(&n, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD));
	if (world_rank != 0 && (*text = malloc(n + 1)) == NULL)
		worker_fail("out of memory for a job of %llu bytes", (unsigned long long) n);
	if (n > INT_MAX)
		worker_fail("a job of %llu bytes is too large", (unsigned long long) n);
	mpiCheck(MPI_Bcast(*text, (int) n, MPI_BYTE, 0, MPI_COMM_WORLD));
	(*text)[n] = '\0';
	*len = n;
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
			nap(100000);		/* 0.1 ms */
	}
}

void *
comm_data_handle(void)
{
	return &data_comm;
}

/* ---------------------------------------------------------------------
 * A memory segment every data rank maps (MPI-3 shared windows)
 * --------------------------------------------------------------------- */

/*
 * The segment's barrier, at the start of rank 0's part: a count of the
 * ranks arrived and a generation the last one to arrive advances, on
 * cache lines of their own.  Sequentially consistent atomics order every
 * rank's stores before the barrier ahead of every rank's loads after it.
 */
typedef struct SharedBarrier
{
	atomic_int	arrived;
	char		pad1[60];
	atomic_int	generation;
	char		pad2[60];
} SharedBarrier;

struct CommShared
{
	MPI_Comm	node;			/* the data ranks, all on this host */
	MPI_Win		win;
	SharedBarrier *barrier;
	int			ranks;
};

/*
 * comm_shared_alloc
 *		When every data rank runs on this host: a segment of `bytes` from
 *		each rank (sizes may differ), mapped by all of them; base[r] gets
 *		rank r's part.  Collective over the data ranks; returns NULL on
 *		every rank when the ranks span hosts.
 */
CommShared *
comm_shared_alloc(size_t bytes, void **base)
{
	CommShared *sh;
	MPI_Info	info;
	int			nsize,
				all;
	void	   *mine;
	size_t		head = worker_rank == 0 ? sizeof(SharedBarrier) : 0;

	sh = malloc(sizeof(CommShared));
	if (sh == NULL)
		worker_fail("out of memory");
	/* key = data rank: rank r of the node communicator is data rank r */
	mpiCheck(MPI_Comm_split_type(data_comm, MPI_COMM_TYPE_SHARED, worker_rank,
								 MPI_INFO_NULL, &sh->node));
	MPI_Comm_size(sh->node, &nsize);
	all = nsize == worker_world;
	mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_LAND, data_comm));
	if (!all)
	{
		MPI_Comm_free(&sh->node);
		free(sh);
		return NULL;
	}
	/* each rank's part on its own pages: aligned, and no cache line shared */
	MPI_Info_create(&info);
	MPI_Info_set(info, "alloc_shared_noncontig", "true");
	mpiCheck(MPI_Win_allocate_shared((MPI_Aint) (head + bytes), 1, info, sh->node, &mine,
									 &sh->win));
	MPI_Info_free(&info);
	for (int r = 0; r < worker_world; r++)
	{
		MPI_Aint	size;
		int			disp;

		mpiCheck(MPI_Win_shared_query(sh->win, r, &size, &disp, &base[r]));
	}
	sh->barrier = (SharedBarrier *) base[0];
	base[0] = (char *) base[0] + sizeof(SharedBarrier);
	sh->ranks = worker_world;
	if (worker_rank == 0)
	{
		atomic_init(&sh->barrier->arrived, 0);
		atomic_init(&sh->barrier->generation, 0);
	}
	mpiCheck(MPI_Win_lock_all(MPI_MODE_NOCHECK, sh->win));
	mpiCheck(MPI_Barrier(sh->node));	/* the barrier is set up */
	return sh;
}

/*
 * comm_shared_fence
 *		A barrier of the data ranks: every rank's stores to the segment
 *		before it are seen by every rank's loads after it.  A waiting rank
 *		polls for spin_limit, then naps (see comm_init).
 */
void
comm_shared_fence(CommShared *sh)
{
	SharedBarrier *b = sh->barrier;
	int			gen = atomic_load(&b->generation);
	int64_t		start;

	if (atomic_fetch_add(&b->arrived, 1) == sh->ranks - 1)
	{
		/* the last to arrive lets the others go */
		atomic_store(&b->arrived, 0);
		atomic_fetch_add(&b->generation, 1);
		return;
	}
	start = dml_clock_ns();
	while (atomic_load(&b->generation) == gen)
	{
		if (dml_clock_ns() - start > spin_limit)
			nap(NAP_NS);
		else
			cpu_relax();
	}
}

void
comm_shared_free(CommShared *sh)
{
	if (sh == NULL)
		return;
	MPI_Win_unlock_all(sh->win);
	MPI_Win_free(&sh->win);
	MPI_Comm_free(&sh->node);
	free(sh);
}
