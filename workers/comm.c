/*-------------------------------------------------------------------------
 *
 * comm.c
 *	  MPI for the training loop: in-place sum all-reduce of gradients and
 *	  statistics, with every call checked and its volume counted.
 *
 *-------------------------------------------------------------------------
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <limits.h>
#include <linux/futex.h>
#include <mpi.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "comm.h"
#include "half.h"
#include "worker.h"

static double sync_bytes = 0;	/* collectives: the same figure on every data rank */
static double sync_across = 0;	/* ... of which crossed between hosts */
static double p2p_local[2];		/* point-to-point bytes this rank sent: within, across */
static double p2p_job[2];		/* all ranks' point-to-point bytes, as of the last reduce */
static MPI_Comm data_comm = MPI_COMM_WORLD;	/* the ranks that hold data */

/* where the ranks run (comm_split_roles) */
static MPI_Comm host_comm = MPI_COMM_NULL;	/* the data ranks on this host */
static MPI_Comm leader_comm = MPI_COMM_NULL;	/* local rank 0 of every host */
static MPI_Comm peer_comm = MPI_COMM_NULL;	/* this local rank of every host, when all have as many */
static int	host_count = 1;		/* hosts of the data ranks */
static int	local_rank = 0;
static int	local_size = 1;
static int *world_host = NULL;	/* (world) host of each world rank: its lowest world rank */

/* waiting: poll this long, then nap NAP_NS between polls */
#define SPIN_OWN_NS		2000000		/* a core per rank: 2 ms */
#define SPIN_SHARED_NS	20000		/* ranks share cores: 20 us */
#define NAP_NS			50000
static int64_t spin_limit = SPIN_OWN_NS;
static bool cores_shared = false;	/* more ranks on this machine than its CPUs */
static int	host_oversubscribed(void);
static void find_hosts(bool is_server);
static void find_machine(void);

int			world_rank = 0;
int			world_size = 1;
int			server_count = 0;

