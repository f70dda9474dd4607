/*-------------------------------------------------------------------------
 *
 * common.c
 *	  What every kernel file shares: status names and random numbers; the
 *	  row gathers; the memory of a worker's row arrays (dml_big_realloc).
 *
 * The CPU side of what cuda/common.cu holds for the CUDA kernels.
 * Single-threaded by design: each MPI rank pins OpenBLAS to one thread,
 * and the backend never starts a thread pool.
 *
 *-------------------------------------------------------------------------
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE				/* mremap */
#endif
#include "kernels.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>

/* Name of a status, for error messages */
/* the name a stop reason has in metrics, results and dml.epochs */
const char *
dml_stop_name(DmlStopReason r)
{
	switch (r)
	{
		case DML_STOP_CONVERGED:
			return "converged";
		case DML_STOP_PATIENCE:
			return "patience";
		case DML_STOP_MAX_TIME:
			return "max time";
		case DML_STOP_NONE:
		case DML_STOP_MAX_EPOCHS:
			break;
	}
	return "max epochs";
}

const char *
dml_status_string(DmlStatus st)
{
	switch (st)
	{
		case DML_OK:
			return "ok";
		case DML_ERR_NOMEM:
			return "out of memory";
		case DML_ERR_FORMAT:
			return "malformed model";
		case DML_ERR_CHECKSUM:
			return "checksum mismatch";
		case DML_ERR_SINGULAR:
			return "matrix is singular or not positive definite";
		case DML_ERR_ARG:
			return "invalid argument";
	}
	return "unknown status";
}

/* ---------------------------------------------------------------------
 * Random numbers: splitmix64, so a seed means the same stream everywhere
 * --------------------------------------------------------------------- */

void
dml_rng_seed(DmlRng *rng, uint64_t seed)
{
	rng->s = seed ^ 0x9E3779B97F4A7C15ull;
}

