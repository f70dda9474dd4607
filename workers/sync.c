/*-------------------------------------------------------------------------
 *
 * sync.c
 *	  The data ranks' side of every sync mode (see sync.h): all-reduce with
 *	  optional compression, the parameter-server client (push a gradient,
 *	  get the weights back, by key range, nonblocking), gossip and model
 *	  averaging.  The servers' side is server.c.
 *
 * Gradient scaling.  allreduce, ps and ssp scale each rank's gradient by
 * 1/(rows of the global step), so the sum over ranks is the gradient of
 * the global minibatch's mean loss and ps equals allreduce.  gossip and
 * average scale by W/(rows of the global step): a replica's local step is
 * then its own minibatch's mean (when slices are balanced), and the
 * average of the replicas after one plain SGD step equals the all-reduce
 * step exactly.  async pushes each rank's own mean and the server applies
 * it with learning_rate / W, so W asynchronous updates move the model as
 * far as one synchronous step.
 *
 * allreduce on one host: when the data ranks run on one host and
 * gradients are not compressed, sync_bind moves the training into a
 * segment every rank maps: one slot per rank for its gradient, and one
 * copy of the parameters and the optimizer state.  A step is then a
 * fence (every gradient is in its slot); each rank sums its 1/W of the
 * coordinates over the W slots, in rank order, and applies the optimizer
 * to that range alone; a fence (every range is stepped).  That is a
 * reduce-scatter with the optimizer sharded and no all-gather, since
 * every rank reads the one updated copy: no gradient is copied into or
 * out of MPI, and each rank does 1/W of the optimizer's work.  Each
 * coordinate is summed in rank order by exactly one rank, so the result
 * does not depend on which rank owns it; with two ranks it is the same,
 * bit for bit, as MPI_Allreduce's (a + b = b + a).  A model of at most
 * SHARED_REPLICATED_FLOATS parameters takes one fence a step instead: each
 * rank keeps its own parameters and optimizer state, puts its gradient in
 * one of its two slots (by step parity), and after the fence sums every
 * coordinate in rank order and steps the whole model (replicated_step):
 * the same numbers on every rank, the sharded path's.
 *
 * allreduce across hosts (hierarchical): each host has such a segment for
 * its L ranks, and one more buffer, the host's sum.  A step is a fence;
 * each rank sums its 1/L of the host's slots into the host sum; a fence;
 * the host's first rank (its leader) all-reduces the host sum with the
 * other hosts' leaders (a ring over H ranks, comm.c: one copy of the
 * gradient per host crosses the network, not one per rank); a fence; each
 * rank steps its 1/L of the host's parameters with the sum; a fence.
 * Every host applies the same sum to the same parameters, so the hosts'
 * copies stay equal.  When every host runs as many ranks, the leaders'
 * all-reduce is split by range instead: each rank all-reduces its 1/L of
 * the host sum with the same range of the other hosts (still one copy per
 * host crosses the network, in L streams side by side) and steps it, and
 * the two fences around the leaders' all-reduce go.
 *
 * Compression with error feedback: what a rank could not send this step
 * (the rounding of fp16, the coordinates top-k left out) stays in its
 * residual and is added to the next step's gradient.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "half.h"
#include "sync.h"

static bool
uses_servers(const Sync *s)
{
	return s->mode == DML_SYNC_PS || s->mode == DML_SYNC_SSP || s->mode == DML_SYNC_ASYNC;
}

static void *
xmalloc(size_t n)
{
	void	   *p = malloc(n ? n : 1);

	if (p == NULL)
		worker_fail("out of memory (%zu bytes for synchronization)", n);
	return p;
}

void
sync_init(Sync *s, const WorkerSpec *spec, size_t np)
{
	size_t		shard_max = 0;

	memset(s, 0, sizeof(*s));
	s->mode = spec->sync;
	s->comp = spec->compression;
	s->topk_ratio = spec->topk_ratio;
	s->W = worker_world;
	s->S = spec->servers;
	s->np = np;
	s->consensus = NAN;
	if (uses_servers(s) && s->S < 1)
		worker_fail("sync mode %s needs at least one server rank", dml_job_name(DML_NAMES_SYNC, spec->sync));
	s->scratch = xmalloc(sizeof(float) * np);
	if (s->comp != DML_COMPRESS_NONE)
	{
		s->residual = calloc(np, sizeof(float));
		s->order = xmalloc(sizeof(int) * np);
		if (s->residual == NULL)
			worker_fail("out of memory for the compression residual");
	}
	if (!uses_servers(s))
		return;

	s->bound = xmalloc(sizeof(size_t) * (s->S + 1));
	for (int j = 0; j <= s->S; j++)
		s->bound[j] = np * (size_t) j / (size_t) s->S;
	for (int j = 0; j < s->S; j++)
		if (s->bound[j + 1] - s->bound[j] > shard_max)
			shard_max = s->bound[j + 1] - s->bound[j];
	/* the largest message either way: INIT or STATE carry 3 floats a key */
	s->buflen = sizeof(PsHeader) + 12 * shard_max + 64;
	s->sbuf = xmalloc(sizeof(unsigned char *) * s->S);
	s->rbuf = xmalloc(sizeof(unsigned char *) * s->S);
	s->version = calloc(s->S, sizeof(int64_t));
	s->server_bytes = calloc(s->S, sizeof(double));
	s->server_across = calloc(s->S, sizeof(double));
	s->server_stale = calloc(s->S, sizeof(int64_t));
	if (!s->version || !s->server_bytes || !s->server_across || !s->server_stale)
		worker_fail("out of memory");
	for (int j = 0; j < s->S; j++)
	{
		s->sbuf[j] = xmalloc(s->buflen);
		s->rbuf[j] = xmalloc(s->buflen);
	}
}

/* world rank of server j */
static int
server_rank(const Sync *s, int j)
{
	return s->W + j;
}

static void
send_blocking(const Sync *s, int j, void *buf, size_t len)
{
	int			rc = MPI_Send(buf, (int) len, MPI_BYTE, server_rank(s, j), PS_TAG_REQUEST,
							  MPI_COMM_WORLD);

	if (rc != MPI_SUCCESS)
		worker_fail("sending to parameter server %d failed (MPI error %d)", j, rc);
	comm_count_p2p((double) len, server_rank(s, j));
}

/*
 * sync_start
 *		Before the first step: rank 0 gives every server its shard of the
 *		parameters and of the optimizer state, and every worker tells each
 *		server the key range it will push, once; afterwards only values
 *		travel.  epoch_rows is the training rows of all workers (async
 *		counts an epoch by them).
 */
