/*-------------------------------------------------------------------------
 *
 * heap_pages.h
 *	  Filling a heap table created in this transaction by writing its pages,
 *	  as CREATE INDEX writes an index's: no shared buffers, one write a page.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_HEAP_PAGES_H
#define DML_HEAP_PAGES_H

#include "access/heaptoast.h"
#include "access/htup.h"
#include "utils/relcache.h"

typedef struct DmlHeapPages DmlHeapPages;

/* tuples no longer than this go in (the caller checks): never toasted */
#define DML_HEAP_PAGES_MAX_TUPLE	TOAST_TUPLE_THRESHOLD

extern DmlHeapPages *DmlHeapPagesBegin(Relation rel);
extern HeapTupleHeader DmlHeapPagesAdd(DmlHeapPages *hp, HeapTupleHeader tuple, uint32 len);
extern void DmlHeapPagesEnd(DmlHeapPages *hp);

#endif							/* DML_HEAP_PAGES_H */