uint64_t
dml_rng_next(DmlRng *rng)
{
	uint64_t	z = (rng->s += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

double
dml_rng_uniform(DmlRng *rng)
{
	return (dml_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
}

/* Box-Muller; one value per call keeps the stream simple */
double
dml_rng_normal(DmlRng *rng)
{
	double		u1 = dml_rng_uniform(rng);
	double		u2 = dml_rng_uniform(rng);

	if (u1 < 1e-300)
		u1 = 1e-300;
	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* Fisher-Yates */
void
dml_shuffle(int *idx, int n, DmlRng *rng)
{
	for (int i = n - 1; i > 0; i--)
	{
		int			j = (int) (dml_rng_next(rng) % (uint64_t) (i + 1));
		int			t = idx[i];

		idx[i] = idx[j];
		idx[j] = t;
	}
}

/*
 * Rows idx[0..B) of X (n, d) and y into Xb (B, d) and yb.  Rows at random
 * places in memory are each a cache miss: the gather asks for the row
 * DML_GATHER_AHEAD places on (up to idx[avail - 1], which may lie in the
 * next minibatch) while it copies this one, keeping that many misses in
 * flight instead of one at a time, into the L2 cache (a 1M x 20 epoch's
 * gather: 24 ms, against 28 ms with the hint to L1; bench/SPEED-NOTES.md).
 * Within a run of consecutive rows (the block shuffle's, workers/train.c)
 * the hardware prefetcher streams the rows.  The copy is the same either
 * way.
 */
#define DML_GATHER_AHEAD	16

void
dml_gather_rows(const float *X, const float *y, int d, const int *idx, int B,
				int avail, float *Xb, float *yb)
{
	size_t		bytes = sizeof(float) * (size_t) d;

	for (int b = 0; b < B; b++)
	{
		int			a = b + DML_GATHER_AHEAD;

		/* the next row of a run comes with the stream */
		if (a < avail && idx[a] != idx[a - 1] + 1)
		{
			const char *row = (const char *) (X + (size_t) idx[a] * d);

			/* the row's lines (up to four; a wider row streams on its own) */
			for (size_t off = 0; off < bytes && off < 256; off += 64)
				__builtin_prefetch(row + off, 0, 1);
			__builtin_prefetch(row + bytes - 1, 0, 1);
			__builtin_prefetch(y + idx[a], 0, 1);
		}
		if (b + 1 < B && idx[b + 1] == idx[b] + 1)
		{
			/* a run, copied whole: the rows it passes over are not asked for */
			int			r = idx[b],
						len = 2;

			while (b + len < B && idx[b + len] == r + len)
				len++;
			memcpy(Xb + (size_t) b * d, X + (size_t) r * d, bytes * (size_t) len);
			for (int k = 0; k < len; k++)
				yb[b + k] = y[r + k];
			b += len - 1;
			continue;
		}
		memcpy(Xb + (size_t) b * d, X + (size_t) idx[b] * d, bytes);
		yb[b] = y[idx[b]];
	}
}

/*
 * The block order of an epoch (kernels.h): order[0..nb) holds each of the
 * nb blocks once; block nb - 1 is the short one (or as long as the others
 * where c divides n)
 */
void
dml_block_order_init(DmlBlockOrder *bo, const int *order, int nb, int c, int n)
{
	bo->order = order;
	bo->nb = nb;
	bo->c = c;
	bo->n = n;
	bo->short_at = nb;
	for (int q = 0; q < nb; q++)
		if (order[q] == nb - 1)
			bo->short_at = q;
}

/* the block of the order and the row within it that hold position pos */
static void
block_at(const DmlBlockOrder *bo, long pos, int *q, int *off)
{
	int			c = bo->c,
				short_len = bo->n - (bo->nb - 1) * c;
	long		before = (long) bo->short_at * c;

	if (pos < before)
	{
		*q = (int) (pos / c);
		*off = (int) (pos % c);
	}
	else if (pos - before < short_len)
	{
		*q = bo->short_at;
		*off = (int) (pos - before);
	}
	else
	{
		long		rest = pos - before - short_len;

		*q = bo->short_at + 1 + (int) (rest / c);
		*off = (int) (rest % c);
	}
}

/* rows of block blk of the order (its last block is the short one) */
static inline int
block_len(const DmlBlockOrder *bo, int blk)
{
	return blk == bo->nb - 1 ? bo->n - (bo->nb - 1) * bo->c : bo->c;
}

/*
 * Rows [pos, pos + B) of the epoch bo into Xb and yb.  Position pos lies in
 * block order[q] at offset off: the blocks before the short one hold c rows
 * each, and the short one n - (nb - 1) c.  Each block's rows are copied in
 * one piece and the hardware prefetcher streams them; the start of the
 * next block, and its labels, are asked for when a block begins.  Against
 * dml_gather_rows over the same rows' indices (a test of each index for the
 * runs), an in-memory epoch of 1,000,000 x 20 in blocks of 49 rows took
 * about 6 instead of 11-12 ms (bench/SPEED-NOTES.md); asking for the
 * labels too, 12.4-13.7 instead of 13.7-15.0 ms in 4 KB pages and 9.4-10.3
 * instead of 11.0-11.4 in 2 MB ones (a /tmp loop of the gather alone).
 */
void
dml_gather_blocks(const float *X, const float *y, int d, const DmlBlockOrder *bo,
				  int pos, int B, float *Xb, float *yb)
{
	int			c = bo->c;
	size_t		row = sizeof(float) * (size_t) d;
	int			q,
				off;

	block_at(bo, pos, &q, &off);
	for (int b = 0; b < B && q < bo->nb; q++, off = 0)
	{
		int			blk = bo->order[q],
					len = block_len(bo, blk) - off,
					r = blk * c + off;

		if (len > B - b)
			len = B - b;
		if (q + 1 < bo->nb)
		{
			const char *next = (const char *) (X + (size_t) bo->order[q + 1] * c * d);
			const float *next_y = y + (size_t) bo->order[q + 1] * c;

			for (size_t o = 0; o < 256 && o < row * c; o += 64)
				__builtin_prefetch(next + o, 0, 1);
			/* its labels (c floats): their first and last cache lines */
			__builtin_prefetch(next_y, 0, 1);
			__builtin_prefetch(next_y + c - 1, 0, 1);
		}
		memcpy(Xb + (size_t) b * d, X + (size_t) r * d, row * (size_t) len);
		memcpy(yb + b, y + r, sizeof(float) * (size_t) len);
		b += len;
	}
}

/*
 * dml_tile_blocks
 *		The n rows of X (d floats each), in blocks of c consecutive rows
 *		(the last one n - (nb - 1) c), each block transposed in place: to
 *		tiles (feature j of the block's row r at j * len + r) or back to
 *		rows.  One pass over the rows, through one block's buffer; false
 *		(and nothing moved) where that buffer cannot be had, or c < 1.
 */
bool
dml_tile_blocks(float *X, int d, int c, int n, bool to_tiles)
{
	float	   *buf;

	if (c < 1)
		return false;
	buf = malloc(sizeof(float) * (size_t) c * (d > 0 ? d : 1));
	if (buf == NULL)
		return false;
	for (int lo = 0; lo < n; lo += c)
	{
		int			len = n - lo < c ? n - lo : c;
		float	   *blk = X + (size_t) lo * d;

		memcpy(buf, blk, sizeof(float) * (size_t) len * d);
		for (int r = 0; r < len; r++)
			for (int j = 0; j < d; j++)
			{
				if (to_tiles)
					blk[(size_t) j * len + r] = buf[(size_t) r * d + j];
				else
					blk[(size_t) r * d + j] = buf[(size_t) j * len + r];
			}
	}
	free(buf);
	return true;
}

int
dml_block_runs(const float *X, const float *y, int d, const DmlBlockOrder *bo, int pos, int B,
			   DmlTileRun *runs, float *yb)
{
	int			c = bo->c,
				want = 2 * B,
				b = 0,
				nruns = 0,
				q,
				off;

	block_at(bo, pos, &q, &off);
	for (; b < want && q < bo->nb; q++, off = 0)
	{
		int			blk = bo->order[q],
					ld = block_len(bo, blk),
					len = ld - off,
					r = blk * c + off;
		const float *T = X + (size_t) blk * c * d;

		if (len > want - b)
			len = want - b;
		if (b < B)
		{
			int			own = len < B - b ? len : B - b;

			runs[nruns].T = T + off;
			runs[nruns].ld = ld;
			runs[nruns].len = own;
			nruns++;
			memcpy(yb + b, y + r, sizeof(float) * (size_t) own);
		}
		if (b + len > B)
		{
			/*
			 * the next step's rows: the start of every fourth feature's
			 * part (the hardware streams the rest) and their labels; more
			 * (every line of the part) measured no faster
			 */
			int			from = b < B ? B - b : 0;
			const float *t = T + off + from;

			for (int j = 0; j < d; j += 4)
				__builtin_prefetch(t + (size_t) j * ld, 0, 2);
			__builtin_prefetch(y + r + from, 0, 2);
			__builtin_prefetch(y + r + len - 1, 0, 2);
		}
		b += len;
	}
	return nruns;
}

/* the OpenBLAS core type to force on this CPU, or NULL (kernels.h) */
const char *
dml_blas_core_override(const char *corename)
{
	/* OpenBLAS's x86-64 kernels with AVX2 and FMA, or wider */
	static const char *const fast[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake",
	"SapphireRapids"};

	if (corename == NULL)
		return NULL;
	for (size_t i = 0; i < sizeof(fast) / sizeof(fast[0]); i++)
		if (strcasecmp(corename, fast[i]) == 0)
			return NULL;
#if defined(__x86_64__) && defined(__GNUC__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		__builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
		return "SkylakeX";
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return "Haswell";
#endif
	return NULL;
}

/*
 * The instruction set dml's own kernels (simd.h: the skinny layers, the
 * narrow rows, the Hessian's tiles) run on: 512 (AVX-512F), 256 (AVX2 with
 * FMA) or 0 (none: OpenBLAS instead), the widest this CPU has, at most
 * dml_set_simd's cap.
 */
static int simd_cap = 512;

int
dml_simd(void)
{
	static int	have = -1;

	if (have < 0)
	{
		int			h = 0;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(DML_NO_CLONES)
		__builtin_cpu_init();
		if (__builtin_cpu_supports("avx512f"))
			h = 512;
		else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
			h = 256;
#endif
		have = h;
	}
	return have < simd_cap ? have : simd_cap;
}

/* at most cap (512, 256 or 0) from now on: the unit tests run each set */
void
dml_set_simd(int cap)
{
	simd_cap = cap;
}

/*
 * dml_malloc_lines, dml_calloc_lines
 *		malloc and calloc aligned to DML_LINE bytes.  Why: malloc's memory
 *		starts 16 bytes past a line (mapped arrays) or anywhere 16 bytes
 *		apart (the heap's), so a softmax layer's weight rows and the
 *		stash of its byte rows' float32 inputs (784 floats a row, a whole
 *		number of lines) started mid-line, and every other 32-byte load
 *		of the skinny kernels split across two lines.  Measured on Fashion-
 *		MNIST's shape (54,000 byte rows x 784, 10 outputs, batch 256; a
 *		/tmp loop alternating the layouts epoch by epoch, AMD EPYC with
 *		AVX2): the forward pass 33.4 ms on lines against 35.8 with both
 *		16 bytes off, the weight gradient 16.8 against 20.1.
 */
void *
dml_malloc_lines(size_t n, size_t size)
{
	size_t		bytes = n * size;

	if ((size != 0 && bytes / size != n) || bytes > SIZE_MAX - DML_LINE)
		return NULL;
	/* aligned_alloc wants a multiple of the alignment */
	bytes = (bytes + DML_LINE - 1) / DML_LINE * DML_LINE;
	return aligned_alloc(DML_LINE, bytes ? bytes : DML_LINE);
}

void *
dml_calloc_lines(size_t n, size_t size)
{
	void	   *p = dml_malloc_lines(n, size);

	if (p)
		memset(p, 0, n * size);
	return p;
}

/*
 * dml_big_realloc
 *		realloc for the arrays that hold a worker's rows (X and y,
 *		workers/load.c), given the sizes the caller knows: below
 *		DML_BIG_MIN bytes malloc's memory; from it up a mapping of the
 *		array's own, aligned to and sized in 2 MB, which the kernel is
 *		asked to back with transparent huge pages (MADV_HUGEPAGE), and
 *		which grows by moving its pages (mremap), not copying them.  NULL
 *		when out of memory (p stays as it was).
 *
 *		Why: an epoch that takes the rows in random blocks (or rows)
 *		misses the TLB at every block in 4 KB pages: the gather alone of
 *		an epoch over 1,000,000 x 20 in blocks of 49 rows took 11.0-11.4
 *		ms in 2 MB pages against 13.7-15.0 in 4 KB ones (a /tmp loop); and
 *		each first write of a 4 KB page is a fault (27.8k of them in a
 *		logistic Adam job's worker on that table, 7.8k in 2 MB pages).
 *		Where the kernel has no huge page to give (or transparent huge
 *		pages are off) the mapping is in 4 KB pages, as malloc's would be.
 */
#define BIG_ALIGN	((size_t) 2 << 20)

static size_t
big_len(size_t bytes)
{
	return (bytes + BIG_ALIGN - 1) & ~(BIG_ALIGN - 1);
}

/* a fresh mapping of len bytes (a multiple of BIG_ALIGN) at an address aligned to it */
static char *
big_map(size_t len)
{
	char	   *p = mmap(NULL, len + BIG_ALIGN, PROT_READ | PROT_WRITE,
						 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
			   *a;

	if (p == MAP_FAILED)
		return NULL;
	a = (char *) (((uintptr_t) p + BIG_ALIGN - 1) & ~(uintptr_t) (BIG_ALIGN - 1));
	if (a > p)
		munmap(p, (size_t) (a - p));
	munmap(a + len, (size_t) (p + BIG_ALIGN - a));
	(void) madvise(a, len, MADV_HUGEPAGE);	/* a hint: 4 KB pages without it */
	return a;
}

void *
dml_big_realloc(void *p, size_t old_bytes, size_t new_bytes)
{
	bool		old_big = p != NULL && old_bytes >= DML_BIG_MIN,
				new_big = new_bytes >= DML_BIG_MIN;
	char	   *q;

	if (!old_big && !new_big)
		return realloc(p, new_bytes ? new_bytes : 1);
	if (old_big && new_big)
	{
		size_t		ol = big_len(old_bytes),
					nl = big_len(new_bytes);

		if (nl <= ol)
		{
			if (nl < ol)
				munmap((char *) p + nl, ol - nl);
			return p;
		}
		/* in place where the addresses after it are free, else moved whole */
		if (mremap(p, ol, nl, 0) != MAP_FAILED)
			return p;
		if ((q = big_map(nl)) == NULL)
			return NULL;
		if (mremap(p, ol, ol, MREMAP_MAYMOVE | MREMAP_FIXED, q) == MAP_FAILED)
		{
			memcpy(q, p, old_bytes);
			munmap(p, ol);
		}
		return q;
	}
	if (new_big)
	{
		if ((q = big_map(big_len(new_bytes))) == NULL)
			return NULL;
		if (p != NULL)
			memcpy(q, p, old_bytes);
		free(p);
		return q;
	}
	/* big to small */
	if ((q = malloc(new_bytes ? new_bytes : 1)) == NULL)
		return NULL;
	memcpy(q, p, new_bytes);
	munmap(p, big_len(old_bytes));
	return q;
}

void
dml_big_free(void *p, size_t bytes)
{
	if (p != NULL && bytes >= DML_BIG_MIN)
		munmap(p, big_len(bytes));
	else
		free(p);
}