void
sync_start(Sync *s, const float *params, const DmlOptimState *o, int64_t epoch_rows)
{
	if (!uses_servers(s))
		return;
	for (int j = 0; j < s->S; j++)
	{
		size_t		lo = s->bound[j],
					n = s->bound[j + 1] - lo;
		PsHeader   *h = (PsHeader *) s->sbuf[j];
		float	   *v = (float *) (s->sbuf[j] + sizeof(PsHeader));

		if (worker_rank == 0)
		{
			memset(h, 0, sizeof(*h));
			h->type = PS_INIT;
			h->clock = o->t;
			h->count = (int64_t) s->np;
			h->target = epoch_rows;
			memcpy(v, params + lo, sizeof(float) * n);
			memcpy(v + n, o->s1 + lo, sizeof(float) * n);
			memcpy(v + 2 * n, o->s2 + lo, sizeof(float) * n);
			send_blocking(s, j, h, sizeof(PsHeader) + 12 * n);
		}
		memset(h, 0, sizeof(*h));
		h->type = PS_REGISTER;
		h->worker = worker_rank;
		h->count = (int64_t) lo;
		h->target = (int64_t) (lo + n);
		send_blocking(s, j, h, sizeof(PsHeader));
	}
}

float
sync_grad_scale(const Sync *s, int B, int64_t total)
{
	switch (s->mode)
	{
		case DML_SYNC_ASYNC:
			return B > 0 ? 1.0f / (float) B : 0.0f;
		case DML_SYNC_GOSSIP:
		case DML_SYNC_AVERAGE:
			return total > 0 ? (float) s->W / (float) total : 0.0f;
		default:
			return total > 0 ? 1.0f / (float) total : 0.0f;
	}
}

/* ---------------------------------------------------------------------
 * Compression
 * --------------------------------------------------------------------- */

/* the largest power of two p with m * p <= limit (1 when m is 0) */
static float
pow2_scale(float m, float limit)
{
	if (!(m > 0) || !isfinite(m))
		return 1.0f;
	return ldexpf(1.0f, (int) floorf(log2f(limit / m)));
}

/* how many values top-k sends of n */
static size_t
topk_count(double ratio, size_t n)
{
	size_t		k = (size_t) ceil(ratio * (double) n);

	if (k < 1)
		k = 1;
	return n == 0 ? 0 : k > n ? n : k;
}

/* the k-th largest of v[0..n) (1 <= k <= n), reordering v: quickselect */
static float
kth_largest(float *v, size_t n, size_t k)
{
	long		lo = 0,
				hi = (long) n - 1,
				want = (long) k - 1;	/* its index in descending order */

	while (lo < hi)
	{
		float		pivot = v[lo + (hi - lo) / 2];
		long		a = lo,
					b = hi;

		/* afterwards [lo, b] >= pivot, [a, hi] <= pivot, and (b, a) == pivot */
		while (a <= b)
		{
			while (v[a] > pivot)
				a++;
			while (v[b] < pivot)
				b--;
			if (a <= b)
			{
				float		t = v[a];

				v[a++] = v[b];
				v[b--] = t;
			}
		}
		if (want <= b)
			hi = b;
		else if (want >= a)
			lo = a;
		else
			return v[want];
	}
	return v[want];
}

/*
 * order[0..k) := indices of the k largest |u|: the k-th largest magnitude
 * by quickselect over a contiguous copy (order's memory, as floats), then
 * one pass taking everything above it and enough of what equals it
 */
static void
select_topk(const float *u, int *order, size_t n, size_t k)
{
	float	   *mag = (float *) order;
	float		thr;
	size_t		above = 0,
				got = 0;

	if (k == 0)
		return;
	for (size_t i = 0; i < n; i++)
		mag[i] = fabsf(u[i]);
	thr = kth_largest(mag, n, k);
	for (size_t i = 0; i < n; i++)
		above += fabsf(u[i]) > thr;
	/* mag is no longer needed: order fills from the front */
	for (size_t i = 0, ties = k - above; i < n && got < k; i++)
	{
		float		a = fabsf(u[i]);

		if (a > thr)
			order[got++] = (int) i;
		else if (a == thr && ties > 0)
		{
			order[got++] = (int) i;
			ties--;
		}
	}
}

/*
 * ps_encode
 *		Encode v[0..n) (plus the residual, when there is one) for the wire;
 *		the residual becomes what the encoding lost.  Returns the payload
 *		bytes.  work holds n floats, order n ints.
 */
size_t
ps_encode(PsEncoding enc, const float *v, size_t n, float *residual, double topk_ratio,
		  unsigned char *out, float *scale, int32_t *nvals, float *work, int *order)
{
	const float *u = v;

	*scale = 1.0f;
	*nvals = (int32_t) n;
	if (residual != NULL)
	{
		for (size_t i = 0; i < n; i++)
			work[i] = v[i] + residual[i];
		u = work;
	}
	switch (enc)
	{
		case ENC_DENSE:
			memcpy(out, u, sizeof(float) * n);
			if (residual)
				memset(residual, 0, sizeof(float) * n);
			return sizeof(float) * n;
		case ENC_FP16:
			{
				uint16_t   *h = (uint16_t *) out;
				float		m = 0;

				for (size_t i = 0; i < n; i++)
				{
					float		a = fabsf(u[i]);

					m = a > m ? a : m;
				}
				*scale = pow2_scale(m, 16384.0f);
				half_from_float(h, u, n, *scale);
				if (residual)
				{
					/* what was lost: u minus what was sent (work holds u, or is free) */
					if (u != work)
						memcpy(work, u, sizeof(float) * n);
					half_to_float(residual, h, n, 1.0f / *scale);
					for (size_t i = 0; i < n; i++)
						residual[i] = work[i] - residual[i];
				}
				return 2 * n;
			}
		case ENC_TOPK:
			{
				size_t		k = topk_count(topk_ratio, n);
				unsigned char *p = out;

				select_topk(u, order, n, k);
				if (residual && u != residual)
					memcpy(residual, u, sizeof(float) * n);
				for (size_t i = 0; i < k; i++)
				{
					int32_t		idx = order[i];
					float		val = u[idx];

					memcpy(p, &idx, 4);
					memcpy(p + 4, &val, 4);
					p += 8;
					if (residual)
						residual[idx] = 0;
				}
				*nvals = (int32_t) k;
				return 8 * k;
			}
	}
	return 0;
}

/* acc[0..n) += the decoded payload */
void
ps_decode_add(PsEncoding enc, const unsigned char *in, size_t n, int32_t nvals, float scale,
			  float *acc)
{
	switch (enc)
	{
		case ENC_DENSE:
			{
				const float *v = (const float *) in;

				for (size_t i = 0; i < n; i++)
					acc[i] += v[i];
				break;
			}
		case ENC_FP16:
			{
				/* decode in chunks through a small buffer, then add */
				float		tmp[1024];

				for (size_t lo = 0; lo < n; lo += 1024)
				{
					size_t		c = n - lo < 1024 ? n - lo : 1024;
					uint16_t	h[1024];

					memcpy(h, in + 2 * lo, 2 * c);
					half_to_float(tmp, h, c, 1.0f / scale);
					for (size_t i = 0; i < c; i++)
						acc[lo + i] += tmp[i];
				}
				break;
			}
		case ENC_TOPK:
			for (int32_t i = 0; i < nvals; i++)
			{
				int32_t		idx;
				float		val;

				memcpy(&idx, in + 8 * (size_t) i, 4);
				memcpy(&val, in + 8 * (size_t) i + 4, 4);
				if (idx < 0 || (size_t) idx >= n)
					worker_fail("top-k entry %d is outside a range of %zu keys", idx, n);
				acc[idx] += val;
			}
			break;
	}
}