#define mpiCheck(call) \
	do { int rc_ = (call); \
		 if (rc_ != MPI_SUCCESS) { \
			 char msg_[MPI_MAX_ERROR_STRING]; int len_ = 0; \
			 MPI_Error_string(rc_, msg_, &len_); \
			 worker_fail("MPI call %s failed: %s", #call, msg_); } } while (0)

/*
 * TCP_NODELAY on every TCP socket the process holds after MPI_Init.  The
 * one that matters is the PMIx client's connection to mpirun (or orted),
 * which Open MPI 4.1's PMIx opens without it: at MPI_Finalize the rank
 * sends a few small messages back to back, Nagle's algorithm holds the
 * second until the first is acknowledged, and the daemon acknowledges
 * late (delayed ACK), so every job's end waited 40 ms on it (measured:
 * MPI_Finalize 45 ms, 2.5 ms with this).  Open MPI's own TCP links set it
 * themselves; the worker opens its other sockets later.
 */
static void
tcp_nodelay_all(void)
{
	DIR		   *d = opendir("/proc/self/fd");	/* the open descriptors only */
	struct dirent *e;

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL)
	{
		int			fd = atoi(e->d_name);
		struct sockaddr_storage ss;
		socklen_t	len = sizeof(ss);
		int			type;
		socklen_t	tlen = sizeof(type);
		int			one = 1;

		if (fd < 3 || fd == dirfd(d) ||
			getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) != 0 || type != SOCK_STREAM)
			continue;
		if (getsockname(fd, (struct sockaddr *) &ss, &len) != 0 ||
			(ss.ss_family != AF_INET && ss.ss_family != AF_INET6))
			continue;
		(void) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	closedir(d);
}

/* MPI up, errors returned (not fatal) so we can report them */
void
comm_init(int *argc, char ***argv)
{
	MPI_Init(argc, argv);
	tcp_nodelay_all();
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &world_size);
	worker_rank = world_rank;
	worker_world = world_size;
	find_hosts(false);
	find_machine();
}

/*
 * This kernel's boot id, hashed (FNV-1a): the same for every process on
 * one machine, whatever its namespaces (containers, the test suite's
 * namespace hosts), and different on another machine.  0 when unreadable.
 */
static uint64_t
machine_id(void)
{
	FILE	   *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	char		line[64];
	uint64_t	h = 14695981039346656037ULL;

	if (f == NULL)
		return 0;
	if (fgets(line, sizeof(line), f) == NULL)
		line[0] = '\0';
	fclose(f);
	if (line[0] == '\0')
		return 0;
	for (const char *c = line; *c && *c != '\n'; c++)
		h = (h ^ (unsigned char) *c) * 1099511628211ULL;
	return h | 1;
}

/*
 * find_machine
 *		Whether the job's ranks on this machine outnumber the CPUs this
 *		process may run on, which sets how long a waiting rank polls
 *		(spin_limit).  Open MPI's host (a network namespace, a container)
 *		is not always a machine: the three namespace hosts of the tests
 *		share this machine's cores, and each of their ranks that polled
 *		2 ms in a fence or flat out in a blocking all-reduce took a core
 *		from the rank the step waited for (a 3-parameter model's step took
 *		19 ms across them, against 0.35 ms with all ranks on one host).
 *		So the ranks count each other by the kernel's boot id; where that
 *		cannot be read, by Open MPI's count of ranks on this host.
 *		Collective over the world.
 */
static void
find_machine(void)
{
	uint64_t	id = machine_id();
	uint64_t   *all = malloc(sizeof(uint64_t) * world_size);
	int			same = 0;
	cpu_set_t	set;

	if (all == NULL)
		worker_fail("out of memory");
	mpiCheck(MPI_Allgather(&id, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD));
	for (int r = 0; r < world_size; r++)
		same += all[r] == id;
	free(all);
	if (id == 0)
		cores_shared = host_oversubscribed();
	else
		cores_shared = sched_getaffinity(0, sizeof(set), &set) == 0 && same > CPU_COUNT(&set);
	spin_limit = cores_shared ? SPIN_SHARED_NS : SPIN_OWN_NS;
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

/*
 * A wait that outlasts a whole spin_limit of polling, where each rank has
 * a core of its own, means the rank it waits for was not running: another
 * process held that core.  Where that keeps happening (a busy machine, the
 * PostgreSQL backends serving a read), polling on only takes the core that
 * rank could be moved to: a 2-worker logistic epoch on 1M x 20 took 6.9 s
 * beside one busy process on 2 cores, against 0.016 s without it.  So
 * after LONG_WAITS such waits within LONG_WINDOW_NS, waits poll for
 * SPIN_SHARED_NS only, then sleep (the fence on its futex, message waits
 * in naps): 0.17 s.  They go back to the full spin BACKOFF_NS after the
 * last long wait.
 *
 * One long wait now and then is not that: a virtual machine's vCPU or a
 * kernel thread took the core for a moment (7-18 times a second a rank
 * in a 2-worker MLP on a 2-core KVM guest).  When a single long wait
 * switched to the short spin for the next 256 waits, a batch-128 MLP's
 * ranks slept in a third of their fences and were off their cores 5-9%
 * of the time.
 */
#define LONG_WAITS		3
#define LONG_WINDOW_NS	20000000	/* 20 ms */
#define BACKOFF_NS		50000000	/* 50 ms */
static int64_t long_at[LONG_WAITS - 1];	/* when the last long waits ended, oldest first */
static int64_t backoff_until = 0;

/* how long a wait that began at start polls before it sleeps */
static inline int64_t
spin_budget(int64_t start)
{
	return start < backoff_until ? SPIN_SHARED_NS : spin_limit;
}

/* a wait that began at start has ended */
static inline void
spin_ended(int64_t start)
{
	int64_t		now = dml_clock_ns();

	if (spin_limit <= SPIN_SHARED_NS || now - start <= spin_limit)
		return;
	if (start < backoff_until || now - long_at[0] < LONG_WINDOW_NS)
		backoff_until = now + BACKOFF_NS;
	memmove(long_at, long_at + 1, sizeof(long_at) - sizeof(long_at[0]));
	long_at[LONG_WAITS - 2] = now;
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

	if (now - start > spin_budget(start) && now - last_active > ACTIVE_NS)
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
	spin_ended(start);
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
	spin_ended(start);
	last_active = dml_clock_ns();
}

/*
 * as MPI_Waitall for the ring below: poll for spin_limit, then nap between
 * polls (each poll also moves Open MPI's TCP traffic on)
 */
static void
wait_ring(int n, MPI_Request *req)
{
	int64_t		start = dml_clock_ns();
	int			done = 0;

	for (;;)
	{
		mpiCheck(MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE));
		if (done)
			break;
		if (dml_clock_ns() - start > spin_budget(start))
			nap(NAP_NS);
		else
			cpu_relax();
	}
	spin_ended(start);
}

#define RING_TAG	31
#define RING_MAX	(1u << 30)	/* floats of one message */
#define RING_FROM	16384		/* floats: below, with cores of their own, MPI_Allreduce */

/* dst[0..n) += src[0..n), for the ring's reduce-scatter */
typedef void (*RingAdd) (void *dst, const void *src, int n);

static void
add_float(void *dst, const void *src, int n)
{
	float	   *d = dst;
	const float *a = src;

	for (int i = 0; i < n; i++)
		d[i] += a[i];
}

static void
add_half(void *dst, const void *src, int n)
{
	half_add(dst, src, (size_t) n);
}

/* elementwise sum of IEEE binary16 values, each partial sum rounded to binary16 */
static void
half_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
	(void) type;
	half_add(inout, in, (size_t) *len);
}

