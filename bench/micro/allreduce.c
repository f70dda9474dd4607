/*-------------------------------------------------------------------------
 *
 * allreduce.c
 *	  MPI_Allreduce (float, sum) from 1 KB to 64 MB: time per call,
 *	  algorithm bandwidth and bus bandwidth, and a correctness check.
 *
 *	  mpirun -np N allreduce [-b MIN_BYTES] [-e MAX_BYTES] [-i ITERS] [-w WARMUP]
 *
 *	  Bandwidths as nccl-tests defines them (doc/PERFORMANCE.md there):
 *	  algbw = bytes / time, busbw = algbw * 2(n-1)/n, which is comparable
 *	  across rank counts and with the link's bandwidth.  The time is the
 *	  slowest rank's mean over the iterations.  Inputs are small integers,
 *	  so every partial sum is exact in float whatever order the library
 *	  adds in; the count of wrong elements is summed across ranks so that
 *	  every rank agrees on pass or fail.  Sizes with wrong elements make the
 *	  exit status 1.
 *
 *-------------------------------------------------------------------------
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AR_DEFAULT_MIN_BYTES	1024L
#define AR_DEFAULT_MAX_BYTES	(64L << 20)
#define AR_TARGET_BYTES			(1L << 30)	/* per size, scales iterations */
#define AR_MAX_SIZES			64

/* fail fast: name the rank, host, file and line, then end the job */
#define MPI_CHECK(call) \
	do { \
		int			rc_ = (call); \
		if (rc_ != MPI_SUCCESS) \
		{ \
			char		msg_[MPI_MAX_ERROR_STRING]; \
			int			len_ = 0; \
			char		host_[256] = "?"; \
			MPI_Error_string(rc_, msg_, &len_); \
			gethostname(host_, sizeof(host_)); \
			fprintf(stderr, "allreduce: rank %d on %s: %s:%d: %s failed: %s\n", \
					my_rank, host_, __FILE__, __LINE__, #call, msg_); \
			MPI_Abort(MPI_COMM_WORLD, 1); \
		} \
	} while (0)

static int	my_rank;

typedef struct ArResult
{
	long		bytes;
	int			iters;
	double		seconds;		/* per call, slowest rank */
	double		algbw;			/* GB/s */
	double		busbw;			/* GB/s */
	long long	wrong;			/* elements, all ranks */
} ArResult;

/* rank r's input at index i: a small integer, exact in float */
static inline float
input_value(int rank, long i)
{
	return (float) ((i * 7 + rank * 13) % 64);
}

/* the exact sum over nranks of input_value at index i */
static inline float
expected_value(int nranks, long i)
{
	long		s = 0;

	for (int r = 0; r < nranks; r++)
		s += (i * 7 + r * 13) % 64;
	return (float) s;
}

/* time and check MPI_Allreduce of bytes/4 floats */
static void
run_size(ArResult *res, long bytes, int iters, int warmup, int nranks,
		 float *send, float *recv)
{
	long		count = bytes / sizeof(float);
	double		t0,
				local,
				slowest;
	long long	wrong = 0;

	for (long i = 0; i < count; i++)
		send[i] = input_value(my_rank, i);
	memset(recv, 0xff, count * sizeof(float));	/* NaNs: stale data fails */

	for (int w = 0; w < warmup; w++)
		MPI_CHECK(MPI_Allreduce(send, recv, (int) count, MPI_FLOAT, MPI_SUM,
								MPI_COMM_WORLD));
	MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
	t0 = MPI_Wtime();
	for (int it = 0; it < iters; it++)
		MPI_CHECK(MPI_Allreduce(send, recv, (int) count, MPI_FLOAT, MPI_SUM,
								MPI_COMM_WORLD));
	local = (MPI_Wtime() - t0) / iters;
	MPI_CHECK(MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX,
							MPI_COMM_WORLD));

	/* check the last call's result */
	for (long i = 0; i < count; i++)
		if (recv[i] != expected_value(nranks, i))
			wrong++;
	MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM,
							MPI_COMM_WORLD));

	res->bytes = bytes;
	res->iters = iters;
	res->seconds = slowest;
	res->algbw = bytes / slowest / 1e9;
	res->busbw = res->algbw * 2.0 * (nranks - 1) / nranks;
	res->wrong = wrong;
}

