/*-------------------------------------------------------------------------
 *
 * load_idx.c
 *	  dml-load-idx: load an IDX image/label pair (MNIST, Fashion-MNIST) into
 *	  a table  (id int PRIMARY KEY, label int NOT NULL, pixels real[] NOT NULL).
 *
 *	  dml-load-idx [-d conninfo] [--limit N] [--replace]
 *	               IMAGES.gz LABELS.gz TABLE
 *
 *	  Both files are read through zlib (gzip or plain) and checked in full
 *	  before the database is touched: magic numbers 2051 (ubyte images, three
 *	  dimensions) and 2049 (ubyte labels, one dimension), equal counts, and
 *	  no missing or trailing bytes.  Pixels become float4 in [0,1] (byte/255).
 *
 *	  The table is created and filled in one transaction with
 *	  COPY ... FROM STDIN (FORMAT binary), then analyzed.  TABLE is parsed as
 *	  SQL would parse it: an optional schema, unquoted parts folded to lower
 *	  case, double-quoted parts taken as written; each part is then quoted
 *	  with PQescapeIdentifier.  An existing table is an error unless
 *	  --replace is given.
 *
 *-------------------------------------------------------------------------
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>
#include <zlib.h>

#include "clock.h"

#define IDX_IMAGES_MAGIC	2051	/* 0x00000803: ubyte, 3 dimensions */
#define IDX_LABELS_MAGIC	2049	/* 0x00000801: ubyte, 1 dimension */
#define IDX_MAX_PIXELS		(1 << 24)	/* per image; far below PG's array limit */
#define IDX_MAX_COUNT		INT32_MAX	/* ids are int4 */

#define FLOAT4OID			700		/* pg_type.oid of real (stable) */
#define COPY_BUF_SIZE		(1 << 20)	/* bytes handed to PQputCopyData */

#define ERR_SQLSTATE_DUPLICATE_TABLE	"42P07"

static const char *progname = "dml-load-idx";

/* an IDX file read into memory */
typedef struct IdxFile
{
	const char *path;
	uint32_t	count;			/* first dimension */
	uint32_t	rows;			/* images only */
	uint32_t	cols;			/* images only */
	size_t		itemsize;		/* bytes per item: rows*cols, or 1 */
	unsigned char *data;		/* count * itemsize bytes */
} IdxFile;

/* a bounded buffer of COPY data */
typedef struct CopyBuf
{
	char	   *data;
	size_t		len;
} CopyBuf;

