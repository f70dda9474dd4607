/*-------------------------------------------------------------------------
 *
 * load.c
 *	  Read this rank's slices over libpq, straight into float32 matrices.
 *
 * Each rank connects as the calling user (worker_login) before running
 * anything else (so privileges and row-level security apply), imports the
 * coordinator's snapshot, and reads each of its slices one of two ways.
 *
 * All-numeric jobs (every feature a number or boolean, the target a number
 * or an integer or boolean label) run SELECT dml.pack_rows(...) over the
 * slice: the server hands the slice over as one block of float32 rows,
 * which is copied into place; no per-row protocol at all (aggregate.c).
 * The next slice's query is always queued (libpq's pipeline mode), so the
 * server builds one block while the rank decodes the one before.
 * Other jobs run COPY (SELECT ...) TO STDOUT (FORMAT binary), decoded as
 * it streams: the numeric features of a row come packed in one field of
 * float32 bytes (dml.num_bytes: binary COPY pays per field more than per
 * byte), vectors as float32 bytes (dml.vec_bytes), labels and one-hot
 * levels as text, a numeric target as float8.
 *
 * NULLs become NaN and are counted per column, non-finite numbers are
 * counted too; what to do about them is decided after the counts are
 * reduced over all ranks (prepare_data).  A row's validation membership is
 * a hash of its decoded values and the seed, so it depends neither on
 * which rank read it nor on the path it came by.
 *
 * A view (or a foreign table, or a partitioned table read through its
 * parent) has no blocks to split: rank 0 reads it with one COPY and deals
 * its rows out as they arrive, deal k (deal_rows() rows in arrival order)
 * to rank k mod world (deal_view).  The deals are the same whether or not
 * a rank spills, so a view's rows land on the same ranks in the same order
 * streamed or in memory, and no rank ever holds more than its own share
 * and one deal.
 *
 * Rows are held within the job's memory budget (spec->memory): when a
 * rank's rows would pass what it leaves for data, what was read so far
 * goes to a local spill and the rest passes through a staging block into
 * it (start_spill, stream.c); a view's deals are appended the same way.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "libpq-fe.h"

#include "comm.h"
#include "protocol.h"
#include "worker.h"

static void put_label_key(Dataset *ds, const WorkerSpec *spec, int64_t key);

/* how this job's numeric features come packed (dml.num_bytes) */
static struct
{
	int			nnum;			/* numeric features, in one field when > 0 */
	int			contiguous;		/* their inputs first, in column order */
	int			plain;			/* a shard's server: vectors as float4[] (array_send) */
} packing;

/*
 * Whether row i is held out for validation: a hash of its decoded values
 * (inputs and target, as float32 bits) and the seed, so it depends neither
 * on which rank read the row nor on how it travelled.
 */
static int
held_out(const Dataset *ds, int64_t i, uint64_t seed, double fraction)
{
	const float *x = ds->X + (size_t) i * ds->d;
	uint64_t	h = 0xCBF29CE484222325ull ^ seed;
	uint32_t	u;

	for (int c = 0; c < ds->d; c++)
	{
		memcpy(&u, &x[c], 4);
		h = (h ^ u) * 0x100000001B3ull;
		h ^= h >> 29;
	}
	memcpy(&u, &ds->y[i], 4);
	h = (h ^ u) * 0x100000001B3ull;
	h ^= h >> 32;
	h *= 0xD6E8FEB86659FD93ull;
	h ^= h >> 32;
	return (double) (h >> 11) * (1.0 / 9007199254740992.0) < fraction;
}

/* held_out, for a spilled slice's blocks (prepare.c) */
bool
load_held_out(const Dataset *ds, int64_t i, uint64_t seed, double fraction)
{
	return held_out(ds, i, seed, fraction) != 0;
}

/* bsearch over sorted strings (class labels, one-hot levels) */
int
cmp_key(const void *key, const void *elem)
{
	return strcmp((const char *) key, *(char *const *) elem);
}

/* this rank's memory budget while loading (stream.c) */
static struct
{
	int			allowed;		/* a budget is set: the rows may be spilled */
	int64_t		data;			/* bytes the budget leaves for rows */
	int64_t		row;			/* bytes of one row in memory */
	int			window;
} budget;

/*
 * Whether X and y live in dml_big_realloc's memory (2 MB pages, grown
 * without a copy): where the rows are narrow, four or more (with the
 * label) to DML_SHUFFLE_BLOCK_BYTES, and an epoch that takes them in
 * random blocks or rows would miss the TLB at every one.  (The block
 * shuffle, train.c's train_block_rows, rounds its blocks up, so it takes
 * rows up to a third of those bytes in blocks; between a quarter and a
 * third, which nothing measured, the rows stay in 4 KB pages.)  There a
 * logistic Adam epoch over 1,000,000 x 20 ran 1.10x as fast, and the load
 * took no longer.  Wide rows (Fashion-MNIST's 784 inputs) stay in malloc's
 * 4 KB pages, and so does the float64 copy (Xd, yd), read in order: on
 * this KVM guest a 2 MB page touched first after memory lay free for a
 * while often cost more than its 512 small ones, and with 188 MB of
 * Fashion-MNIST's rows (or Newton's 168 MB float64 copy) in 2 MB pages
 * the load took longer (bench/SPEED-NOTES.md).
 */
static bool
rows_in_big_pages(const Dataset *ds)
{
	return sizeof(float) * ((size_t) ds->d + 1) * 4 <= DML_SHUFFLE_BLOCK_BYTES;
}

static void *
rows_realloc(const Dataset *ds, void *p, size_t was, size_t now)
{
	if (rows_in_big_pages(ds))
		return dml_big_realloc(p, was, now);
	return realloc(p, now ? now : 1);
}

static void
rows_free(const Dataset *ds, void *p, size_t bytes)
{
	if (rows_in_big_pages(ds))
		dml_big_free(p, bytes);
	else
		free(p);
}

/* the row arrays resized to hold cap rows */
static void
resize(Dataset *ds, const WorkerSpec *spec, int64_t cap)
{
	size_t		was = (size_t) ds->cap,
				now = (size_t) cap,
				d = (size_t) ds->d;

	ds->X = rows_realloc(ds, ds->X, sizeof(float) * was * d, sizeof(float) * now * d);
	ds->y = rows_realloc(ds, ds->y, sizeof(float) * was, sizeof(float) * now);
	ds->val = realloc(ds->val, now ? now : 1);
	if (spec->discover)
		ds->keys = realloc(ds->keys, sizeof(int64_t) * (now ? now : 1));
	if (ds->wide)
	{
		ds->Xd = realloc(ds->Xd, sizeof(double) * (now ? now * d : 1));
		ds->yd = realloc(ds->yd, sizeof(double) * (now ? now : 1));
	}
	ds->cap = cap;
	if (!ds->X || !ds->y || !ds->val || (spec->discover && !ds->keys) ||
		(ds->wide && (!ds->Xd || !ds->yd)))
		worker_fail("out of memory for %lld rows of %d inputs", (long long) ds->cap, ds->d);
}

