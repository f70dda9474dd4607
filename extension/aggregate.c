/*-------------------------------------------------------------------------
 *
 * aggregate.c
 *	  dml.xtx: the sufficient statistics of least squares as a
 *	  parallel-safe aggregate, for the one-pass exact solver; and the byte
 *	  packers the workers' COPY reads (dml.vec_bytes, dml.num_bytes).
 *
 * Two forms share one state: dml.xtx_cols(y, x1, ..., xd), float8
 * arguments passed one by one (VARIADIC "any": no array is built per row,
 * which cost more than the sums themselves), and dml.xtx(ARRAY[y, x1, ...,
 * xd]) for more columns than a function takes arguments.  The state counts
 * NULL and non-finite values per column (a row with any NULL or non-finite
 * value is left out of the sums) and buffers the other rows as
 * z = [x, 1, y]; every XTX_BLOCK rows one dsyrk adds the block's Z'Z to the
 * augmented Gram matrix G = [Z'Z Z'y; . y'y] (upper triangle, double), a
 * rank-k update instead of a rank-1 update per row.  PostgreSQL's parallel
 * workers each build a state, the combine function merges them, so every
 * row stays inside the server and no MPI job starts: for a single pass
 * this beats reading the rows out over libpq (bench/RESULTS.md has the
 * side-by-side figures).
 *
 * The final value is a float8[] laid out as
 *	 d, n, nulls[d+1], bad[d+1], A[(d+1)^2] (full), b[d+1], yy
 * with column 0 of nulls/bad the target.
 *
 * dml.qr_cols and dml.qr keep the same rows as an R factor instead (TSQR,
 * kernels/solve.c): each block of buffered rows is factored under the R so
 * far, and combining two states factors the two R's stacked, so the
 * parallel workers' states meet as a reduction tree.  Their final value is
 *	 d, n, nulls[d+1], bad[d+1], R[(d+2)^2]
 * R upper triangular, row-major, over the columns [x, 1, y].  The solve
 * (extension/exact.c) then never forms Z'Z, whose condition number is the
 * square of the data's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <cblas.h>
#include <math.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "libpq/pqformat.h"
#include "utils/array.h"
#include "port/pg_bswap.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "dml.h"

#define XTX_MAX_DIM 1000
#define XTX_BLOCK_VALUES 32768	/* values buffered before a dsyrk */

typedef struct XtxState
{
	bool		qr;				/* G holds the R factor of the rows (dml.qr) */
	int			d;				/* features */
	int			q;				/* columns of z = [x, 1, y]: d + 2 */
	double		n;
	double	   *nulls;			/* (d + 1): target, then features */
	double	   *bad;			/* (d + 1) */
	double	   *G;				/* (q, q), upper triangle: Z'Z, or R with Z = QR */
	double	   *Z;				/* (block, q) rows not yet added */
	int			nz;				/* rows in Z */
	int			block;			/* Z's capacity in rows */
} XtxState;

static XtxState *
xtx_new(MemoryContext cxt, int d, bool qr)
{
	XtxState   *st = MemoryContextAllocZero(cxt, sizeof(XtxState));
	int			p = d + 1;

	st->qr = qr;

	if (d < 1 || d > XTX_MAX_DIM)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("dml.xtx takes 2 to %d array elements, got %d", XTX_MAX_DIM + 1, d + 1)));
	st->d = d;
	st->q = d + 2;
	st->block = Max(8, XTX_BLOCK_VALUES / st->q);
	/* a QR of [R; block] costs (q + block) q^2: at least 2q rows keep R's share small */
	if (qr)
		st->block = Max(st->block, 2 * st->q);
	st->nulls = MemoryContextAllocZero(cxt, sizeof(double) * p);
	st->bad = MemoryContextAllocZero(cxt, sizeof(double) * p);
	st->G = MemoryContextAllocZero(cxt, sizeof(double) * st->q * st->q);
	st->Z = MemoryContextAlloc(cxt, sizeof(double) * st->block * st->q);
	return st;
}

/* a kernel's failure (out of memory) as an error */
static void
xtx_check(DmlStatus st)
{
	if (st == DML_ERR_NOMEM)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	if (st != DML_OK)
		elog(ERROR, "dml: QR factorization failed: %s. Please report a bug.", dml_status_string(st));
}

