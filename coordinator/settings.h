/*-------------------------------------------------------------------------
 *
 * settings.h
 *	  The settings the coordinator reads.  The variables live here, in
 *	  coordinator/settings.c; extension/dml.c registers each as a GUC, so
 *	  the extension includes this header and the coordinator includes no
 *	  header of the extension.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_SETTINGS_H
#define DML_SETTINGS_H

/* ranks of a job and of the cluster (dml.workers, dml.max_workers, dml.max_workers_total) */
#define DML_MIN_WORKERS			1
#define DML_MAX_WORKERS			1024
#define DML_DEFAULT_MAX_WORKERS	64
#define DML_DEFAULT_MAX_JOBS_PER_ROLE	4

/* how a job's workers are started and connect back */
extern char *dml_mpirun;
extern char *dml_worker_path;
extern char *dml_conninfo;
extern char *dml_hosts;
extern char *dml_mpi_options;

/* where ranks spill rows that do not fit dml.worker_memory (supervise.c) */
extern char *dml_spill_dir;

/* limits.c: the cluster-wide limits on running jobs */
extern int	dml_max_workers_total;
extern int	dml_max_jobs_per_role;

#endif							/* DML_SETTINGS_H */