/*
 * The rows no longer fit the budget: spill those held so far and keep a
 * staging block of the spill's block size from now on.  A block is sized
 * so that the window, the block read ahead, an evaluation pass's two and
 * a chunk of a step's rows fit what the budget leaves for data.  A compact
 * spill's window and read-ahead blocks keep their rows compact (each row
 * is widened as it is drawn), the evaluation pass's blocks hold both forms
 * and the step's chunk is float32: smaller rows, more of them a block.
 */
static void
start_spill(Dataset *ds, const WorkerSpec *spec)
{
	int			format = ds->wide ? DML_SPILL_FLOAT32 : spec->spill_format;
	int64_t		xb = format == DML_SPILL_FP16 ? 2 : format == DML_SPILL_INT8 ? 1 : 4;
	/* a row with its inputs as the spill keeps them */
	int64_t		compact = budget.row - (4 - xb) * (int64_t) ds->d;
	int64_t		rows = format == DML_SPILL_FLOAT32 ?
		budget.data / ((budget.window + 4) * budget.row) :
		budget.data / ((budget.window + 1) * compact + 2 * (compact + 4 * (int64_t) ds->d) + budget.row);

	if (rows < 256)
		rows = 256;
	if (rows > 1 << 24)
		rows = 1 << 24;
	ds->spill = stream_open(spec, ds->d, ds->wide, spec->discover != 0, format, (int) rows);
	memset(ds->val, 0, ds->n);
	stream_flush(ds->spill, ds);
	resize(ds, spec, rows);
}

/* room for n more rows (keys too while the labels are being listed) */
static void
reserve(Dataset *ds, const WorkerSpec *spec, int64_t n)
{
	int64_t		cap;

	if (ds->n + n <= ds->cap)
		return;
	if (ds->spill)
	{
		/* the staging block is full: out to the spill */
		memset(ds->val, 0, ds->n);
		stream_flush(ds->spill, ds);
		if (n <= ds->cap)
			return;
		worker_fail("%lld rows do not fit a spill block of %lld", (long long) n, (long long) ds->cap);
	}
	if (budget.allowed && (ds->n + n) * budget.row > budget.data)
	{
		start_spill(ds, spec);
		reserve(ds, spec, n);
		return;
	}
	cap = ds->n + n;
	if (n == 1)
		cap = cap < 4096 ? 4096 : 2 * cap;
	if (budget.allowed && cap * budget.row > budget.data)
		cap = budget.data / budget.row;	/* grow no further than the budget */
	resize(ds, spec, cap);
}

/* text of a field, NUL-terminated in a scratch buffer */
const char *
field_text(const char *p, int len)
{
	static char *buf = NULL;
	static int	cap = 0;

	if (len + 1 > cap)
	{
		cap = len + 1 > 256 ? len + 1 : 256;
		buf = realloc(buf, cap);
		if (!buf)
			worker_fail("out of memory");
	}
	memcpy(buf, p, len);
	buf[len] = '\0';
	return buf;
}

/* a categorical field as its one-hot block; a level never seen in training is all zeros */
void
feature_onehot(const DmlFeature *ft, const char *p, int len, float *dst)
{
	char	  **hit = bsearch(field_text(p, len), ft->levels, ft->nlevels, sizeof(char *), cmp_key);

	memset(dst, 0, sizeof(float) * ft->width);
	if (hit)
		dst[ft->level_slot[hit - ft->levels]] = 1.0f;
}

static uint32_t
le32(const char *p)
{
	const unsigned char *u = (const unsigned char *) p;

	return (uint32_t) u[0] | (uint32_t) u[1] << 8 | (uint32_t) u[2] << 16 | (uint32_t) u[3] << 24;
}

/* n little-endian float32s at p into dst (dml.vec_bytes, num_bytes, pack_rows) */
static void
le_floats(float *dst, const char *p, size_t n)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	memcpy(dst, p, 4 * n);
#else
	for (size_t i = 0; i < n; i++)
	{
		uint32_t	u = le32(p + 4 * i);

		memcpy(&dst[i], &u, 4);
	}
#endif
}

/*
 * decode one vector field into dst (width floats); -1 on a shape error.
 * The coordinator asks for dml.vec_bytes(col): little-endian float32s.
 */
static int
decode_vector(const DmlFeature *ft, float *dst, const char *p, int len, Dataset *ds, int fi)
{
	if (len != 4 * ft->width)
		return -1;
	le_floats(dst, p, ft->width);
	for (int i = 0; i < ft->width; i++)
		if (!isfinite(dst[i]))
		{
			ds->bad_count[fi]++;
			break;
		}
	return 0;
}

/*
 * decode one float4[] field in PostgreSQL's binary array format (array_send:
 * ndim, has-NULL flag, element type, then per dimension its length and lower
 * bound, then each element as a length and a big-endian float4), as a shard's
 * server sends it, having no dml.vec_bytes.  0, -1 on a shape error (not one
 * dimension of width float4s), 1 when an element is NULL (the whole value
 * counts as NULL, as dml.vec_bytes makes it).
 */
static int
decode_array_send(const DmlFeature *ft, float *dst, const char *p, int len, Dataset *ds, int fi)
{
	const char *end = p + len;
	int			ndim,
				n;

	if (len < 12)
		return -1;
	ndim = (int) be32(p);
	if (ndim != 1 || be32(p + 8) != 700 /* FLOAT4OID */ || len < 20)
		return -1;
	n = (int) be32(p + 12);
	if (n != ft->width)
		return -1;
	p += 20;
	for (int i = 0; i < n; i++)
	{
		int			elen;
		uint32_t	u;

		if (p + 4 > end)
			return -1;
		elen = (int) be32(p);
		p += 4;
		if (elen < 0)
			return 1;
		if (elen != 4 || p + 4 > end)
			return -1;
		u = be32(p);
		memcpy(&dst[i], &u, 4);
		p += 4;
	}
	for (int i = 0; i < n; i++)
		if (!isfinite(dst[i]))
		{
			ds->bad_count[fi]++;
			break;
		}
	return 0;
}

/*
 * The numeric features packed by dml.num_bytes: nnum little-endian float32s
 * and, when some are NULL, a bitmap of them.  -1 on a malformed field.
 */