/* add the buffered rows to G */
static void
xtx_flush(XtxState *st)
{
	if (st->nz == 0)
		return;
	if (st->qr)
		xtx_check(dml_qr_stack(st->G, st->Z, st->nz, st->q));
	else
		cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, st->q, st->nz, 1.0, st->Z, st->q,
					1.0, st->G, st->q);
	st->nz = 0;
}

/* the next buffer row, flushing a full buffer first */
static inline double *
xtx_row(XtxState *st)
{
	if (st->nz == st->block)
		xtx_flush(st);
	return st->Z + (size_t) st->nz * st->q;
}

/* a value that does not fit the workers' float32 is counted as bad */
static inline bool
xtx_bad(double x)
{
	return !isfinite(x) || !isfinite((float) x);
}

/* add one row, ARRAY[y, x1, ..., xd] */
static Datum
xtx_array_trans(FunctionCallInfo fcinfo, bool qr)
{
	MemoryContext aggcxt;
	XtxState   *st;
	ArrayType  *arr;
	int			n,
				d;
	const double *v;
	double	   *z;
	bool		skip = false;

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "dml_xtx_trans called in non-aggregate context");
	if (PG_ARGISNULL(1))
		PG_RETURN_POINTER(PG_ARGISNULL(0) ? NULL : PG_GETARG_POINTER(0));
	arr = PG_GETARG_ARRAYTYPE_P(1);
	if (ARR_NDIM(arr) != 1 || ARR_ELEMTYPE(arr) != FLOAT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("dml.xtx takes a one-dimensional float8 array")));
	n = ARR_DIMS(arr)[0];
	d = n - 1;
	st = PG_ARGISNULL(0) ? xtx_new(aggcxt, d, qr) : (XtxState *) PG_GETARG_POINTER(0);
	if (st->d != d)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("dml.xtx got arrays of %d and %d elements", st->d + 1, n)));

	if (ARR_HASNULL(arr))
	{
		bits8	   *bitmap = ARR_NULLBITMAP(arr);
		const double *data = (const double *) ARR_DATA_PTR(arr);
		int			k = 0;

		/* count the NULLs; the row stays out of the sums */
		for (int i = 0; i < n; i++)
		{
			if (!(bitmap[i / 8] & (1 << (i % 8))))
				st->nulls[i] += 1;
			else if (xtx_bad(data[k++]))
				st->bad[i] += 1;
		}
		PG_RETURN_POINTER(st);
	}
	v = (const double *) ARR_DATA_PTR(arr);
	for (int i = 0; i < n; i++)
		if (xtx_bad(v[i]))
		{
			st->bad[i] += 1;
			skip = true;
		}
	if (skip)
		PG_RETURN_POINTER(st);

	/* z = [x, 1, y] */
	z = xtx_row(st);
	memcpy(z, v + 1, sizeof(double) * d);
	z[d] = 1.0;
	z[d + 1] = v[0];
	st->nz++;
	st->n += 1;
	PG_RETURN_POINTER(st);
}

PG_FUNCTION_INFO_V1(dml_xtx_trans);
PG_FUNCTION_INFO_V1(dml_qr_trans);

Datum
dml_xtx_trans(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	return xtx_array_trans(fcinfo, false);
}

/* dml.qr(ARRAY[y, x1, ..., xd]): the same rows into an R factor */
Datum
dml_qr_trans(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	return xtx_array_trans(fcinfo, true);
}

/*
 * add one row, (y, x1, ..., xd) as float8 arguments: no array per row.
 * The argument types are checked on the first row of each call site.
 */
