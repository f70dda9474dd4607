/*-------------------------------------------------------------------------
 *
 * package.h
 *	  dml's own export format: one model version with everything that
 *	  predicts with it, for moving it between dml databases.
 *
 *	 offset  field
 *	 0       magic "DMLP" (uint32 0x504C4D44, little-endian)
 *	 4       package version (uint32, DML_PACKAGE_VERSION)
 *	 8       total length in bytes, checksum included (uint32)
 *	 12      four parts, each a uint32 length then its bytes:
 *	         kind (text), spec (JSON text), metrics (JSON text),
 *	         weights (the model blob of kernels/format.c)
 *	 end-4   CRC-32 of every byte before it (uint32)
 *
 * The weights keep their own format version and checksum: a package of
 * any version holds a blob that kernels/format.c parses.  No postgres.h
 * here (the fuzzer links it alone).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_PACKAGE_H
#define DML_PACKAGE_H

#include "kernels.h"

#define DML_PACKAGE_MAGIC	0x504C4D44u
#define DML_PACKAGE_VERSION	1
#define DML_PACKAGE_PARTS	4

typedef struct DmlPackage
{
	const unsigned char *part[DML_PACKAGE_PARTS];	/* into the buffer read */
	uint32_t	len[DML_PACKAGE_PARTS];
} DmlPackage;

#define DML_PACKAGE_KIND	0
#define DML_PACKAGE_SPEC	1
#define DML_PACKAGE_METRICS	2
#define DML_PACKAGE_WEIGHTS	3

/* bytes dml_package_write needs for these parts */
extern size_t dml_package_size(const DmlPackage *p);
extern void dml_package_write(const DmlPackage *p, unsigned char *buf);

/*
 * Check a package and point p's parts into buf; the text parts hold no
 * NUL byte.  The weights are not parsed here (dml_model_parse does that).
 */
extern DmlStatus dml_package_read(DmlPackage *p, const unsigned char *buf, size_t len,
								  char *errbuf, size_t errlen);

#endif							/* DML_PACKAGE_H */
