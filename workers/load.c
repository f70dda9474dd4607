/*-------------------------------------------------------------------------
 *
 * load.c
 *	  Read this rank's slices over libpq, straight into float32 matrices.
 *
 * Each rank connects, sets its role to the calling user before running
 * anything else (so privileges and row-level security apply), imports the
 * coordinator's snapshot, and runs COPY (SELECT ...) TO STDOUT (FORMAT
 * binary) for each slice.  Rows are decoded as they stream: the numeric
 * features of a row come packed in one field of float32 bytes
 * (dml.num_bytes: binary COPY pays per field more than per byte, so this
 * about doubles the rows per second), vectors as float32 bytes
 * (dml.vec_bytes), labels and one-hot levels as text, a numeric target as
 * float8.
 * NULLs become NaN and are counted per column, non-finite numbers are
 * counted too; what to do about them is decided after the counts are
 * reduced over all ranks (prepare_data).  A row's validation membership is
 * a hash of its bytes and the seed, so it does not depend on which rank
 * read it.
 *
 * A view has no blocks to split: rank 0 reads it and scatters the rows.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "libpq-fe.h"

#include "comm.h"
#include "worker.h"

/* how this job's numeric features come packed (dml.num_bytes) */
static struct
{
	int			nnum;			/* numeric features, in one field when > 0 */
	int			contiguous;		/* their inputs first, in column order */
} packing;

/* FNV-1a, seeded */
static uint64_t
hash_bytes(uint64_t h, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
	{
		h ^= (unsigned char) p[i];
		h *= 0x100000001B3ull;
	}
	return h;
}

/* bsearch over sorted strings (class labels, one-hot levels) */
int
cmp_key(const void *key, const void *elem)
{
	return strcmp((const char *) key, *(char *const *) elem);
}