static Datum
xtx_cols_trans(FunctionCallInfo fcinfo, bool qr)
{
	MemoryContext aggcxt;
	XtxState   *st;
	int			n = PG_NARGS() - 1;
	int			d = n - 1;
	double	   *z;
	bool		skip = false;

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "dml_xtx_cols_trans called in non-aggregate context");
	if (fcinfo->flinfo->fn_extra == NULL)
	{
		if (get_fn_expr_variadic(fcinfo->flinfo))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("dml.xtx_cols takes its columns one by one, not as a VARIADIC array")));
		for (int i = 1; i <= n; i++)
			if (get_fn_expr_argtype(fcinfo->flinfo, i) != FLOAT8OID)
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("dml.xtx_cols takes float8 arguments, argument %d is %s", i,
								format_type_be(get_fn_expr_argtype(fcinfo->flinfo, i)))));
		fcinfo->flinfo->fn_extra = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, 1);
	}
	st = PG_ARGISNULL(0) ? xtx_new(aggcxt, d, qr) : (XtxState *) PG_GETARG_POINTER(0);
	if (st->d != d)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("dml.xtx_cols got %d and %d columns", st->d + 1, n)));

	/* z = [x, 1, y], written in place and kept only if the row is usable */
	z = xtx_row(st);
	for (int i = 0; i < n; i++)
	{
		double		x;

		if (PG_ARGISNULL(i + 1))
		{
			st->nulls[i] += 1;
			skip = true;
			continue;
		}
		x = PG_GETARG_FLOAT8(i + 1);
		if (xtx_bad(x))
		{
			st->bad[i] += 1;
			skip = true;
		}
		z[i == 0 ? d + 1 : i - 1] = x;
	}
	if (!skip)
	{
		z[d] = 1.0;
		st->nz++;
		st->n += 1;
	}
	PG_RETURN_POINTER(st);
}

PG_FUNCTION_INFO_V1(dml_xtx_cols_trans);
PG_FUNCTION_INFO_V1(dml_qr_cols_trans);

Datum
dml_xtx_cols_trans(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	return xtx_cols_trans(fcinfo, false);
}

/* dml.qr_cols(y, x1, ..., xd): the same rows into an R factor */
Datum
dml_qr_cols_trans(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	return xtx_cols_trans(fcinfo, true);
}

PG_FUNCTION_INFO_V1(dml_xtx_combine);

/* merge two partial states */
Datum
dml_xtx_combine(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	MemoryContext aggcxt;
	XtxState   *a,
			   *b;
	int			p;

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "dml_xtx_combine called in non-aggregate context");
	a = PG_ARGISNULL(0) ? NULL : (XtxState *) PG_GETARG_POINTER(0);
	b = PG_ARGISNULL(1) ? NULL : (XtxState *) PG_GETARG_POINTER(1);
	if (b == NULL)
		PG_RETURN_POINTER(a);
	if (a == NULL)
		a = xtx_new(aggcxt, b->d, b->qr);
	if (a->d != b->d || a->qr != b->qr)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("dml.xtx got arrays of %d and %d elements", a->d + 1, b->d + 1)));
	xtx_flush(b);
	p = a->d + 1;
	a->n += b->n;
	for (int i = 0; i < p; i++)
	{
		a->nulls[i] += b->nulls[i];
		a->bad[i] += b->bad[i];
	}
	if (a->qr)
	{
		/* TSQR: the R of both row sets is the R of [Ra; Rb] */
		xtx_flush(a);
		xtx_check(dml_qr_stack(a->G, b->G, a->q, a->q));
	}
	else
		for (int i = 0; i < a->q * a->q; i++)
			a->G[i] += b->G[i];
	PG_RETURN_POINTER(a);
}

