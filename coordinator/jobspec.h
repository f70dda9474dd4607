/*-------------------------------------------------------------------------
 *
 * jobspec.h
 *	  The job contract: the settings of a training job, each listed once in
 *	  one table that the extension, the coordinator and the workers all use.
 *	  Plain C: no PostgreSQL, MPI or libpq header.
 *
 * DML_JOB_SETTINGS(X) calls X(TYPE, name, STORED) once per setting:
 *
 *	 TYPE    INT (int), DBL (double), I64 (a 64-bit integer), STR (a string
 *	         every job has), OPT (a string that may be NULL: left out)
 *	 name    the member of the backend's DmlJob (coordinator.h) and of the
 *	         workers' WorkerSpec (workers/worker.h), and the key of the
 *	         serialized job and of the stored spec's hyperparameters
 *	 STORED  1: kept in dml.models.spec -> hyperparameters
 *
 * The coordinator writes the serialized job from the table
 * (coordinator/launch.c, job_settings), the workers read it back with the
 * same table (workers/spec.c), and the stored spec's hyperparameters are
 * written from it (extension/train.c, spec_json).  So a new setting is one
 * row here, one member in each of the two structs, its SQL argument, and
 * the code that uses it.
 *
 * The serialized job is one line per setting, "key value", with "\\", "\n",
 * "\r" and "\t" escaped in the value; doubles are written with 17
 * significant digits, so they read back bit for bit.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_JOBSPEC_H
#define DML_JOBSPEC_H

#define DML_JOB_SETTINGS(X) \
	X(STR, optimizer, 1) \
	X(DBL, learning_rate, 1) \
	X(DBL, momentum, 1) \
	X(DBL, beta1, 0) \
	X(DBL, beta2, 0) \
	X(DBL, eps, 0) \
	X(INT, step_size, 0) \
	X(DBL, gamma, 0) \
	X(DBL, tolerance, 0) \
	X(INT, batch_size, 1) \
	X(INT, epochs, 1) \
	X(DBL, max_seconds, 1) \
	X(DBL, weight_decay, 1) \
	X(DBL, validation, 1) \
	X(INT, patience, 1) \
	X(STR, nulls, 1) \
	X(STR, device, 0) \
	X(I64, seed, 1) \
	X(INT, checkpoint_every, 0) \
	X(OPT, fault, 0) \
	X(STR, sync, 1) \
	X(INT, servers, 1) \
	X(INT, staleness, 1) \
	X(INT, average_every, 1) \
	X(STR, compression, 1) \
	X(DBL, topk_ratio, 1) \
	X(OPT, straggler, 0) \
	X(INT, attempt, 0)

/* printf formats of the serialized job, by TYPE (I64 as long long) */
#define DML_JOB_FMT_INT		"%d"
#define DML_JOB_FMT_DBL		"%.17g"
#define DML_JOB_FMT_I64		"%lld"

/*
 * max_seconds: the time budget of training, checked by rank 0 from the start
 * of the training loop (0: none).  When it is spent every rank stops at the
 * same step, and the metrics say "stopped": "max_seconds".
 */
#define DML_MAX_SECONDS_MAX	(86400.0 * 365)

#endif							/* DML_JOBSPEC_H */
