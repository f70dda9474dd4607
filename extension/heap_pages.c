/*-------------------------------------------------------------------------
 *
 * heap_pages.c
 *	  Filling a heap table created in this transaction by writing its pages.
 *
 * heap_multi_insert puts each page of a new table through a shared buffer:
 * the relation is extended by a page of zeros (one write), the page is
 * filled in the buffer, and when the bulk-insert ring reuses that buffer
 * the page is written again; each page also costs a buffer-mapping entry
 * and the extension lock.  A table dml_predict_table has just created,
 * with no index, trigger or rule and no block yet, is seen by no one else
 * until its transaction commits, so its pages can be built in local memory
 * and written once each, as CREATE INDEX writes an index (nbtsort.c):
 *
 *	- each page is what heap_multi_insert would have made of the same
 *	  tuples in the same order: the same fill rule (the table's fillfactor,
 *	  as RelationGetBufferForTuple), the same line pointers (PageAddItem),
 *	  the same tuple headers (xmin this transaction, cmin this command,
 *	  xmax invalid, t_ctid the tuple's own place, as heap_prepare_insert and
 *	  RelationPutHeapTuple set them);
 *	- where the table needs WAL, each page is logged whole (log_newpages:
 *	  a standby, a base backup and crash recovery restore it as written),
 *	  its checksum set, and it is written with smgrextend, which asks the
 *	  checkpointer to fsync it at the next checkpoint, as a buffer's write
 *	  does.  Recovery starts at a checkpoint's redo pointer: if a
 *	  checkpoint began while the pages were written, WAL from before it
 *	  will not be replayed and that checkpoint may have synced the file
 *	  before the later writes, so then the file is fsynced here before the
 *	  commit (the rule of PostgreSQL 17's bulk writer; nbtsort.c before it
 *	  always synced).  Where the table needs no WAL (wal_level minimal, a
 *	  table of this transaction), the commit syncs it, as any such table;
 *	- from PostgreSQL 17 the server's bulk writer (storage/bulk_write.h)
 *	  does the logging, checksums, writing and syncing.
 *
 * Logical decoding reads inserts from their heap records, which whole
 * pages are not: with wal_level logical the caller inserts as before.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xloginsert.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/bufmgr.h"
#include "storage/bufpage.h"
#include "storage/smgr.h"
#include "utils/rel.h"
#if PG_VERSION_NUM >= 170000
#include "storage/bulk_write.h"
#endif

#include "heap_pages.h"

/* pages logged and written together (log_newpages' records hold 32) */
#define PAGES_BATCH		32
#ifdef PG_IO_ALIGN_SIZE
#define IO_ALIGN		PG_IO_ALIGN_SIZE
#else
#define IO_ALIGN		4096
#endif

struct DmlHeapPages
{
	Relation	rel;
	TransactionId xid;
	CommandId	cid;
	Size		save_free;		/* the fillfactor's free space a page keeps */
	BlockNumber next;			/* block number of the page being filled */
	Page		page;			/* being filled; NULL before the first tuple */
	int64		ntuples;
#if PG_VERSION_NUM >= 170000
	BulkWriteState *bulk;
	BulkWriteBuffer buf;		/* page's buffer, the bulk writer's */
#else
	bool		use_wal;
	XLogRecPtr	start_redo;		/* the last checkpoint's redo pointer at the start */
	char	   *pages[PAGES_BATCH];	/* filled pages waiting, then page */
	BlockNumber blknos[PAGES_BATCH];
	int			npending;		/* filled pages in pages[] */
#endif
};

/*
 * DmlHeapPagesBegin
 *		Pages for rel, or NULL where its pages must go through the buffer
 *		manager: not a permanent heap table created in this transaction and
 *		still empty, or one with an index, trigger or rule (an event trigger
 *		may have added one), or wal_level logical.
 */
DmlHeapPages *
DmlHeapPagesBegin(Relation rel)
{
	DmlHeapPages *hp;
	List	   *indexes;

	if (rel->rd_rel->relkind != RELKIND_RELATION ||
		rel->rd_rel->relpersistence != RELPERSISTENCE_PERMANENT ||
		rel->rd_tableam != GetHeapamTableAmRoutine() ||
		rel->rd_createSubid == InvalidSubTransactionId ||
		rel->trigdesc != NULL || rel->rd_rel->relhasrules ||
		XLogLogicalInfoActive())
		return NULL;
	indexes = RelationGetIndexList(rel);
	if (indexes != NIL)
	{
		list_free(indexes);
		return NULL;
	}
	if (RelationGetNumberOfBlocks(rel) != 0)
		return NULL;

	hp = palloc0(sizeof(DmlHeapPages));
	hp->rel = rel;
	hp->xid = GetCurrentTransactionId();
	hp->cid = GetCurrentCommandId(true);
	hp->save_free = RelationGetTargetPageFreeSpace(rel, HEAP_DEFAULT_FILLFACTOR);
#if PG_VERSION_NUM >= 170000
	hp->bulk = smgr_bulk_start_rel(rel, MAIN_FORKNUM);
#else
	hp->use_wal = RelationNeedsWAL(rel);
	hp->start_redo = GetRedoRecPtr();
	{
		char	   *all = palloc(BLCKSZ * PAGES_BATCH + IO_ALIGN);

		all = (char *) TYPEALIGN(IO_ALIGN, all);
		for (int i = 0; i < PAGES_BATCH; i++)
			hp->pages[i] = all + (size_t) i * BLCKSZ;
	}
#endif
	return hp;
}