/* the state as one float8 array, the layout of the final value */
static ArrayType *
xtx_flatten(XtxState *st)
{
	int			p = st->d + 1;
	int			q = st->q;
	int			len = 2 + 2 * p + p * p + p + 1;
	Datum	   *e = palloc(sizeof(Datum) * (2 + 2 * p + q * q));
	int			k = 0;

	xtx_flush(st);
	if (st->qr)
	{
		/* d, n, nulls, bad, then R (q, q) row-major, zeros below the diagonal */
		len = 2 + 2 * p + q * q;
		e[k++] = Float8GetDatum(st->d);
		e[k++] = Float8GetDatum(st->n);
		for (int i = 0; i < p; i++)
			e[k++] = Float8GetDatum(st->nulls[i]);
		for (int i = 0; i < p; i++)
			e[k++] = Float8GetDatum(st->bad[i]);
		for (int i = 0; i < q * q; i++)
			e[k++] = Float8GetDatum(st->G[i]);
		return construct_array(e, len, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
	}
	e[k++] = Float8GetDatum(st->d);
	e[k++] = Float8GetDatum(st->n);
	for (int i = 0; i < p; i++)
		e[k++] = Float8GetDatum(st->nulls[i]);
	for (int i = 0; i < p; i++)
		e[k++] = Float8GetDatum(st->bad[i]);
	for (int i = 0; i < p; i++)
		for (int j = 0; j < p; j++)
			e[k++] = Float8GetDatum(j >= i ? st->G[(size_t) i * q + j] : st->G[(size_t) j * q + i]);
	for (int i = 0; i < p; i++)
		e[k++] = Float8GetDatum(st->G[(size_t) i * q + p]);
	e[k++] = Float8GetDatum(st->G[(size_t) p * q + p]);
	return construct_array(e, len, FLOAT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
}

PG_FUNCTION_INFO_V1(dml_xtx_serialize);

/* for parallel workers: the state as bytea (the buffered rows added first) */
Datum
dml_xtx_serialize(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	XtxState   *st = (XtxState *) PG_GETARG_POINTER(0);
	int			p = st->d + 1;
	StringInfoData buf;

	xtx_flush(st);
	pq_begintypsend(&buf);
	pq_sendint32(&buf, st->d);
	pq_sendint32(&buf, st->qr);
	pq_sendfloat8(&buf, st->n);
	for (int i = 0; i < p; i++)
	{
		pq_sendfloat8(&buf, st->nulls[i]);
		pq_sendfloat8(&buf, st->bad[i]);
	}
	for (int i = 0; i < st->q; i++)
		for (int j = i; j < st->q; j++)
			pq_sendfloat8(&buf, st->G[(size_t) i * st->q + j]);
	PG_RETURN_BYTEA_P(pq_endtypsend(&buf));
}

PG_FUNCTION_INFO_V1(dml_xtx_deserialize);

Datum
dml_xtx_deserialize(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	bytea	   *b = PG_GETARG_BYTEA_PP(0);
	MemoryContext aggcxt;
	StringInfoData buf;
	XtxState   *st;
	int			d,
				p;

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "dml_xtx_deserialize called in non-aggregate context");
	buf.data = VARDATA_ANY(b);
	buf.len = VARSIZE_ANY_EXHDR(b);
	buf.maxlen = buf.len;
	buf.cursor = 0;
	d = pq_getmsgint(&buf, 4);
	st = xtx_new(aggcxt, d, pq_getmsgint(&buf, 4) != 0);
	p = d + 1;
	st->n = pq_getmsgfloat8(&buf);
	for (int i = 0; i < p; i++)
	{
		st->nulls[i] = pq_getmsgfloat8(&buf);
		st->bad[i] = pq_getmsgfloat8(&buf);
	}
	for (int i = 0; i < st->q; i++)
		for (int j = i; j < st->q; j++)
			st->G[(size_t) i * st->q + j] = pq_getmsgfloat8(&buf);
	pq_getmsgend(&buf);
	PG_RETURN_POINTER(st);
}

PG_FUNCTION_INFO_V1(dml_xtx_final);

Datum
dml_xtx_final(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	PG_RETURN_ARRAYTYPE_P(xtx_flatten((XtxState *) PG_GETARG_POINTER(0)));
}

PG_FUNCTION_INFO_V1(dml_vec_bytes);

/*
 * dml.vec_bytes(anyarray) -> bytea: a numeric array as little-endian
 * float32s, for the workers' COPY.  One memcpy-like pass here instead of a
 * length word and a send call per element: array features (images) cross
 * the wire at about a quarter of the cost.  NULL when any element is NULL,
 * so the NULL policy applies to the row's feature as a whole; empty when
 * the array is not one-dimensional, which the worker reports as a shape error.
 */
Datum
dml_vec_bytes(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(0);
	Oid			elt = ARR_ELEMTYPE(arr);
	int			n = ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr));
	bytea	   *out;
	unsigned char *dst;

	if (ARR_HASNULL(arr))
		PG_RETURN_NULL();
	/* not a vector: an empty value, which the worker counts as a shape error */
	if (ARR_NDIM(arr) != 1)
		n = 0;
	out = palloc(VARHDRSZ + 4 * (size_t) n);
	SET_VARSIZE(out, VARHDRSZ + 4 * (size_t) n);
	dst = (unsigned char *) VARDATA(out);
	if (elt == FLOAT4OID)
	{
		const float *src = (const float *) ARR_DATA_PTR(arr);

#ifdef WORDS_BIGENDIAN
		for (int i = 0; i < n; i++)
		{
			uint32		u;

			memcpy(&u, &src[i], 4);
			u = pg_bswap32(u);
			memcpy(dst + 4 * i, &u, 4);
		}
#else
		memcpy(dst, src, 4 * (size_t) n);
#endif
	}
	else if (elt == FLOAT8OID)
	{
		const double *src = (const double *) ARR_DATA_PTR(arr);

		for (int i = 0; i < n; i++)
		{
			float		f = (float) src[i];
			uint32		u;

			memcpy(&u, &f, 4);
#ifdef WORDS_BIGENDIAN
			u = pg_bswap32(u);
#endif
			memcpy(dst + 4 * i, &u, 4);
		}
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("dml.vec_bytes takes real[] or float8[], not %s[]",
						format_type_be(ARR_ELEMTYPE(arr)))));
	PG_RETURN_BYTEA_P(out);
}

