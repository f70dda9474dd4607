/*-------------------------------------------------------------------------
 *
 * package.c
 *	  Write and read dml's own export format (package.h).  Reading checks
 *	  every length against what is left before it looks, then the
 *	  checksum; it is fuzzed by regress/fuzz/fuzz_import.c.
 *
 *-------------------------------------------------------------------------
 */
#include "package.h"

#include <stdio.h>
#include <string.h>

#define FAIL(st, ...) \
	do { snprintf(errbuf, errlen, __VA_ARGS__); return (st); } while (0)

size_t
dml_package_size(const DmlPackage *p)
{
	size_t		n = 12 + 4;

	for (int i = 0; i < DML_PACKAGE_PARTS; i++)
		n += 4 + (size_t) p->len[i];
	return n;
}

void
dml_package_write(const DmlPackage *p, unsigned char *buf)
{
	size_t		total = dml_package_size(p);
	unsigned char *q = buf + 12;

	dml_put_le32(buf, DML_PACKAGE_MAGIC);
	dml_put_le32(buf + 4, DML_PACKAGE_VERSION);
	dml_put_le32(buf + 8, (uint32_t) total);
	for (int i = 0; i < DML_PACKAGE_PARTS; i++)
	{
		dml_put_le32(q, p->len[i]);
		if (p->len[i] > 0)
			memcpy(q + 4, p->part[i], p->len[i]);
		q += 4 + p->len[i];
	}
	dml_put_le32(q, dml_crc32(buf, total - 4));
}

DmlStatus
dml_package_read(DmlPackage *p, const unsigned char *buf, size_t len,
				 char *errbuf, size_t errlen)
{
	static const char *const names[DML_PACKAGE_PARTS] = {"kind", "spec", "metrics", "weights"};
	DmlPackage	tmp;
	size_t		off = 12;

	if (len < 12 + 4 * DML_PACKAGE_PARTS + 4)
		FAIL(DML_ERR_FORMAT, "package is %zu bytes, shorter than any header", len);
	if (dml_get_le32(buf) != DML_PACKAGE_MAGIC)
		FAIL(DML_ERR_FORMAT, "not a dml package (magic 0x%08X)", dml_get_le32(buf));
	if (dml_get_le32(buf + 4) < 1 || dml_get_le32(buf + 4) > DML_PACKAGE_VERSION)
		FAIL(DML_ERR_FORMAT, "unsupported package version %u (this build reads 1 to %d)",
			 dml_get_le32(buf + 4), DML_PACKAGE_VERSION);
	if (dml_get_le32(buf + 8) != len)
		FAIL(DML_ERR_FORMAT, "package states %u bytes but has %zu", dml_get_le32(buf + 8), len);
	for (int i = 0; i < DML_PACKAGE_PARTS; i++)
	{
		uint32_t	n;

		if (len - 4 - off < 4)
			FAIL(DML_ERR_FORMAT, "package truncated before its %s", names[i]);
		n = dml_get_le32(buf + off);
		off += 4;
		if (n > len - 4 - off)
			FAIL(DML_ERR_FORMAT, "package's %s of %u bytes runs past its end", names[i], n);
		tmp.part[i] = buf + off;
		tmp.len[i] = n;
		if (i != DML_PACKAGE_WEIGHTS && memchr(buf + off, '\0', n) != NULL)
			FAIL(DML_ERR_FORMAT, "package's %s holds a NUL byte", names[i]);
		off += n;
	}
	if (off != len - 4)
		FAIL(DML_ERR_FORMAT, "package has %zu bytes after its parts", len - 4 - off);
	if (dml_crc32(buf, len - 4) != dml_get_le32(buf + len - 4))
		FAIL(DML_ERR_CHECKSUM, "checksum mismatch: package is corrupted");
	*p = tmp;
	return DML_OK;
}
