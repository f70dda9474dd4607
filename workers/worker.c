/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  dml-worker: main program of one MPI rank (its runtime: runtime.c).
 *
 *	  dml-worker <control socket>
 *
 * Started by mpirun, which the coordinator started in the backend, with
 * the path of the job's control socket.  Rank 0 connects, receives the
 * job (JOB) and hands it on to the other ranks over MPI; every rank reads
 * its slices; rank 0 also talks to the coordinator
 * over the control socket: HELLO with every rank's pid, PROGRESS per
 * epoch, CHECKPOINTs, and at the end the MODEL (or an ERROR).  A predict
 * job (predict.c) sends blocks of PREDICTIONS and DONE instead.
 *
 * A rank never outlives its job: it asks for SIGKILL when its parent
 * (mpirun) dies, and rank 0 ends the job when the coordinator's end of the
 * control socket closes.
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <cblas.h>
#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "libpq-fe.h"

#include "comm.h"
#ifdef DML_HAVE_CUDA
#include "cuda_kernels.h"
#endif
#include "protocol.h"
#include "sync.h"
#include "worker.h"

#define HOST_NAME_BYTES 64

/*
 * rank 0 tells the coordinator every rank's pid (those on its own host:
 * a pid on another host means nothing to the backend) and host
 */
static void
send_hello(void)
{
	int			pid = (int) getpid();
	char		me[HOST_NAME_BYTES];
	int		   *pids = world_rank == 0 ? malloc(sizeof(int) * world_size) : NULL;
	char	   *hosts = world_rank == 0 ? malloc((size_t) HOST_NAME_BYTES * world_size) : NULL;

	memset(me, 0, sizeof(me));
	memcpy(me, worker_host, strnlen(worker_host, sizeof(me) - 1));
	MPI_Gather(&pid, 1, MPI_INT, pids, 1, MPI_INT, 0, MPI_COMM_WORLD);
	MPI_Gather(me, HOST_NAME_BYTES, MPI_CHAR, hosts, HOST_NAME_BYTES, MPI_CHAR, 0, MPI_COMM_WORLD);
	if (world_rank == 0)
	{
		size_t		cap = 32 + (12 + HOST_NAME_BYTES + 4) * (size_t) world_size;
		char	   *text = malloc(cap);
		size_t		len = snprintf(text, cap, "pids");

		for (int r = 0; r < world_size; r++)
			len += snprintf(text + len, cap - len, " %d", comm_elsewhere(r) ? 0 : pids[r]);
		len += snprintf(text + len, cap - len, "\nhosts");
		for (int r = 0; r < world_size; r++)
		{
			const char *h = hosts + (size_t) HOST_NAME_BYTES * r;

			len += snprintf(text + len, cap - len, " %s", h);
		}
		control_send(DML_MSG_HELLO, text, len, NULL, 0);
		free(text);
		free(pids);
		free(hosts);
	}
}

/*
 * The device this rank trains on: a GPU index, or -1 for the CPU.  One
 * rank per GPU (NCCL cannot share a GPU between ranks), so 'auto' uses the
 * GPUs only when every host has one for each of its ranks; 'gpu' without
 * them is an error.  Every rank reaches the same decision.
 */
static int
choose_device(const WorkerSpec *spec, int iterative)
{
	int			ngpu = 0;
	int			local_rank = 0,
				local_size = 1;
	int			enough,
				any;
	MPI_Comm	node;

#ifdef DML_HAVE_CUDA
	if (spec->device != DML_DEVICE_CPU)
		ngpu = dml_gpu_device_count();
#endif
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
	MPI_Comm_rank(node, &local_rank);
	MPI_Comm_size(node, &local_size);
	MPI_Comm_free(&node);
	enough = ngpu >= local_size;
	any = ngpu > 0;
	MPI_Allreduce(MPI_IN_PLACE, &enough, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);

	if (spec->device == DML_DEVICE_GPU)
	{
		if (!any)
			worker_user_error("55000|Use device => 'cpu' or 'auto' on a machine without a GPU.|"
							  "device 'gpu' was asked for, but %s",
#ifdef DML_HAVE_CUDA
							  "no CUDA device is visible to the workers"
#else
							  "this build of dml-worker has no CUDA support"
#endif
				);
		if (!enough)
			worker_user_error("55000|Ask for at most as many workers per host as it has GPUs.|"
							  "%d GPU workers on a host with %d GPUs: each GPU rank needs a GPU of its own",
							  local_size, ngpu);
		if (!iterative)
			worker_user_error("0A000|Use device => 'cpu' or 'auto', or an iterative optimizer such as adam.|"
							  "the exact, Newton and L-BFGS solvers run on the CPU only");
	}
	if (spec->device == DML_DEVICE_CPU || !enough || !iterative)
		return -1;
	return local_rank;
}

