/*-------------------------------------------------------------------------
 *
 * server.c
 *	  A parameter-server rank (sync modes ps, ssp, async).  Server j of S
 *	  holds keys [np j / S, np (j + 1) / S) of the parameters and their
 *	  optimizer state, and applies the optimizer to them.
 *
 * ps and ssp count clocks: a worker's k-th push is its gradient of clock
 * k.  The pushes of one clock are summed in a ring of staleness + 1
 * accumulators; when all W workers have pushed clock A (the oldest not
 * applied), the server takes one optimizer step and A advances.  A push
 * also asks for weights that include every clock below `want`; the reply
 * waits until A >= want.  With staleness s a worker at clock c wants
 * c + 1 - s, so it never computes on weights missing more than s clocks:
 * that gap is the staleness recorded (and s = 0 is exactly ps).
 *
 * async applies every push at once with learning_rate / W, counts the
 * updates (the version), and records as staleness how many updates a
 * gradient's weights were behind.  An epoch ends when server 0 has
 * received the epoch's rows; the workers then meet at a barrier.
 *
 *-------------------------------------------------------------------------
 */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "sync.h"

typedef struct Server
{
	const WorkerSpec *spec;
	DmlSyncMode	mode;
	int			W;
	int			j;				/* this server's index */
	size_t		lo;
	size_t		n;				/* keys held */
	float	   *params;
	DmlOptimState	opt;
	int64_t		epoch_rows;		/* async: rows per epoch, all workers */
	int64_t		rows_seen;		/* async: rows pushed this epoch */

	/* ps / ssp */
	int			R;				/* ring slots: staleness + 1 */
	float	   *acc;			/* (R, n) */
	int		   *pushes;			/* (R) */
	int64_t    *rows;			/* (R) */
	float	   *lr;				/* (R) */
	int64_t		applied;		/* clocks applied: A */
	int64_t    *want;			/* (W) pending reply: clocks it needs, or -1 */
	int64_t    *wclock;			/* (W) the clock of that worker's last push */
	char	   *registered;		/* (W) */
	int			barrier;		/* async: workers at the barrier */

	int64_t		version;		/* updates applied */
	int			max_stale;
	double		bytes;			/* sent so far */
	float	   *tmp;			/* (n) one decoded push */
	unsigned char *reply;
	size_t		replylen;
} Server;

/* bytes of one reply carrying the weights */
static size_t
weights_len(const Server *sv)
{
	return sizeof(PsHeader) + sizeof(float) * sv->n;
}

/* the weights to worker w; bytes is this server's count as of the batch */
static void
reply_weights(Server *sv, int w, int staleness, int flags, double bytes)
{
	PsHeader   *h = (PsHeader *) sv->reply;

	memset(h, 0, sizeof(*h));
	h->version = sv->version;
	h->bytes = bytes;
	h->nvals = (int32_t) sv->n;
	h->staleness = staleness;
	h->flags = flags;
	memcpy(sv->reply + sizeof(PsHeader), sv->params, sizeof(float) * sv->n);
	if (MPI_Send(sv->reply, (int) weights_len(sv), MPI_BYTE, w, PS_TAG_REPLY,
				 MPI_COMM_WORLD) != MPI_SUCCESS)
		worker_fail("parameter server %d could not answer worker %d", sv->j, w);
}

/* answer every waiting worker whose clocks are in; one batch, one byte count */
static void
serve_pending(Server *sv)
{
	int			ready = 0;
	double		bytes;

	for (int w = 0; w < sv->W; w++)
		if (sv->want[w] >= 0 && sv->want[w] <= sv->applied)
			ready++;
	if (ready == 0)
		return;
	sv->bytes += (double) ready * weights_len(sv);
	bytes = sv->bytes;
	for (int w = 0; w < sv->W; w++)
		if (sv->want[w] >= 0 && sv->want[w] <= sv->applied)
		{
			/* the next gradient of w is clock wclock + 1; clocks applied < it are missing */
			int			stale = (int) (sv->wclock[w] + 1 - sv->applied);

			if (stale < 0)
				stale = 0;
			if (stale > sv->max_stale)
				sv->max_stale = stale;
			sv->want[w] = -1;
			reply_weights(sv, w, stale, 0, bytes);
		}
}

