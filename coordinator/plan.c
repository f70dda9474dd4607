/*-------------------------------------------------------------------------
 *
 * plan.c
 *	  Split a relation into slices, a contiguous share per rank.
 *
 * A plain table is cut into contiguous ctid block ranges, read with a TID
 * Range Scan.  A declaratively partitioned table is the concatenation of
 * its leaf partitions, cut the same way, so ranks get equal numbers of
 * blocks whatever the partitions' sizes (a large leaf is shared by ranks, a
 * small one goes whole to a rank).  A view (or a foreign table) has no
 * blocks: it is one slice, read by rank 0, which deals the rows out to
 * every rank as they arrive (workers/load.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "storage/bufmgr.h"
#include "storage/bufpage.h"
#include "storage/lmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "coordinator.h"


typedef struct LeafBlocks
{
	Oid			relid;
	BlockNumber nblocks;
} LeafBlocks;

/* pages looked at from a table's end for the last that holds a tuple */
#define TRAIL_PAGES		256

/*
 * The blocks of rel up to the last that holds a tuple (a line pointer in
 * use), looked for from the end over at most TRAIL_PAGES pages.  From
 * PostgreSQL 16 a bulk load extends a table by many pages at once and can
 * leave the last ones empty: regress/sql/sync.sql's sreg made by CREATE
 * TABLE AS on 18 has 32 pages, 25 with rows, and slices cut by blocks gave
 * its two ranks 1,920 and 1,080 of the 3,000 rows (one rank idle four
 * steps in ten).  Only where the slices are cut moves: the last slice of
 * a leaf stays open at its end (DmlPlanSlices), so it still reads any
 * page passed over here.  A table whose last page holds rows costs one
 * page's read.
 */
static BlockNumber
blocks_with_tuples(Relation rel, BlockNumber nblocks)
{
	BufferAccessStrategy bas = GetAccessStrategy(BAS_BULKREAD);
	BlockNumber n = nblocks;

	while (n > 0 && nblocks - n < TRAIL_PAGES)
	{
		Buffer		buf = ReadBufferExtended(rel, MAIN_FORKNUM, n - 1, RBM_NORMAL, bas);
		Page		page;
		bool		used = false;

		LockBuffer(buf, BUFFER_LOCK_SHARE);
		page = BufferGetPage(buf);
		if (!PageIsNew(page))
		{
			OffsetNumber maxoff = PageGetMaxOffsetNumber(page);

			for (OffsetNumber off = FirstOffsetNumber; off <= maxoff && !used; off++)
				used = ItemIdIsUsed(PageGetItemId(page, off));
		}
		UnlockReleaseBuffer(buf);
		if (used)
			break;
		n--;
	}
	FreeAccessStrategy(bas);
	return n;
}

/*
 * leaf tables of a relation and their sizes in blocks (up to the last that
 * holds a tuple), in OID order
 */
static List *
leaf_blocks(Oid relid, char relkind)
{
	List	   *result = NIL;
	List	   *rels;
	ListCell   *lc;

	if (relkind == RELKIND_PARTITIONED_TABLE)
		rels = find_all_inheritors(relid, AccessShareLock, NULL);
	else
		rels = list_make1_oid(relid);

	foreach(lc, rels)
	{
		Oid			child = lfirst_oid(lc);
		char		ck = get_rel_relkind(child);
		LeafBlocks *lb;
		Relation	rel;

		if (ck == RELKIND_PARTITIONED_TABLE)
			continue;
		if (ck != RELKIND_RELATION && ck != RELKIND_MATVIEW)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("partition \"%s\" is not a table", get_rel_name(child)),
					 errhint("Train on a view over the partitioned table instead.")));
		rel = table_open(child, AccessShareLock);
		lb = palloc(sizeof(LeafBlocks));
		lb->relid = child;
		lb->nblocks = blocks_with_tuples(rel, RelationGetNumberOfBlocks(rel));
		table_close(rel, NoLock);
		result = lappend(result, lb);
	}
	return result;
}

