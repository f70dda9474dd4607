/*-------------------------------------------------------------------------
 *
 * predict_table.h
 *	  dml_predict_table's two paths and what they share: the target
 *	  table (checked, created) and the writer that fills it.
 *
 * In the backend (predict_table.c) the source is read through SPI as the caller
 * and the model runs with the CPU kernels; dml_predict_rows runs the same path
 * into a tuplestore instead of a table (for a hot standby, which cannot
 * create one).  In a worker (predict_table_worker.c)
 * one dml-worker reads the source under the caller's exported snapshot
 * and role, runs the model on a GPU (or, for tests, the CPU), and streams
 * (id, outputs) blocks back; the backend writes them.  Either way the
 * rows go into the table through the same writer.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_PREDICT_TABLE_H
#define DML_PREDICT_TABLE_H

#include "access/heapam.h"
#include "executor/tuptable.h"
#include "nodes/primnodes.h"
#include "utils/relcache.h"
#include "utils/tuplestore.h"

#include "dml.h"

#define DML_BATCH_ROWS			1024	/* rows per GEMM and per multi-insert */
#define DML_PROGRESS_ROWS		100000	/* NOTICE every this many rows... */
#define DML_PROGRESS_MIN_ROWS	200000	/* ...on tables estimated at least this large */

/* The call: model, source, target table, and how rows are identified */
typedef struct DmlPredictTarget
{
	char	   *model;			/* model name as given */
	DmlCachedModel *cm;
	Oid			source;
	char	   *target;			/* target name as given */
	RangeVar   *rv;
	char	   *qtarget;		/* quoted, possibly qualified */
	char	   *id_column;		/* NULL: row numbers */
	AttrNumber	id_attnum;
	Oid			id_type;		/* INT8OID for row numbers */
	Oid			out_relid;		/* once created */
	bool		progress;		/* NOTICE as rows go in */
	/* dml_predict_rows: rows go into this tuplestore, not into a table */
	Tuplestorestate *rows;
	TupleDesc	rows_desc;
} DmlPredictTarget;

/* Rows into the target table through the table AM's multi-insert */
typedef struct DmlPredictWriter
{
	DmlPredictTarget *t;
	Relation	rel;
	BulkInsertState bistate;
	CommandId	cid;
	TupleTableSlot **vslots;	/* (DML_BATCH_ROWS) virtual: rows formed by the heap */
	TupleTableSlot **hslots;	/* (DML_BATCH_ROWS) heap: rows from a template */
	TupleTableSlot **use;		/* (DML_BATCH_ROWS) the slot each row went in */
	int			K;				/* outputs per row */
	bool		classifier;
	Datum	   *labels;			/* class labels as text datums, made once */
	MemoryContext cxt;			/* the tuples of one multi-insert */
	HeapTuple  *templates;		/* per class (one for regression), or NULL */
	int			id_len;			/* 4 or 8: the id in a template */
	int			id_off;			/* offsets into a template's data */
	int			value_off;
	int		   *prob_offs;		/* per class */
	struct DmlHeapPages *pages; /* the table's pages written directly, or NULL */
	FmgrInfo	id_out;			/* dml_predict_rows: the id's output function */
	struct DmlRowTemplate **row_tmpl;	/* dml_predict_rows: per class, per id length */
	int64		done;
} DmlPredictWriter;

extern char *DmlRelSqlName(Oid relid);
extern char *DmlFeatureList(DmlCachedModel *cm);
extern double DmlEstimatedRows(Oid relid);
extern void DmlPredictTargetIdColumn(DmlPredictTarget *t);
extern void DmlPredictTargetCreate(DmlPredictTarget *t);
extern void DmlPredictWriterBegin(DmlPredictWriter *w, DmlPredictTarget *t);
/* out (B, K) the model's outputs; out64 the same in float64 (float64 models), or NULL */
extern void DmlPredictWriterPut(DmlPredictWriter *w, const Datum *ids,
								const bool *idnulls, const float *out, const double *out64,
								int B);
extern void DmlPredictWriterEnd(DmlPredictWriter *w);

/* predict_table_worker.c */
/* workers => at most this many ranks (dml.max_workers_total limits them too) */
#define DML_MAX_PREDICT_WORKERS 1024

extern void DmlPredictTableInWorker(DmlPredictTarget *t, const char *device, int workers,
									bool sharded);

#endif							/* DML_PREDICT_TABLE_H */