/* rank 0: MODEL, the typed result and the model (protocol.h) */
static void
send_model(DmlResult *r, const TrainResult *res, const DmlMetrics *met, int gpu, double seconds)
{
	size_t		blen = dml_model_serialized_size(&res->model);
	size_t		slen = sizeof(int64_t) * r->servers + sizeof(double) * r->workers;
	size_t		mlen = sizeof(double) * met->nvalues;
	size_t		tlen = res->statistics_json ? strlen(res->statistics_json) : 0;
	size_t		len = sizeof(*r) + slen + mlen + blen + tlen;
	unsigned char *msg = malloc(len);

	if (msg == NULL)
		worker_fail("out of memory for a model of %zu bytes", blen);
	r->gpu = gpu;
	r->total_seconds = seconds;
	r->blob_len = (uint32_t) blen;
	r->stats_len = (uint32_t) tlen;
	memcpy(msg, r, sizeof(*r));
	if (r->servers)
		memcpy(msg + sizeof(*r), res->server_stale, sizeof(int64_t) * r->servers);
	memcpy(msg + sizeof(*r) + sizeof(int64_t) * r->servers, res->peak_rss,
		   sizeof(double) * r->workers);
	memcpy(msg + sizeof(*r) + slen, met->v, mlen);
	dml_model_serialize(&res->model, msg + sizeof(*r) + slen + mlen);
	if (tlen)
		memcpy(msg + sizeof(*r) + slen + mlen + blen, res->statistics_json, tlen);
	control_send(DML_MSG_MODEL, msg, len, NULL, 0);
	free(msg);
}

/* rank 0: the NOTICE line of a training */
static void
send_training_line(const WorkerSpec *spec, int gpu)
{
	char		line[256];
	int			n;

	if (worker_rank != 0)
		return;
	n = snprintf(line, sizeof(line), "training %s on %s with %d worker%s",
				 dml_job_name(DML_NAMES_KIND, spec->kind), gpu >= 0 ? "gpu" : "cpu", worker_world,
				 worker_world == 1 ? "" : "s");
	if (gpu >= 0 && spec->tf32)
		n += snprintf(line + n, sizeof(line) - n, ", tf32");
	if (spec->sync != DML_SYNC_ALLREDUCE || spec->compression != DML_COMPRESS_NONE)
		n += snprintf(line + n, sizeof(line) - n, ", sync %s%s%s",
					  dml_job_name(DML_NAMES_SYNC, spec->sync),
					  spec->compression != DML_COMPRESS_NONE ? ", compression " : "",
					  spec->compression != DML_COMPRESS_NONE ?
					  dml_job_name(DML_NAMES_COMPRESSION, spec->compression) : "");
	if (spec->servers > 0)
		n += snprintf(line + n, sizeof(line) - n, " and %d parameter server%s", spec->servers,
					  spec->servers == 1 ? "" : "s");
	control_send(DML_MSG_LOG, line, n, NULL, 0);
}

static int
is_iterative(const WorkerSpec *spec)
{
	return spec->optimizer != DML_JOB_OPT_EXACT && spec->optimizer != DML_JOB_OPT_NEWTON &&
		spec->optimizer != DML_JOB_OPT_LBFGS;
}

/* the GPU loop synchronizes by NCCL all-reduce, uncompressed; other modes run on the CPU */
static int
trial_device(const WorkerSpec *spec)
{
	/*
	 * A resident job's next trial with the same device and the same kind
	 * of loop gets what the ranks chose for the last one: the hosts and
	 * their GPUs are the same, and every rank reaches this answer on its
	 * own (choose_device's collectives cost a trial up to 50 ms on a busy
	 * machine).
	 */
	static bool chosen = false;
	static int	last_device,
				last_loop,
				last_gpu;
	int			loop = is_iterative(spec) && spec->sync == DML_SYNC_ALLREDUCE &&
		spec->compression == DML_COMPRESS_NONE;

	if (chosen && last_device == (int) spec->device && last_loop == loop)
		return last_gpu;
	last_gpu = choose_device(spec, loop);
	last_device = (int) spec->device;
	last_loop = loop;
	chosen = true;
	return last_gpu;
}

/*
 * The default penalty of logistic and softmax regression where the plan
 * did not count every row (jobspec.h: weight_decay_rows): over the rows
 * every rank read, the same rows and the same division as the plan's
 * count, so the same weight_decay bit for bit.  After prepare_data.
 */