/* print an error message and exit with status 1 */
static void
fatal(const char *fmt,...)
{
	va_list		ap;

	fprintf(stderr, "%s: error: ", progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* print usage to the given stream */
static void
usage(FILE *out)
{
	fprintf(out,
			"%s loads an IDX image/label pair (MNIST, Fashion-MNIST) into a table.\n\n"
			"Usage:\n"
			"  %s [OPTION]... IMAGES LABELS TABLE\n\n"
			"Options:\n"
			"  -d, --dbname=CONNINFO  database name or connection string (default: PG* environment)\n"
			"  -n, --limit=N          load only the first N images\n"
			"      --replace          drop TABLE first if it exists\n"
			"  -q, --quiet            print nothing on success\n"
			"  -h, --help             show this help and exit\n\n"
			"IMAGES and LABELS are IDX files, gzip-compressed or not.  TABLE may be\n"
			"schema-qualified (schema.table); it is created as\n"
			"  (id int PRIMARY KEY, label int NOT NULL, pixels real[] NOT NULL)\n"
			"with id counted from 0 in file order and pixels scaled to [0,1].\n",
			progname, progname);
}

/* read exactly len bytes or fail, naming the file and what was being read */
static void
gz_read_exact(gzFile gz, const char *path, void *buf, size_t len,
			  const char *what)
{
	unsigned char *p = buf;

	while (len > 0)
	{
		unsigned	chunk = len > (1u << 30) ? (1u << 30) : (unsigned) len;
		int			n = gzread(gz, p, chunk);

		if (n < 0)
		{
			int			errnum;
			const char *msg = gzerror(gz, &errnum);

			fatal("could not read %s from \"%s\": %s", what, path,
				  errnum == Z_ERRNO ? strerror(errno) : msg);
		}
		if (n == 0)
			fatal("\"%s\" is truncated: end of file while reading %s", path, what);
		p += n;
		len -= n;
	}
}

/* read a big-endian 32-bit unsigned integer */
static uint32_t
gz_read_u32(gzFile gz, const char *path, const char *what)
{
	uint32_t	v;

	gz_read_exact(gz, path, &v, sizeof(v), what);
	return ntohl(v);
}

/* read and check a whole IDX file; expect_magic says images or labels */
static void
idx_read(IdxFile *f, const char *path, uint32_t expect_magic)
{
	const char *kind = expect_magic == IDX_IMAGES_MAGIC ? "images" : "labels";
	gzFile		gz;
	uint32_t	magic;
	size_t		total;
	unsigned char extra;

	memset(f, 0, sizeof(*f));
	f->path = path;
	gz = gzopen(path, "rb");
	if (gz == NULL)
		fatal("could not open %s file \"%s\": %s", kind, path,
			  errno ? strerror(errno) : "out of memory");
	gzbuffer(gz, 1 << 18);

	magic = gz_read_u32(gz, path, "the magic number");
	if (magic != expect_magic)
	{
		const char *hint = "";

		if (magic == IDX_IMAGES_MAGIC || magic == IDX_LABELS_MAGIC)
			hint = " (are the IMAGES and LABELS arguments swapped?)";
		fatal("\"%s\" is not an IDX %s file: magic number %u (0x%08x), expected %u (0x%08x)%s",
			  path, kind, magic, magic, expect_magic, expect_magic, hint);
	}

	f->count = gz_read_u32(gz, path, "the item count");
	if (f->count == 0)
		fatal("\"%s\" holds no items", path);
	if (f->count > IDX_MAX_COUNT)
		fatal("\"%s\" claims %u items, more than the %d an int id can number",
			  path, f->count, IDX_MAX_COUNT);

	if (expect_magic == IDX_IMAGES_MAGIC)
	{
		f->rows = gz_read_u32(gz, path, "the row count");
		f->cols = gz_read_u32(gz, path, "the column count");
		if (f->rows == 0 || f->cols == 0)
			fatal("\"%s\" has an empty image size %ux%u", path, f->rows, f->cols);
		if ((uint64_t) f->rows * f->cols > IDX_MAX_PIXELS)
			fatal("\"%s\" has images of %ux%u pixels, more than the limit of %d",
				  path, f->rows, f->cols, IDX_MAX_PIXELS);
		f->itemsize = (size_t) f->rows * f->cols;
	}
	else
		f->itemsize = 1;

	if ((uint64_t) f->count * f->itemsize > SIZE_MAX / 2)
		fatal("\"%s\" is too large (%u items of %zu bytes)", path, f->count,
			  f->itemsize);
	total = (size_t) f->count * f->itemsize;
	f->data = malloc(total);
	if (f->data == NULL)
		fatal("out of memory reading \"%s\" (%zu bytes)", path, total);
	gz_read_exact(gz, path, f->data, total, kind);

	/* the header says how long the data is; anything more is corruption */
	if (gzread(gz, &extra, 1) != 0)
		fatal("\"%s\" has data after the %u %s its header declares", path,
			  f->count, kind);
	gzclose(gz);
}

/* print a failed result's message (with SQLSTATE and hint) and exit */
static void
fatal_result(PGconn *conn, PGresult *res, const char *doing)
{
	const char *sqlstate = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *msg = res ? PQresultErrorMessage(res) : PQerrorMessage(conn);

	fprintf(stderr, "%s: error: %s failed: %s", progname, doing,
			msg && *msg ? msg : "(no message)\n");
	if (sqlstate && strcmp(sqlstate, ERR_SQLSTATE_DUPLICATE_TABLE) == 0)
		fprintf(stderr, "%s: hint: use --replace to drop and recreate it\n",
				progname);
	PQclear(res);
	PQfinish(conn);
	exit(1);
}

/* run a command that returns no rows, exiting on failure */
static void
exec_command(PGconn *conn, const char *sql, const char *doing)
{
	PGresult   *res = PQexec(conn, sql);

	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		fatal_result(conn, res, doing);
	PQclear(res);
}

/*
 * Split a table name the way SQL would read it into at most two parts,
 * unquoted parts folded to lower case, "quoted" parts kept with "" undoubled.
 */
static int
parse_qualified_name(const char *name, char parts[2][256])
{
	const char *p = name;
	int			nparts = 0;

	for (;;)
	{
		size_t		len = 0;

		if (nparts == 2)
			fatal("invalid table name \"%s\": more than two dotted parts", name);
		if (*p == '"')
		{
			for (p++;; p++)
			{
				if (*p == '\0')
					fatal("invalid table name \"%s\": unterminated quoted identifier", name);
				if (*p == '"')
				{
					if (p[1] != '"')
						break;
					p++;
				}
				if (len + 1 >= sizeof(parts[0]))
					fatal("invalid table name \"%s\": identifier too long", name);
				parts[nparts][len++] = *p;
			}
			p++;				/* closing quote */
		}
		else
		{
			for (; *p != '\0' && *p != '.'; p++)
			{
				if (*p == '"' || isspace((unsigned char) *p))
					fatal("invalid table name \"%s\": quote the part that holds '%c'",
						  name, *p);
				if (len + 1 >= sizeof(parts[0]))
					fatal("invalid table name \"%s\": identifier too long", name);
				parts[nparts][len++] = tolower((unsigned char) *p);
			}
		}
		if (len == 0)
			fatal("invalid table name \"%s\": empty identifier", name);
		parts[nparts][len] = '\0';
		nparts++;
		if (*p == '\0')
			break;
		if (*p != '.')
			fatal("invalid table name \"%s\": expected '.' after a quoted identifier", name);
		p++;
	}
	return nparts;
}

/* the table name as quoted SQL text (malloc'd) */
static char *
quote_table_name(PGconn *conn, const char *name)
{
	char		parts[2][256];
	int			nparts = parse_qualified_name(name, parts);
	char	   *quoted[2] = {NULL, NULL};
	char	   *result;
	size_t		len = 1;

	for (int i = 0; i < nparts; i++)
	{
		quoted[i] = PQescapeIdentifier(conn, parts[i], strlen(parts[i]));
		if (quoted[i] == NULL)
			fatal("could not quote table name \"%s\": %s", name,
				  PQerrorMessage(conn));
		len += strlen(quoted[i]) + 1;
	}
	result = malloc(len);
	if (result == NULL)
		fatal("out of memory");
	strcpy(result, quoted[0]);
	if (nparts == 2)
	{
		strcat(result, ".");
		strcat(result, quoted[1]);
	}
	for (int i = 0; i < nparts; i++)
		PQfreemem(quoted[i]);
	return result;
}

/*
 * Whether the server can compress TOAST with lz4.  The arrays are toasted;
 * with pglz compression dominates the load (about 6 s of 8 for 60,000
 * images here), lz4 is three times faster to write and to read back.
 */
static int
server_has_lz4(PGconn *conn)
{
	PGresult   *res = PQexec(conn,
							 "SELECT 1 FROM pg_catalog.pg_settings "
							 "WHERE name = 'default_toast_compression' "
							 "AND 'lz4' = ANY (enumvals)");
	int			found;

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		fatal_result(conn, res, "checking for lz4");
	found = PQntuples(res) > 0;
	PQclear(res);
	return found;
}

/* send the buffered COPY data and empty the buffer */
static void
copy_flush(PGconn *conn, CopyBuf *buf)
{
	if (buf->len == 0)
		return;
	if (PQputCopyData(conn, buf->data, (int) buf->len) != 1)
		fatal("could not send COPY data: %s", PQerrorMessage(conn));
	buf->len = 0;
}

/* append a big-endian int16 */
static inline char *
put_i16(char *p, int16_t v)
{
	uint16_t	be = htons((uint16_t) v);

	memcpy(p, &be, 2);
	return p + 2;
}

/* append a big-endian int32 */
static inline char *
put_i32(char *p, int32_t v)
{
	uint32_t	be = htonl((uint32_t) v);

	memcpy(p, &be, 4);
	return p + 4;
}

/*
 * Stream rows 0..n-1 as binary COPY data: per tuple three fields, the last
 * a one-dimensional float4 array (ndim, flags, elemtype, dim, lbound, then
 * a length and a value per element).
 */
static void
copy_rows(PGconn *conn, const IdxFile *images, const IdxFile *labels,
		  uint32_t n)
{
	static const char signature[11] = "PGCOPY\n\377\r\n";	/* + NUL */
	size_t		npix = images->itemsize;
	size_t		arraylen = 20 + 8 * npix;
	size_t		rowlen = 2 + 4 + 4 + 4 + 4 + 4 + arraylen;
	uint32_t	scaled[256];	/* byte -> float4 bits, big-endian */
	uint32_t	len4 = htonl(4);
	CopyBuf		buf;

	for (int b = 0; b < 256; b++)
	{
		float		f = (float) b / 255.0f;
		uint32_t	bits;

		memcpy(&bits, &f, 4);
		scaled[b] = htonl(bits);
	}

	buf.len = 0;
	buf.data = malloc(rowlen > COPY_BUF_SIZE ? rowlen : COPY_BUF_SIZE);
	if (buf.data == NULL)
		fatal("out of memory");

	memcpy(buf.data, signature, sizeof(signature));
	buf.len = sizeof(signature);
	put_i32(buf.data + buf.len, 0);		/* flags */
	put_i32(buf.data + buf.len + 4, 0);	/* header extension length */
	buf.len += 8;

	for (uint32_t i = 0; i < n; i++)
	{
		const unsigned char *px = images->data + (size_t) i * npix;
		char	   *p;

		if (buf.len + rowlen > COPY_BUF_SIZE)
			copy_flush(conn, &buf);
		p = buf.data + buf.len;
		p = put_i16(p, 3);
		p = put_i32(p, 4);
		p = put_i32(p, (int32_t) i);
		p = put_i32(p, 4);
		p = put_i32(p, labels->data[i]);
		p = put_i32(p, (int32_t) arraylen);
		p = put_i32(p, 1);		/* ndim */
		p = put_i32(p, 0);		/* no nulls */
		p = put_i32(p, FLOAT4OID);
		p = put_i32(p, (int32_t) npix);
		p = put_i32(p, 1);		/* lower bound */
		for (size_t j = 0; j < npix; j++)
		{
			memcpy(p, &len4, 4);
			memcpy(p + 4, &scaled[px[j]], 4);
			p += 8;
		}
		buf.len = p - buf.data;
	}
	if (buf.len + 2 > COPY_BUF_SIZE)
		copy_flush(conn, &buf);
	put_i16(buf.data + buf.len, -1);	/* trailer */
	buf.len += 2;
	copy_flush(conn, &buf);
	free(buf.data);
}

/* parse options, read and check both files, then create and fill the table */
int
main(int argc, char **argv)
{
	static const struct option long_options[] = {
		{"dbname", required_argument, NULL, 'd'},
		{"limit", required_argument, NULL, 'n'},
		{"replace", no_argument, NULL, 'r'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}
	};
	const char *conninfo = NULL;
	long long	limit = -1;
	int			replace = 0;
	int			quiet = 0;
	int			c;
	IdxFile		images;
	IdxFile		labels;
	uint32_t	n;
	PGconn	   *conn;
	PGresult   *res;
	char	   *table;
	char	   *sql;
	size_t		sqlsize;
	double		t0,
				t_copy,
				t_analyze,
				t_done;

	while ((c = getopt_long(argc, argv, "d:n:qh", long_options, NULL)) != -1)
	{
		switch (c)
		{
			case 'd':
				conninfo = optarg;
				break;
			case 'n':
				{
					char	   *end;

					errno = 0;
					limit = strtoll(optarg, &end, 10);
					if (errno != 0 || end == optarg || *end != '\0' ||
						limit < 1 || limit > IDX_MAX_COUNT)
						fatal("invalid --limit \"%s\": must be an integer from 1 to %d",
							  optarg, IDX_MAX_COUNT);
					break;
				}
			case 'r':
				replace = 1;
				break;
			case 'q':
				quiet = 1;
				break;
			case 'h':
				usage(stdout);
				return 0;
			default:
				fprintf(stderr, "Try \"%s --help\" for more information.\n",
						progname);
				return 1;
		}
	}
	if (argc - optind != 3)
	{
		fprintf(stderr, "%s: error: expected IMAGES LABELS TABLE, got %d argument%s\n",
				progname, argc - optind, argc - optind == 1 ? "" : "s");
		fprintf(stderr, "Try \"%s --help\" for more information.\n", progname);
		return 1;
	}

	/* read and check everything before touching the database */
	t0 = dml_clock_seconds();
	idx_read(&images, argv[optind], IDX_IMAGES_MAGIC);
	idx_read(&labels, argv[optind + 1], IDX_LABELS_MAGIC);
	if (images.count != labels.count)
		fatal("\"%s\" holds %u images but \"%s\" holds %u labels",
			  images.path, images.count, labels.path, labels.count);
	n = images.count;
	if (limit > 0 && (uint64_t) limit < n)
		n = (uint32_t) limit;

	{
		const char *keywords[] = {"dbname", "fallback_application_name", NULL};
		const char *values[] = {conninfo, progname, NULL};

		conn = PQconnectdbParams(keywords, values, 1);
	}
	if (conn == NULL || PQstatus(conn) != CONNECTION_OK)
		fatal("could not connect to the database: %s",
			  conn ? PQerrorMessage(conn) : "out of memory");

	table = quote_table_name(conn, argv[optind + 2]);
	sqlsize = strlen(table) * 2 + 512;
	sql = malloc(sqlsize);
	if (sql == NULL)
		fatal("out of memory");

	exec_command(conn, "SET client_min_messages = warning", "setting client_min_messages");
	exec_command(conn, "BEGIN", "BEGIN");
	if (replace)
	{
		snprintf(sql, sqlsize, "DROP TABLE IF EXISTS %s", table);
		exec_command(conn, sql, "dropping the table");
	}
	snprintf(sql, sqlsize,
			 "CREATE TABLE %s (id int PRIMARY KEY, label int NOT NULL, "
			 "pixels real[] %sNOT NULL)", table,
			 server_has_lz4(conn) ? "COMPRESSION lz4 " : "");
	exec_command(conn, sql, "creating the table");

	/* per-element statistics of pixel arrays are useless and slow to gather */
	snprintf(sql, sqlsize, "ALTER TABLE %s ALTER COLUMN pixels SET STATISTICS 0",
			 table);
	exec_command(conn, sql, "setting column statistics");

	t_copy = dml_clock_seconds();
	snprintf(sql, sqlsize, "COPY %s (id, label, pixels) FROM STDIN (FORMAT binary)",
			 table);
	res = PQexec(conn, sql);
	if (PQresultStatus(res) != PGRES_COPY_IN)
		fatal_result(conn, res, "starting COPY");
	PQclear(res);
	copy_rows(conn, &images, &labels, n);
	if (PQputCopyEnd(conn, NULL) != 1)
		fatal("could not end COPY: %s", PQerrorMessage(conn));
	res = PQgetResult(conn);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		fatal_result(conn, res, "COPY");
	if (strtoull(PQcmdTuples(res), NULL, 10) != n)
		fatal("COPY reported %s rows, expected %u", PQcmdTuples(res), n);
	PQclear(res);
	while ((res = PQgetResult(conn)) != NULL)
		PQclear(res);

	t_analyze = dml_clock_seconds();
	snprintf(sql, sqlsize, "ANALYZE %s", table);
	exec_command(conn, sql, "ANALYZE");
	exec_command(conn, "COMMIT", "COMMIT");
	t_done = dml_clock_seconds();

	if (!quiet)
		printf("loaded %u rows (%ux%u pixels) into %s in %.2f s: %.0f rows/s "
			   "(files and setup %.2f s, COPY %.2f s = %.0f rows/s, "
			   "ANALYZE+COMMIT %.2f s)\n",
			   n, images.rows, images.cols, table, t_done - t0,
			   n / (t_done - t0), t_copy - t0, t_analyze - t_copy,
			   n / (t_analyze - t_copy), t_done - t_analyze);

	PQfinish(conn);
	free(sql);
	free(table);
	free(images.data);
	free(labels.data);
	return 0;
}
