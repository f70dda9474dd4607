/*-------------------------------------------------------------------------
 *
 * shards.h
 *	  Data on several PostgreSQL servers (shards.c): a partitioned table
 *	  whose leaves are local tables or postgres_fdw foreign tables, or a
 *	  postgres_fdw foreign table alone, read by ranks on each shard's host
 *	  straight from the shard's server.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_SHARDS_H
#define DML_SHARDS_H

#include "nodes/pg_list.h"

struct DmlJob;

/* One foreign server a job reads, as the workers see it */
typedef struct DmlShardServer
{
	Oid			serverid;
	char	   *name;			/* the foreign server's name */
	char	   *host;			/* its host option ("" for the default) */
	char	   *conninfo;		/* the workers' connection string (secret: the job only) */
	char	   *snapshot;		/* exported on the coordinator's connection */
	char	   *snapshot_time;	/* statement_timestamp() of the export, on that server */
	int			placed_host;	/* index of its host among the job's hosts, -1: none */
} DmlShardServer;

extern bool DmlShardsIs(Oid relid);
extern bool DmlShardsCountRows(Oid relid, int64 limit, int64 *rows);
extern bool DmlShardsDistinct(Oid relid, const char *column, int limit, bool type_order, List **values);
extern List *DmlShardsPlan(struct DmlJob *job, BlockNumber max_blocks);
extern void DmlShardsRefresh(struct DmlJob *job);
extern void DmlShardsJson(const struct DmlJob *job, StringInfo buf, bool metrics);

#endif							/* DML_SHARDS_H */