static PsEncoding
wire_encoding(const Sync *s)
{
	return s->comp == DML_COMPRESS_FP16 ? ENC_FP16 : s->comp == DML_COMPRESS_TOPK ? ENC_TOPK : ENC_DENSE;
}

/* sum of grads over the data ranks, compressed as asked */
static void
allreduce_grads(Sync *s, float *grads)
{
	size_t		n = s->np;

	if (s->comp == DML_COMPRESS_NONE || s->W == 1)
	{
		comm_allreduce_float(grads, n);
		return;
	}
	if (s->comp == DML_COMPRESS_FP16)
	{
		uint16_t   *h = (uint16_t *) s->order;	/* n ints hold n halves */
		float		m = 0,
					scale;

		for (size_t i = 0; i < n; i++)
		{
			float		a;

			s->scratch[i] = grads[i] + s->residual[i];
			a = fabsf(s->scratch[i]);
			m = a > m ? a : m;
		}
		comm_allreduce_max_float(&m, 1);
		/* W terms of at most 32768 / W each: the sum stays below fp16's 65504 */
		scale = pow2_scale(m, 32768.0f / (float) s->W);
		half_from_float(h, s->scratch, n, scale);
		/* the residual: what this rank could not send */
		half_to_float(s->residual, h, n, 1.0f / scale);
		for (size_t i = 0; i < n; i++)
			s->residual[i] = s->scratch[i] - s->residual[i];
		comm_allreduce_half(h, n);
		half_to_float(grads, h, n, 1.0f / scale);
		return;
	}
	/* top-k: every rank's (index, value) pairs gathered, summed densely */
	{
		size_t		k = topk_count(s->topk_ratio, n);
		unsigned char *mine,
				   *all;
		float		scale;
		int32_t		nv;

		mine = xmalloc(8 * k);
		all = xmalloc(8 * k * (size_t) s->W);
		ps_encode(ENC_TOPK, grads, n, s->residual, s->topk_ratio, mine, &scale,
				  &nv, s->scratch, s->order);
		if ((size_t) nv != k)
			worker_fail("top-k selected %d values, expected %zu", nv, k);
		comm_allgather_bytes(mine, 8 * k, all);
		memset(grads, 0, sizeof(float) * n);
		for (int r = 0; r < s->W; r++)
			ps_decode_add(ENC_TOPK, all + 8 * k * (size_t) r, n, (int32_t) k, 1.0f, grads);
		free(mine);
		free(all);
	}
}

/* ---------------------------------------------------------------------
 * All-reduce through shared memory (see the header comment)
 * --------------------------------------------------------------------- */

/* first coordinate of rank r's range: 1/W each, on 64-byte boundaries */
static size_t
shard_start(size_t np, int W, int r)
{
	if (r >= W)
		return np;
	return (np * (size_t) r / (size_t) W) & ~(size_t) 15;
}

/*
 * A resident job's host segment, kept between dml_tune's trials: making
 * one (MPI_Win_allocate_shared) is a collective with a file and a mapping
 * behind it, and the next trial takes it again when its parameters fit.
 * Every rank decides alike: each compares the same padded count.
 */
static struct CommShared *kept_shm = NULL;
static void **kept_base = NULL;
static size_t kept_npad = 0;
static size_t kept_first = 0;	/* floats of the host's first rank's part */
static int	kept_hosts = 0;
static bool kept_replicated = false;

/* floats of the balance region (sync_balance_want): the rows, targets, times */
static size_t
balance_floats(const Sync *s)
{
	size_t		rows = (size_t) s->bal_rows;

	if (rows == 0)
		return 0;
	return 2 * (((rows * (size_t) s->bal_d + 15) & ~(size_t) 15) + ((rows + 15) & ~(size_t) 15)) +
		((4 * (size_t) s->L + 15) & ~(size_t) 15);
}

/* a resident job's kept host segment freed, at its end (collective over the data ranks) */
void
sync_release_kept(void)
{
	if (kept_shm == NULL)
		return;
	comm_shared_free(kept_shm);
	free(kept_base);
	kept_shm = NULL;
	kept_base = NULL;
}

/*
 * sync_bind
 *		Collective over the data ranks, after sync_start.  Where the
 *		all-reduce can go through shared memory, the parameters, the
 *		gradient buffer and the optimizer state the training loop uses
 *		become the host segment's (*params, *grads, o->s1, o->s2 are
 *		pointed there, with the host's first rank's values, which every
 *		rank shares); sync_unbind puts them back.  Otherwise nothing
 *		changes.
 */