static int
decode_packed(Dataset *ds, const WorkerSpec *spec, float *x, const char *p, int len)
{
	int			fi,
				k = 0;

	if (len != 4 * packing.nnum && len != 4 * packing.nnum + (packing.nnum + 7) / 8)
		return -1;
	if (packing.contiguous)
		le_floats(x, p, packing.nnum);	/* the usual layout: one copy */
	for (fi = 0; fi < spec->nfeatures; fi++)
	{
		const DmlFeature *ft = &spec->features[fi];
		float	   *dst = x + ft->offset;

		if (ft->kind != DML_FEAT_NUM)
			continue;
		if (!packing.contiguous)
			le_floats(dst, p + 4 * k, 1);
		if (len > 4 * packing.nnum && (p[4 * packing.nnum + k / 8] >> (k % 8)) & 1)
		{
			dst[0] = NAN;
			ds->null_count[fi]++;
		}
		else if (!isfinite(dst[0]))
			ds->bad_count[fi]++;
		k++;
	}
	return 0;
}

/* the float64 copy of a feature's inputs that float32 holds exactly (NULLs, one-hot, vectors) */
static void
wide_inputs(Dataset *ds, const DmlFeature *ft, const float *src)
{
	double	   *dst = ds->Xd + (size_t) ds->n * ds->d + ft->offset;

	for (int i = 0; i < ft->width; i++)
		dst[i] = src[i];
}

/* decode one tuple (after its field count); returns where the next begins */
static const char *
decode_tuple(Dataset *ds, const WorkerSpec *spec, const char *p, const char *end)
{
	float	   *x;
	int			len;

	reserve(ds, spec, 1);
	x = ds->X + (size_t) ds->n * ds->d;

	/* target */
	len = (int) be32(p);
	p += 4;
	if (len < 0)
	{
		ds->y[ds->n] = NAN;
		ds->target_nulls++;
		if (spec->discover)
			ds->keys[ds->n] = 0;
	}
	else if (spec->classification && spec->label_keys)
	{
		/* an integer or boolean label, as text */
		const char *label = field_text(p, len);
		int64_t		key;

		if (label_text_key(spec->label_keys, label, &key) != 0)
			worker_fail_final("22P02", "label \"%s\" is not an %s", label, spec->label_keys);
		put_label_key(ds, spec, key);
		p += len;
	}
	else if (spec->classification)
	{
		const char *label = field_text(p, len);
		char	  **hit = bsearch(label, spec->classes, spec->nclasses, sizeof(char *), cmp_key);

		if (hit == NULL)
		{
			/* a label that appeared after the coordinator listed them */
			ds->unknown_labels++;
			ds->y[ds->n] = NAN;
		}
		else
			ds->y[ds->n] = (float) spec->class_index[hit - spec->classes];
		p += len;
	}
	else
	{
		double		v = be_double(p);

		/* finite in SQL is not enough: it must fit a float32 too */
		if (!isfinite(v) || !isfinite((float) v))
			ds->target_bad++;
		ds->y[ds->n] = (float) v;
		if (ds->wide)
			ds->yd[ds->n] = v;
		p += len;
	}
	if (ds->wide && (len < 0 || spec->classification))
		ds->yd[ds->n] = ds->y[ds->n];

	if (packing.nnum > 0)
	{
		if (p + 4 > end)
			worker_fail("truncated COPY row");
		len = (int) be32(p);
		p += 4;
		if (len < 0 || p + len > end || decode_packed(ds, spec, x, p, len) != 0)
			worker_fail("malformed packed numeric field in a COPY row");
		p += len;
	}
	for (int fi = 0; fi < spec->nfeatures; fi++)
	{
		const DmlFeature *ft = &spec->features[fi];
		float	   *dst = x + ft->offset;

		if (ft->kind == DML_FEAT_NUM && packing.nnum > 0)
			continue;			/* came packed */
		if (p + 4 > end)
			worker_fail("truncated COPY row");
		len = (int) be32(p);
		p += 4;
		if (len < 0)
		{
			for (int i = 0; i < ft->width; i++)
				dst[i] = NAN;
			ds->null_count[fi]++;
			if (ds->wide)
				wide_inputs(ds, ft, dst);
			continue;
		}
		switch (ft->kind)
		{
			case DML_FEAT_NUM:
				{
					double		v = be_double(p);

					dst[0] = (float) v;
					if (!isfinite(v) || !isfinite(dst[0]))
						ds->bad_count[fi]++;
					if (ds->wide)
						ds->Xd[(size_t) ds->n * ds->d + ft->offset] = v;
					break;
				}
			case DML_FEAT_VEC:
				{
					int			rc = packing.plain ? decode_array_send(ft, dst, p, len, ds, fi) :
						decode_vector(ft, dst, p, len, ds, fi);

					if (rc > 0)
					{
						/* a NULL element: the value is NULL */
						for (int i = 0; i < ft->width; i++)
							dst[i] = NAN;
						ds->null_count[fi]++;
					}
					else if (rc < 0)
					{
						ds->width_errors[fi]++;
						for (int i = 0; i < ft->width; i++)
							dst[i] = 0;
					}
					break;
				}
			case DML_FEAT_CAT:
				feature_onehot(ft, p, len, dst);
				break;
		}
		if (ds->wide && ft->kind != DML_FEAT_NUM)
			wide_inputs(ds, ft, dst);
		p += len;
	}
	ds->n++;
	return p;
}

/*
 * COPY of the slice query with its numeric features packed into one field:
 *	 SELECT s.a0, dml.num_bytes(s.a1, ...), s.a<other> ... FROM (query) AS
 *	 s(a0, ..., am)
 * The column aliases are ours, so the coordinator's query is used as it is
 * (the planner pulls the subquery up: the slice is still a TID range scan).
 */
static char *
packed_query(const WorkerSpec *spec, const char *query)
{
	size_t		cap = strlen(query) + 256 + (size_t) 48 * (spec->nfeatures + 1);
	char	   *sql = malloc(cap);
	size_t		len;
	int			first = 1;

	if (!sql)
		worker_fail("out of memory");
	len = snprintf(sql, cap, "COPY (SELECT s.a0, dml.num_bytes(");
	for (int fi = 0; fi < spec->nfeatures; fi++)
		if (spec->features[fi].kind == DML_FEAT_NUM)
		{
			len += snprintf(sql + len, cap - len, "%ss.a%d", first ? "" : ", ", fi + 1);
			first = 0;
		}
	len += snprintf(sql + len, cap - len, ")");
	for (int fi = 0; fi < spec->nfeatures; fi++)
		if (spec->features[fi].kind != DML_FEAT_NUM)
			len += snprintf(sql + len, cap - len, ", s.a%d", fi + 1);
	len += snprintf(sql + len, cap - len, " FROM (%s) AS s(a0", query);
	for (int fi = 0; fi < spec->nfeatures; fi++)
		len += snprintf(sql + len, cap - len, ", a%d", fi + 1);
	snprintf(sql + len, cap - len, ")) TO STDOUT (FORMAT binary)");
	return sql;
}