static void
penalty_from_rows(WorkerSpec *spec, const Dataset *ds)
{
	int64_t		rows = ds->rows_read < DML_PENALTY_MAX_ROWS ? ds->rows_read : DML_PENALTY_MAX_ROWS;

	if (spec->weight_decay_rows > 0)
		spec->weight_decay = spec->weight_decay_rows / (double) (rows > 1 ? rows : 1);
}

/*
 * Train spec's model (res->model, standardized by prepare_data or
 * prepare_trial) over the rows of ds, and rank 0 sends it.  trial: the
 * training's number within a resident job (dml_tune), else 0.
 */
static void
train_and_send(Dataset *ds, const WorkerSpec *spec, TrainResult *res, int gpu, double t0, int trial)
{
	/*
	 * A spilled slice streams through every solver: the exact
	 * least-squares solver, Newton's method, L-BFGS, the CPU loop and the
	 * GPU loop (which copies each step's rows from the stream to the
	 * device).
	 */
	if (spec->optimizer == DML_JOB_OPT_EXACT)
		train_exact(ds, spec, res);
	else if (spec->optimizer == DML_JOB_OPT_NEWTON)
		train_newton(ds, spec, res);
	else if (spec->optimizer == DML_JOB_OPT_LBFGS)
		train_lbfgs(ds, spec, res);
#ifdef DML_HAVE_CUDA
	else if (gpu >= 0)
		train_gpu(ds, spec, res, gpu);
#endif
	else
		train_iterative(ds, spec, res);

	{
		DmlResult	r;
		DmlMetrics	met;

		final_result(ds, spec, &res->model, res, &r, &met);
		/*
		 * a resident job's next trial reads rows (Newton's jobs are not
		 * resident today, supervise.c's resident_ok: this keeps it so if
		 * they become so)
		 */
		if (spec->resident)
			dataset_unpanel(ds);
		/* the GPU loop left its rows on the device for these metrics */
		train_gpu_release();
		r.trial_in_job = trial;
		/* every data rank's peak resident set, measured by the kernel */
		res->peak_rss = calloc(worker_world, sizeof(double));
		if (res->peak_rss == NULL)
			worker_fail("out of memory");
		res->peak_rss[worker_rank] = stream_peak_rss();
		comm_allreduce_double(res->peak_rss, worker_world);
		if (worker_rank == 0)
			send_model(&r, res, &met, gpu >= 0, dml_clock_seconds() - t0);
		dml_metrics_free(&met);
		free(res->peak_rss);
		res->peak_rss = NULL;
		train_forget_evaluation(res);
	}
}

/*
 * A resident job's next trial (dml_tune): rank 0 waits for the
 * coordinator's next JOB and hands it on; every rank takes its settings
 * into spec, with the checkpoint to resume from that came with it.  The
 * ranks wait in a barrier that naps, not in a collective that spins.
 * False when the coordinator said that no trial follows: rank 0 hands on
 * an empty job.
 */
static bool
next_trial(WorkerSpec *spec)
{
	char	   *text = NULL;
	size_t		len = 0;
	unsigned char *attached = NULL;
	size_t		attached_len = 0;
	char		err[512];
	WorkerSpec	next;

	if (world_rank == 0 && !control_next_job(&text, &len, &attached, &attached_len))
	{
		text = strdup("");
		len = 0;
		if (text == NULL)
			worker_fail("out of memory");
	}
	comm_barrier();
	comm_share_job(&text, &len);
	if (len == 0)
	{
		free(text);
		return false;
	}
	if (spec_parse(&next, text, len, err, sizeof(err)) != 0)
		worker_fail("%s", err);
	if (next.world != world_size || next.servers != 0)
		worker_fail("a resident job's trial is for %d ranks and %d servers, the job has %d and none",
					next.world, next.servers, world_size);
	next.attached = attached;
	next.attached_len = attached_len;
	*spec = next;
	comm_job_bytes_reset();
	return true;
}

