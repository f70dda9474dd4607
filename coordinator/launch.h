/*-------------------------------------------------------------------------
 *
 * launch.h
 *	  Job directory, control socket and mpirun launch (launch.c), used by
 *	  the supervisor (supervise.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_LAUNCH_H
#define DML_LAUNCH_H

#include "coordinator.h"

extern char *DmlMakeJobDir(void);
extern void DmlRemoveJobDir(const char *dir);
extern int	DmlListen(const char *dir, char **path_out);
extern pid_t DmlLaunch(DmlJob *job, const char *dir, const char *socket_path);
extern char *DmlJobText(DmlJob *job, bool resume);

#endif							/* DML_LAUNCH_H */