#if PG_VERSION_NUM < 170000
/* log, checksum and write the filled pages */
static void
write_pending(DmlHeapPages *hp)
{
	SMgrRelation smgr = RelationGetSmgr(hp->rel);

	if (hp->npending == 0)
		return;
	if (hp->use_wal)
#if PG_VERSION_NUM >= 160000
		log_newpages(&hp->rel->rd_locator, MAIN_FORKNUM, hp->npending, hp->blknos,
					 hp->pages, true);
#else
		log_newpages(&hp->rel->rd_node, MAIN_FORKNUM, hp->npending, hp->blknos,
					 hp->pages, true);
#endif
	for (int i = 0; i < hp->npending; i++)
	{
		PageSetChecksumInplace(hp->pages[i], hp->blknos[i]);
		smgrextend(smgr, MAIN_FORKNUM, hp->blknos[i], hp->pages[i], !hp->use_wal);
	}
	hp->npending = 0;
}
#endif

/* the page being filled is done: hand it on */
static void
finish_page(DmlHeapPages *hp)
{
#if PG_VERSION_NUM >= 170000
	smgr_bulk_write(hp->bulk, hp->next, hp->buf, true);
	hp->buf = NULL;
#else
	hp->blknos[hp->npending++] = hp->next;
	if (hp->npending == PAGES_BATCH)
		write_pending(hp);
#endif
	hp->page = NULL;
	hp->next++;
	CHECK_FOR_INTERRUPTS();
}

/* an empty page to fill, as block hp->next */
static void
start_page(DmlHeapPages *hp)
{
#if PG_VERSION_NUM >= 170000
	hp->buf = smgr_bulk_get_buf(hp->bulk);
	hp->page = (Page) hp->buf;
#else
	hp->page = hp->pages[hp->npending];
#endif
	PageInit(hp->page, BLCKSZ, 0);
}

/*
 * DmlHeapPagesAdd
 *		Put a copy of tuple (len bytes, a formed tuple's header and data)
 *		on the page, on a new one where it does not fit, and make it this
 *		transaction's insert.  Returns the copy, for the caller to set its
 *		values in place until the next call.
 */
HeapTupleHeader
DmlHeapPagesAdd(DmlHeapPages *hp, HeapTupleHeader tuple, uint32 len)
{
	OffsetNumber off;
	HeapTupleHeader th;

	if (len > DML_HEAP_PAGES_MAX_TUPLE)
		elog(ERROR, "dml: a tuple of %u bytes is too long for DmlHeapPagesAdd", len);
	if (hp->page != NULL && PageGetHeapFreeSpace(hp->page) < MAXALIGN(len) + hp->save_free)
		finish_page(hp);
	if (hp->page == NULL)
		start_page(hp);
	off = PageAddItem(hp->page, (Item) tuple, len, InvalidOffsetNumber, false, true);
	if (off == InvalidOffsetNumber)
		elog(ERROR, "dml: failed to add a tuple to a new page of \"%s\"",
			 RelationGetRelationName(hp->rel));
	th = (HeapTupleHeader) PageGetItem(hp->page, PageGetItemId(hp->page, off));
	/* as heap_prepare_insert, then RelationPutHeapTuple */
	th->t_infomask &= ~HEAP_XACT_MASK;
	th->t_infomask2 &= ~HEAP2_XACT_MASK;
	th->t_infomask |= HEAP_XMAX_INVALID;
	HeapTupleHeaderSetXmin(th, hp->xid);
	HeapTupleHeaderSetCmin(th, hp->cid);
	HeapTupleHeaderSetXmax(th, 0);
	ItemPointerSet(&th->t_ctid, hp->next, off);
	hp->ntuples++;
	return th;
}

/*
 * DmlHeapPagesEnd
 *		Write the last page; sync what needs it; count the inserts in the
 *		table's statistics, as heap_multi_insert does.
 */
void
DmlHeapPagesEnd(DmlHeapPages *hp)
{
	if (hp->page != NULL)
		finish_page(hp);
#if PG_VERSION_NUM >= 170000
	smgr_bulk_finish(hp->bulk);
#else
	write_pending(hp);
	if (hp->use_wal && GetRedoRecPtr() != hp->start_redo)
		smgrimmedsync(RelationGetSmgr(hp->rel), MAIN_FORKNUM);
#endif
	pgstat_count_heap_insert(hp->rel, hp->ntuples);
}