/* apply every clock all workers have pushed, oldest first */
static void
apply_clocks(Server *sv)
{
	for (;;)
	{
		int			slot = (int) (sv->applied % sv->R);
		float	   *acc = sv->acc + (size_t) slot * sv->n;

		if (sv->pushes[slot] < sv->W)
			return;
		if (sv->rows[slot] > 0)
		{
			train_optim_step(&sv->opt, sv->spec, sv->params, acc, sv->lr[slot]);
			sv->version++;
		}
		memset(acc, 0, sizeof(float) * sv->n);
		sv->pushes[slot] = 0;
		sv->rows[slot] = 0;
		sv->applied++;
	}
}

static void
on_push(Server *sv, const PsHeader *h, const unsigned char *payload)
{
	int			w = h->worker;

	if (sv->mode == DML_SYNC_ASYNC)
	{
		int			stale = (int) (sv->version - h->version);
		int			flags;

		memset(sv->tmp, 0, sizeof(float) * sv->n);
		ps_decode_add(h->encoding, payload, sv->n, h->nvals, h->scale, sv->tmp);
		if (h->count > 0)
		{
			train_optim_step(&sv->opt, sv->spec, sv->params, sv->tmp, h->lr / (float) sv->W);
			sv->version++;
		}
		if (stale > sv->max_stale)
			sv->max_stale = stale;
		sv->rows_seen += h->count;
		flags = sv->rows_seen >= sv->epoch_rows ? PS_EPOCH_DONE : 0;
		sv->bytes += (double) weights_len(sv);
		reply_weights(sv, w, stale, flags, sv->bytes);
		return;
	}

	/* ps, ssp: into the clock's accumulator */
	if (h->clock < sv->applied || h->clock >= sv->applied + sv->R)
		worker_fail("worker %d pushed clock %lld while server %d holds clocks %lld to %lld",
					w, (long long) h->clock, sv->j, (long long) sv->applied,
					(long long) (sv->applied + sv->R - 1));
	{
		int			slot = (int) (h->clock % sv->R);

		ps_decode_add(h->encoding, payload, sv->n, h->nvals, h->scale,
					  sv->acc + (size_t) slot * sv->n);
		sv->pushes[slot]++;
		sv->rows[slot] += h->count;
		sv->lr[slot] = h->lr;
	}
	sv->wclock[w] = h->clock;
	sv->want[w] = h->want < 0 ? 0 : h->want;	/* -1 marks "not waiting" */
	apply_clocks(sv);
	serve_pending(sv);
}

/* receive the next request from `source` into *buf, growing it */
static const PsHeader *
receive(unsigned char **buf, size_t *cap, int source, int *from)
{
	MPI_Status	st;
	int			len;

	comm_probe(source, PS_TAG_REQUEST, MPI_COMM_WORLD, &st);
	if (MPI_Get_count(&st, MPI_BYTE, &len) != MPI_SUCCESS)
		worker_fail("parameter server: probing for requests failed");
	if ((size_t) len > *cap)
	{
		free(*buf);
		*cap = (size_t) len;
		if ((*buf = malloc(*cap)) == NULL)
			worker_fail("out of memory for a request of %d bytes", len);
	}
	if (MPI_Recv(*buf, len, MPI_BYTE, st.MPI_SOURCE, PS_TAG_REQUEST, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE) != MPI_SUCCESS)
		worker_fail("parameter server: receiving a request failed");
	if ((size_t) len < sizeof(PsHeader))
		worker_fail("parameter server: a request of %d bytes is too short", len);
	*from = st.MPI_SOURCE;
	return (const PsHeader *) *buf;
}

static void *
zalloc(size_t n)
{
	void	   *p = calloc(n ? n : 1, 1);

	if (p == NULL)
		worker_fail("out of memory (%zu bytes on a parameter server)", n);
	return p;
}