/*
 * copy_rows
 *		Read the binary COPY stream that a COPY ... TO STDOUT started on
 *		conn: the header, then each row, its field count checked against
 *		nfields, handed to row(arg, p, end), which returns where the next
 *		row begins; until the trailer.  Adds the bytes read to *bytes
 *		(unless NULL).  Returns PQgetCopyData's last status: -1 at the
 *		stream's end, -2 when it broke off (the caller reports it).
 */
int
copy_rows(void *pgconn, int nfields, CopyRowFn row, void *arg, double *bytes)
{
	PGconn	   *conn = pgconn;
	char	   *buf;
	int			len;
	int			header_done = 0;

	while ((len = PQgetCopyData(conn, &buf, 0)) > 0)
	{
		const char *p = buf;
		const char *end = buf + len;

		if (bytes)
			*bytes += len;
		if (!header_done)
		{
			/* "PGCOPY\n\377\r\n\0", flags, extension length and area */
			if (len < 19 || memcmp(p, "PGCOPY\n\377\r\n\0", 11) != 0)
				worker_fail("unexpected binary COPY header");
			p += 15;
			p += 4 + be32(p);
			header_done = 1;
		}
		while (p + 2 <= end)
		{
			int			nf = (int16_t) ((unsigned char) p[0] << 8 | (unsigned char) p[1]);

			p += 2;
			if (nf == -1)
				break;			/* trailer */
			if (nf != nfields)
				worker_fail("COPY row has %d fields, expected %d", nf, nfields);
			p = row(arg, p, end);
		}
		PQfreemem(buf);
	}
	return len;
}

typedef struct Deal Deal;
static void deal_out(Deal *dl);

typedef struct SliceRows
{
	Dataset    *ds;
	const WorkerSpec *spec;
	Deal	   *deal;			/* a view's rows, dealt out as they come */
} SliceRows;

static const char *
slice_row(void *arg, const char *p, const char *end)
{
	SliceRows  *sr = arg;

	if (sr->deal && sr->ds->n == sr->ds->cap)
		deal_out(sr->deal);		/* a full deal goes before the next row */
	return decode_tuple(sr->ds, sr->spec, p, end);
}

/* run one COPY and decode its rows (into a deal, rows dealt out as it fills) */
static void
copy_slice(PGconn *conn, Dataset *ds, const WorkerSpec *spec, const char *query, Deal *deal)
{
	size_t		qlen = strlen(query) + 64;
	char	   *sql = malloc(qlen);
	PGresult   *res;
	SliceRows	sr = {ds, spec, deal};
	int			nfields = 1 + spec->nfeatures - (packing.nnum > 0 ? packing.nnum - 1 : 0);

	if (packing.nnum > 0)
	{
		free(sql);
		sql = packed_query(spec, query);
	}
	else
		snprintf(sql, qlen, "COPY (%s) TO STDOUT (FORMAT binary)", query);
	res = PQexec(conn, sql);
	if (PQresultStatus(res) != PGRES_COPY_OUT)
		worker_fail_query(conn, res, "COPY");
	PQclear(res);
	free(sql);

	if (copy_rows(conn, nfields, slice_row, &sr, &ds->bytes_read) == -2)
		worker_fail("COPY failed: %s", PQerrorMessage(conn));
	res = PQgetResult(conn);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		worker_fail_query(conn, res, "COPY");
	PQclear(res);
}

/*
 * load_copy_plain
 *		One COPY of a query whose columns are plain (a shard's server need
 *		not have dml: no dml.num_bytes packing, vectors as float4[] in the
 *		binary array format), decoded as copy_slice does.
 */
void
load_copy_plain(void *pgconn, Dataset *ds, const WorkerSpec *spec, const char *query)
{
	int			nnum = packing.nnum;

	packing.nnum = 0;
	packing.plain = 1;
	copy_slice(pgconn, ds, spec, query, NULL);
	packing.nnum = nnum;
	packing.plain = 0;
}

/* an int8 label key as its output index, or -1 for a label not listed */
static int
label_of_key(const WorkerSpec *spec, int64_t key)
{
	const int64_t *hit = bsearch(&key, spec->class_keys, spec->nclasses, sizeof(int64_t),
								 cmp_int64);

	return hit ? spec->class_key_index[hit - spec->class_keys] : -1;
}

/* label_of_key, for a spilled slice's blocks (prepare.c) */
int
load_label_of_key(const WorkerSpec *spec, int64_t key)
{
	return label_of_key(spec, key);
}

/*
 * A row's label key.  Listing the labels (spec->discover), the key is kept
 * and added to this rank's sorted set; otherwise it becomes the output
 * index, or NaN and a count for a label the coordinator did not list.
 */
static void
put_label_key(Dataset *ds, const WorkerSpec *spec, int64_t key)
{
	if (spec->discover)
	{
		int			lo = 0,
					hi = ds->nseen;

		ds->keys[ds->n] = key;
		ds->y[ds->n] = 0;
		if (ds->nseen > 0 && ds->seen[ds->nseen - 1] == key)
			return;				/* the common repeat */
		while (lo < hi)
		{
			int			mid = (lo + hi) / 2;

			if (ds->seen[mid] < key)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < ds->nseen && ds->seen[lo] == key)
			return;
		if (ds->nseen >= spec->discover)
		{
			ds->seen_overflow = 1;
			return;
		}
		if (ds->seen == NULL)
			ds->seen = malloc(sizeof(int64_t) * (spec->discover + 1));
		if (ds->seen == NULL)
			worker_fail("out of memory");
		memmove(ds->seen + lo + 1, ds->seen + lo, sizeof(int64_t) * (ds->nseen - lo));
		ds->seen[lo] = key;
		ds->nseen++;
		return;
	}
	{
		int			cls = label_of_key(spec, key);

		if (cls < 0)
		{
			ds->unknown_labels++;
			ds->y[ds->n] = NAN;
		}
		else
			ds->y[ds->n] = (float) cls;
	}
}

/*
 * One slice as a dml.pack_rows block (aggregate.c has the layout): the
 * rows are copied into place, NULLs listed after them become NaN and are
 * counted, non-finite values are counted, labels are looked up by key.
 */