int
main(int argc, char **argv)
{
	WorkerSpec	spec;
	Dataset		ds;
	TrainResult res;
	DmlModel	first;
	char		err[512];
	int			gpu;
	double		t0 = dml_clock_seconds();
	char	   *text = NULL;
	size_t		text_len = 0;
	unsigned char *attached = NULL;
	size_t		attached_len = 0;

	/*
	 * OpenBLAS chose its kernels when it was loaded.  Where it fell back to
	 * its SSE3 ones on a CPU it does not know (dml_blas_core_override), run
	 * this program again with the core type named: once, since the variable
	 * is then set.  The same products, 4-5x faster; on failure, go on.
	 */
	if (getenv("OPENBLAS_CORETYPE") == NULL)
	{
		const char *core = dml_blas_core_override(openblas_get_corename());

		if (core != NULL && setenv("OPENBLAS_CORETYPE", core, 1) == 0)
			execv("/proc/self/exe", argv);
	}

	/* die with mpirun, whatever kills it */
	prctl(PR_SET_PDEATHSIG, SIGKILL);

	/*
	 * A write to a peer that died (its host's processes killed) is an
	 * error for Open MPI's TCP transport to handle, not a SIGPIPE that
	 * kills this rank at once: that death, on a healthy host, could reach
	 * mpirun before the lost host's daemon did, and the job's error then
	 * named the wrong host (t/multihost, under load).  The worker's own
	 * sockets write with MSG_NOSIGNAL (control.c) or through libpq, which
	 * never raises SIGPIPE.
	 */
	signal(SIGPIPE, SIG_IGN);
	comm_init(&argc, &argv);
	gethostname(worker_host, sizeof(worker_host) - 1);
	if (argc != 2)
		worker_fail("usage: dml-worker <control socket>");

	/* the job comes to rank 0 over the control socket, and from it to all */
	if (world_rank == 0)
	{
		control_connect(argv[1]);
		control_receive_job(&text, &text_len, &attached, &attached_len);
		control_start_watchdog();
	}
	comm_share_job(&text, &text_len);
	if (spec_parse(&spec, text, text_len, err, sizeof(err)) != 0)
		worker_fail("%s", err);
	spec.attached = attached;
	spec.attached_len = attached_len;
	if (spec.world != world_size)
		worker_fail("the job is for %d ranks but mpirun started %d", spec.world, world_size);
	comm_split_roles(spec.servers);
	worker_before_exit = sync_stop_servers;
	send_hello();
	if (spec.predict)
	{
		predict_run(&spec);
		comm_finalize();
		return 0;
	}

	/*
	 * Training's wider products on AMX's tiles where the CPU has them
	 * (kernels/gemm_amx.h), unless the job's options say "amx": false or
	 * DML_AMX=off is in the server's environment.  Not a predict job's: a
	 * batch there gives the backend's bits (gemm.h's kernel, README), which
	 * AMX's sums in another order would not.
	 */
	if (spec.amx && (getenv("DML_AMX") == NULL || strcmp(getenv("DML_AMX"), "off") != 0))
		dml_set_amx(true);

	gpu = trial_device(&spec);
	if (comm_is_server())
	{
		server_main(&spec);
		comm_finalize();
		return 0;
	}
	send_training_line(&spec, gpu);
#ifdef DML_HAVE_CUDA
	/* the device's context is made while the rows load (train_gpu joins) */
	if (gpu >= 0)
		dml_gpu_warm_start(gpu);
#endif
	load_slices(&ds, &spec, worker_rank);
	comm_barrier();				/* the first to finish sleeps, not spins */
	if (spec.attempt > 0)
	{
		/* a restart: what each rank found of its spill, in one log line */
		double	   *codes = calloc(worker_world, sizeof(double));
		char		line[1024];
		int			n = 0;

		if (codes == NULL)
			worker_fail("out of memory");
		codes[worker_rank] = ds.spill_restart;
		comm_allreduce_double(codes, worker_world);
		for (int r = 0; r < worker_world && n < (int) sizeof(line) - 1; r++)
			if (codes[r] != SPILL_NONE)
				n += snprintf(line + n, sizeof(line) - n, "%sworker %d %s", n ? "; " : "", r,
							  stream_restart_why((int) codes[r]));
		if (worker_rank == 0 && n > 0)
			control_send(DML_MSG_LOG, line, n < (int) sizeof(line) ? n : (int) sizeof(line) - 1, NULL, 0);
		free(codes);
	}

	memset(&res, 0, sizeof(res));
	ds.bytes_ok = gpu < 0;
	prepare_data(&ds, &spec, &res.model);
	penalty_from_rows(&spec, &ds);
	first = res.model;			/* its standardization, for a resident job's next trials */
	if (!spec.resident)
	{
		train_and_send(&ds, &spec, &res, gpu, t0, 0);
		comm_finalize();
		return 0;
	}

	/*
	 * dml_tune's resident job: trial after trial over the rows loaded and
	 * prepared once, each model sent as a job of its own sends it, until
	 * the coordinator says that none follows (END), or closes the socket
	 * (the watchdog ends the job).
	 */
	for (int trial = 1;; trial++)
	{
		train_and_send(&ds, &spec, &res, gpu, t0, trial);
		if (!next_trial(&spec))
			break;
		t0 = dml_clock_seconds();
		if (trial > 1)
			dml_model_free(&res.model);
		memset(&res, 0, sizeof(res));
		prepare_trial(&ds, &spec, &res.model, &first);
		penalty_from_rows(&spec, &ds);
		gpu = trial_device(&spec);
		send_training_line(&spec, gpu);
	}
	sync_release_kept();
	comm_finalize();
	return 0;
}
