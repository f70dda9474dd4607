/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  Server APIs that changed after PostgreSQL 15, behind one name each,
 *	  so the same source builds against 15 to 18 (regress/pgnew.sh builds
 *	  and tests against 16 and 18; no PyPI wheel has 17's headers).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_COMPAT_H
#define DML_COMPAT_H

#include "postgres.h"

#include <signal.h>

#include "storage/proc.h"

#if PG_VERSION_NUM >= 160000
/* 16 moved the varlena macros out of postgres.h */
#include "varatt.h"
#include "catalog/pg_proc.h"
#include "utils/acl.h"
/* 16 replaced the per-kind ACL checks with object_aclcheck */
#define pg_proc_aclcheck(fn, role, mode) \
	object_aclcheck(ProcedureRelationId, (fn), (role), (mode))
#endif

/* 17 moved the local transaction id into the virtual transaction id */
#if PG_VERSION_NUM >= 170000
#define DML_MY_LXID		(MyProc->vxid.lxid)
#else
#define DML_MY_LXID		(MyProc->lxid)
#endif

/* 17 took pgprocno out of PGPROC: this backend's number is MyProcNumber */
#if PG_VERSION_NUM >= 170000
#include "storage/procnumber.h"
#define DML_MY_PROCNO	MyProcNumber
#else
#define DML_MY_PROCNO	(MyProc->pgprocno)
#endif

/*
 * DmlSetSignal
 *		pqsignal, returning the disposition to restore afterwards.  18's
 *		pqsignal returns nothing, and what sigaction reports is its wrapper,
 *		not a handler to put back; a backend runs with SIGCHLD at SIG_DFL
 *		(postgres.c), so SIG_DFL (or SIG_IGN) is what is restored there.
 */
static inline pqsigfunc
DmlSetSignal(int signo, pqsigfunc func)
{
#if PG_VERSION_NUM >= 180000
	struct sigaction old;
	pqsigfunc	prev = SIG_DFL;

	if (sigaction(signo, NULL, &old) == 0 && old.sa_handler == SIG_IGN)
		prev = SIG_IGN;
	pqsignal(signo, func);
	return prev;
#else
	return pqsignal(signo, func);
#endif
}

#endif							/* DML_COMPAT_H */
