/*-------------------------------------------------------------------------
 *
 * stream.c
 *	  A slice larger than the rank's memory budget: spilled once to a local
 *	  file, then streamed block by block every epoch.
 *
 * The budget (spec->memory: dml.worker_memory, options "memory") covers
 * the rows a rank holds, the model, the optimizer's state and the
 * activations.  A rank loads as before until its rows would pass what the
 * budget leaves for data; from then on it spills: the rows it holds go to
 * a file of fixed-size blocks, and the rest of the slice passes through a
 * staging block of the same size.  The rows are spilled decoded, as the
 * float32 (and for the exact solvers float64) inputs the in-memory path
 * holds, one-hot and array features already expanded, all read under the
 * job's snapshot in the one load.
 *
 * prepare_data then makes one pass over the blocks: labels listed while
 * loading become output indices, rows are held out for validation (the
 * same hash of the same values as in memory), rows without a target or,
 * with nulls => 'skip', with a NULL feature are dropped, and the
 * statistics are summed.  Each block is written back in place.  The
 * standardization is applied to every block as it is read: the same float
 * operations on the same values as the in-memory path does once.
 *
 * An epoch visits the blocks in a new order (seeded by the job's seed, the
 * epoch and the rank) and draws rows at random from a window of W blocks
 * held at once: when a block of the window is used up, the next block
 * takes its place.  One thread reads the next block (and standardizes it)
 * while the training computes.  Evaluation and the exact solver read the
 * blocks in file order through the same read-ahead.
 *
 * The file lives in the job's spill directory (spec->spill_dir, which the
 * coordinator removes whenever the job ends, and before a restart, so a
 * restarted rank spills afresh from PostgreSQL); it is unlinked as soon as
 * it is open, so the space goes back to the file system the moment the
 * process ends, however it ends.  A full disk, a directory that cannot be
 * written, or a job's spill passing dml.spill_limit is an error that names
 * its cause, never retried; the messages name dml.spill_dir, not its path
 * (an ordinary role may not read the setting, nor the data directory's).
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "half.h"
#include "worker.h"

/* one block of rows, as laid out in the file and in a read buffer */
typedef struct SpillBlock
{
	int64_t		off;
	int			n;				/* rows now (after prepare: the kept rows) */
} SpillBlock;

/* a block's buffer and the Dataset view of its rows */
typedef struct BlockBuf
{
	char	   *mem;
	float	   *xf;				/* half spill: the inputs, widened */
	Dataset		view;
	int			block;			/* which block it holds, -1: none */
} BlockBuf;

struct Spill
{
	int			fd;
	int			d;
	int			wide;			/* float64 rows too (exact solvers) */
	int			keys;			/* label keys too (labels listed while loading) */
	int			half;			/* the float32 inputs kept as half floats */
	int			rows;			/* rows per block */
	int			nblocks;
	int			capblocks;
	SpillBlock *blocks;
	int64_t		bytes;			/* written */
	int64_t		ntrain;			/* rows for training and held out, after prepare */
	int64_t		nval;
	int64_t		limit;			/* this rank's share of spill_limit; 0: none */
	char		dir[1024];
	/* the standardization applied to each block read (set by prepare) */
	const DmlModel *model;
	const double *impute;		/* (d) float64 rows' NULL fill, or NULL */
	int			standardize_y;
	/* the read-ahead thread */
	pthread_t	thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int			started;
	BlockBuf   *want;			/* the buffer to fill, NULL: idle */
	int			want_block;
	int			raw;			/* skip the standardization */
	int			done;
	int			stop;
	int			err;			/* errno of a failed read */
	double		read_bytes;		/* what the reads took, for the metrics */
	double		read_seconds;
};

/* bytes of one row in the file */
static size_t
row_bytes(const Spill *sp)
{
	return (sp->half ? 2 : 4) * (size_t) sp->d + 4 + 1 + (sp->keys ? 8 : 0) +
		(sp->wide ? 8 * (size_t) sp->d + 8 : 0);
}

/*
 * A block of n rows: float64 sections first, then the int64 keys, then
 * float32 (or half floats), then the validation flags, so every section is
 * aligned.  A half spill's view has its inputs widened in xf.
 */