PG_FUNCTION_INFO_V1(dml_num_bytes);

/*
 * dml.num_bytes(VARIADIC "any") -> bytea: float8 arguments as one field of
 * little-endian float32s, for the workers' COPY of numeric features.  Binary
 * COPY spends more on each field (a send call, a length word) than on its
 * eight bytes, so one field per row for all the numeric features moves
 * about twice the rows per second (bench/RESULTS.md).  A NULL argument is
 * stored as 0 and flagged in a bitmap of ceil(n / 8) bytes after the
 * floats (bit i of byte i / 8), present only when some argument is NULL,
 * so the workers still count NULLs per column.  Values keep the float32
 * rounding the workers would apply; an out-of-range one becomes infinite,
 * which they count as they count it now.
 */
Datum
dml_num_bytes(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	int			n = PG_NARGS();
	int			nbitmap = (n + 7) / 8;
	bool		hasnull = false;
	bytea	   *out;
	unsigned char *dst;

	if (fcinfo->flinfo->fn_extra == NULL)
	{
		if (get_fn_expr_variadic(fcinfo->flinfo))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("dml.num_bytes takes its values one by one, not as a VARIADIC array")));
		for (int i = 0; i < n; i++)
			if (get_fn_expr_argtype(fcinfo->flinfo, i) != FLOAT8OID)
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("dml.num_bytes takes float8 arguments, argument %d is %s", i + 1,
								format_type_be(get_fn_expr_argtype(fcinfo->flinfo, i)))));
		fcinfo->flinfo->fn_extra = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, 1);
	}
	for (int i = 0; i < n; i++)
		hasnull |= PG_ARGISNULL(i);
	out = palloc(VARHDRSZ + 4 * (size_t) n + (hasnull ? nbitmap : 0));
	SET_VARSIZE(out, VARHDRSZ + 4 * (size_t) n + (hasnull ? nbitmap : 0));
	dst = (unsigned char *) VARDATA(out);
	if (hasnull)
		memset(dst + 4 * (size_t) n, 0, nbitmap);
	for (int i = 0; i < n; i++)
	{
		float		f = 0.0f;
		uint32		u;

		if (PG_ARGISNULL(i))
			dst[4 * (size_t) n + i / 8] |= 1 << (i % 8);
		else
			f = (float) PG_GETARG_FLOAT8(i);
		memcpy(&u, &f, 4);
#ifdef WORDS_BIGENDIAN
		u = pg_bswap32(u);
#endif
		memcpy(dst + 4 * i, &u, 4);
	}
	PG_RETURN_BYTEA_P(out);
}

/* ---------------------------------------------------------------------
 * dml.pack_rows: a slice of rows as one block of float32s
 * --------------------------------------------------------------------- */