void
sync_bind(Sync *s, const WorkerSpec *spec, float **params, float **grads, DmlOptimState *o)
{
	size_t		npad = (s->np + 15) & ~(size_t) 15;
	size_t		first;
	int			lr = comm_local_rank();
	void	  **base;

	/*
	 * Compression is for the network: on one host the ranks all-reduce as
	 * the flat path does (compressed, through MPI); across hosts the
	 * host's sum is compressed on its way between hosts (cross_compressed)
	 */
	if (s->mode != DML_SYNC_ALLREDUCE || s->W < 2 || !spec->shared_memory ||
		(s->comp != DML_COMPRESS_NONE && comm_hosts() < 2))
	{
		s->bal_rows = 0;
		return;
	}
	s->L = comm_local_size();
	s->H = comm_hosts();
	/* a small model on one host: one fence a step, the optimizer on every rank */
	s->replicated = s->H == 1 && s->np <= SHARED_REPLICATED_FLOATS;
	/* the step's rows in the segment: one host, a sharded step, asked for and allowed */
	if (s->replicated || s->H > 1 || !spec->balance)
		s->bal_rows = 0;
	first = npad * (s->replicated ? 2 : s->H > 1 ? 5 : 4) + balance_floats(s);
	base = xmalloc(sizeof(void *) * s->L * 2);
	s->keep_shm = spec->resident != 0;
	if (kept_shm != NULL && kept_npad >= npad && kept_first >= first && kept_hosts == s->H &&
		kept_replicated == s->replicated)
	{
		/* the last trial's segment: big enough, and every rank's part where it was */
		s->shm = kept_shm;
		memcpy(base, kept_base, sizeof(void *) * s->L);
	}
	else
	{
		if (kept_shm != NULL)
		{
			comm_shared_free(kept_shm);
			free(kept_base);
			kept_shm = NULL;
			kept_base = NULL;
		}
		/*
		 * every rank's part is its gradient slot (replicated: two, for
		 * alternate steps); the host's first rank's also holds the rest
		 */
		s->shm = comm_shared_alloc(sizeof(float) *
								   (s->replicated ? 2 * npad : lr == 0 ? first : npad), base);
		if (s->keep_shm)
		{
			kept_shm = s->shm;
			kept_base = xmalloc(sizeof(void *) * s->L);
			memcpy(kept_base, base, sizeof(void *) * s->L);
			kept_npad = npad;
			kept_first = first;
			kept_hosts = s->H;
			kept_replicated = s->replicated;
		}
	}
	s->shared = true;
	if (s->replicated)
	{
		/* slot[p L + r]: rank r's gradient of the steps of parity p */
		for (int r = 0; r < s->L; r++)
			base[s->L + r] = (float *) base[r] + npad;
		s->slot = (float **) base;
		s->parity = 0;
		comm_shared_fence(s->shm);
		return;
	}
	s->hierarchical = s->H > 1;
	s->slot = (float **) base;
	s->shm_params = s->slot[0] + npad;
	s->shm_s1 = s->shm_params + npad;
	s->shm_s2 = s->shm_s1 + npad;
	s->host_sum = s->H > 1 ? s->shm_s2 + npad : NULL;
	s->lo = shard_start(s->np, s->L, lr);
	s->hi = shard_start(s->np, s->L, lr + 1);
	s->claimed = !s->hierarchical;
	s->seq = 0;
	if (s->claimed)
	{
		s->claim_order = xmalloc(sizeof(int) * (s->np / SHARED_STEP_CHUNK + 1));
		s->claim_home = xmalloc(sizeof(int) * (s->L + 1));
		sync_ready_layers(s, NULL, 0);
		comm_shared_progress_reset(s->shm);	/* (a kept segment's last job's) */
		for (int p = 0; p < 2; p++)
			comm_shared_list(s->shm, p, lr, s->claim_home[lr + 1] - s->claim_home[lr]);
	}
	if (s->bal_rows > 0)
	{
		size_t		xf = ((size_t) s->bal_rows * (size_t) s->bal_d + 15) & ~(size_t) 15,
					yf = ((size_t) s->bal_rows + 15) & ~(size_t) 15;

		s->bal_X[0] = s->shm_s2 + npad;
		s->bal_y[0] = s->bal_X[0] + xf;
		s->bal_X[1] = s->bal_y[0] + yf;
		s->bal_y[1] = s->bal_X[1] + xf;
		s->bal_time = (double *) (s->bal_y[1] + yf);
		s->bal_spr = calloc(s->L, sizeof(double));
		s->bal_cut = calloc(s->L + 1, sizeof(int));
		if (s->bal_spr == NULL || s->bal_cut == NULL)
			worker_fail("out of memory");
		s->bal_step = 0;
	}
	if (lr == 0)
	{
		memcpy(s->shm_params, *params, sizeof(float) * s->np);
		memcpy(s->shm_s1, o->s1, sizeof(float) * s->np);
		memcpy(s->shm_s2, o->s2, sizeof(float) * s->np);
		if (s->bal_rows > 0)
			memset(s->bal_time, 0, sizeof(double) * 2 * s->L);
	}
	memset(s->slot[lr], 0, sizeof(float) * s->np);
	comm_shared_fence(s->shm);
	s->own_params = *params;
	s->own_grads = *grads;
	s->own_s1 = o->s1;
	s->own_s2 = o->s2;
	*params = s->shm_params;
	*grads = s->slot[lr];
	o->s1 = s->shm_s1;
	o->s2 = s->shm_s2;
}

/*
 * sync_unbind
 *		Collective: the segment's parameters and optimizer state back into
 *		the rank's own buffers, which the pointers get back; the segment
 *		is freed.
 */
void
sync_unbind(Sync *s, float **params, float **grads, DmlOptimState *o)
{
	if (s->shm == NULL)
		return;
	if (!s->replicated)
	{
		memcpy(s->own_params, s->shm_params, sizeof(float) * s->np);
		memcpy(s->own_s1, s->shm_s1, sizeof(float) * s->np);
		memcpy(s->own_s2, s->shm_s2, sizeof(float) * s->np);
		*params = s->own_params;
		*grads = s->own_grads;
		o->s1 = s->own_s1;
		o->s2 = s->own_s2;
	}
	comm_shared_fence(s->shm);	/* nobody reads the segment any more */
	if (s->shm != kept_shm)
		comm_shared_free(s->shm);
	else if (!s->keep_shm)
	{
		comm_shared_free(kept_shm);
		free(kept_base);
		kept_shm = NULL;
		kept_base = NULL;
	}
	s->shm = NULL;
	free(s->slot);
	s->slot = NULL;
	s->bal_X[0] = s->bal_X[1] = s->bal_y[0] = s->bal_y[1] = NULL;
	s->bal_time = NULL;
	free(s->bal_spr);
	free(s->bal_cut);
	s->bal_spr = NULL;
	s->bal_cut = NULL;
}

/* ---------------------------------------------------------------------
 * Balance: a step's rows shared by the ranks' speed (options "balance")
 *
 * A synchronous step waits for its slowest rank.  With a fixed split a
 * rank on a slower core (another process on it, a busy hyperthread
 * sibling, a virtual CPU the host runs less) holds every step back by
 * the difference.  On one host the ranks can share the work of the step
 * instead: each puts its own rows of the step in the segment, in rank
 * order (sync_balance_want asks for the room before sync_bind), and rank r
 * computes the gradient of rows [cut[r], cut[r + 1]) of them, whoever
 * holds them, cut by the ranks' smoothed seconds a row so that they take
 * as long.  The rows go into one of two regions by step parity: a rank
 * puts the next step's rows in the other region after computing its
 * share and before the step's fence, so they are all in once the step
 * is (only an epoch's first step has a fence of its own,
 * sync_balance_fence); the other region was last read the step before,
 * whose fence every rank has passed.  Every rank measures its own
 * time (sync_balance_took), writes it into the segment by step parity and
 * reads every rank's in the next step, so every rank smooths the same
 * numbers and cuts alike without a message.  The step's gradient is
 * still the sum over the same global minibatch of the rows' gradients,
 * scaled by the same 1/rows, and the optimizer steps it as before: the
 * same model, up to the float rounding of how the sum is grouped.  While
 * the speeds are within a few percent (a boundary would move by less than
 * BALANCE_ROWS rows and a 32nd of the step), every rank computes its own
 * rows, exactly the fixed split's arithmetic.  Off by default (README:
 * beside a process whose time slices come and go faster than a step, the
 * speeds measured do not predict the next step's, and it measured no
 * gain; off, two runs give the same model bit for bit).
 * --------------------------------------------------------------------- */

/*
 * sync_balance_want
 *		Before sync_bind, on every data rank alike: room in the segment for
 *		rows rows of d values (every rank's most rows in a step, together).
 *		Whether the step is then balanced is up to sync_bind (one host, a
 *		sharded step, "balance" true): s->bal_rows > 0 after it.
 */
void
sync_balance_want(Sync *s, int rows, int d)
{
	s->bal_rows = rows > 0 && d > 0 ? rows : 0;
	s->bal_d = d;
}

/* the first row rank r holds in the step's rows: own[0] + ... + own[r - 1] */
static int
own_start(const int *own, int r)
{
	int			c = 0;

	for (int q = 0; q < r; q++)
		c += own[q];
	return c;
}

/* an epoch's first step: every rank's rows are in (the later steps' come with the step before) */
void
sync_balance_fence(Sync *s)
{
	comm_shared_fence(s->shm);
}

/*
 * sync_balance_split
 *		Once every rank's own[rank] rows of the step are in the step's
 *		region (s->bal_X and s->bal_y of its parity) from own_start on (own:
 *		every rank's rows, known to all): the rows this rank computes, from
 *		*lo on.
 */