static void
decode_block(Dataset *ds, const WorkerSpec *spec, const char *p, size_t len)
{
	uint32_t	nrows,
				nnum,
				nnulls,
				flags;
	size_t		rowlen;
	const char *nulls;
	uint32_t	k = 0;

	if (len < 24 || memcmp(p, "DMLB", 4) != 0 || le32(p + 4) != 1)
		worker_fail("malformed dml.pack_rows block");
	nrows = le32(p + 8);
	nnum = le32(p + 12);
	nnulls = le32(p + 16);
	flags = le32(p + 20);
	rowlen = 8 + (ds->wide ? 8 : 4) * (size_t) nnum;
	if ((int) nnum != ds->d || (int) nnum != spec->nfeatures ||
		len != 24 + rowlen * nrows + 8 * (size_t) nnulls ||
		((flags & 1) != 0) != (spec->classification != 0) ||
		((flags & 2) != 0) != (ds->wide != 0))
		worker_fail("dml.pack_rows block does not match the job (%u rows of %u features)", nrows, nnum);
	nulls = p + 24 + rowlen * nrows;
	p += 24;
	if (!budget.allowed)
		reserve(ds, spec, nrows);
	for (uint32_t r = 0; r < nrows; r++, p += rowlen)
	{
		float	   *x;
		float	   *yv;

		reserve(ds, spec, 1);	/* may spill what came before */
		x = ds->X + (size_t) ds->n * ds->d;
		yv = &ds->y[ds->n];
		uint64_t	u = (uint64_t) le32(p) | (uint64_t) le32(p + 4) << 32;
		int			target_null = 0;

		if (ds->wide)
		{
			/* float64 features (dml.pack_rows64), kept and rounded */
			double	   *xd = ds->Xd + (size_t) ds->n * ds->d;

			for (uint32_t c = 0; c < nnum; c++)
			{
				uint64_t	b = (uint64_t) le32(p + 8 + 8 * c) | (uint64_t) le32(p + 12 + 8 * c) << 32;

				memcpy(&xd[c], &b, 8);
				x[c] = (float) xd[c];
			}
		}
		else
			le_floats(x, p + 8, nnum);
		for (uint32_t c = 0; c < nnum; c++)
			if (!isfinite(x[c]))
				ds->bad_count[c]++;
		/* this row's NULLs (listed in row order) */
		for (; k < nnulls && le32(nulls + 8 * (size_t) k) == r; k++)
		{
			int32_t		col = (int32_t) le32(nulls + 8 * (size_t) k + 4);

			if (col < 0)
				target_null = 1;
			else if (col < (int32_t) nnum)
			{
				x[col] = NAN;
				if (ds->wide)
					ds->Xd[(size_t) ds->n * ds->d + col] = NAN;
				ds->null_count[col]++;
			}
		}
		if (target_null)
		{
			*yv = NAN;
			ds->target_nulls++;
			if (spec->discover)
				ds->keys[ds->n] = 0;
		}
		else if (spec->classification)
			put_label_key(ds, spec, (int64_t) u);
		else
		{
			double		v;

			memcpy(&v, &u, 8);
			if (!isfinite(v) || !isfinite((float) v))
				ds->target_bad++;
			*yv = (float) v;
			if (ds->wide)
				ds->yd[ds->n] = v;
		}
		if (ds->wide && (target_null || spec->classification))
			ds->yd[ds->n] = *yv;
		ds->n++;
	}
	if (k != nnulls)
		worker_fail("malformed NULL list in a dml.pack_rows block");
}

/* one slice query's result: its dml.pack_rows block, decoded */
static void
block_result(PGconn *conn, PGresult *res, Dataset *ds, const WorkerSpec *spec)
{
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		worker_fail_query(conn, res, "reading a slice");
	if (PQntuples(res) != 1 || PQnfields(res) != 1)
		worker_fail("dml.pack_rows returned %d rows of %d columns", PQntuples(res), PQnfields(res));
	if (!PQgetisnull(res, 0, 0))
	{
		size_t		len = (size_t) PQgetlength(res, 0, 0);

		ds->bytes_read += len;
		decode_block(ds, spec, PQgetvalue(res, 0, 0), len);
	}
	PQclear(res);
}

/*
 * block_slices
 *		The dml.pack_rows queries of slices which[0 .. n - 1], in order,
 *		with the next one always queued on the server (libpq's pipeline
 *		mode): the server builds slice i + 1's block while this rank
 *		receives and decodes slice i's.  One query at a time, each side sat
 *		idle while the other worked.  At most two queries are in flight,
 *		so neither side's socket buffer ever holds more than a block.
 */
static void
block_slices(PGconn *conn, Dataset *ds, const WorkerSpec *spec, const int *which, int n)
{
	PGresult   *res;
	int			sent = 0;

	if (n == 0)
		return;
	if (!PQenterPipelineMode(conn))
		worker_fail("could not enter libpq's pipeline mode: %s", PQerrorMessage(conn));
	for (int i = 0; i < n; i++)
	{
		while (sent < n && sent <= i + 1)
		{
			/* the flush request makes the server send the block as soon as it is built */
			if (!PQsendQueryParams(conn, spec->slices[which[sent]].query, 0, NULL, NULL, NULL, NULL, 1) ||
				!PQsendFlushRequest(conn) || PQflush(conn) != 0)
				worker_fail("could not send a slice query: %s", PQerrorMessage(conn));
			sent++;
		}
		res = PQgetResult(conn);
		if (res == NULL)
			worker_fail("no result for a slice query: %s", PQerrorMessage(conn));
		block_result(conn, res, ds, spec);
		/* the end of this query's results */
		if ((res = PQgetResult(conn)) != NULL)
			worker_fail("a slice query returned more than one result");
	}
	if (!PQpipelineSync(conn))
		worker_fail("could not end the slice queries: %s", PQerrorMessage(conn));
	res = PQgetResult(conn);
	if (PQresultStatus(res) != PGRES_PIPELINE_SYNC)
		worker_fail_query(conn, res, "ending the slice queries");
	PQclear(res);
	if (!PQexitPipelineMode(conn))
		worker_fail("could not leave libpq's pipeline mode: %s", PQerrorMessage(conn));
}

/*
 * discover_classes
 *		Every data rank's distinct label keys, gathered and merged: the
 *		labels in the type's order (integers ascending, false before true),
 *		checked as the coordinator checks a list it reads itself.  Fills
 *		the spec's classes and outputs, maps every row's key to its output
 *		index, and rank 0 tells the coordinator the labels.  Collective.
 */