static void
block_view(const Spill *sp, char *mem, float *xf, int n, Dataset *v)
{
	char	   *p = mem;

	memset(v, 0, sizeof(*v));
	v->n = v->cap = n;
	v->d = sp->d;
	v->wide = sp->wide;
	if (sp->wide)
	{
		v->Xd = (double *) p;
		p += 8 * (size_t) n * sp->d;
		v->yd = (double *) p;
		p += 8 * (size_t) n;
	}
	if (sp->keys)
	{
		v->keys = (int64_t *) p;
		p += 8 * (size_t) n;
	}
	v->X = sp->half ? xf : (float *) p;
	p += (sp->half ? 2 : 4) * (size_t) n * sp->d;
	v->y = (float *) p;
	p += 4 * (size_t) n;
	v->val = (unsigned char *) p;
}

/* the peak resident set of this process, bytes */
double
stream_peak_rss(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return (double) ru.ru_maxrss * 1024.0;
}

/*
 * What the budget leaves for rows: the model's parameters, gradients, two
 * optimizer states, a sync buffer and a best copy, and the activations of
 * a minibatch (or of an evaluation pass) are set aside first; at least a
 * quarter of the budget stays for data.
 */
int64_t
stream_data_budget(const WorkerSpec *spec)
{
	int64_t		nparams = 0,
				widths = spec->ninputs;
	int			prev = spec->ninputs;
	int64_t		batch = spec->batch_size > EVAL_ROWS ? spec->batch_size : EVAL_ROWS;
	int64_t		set_aside;

	if (spec->memory <= 0)
		return INT64_MAX;
	for (int l = 0; l <= spec->nhidden; l++)
	{
		int			next = l < spec->nhidden ? spec->hidden[l] : spec->outputs;

		nparams += (int64_t) prev * next + next;
		widths += next;
		prev = next;
	}
	if (batch > 65536)
		batch = 65536;			/* a streamed step computes in chunks */
	set_aside = 4 * nparams * 8 + 4 * batch * widths * 3;
	if (set_aside > spec->memory * 3 / 4)
		set_aside = spec->memory * 3 / 4;
	return spec->memory - set_aside;
}

/*
 * bytes one in-memory row takes: its values, and the two row indices that
 * training keeps (or, streamed, a window slot's row list)
 */
int64_t
stream_row_cost(const WorkerSpec *spec)
{
	int			d = spec->ninputs;

	return 4 * (int64_t) d + 4 + 1 + 8 + (spec->discover ? 8 : 0) +
		(spec_float64(spec) ? 8 * (int64_t) d + 8 : 0);
}

/* ---------------------------------------------------------------------
 * Writing
 * --------------------------------------------------------------------- */

/*
 * stream_open
 *		Start spilling: make the job's directory (another rank on this host
 *		may have), open this rank's file and unlink it at once.  rows: the
 *		rows of one block.
 */
Spill *
stream_open(const WorkerSpec *spec, int d, int wide, int keys, int half, int rows)
{
	Spill	   *sp = calloc(1, sizeof(Spill));
	char		path[1100];

	if (sp == NULL)
		worker_fail("out of memory");
	if (spec->spill_dir == NULL || spec->spill_dir[0] == '\0')
		worker_fail("the job names no spill directory");
	snprintf(sp->dir, sizeof(sp->dir), "%s", spec->spill_dir);
	if (mkdir(sp->dir, 0700) != 0 && errno != EEXIST)
		worker_fail_final_at(__FILE__, __LINE__, "58030",
							 "Check that dml.spill_dir names a directory the server's OS user can write.",
							 "could not create the job's spill directory under dml.spill_dir: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/rank%d.spill", sp->dir, worker_rank);
	sp->fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (sp->fd < 0)
		worker_fail_final_at(__FILE__, __LINE__, "58030",
							 "Check that dml.spill_dir names a directory the server's OS user can write.",
							 "could not create a spill file under dml.spill_dir: %s", strerror(errno));
	unlink(path);
	sp->d = d;
	sp->wide = wide;
	sp->keys = keys;
	sp->half = half;
	sp->rows = rows;
	sp->limit = spec->spill_limit > 0 ? spec->spill_limit / (worker_world > 0 ? worker_world : 1) : 0;
	pthread_mutex_init(&sp->mu, NULL);
	pthread_cond_init(&sp->cv, NULL);
	return sp;
}