int
sync_balance_split(Sync *s, const int *own, int *lo)
{
	int			L = s->L;
	const double *last = s->bal_time + (size_t) ((s->bal_step + 1) & 1) * L;
	int			T = own_start(own, L);
	bool		cut = T >= L * BALANCE_ROWS;
	double		sum = 0,
				dev = 0,
				acc = 0;

	for (int r = 0; r < L; r++)
	{
		if (last[r] > 0)
			s->bal_spr[r] = s->bal_spr[r] > 0 ?
				s->bal_spr[r] + BALANCE_SMOOTH * (last[r] - s->bal_spr[r]) : last[r];
		if (!(s->bal_spr[r] > 0))
			cut = false;
		else
			sum += 1.0 / s->bal_spr[r];
	}
	/* where each boundary would go: row shares by speed */
	for (int r = 0; cut && r < L - 1; r++)
	{
		double		d;

		acc += (double) T / s->bal_spr[r] / sum;
		d = fabs(acc - own_start(own, r + 1));
		if (d > dev)
			dev = d;
	}
	if (!cut || dev < BALANCE_ROWS || dev < T / 32.0)
	{
		for (int r = 0; r <= L; r++)
			s->bal_cut[r] = own_start(own, r);
	}
	else
	{
		int			moved = T;

		acc = 0;
		s->bal_cut[0] = 0;
		for (int r = 1; r < L; r++)
		{
			long		c;

			acc += (double) T / s->bal_spr[r - 1] / sum;
			c = lround(acc / BALANCE_ROWS) * BALANCE_ROWS;
			/* at least BALANCE_ROWS rows each, so every rank's speed stays measured */
			if (c < s->bal_cut[r - 1] + BALANCE_ROWS)
				c = s->bal_cut[r - 1] + BALANCE_ROWS;
			if (c > T - (L - r) * BALANCE_ROWS)
				c = T - (L - r) * BALANCE_ROWS;
			s->bal_cut[r] = (int) c;
		}
		s->bal_cut[L] = T;
		/* rows computed by a rank other than their own: all but the overlaps */
		for (int r = 0; r < L; r++)
		{
			int			a = s->bal_cut[r] > own_start(own, r) ? s->bal_cut[r] : own_start(own, r),
						b = s->bal_cut[r + 1] < own_start(own, r + 1) ?
				s->bal_cut[r + 1] : own_start(own, r + 1);

			if (b > a)
				moved -= b - a;
		}
		if (moved > 0)
		{
			s->bal_moved_steps++;
			s->bal_moved_rows += moved;
		}
	}
	*lo = s->bal_cut[comm_local_rank()];
	return s->bal_cut[comm_local_rank() + 1] - *lo;
}

/*
 * sync_balance_took
 *		After the rank's rows of the step (sync_balance_split) are computed,
 *		before sync_step: the seconds they took, for the next step's cut.
 *		It goes to this step's parity, before the step's fence: every rank
 *		reads it in the next step, and nobody writes that parity again
 *		before every rank has passed the next step's fence, by when all
 *		have read it.
 */
void
sync_balance_took(Sync *s, double seconds, int rows)
{
	s->bal_time[(size_t) (s->bal_step & 1) * s->L + comm_local_rank()] =
		rows > 0 && seconds > 0 ? seconds / rows : 0;
	s->bal_step++;
}

/* sum[i] = slot[0][i] + ... + slot[L-1][i] over [lo, hi), in rank order */
DML_VECTORIZE static void
sum_slots(float *sum, float *const *slot, int L, size_t lo, size_t hi)
{
	if (L == 1)
	{
		memcpy(sum + lo, slot[0] + lo, sizeof(float) * (hi - lo));
		return;
	}
	{
		const float *a = slot[0],
				   *b = slot[1];

		for (size_t i = lo; i < hi; i++)
			sum[i] = a[i] + b[i];
	}
	for (int r = 2; r < L; r++)
	{
		const float *c = slot[r];

		for (size_t i = lo; i < hi; i++)
			sum[i] += c[i];
	}
}

/*
 * The hosts' sums of v[0..n) (this rank's range of its host's sum; the
 * same range on every host), compressed on the network as the job asks,
 * with error feedback of what the compression left out of this host's
 * range.  Every host decodes the same bytes in the same order, so the
 * hosts' sums stay equal.
 */
static void
cross_compressed(Sync *s, float *v, size_t n, float *residual)
{
	int			H = s->H;

	if (n == 0)
		return;
	if (s->comp == DML_COMPRESS_FP16)
	{
		uint16_t   *h = (uint16_t *) s->order;	/* n ints hold n halves */
		float	   *u = s->scratch;
		float		m = 0,
					scale;

		for (size_t i = 0; i < n; i++)
		{
			float		a;

			u[i] = v[i] + residual[i];
			a = fabsf(u[i]);
			m = a > m ? a : m;
		}
		comm_cross_max_float(&m, 1);
		/* H terms of at most 32768 / H each: the sum stays below fp16's 65504 */
		scale = pow2_scale(m, 32768.0f / (float) H);
		half_from_float(h, u, n, scale);
		half_to_float(residual, h, n, 1.0f / scale);
		for (size_t i = 0; i < n; i++)
			residual[i] = u[i] - residual[i];
		comm_cross_allreduce_half(h, n);
		half_to_float(v, h, n, 1.0f / scale);
		return;
	}
	{
		/* top-k: each host's (index, value) pairs gathered, summed densely */
		size_t		k = topk_count(s->topk_ratio, n);
		unsigned char *mine = xmalloc(8 * k),
				   *all = xmalloc(8 * k * (size_t) H);
		float		scale;
		int32_t		nv;

		ps_encode(ENC_TOPK, v, n, residual, s->topk_ratio, mine, &scale, &nv, s->scratch,
				  s->order);
		if ((size_t) nv != k)
			worker_fail("top-k selected %d values, expected %zu", nv, k);
		comm_cross_allgather_bytes(mine, 8 * k, all);
		memset(v, 0, sizeof(float) * n);
		for (int r = 0; r < H; r++)
			ps_decode_add(ENC_TOPK, all + 8 * k * (size_t) r, n, (int32_t) k, 1.0f, v);
		free(mine);
		free(all);
	}
}

/*
 * bytes all the hosts put on the network for a range of n values:
 * halves round a ring of H (2 (H - 1) / H of the range from each), or
 * k pairs of 8 bytes from each host to each other
 */
static double
cross_bytes(const Sync *s, size_t n)
{
	if (n == 0)
		return 0;
	if (s->comp == DML_COMPRESS_FP16)
		return 2.0 * (s->H - 1) * 2.0 * (double) n;
	return (double) s->H * (s->H - 1) * 8.0 * (double) topk_count(s->topk_ratio, n);
}

/*
 * A rank's progress through a step's gradient (comm_shared_publish): its
 * gradient of the parameters [from, np) is whole in its slot, in step
 * s->seq.  Ordered by the step, then by the parameters done.
 */
static inline int64_t
ready_value(const Sync *s, size_t from)
{
	return s->seq * (int64_t) (s->np + 1) + (int64_t) (s->np - from);
}

