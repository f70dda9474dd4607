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
 * job's snapshot in the one load.  On request (options "spill") the
 * float32 inputs are kept compact: as half floats ("fp16", a value past
 * fp16's range refused), or as one byte each ("int8": integer values, a
 * block's column stored as offsets from its least value, exact, and
 * refused when a value is not an integer or a block's column spans more
 * than 256 of them).  An epoch's window keeps a compact block as read and
 * widens each row as it is drawn (so a block of compact rows holds more of
 * them for the same budget); a scan's blocks are widened whole.
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
 * coordinator removes whenever the job ends, however it ends, and keeps
 * across a restart): a restarted rank reuses its spill when the
 * description written beside it after prepare and every block's checksum
 * agree, and spills afresh from PostgreSQL otherwise (see stream_reuse).
 * A full disk, a directory that cannot be written, or a job's spill
 * passing dml.spill_limit is an error that names its cause, never retried;
 * the messages name dml.spill_dir, not its path (an ordinary role may not
 * read the setting, nor the data directory's).
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

#include "comm.h"
#include "half.h"
#include "worker.h"

/* one block of rows, as laid out in the file and in a read buffer */
typedef struct SpillBlock
{
	int64_t		off;
	int			n;				/* rows now (after prepare: the kept rows) */
	uint64_t	sum;			/* checksum of its bytes in the file */
} SpillBlock;

/* a block's buffer and the Dataset view of its rows */
typedef struct BlockBuf
{
	char	   *mem;
	float	   *xf;				/* compact spill: the inputs, widened; NULL in an
								 * epoch's window, whose rows are widened as drawn */
	const char *cx;				/* compact spill: the inputs as in the file */
	Dataset		view;
	int			block;			/* which block it holds, -1: none */
} BlockBuf;

struct Spill
{
	int			fd;
	int			d;
	int			wide;			/* float64 rows too (exact solvers) */
	int			keys;			/* label keys too (labels listed while loading) */
	int			format;			/* DML_SPILL_*: how the float32 inputs are kept */
	int			rows;			/* rows per block */
	int			nblocks;
	int			capblocks;
	SpillBlock *blocks;
	int64_t		bytes;			/* written */
	int64_t		ntrain;			/* rows for training and held out, after prepare */
	int64_t		nval;
	int64_t		limit;			/* this rank's share of spill_limit; 0: none */
	char		dir[1024];
	char		path[1100];		/* the rows */
	char		meta[1100];		/* what a restarted rank needs to reuse them */
	uint64_t	key;			/* the job's reading of this rank's slice; 0: not reusable */
	int			reused;			/* found intact by a restarted rank */
	/* what loading saw, for prepare (a restarted rank that reuses reads no rows) */
	int			nfacts;
	int64_t    *facts;			/* 3 nfeatures counts, 3 target counts, rows loaded */
	int			nseen;			/* label keys listed while loading */
	int			seen_overflow;
	int64_t    *seen;
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

/* this process's spill, for the test hook stream_spoil */
static Spill *current_spill;

/* bytes of a block's inputs in the file: 4, 2 or 1 per value (int8: and a header) */
static size_t
x_bytes(const Spill *sp, int n)
{
	size_t		nx = (size_t) n * sp->d;

	switch (sp->format)
	{
		case DML_SPILL_FP16:
			return 2 * nx;
		case DML_SPILL_INT8:
			/* each column's least value and whether code 255 means NULL */
			return 5 * (size_t) sp->d + nx;
		default:
			return 4 * nx;
	}
}

/* bytes of a block of n rows in the file */
static size_t
block_bytes(const Spill *sp, int n)
{
	return x_bytes(sp, n) + (size_t) n * (4 + 1 + (sp->keys ? 8 : 0) +
										  (sp->wide ? 8 * (size_t) sp->d + 8 : 0));
}

/* where a block's inputs start: after the float64 rows, the keys and y */
static size_t
x_at(const Spill *sp, int n)
{
	return (size_t) n * ((sp->wide ? 8 * (size_t) sp->d + 8 : 0) + (sp->keys ? 8 : 0) + 4);
}

/*
 * A block of n rows: float64 sections first, then the int64 keys, then y
 * in float32, then the inputs (float32, half floats, or int8's header and
 * codes), then the validation flags, so every section is aligned.  A
 * compact spill's view has its inputs widened in xf.
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
	v->y = (float *) p;
	p += 4 * (size_t) n;
	v->X = sp->format != DML_SPILL_FLOAT32 ? xf : (float *) p;
	p += x_bytes(sp, n);
	v->val = (unsigned char *) p;
}

/*
 * An int8 block's inputs: per column, its least value lo (float32) and
 * whether it has NULLs, then each value as the byte v - lo, 255 for NULL
 * in a column that has them.  Exact, and only for what it holds exactly:
 * integers whose span in the block's column fits the codes.
 */
static void
int8_encode(const Spill *sp, const float *x, int n, char *out)
{
	int			d = sp->d;
	float	   *lo = (float *) out;
	unsigned char *nulls = (unsigned char *) out + 4 * (size_t) d;
	unsigned char *codes = nulls + d;

	for (int c = 0; c < d; c++)
	{
		float		mn = INFINITY,
					mx = -INFINITY;

		nulls[c] = 0;
		for (int i = 0; i < n; i++)
		{
			float		v = x[(size_t) i * d + c];

			if (isnan(v))
			{
				nulls[c] = 1;
				continue;
			}
			if (!isfinite(v) || v != rintf(v))
				worker_fail_final_at(__FILE__, __LINE__, "22003",
									 "The int8 spill keeps integer-valued inputs such as pixels from 0 to 255; use options => '{\"spill\": \"fp16\"}' or \"float32\".",
									 "a feature value (%g) of input %d is not an integer: it does not fit the int8 spill", v, c + 1);
			mn = v < mn ? v : mn;
			mx = v > mx ? v : mx;
		}
		if (mn > mx)
			mn = mx = 0;		/* only NULLs */
		if (mx - mn > (nulls[c] ? 254.0f : 255.0f))
			worker_fail_final_at(__FILE__, __LINE__, "22003",
								 "The int8 spill keeps integer-valued inputs spanning at most 256 values (255 with NULLs) within each block, such as pixels from 0 to 255; use options => '{\"spill\": \"fp16\"}' or \"float32\".",
								 "the values of input %d span %g to %g: they do not fit the int8 spill", c + 1, mn, mx);
		lo[c] = mn;
	}
	for (int i = 0; i < n; i++)
		for (int c = 0; c < d; c++)
		{
			float		v = x[(size_t) i * d + c];

			codes[(size_t) i * d + c] = isnan(v) ? 255 : (unsigned char) (v - lo[c]);
		}
}

/* an int8 block's inputs back into float32 (NaN for NULL) */
static void
int8_decode(const Spill *sp, const char *in, int n, float *x)
{
	int			d = sp->d;
	const float *lo = (const float *) in;
	const unsigned char *nulls = (const unsigned char *) in + 4 * (size_t) d;
	const unsigned char *codes = nulls + d;

	for (int i = 0; i < n; i++)
		for (int c = 0; c < d; c++)
		{
			unsigned char k = codes[(size_t) i * d + c];

			x[(size_t) i * d + c] = nulls[c] && k == 255 ? NAN : lo[c] + (float) k;
		}
}

/*
 * A checksum of a block's bytes as written, 8 at a time across the pieces
 * of a write (a restarted rank compares it before reusing the block).
 */
typedef struct SpillSum
{
	uint64_t	h;
	uint64_t	tail;
	int			ntail;
} SpillSum;

static inline uint64_t
sum_mix(uint64_t h, uint64_t w)
{
	h ^= w * 0x9E3779B97F4A7C15ULL;
	h = (h << 31) | (h >> 33);
	return h * 0xC2B2AE3D27D4EB4FULL;
}

static void
sum_add(SpillSum *ss, const void *p, size_t len)
{
	const unsigned char *b = p;

	/* finish the word a piece before left partly filled */
	for (; len > 0 && ss->ntail > 0; len--)
	{
		ss->tail |= (uint64_t) *b++ << (8 * ss->ntail);
		if (++ss->ntail == 8)
		{
			ss->h = sum_mix(ss->h, ss->tail);
			ss->tail = 0;
			ss->ntail = 0;
		}
	}
	for (; len >= 8; b += 8, len -= 8)
	{
		uint64_t	w;

		memcpy(&w, b, 8);
		ss->h = sum_mix(ss->h, w);
	}
	/* fewer than 8 left, and ntail is 0 */
	for (unsigned i = 0; i < (unsigned) len && i < 8; i++)
		ss->tail |= (uint64_t) b[i] << (8 * i);
	if (len > 0)
		ss->ntail = (int) len;
}

static uint64_t
sum_end(SpillSum *ss)
{
	return sum_mix(ss->h, ss->tail ^ ((uint64_t) ss->ntail << 56));
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
 * What identifies this rank's reading of its slice: the job's snapshot, the
 * rank among how many, its queries and the spill's layout.  0 when a
 * restart may not reuse a spill: without a snapshot of the caller's (rank
 * 0 exports a new one at each launch), with a shard, which a restart
 * may read under a new snapshot, with a view (rank 0 reads it again to
 * deal the rows of any rank, load.c), or on another host than rank 0's (the
 * coordinator removes the spill directory on its own host only).
 */
static uint64_t
spill_key(const WorkerSpec *spec, int d, int wide, int keys, int format, int rows)
{
	SpillSum	ss = {0x5350494C4CULL, 0, 0};
	int			layout[7] = {d, wide, keys, format, rows, worker_rank, worker_world};
	uint64_t	key;

	if (spec->snapshot == NULL || spec->snapshot[0] == '\0' || comm_elsewhere(0))
		return 0;
	sum_add(&ss, spec->snapshot, strlen(spec->snapshot) + 1);
	sum_add(&ss, layout, sizeof(layout));
	for (int i = 0; i < spec->nslices; i++)
	{
		/* a view's rows come dealt by rank 0, who reads it afresh */
		if (spec->slices[i].whole)
			return 0;
		if (spec->slices[i].rank != worker_rank)
			continue;
		if (spec->slices[i].shard > 0)
			return 0;
		sum_add(&ss, spec->slices[i].query, strlen(spec->slices[i].query) + 1);
	}
	key = sum_end(&ss);
	return key ? key : 1;
}

/* the job's directory (another rank on this host may have made it) and this rank's paths */
static void
spill_paths(Spill *sp, const WorkerSpec *spec)
{
	if (spec->spill_dir == NULL || spec->spill_dir[0] == '\0')
		worker_fail("the job names no spill directory");
	snprintf(sp->dir, sizeof(sp->dir), "%s", spec->spill_dir);
	snprintf(sp->path, sizeof(sp->path), "%s/rank%d.spill", sp->dir, worker_rank);
	snprintf(sp->meta, sizeof(sp->meta), "%s/rank%d.meta", sp->dir, worker_rank);
}

/*
 * stream_open
 *		Start spilling: make the job's directory (another rank on this host
 *		may have), and this rank's file, afresh.  rows: the rows of one
 *		block.  The file stays until the coordinator removes the directory
 *		when the job ends; a restarted rank may reuse it (stream_reuse).
 */
Spill *
stream_open(const WorkerSpec *spec, int d, int wide, int keys, int format, int rows)
{
	Spill	   *sp = calloc(1, sizeof(Spill));

	if (sp == NULL)
		worker_fail("out of memory");
	spill_paths(sp, spec);
	if (mkdir(sp->dir, 0700) != 0 && errno != EEXIST)
		worker_fail_final_at(__FILE__, __LINE__, "58030",
							 "Check that dml.spill_dir names a directory the server's OS user can write.",
							 "could not create the job's spill directory under dml.spill_dir: %s", strerror(errno));
	/* what an earlier launch left is no longer a complete spill */
	unlink(sp->meta);
	sp->fd = open(sp->path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (sp->fd < 0)
		worker_fail_final_at(__FILE__, __LINE__, "58030",
							 "Check that dml.spill_dir names a directory the server's OS user can write.",
							 "could not create a spill file under dml.spill_dir: %s", strerror(errno));
	sp->key = spill_key(spec, d, wide, keys, format, rows);
	if (sp->key == 0)
		unlink(sp->path);		/* not reusable: the space goes back when the process ends */
	sp->d = d;
	sp->wide = wide;
	sp->keys = keys;
	sp->format = format;
	sp->rows = rows;
	sp->limit = spec->spill_limit > 0 ? spec->spill_limit / (worker_world > 0 ? worker_world : 1) : 0;
	pthread_mutex_init(&sp->mu, NULL);
	pthread_cond_init(&sp->cv, NULL);
	current_spill = sp;
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

/* rows [lo, lo + n) of ds as block b's record, at off; returns the bytes' checksum */
static uint64_t
write_rows(Spill *sp, const Dataset *ds, int64_t lo, int n, int64_t off)
{
	SpillSum	ss = {0, 0, 0};
	struct iovec iov[6];
	int			k = 0;
	uint16_t   *h = NULL;
	char	   *b8 = NULL;
	const float *x = ds->X + lo * sp->d;
	size_t		nx = (size_t) n * sp->d;

	if (sp->format == DML_SPILL_INT8)
	{
		b8 = malloc(x_bytes(sp, n));
		if (b8 == NULL)
			worker_fail("out of memory");
		int8_encode(sp, x, n, b8);
	}
	if (sp->format == DML_SPILL_FP16)
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
	IOV(ds->y + lo, 4 * (size_t) n);
	if (h)
		IOV(h, 2 * nx);
	else if (b8)
		IOV(b8, x_bytes(sp, n));
	else
		IOV(x, 4 * nx);
	IOV(ds->val + lo, (size_t) n);
#undef IOV
	for (int i = 0; i < k; i++)
		sum_add(&ss, iov[i].iov_base, iov[i].iov_len);
	spill_write(sp, iov, k, off);
	free(h);
	free(b8);
	return sum_end(&ss);
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
		sp->blocks[sp->nblocks].sum = write_rows(sp, ds, lo, n, off);
		sp->blocks[sp->nblocks].off = off;
		sp->blocks[sp->nblocks].n = n;
		sp->nblocks++;
		sp->bytes += (int64_t) block_bytes(sp, n);
	}
	ds->n = 0;
}

/* ---------------------------------------------------------------------
 * Reuse by a restarted rank
 *
 * Once prepare has written the blocks back, the rank writes beside them
 * what it would need to be that rank again without reading PostgreSQL:
 * the key of its reading (spill_key), the layout, each block's place,
 * rows and checksum, and what loading saw (the counts prepare checks and
 * the label keys listed).  A restarted rank (spec->attempt > 0) with the
 * same key, whose file has the size and every block the checksum written,
 * takes the spill as it is; prepare's pass over it changes nothing and
 * sums the same statistics.  Anything else, a missing or damaged file
 * included, and it spills afresh from PostgreSQL.
 * --------------------------------------------------------------------- */

typedef struct SpillMetaHead
{
	char		magic[8];
	uint64_t	key;
	int32_t		d,
				wide,
				keys,
				format,
				rows,
				nblocks;
	int64_t		bytes;
	int32_t		nfacts,
				nseen,
				seen_overflow,
				pad;
} SpillMetaHead;

#define SPILL_META_MAGIC "dmlspl1"

static bool
write_all_fd(int fd, const void *p, size_t len, SpillSum *ss)
{
	const char *b = p;

	sum_add(ss, p, len);
	while (len > 0)
	{
		ssize_t		w = write(fd, b, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		b += w;
		len -= (size_t) w;
	}
	return true;
}

/*
 * The spill's description, written whole under another name and renamed:
 * a rank killed while writing it leaves none.  Not being able to write it
 * only means a restart spills afresh.
 */
static void
meta_write(Spill *sp)
{
	char		tmp[1110];
	SpillMetaHead head;
	SpillSum	ss = {0, 0, 0};
	uint64_t	sum;
	int			fd;
	bool		ok;

	if (sp->key == 0 || sp->facts == NULL)
		return;
	memset(&head, 0, sizeof(head));
	memcpy(head.magic, SPILL_META_MAGIC, 8);
	head.key = sp->key;
	head.d = sp->d;
	head.wide = sp->wide;
	head.keys = sp->keys;
	head.format = sp->format;
	head.rows = sp->rows;
	head.nblocks = sp->nblocks;
	head.bytes = sp->bytes;
	head.nfacts = sp->nfacts;
	head.nseen = sp->nseen;
	head.seen_overflow = sp->seen_overflow;
	snprintf(tmp, sizeof(tmp), "%s.tmp", sp->meta);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return;
	ok = write_all_fd(fd, &head, sizeof(head), &ss) &&
		write_all_fd(fd, sp->facts, sizeof(int64_t) * sp->nfacts, &ss) &&
		write_all_fd(fd, sp->seen, sizeof(int64_t) * sp->nseen, &ss) &&
		write_all_fd(fd, sp->blocks, sizeof(SpillBlock) * sp->nblocks, &ss);
	sum = sum_end(&ss);
	ok = ok && write_all_fd(fd, &sum, sizeof(sum), &ss) && fsync(fd) == 0;
	close(fd);
	if (!ok || rename(tmp, sp->meta) != 0)
		unlink(tmp);
}

/* read exactly len bytes into p (and the checksum); false when the file ends or fails */
static bool
read_all_fd(int fd, void *p, size_t len, SpillSum *ss)
{
	char	   *b = p;
	size_t		got = 0;

	while (got < len)
	{
		ssize_t		r = read(fd, b + got, len - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		got += (size_t) r;
	}
	if (ss)
		sum_add(ss, p, len);
	return true;
}

/* the description in sp->meta, if it is whole and for sp->key; false otherwise */
static bool
meta_read(Spill *sp, int nfacts, int *why)
{
	SpillMetaHead head;
	SpillSum	ss = {0, 0, 0};
	uint64_t	sum,
				want;
	int			fd = open(sp->meta, O_RDONLY);
	bool		ok;

	*why = SPILL_NO_META;
	if (fd < 0)
		return false;
	*why = SPILL_BAD_META;
	ok = read_all_fd(fd, &head, sizeof(head), &ss) &&
		memcmp(head.magic, SPILL_META_MAGIC, 8) == 0 && head.key == sp->key &&
		head.nfacts == nfacts && head.nblocks >= 0 && head.nblocks < (1 << 28) &&
		head.nseen >= 0 && head.nseen < (1 << 24) && head.rows > 0;
	if (ok)
	{
		sp->d = head.d;
		sp->wide = head.wide;
		sp->keys = head.keys;
		sp->format = head.format;
		sp->rows = head.rows;
		sp->nblocks = sp->capblocks = head.nblocks;
		sp->bytes = head.bytes;
		sp->nfacts = head.nfacts;
		sp->nseen = head.nseen;
		sp->seen_overflow = head.seen_overflow;
		sp->facts = malloc(sizeof(int64_t) * (nfacts + 1));
		sp->seen = malloc(sizeof(int64_t) * (head.nseen + 1));
		sp->blocks = malloc(sizeof(SpillBlock) * (head.nblocks + 1));
		if (!sp->facts || !sp->seen || !sp->blocks)
			worker_fail("out of memory");
		ok = read_all_fd(fd, sp->facts, sizeof(int64_t) * nfacts, &ss) &&
			read_all_fd(fd, sp->seen, sizeof(int64_t) * head.nseen, &ss) &&
			read_all_fd(fd, sp->blocks, sizeof(SpillBlock) * head.nblocks, &ss);
		want = sum_end(&ss);
		ok = ok && read_all_fd(fd, &sum, sizeof(sum), NULL) && sum == want;
	}
	close(fd);
	return ok;
}

/* every block's bytes against its checksum, and the file's size */
static bool
spill_intact(Spill *sp, int *why)
{
	struct stat st;
	char	   *buf;
	bool		ok = true;

	*why = SPILL_NO_FILE;
	sp->fd = open(sp->path, O_RDWR);
	if (sp->fd < 0)
		return false;
	*why = SPILL_BAD_FILE;
	if (fstat(sp->fd, &st) != 0 || st.st_size != sp->bytes)
		return false;
	buf = malloc(block_bytes(sp, sp->rows) + 64);
	if (buf == NULL)
		worker_fail("out of memory");
	for (int k = 0; k < sp->nblocks && ok; k++)
	{
		size_t		len = block_bytes(sp, sp->blocks[k].n);
		size_t		got = 0;
		SpillSum	ss = {0, 0, 0};

		ok = sp->blocks[k].n >= 0 && sp->blocks[k].n <= sp->rows && sp->blocks[k].off >= 0 &&
			sp->blocks[k].off + (int64_t) len <= sp->bytes;
		while (ok && got < len)
		{
			ssize_t		r = pread(sp->fd, buf + got, len - got, sp->blocks[k].off + (int64_t) got);

			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				ok = false;
			else
				got += (size_t) r;
		}
		if (ok)
		{
			sum_add(&ss, buf, len);
			ok = sum_end(&ss) == sp->blocks[k].sum;
		}
	}
	free(buf);
	return ok;
}

/* what a restarted rank's SPILL_* code says, for the log */
const char *
stream_restart_why(int code)
{
	switch (code)
	{
		case SPILL_REUSED:
			return "reused its spill";
		case SPILL_NO_META:
			return "spilled afresh from PostgreSQL: its spill's description is missing";
		case SPILL_BAD_META:
			return "spilled afresh from PostgreSQL: its spill's description is damaged";
		case SPILL_NO_FILE:
			return "spilled afresh from PostgreSQL: its spill is missing";
		case SPILL_BAD_FILE:
			return "spilled afresh from PostgreSQL: its spill is damaged";
		case SPILL_UNREPEATABLE:
			return "spilled afresh from PostgreSQL: the job reads without the caller's snapshot, from a shard or a view, or on another host";
	}
	return "";
}

/*
 * stream_reuse
 *		A restarted rank's spill, if the launch before left it whole and for
 *		the same reading: ds gets it and what loading saw (SPILL_REUSED).
 *		Otherwise ds is untouched and the rank reads its slice again: the
 *		code says why, SPILL_NONE on a first launch or when the launch
 *		before left no spill of this rank (its slice fit in memory).
 */
int
stream_reuse(const WorkerSpec *spec, Dataset *ds)
{
	int			why = SPILL_NONE;
	Spill		probe;
	Spill	   *sp;
	int			nf = spec->nfeatures;
	int			format = ds->wide ? DML_SPILL_FLOAT32 : spec->spill_format;
	int			nfacts = 3 * nf + 4;
	SpillMetaHead head;
	int			fd;

	if (spec->attempt == 0 || spec->spill_dir == NULL || spec->spill_dir[0] == '\0')
		return SPILL_NONE;
	if (comm_elsewhere(0))
		return SPILL_NONE;		/* its spill was unlinked: nothing to find */
	memset(&probe, 0, sizeof(probe));
	spill_paths(&probe, spec);
	/* the rows per block come from the description; the key covers them */
	fd = open(probe.meta, O_RDONLY);
	if (fd < 0)
	{
		/* a rank whose slice fit in memory has no spill: not an event */
		return access(probe.path, F_OK) == 0 ? SPILL_NO_META : SPILL_NONE;
	}
	if (!read_all_fd(fd, &head, sizeof(head), NULL) || head.rows <= 0)
	{
		close(fd);
		return SPILL_BAD_META;
	}
	close(fd);
	sp = calloc(1, sizeof(Spill));
	if (sp == NULL)
		worker_fail("out of memory");
	spill_paths(sp, spec);
	sp->key = spill_key(spec, ds->d, ds->wide, spec->discover != 0, format, head.rows);
	sp->fd = -1;
	if (sp->key == 0)
	{
		free(sp);
		return SPILL_UNREPEATABLE;
	}
	if (!meta_read(sp, nfacts, &why) || sp->d != ds->d || !spill_intact(sp, &why))
	{
		if (sp->fd >= 0)
			close(sp->fd);
		free(sp->facts);
		free(sp->seen);
		free(sp->blocks);
		free(sp);
		return why;
	}
	sp->limit = spec->spill_limit > 0 ? spec->spill_limit / (worker_world > 0 ? worker_world : 1) : 0;
	sp->reused = 1;
	current_spill = sp;
	pthread_mutex_init(&sp->mu, NULL);
	pthread_cond_init(&sp->cv, NULL);
	/* what loading saw */
	for (int f = 0; f < nf; f++)
	{
		ds->null_count[f] = sp->facts[f];
		ds->bad_count[f] = sp->facts[nf + f];
		ds->width_errors[f] = sp->facts[2 * nf + f];
	}
	ds->target_nulls = sp->facts[3 * nf];
	ds->target_bad = sp->facts[3 * nf + 1];
	ds->unknown_labels = sp->facts[3 * nf + 2];
	if (spec->discover)
	{
		ds->seen = malloc(sizeof(int64_t) * (spec->discover + 1));
		if (ds->seen == NULL)
			worker_fail("out of memory");
		ds->nseen = sp->nseen < spec->discover ? sp->nseen : spec->discover;
		memcpy(ds->seen, sp->seen, sizeof(int64_t) * ds->nseen);
		ds->seen_overflow = sp->seen_overflow;
	}
	ds->spill = sp;
	return SPILL_REUSED;
}

/*
 * stream_note_load
 *		What loading saw, kept for the description a restart reads: called
 *		when every row is in the spill, before the label keys are merged.
 */
void
stream_note_load(Spill *sp, const Dataset *ds, const WorkerSpec *spec)
{
	int			nf = spec->nfeatures;

	sp->nfacts = 3 * nf + 4;
	sp->facts = calloc(sp->nfacts, sizeof(int64_t));
	sp->seen = malloc(sizeof(int64_t) * (ds->nseen + 1));
	if (!sp->facts || !sp->seen)
		worker_fail("out of memory");
	for (int f = 0; f < nf; f++)
	{
		sp->facts[f] = ds->null_count[f];
		sp->facts[nf + f] = ds->bad_count[f];
		sp->facts[2 * nf + f] = ds->width_errors[f];
	}
	sp->facts[3 * nf] = ds->target_nulls;
	sp->facts[3 * nf + 1] = ds->target_bad;
	sp->facts[3 * nf + 2] = ds->unknown_labels;
	sp->facts[3 * nf + 3] = stream_rows(sp);
	if (ds->seen)
		memcpy(sp->seen, ds->seen, sizeof(int64_t) * ds->nseen);
	sp->nseen = ds->seen ? ds->nseen : 0;
	sp->seen_overflow = ds->seen_overflow;
}

/* the rows loaded into the spill, before prepare dropped any */
int64_t
stream_loaded_rows(const Spill *sp)
{
	return sp->facts ? sp->facts[sp->nfacts - 1] : stream_rows(sp);
}

int
stream_reused(const Spill *sp)
{
	return sp->reused;
}

/*
 * A test hook (options "fault", dml.test_hooks): damage this rank's spill
 * (a byte of its middle flipped), or remove it, before the rank is killed.
 */
void
stream_spoil(int remove)
{
	Spill	   *sp = current_spill;
	unsigned char c;

	if (sp == NULL)
		return;
	if (remove)
	{
		unlink(sp->path);
		return;
	}
	if (pread(sp->fd, &c, 1, sp->bytes / 2) == 1)
	{
		c ^= 0x5a;
		if (pwrite(sp->fd, &c, 1, sp->bytes / 2) == 1)
			fsync(sp->fd);
	}
}

/* ---------------------------------------------------------------------
 * Reading
 * --------------------------------------------------------------------- */

/* a block's buffer; widen: a compact spill's inputs widened there too (not in a window) */
static int
buf_alloc(const Spill *sp, BlockBuf *b, int widen)
{
	int			compact = sp->format != DML_SPILL_FLOAT32 && widen;

	b->mem = malloc(block_bytes(sp, sp->rows) + 64);
	b->xf = compact ? malloc(sizeof(float) * (size_t) sp->rows * sp->d + 64) : NULL;
	b->cx = NULL;
	b->block = -1;
	return b->mem != NULL && (!compact || b->xf != NULL);
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
	size_t		len = block_bytes(sp, sp->blocks[k].n);
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
	b->block = k;
	b->cx = b->mem + x_at(sp, sp->blocks[k].n);
	if (sp->format != DML_SPILL_FLOAT32 && b->xf == NULL)
	{
		/*
		 * an epoch's window keeps the compact inputs (stream_epoch_take
		 * widens and standardizes each row it draws): only the target here
		 */
		if (!raw && sp->model && sp->standardize_y)
			for (int64_t i = 0; i < b->view.n; i++)
				b->view.y[i] = (b->view.y[i] - sp->model->out_mean[0]) / sp->model->out_scale[0];
		return 0;
	}
	if (sp->format == DML_SPILL_FP16)
		half_to_float(b->xf, (const uint16_t *) b->cx, (size_t) sp->blocks[k].n * sp->d, 1.0f);
	else if (sp->format == DML_SPILL_INT8)
		int8_decode(sp, b->cx, sp->blocks[k].n, b->xf);
	if (!raw)
		block_transform(sp, &b->view);
	return 0;
}

/*
 * Row i of a window's compact block, widened into x (d) and standardized:
 * the operations read_block and block_transform apply to a whole block.
 */
static void
row_widen(const Spill *sp, const BlockBuf *b, int i, float *x)
{
	const DmlModel *m = sp->model;
	int			d = sp->d;

	if (sp->format == DML_SPILL_FP16)
		half_to_float(x, (const uint16_t *) b->cx + (size_t) i * d, (size_t) d, 1.0f);
	else
	{
		const float *lo = (const float *) b->cx;
		const unsigned char *nulls = (const unsigned char *) b->cx + 4 * (size_t) d;
		const unsigned char *codes = nulls + d + (size_t) i * d;

		for (int c = 0; c < d; c++)
			x[c] = nulls[c] && codes[c] == 255 ? NAN : lo[c] + (float) codes[c];
	}
	if (m == NULL)
		return;
	for (int c = 0; c < d; c++)
	{
		float		val = isnan(x[c]) ? m->in_mean[c] : x[c];

		x[c] = (val - m->in_mean[c]) * m->in_scale[c];
	}
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
	if (!buf_alloc(sp, &b[0], 1) || !buf_alloc(sp, &b[1], 1))
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
	if (!buf_alloc(sp, &b, 1))
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
			sp->blocks[k].sum = write_rows(sp, &b.view, 0, (int) b.view.n, sp->blocks[k].off);
		else
		{
			SpillSum	ss = {0, 0, 0};

			sp->blocks[k].sum = sum_end(&ss);
		}
		sp->blocks[k].n = (int) b.view.n;
	}
	free(b.mem);
	free(b.xf);
	/* prepared and written back: a restarted rank may reuse it from here on */
	meta_write(sp);
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
	if (!e->slot || !e->rows || !e->left || !e->order || !buf_alloc(sp, &e->spare, 0))
		worker_fail("out of memory for the stream's window");
	for (int s = 0; s < e->W; s++)
	{
		e->rows[s] = malloc(sizeof(int) * sp->rows);
		if (e->rows[s] == NULL || !buf_alloc(sp, &e->slot[s], 0))
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
		if (e->slot[s].view.X)
			memcpy(Xb + (size_t) got * d, e->slot[s].view.X + (size_t) i * d, sizeof(float) * d);
		else
			row_widen(e->sp, &e->slot[s], i, Xb + (size_t) got * d);
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