/* write len bytes at off, or fail naming the cause */
static void
spill_write(Spill *sp, const struct iovec *iov, int niov, int64_t off)
{
	size_t		len = 0;

	for (int i = 0; i < niov; i++)
		len += iov[i].iov_len;
	if (sp->limit > 0 && off + (int64_t) len > sp->limit)
		worker_fail_final_at(__FILE__, __LINE__, "53400",
							 "Raise dml.spill_limit, or the memory of the job (dml.worker_memory, options \"memory\").",
							 "spill of this job passes dml.spill_limit: worker %d would write more than its share of %lld bytes",
							 worker_rank, (long long) sp->limit);
	while (len > 0)
	{
		ssize_t		w = pwritev(sp->fd, iov, niov, off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			worker_fail_final_at(__FILE__, __LINE__, errno == ENOSPC ? "53100" : "58030",
								 "Free space in dml.spill_dir, point it to a larger file system, or give the job more memory.",
								 "could not write spill file under dml.spill_dir: %s",
								 w == 0 ? "short write" : strerror(errno));
		/* a short write: go on after what was written */
		off += w;
		len -= (size_t) w;
		while (niov > 0 && (size_t) w >= iov[0].iov_len)
		{
			w -= (ssize_t) iov[0].iov_len;
			iov++;
			niov--;
		}
		if (niov > 0 && w > 0)
		{
			struct iovec *copy = malloc(sizeof(struct iovec) * niov);

			memcpy(copy, iov, sizeof(struct iovec) * niov);
			copy[0].iov_base = (char *) copy[0].iov_base + w;
			copy[0].iov_len -= (size_t) w;
			spill_write(sp, copy, niov, off);
			free(copy);
			return;
		}
	}
}

/* rows [lo, lo + n) of ds as block b's record, at off */
static void
write_rows(Spill *sp, const Dataset *ds, int64_t lo, int n, int64_t off)
{
	struct iovec iov[6];
	int			k = 0;
	uint16_t   *h = NULL;
	const float *x = ds->X + lo * sp->d;
	size_t		nx = (size_t) n * sp->d;

	if (sp->half)
	{
		/* a value past fp16's range would become infinite: refuse it */
		for (size_t i = 0; i < nx; i++)
			if (isfinite(x[i]) && fabsf(x[i]) > 65504.0f)
				worker_fail_final_at(__FILE__, __LINE__, "22003",
									 "Use options => '{\"spill\": \"float32\"}', or scale the column.",
									 "a feature value (%g) does not fit the fp16 spill", x[i]);
		h = malloc(2 * (nx ? nx : 1));
		if (h == NULL)
			worker_fail("out of memory");
		half_from_float(h, x, nx, 1.0f);
	}

#define IOV(ptr, size) do { iov[k].iov_base = (void *) (ptr); iov[k].iov_len = (size); k++; } while (0)
	if (sp->wide)
	{
		IOV(ds->Xd + lo * sp->d, 8 * (size_t) n * sp->d);
		IOV(ds->yd + lo, 8 * (size_t) n);
	}
	if (sp->keys)
		IOV(ds->keys + lo, 8 * (size_t) n);
	if (sp->half)
		IOV(h, 2 * nx);
	else
		IOV(x, 4 * nx);
	IOV(ds->y + lo, 4 * (size_t) n);
	IOV(ds->val + lo, (size_t) n);
#undef IOV
	spill_write(sp, iov, k, off);
	free(h);
}

/*
 * stream_flush
 *		Append ds's rows to the spill as blocks of sp->rows (the last may be
 *		short) and empty ds.
 */
void
stream_flush(Spill *sp, Dataset *ds)
{
	for (int64_t lo = 0; lo < ds->n; lo += sp->rows)
	{
		int			n = (int) (ds->n - lo < sp->rows ? ds->n - lo : sp->rows);
		int64_t		off = sp->bytes;

		if (sp->nblocks == sp->capblocks)
		{
			sp->capblocks = sp->capblocks ? 2 * sp->capblocks : 64;
			sp->blocks = realloc(sp->blocks, sizeof(SpillBlock) * sp->capblocks);
			if (sp->blocks == NULL)
				worker_fail("out of memory");
		}
		write_rows(sp, ds, lo, n, off);
		sp->blocks[sp->nblocks].off = off;
		sp->blocks[sp->nblocks].n = n;
		sp->nblocks++;
		sp->bytes += (int64_t) row_bytes(sp) * n;
	}
	ds->n = 0;
}

/* ---------------------------------------------------------------------
 * Reading
 * --------------------------------------------------------------------- */

static int
buf_alloc(const Spill *sp, BlockBuf *b)
{
	b->mem = malloc(row_bytes(sp) * (size_t) sp->rows + 64);
	b->xf = sp->half ? malloc(sizeof(float) * (size_t) sp->rows * sp->d + 64) : NULL;
	b->block = -1;
	return b->mem != NULL && (!sp->half || b->xf != NULL);
}

/* the standardization of prepare_data, on the rows of a block just read */
static void
block_transform(const Spill *sp, Dataset *v)
{
	const DmlModel *m = sp->model;
	int			d = sp->d;

	if (m == NULL)
		return;
	for (int64_t i = 0; i < v->n; i++)
	{
		float	   *x = v->X + (size_t) i * d;

		if (sp->wide && sp->impute)
			for (int c = 0; c < d; c++)
				if (isnan(v->Xd[(size_t) i * d + c]))
					v->Xd[(size_t) i * d + c] = sp->impute[c];
		for (int c = 0; c < d; c++)
		{
			float		val = isnan(x[c]) ? m->in_mean[c] : x[c];

			x[c] = (val - m->in_mean[c]) * m->in_scale[c];
		}
		if (sp->standardize_y)
			v->y[i] = (v->y[i] - m->out_mean[0]) / m->out_scale[0];
	}
}

/* read block k into b; errno on failure, else 0 */
static int
read_block(Spill *sp, BlockBuf *b, int k, int raw)
{
	size_t		len = row_bytes(sp) * (size_t) sp->blocks[k].n;
	size_t		got = 0;
	double		t0 = dml_clock_seconds();

	while (got < len)
	{
		ssize_t		r = pread(sp->fd, b->mem + got, len - got, sp->blocks[k].off + (int64_t) got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r == 0 ? EIO : errno;
		got += (size_t) r;
	}
	sp->read_seconds += dml_clock_seconds() - t0;
	sp->read_bytes += (double) len;
	block_view(sp, b->mem, b->xf, sp->blocks[k].n, &b->view);
	if (sp->half)
	{
		/* the half section sits after the float64 and key sections */
		size_t		at = (sp->wide ? 8 * ((size_t) sp->d + 1) : 0) + (sp->keys ? 8 : 0);

		half_to_float(b->xf, (const uint16_t *) (b->mem + at * sp->blocks[k].n),
					  (size_t) sp->blocks[k].n * sp->d, 1.0f);
	}
	b->block = k;
	if (!raw)
		block_transform(sp, &b->view);
	return 0;
}

static void *
reader_main(void *arg)
{
	Spill	   *sp = arg;

	pthread_mutex_lock(&sp->mu);
	for (;;)
	{
		while (sp->want == NULL && !sp->stop)
			pthread_cond_wait(&sp->cv, &sp->mu);
		if (sp->stop)
			break;
		{
			BlockBuf   *b = sp->want;
			int			k = sp->want_block;
			int			raw = sp->raw;
			int			err;

			pthread_mutex_unlock(&sp->mu);
			err = read_block(sp, b, k, raw);
			pthread_mutex_lock(&sp->mu);
			sp->err = err;
			sp->want = NULL;
			sp->done = 1;
			pthread_cond_broadcast(&sp->cv);
		}
	}
	pthread_mutex_unlock(&sp->mu);
	return NULL;
}

/* start reading block k into b on the read-ahead thread */
static void
read_ahead(Spill *sp, BlockBuf *b, int k, int raw)
{
	if (!sp->started)
	{
		if (pthread_create(&sp->thread, NULL, reader_main, sp) != 0)
			worker_fail("could not start the spill reader thread");
		sp->started = 1;
	}
	pthread_mutex_lock(&sp->mu);
	sp->want = b;
	sp->want_block = k;
	sp->raw = raw;
	sp->done = 0;
	pthread_cond_broadcast(&sp->cv);
	pthread_mutex_unlock(&sp->mu);
}

/* wait for the read read_ahead started */
static void
read_wait(Spill *sp)
{
	int			err;

	pthread_mutex_lock(&sp->mu);
	while (!sp->done)
		pthread_cond_wait(&sp->cv, &sp->mu);
	err = sp->err;
	pthread_mutex_unlock(&sp->mu);
	if (err != 0)
		worker_fail_final_at(__FILE__, __LINE__, "58030", NULL,
							 "could not read spill file under dml.spill_dir: %s", strerror(err));
}

/*
 * stream_scan
 *		Call fn(view, arg) on every block in file order, standardized
 *		(unless raw), the next block read while fn runs.
 */
void
stream_scan(Spill *sp, int raw, void (*fn) (const Dataset *view, void *arg), void *arg)
{
	BlockBuf	b[2];

	if (sp->nblocks == 0)
		return;
	if (!buf_alloc(sp, &b[0]) || !buf_alloc(sp, &b[1]))
		worker_fail("out of memory for spill blocks");
	read_ahead(sp, &b[0], 0, raw);
	for (int k = 0; k < sp->nblocks; k++)
	{
		BlockBuf   *cur = &b[k % 2];

		read_wait(sp);
		if (k + 1 < sp->nblocks)
			read_ahead(sp, &b[(k + 1) % 2], k + 1, raw);
		fn(&cur->view, arg);
	}
	free(b[0].mem);
	free(b[1].mem);
	free(b[0].xf);
	free(b[1].xf);
}

/*
 * stream_rewrite
 *		Read every block raw, let fn change its rows (it may keep fewer:
 *		view->n), and write it back in place.  Single-threaded: prepare's
 *		one pass.
 */
void
stream_rewrite(Spill *sp, void (*fn) (Dataset *view, void *arg), void *arg)
{
	BlockBuf	b;

	sp->ntrain = sp->nval = 0;
	if (sp->nblocks == 0)
		return;
	if (!buf_alloc(sp, &b))
		worker_fail("out of memory for a spill block");
	for (int k = 0; k < sp->nblocks; k++)
	{
		int			err = read_block(sp, &b, k, 1);

		if (err != 0)
			worker_fail_final_at(__FILE__, __LINE__, "58030", NULL,
								 "could not read spill file under dml.spill_dir: %s", strerror(err));
		fn(&b.view, arg);
		for (int64_t i = 0; i < b.view.n; i++)
		{
			if (b.view.val[i])
				sp->nval++;
			else
				sp->ntrain++;
		}
		/*
		 * the kept rows, at the front of each section of the buffer, written
		 * back in place as a block of their count (from memory: no overlap)
		 */
		if (b.view.n > 0)
			write_rows(sp, &b.view, 0, (int) b.view.n, sp->blocks[k].off);
		sp->blocks[k].n = (int) b.view.n;
	}
	free(b.mem);
	free(b.xf);
}

/* the standardization to apply to every block from now on */
void
stream_set_transform(Spill *sp, const DmlModel *m, const double *impute, int standardize_y)
{
	sp->model = m;
	sp->impute = impute;
	sp->standardize_y = standardize_y;
}

/* rows in the blocks */
int64_t
stream_rows(const Spill *sp)
{
	int64_t		n = 0;

	for (int k = 0; k < sp->nblocks; k++)
		n += sp->blocks[k].n;
	return n;
}

int64_t
stream_bytes(const Spill *sp)
{
	return sp->bytes;
}

/* bytes read back from the spill, and the seconds the reads took */
void
stream_read_figures(const Spill *sp, double *bytes, double *seconds)
{
	*bytes = sp->read_bytes;
	*seconds = sp->read_seconds;
}

int
stream_block_rows(const Spill *sp)
{
	return sp->rows;
}


/* ---------------------------------------------------------------------
 * An epoch's rows: blocks in a seeded order, rows drawn from a window
 * --------------------------------------------------------------------- */

struct StreamEpoch
{
	Spill	   *sp;
	int			W;
	BlockBuf   *slot;			/* (W) the window */
	int		  **rows;			/* (W) each slot's training rows left, shuffled */
	int		   *left;			/* (W) */
	int64_t		total_left;
	BlockBuf	spare;			/* the block being read ahead */
	int			ahead;			/* spare holds (or is reading) a block */
	int		   *order;			/* (nblocks) */
	int			next;			/* next position in order to read */
	DmlRng		rng;
};

/* a block just read takes slot s: its training rows, shuffled */
static void
slot_fill(StreamEpoch *e, int s)
{
	const Dataset *v = &e->slot[s].view;
	int			n = 0;

	for (int64_t i = 0; i < v->n; i++)
		if (!v->val[i])
			e->rows[s][n++] = (int) i;
	dml_shuffle(e->rows[s], n, &e->rng);
	e->left[s] = n;
	e->total_left += n;
}

/* start reading the next block of the order into the spare buffer */
static void
epoch_read_next(StreamEpoch *e)
{
	if (e->next < e->sp->nblocks)
	{
		read_ahead(e->sp, &e->spare, e->order[e->next++], 0);
		e->ahead = 1;
	}
	else
		e->ahead = 0;
}

/* refill slot s from the block read ahead; false when none is left */
static bool
epoch_refill(StreamEpoch *e, int s)
{
	BlockBuf	tmp;

	while (e->ahead)
	{
		read_wait(e->sp);
		tmp = e->slot[s];
		e->slot[s] = e->spare;
		e->spare = tmp;
		slot_fill(e, s);
		epoch_read_next(e);
		if (e->left[s] > 0)
			return true;
	}
	return false;
}

StreamEpoch *
stream_epoch_new(Spill *sp, int window)
{
	StreamEpoch *e = calloc(1, sizeof(StreamEpoch));

	if (e == NULL)
		worker_fail("out of memory");
	e->sp = sp;
	e->W = window < 1 ? 1 : window;
	e->slot = calloc(e->W, sizeof(BlockBuf));
	e->rows = calloc(e->W, sizeof(int *));
	e->left = calloc(e->W, sizeof(int));
	e->order = malloc(sizeof(int) * (sp->nblocks ? sp->nblocks : 1));
	if (!e->slot || !e->rows || !e->left || !e->order || !buf_alloc(sp, &e->spare))
		worker_fail("out of memory for the stream's window");
	for (int s = 0; s < e->W; s++)
	{
		e->rows[s] = malloc(sizeof(int) * sp->rows);
		if (e->rows[s] == NULL || !buf_alloc(sp, &e->slot[s]))
			worker_fail("out of memory for the stream's window");
	}
	return e;
}

/*
 * stream_epoch_begin
 *		A pass over the blocks in a new order, seeded by seed and epoch
 *		(and the rank): the window is filled, the next block read ahead.
 */
void
stream_epoch_begin(StreamEpoch *e, uint64_t seed, int epoch)
{
	Spill	   *sp = e->sp;

	if (e->ahead)
		read_wait(sp);			/* a pass cut short: let its read finish */
	dml_rng_seed(&e->rng, seed * 1000003u + (uint64_t) epoch * 7919u + (uint64_t) worker_rank);
	for (int k = 0; k < sp->nblocks; k++)
		e->order[k] = k;
	dml_shuffle(e->order, sp->nblocks, &e->rng);
	e->next = 0;
	e->total_left = 0;
	for (int s = 0; s < e->W; s++)
		e->left[s] = 0;
	epoch_read_next(e);
	for (int s = 0; s < e->W; s++)
		epoch_refill(e, s);
}

/*
 * stream_epoch_take
 *		The next B training rows of the pass into Xb, yb: each drawn at
 *		random from the rows left in the window.  Returns the rows given
 *		(fewer at the pass's end).
 */
int
stream_epoch_take(StreamEpoch *e, int B, float *Xb, float *yb)
{
	int			d = e->sp->d;
	int			got = 0;

	while (got < B && e->total_left > 0)
	{
		int64_t		r = (int64_t) (dml_rng_uniform(&e->rng) * (double) e->total_left);
		int			s = 0;
		int			i;

		while (r >= e->left[s])
			r -= e->left[s++];
		i = e->rows[s][--e->left[s]];
		e->total_left--;
		memcpy(Xb + (size_t) got * d, e->slot[s].view.X + (size_t) i * d, sizeof(float) * d);
		yb[got] = e->slot[s].view.y[i];
		got++;
		if (e->left[s] == 0)
			epoch_refill(e, s);
	}
	return got;
}

void
stream_epoch_free(StreamEpoch *e)
{
	if (e == NULL)
		return;
	if (e->ahead)
		read_wait(e->sp);
	for (int s = 0; s < e->W; s++)
	{
		free(e->slot[s].mem);
		free(e->slot[s].xf);
		free(e->rows[s]);
	}
	free(e->spare.mem);
	free(e->spare.xf);
	free(e->slot);
	free(e->rows);
	free(e->left);
	free(e->order);
	free(e);
}

/* the rank's training and held-out rows (counted by stream_rewrite) */
void
stream_counts(const Spill *sp, int64_t *ntrain, int64_t *nval)
{
	*ntrain = sp->ntrain;
	*nval = sp->nval;
}