/*
 * dml.pack_rows(target, x1, ..., xn) -> bytea: every row of the group as
 * one value, for the workers' load of all-numeric jobs.  Binary COPY costs
 * a send call, a length word and a row header per row, which at 20 float8
 * columns is most of the server's work; one aggregate over a slice of
 * blocks (plan.c keeps slices small enough) hands over the rows with no
 * per-row protocol at all, and the worker copies them into place.  The
 * target is float8 (a number) or int8 (a class label's key); the features
 * are float8.  Layout, little-endian:
 *
 *	 "DMLB", version 1, nrows, nfeatures, nnulls, flags (bit 0: int8 target,
 *	 bit 1: float64 features)
 *	 nrows x { target (8 bytes), nfeatures float32 (or float64) }
 *	 nnulls x { row (uint32), column (int32: -1 the target, else 0-based) }
 *
 * A NULL is stored as 0 and listed, so the workers apply the NULL policy
 * as they do for COPY; values keep the float32 rounding the workers would
 * apply.  dml.pack_rows64 keeps the features' float64 instead, for exact
 * least squares, which fits the raw float64 rows.  Not parallel: the
 * slice is one TID range scan.
 */
#define PACK_MAGIC "DMLB"
#define PACK_HEADER 24

typedef struct PackState
{
	int			n;				/* features */
	bool		int_target;
	bool		wide;			/* features as float64 (dml.pack_rows64) */
	uint32		nrows;
	char	   *buf;			/* header room, then the rows */
	Size		len;
	Size		cap;
	uint32	   *nulls;			/* pairs (row, column) */
	Size		nnulls;
	Size		nulls_cap;
} PackState;

static void
pack_put32(char *dst, uint32 u)
{
#ifdef WORDS_BIGENDIAN
	u = pg_bswap32(u);
#endif
	memcpy(dst, &u, 4);
}

static void
pack_null(PackState *st, int col)
{
	if (st->nnulls == st->nulls_cap)
	{
		st->nulls_cap = st->nulls_cap ? 2 * st->nulls_cap : 256;
		st->nulls = st->nulls ? repalloc_huge(st->nulls, sizeof(uint32) * 2 * st->nulls_cap)
			: palloc(sizeof(uint32) * 2 * st->nulls_cap);
	}
	st->nulls[2 * st->nnulls] = st->nrows;
	st->nulls[2 * st->nnulls + 1] = (uint32) col;
	st->nnulls++;
}

/*
 * A block is megabytes: the state's buffer, the final bytea, bytea's send
 * copy and the protocol message's buffer.  glibc maps an allocation that
 * large afresh, and returns a freed one to the kernel (unmapped, or trimmed
 * from the heap's top), so each slice's copies fault in and zero new pages:
 * on a 1M x 20 float64 load, a quarter of the server's time.  The backend
 * that packs a slice packs the next one (a worker's load session), so keep
 * its blocks in the heap for reuse, up to the size of a few blocks.  The
 * state's buffer starts at the size the last block needed.
 */
static Size pack_cap_hint;

static void
pack_keep_memory(void)
{
#ifdef __GLIBC__
	static bool done = false;

	if (!done)
	{
		mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);	/* glibc's largest */
		mallopt(M_TRIM_THRESHOLD, 128 * 1024 * 1024);
		done = true;
	}
#endif
}