void
server_main(const WorkerSpec *spec)
{
	Server		sv;
	unsigned char *buf = NULL;
	size_t		cap = 0;
	int			from;
	const PsHeader *h;
	size_t		np;

	memset(&sv, 0, sizeof(sv));
	sv.spec = spec;
	sv.mode = spec->sync;
	sv.W = world_size - server_count;
	sv.j = world_rank - sv.W;

	/* rank 0's first message is the shard (or the end, if the job failed early) */
	h = receive(&buf, &cap, 0, &from);
	if (h->type == PS_STOP)
		goto done;
	if (h->type != PS_INIT)
		worker_fail("parameter server %d expected its parameters, got message type %d", sv.j, h->type);
	np = (size_t) h->count;
	sv.lo = np * (size_t) sv.j / (size_t) server_count;
	sv.n = np * (size_t) (sv.j + 1) / (size_t) server_count - sv.lo;
	sv.epoch_rows = h->target;
	sv.params = zalloc(sizeof(float) * sv.n);
	sv.opt.kind = (DmlOptimizer) spec->optimizer;
	sv.opt.n = sv.n;
	sv.opt.s1 = zalloc(sizeof(float) * sv.n);
	sv.opt.s2 = zalloc(sizeof(float) * sv.n);
	sv.opt.t = (int) h->clock;
	{
		const float *v = (const float *) (buf + sizeof(PsHeader));

		memcpy(sv.params, v, sizeof(float) * sv.n);
		memcpy(sv.opt.s1, v + sv.n, sizeof(float) * sv.n);
		memcpy(sv.opt.s2, v + 2 * sv.n, sizeof(float) * sv.n);
	}
	sv.R = (sv.mode == DML_SYNC_SSP ? spec->staleness : 0) + 1;
	sv.acc = zalloc(sizeof(float) * sv.n * sv.R);
	sv.pushes = zalloc(sizeof(int) * sv.R);
	sv.rows = zalloc(sizeof(int64_t) * sv.R);
	sv.lr = zalloc(sizeof(float) * sv.R);
	sv.want = zalloc(sizeof(int64_t) * sv.W);
	sv.wclock = zalloc(sizeof(int64_t) * sv.W);
	sv.registered = zalloc(sv.W);
	sv.tmp = zalloc(sizeof(float) * sv.n);
	sv.replylen = sizeof(PsHeader) + 8 * sv.n;
	sv.reply = zalloc(sv.replylen);
	for (int w = 0; w < sv.W; w++)
		sv.want[w] = -1;

	for (;;)
	{
		int			w;

		h = receive(&buf, &cap, MPI_ANY_SOURCE, &from);
		w = h->worker;
		if (h->type == PS_STOP)
			break;
		if (w != from || w < 0 || w >= sv.W)
			worker_fail("parameter server %d: request from rank %d claims to be worker %d",
						sv.j, from, w);
		switch (h->type)
		{
			case PS_REGISTER:
				if ((size_t) h->count != sv.lo || (size_t) h->target != sv.lo + sv.n)
					worker_fail("worker %d registered keys [%lld, %lld) with server %d, which holds [%zu, %zu)",
								w, (long long) h->count, (long long) h->target, sv.j, sv.lo,
								sv.lo + sv.n);
				sv.registered[w] = 1;
				break;
			case PS_PUSH:
				if (!sv.registered[w])
					worker_fail("worker %d pushed to server %d before registering its range", w, sv.j);
				on_push(&sv, h, buf + sizeof(PsHeader));
				break;
			case PS_BARRIER:
				sv.want[w] = 0;
				if (++sv.barrier == sv.W)
				{
					double		bytes;

					sv.bytes += (double) sv.W * weights_len(&sv);
					bytes = sv.bytes;
					for (int k = 0; k < sv.W; k++)
					{
						sv.want[k] = -1;
						reply_weights(&sv, k, 0, 0, bytes);
					}
					sv.barrier = 0;
					sv.rows_seen = 0;
				}
				break;
			case PS_STATE:
				{
					PsHeader   *r = (PsHeader *) sv.reply;
					float	   *v = (float *) (sv.reply + sizeof(PsHeader));

					memset(r, 0, sizeof(*r));
					r->clock = sv.opt.t;
					r->nvals = (int32_t) (2 * sv.n);
					memcpy(v, sv.opt.s1, sizeof(float) * sv.n);
					memcpy(v + sv.n, sv.opt.s2, sizeof(float) * sv.n);
					if (MPI_Send(sv.reply, (int) (sizeof(PsHeader) + 8 * sv.n), MPI_BYTE, from,
								 PS_TAG_REPLY, MPI_COMM_WORLD) != MPI_SUCCESS)
						worker_fail("parameter server %d could not send its state", sv.j);
					sv.bytes += sizeof(PsHeader) + 8.0 * sv.n;
					break;
				}
			default:
				worker_fail("parameter server %d got unknown message type %d from rank %d",
							sv.j, h->type, from);
		}
	}
done:
	free(buf);
	free(sv.params);
	free(sv.opt.s1);
	free(sv.opt.s2);
	free(sv.acc);
	free(sv.pushes);
	free(sv.rows);
	free(sv.lr);
	free(sv.want);
	free(sv.wclock);
	free(sv.registered);
	free(sv.tmp);
	free(sv.reply);
}