/* the first coordinate of item k of rank r's list of chunks */
static inline size_t
chunk_start(const Sync *s, int r, int k)
{
	return (size_t) s->claim_order[s->claim_home[r] + k] * SHARED_STEP_CHUNK;
}

/*
 * sync_wants_ready
 *		Whether the step's gradient may say, layer by layer, which of its
 *		parameters are whole (sync_ready) before sync_step: one host's
 *		ranks claiming the step's chunks.
 */
bool
sync_wants_ready(const Sync *s)
{
	return s->shm != NULL && !s->replicated && s->claimed;
}

/*
 * sync_ready
 *		(DmlWork's ready callback) The gradient of this step's parameters
 *		[from, np) is whole in the rank's slot, and its backward pass reads
 *		none of their weights again: the other ranks may sum and step them.
 */
void
sync_ready(void *sync, size_t from)
{
	Sync	   *s = sync;

	if (sync_wants_ready(s))
		comm_shared_publish(s->shm, ready_value(s, from));
}

/*
 * sync_ready_layers
 *		The gradient's parameters are done in n parts, last first: [from[i],
 *		from[i + 1]) (from ascending, from[n] = np).  Every rank's chunks
 *		are stepped in that order, each part's chunks in place order (the
 *		hardware prefetches the next; a step through its chunks backwards
 *		measured slower).  No parts: in place order.
 */
void
sync_ready_layers(Sync *s, const size_t *from, int n)
{
	int			chunks = (int) ((s->np + SHARED_STEP_CHUNK - 1) / SHARED_STEP_CHUNK),
				k = 0;

	if (!s->claimed)
		return;
	for (int r = 0; r < s->L; r++)
	{
		int			lo = (int) ((int64_t) chunks * r / s->L),
					hi = (int) ((int64_t) chunks * (r + 1) / s->L);

		s->claim_home[r] = k;
		/* part i: the chunks that start in it (one across a boundary waits for the lower part) */
		for (int i = n > 0 ? n - 1 : 0; i >= 0; i--)
			for (int j = lo; j < hi; j++)
			{
				size_t		c0 = (size_t) j * SHARED_STEP_CHUNK;

				if (n == 0 || ((i == 0 || c0 >= from[i]) && (i == n - 1 || c0 < from[i + 1])))
					s->claim_order[k++] = j;
			}
	}
	s->claim_home[s->L] = k;
}

/*
 * One step of one host's ranks, a chunk of SHARED_STEP_CHUNK coordinates
 * at a time.  Each rank has its list of chunks for the step (a fixed
 * share of them, in sync_ready_layers's order).  Done with its gradient,
 * a rank takes the next chunk of its own list if every rank's gradient of
 * it is whole (sync_ready), else another rank's next chunk that is;
 * failing both, its own next, or, once its own list is empty, another
 * rank's last.  It waits until every rank's gradient of the chunk is
 * whole, sums the slots over it in rank order and steps it; then the
 * fence after which every rank reads the new parameters.  A rank done
 * with its gradient first steps the layers every rank has done while the
 * others finish theirs, and the ranks end their chunks together, where
 * fixed halves (several hosts, below) waited at a fence for the slowest
 * gradient before the sums and for the slowest half after them (2
 * ranks, batch-128 MLP: 65 us a step of 1.3 ms, bench/SPEED-NOTES.md).
 * A chunk stays with its rank from step to step unless another takes it,
 * so its optimizer state is where that rank left it.  Each coordinate is
 * the same sum in the same order and the same elementwise update whoever
 * steps it: bit for bit the fixed halves' step.
 *
 * The lists of this step's parity; each rank set its own list of the
 * other parity for the next step (shared_step).
 */
static void
claimed_step(Sync *s, const WorkerSpec *spec, DmlOptimState *o, float lr)
{
	int			par = (int) (s->seq & 1),
				me = comm_local_rank(),
				L = s->L;

	comm_shared_publish(s->shm, ready_value(s, 0));	/* the rank's gradient is whole */
	for (;;)
	{
		int			owner = -1,
					k;
		bool		back = false;
		size_t		c0,
					c1;
		DmlOptimState chunk = *o;

		k = comm_shared_peek(s->shm, par, me, false);
		if (k >= 0 && comm_shared_reached(s->shm, ready_value(s, chunk_start(s, me, k))))
			owner = me;
		for (int d = 1; d < L && owner < 0; d++)
		{
			int			r = (me + d) % L,
						f = comm_shared_peek(s->shm, par, r, false);

			if (f >= 0 && comm_shared_reached(s->shm, ready_value(s, chunk_start(s, r, f))))
				owner = r;
		}
		if (owner < 0 && k >= 0)
			owner = me;			/* nothing ready: the rank's own next, waited for */
		for (int d = 1; d < L && owner < 0; d++)
		{
			int			r = (me + d) % L;

			if (comm_shared_peek(s->shm, par, r, true) >= 0)
			{
				owner = r;
				back = true;
			}
		}
		if (owner < 0)
			break;				/* every list is empty */
		if ((k = comm_shared_take(s->shm, par, owner, back)) < 0)
			continue;			/* another rank took the last one */
		s->chunks_taken += owner != me;
		c0 = chunk_start(s, owner, k);
		c1 = c0 + SHARED_STEP_CHUNK < s->np ? c0 + SHARED_STEP_CHUNK : s->np;
		comm_shared_await(s->shm, ready_value(s, c0));
		sum_slots(s->scratch, s->slot, L, c0, c1);
		chunk.n = c1 - c0;
		chunk.s1 = o->s1 + c0;
		chunk.s2 = o->s2 + c0;
		train_optim_step(&chunk, spec, s->shm_params + c0, s->scratch + c0, lr);
	}
	o->t++;
	comm_shared_fence(s->shm);	/* every chunk is stepped */
	comm_count_bytes(sizeof(float) * (double) s->np);
}

/*
 * One step through the segment.  One host: claimed_step.  Several: each
 * rank sums its range of the host's gradients; the leaders all-reduce the
 * host sums (one copy per host crosses the network); each rank steps its
 * range of the host's parameters.  Every host steps the same sum, so the
 * hosts' copies stay equal.
 */