static MPI_Op
half_sum_op(void)
{
	static MPI_Op op = MPI_OP_NULL;

	if (op == MPI_OP_NULL)
		mpiCheck(MPI_Op_create(half_sum, 1, &op));
	return op;
}

/*
 * ring_allreduce
 *		Sum of buf (n values of esize bytes, MPI type `type`, added by
 *		`add`, or by `op` where Open MPI sums) over the ranks of comm, in
 *		place, as a ring: P - 1 steps of reduce-scatter (each rank passes a
 *		1/P part of the buffer to the next rank, which adds it into its
 *		own), then P - 1 of all-gather (the finished parts go round).  Each
 *		rank sends 2 (P - 1) / P of the buffer, the least an all-reduce
 *		can, and every rank ends with the same bits, since each part is
 *		summed once, on its way round, and then copied.  A small buffer on
 *		ranks with cores of their own goes to Open MPI's MPI_Allreduce
 *		instead, whose trees take fewer messages than the ring's 2 (P - 1).
 *
 *		Open MPI's own choices were worse here: the blocking all-reduce
 *		polls flat out for as long as it waits, and the nonblocking one
 *		(libnbc) takes a binomial tree for fewer than 4 ranks, whose root
 *		receives and sends the whole buffer twice (1.5x the ring's bytes on
 *		its link).  Nonblocking messages let a waiting rank nap
 *		(wait_ring).
 */
static void
ring_allreduce(void *buf, size_t n, size_t esize, MPI_Datatype type, RingAdd add, MPI_Op op,
			   MPI_Comm comm)
{
	static char *tmp = NULL;
	static size_t tmp_bytes = 0;
	char	   *b = buf;
	int			P,
				r;

	MPI_Comm_size(comm, &P);
	MPI_Comm_rank(comm, &r);
	if (P == 1 || n == 0)
		return;
	if (!cores_shared && n < RING_FROM)
	{
		/* latency-bound, and polling costs no other rank its core */
		mpiCheck(MPI_Allreduce(MPI_IN_PLACE, buf, (int) n, type, op, comm));
		return;
	}
	if ((n + P - 1) / P > RING_MAX)
	{
		/* parts too large for one message: the buffer in pieces */
		size_t		piece = (size_t) RING_MAX * P;

		for (size_t off = 0; off < n; off += piece)
			ring_allreduce(b + off * esize, n - off < piece ? n - off : piece, esize, type, add,
						   op, comm);
		return;
	}
	if (tmp_bytes < esize * ((n + P - 1) / P))
	{
		free(tmp);
		tmp_bytes = esize * ((n + P - 1) / P);
		tmp = malloc(tmp_bytes);
		if (tmp == NULL)
			worker_fail("out of memory for an all-reduce of %zu values", n);
	}
	{
		int			right = (r + 1) % P,
					left = (r + P - 1) % P;

#define PART_LO(c)	(n * (size_t) (c) / (size_t) P)
#define PART_N(c)	((int) (PART_LO((c) + 1) - PART_LO(c)))
		for (int s = 0; s < P - 1; s++)
		{
			int			out = (r - s + P) % P,
						in = (r - s - 1 + 2 * P) % P;
			MPI_Request req[2];

			mpiCheck(MPI_Irecv(tmp, PART_N(in), type, left, RING_TAG, comm, &req[0]));
			mpiCheck(MPI_Isend(b + esize * PART_LO(out), PART_N(out), type, right, RING_TAG,
							   comm, &req[1]));
			wait_ring(2, req);
			add(b + esize * PART_LO(in), tmp, PART_N(in));
		}
		for (int s = 0; s < P - 1; s++)
		{
			int			out = (r + 1 - s + P) % P,
						in = (r - s + P) % P;
			MPI_Request req[2];

			mpiCheck(MPI_Irecv(b + esize * PART_LO(in), PART_N(in), type, left, RING_TAG, comm,
							   &req[0]));
			mpiCheck(MPI_Isend(b + esize * PART_LO(out), PART_N(out), type, right, RING_TAG,
							   comm, &req[1]));
			wait_ring(2, req);
		}
#undef PART_LO
#undef PART_N
	}
}

