/*-------------------------------------------------------------------------
 *
 * comm.h
 *	  How ranks talk: MPI collectives for synchronization (comm.c), and
 *	  rank 0's control socket to the coordinator (control.c).
 *
 * Bytes sent are counted as a ring all-reduce moves them: each rank sends
 * 2 (n-1)/n of the buffer, so a job's figure is 2 (n-1) times the buffer
 * (the same volume nccl-tests' bus bandwidth is based on).  Those that
 * cross between hosts are counted apart: of a flat ring over W ranks on H
 * hosts (each host's ranks consecutive), H of the W ranks send to another
 * host; of the hierarchical all-reduce, the ring of the H hosts' leaders,
 * 2 (H-1) times the buffer.  Point-to-point messages count by where they
 * go.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DML_COMM_H
#define DML_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* comm.c */
extern void comm_init(int *argc, char ***argv);
extern void comm_split_roles(int servers);
extern int	comm_is_server(void);
extern void comm_finalize(void);
extern void comm_allreduce_float(float *buf, size_t n);
extern void comm_allreduce_double(double *buf, size_t n);
extern void comm_allreduce_max_i64(int64_t *buf, int n);
extern void comm_allreduce_max_float(float *buf, int n);
extern void comm_allreduce_max_double(double *buf, int n);
extern void comm_allreduce_half(uint16_t *buf, size_t n);
extern void comm_allgather_bytes(const void *send, size_t bytes, void *recv);
extern void comm_sendrecv_float(const float *send, float *recv, size_t n, int dest, int src);
extern void comm_bcast(void *buf, size_t bytes, int root);
extern void comm_allgather_i64(int64_t *buf);	/* (world) entries */
extern double comm_job_bytes(void);		/* sync bytes of the whole job so far */
extern double comm_job_bytes_across(void);	/* ... of which crossed between hosts */
extern void comm_job_bytes_reset(void);	/* a resident job's next trial counts afresh */
extern void comm_count_bytes(double buffer_bytes);	/* a ring all-reduce of this buffer elsewhere */
extern void comm_count_hierarchical(double within, double across);
extern void comm_count_p2p(double bytes, int dest_world_rank);
extern void comm_reduce_p2p(double extra, double extra_across);
extern void comm_barrier(void);
extern void *comm_data_handle(void);	/* MPI_Comm * of the data ranks */

#ifdef MPI_VERSION
/* waiting without taking a shared core for long */
extern void comm_wait_all(int n, MPI_Request *req);
extern void comm_probe(int source, int tag, MPI_Comm comm, MPI_Status *st);
#endif

/* where the data ranks run: hosts, and this rank among its host's */
extern int	comm_hosts(void);
extern int	comm_local_rank(void);
extern int	comm_local_size(void);
extern bool comm_elsewhere(int world_rank);
extern void comm_leaders_allreduce_float(float *buf, size_t n);
extern bool comm_hosts_even(void);
extern void comm_peers_allreduce_float(float *buf, size_t n);
extern bool comm_cross_member(void);
extern void comm_cross_max_float(float *buf, int n);
extern void comm_cross_allreduce_half(uint16_t *buf, size_t n);
extern void comm_cross_allgather_bytes(const void *send, size_t bytes, void *recv);

/* a segment the data ranks on one host map */
typedef struct CommShared CommShared;
extern CommShared *comm_shared_alloc(size_t bytes, void **base);
extern void comm_shared_fence(CommShared *sh);
extern void comm_shared_free(CommShared *sh);
extern void comm_shared_list(CommShared *sh, int which, int rank, int n);
extern int	comm_shared_peek(CommShared *sh, int which, int rank, bool back);
extern int	comm_shared_take(CommShared *sh, int which, int rank, bool back);
extern bool comm_shared_reached(CommShared *sh, int64_t value);
extern void comm_shared_publish(CommShared *sh, int64_t value);
extern void comm_shared_progress_reset(CommShared *sh);
extern void comm_shared_await(CommShared *sh, int64_t value);

extern int	world_rank;
extern int	world_size;
extern int	server_count;

/* control.c: rank 0 only */
extern void control_connect(const char *path);
extern void control_send(uint32_t type, const void *a, size_t alen,
						 const void *b, size_t blen);
extern void control_start_watchdog(void);
extern bool control_next_job(char **text, size_t *len, unsigned char **attached,
							 size_t *attached_len);
extern void control_receive_job(char **text, size_t *len, unsigned char **attached,
								size_t *attached_len);
/* comm.c: rank 0's job text to every rank of the world */
extern void comm_share_job(char **text, size_t *len);

#endif							/* DML_COMM_H */