static void
discover_classes(Dataset *ds, WorkerSpec *spec)
{
	MPI_Comm	comm = *(MPI_Comm *) comm_data_handle();
	int			mine = ds->seen_overflow ? -1 : ds->nseen;
	int		   *counts = malloc(sizeof(int) * worker_world);
	int		   *displs = malloc(sizeof(int) * worker_world);
	int64_t    *all;
	int			total = 0,
				k = 0,
				overflow = 0;
	int			isbool = strcmp(spec->label_keys, "bool") == 0;
	int			logistic = spec->loss == DML_LOSS_BCE;

	MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, comm);
	for (int r = 0; r < worker_world; r++)
	{
		if (counts[r] < 0)
		{
			overflow = 1;
			counts[r] = 0;
		}
		displs[r] = total;
		total += counts[r];
	}
	all = malloc(sizeof(int64_t) * (total ? total : 1));
	if (!counts || !displs || !all)
		worker_fail("out of memory");
	MPI_Allgatherv(ds->seen, ds->seen_overflow ? 0 : ds->nseen, MPI_INT64_T,
				   all, counts, displs, MPI_INT64_T, comm);
	qsort(all, total, sizeof(int64_t), cmp_int64);
	for (int i = 0; i < total; i++)
		if (k == 0 || all[k - 1] != all[i])
			all[k++] = all[i];
	if (overflow || k > spec->discover)
		worker_user_error("54000||target column \"%s\" has more than %d distinct labels",
						  spec->target_name, spec->discover);
	if (k < 2)
		worker_user_error(k == 0 ?
						  "22000|The relation has no rows with a non-NULL target.|target column \"%s\" has %d distinct labels; classification needs at least 2" :
						  "22000|A model cannot learn from a single class.|target column \"%s\" has %d distinct label; classification needs at least 2",
						  spec->target_name, k);
	if (logistic && k != 2)
		worker_user_error("22023|Use model => 'softmax' for more than two classes.|"
						  "logistic regression needs 2 labels, but column \"%s\" has %d",
						  spec->target_name, k);

	spec->nclasses = k;
	spec->classes = malloc(sizeof(char *) * k);
	spec->class_index = malloc(sizeof(int) * k);
	spec->class_keys = all;
	spec->class_key_index = malloc(sizeof(int) * k);
	if (!spec->classes || !spec->class_index || !spec->class_key_index)
		worker_fail("out of memory");
	for (int i = 0; i < k; i++)
	{
		char		buf[32];

		if (isbool)
			snprintf(buf, sizeof(buf), "%s", all[i] ? "true" : "false");
		else
			snprintf(buf, sizeof(buf), "%lld", (long long) all[i]);
		spec->classes[i] = strdup(buf);
		spec->class_index[i] = i;
		spec->class_key_index[i] = i;
	}
	/* in key order: with label keys, classes[] is only read to tell the coordinator */
	spec->outputs = logistic ? 1 : k;
	for (int64_t i = 0; i < ds->n; i++)
		if (!isnan(ds->y[i]))
			ds->y[i] = (float) label_of_key(spec, ds->keys[i]);
	free(ds->keys);
	free(ds->seen);
	ds->keys = ds->seen = NULL;
	spec->discover = 0;

	if (worker_rank == 0)
	{
		size_t		cap = 32 * (size_t) k + 1,
					len = 0;
		char	   *msg = malloc(cap);

		for (int i = 0; i < k; i++)
			len += snprintf(msg + len, cap - len, "%s\n", spec->classes[i]);
		control_send(DML_MSG_CLASSES, msg, len, NULL, 0);
		free(msg);
	}
	free(counts);
	free(displs);
}

/* run a command or fail */
static void
exec_ok(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);

	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		worker_fail_query(conn, res, sql);
	PQclear(res);
}

/*
 * Dealing a view's rows
 *
 * Rank 0 decodes the view's COPY into a deal of deal_rows() rows; when it
 * is full (and at the end) deal k goes to rank k mod world: rank 0 appends
 * it to its own rows, any other rank gets it over MPI and appends it.
 * Appending goes through reserve(), so a rank past its budget spills the
 * deals as it would a slice of its own.  The deal's size depends only on
 * the row's width, never on the budget, so every rank gets the same rows
 * in the same order streamed or in memory.  Rank 0 holds the deal it
 * fills and two messages in flight besides its own rows, any other rank
 * one message; the budget counts them (deal_held).  What decoding counts (NULLs, bad values, label keys seen)
 * stays with rank 0; the counts are summed over the ranks later as any
 * slice's are.  A deal of 0 rows ends it.
 * ---------------------------------------------------------------------
 */
#define DEAL_BYTES	(1024 * 1024)
#define DEAL_TAG	0x4445

/*
 * A deal travels as one message: its row count, then the label keys (while
 * the labels are listed), the float64 rows (spec_float64), the float32
 * rows and targets.  Rank 0 sends with MPI_Isend from one of two buffers,
 * so it decodes the next deal while the last travels.
 */
struct Deal
{
	Dataset    *own;			/* this rank's rows */
	Dataset		buf;			/* the deal being filled (rank 0) */
	const WorkerSpec *spec;
	int64_t		k;				/* deals dealt */
	size_t		msg_bytes;		/* of a full deal's message */
	char	   *msg[2];			/* messages in flight (rank 0), or received */
	MPI_Request req[2];
	int			slot;
};

/* rows of one deal: about DEAL_BYTES of float32 rows */
static int64_t
deal_rows(int d)
{
	int64_t		rows = DEAL_BYTES / (4 * ((int64_t) d + 1));

	return rows < 16 ? 16 : rows > 8192 ? 8192 : rows;
}

/* bytes of a deal's message of n rows */
static size_t
deal_bytes(const Deal *dl, int64_t n)
{
	size_t		d = (size_t) dl->own->d;

	return 8 + (size_t) n * ((dl->spec->discover ? 8 : 0) + (dl->own->wide ? 8 * d + 8 : 0) + 4 * d + 4);
}

/*
 * what dealing holds on this rank besides its rows: rank 0 the deal it
 * fills and two messages, any other rank one message (the budget's)
 */
static int64_t
deal_held(const Dataset *own, const WorkerSpec *spec)
{
	Deal		dl = {.own = (Dataset *) own, .spec = spec};

	return (worker_rank == 0 ? 3 : 1) * (int64_t) deal_bytes(&dl, deal_rows(own->d));
}

