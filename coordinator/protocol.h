/*-------------------------------------------------------------------------
 *
 * protocol.h
 *	  Framed messages between the coordinator (in the backend) and rank 0
 *	  of a dml-worker job, over the job's Unix-domain control socket.
 *
 * Every message is a 12-byte header followed by its payload:
 *
 *	 uint32 magic   DML_MSG_MAGIC
 *	 uint32 type    DmlMsgType
 *	 uint32 length  payload bytes, at most DML_MSG_MAX
 *
 * in the host's byte order (both ends run on the same machine: rank 0 is
 * started by mpirun on the first host, the backend's).  Payloads:
 *
 *	 HELLO     text: "pids <pid> <pid> ...\nhosts <host> <host> ...": every
 *	           rank's pid (0 for a rank on another host than rank 0, whose
 *	           pid means nothing here) and host name, in rank order
 *	 PROGRESS  DmlProgress
 *	 CHECKPOINT binary: epoch (int32) then a model blob (kernels/format.c)
 *	 MODEL     binary: uint32 blob length, the blob, then JSON metrics text
 *	 ERROR     text: what failed, for the user's errmsg/errdetail
 *	 LOG       text: a line for a NOTICE
 *	 PREDICTIONS  a predict job's block of rows, in the order they were read:
 *	           uint32 rows B, uint32 outputs K, float32 out[B * K] (the
 *	           model's predictions as dml_model_predict gives them), then
 *	           when the job has an id column, per row an int32 length (-1
 *	           for NULL) and the id in its type's binary format
 *	 DONE      a predict job's end: int64 rows sent in all
 *
 * The socket is the job's lifeline: when the coordinator closes it, rank 0
 * ends the whole job.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_PROTOCOL_H
#define DML_PROTOCOL_H

#include <stdint.h>

#define DML_MSG_MAGIC	0x444D4C31u		/* "DML1" */
#define DML_MSG_MAX		(1u << 30)		/* 1 GiB: the largest model we accept */
#define DML_MSG_HEADER	12

typedef enum DmlMsgType
{
	DML_MSG_HELLO = 1,
	DML_MSG_PROGRESS = 2,
	DML_MSG_CHECKPOINT = 3,
	DML_MSG_MODEL = 4,
	DML_MSG_ERROR = 5,
	DML_MSG_LOG = 6,
	DML_MSG_PREDICTIONS = 7,
	DML_MSG_DONE = 8,
	DML_MSG_CLASSES = 9
} DmlMsgType;

/* One epoch's figures, reduced over every rank by rank 0 */
typedef struct DmlProgress
{
	int32_t		epoch;			/* 1-based */
	int32_t		restarts;
	double		loss;			/* mean training loss over the epoch */
	double		val_loss;		/* NaN when there is no validation set */
	double		val_metric;		/* accuracy or R^2; NaN without validation */
	double		seconds;		/* wall time of the epoch */
	double		train_seconds;	/* of which training (no validation); 0: all */
	double		rows;			/* training rows processed, all ranks */
	double		bytes_sent;		/* bytes this job's sync put on the wire */
	double		bytes_across;	/* ... of which between hosts */
	double		staleness;		/* ssp/async/ps: most staleness seen; NaN: n/a */
} DmlProgress;

#endif							/* DML_PROTOCOL_H */