/*
 * Whether the workers may read a partitioned table's leaves directly: the
 * caller must have SELECT on every leaf, and the parent must not carry
 * row-level security (a leaf read directly would skip the parent's
 * policies).  Otherwise the parent is read as a view is (rank 0 deals it).
 */
bool
DmlLeavesReadable(Oid relid)
{
	List	   *rels;
	ListCell   *lc;

	rels = find_all_inheritors(relid, AccessShareLock, NULL);
	foreach(lc, rels)
	{
		Oid			child = lfirst_oid(lc);
		Relation	rel = table_open(child, NoLock);
		bool		rls = rel->rd_rel->relrowsecurity;

		table_close(rel, NoLock);
		if (rls)
			return false;
		if (pg_class_aclcheck(child, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
			return false;
	}
	return true;
}

/*
 * DmlPlanSlices
 *		One or more slices per rank covering the relation exactly once, each
 *		of at most max_blocks blocks (coordinator.h says how many).
 */
List *
DmlPlanSlices(Oid relid, char relkind, int nranks, BlockNumber max_blocks)
{
	List	   *slices = NIL;
	List	   *leaves;
	ListCell   *lc;
	uint64		total = 0;
	uint64		pos = 0;

	if (relkind == RELKIND_PARTITIONED_TABLE && !DmlLeavesReadable(relid))
		relkind = RELKIND_VIEW;
	if (relkind == RELKIND_VIEW || relkind == RELKIND_FOREIGN_TABLE)
	{
		DmlSlice   *s = palloc0(sizeof(DmlSlice));

		s->rank = 0;
		s->relid = relid;
		s->whole = true;
		return list_make1(s);
	}

	leaves = leaf_blocks(relid, relkind);
	foreach(lc, leaves)
		total += ((LeafBlocks *) lfirst(lc))->nblocks;

	/*
	 * Rank r covers global blocks [total*r/n, total*(r+1)/n).  The last
	 * slice of each leaf is left open at the end, so rows in blocks added
	 * after we measured (invisible to our snapshot anyway) cannot be missed.
	 */
	foreach(lc, leaves)
	{
		LeafBlocks *lb = lfirst(lc);
		uint64		lstart = pos;
		uint64		lend = pos + lb->nblocks;

		for (int r = 0; r < nranks; r++)
		{
			uint64		rs = total * r / nranks;
			uint64		re = total * (r + 1) / nranks;
			uint64		s = Max(rs, lstart);
			uint64		e = Min(re, lend);
			bool		last_of_leaf = (e == lend);
			DmlSlice   *slice;

			/*
			 * an empty leaf (or one whose pages hold no tuple) still needs
			 * one reader, from its first block: the last rank
			 */
			if (lb->nblocks == 0)
			{
				if (r != nranks - 1)
					continue;
				s = e = lstart;
			}
			else if (s >= e)
				continue;

			do
			{
				uint64		ce = Min(e, s + max_blocks);

				slice = palloc0(sizeof(DmlSlice));
				slice->rank = r;
				slice->relid = lb->relid;
				slice->start = (BlockNumber) (s - lstart);
				slice->end = (last_of_leaf && ce == e) ? InvalidBlockNumber : (BlockNumber) (ce - lstart);
				slices = lappend(slices, slice);
				s = ce;
			} while (s < e);
		}
		pos = lend;
	}
	foreach(lc, slices)
	{
		DmlSlice   *sl = lfirst(lc);

		if (sl->end == InvalidBlockNumber)
			elog(DEBUG1, "dml: rank %d reads \"%s\" from block %u to its end",
				 sl->rank, get_rel_name(sl->relid), sl->start);
		else
			elog(DEBUG1, "dml: rank %d reads \"%s\" blocks %u to %u",
				 sl->rank, get_rel_name(sl->relid), sl->start, sl->end - 1);
	}
	return slices;
}

/*
 * DmlSliceQuery
 *		SELECT of the job's columns over one slice.  Every name comes from
 *		the catalog and is quoted; block numbers are integers we formatted.
 */
char *
DmlSliceQuery(DmlJob *job, DmlSlice *slice)
{
	StringInfoData buf;
	ListCell   *lc;
	char	   *nsp = get_namespace_name(get_rel_namespace(slice->relid));
	char	   *rel = get_rel_name(slice->relid);

	if (slice->query)
		return slice->query;	/* a shard's, built by shards.c */
	if (nsp == NULL || rel == NULL)
		elog(ERROR, "relation %u vanished while planning", slice->relid);
	initStringInfo(&buf);
	if (job->pack_target && !slice->whole)
	{
		/* one dml.pack_rows block for the slice (workers/load.c) */
		appendStringInfo(&buf, "SELECT dml.%s(%s", job->pack_wide ? "pack_rows64" : "pack_rows",
						 job->pack_target);
		foreach(lc, job->features)
			appendStringInfo(&buf, ", %s", ((DmlFeature *) lfirst(lc))->expr);
		appendStringInfoChar(&buf, ')');
	}
	else if (job->type == DML_JOB_PREDICT)
	{
		/* [the row id,] the features as the model reads them */
		appendStringInfoString(&buf, "SELECT ");
		if (job->predict_id)
			appendStringInfo(&buf, "%s, ", job->target.expr);
		foreach(lc, job->features)
			appendStringInfo(&buf, "%s%s", foreach_current_index(lc) ? ", " : "",
							 ((DmlFeature *) lfirst(lc))->expr);
	}
	else
	{
		appendStringInfo(&buf, "SELECT %s", job->target.expr);
		foreach(lc, job->features)
			appendStringInfo(&buf, ", %s", ((DmlFeature *) lfirst(lc))->expr);
	}
	appendStringInfo(&buf, " FROM %s", quote_qualified_identifier(nsp, rel));
	if (!slice->whole)
	{
		if (slice->start > 0 && slice->end != InvalidBlockNumber)
			appendStringInfo(&buf, " WHERE ctid >= '(%u,0)'::tid AND ctid < '(%u,0)'::tid",
							 slice->start, slice->end);
		else if (slice->start > 0)
			appendStringInfo(&buf, " WHERE ctid >= '(%u,0)'::tid", slice->start);
		else if (slice->end != InvalidBlockNumber)
			appendStringInfo(&buf, " WHERE ctid < '(%u,0)'::tid", slice->end);
	}
	return buf.data;
}

/*
 * DmlPredictColumnExpr
 *		The SQL a predict job's rank reads feature f from, the column named
 *		qname (quoted) of base type f->typid, so that values arrive as
 *		dml_predict reads them: numbers and booleans as float8 (the casts
 *		DmlDatumToDouble makes), arrays as float8[], categories as their
 *		type's output text, NULL as NULL.  Only pg_catalog is named, so a
 *		shard's server need not have dml.  The extension checked the type.
 */
char *
DmlPredictColumnExpr(const DmlFeature *f, const char *qname)
{
	Oid			t = (Oid) f->typid;
	Oid			elt;

	switch (f->kind)
	{
		case DML_FEAT_NUM:
			if (t == BOOLOID)
				return psprintf("%s::pg_catalog.int4::pg_catalog.float8", qname);
			return psprintf("%s::pg_catalog.float8", qname);
		case DML_FEAT_VEC:
			elt = get_element_type(t);
			if (elt == BOOLOID)
				return psprintf("%s::pg_catalog.int4[]::pg_catalog.float8[]", qname);
			return psprintf("%s::pg_catalog.float8[]", qname);
		case DML_FEAT_CAT:
			return psprintf("CASE WHEN pg_catalog.num_nulls(%s) = 0 "
							"THEN pg_catalog.format('%%s', %s) END", qname, qname);
	}
	return NULL;				/* not reached */
}