/* a deal's buffer of rows (counts point at own's) and its message buffers */
static void
deal_init(Deal *dl, Dataset *own, const WorkerSpec *spec)
{
	int64_t		cap = deal_rows(own->d);

	memset(dl, 0, sizeof(*dl));
	dl->own = own;
	dl->spec = spec;
	dl->req[0] = dl->req[1] = MPI_REQUEST_NULL;
	dl->msg_bytes = deal_bytes(dl, cap);
	dl->msg[0] = malloc(dl->msg_bytes);
	dl->buf.d = own->d;
	dl->buf.wide = own->wide;
	dl->buf.cap = cap;
	if (worker_rank != 0)
	{
		if (!dl->msg[0])
			worker_fail("out of memory for a deal of %lld rows", (long long) cap);
		return;					/* it receives into msg[0] */
	}
	dl->msg[1] = malloc(dl->msg_bytes);
	dl->buf.null_count = own->null_count;
	dl->buf.bad_count = own->bad_count;
	dl->buf.width_errors = own->width_errors;
	dl->buf.X = malloc(sizeof(float) * cap * own->d);
	dl->buf.y = malloc(sizeof(float) * cap);
	dl->buf.val = calloc(cap, 1);
	if (spec->discover)
		dl->buf.keys = malloc(sizeof(int64_t) * cap);
	if (own->wide)
	{
		dl->buf.Xd = malloc(sizeof(double) * cap * own->d);
		dl->buf.yd = malloc(sizeof(double) * cap);
	}
	if (!dl->msg[0] || !dl->msg[1] || !dl->buf.X || !dl->buf.y || !dl->buf.val ||
		(spec->discover && !dl->buf.keys) || (own->wide && (!dl->buf.Xd || !dl->buf.yd)))
		worker_fail("out of memory for a deal of %lld rows", (long long) cap);
}

/* what decoding counted on rank 0 goes to its own rows; the buffers go */
static void
deal_free(Deal *dl)
{
	Dataset    *own = dl->own;

	MPI_Waitall(2, dl->req, MPI_STATUSES_IGNORE);
	own->target_nulls += dl->buf.target_nulls;
	own->target_bad += dl->buf.target_bad;
	own->unknown_labels += dl->buf.unknown_labels;
	own->bytes_read += dl->buf.bytes_read;
	if (dl->buf.seen)
	{
		free(own->seen);
		own->seen = dl->buf.seen;
		own->nseen = dl->buf.nseen;
	}
	own->seen_overflow |= dl->buf.seen_overflow;
	free(dl->buf.X);
	free(dl->buf.y);
	free(dl->buf.val);
	free(dl->buf.keys);
	free(dl->buf.Xd);
	free(dl->buf.yd);
	free(dl->msg[0]);
	free(dl->msg[1]);
}

/* the parts of a deal's message of n rows at m */
typedef struct DealParts
{
	int64_t    *keys;
	double	   *Xd;
	double	   *yd;
	float	   *X;
	float	   *y;
} DealParts;

static DealParts
deal_parts(const Deal *dl, char *m, int64_t n)
{
	DealParts	dp = {NULL, NULL, NULL, NULL, NULL};
	size_t		d = (size_t) dl->own->d;
	char	   *p = m + 8;

	if (dl->spec->discover)
	{
		dp.keys = (int64_t *) p;
		p += 8 * n;
	}
	if (dl->own->wide)
	{
		dp.Xd = (double *) p;
		p += 8 * n * d;
		dp.yd = (double *) p;
		p += 8 * n;
	}
	dp.X = (float *) p;
	p += 4 * n * d;
	dp.y = (float *) p;
	return dp;
}

/* append n rows to this rank's (spilling as the budget says) */
static void
deal_append(Deal *dl, const DealParts *dp, int64_t n)
{
	Dataset    *ds = dl->own;
	int			d = ds->d;

	for (int64_t i = 0; i < n;)
	{
		int64_t		k;

		reserve(ds, dl->spec, 1);
		k = ds->cap - ds->n;
		if (k > n - i)
			k = n - i;
		memcpy(ds->X + (size_t) ds->n * d, dp->X + (size_t) i * d, sizeof(float) * k * d);
		memcpy(ds->y + ds->n, dp->y + i, sizeof(float) * k);
		if (dl->spec->discover)
			memcpy(ds->keys + ds->n, dp->keys + i, sizeof(int64_t) * k);
		if (ds->wide)
		{
			memcpy(ds->Xd + (size_t) ds->n * d, dp->Xd + (size_t) i * d, sizeof(double) * k * d);
			memcpy(ds->yd + ds->n, dp->yd + i, sizeof(double) * k);
		}
		ds->n += k;
		i += k;
	}
}

/* rank 0: the deal's rows to their rank, and the deal emptied */
static void
deal_out(Deal *dl)
{
	Dataset    *b = &dl->buf;
	int64_t		n = b->n;
	int			to;
	DealParts	mine = {b->keys, b->Xd, b->yd, b->X, b->y};

	if (n == 0)
		return;
	to = (int) (dl->k++ % worker_world);
	if (to == 0)
		deal_append(dl, &mine, n);
	else
	{
		char	   *m;
		DealParts	dp;
		size_t		d = (size_t) b->d;

		/* the slot's last message must have left */
		MPI_Wait(&dl->req[dl->slot], MPI_STATUS_IGNORE);
		m = dl->msg[dl->slot];
		dp = deal_parts(dl, m, n);
		memcpy(m, &n, 8);
		if (dp.keys)
			memcpy(dp.keys, b->keys, 8 * n);
		if (dp.Xd)
		{
			memcpy(dp.Xd, b->Xd, 8 * n * d);
			memcpy(dp.yd, b->yd, 8 * n);
		}
		memcpy(dp.X, b->X, 4 * n * d);
		memcpy(dp.y, b->y, 4 * n);
		MPI_Isend(m, (int) deal_bytes(dl, n), MPI_BYTE, to, DEAL_TAG,
				  *(MPI_Comm *) comm_data_handle(), &dl->req[dl->slot]);
		dl->slot ^= 1;
	}
	b->n = 0;
}

/* rank 0: the last deal, then a deal of 0 rows to every other rank */
static void
deal_end(Deal *dl)
{
	int64_t		none = 0;

	deal_out(dl);
	MPI_Waitall(2, dl->req, MPI_STATUSES_IGNORE);
	for (int r = 1; r < worker_world; r++)
		MPI_Send(&none, 8, MPI_BYTE, r, DEAL_TAG, *(MPI_Comm *) comm_data_handle());
}

/* any other rank: append the deals rank 0 sends until one of 0 rows */
static void
deal_receive(Deal *dl)
{
	MPI_Comm	comm = *(MPI_Comm *) comm_data_handle();
	int64_t		cap = dl->buf.cap;

	for (;;)
	{
		MPI_Status	st;
		int			got;
		int64_t		n;
		DealParts	dp;

		MPI_Recv(dl->msg[0], (int) dl->msg_bytes, MPI_BYTE, 0, DEAL_TAG, comm, &st);
		MPI_Get_count(&st, MPI_BYTE, &got);
		memcpy(&n, dl->msg[0], 8);
		if (n == 0)
			break;
		if (n < 0 || n > cap || (size_t) got != deal_bytes(dl, n))
			worker_fail("a malformed deal of %lld rows from rank 0", (long long) n);
		dp = deal_parts(dl, dl->msg[0], n);
		deal_append(dl, &dp, n);
	}
}