static void
ring_allreduce_float(float *buf, size_t n, MPI_Comm comm)
{
	ring_allreduce(buf, n, sizeof(float), MPI_FLOAT, add_float, MPI_SUM, comm);
}

/*
 * find_hosts
 *		Which ranks share a host: every world rank's host (named by the
 *		lowest world rank on it), and for the data ranks a communicator of
 *		those on this host (ordered by data rank) and one of a leader per
 *		host (local rank 0).  Collective over the world.
 */
static void
find_hosts(bool is_server)
{
	MPI_Comm	node;
	int			first;

	if (host_comm != MPI_COMM_NULL)
		MPI_Comm_free(&host_comm);
	if (leader_comm != MPI_COMM_NULL)
		MPI_Comm_free(&leader_comm);
	if (peer_comm != MPI_COMM_NULL)
		MPI_Comm_free(&peer_comm);
	free(world_host);
	world_host = NULL;
	host_count = 1;
	local_rank = 0;
	local_size = 1;
	mpiCheck(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank,
								 MPI_INFO_NULL, &node));
	first = world_rank;
	mpiCheck(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, node));
	MPI_Comm_free(&node);
	world_host = malloc(sizeof(int) * world_size);
	if (world_host == NULL)
		worker_fail("out of memory");
	mpiCheck(MPI_Allgather(&first, 1, MPI_INT, world_host, 1, MPI_INT, MPI_COMM_WORLD));
	if (is_server)
		return;
	mpiCheck(MPI_Comm_split_type(data_comm, MPI_COMM_TYPE_SHARED, worker_rank,
								 MPI_INFO_NULL, &host_comm));
	MPI_Comm_rank(host_comm, &local_rank);
	MPI_Comm_size(host_comm, &local_size);
	mpiCheck(MPI_Comm_split(data_comm, local_rank == 0 ? 0 : MPI_UNDEFINED, worker_rank,
							&leader_comm));
	host_count = local_rank == 0 ? 0 : 1;
	if (local_rank == 0)
		MPI_Comm_size(leader_comm, &host_count);
	mpiCheck(MPI_Bcast(&host_count, 1, MPI_INT, 0, host_comm));
	{
		/* the same ranks on every host: local rank l of each host are peers */
		int			sizes[2] = {local_size, -local_size};

		mpiCheck(MPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_INT, MPI_MAX, data_comm));
		if (host_count > 1 && sizes[0] == -sizes[1])
			mpiCheck(MPI_Comm_split(data_comm, local_rank, worker_rank, &peer_comm));
	}
}

/* whether every host runs as many data ranks (comm_peers_allreduce_float) */
bool
comm_hosts_even(void)
{
	return peer_comm != MPI_COMM_NULL;
}

/*
 * sum of buf over this local rank of every host, in place (comm_hosts_even
 * only): each host's ranks all-reduce their own part of a buffer with
 * their peers, side by side
 */
void
comm_peers_allreduce_float(float *buf, size_t n)
{
	ring_allreduce_float(buf, n, peer_comm);
}

int
comm_hosts(void)
{
	return host_count;
}

int
comm_local_rank(void)
{
	return local_rank;
}

