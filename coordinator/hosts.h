/*-------------------------------------------------------------------------
 *
 * hosts.h
 *	  Where a job's ranks run (hosts.c): dml.hosts in Open MPI's hostfile
 *	  terms, narrowed per job, placed as mpirun's --host list.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_HOSTS_H
#define DML_HOSTS_H

#include "nodes/pg_list.h"

typedef struct DmlHost
{
	char	   *name;
	int			slots;
} DmlHost;

extern List *DmlHostsParseText(const char *text, const char **error);
extern List *DmlHostsChoose(List *narrow);
extern char *DmlHostsPlace(List *hosts, List *lost, int ranks);

#endif							/* DML_HOSTS_H */