/*
 * load_slices
 *		Connect as the caller under the job's snapshot and read every slice
 *		of this rank.
 */
void
load_slices(Dataset *ds, WorkerSpec *spec, int rank)
{
	PGconn	   *conn;
	char		sql[512];
	double		t0 = dml_clock_seconds();
	int			whole = 0;
	int		   *which;			/* a run of block slices */
	int			nblock = 0;

	memset(ds, 0, sizeof(*ds));
	ds->d = spec->ninputs;
	ds->null_count = calloc(spec->nfeatures, sizeof(int64_t));
	ds->bad_count = calloc(spec->nfeatures, sizeof(int64_t));
	ds->width_errors = calloc(spec->nfeatures, sizeof(int64_t));
	for (int i = 0; i < spec->nslices; i++)
		whole |= spec->slices[i].whole;
	/* float64 rows come as one float8 field per number, never packed as float32 */
	ds->wide = spec_float64(spec);
	packing.nnum = 0;
	packing.contiguous = 1;
	for (int fi = 0; fi < spec->nfeatures && !ds->wide; fi++)
		if (spec->features[fi].kind == DML_FEAT_NUM)
		{
			if (spec->features[fi].offset != packing.nnum)
				packing.contiguous = 0;
			packing.nnum++;
		}
	/* dml.num_bytes is a function: beyond its argument limit, one field each */
	if (packing.nnum > DML_FUNC_MAX_ARGS)
		packing.nnum = 0;
	/* a view's deals spill on any rank as a slice's rows do */
	budget.allowed = spec->memory > 0;
	budget.data = stream_data_budget(spec);
	/* a view: what dealing holds comes out of the rows' share, a quarter left */
	if (whole && spec->memory > 0)
		budget.data = budget.data - deal_held(ds, spec) > budget.data / 4 ?
			budget.data - deal_held(ds, spec) : budget.data / 4;
	budget.row = stream_row_cost(spec);
	budget.window = spec->window > 0 ? spec->window : DML_WINDOW_DEFAULT;

	/*
	 * A restarted rank whose spill the launch before left whole reads no
	 * rows (the spill's description says what loading saw); every rank
	 * then meets the others in discover_classes and prepare as usual.  No
	 * rank reuses without the caller's snapshot, so the collectives below
	 * (rank 0 exporting one) run on every rank or on none.
	 */
	if (budget.allowed)
		ds->spill_restart = stream_reuse(spec, ds);
	if (ds->spill)
		;						/* reused (never a view's: stream.c) */
	else if (whole && rank != 0)
	{
		/* a view: rank 0 reads it and deals this rank its rows */
		Deal		dl;

		deal_init(&dl, ds, spec);
		deal_receive(&dl);
		deal_free(&dl);
	}
	else
	{
		char		snapshot[256];

		conn = worker_login(spec);
		exec_ok(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
		if (strlen(spec->snapshot) > 200)
			worker_fail("malformed snapshot id");
		snprintf(snapshot, sizeof(snapshot), "%s", spec->snapshot);
		if (snapshot[0] == '\0' && !whole)
		{
			/* no snapshot from the caller: rank 0 exports one for all */
			if (rank == 0)
			{
				PGresult   *res = PQexec(conn, "SELECT pg_export_snapshot()");

				if (PQresultStatus(res) != PGRES_TUPLES_OK)
					worker_fail("pg_export_snapshot failed: %s", PQerrorMessage(conn));
				snprintf(snapshot, sizeof(snapshot), "%s", PQgetvalue(res, 0, 0));
				PQclear(res);
			}
			comm_bcast(snapshot, sizeof(snapshot), 0);
		}
		if (snapshot[0] != '\0' && !(spec->snapshot[0] == '\0' && rank == 0))
		{
			snprintf(sql, sizeof(sql), "SET TRANSACTION SNAPSHOT '%s'", snapshot);
			exec_ok(conn, sql);
		}
		/* rank 0's exporting transaction stays open until every rank imported */
		if (spec->snapshot[0] == '\0' && !whole)
			comm_barrier();
		maybe_inject_fault(spec, 0, conn);
		which = malloc(sizeof(int) * (spec->nslices ? spec->nslices : 1));
		if (!which)
			worker_fail("out of memory");
		/* runs of block slices go through block_slices, in order with the COPY ones */
		for (int i = 0; i < spec->nslices; i++)
		{
			if (spec->slices[i].rank != rank || spec->slices[i].shard > 0)
				continue;
			if (spec->load_block && !spec->slices[i].whole)
			{
				which[nblock++] = i;
				continue;
			}
			block_slices(conn, ds, spec, which, nblock);
			nblock = 0;
			if (spec->slices[i].whole)
			{
				Deal		dl;

				deal_init(&dl, ds, spec);
				copy_slice(conn, &dl.buf, spec, spec->slices[i].query, &dl);
				deal_end(&dl);
				deal_free(&dl);
			}
			else
				copy_slice(conn, ds, spec, spec->slices[i].query, NULL);
		}
		block_slices(conn, ds, spec, which, nblock);
		free(which);
		exec_ok(conn, "COMMIT");
		PQfinish(conn);
	}
	if (ds->spill && stream_reused(ds->spill))
		;
	else
		load_shard_slices(ds, spec, rank);
	if (ds->spill && !stream_reused(ds->spill))
	{
		/* every row in the spill; the staging block goes */
		memset(ds->val, 0, ds->n);
		stream_flush(ds->spill, ds);
		stream_note_load(ds->spill, ds, spec);
		rows_free(ds, ds->X, sizeof(float) * (size_t) ds->cap * ds->d);
		rows_free(ds, ds->y, sizeof(float) * (size_t) ds->cap);
		free(ds->val);
		free(ds->Xd);
		free(ds->yd);
		ds->X = ds->y = NULL;
		ds->Xd = ds->yd = NULL;
		ds->val = NULL;
		ds->cap = 0;
	}
	if (spec->discover)
		discover_classes(ds, spec);
	if (ds->n > 0)
		memset(ds->val, 0, ds->n);
	if (spec->validation > 0)
		for (int64_t i = 0; i < ds->n; i++)
			ds->val[i] = held_out(ds, i, spec->seed, spec->validation);
	ds->load_seconds = dml_clock_seconds() - t0;
	ds->load_path = spec->load_block && !whole ? "block" : "copy";
}