int
comm_local_size(void)
{
	return local_size;
}

/* whether world rank r runs on another host than this rank */
bool
comm_elsewhere(int r)
{
	return world_host != NULL && r >= 0 && r < world_size && world_host[r] != world_host[world_rank];
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
	if (servers > 0)
	{
		/* the data ranks are fewer than the world: their hosts again */
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
		find_hosts(is_server);
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

/*
 * count what a ring all-reduce of bytes over all data ranks would put on
 * the wire: each rank sends 2 (W - 1) / W of the buffer to the next; with
 * each host's ranks consecutive, the hosts' last ranks send across
 */
static void
count(size_t bytes)
{
	double		per_rank;

	if (worker_world <= 1)
		return;
	per_rank = 2.0 * (worker_world - 1) / worker_world * (double) bytes;
	sync_bytes += per_rank * worker_world;
	if (host_count > 1)
		sync_across += per_rank * host_count;
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

/* sum of fp16 values over the data ranks, in place; counted at 2 bytes a value */
void
comm_allreduce_half(uint16_t *buf, size_t n)
{
	MPI_Op		op;

	if (worker_world == 1)
		return;
	op = half_sum_op();
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
	if (host_count > 1)
		sync_across += (double) host_count * (worker_world - 1) * (double) bytes;
}

/* send n floats to data rank dest while receiving n from data rank src */
void
comm_sendrecv_float(const float *send, float *recv, size_t n, int dest, int src)
{
	if (n > (1u << 30))
		worker_fail("exchange of %zu values is too large", n);
	mpiCheck(MPI_Sendrecv(send, (int) n, MPI_FLOAT, dest, 7, recv, (int) n, MPI_FLOAT, src, 7,
						  data_comm, MPI_STATUS_IGNORE));
	/* data rank dest is world rank dest: servers come after the data ranks */
	p2p_local[comm_elsewhere(dest)] += (double) n * sizeof(float);
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

/* point-to-point bytes this rank put on the wire to world rank dest */
void
comm_count_p2p(double bytes, int dest)
{
	p2p_local[comm_elsewhere(dest)] += bytes;
}

/*
 * count a hierarchical all-reduce of a buffer of `within` bytes: within
 * each host as a ring of its ranks would move it, 2 (L - 1) times the
 * buffer; across hosts what the hosts put on the network, all together,
 * `across` bytes (uncompressed, the leaders' ring: 2 (H - 1) times the
 * buffer)
 */
void
comm_count_hierarchical(double within, double across)
{
	sync_bytes += 2.0 * (worker_world - host_count) * within + across;
	sync_across += across;
}

/*
 * sum of buf over the hosts' leaders (local rank 0 only), in place, by the
 * ring of ring_allreduce_float.  (Open MPI's nonblocking all-reduce,
 * waited for in naps, had made the MLP's step 1.3x slower on the
 * namespace hosts: for 3 ranks it is a binomial tree; its blocking one
 * polls flat out.)
 */
void
comm_leaders_allreduce_float(float *buf, size_t n)
{
	if (host_count == 1 || local_rank != 0)
		return;
	ring_allreduce_float(buf, n, leader_comm);
}

/*
 * Across hosts, for the hierarchical all-reduce's compressed step: the
 * ranks that exchange a host's sum with the other hosts are the peers
 * (each local rank its own range) where every host runs as many ranks,
 * else the leaders (the whole sum).  They wait in naps, as the ring does.
 */
static MPI_Comm
cross_comm(void)
{
	return peer_comm != MPI_COMM_NULL ? peer_comm : leader_comm;
}

/* whether this rank exchanges (part of) its host's sum with the other hosts */
bool
comm_cross_member(void)
{
	return host_count > 1 && (peer_comm != MPI_COMM_NULL || local_rank == 0);
}

/* maximum of buf[0..n) over the cross-host ranks (comm_cross_member only), in place */
void
comm_cross_max_float(float *buf, int n)
{
	MPI_Request req;

	mpiCheck(MPI_Iallreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_MAX, cross_comm(), &req));
	wait_ring(1, &req);
}

/* sum of n binary16 values over the cross-host ranks, in place, by the ring */
void
comm_cross_allreduce_half(uint16_t *buf, size_t n)
{
	ring_allreduce(buf, n, sizeof(uint16_t), MPI_UINT16_T, add_half, half_sum_op(), cross_comm());
}

/*
 * bytes from every cross-host rank into recv (host h's at h * bytes), as a
 * ring: H - 1 steps, each passing on the block received in the step before
 */
void
comm_cross_allgather_bytes(const void *send, size_t bytes, void *recv)
{
	MPI_Comm	comm = cross_comm();
	char	   *out = recv;
	int			P,
				r;

	MPI_Comm_size(comm, &P);
	MPI_Comm_rank(comm, &r);
	if (bytes > INT_MAX)
		worker_fail("all-gather of %zu bytes per rank is too large", bytes);
	memcpy(out + (size_t) r * bytes, send, bytes);
	for (int s = 0; s < P - 1; s++)
	{
		int			give = (r - s + P) % P,
					take = (r - s - 1 + P) % P;
		MPI_Request req[2];

		mpiCheck(MPI_Irecv(out + (size_t) take * bytes, (int) bytes, MPI_BYTE, (r + P - 1) % P,
						   RING_TAG, comm, &req[0]));
		mpiCheck(MPI_Isend(out + (size_t) give * bytes, (int) bytes, MPI_BYTE, (r + 1) % P,
						   RING_TAG, comm, &req[1]));
		wait_ring(2, req);
	}
}

/*
 * comm_reduce_p2p
 *		Every data rank learns the point-to-point bytes of all data ranks,
 *		plus extra (the servers' figure, known to every data rank alike).
 *		Collective over the data ranks.
 */
void
comm_reduce_p2p(double extra, double extra_across)
{
	double		v[2] = {p2p_local[0], p2p_local[1]};

	if (worker_world > 1)
		mpiCheck(MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_SUM, data_comm));
	p2p_job[0] = v[0] + extra - extra_across;
	p2p_job[1] = v[1] + extra_across;
}

void
comm_job_bytes_reset(void)
{
	sync_bytes = sync_across = 0;
	p2p_local[0] = p2p_local[1] = 0;
	p2p_job[0] = p2p_job[1] = 0;
}

double
comm_job_bytes(void)
{
	return sync_bytes + p2p_job[0] + p2p_job[1];
}

double
comm_job_bytes_across(void)
{
	return sync_across + p2p_job[1];
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
	atomic_int	sleepers;		/* ranks asleep on generation (a futex) */
	char		pad2[56];
} SharedBarrier;

/*
 * After it, a step's shared work (comm_shared_take, comm_shared_publish,
 * comm_shared_await): each rank's list of items for alternate steps, as
 * the items [front, back) of it not yet taken, in one word; a pulse each
 * publication advances, which waiting ranks sleep on; and each rank's
 * progress.  Each on a cache line of its own.
 */
typedef struct SharedLine
{
	_Atomic int64_t value;
	char		pad[56];
} SharedLine;

typedef struct SharedWork
{
	atomic_int	pulse;
	atomic_int	sleepers;		/* ranks asleep on pulse (a futex) */
	char		pad[56];
	SharedLine	lines[];		/* (ranks) progress, then (2 ranks) lists by parity */
} SharedWork;

#define PROGRESS(w, r)	(&(w)->lines[r].value)
#define LIST(sh, which, r)	(&(sh)->work->lines[(sh)->ranks * (1 + (which)) + (r)].value)

struct CommShared
{
	MPI_Win		win;
	SharedBarrier *barrier;
	SharedWork *work;
	int			ranks;
};

/*
 * comm_shared_alloc
 *		A segment mapped by the data ranks on this host: `bytes` from each
 *		(sizes may differ), base[l] gets local rank l's part (local ranks
 *		follow data ranks).  Collective over the data ranks on this host.
 */
CommShared *
comm_shared_alloc(size_t bytes, void **base)
{
	CommShared *sh;
	MPI_Info	info;
	void	   *mine;
	size_t		work = sizeof(SharedWork) + sizeof(SharedLine) * 3 * (size_t) local_size,
				head = local_rank == 0 ? sizeof(SharedBarrier) + work : 0;

	sh = malloc(sizeof(CommShared));
	if (sh == NULL)
		worker_fail("out of memory");
	/* each rank's part on its own pages: aligned, and no cache line shared */
	MPI_Info_create(&info);
	MPI_Info_set(info, "alloc_shared_noncontig", "true");
	mpiCheck(MPI_Win_allocate_shared((MPI_Aint) (head + bytes), 1, info, host_comm, &mine,
									 &sh->win));
	MPI_Info_free(&info);
	for (int r = 0; r < local_size; r++)
	{
		MPI_Aint	size;
		int			disp;

		mpiCheck(MPI_Win_shared_query(sh->win, r, &size, &disp, &base[r]));
	}
	sh->barrier = (SharedBarrier *) base[0];
	sh->work = (SharedWork *) ((char *) base[0] + sizeof(SharedBarrier));
	base[0] = (char *) base[0] + sizeof(SharedBarrier) + work;
	sh->ranks = local_size;
	if (local_rank == 0)
	{
		atomic_init(&sh->barrier->arrived, 0);
		atomic_init(&sh->barrier->generation, 0);
		atomic_init(&sh->barrier->sleepers, 0);
		atomic_init(&sh->work->pulse, 0);
		atomic_init(&sh->work->sleepers, 0);
		for (int i = 0; i < 3 * local_size; i++)
			atomic_init(&sh->work->lines[i].value, 0);
	}
	mpiCheck(MPI_Win_lock_all(MPI_MODE_NOCHECK, sh->win));
	mpiCheck(MPI_Barrier(host_comm));	/* the barrier is set up */
	return sh;
}

/*
 * The fence's sleep: the futex on the barrier's generation word, shared
 * between the host's ranks (the segment is one shared mapping).  A rank
 * that stopped polling sleeps until the last rank's arrival wakes it,
 * where a nap loop overslept each wait by up to a nap and the timer's
 * slack (about 100 us a fence).
 */
#define FENCE_SLEEP_NS	1000000	/* at most 1 ms, then the generation is read again */

static void
futex_wait(atomic_int *word, int val, long ns)
{
#ifdef SYS_futex
	struct timespec ts = {0, ns};

	(void) syscall(SYS_futex, (int *) word, FUTEX_WAIT, val, &ts, NULL, 0);
#else
	nap(NAP_NS);
#endif
}

static void
futex_wake_all(atomic_int *word)
{
#ifdef SYS_futex
	(void) syscall(SYS_futex, (int *) word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
#endif
}

/*
 * Wait until done(arg): polls for spin_budget(), then sleeps on the futex
 * word, which whoever makes done true advances after doing so, waking the
 * sleepers it counts (shared_wake).  A sleeper is counted before it checks
 * again, so a waker that did not see it came before that check (every
 * atomic here is sequentially consistent) or before the futex's own check
 * of the word; the timeout is a safety net.
 */
static inline void
shared_wait(atomic_int *word, atomic_int *sleepers, bool (*done) (const void *),
			const void *arg)
{
	int64_t		start = dml_clock_ns();

	for (;;)
	{
		int			seen = atomic_load(word);

		if (done(arg))
			break;
		if (dml_clock_ns() - start > spin_budget(start))
		{
			atomic_fetch_add(sleepers, 1);
			if (atomic_load(word) == seen && !done(arg))
				futex_wait(word, seen, FENCE_SLEEP_NS);
			atomic_fetch_sub(sleepers, 1);
		}
		else
			cpu_relax();
	}
	spin_ended(start);
}

/* word advanced, after what shared_wait's done() reads: its sleepers woken */
static inline void
shared_wake(atomic_int *word, atomic_int *sleepers)
{
	atomic_fetch_add(word, 1);
	if (atomic_load(sleepers) > 0)
		futex_wake_all(word);
}

/* the fence's wait: until the barrier's generation has moved on from *arg's */
typedef struct FenceWait
{
	SharedBarrier *b;
	int			gen;
} FenceWait;

static bool
fence_passed(const void *arg)
{
	const FenceWait *f = arg;

	return atomic_load(&f->b->generation) != f->gen;
}

/*
 * comm_shared_fence
 *		A barrier of the data ranks on this host: every rank's stores to the segment
 *		before it are seen by every rank's loads after it.  A waiting rank
 *		polls for spin_budget(), then sleeps on the futex.
 */
void
comm_shared_fence(CommShared *sh)
{
	SharedBarrier *b = sh->barrier;
	FenceWait	f = {b, atomic_load(&b->generation)};

	if (atomic_fetch_add(&b->arrived, 1) == sh->ranks - 1)
	{
		/* the last to arrive lets the others go, and wakes those asleep */
		atomic_store(&b->arrived, 0);
		shared_wake(&b->generation, &b->sleepers);
		return;
	}
	shared_wait(&b->generation, &b->sleepers, fence_passed, &f);
}

/*
 * comm_shared_list
 *		Rank `rank`'s list of parity `which` (0 or 1): items 0 .. n - 1, none
 *		taken.  Only while no rank takes from it until a fence of the
 *		ranks has passed: for example, every step taking from the lists of
 *		its parity, each rank sets its list of the other parity for the
 *		next step.
 */
void
comm_shared_list(CommShared *sh, int which, int rank, int n)
{
	atomic_store(LIST(sh, which, rank), (int64_t) n << 32);
}

/*
 * comm_shared_peek
 *		The item the list's front (or back) would give now, or -1 when the
 *		list is empty.  Another rank may take it first.
 */
int
comm_shared_peek(CommShared *sh, int which, int rank, bool back)
{
	int64_t		v = atomic_load(LIST(sh, which, rank));
	int			f = (int) (v & 0xffffffff),
				b = (int) (v >> 32);

	return f >= b ? -1 : back ? b - 1 : f;
}

/*
 * comm_shared_take
 *		The list's front (or back) item, taken: every item of the list goes
 *		to one rank once.  -1 when the list is empty.
 */
int
comm_shared_take(CommShared *sh, int which, int rank, bool back)
{
	_Atomic int64_t *word = LIST(sh, which, rank);
	int64_t		v = atomic_load(word);

	for (;;)
	{
		int			f = (int) (v & 0xffffffff),
					b = (int) (v >> 32);

		if (f >= b)
			return -1;
		if (back)
		{
			if (atomic_compare_exchange_weak(word, &v, ((int64_t) (b - 1) << 32) | f))
				return b - 1;
		}
		else if (atomic_compare_exchange_weak(word, &v, ((int64_t) b << 32) | (f + 1)))
			return f;
	}
}

/*
 * comm_shared_publish
 *		This rank's progress: value, never less than its last one until
 *		comm_shared_progress_reset.  Its stores to the segment before it
 *		are seen by the loads of a rank whose comm_shared_await saw it.
 */
void
comm_shared_publish(CommShared *sh, int64_t value)
{
	SharedWork *w = sh->work;

	atomic_store(PROGRESS(w, local_rank), value);
	shared_wake(&w->pulse, &w->sleepers);
}

/* this rank's progress back to 0 (then a fence, before anyone publishes) */
void
comm_shared_progress_reset(CommShared *sh)
{
	atomic_store(PROGRESS(sh->work, local_rank), 0);
}

/* whether every rank's progress is at least value */
static bool
progress_reached(SharedWork *w, int ranks, int64_t value)
{
	for (int r = 0; r < ranks; r++)
		if (atomic_load(PROGRESS(w, r)) < value)
			return false;
	return true;
}

/* whether every rank's progress is at least value now */
bool
comm_shared_reached(CommShared *sh, int64_t value)
{
	return progress_reached(sh->work, sh->ranks, value);
}

/* the await's wait: until every rank's progress is at least *arg's value */
typedef struct AwaitWait
{
	CommShared *sh;
	int64_t		value;
} AwaitWait;

static bool
progress_passed(const void *arg)
{
	const AwaitWait *a = arg;

	return progress_reached(a->sh->work, a->sh->ranks, a->value);
}

/*
 * comm_shared_await
 *		Until every rank's progress is at least value: polls for
 *		spin_budget(), then sleeps on the pulse, as the fence does.
 */
void
comm_shared_await(CommShared *sh, int64_t value)
{
	AwaitWait	a = {sh, value};

	if (!progress_passed(&a))
		shared_wait(&sh->work->pulse, &sh->work->sleepers, progress_passed, &a);
}

void
comm_shared_free(CommShared *sh)
{
	if (sh == NULL)
		return;
	MPI_Win_unlock_all(sh->win);
	MPI_Win_free(&sh->win);
	free(sh);
}