static void
shared_step(Sync *s, const WorkerSpec *spec, DmlOptimState *o, float lr, int64_t total)
{
	float	   *sum = s->host_sum;
	/* the network's bytes of the step, all hosts together: the leaders' ring */
	double		across = 2.0 * (s->H - 1) * sizeof(float) * (double) s->np;

	if (s->claimed)
	{
		int			me = comm_local_rank();

		/* the next step's list; nobody takes from it before this step's fence */
		comm_shared_list(s->shm, (int) ((s->seq + 1) & 1), me,
						 s->claim_home[me + 1] - s->claim_home[me]);
		if (total > 0)
			claimed_step(s, spec, o, lr);
		else
		{
			comm_shared_fence(s->shm);	/* no rank had rows: nothing to step */
			comm_count_bytes(sizeof(float) * (double) s->np);
		}
		s->seq++;
		return;
	}
	comm_shared_fence(s->shm);	/* every rank's gradient is in its slot */
	sum_slots(sum, s->slot, s->L, s->lo, s->hi);
	if (s->comp != DML_COMPRESS_NONE)
	{
		bool		even = comm_hosts_even();

		if (!even)
			comm_shared_fence(s->shm);	/* the host's sum is whole */
		if (comm_cross_member())
		{
			size_t		lo = even ? s->lo : 0,
						hi = even ? s->hi : s->np;

			cross_compressed(s, s->host_sum + lo, hi - lo, s->residual + lo);
		}
		if (!even)
			comm_shared_fence(s->shm);	/* every host's sum is in */
		/* compressed, the same figure on every rank: each range's */
		across = 0;
		for (int l = 0; l < (even ? s->L : 1); l++)
			across += cross_bytes(s, even ? shard_start(s->np, s->L, l + 1) -
								  shard_start(s->np, s->L, l) : s->np);
	}
	else if (comm_hosts_even())
	{
		/* each rank's range with the same range of the other hosts: no fence */
		comm_peers_allreduce_float(s->host_sum + s->lo, s->hi - s->lo);
	}
	else
	{
		comm_shared_fence(s->shm);	/* the host's sum is whole */
		comm_leaders_allreduce_float(s->host_sum, s->np);
		comm_shared_fence(s->shm);	/* every host's sum is in */
	}
	if (total > 0)
	{
		/*
		 * the range stepped a chunk at a time.  The optimizers are
		 * elementwise, with the same step count in every chunk: bit for bit
		 * the whole range's step.
		 */
		for (size_t c0 = s->lo; c0 < s->hi; c0 += SHARED_STEP_CHUNK)
		{
			size_t		c1 = c0 + SHARED_STEP_CHUNK < s->hi ? c0 + SHARED_STEP_CHUNK : s->hi;
			DmlOptimState chunk = *o;

			chunk.n = c1 - c0;
			chunk.s1 = o->s1 + c0;
			chunk.s2 = o->s2 + c0;
			train_optim_step(&chunk, spec, s->shm_params + c0, sum + c0, lr);
		}
		o->t++;
	}
	comm_shared_fence(s->shm);	/* every range is stepped */
	comm_count_hierarchical(sizeof(float) * (double) s->np, across);
}

/*
 * One step of a small model through the segment (s->replicated): the
 * rank's gradient into its slot of this step's parity; a fence; every
 * rank sums all the coordinates over the slots in rank order and steps
 * its own copy of the parameters and optimizer state.  Each rank computes
 * the same sums (rank order) and the same update, so the copies stay
 * equal, bit for bit the sharded step's.  A rank writes the other
 * parity's slot next step, and cannot come round to this one again
 * before every rank has passed the next fence, by when it has read this
 * one: the second fence of the sharded step goes.  For a few hundred
 * parameters the sum and optimizer take less than a fence's wait.
 */
static void
replicated_step(Sync *s, const WorkerSpec *spec, float *params, const float *grads,
				DmlOptimState *o, float lr, int64_t total)
{
	float	  **slot = s->slot + s->parity * s->L;

	memcpy(slot[comm_local_rank()], grads, sizeof(float) * s->np);
	comm_shared_fence(s->shm);	/* every rank's gradient of the step is in its slot */
	sum_slots(s->scratch, slot, s->L, 0, s->np);
	if (total > 0)
		train_optim_step(o, spec, params, s->scratch, lr);
	s->parity ^= 1;
	comm_count_bytes(sizeof(float) * (double) s->np);
}

/* replica average over the data ranks, in place */
static void
average_params(Sync *s, float *params)
{
	comm_allreduce_float(params, s->np);
	for (size_t i = 0; i < s->np; i++)
		params[i] /= (float) s->W;
}

/*
 * One request to every server and its reply: the request (built in
 * sbuf[j] by the caller, len[j] bytes) goes out nonblocking after the
 * reply's receive is posted; the weights of each reply land in params.
 */
static void
exchange(Sync *s, const size_t *len, float *params)
{
	MPI_Request *req = xmalloc(sizeof(MPI_Request) * 2 * s->S);

	for (int j = 0; j < s->S; j++)
	{
		if (MPI_Irecv(s->rbuf[j], (int) s->buflen, MPI_BYTE, server_rank(s, j), PS_TAG_REPLY,
					  MPI_COMM_WORLD, &req[2 * j]) != MPI_SUCCESS ||
			MPI_Isend(s->sbuf[j], (int) len[j], MPI_BYTE, server_rank(s, j), PS_TAG_REQUEST,
					  MPI_COMM_WORLD, &req[2 * j + 1]) != MPI_SUCCESS)
			worker_fail("posting a message to parameter server %d failed", j);
		comm_count_p2p((double) len[j], server_rank(s, j));
	}
	comm_wait_all(2 * s->S, req);
	free(req);
	for (int j = 0; j < s->S; j++)
	{
		const PsHeader *h = (const PsHeader *) s->rbuf[j];
		size_t		lo = s->bound[j],
					n = s->bound[j + 1] - lo;

		if (h->nvals != (int32_t) n)
			worker_fail("parameter server %d sent %d weights for a range of %zu", j, h->nvals, n);
		memcpy(params + lo, s->rbuf[j] + sizeof(PsHeader), sizeof(float) * n);
		s->version[j] = h->version;
		s->server_bytes[j] = h->bytes;
		s->server_across[j] = h->bytes_across;
		if (h->staleness > s->stale_epoch)
			s->stale_epoch = h->staleness;
		if (h->staleness > s->server_stale[j])
			s->server_stale[j] = h->staleness;
		if (j == 0 && (h->flags & PS_EPOCH_DONE))
			s->epoch_done = 1;
	}
}

/* push this step's gradient to every server, get the weights back */
static void
ps_push_pull(Sync *s, const WorkerSpec *spec, float *params, const float *grads, float lr,
			 int B, bool epoch_end)
{
	size_t	   *len = xmalloc(sizeof(size_t) * s->S);
	PsEncoding	enc = wire_encoding(s);

	for (int j = 0; j < s->S; j++)
	{
		PsHeader   *h = (PsHeader *) s->sbuf[j];
		size_t		lo = s->bound[j],
					n = s->bound[j + 1] - lo;

		memset(h, 0, sizeof(*h));
		h->type = PS_PUSH;
		h->worker = worker_rank;
		h->clock = s->clock;
		/* ps: all of this clock; ssp: up to s clocks missing, none at an epoch's end */
		h->want = s->clock + 1 - (s->mode == DML_SYNC_SSP && !epoch_end ? spec->staleness : 0);
		h->version = s->version[j];
		h->count = B;
		h->lr = lr;
		h->encoding = enc;
		len[j] = sizeof(PsHeader) +
			ps_encode(enc, grads + lo, n, s->residual ? s->residual + lo : NULL, s->topk_ratio,
					  s->sbuf[j] + sizeof(PsHeader), &h->scale, &h->nvals, s->scratch,
					  s->order);
	}
	exchange(s, len, params);
	free(len);
	s->clock++;
}