/* room for one more row */
static void
grow(Dataset *ds)
{
	if (ds->n < ds->cap)
		return;
	ds->cap = ds->cap ? ds->cap * 2 : 4096;
	ds->X = realloc(ds->X, sizeof(float) * ds->cap * ds->d);
	ds->y = realloc(ds->y, sizeof(float) * ds->cap);
	ds->val = realloc(ds->val, ds->cap);
	if (!ds->X || !ds->y || !ds->val)
		worker_fail("out of memory for %lld rows of %d inputs", (long long) ds->cap, ds->d);
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
feature_onehot(const SpecFeature *ft, const char *p, int len, float *dst)
{
	char	  **hit = bsearch(field_text(p, len), ft->levels, ft->nlevels, sizeof(char *), cmp_key);

	memset(dst, 0, sizeof(float) * ft->width);
	if (hit)
		dst[ft->level_slot[hit - ft->levels]] = 1.0f;
}

/*
 * decode one vector field into dst (width floats); -1 on a shape error.
 * The coordinator asks for dml.vec_bytes(col): little-endian float32s.
 */
static int
decode_vector(const SpecFeature *ft, float *dst, const char *p, int len, Dataset *ds, int fi)
{
	if (len != 4 * ft->width)
		return -1;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	memcpy(dst, p, len);
#else
	for (int i = 0; i < ft->width; i++)
	{
		uint32_t	u = (uint32_t) (unsigned char) p[4 * i] |
			((uint32_t) (unsigned char) p[4 * i + 1] << 8) |
			((uint32_t) (unsigned char) p[4 * i + 2] << 16) |
			((uint32_t) (unsigned char) p[4 * i + 3] << 24);

		memcpy(&dst[i], &u, 4);
	}
#endif
	for (int i = 0; i < ft->width; i++)
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
	{
		/* the usual layout: one memcpy */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		memcpy(x, p, 4 * (size_t) packing.nnum);
#else
		for (int i = 0; i < packing.nnum; i++)
		{
			uint32_t	u = (uint32_t) (unsigned char) p[4 * i] |
				((uint32_t) (unsigned char) p[4 * i + 1] << 8) |
				((uint32_t) (unsigned char) p[4 * i + 2] << 16) |
				((uint32_t) (unsigned char) p[4 * i + 3] << 24);

			memcpy(&x[i], &u, 4);
		}
#endif
	}
	for (fi = 0; fi < spec->nfeatures; fi++)
	{
		const SpecFeature *ft = &spec->features[fi];
		float	   *dst = x + ft->offset;

		if (ft->kind != FEAT_NUM)
			continue;
		if (!packing.contiguous)
		{
			uint32_t	u = (uint32_t) (unsigned char) p[4 * k] |
				((uint32_t) (unsigned char) p[4 * k + 1] << 8) |
				((uint32_t) (unsigned char) p[4 * k + 2] << 16) |
				((uint32_t) (unsigned char) p[4 * k + 3] << 24);

			memcpy(dst, &u, 4);
		}
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

/* decode one tuple (after its field count); returns where the next begins */
static const char *
decode_tuple(Dataset *ds, const WorkerSpec *spec, const char *p, const char *end)
{
	float	   *x;
	int			len;
	const char *start = p;

	grow(ds);
	x = ds->X + (size_t) ds->n * ds->d;

	/* target */
	len = (int) be32(p);
	p += 4;
	if (len < 0)
	{
		ds->y[ds->n] = NAN;
		ds->target_nulls++;
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
		p += len;
	}

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
		const SpecFeature *ft = &spec->features[fi];
		float	   *dst = x + ft->offset;

		if (ft->kind == FEAT_NUM && packing.nnum > 0)
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
			continue;
		}
		switch (ft->kind)
		{
			case FEAT_NUM:
				{
					double		v = be_double(p);

					dst[0] = (float) v;
					if (!isfinite(v) || !isfinite(dst[0]))
						ds->bad_count[fi]++;
					break;
				}
			case FEAT_VEC:
				if (decode_vector(ft, dst, p, len, ds, fi) != 0)
				{
					ds->width_errors[fi]++;
					for (int i = 0; i < ft->width; i++)
						dst[i] = 0;
				}
				break;
			case FEAT_CAT:
				feature_onehot(ft, p, len, dst);
				break;
		}
		p += len;
	}
	ds->val[ds->n] = 0;
	if (spec->validation > 0)
	{
		uint64_t	h = hash_bytes(0xCBF29CE484222325ull ^ spec->seed, start, p - start);

		ds->val[ds->n] = (double) (h >> 11) * (1.0 / 9007199254740992.0) < spec->validation;
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
		if (spec->features[fi].kind == FEAT_NUM)
		{
			len += snprintf(sql + len, cap - len, "%ss.a%d", first ? "" : ", ", fi + 1);
			first = 0;
		}
	len += snprintf(sql + len, cap - len, ")");
	for (int fi = 0; fi < spec->nfeatures; fi++)
		if (spec->features[fi].kind != FEAT_NUM)
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

typedef struct SliceRows
{
	Dataset    *ds;
	const WorkerSpec *spec;
} SliceRows;

static const char *
slice_row(void *arg, const char *p, const char *end)
{
	SliceRows  *sr = arg;

	return decode_tuple(sr->ds, sr->spec, p, end);
}

/* run one COPY and decode its rows */
static void
copy_slice(PGconn *conn, Dataset *ds, const WorkerSpec *spec, const char *query)
{
	size_t		qlen = strlen(query) + 64;
	char	   *sql = malloc(qlen);
	PGresult   *res;
	SliceRows	sr = {ds, spec};
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
		worker_fail("COPY failed: %s", PQerrorMessage(conn));
	PQclear(res);
	free(sql);

	if (copy_rows(conn, nfields, slice_row, &sr, &ds->bytes_read) == -2)
		worker_fail("COPY failed: %s", PQerrorMessage(conn));
	res = PQgetResult(conn);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		worker_fail("COPY failed: %s", PQerrorMessage(conn));
	PQclear(res);
}

/* run a command or fail */
static void
exec_ok(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);

	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		worker_fail("%s failed: %s", sql, PQerrorMessage(conn));
	PQclear(res);
}

/* hand out rank 0's rows evenly (a view was read whole) */
static void
scatter_rows(Dataset *ds)
{
	int64_t		total = ds->n;
	int		   *counts = malloc(sizeof(int) * worker_world);
	int		   *displs = malloc(sizeof(int) * worker_world);
	int		   *xcounts = malloc(sizeof(int) * worker_world);
	int		   *xdispls = malloc(sizeof(int) * worker_world);
	Dataset		mine = *ds;
	int64_t		mycount;

	MPI_Bcast(&total, 1, MPI_INT64_T, 0, *(MPI_Comm *) comm_data_handle());
	if (total * (int64_t) ds->d > 2000000000LL)
		worker_fail("a view of %lld rows is too large to scatter; train on a table", (long long) total);
	for (int r = 0; r < worker_world; r++)
	{
		int64_t		lo = total * r / worker_world;
		int64_t		hi = total * (r + 1) / worker_world;

		counts[r] = (int) (hi - lo);
		displs[r] = (int) lo;
		xcounts[r] = counts[r] * ds->d;
		xdispls[r] = displs[r] * ds->d;
	}
	mycount = counts[worker_rank];
	mine.n = mine.cap = mycount;
	mine.X = malloc(sizeof(float) * (mycount ? mycount : 1) * ds->d);
	mine.y = malloc(sizeof(float) * (mycount ? mycount : 1));
	mine.val = malloc(mycount ? mycount : 1);
	MPI_Scatterv(ds->X, xcounts, xdispls, MPI_FLOAT, mine.X, xcounts[worker_rank], MPI_FLOAT, 0, *(MPI_Comm *) comm_data_handle());
	MPI_Scatterv(ds->y, counts, displs, MPI_FLOAT, mine.y, counts[worker_rank], MPI_FLOAT, 0, *(MPI_Comm *) comm_data_handle());
	MPI_Scatterv(ds->val, counts, displs, MPI_UNSIGNED_CHAR, mine.val, counts[worker_rank],
				 MPI_UNSIGNED_CHAR, 0, *(MPI_Comm *) comm_data_handle());
	free(ds->X);
	free(ds->y);
	free(ds->val);
	*ds = mine;
	free(counts);
	free(displs);
	free(xcounts);
	free(xdispls);
}

/*
 * load_slices
 *		Connect as the caller under the job's snapshot and read every slice
 *		of this rank.
 */
void
load_slices(Dataset *ds, const WorkerSpec *spec, int rank)
{
	PGconn	   *conn;
	char	   *role;
	char		sql[512];
	double		t0 = wall_seconds();
	int			whole = 0;

	memset(ds, 0, sizeof(*ds));
	ds->d = spec->ninputs;
	ds->null_count = calloc(spec->nfeatures, sizeof(int64_t));
	ds->bad_count = calloc(spec->nfeatures, sizeof(int64_t));
	ds->width_errors = calloc(spec->nfeatures, sizeof(int64_t));
	for (int i = 0; i < spec->nslices; i++)
		whole |= spec->slices[i].whole;
	packing.nnum = 0;
	packing.contiguous = 1;
	for (int fi = 0; fi < spec->nfeatures; fi++)
		if (spec->features[fi].kind == FEAT_NUM)
		{
			if (spec->features[fi].offset != packing.nnum)
				packing.contiguous = 0;
			packing.nnum++;
		}

	if (!whole || rank == 0)
	{
		char		snapshot[256];

		conn = PQconnectdb(spec->conninfo);
		if (PQstatus(conn) != CONNECTION_OK)
			worker_fail("could not connect to the database: %s", PQerrorMessage(conn));
		/* the caller's role first, before anything else runs */
		role = PQescapeIdentifier(conn, spec->role, strlen(spec->role));
		snprintf(sql, sizeof(sql), "SET ROLE %s", role);
		PQfreemem(role);
		exec_ok(conn, sql);
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
		for (int i = 0; i < spec->nslices; i++)
			if (spec->slices[i].rank == rank)
				copy_slice(conn, ds, spec, spec->slices[i].query);
		exec_ok(conn, "COMMIT");
		PQfinish(conn);
	}
	if (whole && worker_world > 1)
		scatter_rows(ds);
	ds->load_seconds = wall_seconds() - t0;
}