/* parse a byte count with an optional K, M or G suffix (powers of 1024) */
static long
parse_bytes(const char *s)
{
	char	   *end;
	long		v = strtol(s, &end, 10);

	if (*end == 'K' || *end == 'k')
		v <<= 10, end++;
	else if (*end == 'M' || *end == 'm')
		v <<= 20, end++;
	else if (*end == 'G' || *end == 'g')
		v <<= 30, end++;
	return (*end == '\0' && v > 0) ? v : -1;
}

/* parse options, run each size, report on rank 0 */
int
main(int argc, char **argv)
{
	int			nranks;
	long		min_bytes = AR_DEFAULT_MIN_BYTES;
	long		max_bytes = AR_DEFAULT_MAX_BYTES;
	int			fixed_iters = 0;
	int			warmup = 5;
	float	   *send,
			   *recv;
	ArResult	results[AR_MAX_SIZES];
	int			nresults = 0;
	long long	total_wrong = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "-b") == 0 && i + 1 < argc)
			min_bytes = parse_bytes(argv[++i]);
		else if (strcmp(argv[i], "-e") == 0 && i + 1 < argc)
			max_bytes = parse_bytes(argv[++i]);
		else if (strcmp(argv[i], "-i") == 0 && i + 1 < argc)
			fixed_iters = atoi(argv[++i]);
		else if (strcmp(argv[i], "-w") == 0 && i + 1 < argc)
			warmup = atoi(argv[++i]);
		else
			min_bytes = -1;
	}
	if (min_bytes < (long) sizeof(float) || max_bytes < min_bytes ||
		max_bytes / (long) sizeof(float) > 0x7fffffffL || fixed_iters < 0 || warmup < 0)
	{
		if (my_rank == 0)
			fprintf(stderr, "usage: mpirun -np N %s [-b MIN_BYTES] [-e MAX_BYTES] "
					"[-i ITERS] [-w WARMUP]   (sizes take K, M, G suffixes)\n", argv[0]);
		MPI_Finalize();
		return 2;
	}

	send = malloc(max_bytes);
	recv = malloc(max_bytes);
	if (send == NULL || recv == NULL)
	{
		fprintf(stderr, "allreduce: rank %d: out of memory for 2 x %ld bytes\n",
				my_rank, max_bytes);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}

	for (long bytes = min_bytes; bytes <= max_bytes && nresults < AR_MAX_SIZES;
		 bytes *= 2)
	{
		int			iters = fixed_iters;

		/* enough calls to move about AR_TARGET_BYTES, between 5 and 1000 */
		if (iters == 0)
		{
			long		want = AR_TARGET_BYTES / bytes;

			iters = want < 5 ? 5 : want > 1000 ? 1000 : (int) want;
		}
		run_size(&results[nresults], bytes, iters, warmup, nranks, send, recv);
		total_wrong += results[nresults].wrong;
		nresults++;
	}

	if (my_rank == 0)
	{
		printf("allreduce: MPI_Allreduce float sum, %d ranks; busbw = algbw * 2(n-1)/n\n",
			   nranks);
		printf("%12s %12s %7s %12s %10s %10s %8s\n", "bytes", "floats", "iters",
			   "time_us", "algbw GB/s", "busbw GB/s", "wrong");
		for (int i = 0; i < nresults; i++)
			printf("%12ld %12ld %7d %12.2f %10.3f %10.3f %8lld\n", results[i].bytes,
				   results[i].bytes / (long) sizeof(float), results[i].iters,
				   results[i].seconds * 1e6, results[i].algbw, results[i].busbw,
				   results[i].wrong);
		printf("%s: %lld wrong elements\n", total_wrong ? "FAILED" : "passed", total_wrong);
		for (int i = 0; i < nresults; i++)
			printf("{\"bench\": \"allreduce\", \"ranks\": %d, \"bytes\": %ld, "
				   "\"iters\": %d, \"time_s\": %.9f, \"algbw_gbs\": %.4f, "
				   "\"busbw_gbs\": %.4f, \"wrong\": %lld}\n",
				   nranks, results[i].bytes, results[i].iters, results[i].seconds,
				   results[i].algbw, results[i].busbw, results[i].wrong);
	}
	free(send);
	free(recv);
	MPI_Finalize();
	return total_wrong ? 1 : 0;
}