/*
 * sync_step
 *		After a step's gradient (scaled by sync_grad_scale): agree, and
 *		update params (and, where replicas step locally, the optimizer
 *		state).  B is this rank's rows in the step, total all ranks'.
 *		epoch_end marks the epoch's last step.
 */
void
sync_step(Sync *s, const WorkerSpec *spec, float *params, float *grads, DmlOptimState *o,
		  float lr, int B, int64_t total, bool epoch_end)
{
	switch (s->mode)
	{
		case DML_SYNC_ALLREDUCE:
			if (s->shm != NULL && s->replicated)
			{
				replicated_step(s, spec, params, grads, o, lr, total);
				break;
			}
			if (s->shm != NULL)
			{
				shared_step(s, spec, o, lr, total);
				break;
			}
			allreduce_grads(s, grads);
			if (total > 0)
				train_optim_step(o, spec, params, grads, lr);
			break;
		case DML_SYNC_PS:
		case DML_SYNC_SSP:
		case DML_SYNC_ASYNC:
			ps_push_pull(s, spec, params, grads, lr, B, epoch_end);
			break;
		case DML_SYNC_AVERAGE:
			if (total > 0)
				train_optim_step(o, spec, params, grads, lr);
			if (++s->round >= spec->average_every || epoch_end)
			{
				average_params(s, params);
				s->round = 0;
			}
			break;
		case DML_SYNC_GOSSIP:
			if (total > 0)
				train_optim_step(o, spec, params, grads, lr);
			if (s->W > 1)
			{
				/* round r: send to rank + d, receive from rank - d, d = 1 + r mod (W - 1) */
				int			d = 1 + (int) (s->round % (s->W - 1));

				comm_sendrecv_float(params, s->scratch, s->np, (worker_rank + d) % s->W,
									(worker_rank - d + s->W) % s->W);
				for (size_t i = 0; i < s->np; i++)
					params[i] = 0.5f * (params[i] + s->scratch[i]);
			}
			s->round++;
			break;
	}
}

/* gossip: the replicas' average into scratch, and how far they are from it */
static void
gossip_average(Sync *s, const float *params)
{
	double		num = 0,
				den = 0,
				d[1];

	memcpy(s->scratch, params, sizeof(float) * s->np);
	average_params(s, s->scratch);
	for (size_t i = 0; i < s->np; i++)
	{
		double		e = (double) params[i] - s->scratch[i];

		num += e * e;
		den += (double) s->scratch[i] * s->scratch[i];
	}
	d[0] = den > 0 ? sqrt(num / den) : sqrt(num);
	comm_allreduce_max_double(d, 1);
	s->consensus = d[0];
}

/*
 * sync_epoch_end
 *		After an epoch's steps (collective over the data ranks): async
 *		waits for every worker at the servers and takes the same weights;
 *		gossip computes the replicas' average.  Returns the parameters to
 *		evaluate; *staleness gets the most staleness any rank saw in the
 *		epoch (NaN where the mode has none).  Also brings the bytes sent
 *		up to date.
 */
const float *
sync_epoch_end(Sync *s, float *params, double *staleness)
{
	const float *eval = params;
	double		extra = 0,
				extra_across = 0;

	*staleness = NAN;
	if (s->mode == DML_SYNC_ASYNC)
	{
		size_t	   *len = xmalloc(sizeof(size_t) * s->S);

		for (int j = 0; j < s->S; j++)
		{
			PsHeader   *h = (PsHeader *) s->sbuf[j];

			memset(h, 0, sizeof(*h));
			h->type = PS_BARRIER;
			h->worker = worker_rank;
			len[j] = sizeof(PsHeader);
		}
		exchange(s, len, params);
		free(len);
		s->epoch_done = 0;
	}
	else if (s->mode == DML_SYNC_GOSSIP)
	{
		gossip_average(s, params);
		eval = s->scratch;
	}
	if (s->mode == DML_SYNC_SSP || s->mode == DML_SYNC_ASYNC || s->mode == DML_SYNC_PS)
	{
		int64_t		st = s->stale_epoch;

		comm_allreduce_max_i64(&st, 1);
		*staleness = (double) st;
		s->stale_epoch = 0;
	}
	if (uses_servers(s))
		for (int j = 0; j < s->S; j++)
		{
			extra += s->server_bytes[j];
			extra_across += s->server_across[j];
		}
	comm_reduce_p2p(extra, extra_across);
	return eval;
}

/* rank 0, before a checkpoint: the servers' optimizer state into o */
void
sync_gather_state(Sync *s, DmlOptimState *o)
{
	if (!uses_servers(s) || worker_rank != 0)
		return;
	for (int j = 0; j < s->S; j++)
	{
		PsHeader   *h = (PsHeader *) s->sbuf[j];
		size_t		lo = s->bound[j],
					n = s->bound[j + 1] - lo;
		MPI_Status	st;
		const PsHeader *r = (const PsHeader *) s->rbuf[j];
		const float *v = (const float *) (s->rbuf[j] + sizeof(PsHeader));

		memset(h, 0, sizeof(*h));
		h->type = PS_STATE;
		h->worker = worker_rank;
		send_blocking(s, j, h, sizeof(PsHeader));
		if (MPI_Recv(s->rbuf[j], (int) s->buflen, MPI_BYTE, server_rank(s, j), PS_TAG_REPLY,
					 MPI_COMM_WORLD, &st) != MPI_SUCCESS || r->nvals != (int32_t) (2 * n))
			worker_fail("parameter server %d did not send its optimizer state", j);
		memcpy(o->s1 + lo, v, sizeof(float) * n);
		memcpy(o->s2 + lo, v + n, sizeof(float) * n);
		o->t = (int) r->clock;
	}
}

/* rank 0: every server ends its loop (also on the way out of an error) */
void
sync_stop_servers(void)
{
	PsHeader	h;

	if (server_count <= 0 || world_rank != 0)
		return;
	memset(&h, 0, sizeof(h));
	h.type = PS_STOP;
	for (int r = world_size - server_count; r < world_size; r++)
		MPI_Send(&h, sizeof(h), MPI_BYTE, r, PS_TAG_REQUEST, MPI_COMM_WORLD);
}

/*
 * sync_finish
 *		After the last epoch: gossip's model is the replicas' average; the
 *		servers stop; the most staleness each server reported is reduced
 *		over the workers (collective over the data ranks).
 */
void
sync_finish(Sync *s, float *params)
{
	if (s->mode == DML_SYNC_GOSSIP)
	{
		gossip_average(s, params);
		memcpy(params, s->scratch, sizeof(float) * s->np);
	}
	if (uses_servers(s))
	{
		comm_allreduce_max_i64(s->server_stale, s->S);
		sync_stop_servers();
	}
}

void
sync_free(Sync *s)
{
	if (s->sbuf)
		for (int j = 0; j < s->S; j++)
		{
			free(s->sbuf[j]);
			free(s->rbuf[j]);
		}
	free(s->sbuf);
	free(s->rbuf);
	free(s->bound);
	free(s->residual);
	free(s->scratch);
	free(s->order);
	free(s->version);
	free(s->server_bytes);
	free(s->server_across);
	free(s->server_stale);
	free(s->claim_order);
	free(s->claim_home);
}