/* add one row to a block of float32 or (wide) float64 features */
static Datum
pack_rows_trans(FunctionCallInfo fcinfo, bool wide)
{
	MemoryContext aggcxt;
	PackState  *st;
	int			n = PG_NARGS() - 2;
	Size		rowlen;
	char	   *dst;

	if (!AggCheckCallContext(fcinfo, &aggcxt))
		elog(ERROR, "dml.pack_rows_trans called outside an aggregate");
	if (PG_ARGISNULL(0))
	{
		Oid			t = get_fn_expr_argtype(fcinfo->flinfo, 1);

		if (get_fn_expr_variadic(fcinfo->flinfo))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("dml.pack_rows takes its values one by one, not as a VARIADIC array")));
		if (n < 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("dml.pack_rows needs a target and at least one feature")));
		if (t != FLOAT8OID && t != INT8OID)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("dml.pack_rows takes a float8 or int8 target, not %s", format_type_be(t))));
		for (int i = 0; i < n; i++)
			if (get_fn_expr_argtype(fcinfo->flinfo, i + 2) != FLOAT8OID)
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("dml.pack_rows takes float8 features, argument %d is %s", i + 2,
								format_type_be(get_fn_expr_argtype(fcinfo->flinfo, i + 2)))));
		st = MemoryContextAllocZero(aggcxt, sizeof(PackState));
		st->n = n;
		st->int_target = t == INT8OID;
		st->wide = wide;
		st->cap = PACK_HEADER + (Size) 4096 * (8 + (wide ? 8 : 4) * (Size) n);
		if (pack_cap_hint > st->cap)
			st->cap = pack_cap_hint;
		pack_keep_memory();
		st->buf = MemoryContextAllocHuge(aggcxt, st->cap);
		st->len = PACK_HEADER;
	}
	else
		st = (PackState *) PG_GETARG_POINTER(0);

	rowlen = 8 + (st->wide ? 8 : 4) * (Size) st->n;
	if (st->len + rowlen > st->cap)
	{
		Size		cap = 2 * st->cap;

		if (cap > MaxAllocHugeSize / 2 || st->nrows == PG_UINT32_MAX)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("dml.pack_rows: too many rows in one group")));
		st->buf = repalloc_huge(st->buf, cap);
		st->cap = cap;
		pack_cap_hint = Max(pack_cap_hint, cap);
	}
	dst = st->buf + st->len;

	/* the target: 8 bytes, float8 or int8 */
	if (PG_ARGISNULL(1))
	{
		memset(dst, 0, 8);
		pack_null(st, -1);
	}
	else
	{
		uint64		u;

		if (st->int_target)
			u = (uint64) PG_GETARG_INT64(1);
		else
		{
			double		v = PG_GETARG_FLOAT8(1);

			memcpy(&u, &v, 8);
		}
#ifdef WORDS_BIGENDIAN
		u = pg_bswap64(u);
#endif
		memcpy(dst, &u, 8);
	}
	dst += 8;
	for (int i = 0; i < st->n && st->wide; i++)
	{
		double		v = 0.0;
		uint64		u;

		if (PG_ARGISNULL(i + 2))
			pack_null(st, i);
		else
			v = PG_GETARG_FLOAT8(i + 2);
		memcpy(&u, &v, 8);
#ifdef WORDS_BIGENDIAN
		u = pg_bswap64(u);
#endif
		memcpy(dst + 8 * i, &u, 8);
	}
	for (int i = 0; i < st->n && !st->wide; i++)
	{
		float		f = 0.0f;
		uint32		u;

		if (PG_ARGISNULL(i + 2))
			pack_null(st, i);
		else
			f = (float) PG_GETARG_FLOAT8(i + 2);
		memcpy(&u, &f, 4);
		pack_put32(dst + 4 * i, u);
	}
	st->len += rowlen;
	st->nrows++;
	PG_RETURN_POINTER(st);
}

PG_FUNCTION_INFO_V1(dml_pack_rows_trans);
PG_FUNCTION_INFO_V1(dml_pack_rows64_trans);

Datum
dml_pack_rows_trans(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	return pack_rows_trans(fcinfo, false);
}

/* dml.pack_rows64: the same block with the features in float64 */
Datum
dml_pack_rows64_trans(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	return pack_rows_trans(fcinfo, true);
}

PG_FUNCTION_INFO_V1(dml_pack_rows_final);

Datum
dml_pack_rows_final(PG_FUNCTION_ARGS)
{
	DML_REQUIRE_SCHEMA();
	PackState  *st;
	Size		total;
	bytea	   *out;
	char	   *p;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();		/* no rows */
	st = (PackState *) PG_GETARG_POINTER(0);
	total = VARHDRSZ + st->len + 8 * st->nnulls;
	if (total > MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("dml.pack_rows: %zu bytes do not fit one bytea", total)));
	out = palloc(total);
	SET_VARSIZE(out, total);
	p = VARDATA(out);
	memcpy(p, PACK_MAGIC, 4);
	pack_put32(p + 4, 1);
	pack_put32(p + 8, st->nrows);
	pack_put32(p + 12, (uint32) st->n);
	pack_put32(p + 16, (uint32) st->nnulls);
	pack_put32(p + 20, (st->int_target ? 1 : 0) | (st->wide ? 2 : 0));
	memcpy(p + PACK_HEADER, st->buf + PACK_HEADER, st->len - PACK_HEADER);
	p += st->len;
	for (Size i = 0; i < 2 * st->nnulls; i++)
		pack_put32(p + 4 * i, st->nulls[i]);
	PG_RETURN_BYTEA_P(out);
}
