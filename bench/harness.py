#!/usr/bin/python3
"""The benchmark harness behind bench/run.sh: runs every benchmark against the
private cluster run.sh started (PG* environment) and writes the report.

    /usr/bin/python3 bench/harness.py --mode quick|full --out FILE.md \
        --micro build/micro --workdir bench/out --setup-json bench/out/setup.json

Every figure in the report is a median over --reps runs (3 in full mode, 1 in
quick mode) and is printed next to the exact command or SQL that produced it.
Progress goes to stderr; raw results go to WORKDIR/raw-MODE.json.

With --baseline-worker PATH (bench/run.sh builds one from DML_BENCH_BASELINE=REV)
the MPI exact-solver runs alternate with runs of that dml-worker
(SET dml.worker_path), so the report shows the previous implementation side by
side, measured in the same minutes.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import psycopg2

import sync_bench

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"
FEATS = [f"c{i}" for i in range(1, 21)]
FEATS_SQL = "{" + ",".join(FEATS) + "}"
ARRAY_SQL = "ARRAY[" + ", ".join(FEATS) + "]"

MODES = {
    "quick": dict(reps=1, synth_rows=20000, fashion_limit=3000, sm_epochs=3, mlp_epochs=2,
                  logit_adam_epochs=2, mlp20_epochs=1, sk_logreg_iter=20,
                  sm_target=0.70, mlp_target=0.72, stream_n=1 << 22, stream_reps=3,
                  sgemm_s=0.1, ar_max="4M", copy_reps=1,
                  sync_epochs=2, sync_target=0.70, sync_delay_ms=2, sync_workers=(2,), goal_pairs=2),
    "full": dict(reps=3, synth_rows=1000000, fashion_limit=None, sm_epochs=10, mlp_epochs=5,
                 logit_adam_epochs=4, mlp20_epochs=1, sk_logreg_iter=100,
                 sm_target=0.84, mlp_target=0.87, stream_n=1 << 24, stream_reps=10,
                 sgemm_s=0.5, ar_max="64M", copy_reps=3,
                 sync_epochs=8, sync_target=0.83, sync_delay_ms=3, sync_workers=(2, 4), goal_pairs=6),
}
# goal_pairs is even: the paired figures that alternate which run goes first
# (the background job's, balance's) then have each order as often.  The run a
# pair starts with measured about 4% slower than the other (12 pairs of the
# job against dml_train: 0.92-0.99 where dml_train went first, 1.00-1.09
# where the job did), and with 5 pairs one order had three of them

RAW = {}


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def rng(xs):
    xs = [x for x in xs if x is not None]
    return (min(xs), max(xs)) if xs else (None, None)


def fmt(x, nd=3):
    if x is None:
        return "n/a"
    if isinstance(x, str):
        return x
    if isinstance(x, int):
        return f"{x:,}"
    ax = abs(x)
    if ax >= 1e3:
        return f"{x:,.0f}"
    if ax >= 100:
        return f"{x:,.1f}"
    if ax >= 1:
        return f"{x:.{nd}g}" if ax < 10 ** nd else f"{x:.0f}"
    return f"{x:.{nd}g}"


def fmt_med(xs, nd=3, unit=""):
    """median, with the range when there are several runs"""
    m = med(xs)
    if m is None:
        return "n/a"
    lo, hi = rng(xs)
    n = len([x for x in xs if x is not None])
    s = fmt(m, nd) + unit
    if n > 1:
        s += f" ({fmt(lo, nd)}–{fmt(hi, nd)})"
    return s


def ratio(a, b, nd=2):
    if a is None or b is None or b == 0:
        return "n/a"
    return f"{a / b:.{nd}f}x"


def table(headers, rows):
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def codeblock(lines):
    return "```\n" + "\n".join(lines) + "\n```"


# ---------------------------------------------------------------------------
# running things
# ---------------------------------------------------------------------------

def sh(cmd, env=None, check=True, timeout=900):
    """Run a shell command; return (stdout, seconds)."""
    e = dict(os.environ)
    if env:
        e.update(env)
    t0 = time.perf_counter()
    p = subprocess.run(["bash", "-c", cmd], cwd=ROOT, env=e, capture_output=True, text=True,
                       timeout=timeout)
    secs = time.perf_counter() - t0
    if check and p.returncode != 0:
        raise RuntimeError(f"command failed ({p.returncode}): {cmd}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p.stdout, secs


def jsonl(out):
    recs = []
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                recs.append(json.loads(line))
            except ValueError:
                pass
    return recs


def connect():
    c = psycopg2.connect("")
    c.autocommit = True
    with c.cursor() as cur:
        cur.execute("SET client_min_messages = warning")
    return c


def q(conn, sql, args=None):
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall() if cur.description else None


def timed(conn, sql):
    t0 = time.perf_counter()
    with conn.cursor() as cur:
        cur.execute(sql)
        if cur.description:
            cur.fetchall()
    return time.perf_counter() - t0


def lit(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, dict):
        return "'" + json.dumps(v).replace("'", "''") + "'"
    if isinstance(v, (list, tuple)):
        return "'{" + ",".join(str(x) for x in v) + "}'"
    return "'" + str(v).replace("'", "''") + "'"


def train_sql(name, relation, target, **kw):
    args = ", ".join(f"{k} => {lit(v)}" for k, v in kw.items())
    return f"SELECT * FROM dml_train({lit(name)}, {lit(relation)}, {lit(target)}, {args})"


CLUSTER_CPU = None  # --cluster-cpu: the cluster's cgroup file


def cluster_cpu_seconds():
    """CPU seconds the bench cluster's processes used so far (every backend, mpirun and
    the workers: run.sh put the postmaster in a cgroup of its own), or None."""
    if not CLUSTER_CPU:
        return None
    try:
        text = open(CLUSTER_CPU).read()
    except OSError:
        return None
    if CLUSTER_CPU.endswith("cpuacct.usage"):
        return int(text.split()[0]) / 1e9
    for line in text.splitlines():
        k, v = line.split()
        if k == "usage_usec":
            return int(v) / 1e6
    return None


# set in main: the best STREAM bandwidth (GB/s) of n threads, measured now
ADJACENT_STREAM = None


def dml_train(conn, name, relation, target, stream_threads=None, **kw):
    """One dml_train call: wall seconds, the cluster's CPU seconds (None where not
    measured), the result row, the model's metrics and epochs; with stream_threads,
    also the STREAM bandwidth of that many threads measured just before it."""
    bw = ADJACENT_STREAM(stream_threads) if stream_threads and ADJACENT_STREAM else None
    sql = train_sql(name, relation, target, **kw)
    c0 = cluster_cpu_seconds()
    t0 = time.perf_counter()
    with conn.cursor() as cur:
        cur.execute(sql)
        cols = [d.name for d in cur.description]
        row = dict(zip(cols, cur.fetchone()))
    wall = time.perf_counter() - t0
    c1 = cluster_cpu_seconds()
    cpu = c1 - c0 if c0 is not None and c1 is not None else None
    mid = row["model_id"]
    metrics = q(conn, "SELECT metrics FROM dml.models WHERE id = %s", (mid,))[0][0]
    metrics.pop("confusion", None)
    eps = q(conn, "SELECT epoch, loss, val_loss, val_metric, rows_per_second, seconds, bytes_sent "
                  "FROM dml.epochs WHERE model_id = %s AND restarts = 0 ORDER BY epoch", (mid,))
    epochs = [dict(epoch=e[0], loss=e[1], val_loss=e[2], val_metric=e[3], rows_per_second=e[4],
                   seconds=e[5], bytes_sent=e[6]) for e in eps]
    return dict(sql=sql, wall=wall, cpu=cpu, result=row, metrics=metrics, epochs=epochs,
                stream_gbs=bw)


def dml_job(conn, name, relation, target, **kw):
    """dml_train_async, then dml_wait: wall seconds from the submit to the job's end,
    the cluster's CPU seconds (None where not measured) and the model's metrics."""
    sql = train_sql(name, relation, target, **kw).replace("SELECT * FROM dml_train(",
                                                          "SELECT dml_train_async(", 1)
    c0 = cluster_cpu_seconds()
    t0 = time.perf_counter()
    job = q(conn, sql)[0][0]
    state, err, mid = q(conn, "SELECT state, error_message, model_id FROM dml_wait(%s)", (job,))[0]
    wall = time.perf_counter() - t0
    c1 = cluster_cpu_seconds()
    if state != "succeeded":
        raise RuntimeError(f"job {job} {state}: {err}")
    metrics = q(conn, "SELECT metrics FROM dml.models WHERE id = %s", (mid,))[0][0]
    metrics.pop("confusion", None)
    return dict(sql=sql, wall=wall, job=job, model_id=mid, metrics=metrics,
                cpu=c1 - c0 if c0 is not None and c1 is not None else None)


def job_pair(conn, sync_first, **kw):
    """The same training as dml_train ("bench_job_sync") and as a background job
    ("bench_job_async"), in the order sync_first says: (dml_train's run, the job's)."""
    def sync():
        return dml_train(conn, "bench_job_sync", "fashion_train", "label", **kw)

    def job():
        return dml_job(conn, "bench_job_async", "fashion_train", "label", **kw)
    if sync_first:
        d = sync()
        return d, job()
    j = job()
    return sync(), j


def dml_runs_paired(conn, reps, key, name, relation, target, baseline, **kw):
    """dml_runs, each run followed by one with the baseline worker (when there is one)."""
    runs, base = [], []
    for r in range(reps):
        log(f"dml {key} run {r + 1}/{reps}")
        runs.append(dml_train(conn, name, relation, target, **kw))
        if baseline:
            log(f"dml {key} baseline run {r + 1}/{reps}")
            q(conn, "SET dml.worker_path = %s", (baseline,))
            try:
                base.append(dml_train(conn, name + "_base", relation, target, **kw))
            finally:
                q(conn, "RESET dml.worker_path")
    RAW.setdefault("dml", {})[key] = runs
    if baseline:
        RAW["dml"][key + "-baseline"] = base
    return runs, base


def torch_run(cmd):
    """One run of the PyTorch peer: wall seconds and its JSON records."""
    out, wall = sh(cmd)
    recs = jsonl(out)
    return dict(wall=wall, epochs=[x for x in recs if x.get("event") == "epoch"],
                done=next(x for x in recs if x.get("event") == "done"),
                config=next(x for x in recs if x.get("event") == "config"))


def dml_runs(conn, reps, key, name, relation, target, **kw):
    runs = []
    for r in range(reps):
        log(f"dml {key} run {r + 1}/{reps}")
        runs.append(dml_train(conn, name, relation, target, **kw))
    RAW.setdefault("dml", {})[key] = runs
    return runs


def mlp_shapes(B):
    """one MLP 784-256-128-10 step's sgemm shapes (m, n, k) at B rows a worker: the
    forward products, the weight gradients and the input gradient of layer 2"""
    return [(B, 256, 784), (256, 784, B), (B, 128, 256), (128, 256, B), (B, 256, 128),
            (B, 10, 128)]



def stream_best(rec):
    """a STREAM record's best bandwidth (GB/s) over its four kernels"""
    return max(rec[k] for k in ("copy_gbs", "scale_gbs", "add_gbs", "triad_gbs"))


def mlp_gemm_rate(records, B=256):
    """The single-core rate (GFLOP/s) of one MLP step's shapes at B rows, weighted by
    their FLOPs, from sgemm records (m, n, k, median_gflops); None without any."""
    rate_at = {(x["m"], x["n"], x["k"]): x["median_gflops"] for x in records if "m" in x}
    shapes = [sh_ for sh_ in mlp_shapes(B) if sh_ in rate_at]
    tot_f = sum(2 * m * n * k for m, n, k in shapes)
    tot_t = sum(2 * m * n * k / (rate_at[(m, n, k)] * 1e9) for m, n, k in shapes)
    return tot_f / tot_t / 1e9 if tot_t else None


def mval(runs, k):
    return [r["metrics"].get(k) for r in runs]


def epoch_median(run, k):
    return med([e[k] for e in run["epochs"]])


def time_to_target(epochs, acc_key, sec_key, target):
    """(epoch, cumulative seconds) at which acc_key first reaches target, else (None, None)."""
    t = 0.0
    for e in epochs:
        t += e[sec_key]
        a = e.get(acc_key)
        if a is not None and a >= target:
            return e["epoch"], t
    return None, None


# ---------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------

class Report:
    def __init__(self):
        self.parts = []
        self.headlines = []

    def h(self, text):
        self.parts.append(text)

    def head(self, text):
        self.headlines.append(text)


def travel_bench(conn, model, reps):
    """dml_export and dml_import of model (ONNX and dml's package), and
    inference with the ONNX import against the model itself, paired."""
    m = lit(model)
    q(conn, "DROP TABLE IF EXISTS bench_travel_bytes")
    q(conn, f"CREATE TABLE bench_travel_bytes AS SELECT dml_export({m}) AS onnx, "
            f"dml_export({m}, 'dml') AS pkg")
    onnx_bytes, pkg_bytes = q(conn, "SELECT length(onnx), length(pkg) FROM bench_travel_bytes")[0]
    n = max(5, reps * 3)
    sqls = {
        "dml_export(model) ONNX": f"SELECT length(dml_export({m}))",
        "dml_export(model, 'dml')": f"SELECT length(dml_export({m}, 'dml'))",
        "dml_import(name, onnx)": "SELECT dml_import('bench_travel_onnx', onnx) FROM bench_travel_bytes",
        "dml_import(name, package, 'dml')":
            "SELECT dml_import('bench_travel_pkg', pkg, 'dml') FROM bench_travel_bytes",
    }
    times = {k: [timed(conn, v) for _ in range(n)] for k, v in sqls.items()}
    infer = "SELECT count(dml_predict_class({}, pixels)) FROM fashion_test"
    timed(conn, infer.format(m))
    timed(conn, infer.format("'bench_travel_onnx'"))
    pairs = []
    for _ in range(n):
        tn = timed(conn, infer.format(m))
        ti = timed(conn, infer.format("'bench_travel_onnx'"))
        pairs.append(dict(native=tn, imported=ti, ratio=ti / tn))
    agree = q(conn, f"SELECT avg((dml_predict_class({m}, pixels) = "
                    f"dml_predict_class('bench_travel_onnx', pixels))::int) FROM fashion_test")[0][0]
    rows = q(conn, "SELECT count(*) FROM fashion_test")[0][0]
    q(conn, "SELECT dml_drop_model('bench_travel_onnx'), dml_drop_model('bench_travel_pkg')")
    q(conn, "DROP TABLE bench_travel_bytes")
    raw = dict(onnx_bytes=onnx_bytes, pkg_bytes=pkg_bytes, times=times, pairs=pairs,
               agreement=float(agree))
    ratio = med([p["ratio"] for p in pairs])
    md = ["## Export and import", "",
          f"The Fashion-MNIST MLP (`{model}`, 784-256-128-10): ONNX {onnx_bytes:,} bytes, "
          f"dml package {pkg_bytes:,} bytes; the goal is under 50 ms each way. Each figure is "
          f"the median of {n} calls (SQL round trip included; the bytes stay in the server).", "",
          table(["call", "ms"], [[k, fmt_med([t * 1000 for t in v], 3)] for k, v in times.items()]),
          "",
          f"Inference after an ONNX import: `dml_predict_class` over `fashion_test` ({rows:,} rows), "
          f"the imported model against the native one in pairs: imported / native "
          f"**{ratio:.3f}** (median of {n} pairs; range {fmt_med([p['ratio'] for p in pairs]).split(' ', 1)[-1]}); the "
          f"two agree on {float(agree) * 100:.2f}% of the rows.", "",
          codeblock(list(sqls.values()) + [infer.format(m)]), ""]
    return "\n".join(md), raw, ratio, times


def machine_info():
    info = {}
    info["cores"] = os.cpu_count()
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info["cpu"] = model
    flags = []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    have = set(line.split(":", 1)[1].split())
                    flags = [x for x in ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw",
                                         "avx512vl", "avx512_vnni", "avx512_bf16", "amx_tile")
                             if x in have]
                    break
    except OSError:
        pass
    info["vector"] = " ".join(flags) or "unknown"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    info["mem_gib"] = int(line.split()[1]) / 1048576
    except OSError:
        info["mem_gib"] = None
    gpu = "none"
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
        if out.returncode == 0 and out.stdout.strip():
            gpu = out.stdout.strip().replace("\n", "; ")
    except (OSError, subprocess.SubprocessError):
        pass
    info["gpu"] = gpu
    info["date"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        info["commit"] = commit + (" (working tree has uncommitted changes)" if dirty else "")
    except OSError:
        info["commit"] = "unknown"
    info["kernel"] = platform.release()
    info["loadavg"] = open("/proc/loadavg").read().split()[:3]
    return info


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=sorted(MODES), required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--micro", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--setup-json", default=None)
    ap.add_argument("--baseline-worker", default=None,
                    help="a previous build's dml-worker, run side by side with the exact solvers")
    ap.add_argument("--baseline-label", default="previous build")
    ap.add_argument("--cluster-cpu", default=None,
                    help="the cgroup file (cpu.stat or cpuacct.usage) with the cluster's CPU time")
    ap.add_argument("--torch-py", default=None,
                    help="an interpreter with a newer PyTorch (PyPI), run beside Debian's")
    a = ap.parse_args()
    global CLUSTER_CPU
    CLUSTER_CPU = a.cluster_cpu
    M = MODES[a.mode]
    R = M["reps"]
    micro = a.micro
    npy = os.path.join(a.workdir, "npy")
    t_start = time.perf_counter()
    info = machine_info()
    setup = json.load(open(a.setup_json)) if a.setup_json else {}
    rep = Report()
    conn = connect()
    pg_version = q(conn, "SHOW server_version")[0][0]
    n_synth = q(conn, "SELECT count(*) FROM synth_1m")[0][0]
    n_ftrain = q(conn, "SELECT count(*) FROM fashion_train")[0][0]
    n_ftest = q(conn, "SELECT count(*) FROM fashion_test")[0][0]
    limit_arg = f" --limit {M['fashion_limit']}" if M["fashion_limit"] else ""
    mpirun = "mpirun --allow-run-as-root --oversubscribe --bind-to none"

    # ------------------------------------------------------------------
    # micro benchmarks first: the floors every later section compares with
    # ------------------------------------------------------------------
    log("stream")
    stream_cmd = f"{micro}/stream -n {M['stream_n']} -r {M['stream_reps']} 1 2"
    out, _ = sh(stream_cmd)
    stream = {r["threads"]: r for r in jsonl(out) if r.get("bench") == "stream"}
    RAW["stream"] = stream
    # the small models' floors: STREAM again just before each of their runs,
    # with as many threads as the run has workers (the run-start figure can be
    # minutes and a third of the bandwidth away from a run on this host)
    adj_stream_cmd = f"{micro}/stream -n {M['stream_n']} -r 3"

    def adjacent_stream(threads):
        out_, _ = sh(f"{adj_stream_cmd} {threads}")
        recs = [r for r in jsonl(out_) if r.get("bench") == "stream"]
        return stream_best(recs[0]) if recs else None
    global ADJACENT_STREAM
    ADJACENT_STREAM = adjacent_stream
    log("sgemm")
    sgemm_cmd = f"{micro}/sgemm -t 1 -s {M['sgemm_s']}"
    # the kernels dml-worker runs: where OpenBLAS falls back to SSE3 ones on a
    # CPU it does not know, the worker forces a core type
    # (dml_blas_core_override), and the floor is taken with the same
    cfg_out, _ = sh(f"{micro}/sgemm -t 1 -s 0.01 2048x2048x2048")
    own_core = next((l for l in cfg_out.splitlines() if l.startswith("sgemm:")), "").split()
    own_core = next((w for w in own_core if w.startswith("MAX_THREADS")), None) and \
        own_core[[w.startswith("MAX_THREADS") for w in own_core].index(True) - 1]
    cpu_flags = set(next((l for l in open("/proc/cpuinfo") if l.startswith("flags")), "").split())
    if own_core and own_core.lower() not in ("haswell", "zen", "skylakex", "cooperlake",
                                             "sapphirerapids") and {"avx2", "fma"} <= cpu_flags:
        forced = "SkylakeX" if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= cpu_flags else "Haswell"
        sgemm_cmd = f"OPENBLAS_CORETYPE={forced} {sgemm_cmd}"
    # the MLP's batch-256 shapes, measured again right before each MLP run:
    # the floor of a run is the sgemm rate of its own minutes (on a shared
    # host the rate moved 74-149 GFLOP/s within an hour)
    def adj_sgemm_cmd(B=256, own=False):
        """the MLP's shapes at B rows a worker (the run's own batch); own: on dml's
        own product as the worker's training runs it (kernels/gemm.h, on AMX's tiles
        where the CPU has them: kernels/gemm_amx.h; sgemm_dml -k amx) instead of OpenBLAS;
        own "dml": kernels/gemm.h's alone, as options "amx" false runs it"""
        cmd = sgemm_cmd.replace(f"-s {M['sgemm_s']}", "-s 0.1")
        if own:
            cmd = f"{micro}/sgemm_dml -k {'dml' if own == 'dml' else 'amx'} -s 0.1"
        return cmd + " " + " ".join(f"{m}x{n}x{k}" for m, n, k in mlp_shapes(B))

    # w workers' floor: w single-thread sgemm processes at once, one pinned to
    # each core, their rates added (as STREAM's 2 threads): on a shared host
    # the cores need not be equally fast, nor one core alone as fast as two at once.
    # The cores are the ones this process may run on (a container's cpuset need
    # not hold CPUs 0 and 1; taskset to a CPU outside it fails)
    cpus = sorted(os.sched_getaffinity(0))

    def pinned_gemm_cmd(w, B, own=False):
        one = adj_sgemm_cmd(B, own).replace(f"{micro}/sgemm", f"taskset -c $c {micro}/sgemm")
        return ("for c in " + " ".join(str(c) for c in cpus[:w]) + "; do ( " + one +
                " | sed 's/^{/{\"core\": '$c', /' ) & done; wait")

    def adjacent_gemm_rate(w, B, own=False):
        """the MLP shapes' rate at B rows of w cores together (GFLOP/s), and each core's"""
        if w > 1 and len(cpus) >= w:
            out_, _ = sh(pinned_gemm_cmd(w, B, own), check=not own)
            recs = [r for r in jsonl(out_) if r.get("bench") == "sgemm"]
            per = [mlp_gemm_rate([r for r in recs if r.get("core") == c], B) for c in cpus[:w]]
            if None not in per:
                return sum(per), per
            log(f"sgemm pinned to CPUs {cpus[:w]} gave no rate for some of them: "
                f"one process's rate times {w} instead")
        # one core, or fewer CPUs than workers (the workers share them: at most
        # as many cores' rate as there are CPUs)
        one = mlp_gemm_rate([r for r in jsonl(sh(adj_sgemm_cmd(B, own), check=not own)[0])
                             if r.get("bench") == "sgemm"], B)
        if one is None:
            return None, []
        return one * min(w, len(cpus)), [one] * min(w, len(cpus))

    def mlp_run(w, b, r, kw, note="", amx=True):
        """one MLP dml_train run, with the sgemm rate of its cores measured just before it;
        amx False: with options "amx" false (the AVX-512 product, as on a CPU without AMX)"""
        rate, per = adjacent_gemm_rate(w, b)
        # and dml's own product at the same shapes (kernels/gemm.h, on AMX where the
        # CPU has it; None without AVX-512)
        own, _ = adjacent_gemm_rate(w, b, own=True if amx else "dml")
        log(f"dml mlp-adam-w{w}-b{b} run {r + 1}/{R} ({note}sgemm just before: "
            f"{fmt(rate)} GFLOP/s on {len(per) or w} core(s): {', '.join(fmt(x) for x in per)}; "
            f"dml's own product {fmt(own)})")
        if not amx:
            kw = dict(kw, options=dict(kw.get("options") or {}, amx=False))
        return dict(dml_train(conn, f"bench_mlp_w{w}_b{b}" + ("" if amx else "_noamx"),
                              "fashion_train", "label", **kw),
                    sgemm_rate=rate, sgemm_cores=per, own_rate=own)

    def amx_ran(run):
        return bool(run["metrics"].get("amx"))
    out, _ = sh(sgemm_cmd)
    sgemm = [r for r in jsonl(out) if r.get("bench") == "sgemm"]
    RAW["sgemm"] = sgemm
    blas_cfg = next((l for l in out.splitlines() if l.startswith("sgemm:")), "")

    # ------------------------------------------------------------------
    # 1. data path
    # ------------------------------------------------------------------
    synth_cols = "y," + ",".join(FEATS)
    copy_runs = {}
    for tbl, cols in (("synth_1m", synth_cols), ("fashion_train", "label,pixels")):
        for j in (1, 2):
            cmd = f"{micro}/copy_reader -t {tbl} -C '{cols}' -r {M['copy_reps']} -j {j}"
            log(f"copy_reader {tbl} -j {j}")
            out, _ = sh(cmd)
            passes = []
            for line in out.splitlines():
                f = line.split()
                if len(f) == 6 and f[0].isdigit():
                    passes.append(dict(rows=int(f[1]), mb=float(f[2]), seconds=float(f[3])))
            copy_runs[(tbl, j)] = dict(cmd=cmd, passes=passes)
    RAW["copy_reader"] = {f"{k[0]}-j{k[1]}": v for k, v in copy_runs.items()}

    # linear exact: by default dml solves it inside the server (one aggregate pass, PostgreSQL
    # parallel query, no MPI job); options => {"in_server": false} forces the worker job, which
    # is what the data-path and scaling comparisons need
    lin = {}
    baseline_runs = {}
    for w in (1, 2):
        lin[w], baseline_runs[("lin", w)] = dml_runs_paired(
            conn, R, f"linear-exact-w{w}", f"bench_lin_w{w}", "synth_1m", "y",
            a.baseline_worker if w == 2 else None,
            features=FEATS, model="linear", optimizer="exact", workers=w,
            options={"in_server": False})
    lin_srv = dml_runs(conn, R, "linear-exact-in-server", "bench_lin_srv", "synth_1m", "y",
                       features=FEATS, model="linear", optimizer="exact")

    # A/B in one run: the in-server pass by TSQR (dml.qr_cols, the exact solver's now) against
    # the normal equations' pass it replaced (dml.xtx_cols), alternating, same columns and
    # table; the solves after either pass take microseconds at 22 x 22
    qr_cols = "y, " + ", ".join(FEATS)
    ab_sql = {"ne": f"SELECT dml.xtx_cols({qr_cols}) FROM synth_1m",
              "qr": f"SELECT dml.qr_cols({qr_cols}) FROM synth_1m"}
    ab = {"ne": [], "qr": []}
    for r in range(R):
        for key in ("ne", "qr"):
            log(f"in-server pass {key} run {r + 1}/{R}")
            ab[key].append(timed(conn, ab_sql[key]))
    RAW["exact_qr_vs_normal_equations"] = dict(sql=ab_sql, seconds=ab)

    logit = {}
    for w in (1, 2):
        logit[w], baseline_runs[("logit", w)] = dml_runs_paired(
            conn, R, f"logistic-newton-w{w}", f"bench_logit_w{w}", "synth_1m", "label",
            a.baseline_worker if w == 2 else None, features=FEATS, model="logistic", optimizer="newton", workers=w,
            stream_threads=w)

    # L-BFGS on the same table (section 4: one iteration against the memory floor)
    logit_lbfgs = {}
    for w in (1, 2):
        logit_lbfgs[w] = dml_runs(conn, R, f"logistic-lbfgs-w{w}", f"bench_logit_lbfgs_w{w}",
                                  "synth_1m", "label", features=FEATS, model="logistic",
                                  optimizer="lbfgs", workers=w, stream_threads=w)

    # Fashion-MNIST runs (used by sections 1, 2, 3, 4, 6)
    fash = {}
    mlp_noamx = {}
    for kind, model, hidden, epochs in (("softmax", "softmax", None, M["sm_epochs"]),
                                        ("mlp", "mlp", [256, 128], M["mlp_epochs"])):
        for w, b in ((1, 256), (2, 128), (2, 256)):
            kw = dict(features=["pixels"], model=model)
            if hidden:
                kw["hidden"] = hidden
            kw.update(optimizer="adam", learning_rate=0.001, batch_size=b, epochs=epochs,
                      validation=0.1, workers=w)
            if kind == "mlp" and (w, b) != (2, 128):
                # where the training ran on AMX, each run alternates with one on
                # the AVX-512 product (options "amx" false): a CPU without AMX's figure
                fash[(kind, w, b)] = []
                for r in range(R):
                    fash[(kind, w, b)].append(mlp_run(w, b, r, kw))
                    if amx_ran(fash[(kind, w, b)][-1]):
                        mlp_noamx.setdefault((w, b), []).append(
                            mlp_run(w, b, r, kw, "amx false; ", amx=False))
                RAW.setdefault("dml", {})[f"{kind}-adam-w{w}-b{b}"] = fash[(kind, w, b)]
                continue
            if (kind, w, b) != ("mlp", 2, 128):
                fash[(kind, w, b)] = dml_runs(conn, R, f"{kind}-adam-w{w}-b{b}",
                                              f"bench_{kind}_w{w}_b{b}", "fashion_train",
                                              "label", stream_threads=w, **kw)
                continue
            # the goal's configuration, alternating with the same job whose
            # all-reduce goes through MPI instead of shared memory
            fash[(kind, w, b)], mlp_mpi = [], []
            for r in range(R):
                fash[(kind, w, b)].append(mlp_run(w, b, r, kw, "and with MPI all-reduce; "))
                mlp_mpi.append(dml_train(conn, f"bench_{kind}_w{w}_b{b}_mpi", "fashion_train",
                                         "label", options={"shared_memory": False}, **kw))
                if amx_ran(fash[(kind, w, b)][-1]):
                    mlp_noamx.setdefault((w, b), []).append(
                        mlp_run(w, b, r, kw, "amx false; ", amx=False))
            RAW.setdefault("dml", {})[f"{kind}-adam-w{w}-b{b}"] = fash[(kind, w, b)]
            RAW["dml"][f"{kind}-adam-w{w}-b{b}-mpi"] = mlp_mpi
    for (w, b), runs in mlp_noamx.items():
        RAW["dml"][f"mlp-adam-w{w}-b{b}-noamx"] = runs
    # test accuracy of the last run of each (the model the name resolves to)
    test_acc = {}
    for (kind, w, b) in fash:
        sql = f"SELECT dml_evaluate('bench_{kind}_w{w}_b{b}', 'fashion_test') ->> 'accuracy'"
        test_acc[(kind, w, b)] = (float(q(conn, sql)[0][0]), sql)

    # the small models' epochs: options "shuffle" at its default (auto: blocks
    # over 16 MB of narrow rows and three or more epochs) and with the row
    # shuffle, alternating; and linear regression's
    logit_adam, logit_adam_rows, lin_adam = {}, {}, {}
    for w in (1, 2):
        logit_adam[w], logit_adam_rows[w] = [], []
        for r in range(R):
            log(f"dml logistic-adam-w{w} run {r + 1}/{R} (and with shuffle rows)")
            logit_adam[w].append(dml_train(conn, f"bench_logit_adam_w{w}", "synth_1m", "label",
                                           features=FEATS, model="logistic", optimizer="adam",
                                           batch_size=256, epochs=M["logit_adam_epochs"], workers=w,
                                           stream_threads=w))
            logit_adam_rows[w].append(dml_train(conn, f"bench_logit_adam_rows_w{w}", "synth_1m",
                                                "label", features=FEATS, model="logistic",
                                                optimizer="adam", batch_size=256,
                                                epochs=M["logit_adam_epochs"], workers=w,
                                                options={"shuffle": "rows"}, stream_threads=w))
        RAW.setdefault("dml", {})[f"logistic-adam-w{w}"] = logit_adam[w]
        RAW["dml"][f"logistic-adam-rows-w{w}"] = logit_adam_rows[w]
        lin_adam[w] = dml_runs(conn, R, f"linear-adam-w{w}", f"bench_lin_adam_w{w}",
                               "synth_1m", "y", features=FEATS, model="linear",
                               optimizer="adam", batch_size=256,
                               epochs=M["logit_adam_epochs"], workers=w, stream_threads=w)

    # ---- section 1 text
    s = ["## 1. Data path: dml's loader vs COPY to /dev/null",
         "",
         "dml's workers read their slice with `COPY (SELECT target, features FROM t WHERE ctid "
         "range) TO STDOUT (FORMAT binary)` and decode it into a float32 matrix. The floor is "
         "`bench/micro/copy_reader`, which runs the same COPY over the same columns and block "
         "ranges and throws the bytes away. dml's figure is `load_seconds` from "
         "`dml.models.metrics` (slowest rank, connect + snapshot import + COPY + decode).",
         ""]
    rows = []
    cmds = []
    for tbl, runs_by_w, what in (("synth_1m", lin, "linear exact"),
                                 ("fashion_train", {1: fash[("softmax", 1, 256)],
                                                    2: fash[("softmax", 2, 128)]},
                                  "softmax adam")):
        nrows = n_synth if tbl == "synth_1m" else n_ftrain
        base1 = None
        dml1 = None
        for w in (1, 2):
            cr = copy_runs[(tbl, w)]
            cs = [p["seconds"] for p in cr["passes"]]
            ls = mval(runs_by_w[w], "load_seconds")
            mb = med([p["mb"] for p in cr["passes"]])
            if w == 1:
                base1, dml1 = med(cs), med(ls)
            rows.append([f"`{tbl}` ({nrows:,} rows, {fmt(mb)} MB binary)", w,
                         fmt_med(cs) + " s", fmt(nrows / med(cs)) + " rows/s",
                         fmt_med(ls) + " s", fmt(nrows / med(ls)) + " rows/s",
                         ratio(med(ls), med(cs)),
                         "—" if w == 1 else ratio(base1, med(cs)),
                         "—" if w == 1 else ratio(dml1, med(ls))])
            cmds.append(f"copy_reader {tbl} x{w}: {cr['cmd']}")
            cmds.append(f"dml {what} workers={w}: {runs_by_w[w][0]['sql']}")
    s.append(table(["table", "slices / workers", "COPY → /dev/null", "COPY rate",
                    "dml load_seconds", "dml load rate", "dml / COPY time",
                    "COPY speedup 2 vs 1", "dml speedup 2 vs 1"], rows))
    s += ["", "Commands (dml runs are the training runs of sections 2 and 3; dml reads "
          "`target, features` — the same columns copy_reader is given):", "", codeblock(cmds), ""]
    rep.h("\n".join(s))
    sy = copy_runs[("synth_1m", 1)]
    rep.head(f"Data path: dml load of synth_1m takes "
             f"{ratio(med(mval(lin[1], 'load_seconds')), med([p['seconds'] for p in sy['passes']]))}"
             f" the time of a bare binary COPY of the same columns (1 worker); "
             f"2 workers load {ratio(med(mval(lin[1], 'load_seconds')), med(mval(lin[2], 'load_seconds')))} "
             f"faster than 1.")

    # ------------------------------------------------------------------
    # 2. training: peers
    # ------------------------------------------------------------------
    # Debian's PyTorch (torch_runs) and, with --torch-py, PyPI's newest
    # (torch_new), each pinned to the cores it is given (torch_mlp.py)
    torch_runs = {}
    torch_new = {}
    for interp, dest in ((PY, torch_runs), (a.torch_py, torch_new)):
        if not interp:
            continue
        for kind, epochs in (("softmax", M["sm_epochs"]), ("mlp", M["mlp_epochs"])):
            for th in (1, 2):
                model_arg = "--model logistic" if kind == "softmax" else "--model mlp --hidden 256,128"
                cmd = (f"{interp} bench/peers/torch_mlp.py {model_arg} --optimizer adam --lr 0.001 "
                       f"--batch-size 256 --epochs {epochs} --threads {th} --standardize "
                       f"--holdout 0.1 --npy {npy}{limit_arg}")
                runs = []
                for r in range(R):
                    log(f"torch ({interp}) {kind} threads={th} run {r + 1}/{R}")
                    try:
                        runs.append(torch_run(cmd))
                    except (RuntimeError, StopIteration) as e:
                        log(f"torch run failed: {e}")
                if runs:
                    dest[(kind, th)] = dict(cmd=cmd, runs=runs)
    RAW["torch"] = {f"{k[0]}-t{k[1]}": v for k, v in torch_runs.items()}
    RAW["torch_pypi"] = {f"{k[0]}-t{k[1]}": v for k, v in torch_new.items()}

    def torch_sps(runs):
        return med([med([e["samples_per_s"] for e in r["epochs"]]) for r in runs["runs"]])

    # PyTorch's best setting for the MLP within 2 cores: version and threads
    best_torch = max(((src, th) for src, d in (("debian", torch_runs), ("pypi", torch_new))
                      for th in (1, 2) if ("mlp", th) in d),
                     key=lambda k: torch_sps((torch_runs if k[0] == "debian" else torch_new)[("mlp", k[1])]))
    best_torch_cmd = (torch_runs if best_torch[0] == "debian" else torch_new)[("mlp", best_torch[1])]["cmd"]

    # The MLP goal, paired: dml w2 b128 and PyTorch 1 thread in turn, the
    # ratio taken pair by pair, so a stretch of a slower machine (it is
    # shared) falls on both sides of a ratio instead of on one table row.
    goal_pairs = []
    goal_kw = dict(features=["pixels"], model="mlp", hidden=[256, 128], optimizer="adam",
                   learning_rate=0.001, batch_size=128, epochs=M["mlp_epochs"], validation=0.1,
                   workers=2)
    for r in range(M["goal_pairs"]):
        log(f"MLP goal pair {r + 1}/{M['goal_pairs']}: dml w2 b128, then PyTorch's best setting")
        d = dml_train(conn, "bench_mlp_goal", "fashion_train", "label", **goal_kw)
        t = torch_run(best_torch_cmd)
        goal_pairs.append(dict(dml=epoch_median(d, "rows_per_second"),
                               torch=med([e["samples_per_s"] for e in t["epochs"]]),
                               dml_sql=d["sql"]))
    RAW["mlp_goal_pairs"] = goal_pairs

    # A background job's overhead, paired: the same training by dml_train and
    # by dml_train_async + dml_wait (queueing, the worker's start, commits,
    # progress, checkpoints at the default interval), in turn, which goes
    # first alternating; with each run's workers' training seconds, to tell
    # the job's own time from the training's, which moves more than the
    # goal between runs on a shared machine
    job_pairs = []
    for r in range(M["goal_pairs"]):
        first = "dml_train" if r % 2 == 0 else "dml_train_async"
        log(f"job overhead pair {r + 1}/{M['goal_pairs']}: {first} first")
        d, j = job_pair(conn, r % 2 == 0, **goal_kw)
        job_pairs.append(dict(sync=d["wall"], job=j["wall"], first=first,
                              sync_train=d["metrics"].get("train_seconds"),
                              job_train=j["metrics"].get("train_seconds"),
                              sync_cpu=d["cpu"], job_cpu=j["cpu"],
                              sync_sql=d["sql"], job_sql=j["sql"]))
    RAW["job_overhead_pairs"] = job_pairs

    # options "balance": the goal's training with the ranks sharing each
    # step's rows by their measured speed and with each computing its own
    # rows (the default), in turn (which goes first alternates): with nothing
    # else running, beside a CPU-bound process pinned to one of the cores the
    # workers run on (as another query on the server would be), and with
    # rank 1 delayed 1 ms every step (the straggler hook: a rank slower every
    # step)
    bal_pairs = {"quiet": [], "busy": [], "straggler": []}
    for cond in bal_pairs:
        hog = None
        if cond == "busy":
            hog = subprocess.Popen(["taskset", "-c", str(cpus[-1]), "sh", "-c",
                                    "while :; do :; done"])
        if cond == "straggler":
            q(conn, "SET dml.test_hooks = on")
        try:
            for r in range(M["goal_pairs"]):
                order = ("on", "off") if r % 2 == 0 else ("off", "on")
                log(f"balance pair {r + 1}/{M['goal_pairs']} ({cond}): {order[0]} first")
                p = {"first": order[0]}
                for which in order:
                    opts = {"balance": True} if which == "on" else {}
                    if cond == "straggler":
                        opts["straggler"] = "1:1"
                    d = dml_train(conn, f"bench_balance_{which}", "fashion_train", "label",
                                  options=opts, **goal_kw)
                    p[which] = epoch_median(d, "rows_per_second")
                    p[which + "_sql"] = d["sql"]
                    p[which + "_moved"] = (d["metrics"].get("balance") or {}).get("rows_moved")
                    p[which + "_rows"] = d["metrics"].get("train_rows")
                    p[which + "_epochs"] = len(d["epochs"])
                bal_pairs[cond].append(p)
        finally:
            if hog is not None:
                hog.kill()
                hog.wait()
            if cond == "straggler":
                q(conn, "RESET dml.test_hooks")
    RAW["balance_pairs"] = bal_pairs

    sk_runs = {}
    for th in (1, 2):
        cmd = (f"{PY} bench/peers/sklearn_peers.py --models sgd,logreg,mlp --epochs {M['mlp_epochs']} "
               f"--max-iter {M['sk_logreg_iter']} --hidden 256,128 --optimizer adam --lr 0.001 "
               f"--batch-size 256 --threads {th} --standardize --npy {npy}{limit_arg}")
        if th == 2:
            # SGDClassifier is single-threaded and lbfgs gains nothing from a second
            # thread here: only the MLP is run again with 2 threads
            cmd = cmd.replace("--models sgd,logreg,mlp", "--models mlp")
        runs = []
        for r in range(R):
            log(f"sklearn threads={th} run {r + 1}/{R}")
            out, _ = sh(cmd)
            runs.append({x["peer"]: x for x in jsonl(out)})
        sk_runs[th] = dict(cmd=cmd, runs=runs)
    RAW["sklearn"] = sk_runs

    # end to end: export path
    e2e = {}
    for method in ("fetch", "copy"):
        cmd = (f"{PY} bench/peers/export_path.py --table fashion_train --test-table fashion_test "
               f"--features pixels --label label --model mlp --hidden 256,128 --optimizer adam "
               f"--lr 0.001 --batch-size 256 --epochs {M['mlp_epochs']} --threads 1 --standardize "
               f"--method {method}")
        runs = []
        for r in range(R):
            log(f"export_path {method} run {r + 1}/{R}")
            out, wall = sh(cmd)
            recs = jsonl(out)
            tot = next(x for x in recs if x.get("event") == "total")
            tot["wall"] = wall
            runs.append(tot)
        e2e[method] = dict(cmd=cmd, runs=runs)
    RAW["export_path"] = e2e

    # ---- section 2 text
    s = ["## 2. Training", "",
         f"Fashion-MNIST: {n_ftrain:,} training rows (`fashion_train`, `pixels real[784]`, "
         f"`label int`), {n_ftest:,} test rows. Every trainer uses Adam, lr 0.001, standardized "
         "features (training mean/std per pixel), and holds out 10% of the training rows for a "
         "per-epoch validation accuracy: dml with `validation => 0.1` (rows chosen by a hash), "
         "the PyTorch peer with `--holdout 0.1` (a seeded random 10%). So both train on ~90% of "
         "the rows and time to target is measured on comparable hold-outs; test accuracy "
         "(10,000 official test images) is reported at the end.",
         "",
         "**Batch semantics.** dml's `batch_size` is *per worker*: each step every worker "
         "computes the gradient of its own `batch_size` rows, the gradients are summed by "
         "all-reduce and divided by the total row count, so one step is one update with a "
         "global batch of `workers x batch_size` rows. `w2 b128` therefore has the same global "
         "batch (256) and the same number of updates per epoch as PyTorch and scikit-learn at "
         "batch 256 and dml `w1 b256`; `w2 b256` is a global batch of 512 (half the updates).",
         "",
         "samples/s is per epoch (median over epochs, then over runs): dml's `dml.epochs."
         "rows_per_second` (training rows / the epoch's training time, the validation pass "
         "excluded), PyTorch's training-loop time (evaluation excluded). Time to target is the sum of epoch times up to the first epoch "
         "whose validation accuracy reaches the target (not counting the load for dml nor data "
         "preparation for PyTorch). PyTorch with 2 threads competes with everything else on the "
         "2 cores (its intra-op threads spin and wait on each other), which is why it is slower "
         "than 1 thread here; compare dml 2 workers with the better of the two.", ""]
    for kind, tgt, title in (("softmax", M["sm_target"], "Softmax regression 784-10"),
                             ("mlp", M["mlp_target"], "MLP 784-256-128-10 (ReLU)")):
        rows = []
        cmds = []
        base = None
        for (w, b) in ((1, 256), (2, 128), (2, 256)):
            runs = fash[(kind, w, b)]
            sps = [epoch_median(r, "rows_per_second") for r in runs]
            tt = [time_to_target(r["epochs"], "val_metric", "seconds", tgt) for r in runs]
            tt_ep = [x[0] for x in tt]
            tt_s = [x[1] for x in tt]
            va = [r["epochs"][-1]["val_metric"] for r in runs]
            if (w, b) == (1, 256):
                base = med(sps)
            tta = test_acc[(kind, w, b)][0]
            rows.append([f"dml workers={w} batch_size={b} (global {w * b})", fmt_med(sps),
                         ratio(med(sps), base),
                         f"{fmt_med(tt_s)} s (epoch {fmt(med(tt_ep))})" if med(tt_s) else "not reached",
                         f"{med(va):.4f}", f"{tta:.4f}",
                         fmt_med([r["wall"] for r in runs]) + " s"])
            cmds.append(f"dml w{w} b{b}: {runs[0]['sql']}")
            cmds.append(f"  test accuracy: {test_acc[(kind, w, b)][1]}")
            if (kind, w, b) == ("mlp", 2, 128):
                mps = [epoch_median(r, "rows_per_second") for r in mlp_mpi]
                rows.append([f"dml workers={w} batch_size={b}, all-reduce by MPI_Allreduce "
                             "(shared_memory false)", fmt_med(mps), ratio(med(mps), base),
                             "—", f"{med([r['epochs'][-1]['val_metric'] for r in mlp_mpi]):.4f}",
                             "—", fmt_med([r["wall"] for r in mlp_mpi]) + " s"])
                cmds.append(f"dml w{w} b{b} MPI all-reduce: {mlp_mpi[0]['sql']}")
                shm_gain = ratio(med(sps), med(mps))
        for src, th in (("Debian", 1), ("Debian", 2), ("PyPI", 1), ("PyPI", 2)):
            tr = (torch_runs if src == "Debian" else torch_new).get((kind, th))
            if tr is None:
                continue
            sps = [med([e["samples_per_s"] for e in r["epochs"]]) for r in tr["runs"]]
            tt = [time_to_target(r["epochs"], "val_acc", "seconds", tgt) for r in tr["runs"]]
            tt_s = [x[1] for x in tt]
            tt_ep = [x[0] for x in tt]
            va = [r["epochs"][-1]["val_acc"] for r in tr["runs"]]
            ta = [r["done"]["test_acc"] for r in tr["runs"]]
            cores = med([r["done"].get("cores") or 0 for r in tr["runs"]])
            tv = tr["runs"][0]["config"].get("torch", "?")
            rows.append([f"PyTorch {tv} ({src}) {th} thread{'s' if th > 1 else ''} (batch 256; "
                         f"pinned to {th} core{'s' if th > 1 else ''}, used {cores:.2f})", fmt_med(sps),
                         ratio(med(sps), base),
                         f"{fmt_med(tt_s)} s (epoch {fmt(med(tt_ep))})" if med(tt_s) else "not reached",
                         f"{med(va):.4f}", f"{med(ta):.4f}",
                         fmt_med([r["wall"] for r in tr["runs"]]) + " s (process)"])
            cmds.append(f"PyTorch ({src}) {th} thread(s): {tr['cmd']}")
        for th in (1, 2):
            sk = sk_runs[th]
            for peer, label in (("sklearn_sgd", "SGDClassifier log-loss OvR"),
                                ("sklearn_logreg", f"LogisticRegression lbfgs, max_iter {M['sk_logreg_iter']}"),
                                ("sklearn_mlp", "MLPClassifier adam (batch 256, L2 alpha 1e-4)")):
                if (kind == "softmax") == (peer == "sklearn_mlp"):
                    continue
                recs = [r[peer] for r in sk["runs"] if peer in r]
                if not recs:
                    continue
                sps = [x["samples_per_s"] for x in recs]
                rows.append([f"scikit-learn {label}, {th} thread{'s' if th > 1 else ''}",
                             fmt_med(sps) if med(sps) else "n/a (lbfgs iterations)",
                             ratio(med(sps), base) if med(sps) else "n/a",
                             "n/a (no per-epoch hook)", "n/a",
                             f"{med([x['test_acc'] for x in recs]):.4f}",
                             fmt_med([x["fit_s"] for x in recs]) + " s (fit)"])
            cmds.append(f"scikit-learn {th} thread(s): {sk['cmd']}")
        epochs = M["sm_epochs"] if kind == "softmax" else M["mlp_epochs"]
        s += [f"### {title}, {epochs} epochs, target validation accuracy {tgt}", "",
              table(["trainer", "samples/s per epoch", "vs dml w1", "time to target",
                     "final val acc", "test acc", "wall (dml: whole dml_train)"], rows),
              "", codeblock(cmds), ""]
        d1 = med([epoch_median(r, "rows_per_second") for r in fash[(kind, 1, 256)]])
        d2 = med([epoch_median(r, "rows_per_second") for r in fash[(kind, 2, 128)]])
        t1 = max(torch_sps(d[(kind, 1)]) for d in (torch_runs, torch_new) if (kind, 1) in d)
        t2 = max(torch_sps(d[(kind, 2)]) for d in (torch_runs, torch_new) if (kind, 2) in d)
        rep.head(f"{title}: dml {fmt(d1)} samples/s (1 worker) and {fmt(d2)} (2 workers, global "
                 f"batch 256) vs PyTorch {fmt(t1)} (1 thread) and {fmt(t2)} (2 threads): "
                 f"dml w1 / torch 1 thread = {ratio(d1, t1)}, dml w2 / torch 2 threads = {ratio(d2, t2)}; "
                 f"dml w2 / PyTorch's faster setting = {ratio(d2, max(t1, t2))}"
                 + (f"; all-reduce through shared memory vs MPI_Allreduce, same job: {shm_gain}."
                    if kind == "mlp" else "."))
        if kind == "mlp":
            pr = [p["dml"] / p["torch"] for p in goal_pairs]
            bt = (f"PyTorch ({'Debian' if best_torch[0] == 'debian' else 'PyPI'}) {best_torch[1]} "
                  f"thread{'s' if best_torch[1] > 1 else ''}")
            s += [f"**The MLP goal, paired.** dml `workers => 2, batch_size => 128` (2 cores) and "
                  f"PyTorch's best setting within 2 cores in the table above, {bt} (batch 256), run in "
                  f"turn, {len(pr)} pairs; each pair's ratio is dml's median epoch samples/s over "
                  "PyTorch's:", "",
                  table(["pair", "dml w2 b128 samples/s", f"{bt} samples/s", "ratio"],
                        [[str(i + 1), fmt(p["dml"]), fmt(p["torch"]), ratio(p["dml"], p["torch"])]
                         for i, p in enumerate(goal_pairs)]), "",
                  f"Median ratio {fmt(med(pr), 3)}x (range {fmt(min(pr), 3)}–{fmt(max(pr), 3)}x); "
                  "the goal is at least 1.5x the best PyTorch setting at equal cores.", "",
                  codeblock([f"dml: {goal_pairs[0]['dml_sql']}",
                             f"PyTorch: {best_torch_cmd}"]), ""]
            rep.head(f"MLP goal, dml w2 b128 and {bt} (PyTorch's best setting within 2 cores) run in "
                     f"turn ({len(pr)} pairs): median ratio {fmt(med(pr), 3)}x (range "
                     f"{fmt(min(pr), 3)}–{fmt(max(pr), 3)}x); goal at least 1.5x — "
                     f"{'met' if med(pr) >= 1.5 else 'NOT met'}.")
            jr = [p["job"] / p["sync"] for p in job_pairs]
            # the time outside the workers' training (start, load, commits, the
            # job's queue and worker), job minus dml_train, over dml_train's wall
            haveT = all(p.get("sync_train") and p.get("job_train") for p in job_pairs)
            out_extra = [((p["job"] - p["job_train"]) - (p["sync"] - p["sync_train"])) / p["sync"]
                         for p in job_pairs] if haveT else []
            tr = [p["job_train"] / p["sync_train"] for p in job_pairs] if haveT else []
            cr = [p["job_cpu"] / p["sync_cpu"] for p in job_pairs
                  if p.get("job_cpu") and p.get("sync_cpu")]
            s += ["**A background job's overhead, paired.** The MLP goal's training as `dml_train` "
                  "and as `dml_train_async` followed by `dml_wait` (wall time from the submit to "
                  "the job's end: queueing, the background worker's start, its commits, progress "
                  "in shared memory, checkpoints at the default interval), in turn (which goes "
                  f"first alternates), {len(jr)} pairs. \"training\" is the workers' training "
                  "seconds (`metrics.train_seconds`), \"outside\" the wall time less that: where "
                  "the job's own work shows, apart from the training's speed, which moves between "
                  "runs on a shared machine by more than the goal; \"CPU\" the cluster's CPU "
                  "seconds (every process of the cluster, as cores used below):", "",
                  table(["pair", "first", "dml_train s (training, outside)", "job s (training, outside)",
                         "job / dml_train, wall", "training", "CPU"],
                        [[str(i + 1), p.get("first", "dml_train"),
                          f"{fmt(p['sync'], 3)} ({fmt(p.get('sync_train'), 3)}, "
                          f"{fmt(p['sync'] - p['sync_train'], 3) if haveT else '—'})",
                          f"{fmt(p['job'], 3)} ({fmt(p.get('job_train'), 3)}, "
                          f"{fmt(p['job'] - p['job_train'], 3) if haveT else '—'})",
                          fmt(p["job"] / p["sync"], 4),
                          fmt(p["job_train"] / p["sync_train"], 4) if haveT else "—",
                          fmt(p["job_cpu"] / p["sync_cpu"], 4) if p.get("job_cpu") and p.get("sync_cpu") else "—"]
                         for i, p in enumerate(job_pairs)]), "",
                  f"Median wall ratio {fmt(med(jr), 4)} (range {fmt(min(jr), 4)}–{fmt(max(jr), 4)}); "
                  "the issue's goal is under 1.03." +
                  (f" The job's time outside the training less dml_train's: median "
                   f"{100 * med(out_extra):+.1f}% of dml_train's wall (range {100 * min(out_extra):+.1f}% "
                   f"to {100 * max(out_extra):+.1f}%); the training's own time job / dml_train: median "
                   f"{fmt(med(tr), 4)} (range {fmt(min(tr), 4)}–{fmt(max(tr), 4)})" if haveT else "") +
                  (f"; the cluster's CPU seconds job / dml_train: median {fmt(med(cr), 4)} "
                   f"(range {fmt(min(cr), 4)}–{fmt(max(cr), 4)})." if cr else "."), "",
                  codeblock([f"dml_train: {job_pairs[0]['sync_sql']}",
                             f"job: {job_pairs[0]['job_sql']}; SELECT * FROM dml_wait(job)"]), ""]
            rep.head(f"Background job vs dml_train, same MLP training in turn ({len(jr)} pairs): "
                     f"median wall ratio {fmt(med(jr), 4)} (range {fmt(min(jr), 4)}–{fmt(max(jr), 4)}); "
                     f"issue goal under 1.03 — {'met' if med(jr) < 1.03 else 'NOT met'}" +
                     (f"; outside the training the job took {100 * med(out_extra):+.1f}% of dml_train's "
                      f"wall more (median), the training itself {fmt(med(tr), 4)}x" if haveT else "") +
                     (f", the cluster's CPU {fmt(med(cr), 4)}x" if cr else "") + ".")

    # options "balance", paired
    if bal_pairs["quiet"]:
        rows = []
        heads = []
        for cond, label in (("quiet", "nothing else"),
                            ("busy", f"a CPU-bound loop pinned to CPU {cpus[-1]}"),
                            ("straggler", "rank 1 delayed 1 ms a step")):
            ps = bal_pairs[cond]
            rs = [p["on"] / p["off"] for p in ps]
            for i, p in enumerate(ps):
                moved = p.get("on_moved")
                share = (f"{100 * moved / (p['on_rows'] * p['on_epochs']):.1f}%"
                         if moved is not None and p.get("on_rows") else "—")
                rows.append([label, str(i + 1), p["first"], fmt(p["on"]), fmt(p["off"]),
                             fmt(p["on"] / p["off"], 3), share])
            heads.append(f"{label}: median {fmt(med(rs), 3)}x (range {fmt(min(rs), 3)}–"
                         f"{fmt(max(rs), 3)}, faster in {sum(1 for x in rs if x > 1)} of {len(rs)})")
        s += ["**Balance, paired.** The MLP goal's training with `options` `{\"balance\": true}` "
              "(the ranks share each step's rows by their measured speed) and at the default "
              "(each rank computes its own rows), in turn (which goes first alternates): with "
              "nothing else running, beside a CPU-bound process pinned to one of the cores (as "
              "another query on the server would be), and with rank 1 delayed 1 ms every step "
              "(the straggler hook: a rank slower every step); samples/s is the median epoch's "
              "`rows_per_second`; \"moved\" is the share of the training rows computed by a "
              "rank that does not hold them:", "",
              table(["beside it", "pair", "first", "balanced samples/s", "own rows samples/s",
                     "balanced / own", "moved"], rows), "",
              "Balanced over own rows, " + "; ".join(heads) + ".", "",
              codeblock([f"balanced: {bal_pairs['quiet'][0]['on_sql']}",
                         f"own rows: {bal_pairs['quiet'][0]['off_sql']}",
                         f"beside it: taskset -c {cpus[-1]} sh -c 'while :; do :; done'",
                         "delayed: options also {\"straggler\": \"1:1\"}, with SET dml.test_hooks = on"]), ""]
        rep.head("Balance (MLP goal's training, balanced / each rank its own rows, paired): "
                 + "; ".join(heads) + ".")

    # end to end
    rows = []
    cmds = []
    dwall = {}
    for w, b in ((1, 256), (2, 128)):
        runs = fash[("mlp", w, b)]
        dwall[w] = med([r["wall"] for r in runs])
        rows.append([f"dml_train workers={w} batch_size={b}", fmt_med(mval(runs, "load_seconds")) + " s",
                     fmt_med(mval(runs, "train_seconds")) + " s",
                     fmt_med([r["wall"] for r in runs]) + " s", "—",
                     f"{test_acc[('mlp', w, b)][0]:.4f}"])
        cmds.append(f"dml w{w}: {runs[0]['sql']}")
    for method in ("fetch", "copy"):
        runs = e2e[method]["runs"]
        rows.append([f"psycopg2 ({method}) → numpy → PyTorch 1 thread",
                     fmt_med([x["fetch_s"] for x in runs]) + " s",
                     fmt_med([x["train_s"] for x in runs]) + " s",
                     fmt_med([x["wall"] for x in runs]) + " s (process)",
                     ratio(med([x["wall"] for x in runs]), dwall[2]),
                     f"{med([x['test_acc'] for x in runs]):.4f}"])
        cmds.append(f"export {method}: {e2e[method]['cmd']}")
    s += [f"### End to end: table → trained MLP, {M['mlp_epochs']} epochs", "",
          "dml: the wall time of the `dml_train` statement (start workers, load, train, store the "
          "model in `dml.models`); its training uses 90% of the rows (validation 0.1). Export "
          "path: `bench/peers/export_path.py` process wall time (Python start, psycopg2 fetch of "
          "train and test tables, numpy conversion, PyTorch training on all training rows, test "
          "evaluation after each epoch); the model stays in Python memory. PyTorch runs with 1 "
          "thread, its faster setting on this machine (see the MLP table).", "",
          table(["path", "load / fetch", "train", "total wall", "vs dml_train w2", "test acc"], rows),
          "", codeblock(cmds), ""]
    ef = med([x["wall"] for x in e2e["fetch"]["runs"]])
    ec = med([x["wall"] for x in e2e["copy"]["runs"]])
    rep.head(f"End to end (MLP, {M['mlp_epochs']} epochs): dml_train 2 workers {fmt(dwall[2])} s vs "
             f"export+PyTorch {fmt(ef)} s (fetch, {ratio(ef, dwall[2])}) / {fmt(ec)} s "
             f"(binary COPY, {ratio(ec, dwall[2])}).")

    # exact solvers
    # the issue's goals, as MADlib time / dml time: linear with the default path (in-server;
    # the issue asks for 2 workers, and dml picks the faster path on its own), logistic w2
    goals = {"linear": 1.5, "logistic": 10.0}

    def goal_cell(kind, madlib, wall):
        g = goals[kind]
        if n_synth != 1000000:
            return f"≥ {g:g}x: n/a (not 1,000,000 rows)"
        return f"≥ {g:g}x: " + ("met" if madlib / wall >= g else "short")

    rows = []
    cmds = []
    srv_walls = [r["wall"] for r in lin_srv]
    rows.append(["linear (exact), default: in-server aggregate",
                 f"{lin_srv[0]['metrics'].get('workers', 0)} (PostgreSQL parallel query)", "—",
                 fmt_med(mval(lin_srv, "train_seconds")) + " s", "1",
                 fmt_med(srv_walls) + " s", "0.85 s", ratio(0.85, med(srv_walls)),
                 goal_cell("linear", 0.85, med(srv_walls)), "—",
                 fmt(med(mval(lin_srv, "r2")), 5)])
    cmds.append(f"linear in-server (default): {lin_srv[0]['sql']}")
    for kind, runs_by_w, madlib, opt in (("linear (exact), MPI workers: in_server false", lin, 0.85, "exact"),
                                         ("logistic (Newton/IRLS)", logit, 18.0, "newton")):
        short = "lin" if opt == "exact" else "logit"
        for w in (1, 2):
            runs = runs_by_w[w]
            walls = [r["wall"] for r in runs]
            bruns = baseline_runs[(short, w)]
            rows.append([kind, w, fmt_med(mval(runs, "load_seconds")) + " s",
                         fmt_med(mval(runs, "train_seconds")) + " s",
                         fmt(med([r["result"]["epochs"] for r in runs])),
                         fmt_med(walls) + " s", f"{madlib} s", ratio(madlib, med(walls)),
                         goal_cell("logistic", madlib, med(walls)) if opt == "newton" and w == 2 else "—",
                         ratio(med([r["wall"] for r in bruns]), med(walls)) if bruns else "—",
                         fmt(med(mval(runs, "r2" if opt == "exact" else "accuracy")), 5)])
            cmds.append(f"{kind} w{w}: {runs[0]['sql']}")
            if bruns:
                bw = [r["wall"] for r in bruns]
                rows.append([f"{kind}, {a.baseline_label}", w,
                             fmt_med(mval(bruns, "load_seconds")) + " s",
                             fmt_med(mval(bruns, "train_seconds")) + " s",
                             fmt(med([r["result"]["epochs"] for r in bruns])),
                             fmt_med(bw) + " s", f"{madlib} s", ratio(madlib, med(bw)), "—", "1",
                             fmt(med(mval(bruns, "r2" if opt == "exact" else "accuracy")), 5)])
                cmds.append(f"{kind} w{w}, {a.baseline_label}: SET dml.worker_path = "
                            f"'{a.baseline_worker}'; {bruns[0]['sql']}")
    pair_ratios = [qv / nv for qv, nv in zip(ab["qr"], ab["ne"])]
    s += [f"### Least squares: TSQR against the normal equations ({n_synth:,} x 20, in the server)", "",
          "The exact linear solver's pass over the table factors the rows (R of [x, 1, y], "
          "LAPACK dgeqrf per block of rows, PostgreSQL's parallel workers' R factors stacked and "
          "factored again in the combine function) instead of summing X'X (dsyrk). Both passes "
          "ran here alternately, same table and columns; the ratio is taken per pair. The issue's "
          "bar: the QR path costs at most 1.5x the normal equations.", "",
          table(["pass", "seconds", "QR / normal equations (per pair)", "bar"],
                [["normal equations: dml.xtx_cols", fmt_med(ab["ne"]) + " s", "1", "—"],
                 ["TSQR: dml.qr_cols", fmt_med(ab["qr"]) + " s", fmt_med(pair_ratios, 3),
                  "≤ 1.5x: " + ("met" if med(pair_ratios) <= 1.5 else "missed")],
                 ["dml_train in the server (TSQR, solve, model, statistics)",
                  fmt_med(srv_walls) + " s", "—", "—"]]),
          "", codeblock([ab_sql["ne"], ab_sql["qr"]]), ""]
    rep.head(f"Least squares in the server on {n_synth:,} x 20: the TSQR pass "
             f"{fmt(med(ab['qr']))} s vs the normal equations' {fmt(med(ab['ne']))} s "
             f"({fmt(med(pair_ratios))}x per pair; bar 1.5x).")
    s += [f"### Exact solvers on synth_1m ({n_synth:,} rows x 20 float8 features)", "",
          "Apache MADlib is not packaged in Debian 12 and cannot be installed on this machine, "
          "so there is no MADlib run here. The MADlib column is the figure stated in the issue, "
          "measured earlier on this machine on 1,000,000 x 20: `madlib.linregr_train` 0.85 s and "
          "`madlib.logregr_train` 18 s (IRLS, 7 iterations). The issue's goals, as MADlib time / "
          "dml time: linear at least 1.5x, logistic at least 10x (2 workers, same "
          "log-likelihood). The default linear exact path runs inside the server (one "
          "aggregate pass over the table with PostgreSQL's parallel workers, then a least-squares "
          "solve of its R factor in the backend; `workers` is not used), so its row says \"—\" for load; `options => "
          "'{\"in_server\": false}'` forces the MPI worker job. "
          + (f"Rows marked \"{a.baseline_label}\" ran the same SQL with that build's dml-worker "
             f"(`{a.baseline_worker}`), each run right after the current one; \"vs previous\" is "
             "its wall time / the current wall time. " if a.baseline_worker else
             "Run with `DML_BENCH_BASELINE=<git revision> make bench` to add the previous "
             "implementation's dml-worker side by side. ")
          + "The MADlib figures are only comparable in full mode (1,000,000 rows)"
          + ("" if n_synth == 1000000 else f"; this run has {n_synth:,} rows, so the ratio is not meaningful") + ".",
          "",
          table(["model", "workers", "load", "solve (train_seconds)", "iterations", "dml_train wall",
                 "MADlib (stated)", "MADlib / dml", "goal", "vs previous",
                 "fit (R² / accuracy)"], rows),
          "", codeblock(cmds), ""]
    rep.h("\n".join(s))
    rep.head(f"Exact solvers on {n_synth:,} x 20: linear exact {fmt(med(srv_walls))} s in-server "
             f"(default) and {fmt(med([r['wall'] for r in lin[2]]))} s with 2 MPI workers "
             f"(MADlib stated 0.85 s), logistic Newton {fmt(med([r['wall'] for r in logit[2]]))} s "
             f"(MADlib stated 18 s).")

    # ------------------------------------------------------------------
    # 3. scaling
    # ------------------------------------------------------------------
    rows = []
    for label, r1, r2, note in (
            ("linear exact (synth)", lin[1], lin[2], ""),
            ("logistic newton (synth)", logit[1], logit[2], ""),
            ("logistic adam b256/worker (synth)", logit_adam[1], logit_adam[2],
             "global batch 256 → 512"),
            ("softmax adam, same global batch 256", fash[("softmax", 1, 256)], fash[("softmax", 2, 128)],
             "b256 → 2 x b128"),
            ("softmax adam, same per-worker batch 256", fash[("softmax", 1, 256)], fash[("softmax", 2, 256)],
             "b256 → 2 x b256"),
            ("mlp adam, same global batch 256", fash[("mlp", 1, 256)], fash[("mlp", 2, 128)],
             "b256 → 2 x b128"),
            ("mlp adam, same per-worker batch 256", fash[("mlp", 1, 256)], fash[("mlp", 2, 256)],
             "b256 → 2 x b256")):
        l1, l2 = med(mval(r1, "load_seconds")), med(mval(r2, "load_seconds"))
        t1, t2 = med(mval(r1, "train_seconds")), med(mval(r2, "train_seconds"))
        w1, w2 = med([r["wall"] for r in r1]), med([r["wall"] for r in r2])
        rows.append([label, note, f"{fmt(l1)} → {fmt(l2)} s ({ratio(l1, l2)})",
                     f"{fmt(t1)} → {fmt(t2)} s ({ratio(t1, t2)})",
                     f"{fmt(w1)} → {fmt(w2)} s ({ratio(w1, w2)})"])
    s = ["## 3. Scaling 1 → 2 workers", "",
         "Speedup = time with 1 worker / time with 2 (2.00x is perfect on this 2-core machine, "
         "where each worker and its PostgreSQL backend share the two cores). Medians of the runs "
         "listed in sections 1 and 2 (same SQL, `workers => 1` and `workers => 2`).", "",
         table(["model", "batch", "load", "train (train_seconds)", "dml_train wall"], rows), ""]
    rep.h("\n".join(s))

    # ------------------------------------------------------------------
    # 4. limits
    # ------------------------------------------------------------------
    bw1, bw2 = stream_best(stream[1]), stream_best(stream[2])
    rows = []
    floor_ratio = {}
    floor_s = {}
    for label, runs_by_w, d, how in (
            ("logistic newton, one Newton iteration", logit, 20 + 1, "seconds"),
            ("logistic L-BFGS, one iteration (mean)", logit_lbfgs, 20 + 1, "mean"),
            ("logistic adam b256, one epoch", logit_adam, 20 + 1, "rate"),
            ("logistic adam b256, one epoch, shuffle rows", logit_adam_rows, 20 + 1, "rate"),
            ("linear adam b256, one epoch", lin_adam, 20 + 1, "rate"),
            ("softmax adam Fashion-MNIST (w1 b256, w2 b128), one epoch",
             {1: fash[("softmax", 1, 256)], 2: fash[("softmax", 2, 128)]}, 784 + 1, "rate")):
        for w in (1, 2):
            runs = runs_by_w[w]
            ntrain = med(mval(runs, "train_rows"))

            def run_epoch(r):
                if how == "seconds":
                    return epoch_median(r, "seconds")
                if how == "mean":
                    # every iteration counted, those whose line search took a second pass too
                    return sum(e["seconds"] for e in r["epochs"]) / len(r["epochs"])
                # the epoch's training part (a validation pass is not counted)
                return r["metrics"].get("train_rows", ntrain) / epoch_median(r, "rows_per_second")
            ep = med([run_epoch(r) for r in runs])
            nbytes = ntrain * d * 4
            # each run against the STREAM of its own minutes (the run-start one where none)
            bws = [r.get("stream_gbs") or (bw1 if w == 1 else bw2) for r in runs]
            floor = nbytes / (med(bws) * 1e9)
            floor_s[(label, w)] = floor
            floor_ratio[(label, w)] = med([run_epoch(r) * bw * 1e9 /
                                           (r["metrics"].get("train_rows", ntrain) * d * 4)
                                           for r, bw in zip(runs, bws)])
            shuffle = runs[-1]["metrics"].get("shuffle", "rows")
            if how in ("seconds", "mean"):
                shuffle = "—"
            elif shuffle == "blocks":
                shuffle = f"blocks of {runs[-1]['metrics'].get('shuffle_block')} rows"
            if runs[-1]["metrics"].get("byte_rows"):
                # options "byte_rows": the steps read a byte a value
                shuffle += f", read as bytes / {runs[-1]['metrics']['byte_rows']}"
            rows.append([label, w, shuffle, fmt(nbytes / 1e6) + " MB",
                         f"{fmt_med(bws)} GB/s", fmt(floor * 1e3) + " ms",
                         fmt(ep * 1e3) + " ms", f"{floor_ratio[(label, w)]:.1f}x",
                         fmt(med(mval(runs, "train_seconds"))) + " s"])
    # the Hessian's lower triangle: p (p + 1) / 2 multiply-adds a row, p = 21
    newton_flops = n_synth * 21 * 22
    newton_ms = newton_flops / (med([x['median_gflops'] for x in sgemm if x['m'] == 2048]) * 1e9) * 1e3
    newton_bw_ms = floor_s[("logistic newton, one Newton iteration", 1)] * 1e3
    s = ["## 4. Limits", "",
         "### Small models' epochs vs the memory-bandwidth floor", "",
         "Floor = bytes of the worker matrices (training rows x (features + label) x 4 bytes, "
         "float32, all workers) / STREAM bandwidth measured just before each run (best kernel; 1 "
         "thread for 1 worker, 2 threads for 2 workers; median and range over the runs; "
         f"`{adj_stream_cmd} THREADS`): the time just to stream the data once. Each run is "
         "divided by the floor of its own minutes, and \"dml / floor\" is the median of the "
         "runs' ratios (the floor and epoch columns are medians). A minibatch "
         "epoch's time is its training part (training rows / the median `dml.epochs.rows_per_second`; "
         "a validation pass is not counted); a Newton iteration's is the median `dml.epochs.seconds`, "
         "and an L-BFGS iteration's the mean of all the run's iterations (`dml.epochs.seconds`: one "
         "pass over the rows for the loss and gradient, two where the line search tries a second step). "
         "\"shuffle\" is the order an epoch took its rows in (options `shuffle`): at its default "
         "(`auto`) 1,000,000 x 20 over "
         f"{M['logit_adam_epochs']} epochs takes blocks, and the row shuffle's runs alternate with "
         "them. The block shuffle lays the rows out once per job, before the first epoch: that "
         "pass is not in the epoch times but is in train_seconds (all epochs). Where the column "
         "says \"read as bytes\" (options `byte_rows`, on by default: every input is a byte, here "
         "a pixel over 255), the steps read one byte a value, a quarter of the floor's bytes, and "
         "rebuild each float32 input exactly; the floor stays the float32 matrix's. A Newton iteration "
         "also forms X^T W X, whose lower triangle takes p (p + 1) / 2 multiply-adds a row: "
         f"n·p·(p + 1) = {fmt(newton_flops / 1e9)} GFLOP for p = 21, {fmt(newton_ms)} ms at the "
         "single-core sgemm rate below, "
         f"{'under' if newton_ms < newton_bw_ms else 'over'} its 1-worker bandwidth floor "
         f"({fmt(newton_bw_ms)} ms); the floor column is bandwidth on every row.", "",
         table(["what", "workers", "shuffle", "data", "STREAM", "floor", "dml epoch", "dml / floor",
                "train_seconds"], rows), "",
         codeblock([f"STREAM: {stream_cmd}",
                    f"  1 thread: copy {stream[1]['copy_gbs']} scale {stream[1]['scale_gbs']} add "
                    f"{stream[1]['add_gbs']} triad {stream[1]['triad_gbs']} GB/s",
                    f"  2 threads: copy {stream[2]['copy_gbs']} scale {stream[2]['scale_gbs']} add "
                    f"{stream[2]['add_gbs']} triad {stream[2]['triad_gbs']} GB/s",
                    f"logistic newton: {logit[1][0]['sql']}",
                    f"logistic L-BFGS: {logit_lbfgs[1][0]['sql']}",
                    f"logistic adam: {logit_adam[1][0]['sql']}",
                    f"logistic adam, shuffle rows: {logit_adam_rows[1][0]['sql']}",
                    f"linear adam: {lin_adam[1][0]['sql']}",
                    f"softmax adam: {fash[('softmax', 1, 256)][0]['sql']}"]), ""]
    ad = [floor_ratio[("logistic adam b256, one epoch", w)] for w in (1, 2)]
    rw = [floor_ratio[("logistic adam b256, one epoch, shuffle rows", w)] for w in (1, 2)]
    sm = [floor_ratio[("softmax adam Fashion-MNIST (w1 b256, w2 b128), one epoch", w)] for w in (1, 2)]
    la = [floor_ratio[("linear adam b256, one epoch", w)] for w in (1, 2)]
    lb = [floor_ratio[("logistic L-BFGS, one iteration (mean)", w)] for w in (1, 2)]
    nt = [floor_ratio[("logistic newton, one Newton iteration", w)] for w in (1, 2)]
    rep.head(f"Small models against the STREAM floor (goal within 3x): the logistic Adam epoch on "
             f"1,000,000 x 20 {fmt(ad[0])}x (1 worker) and {fmt(ad[1])}x (2 workers) with the block "
             f"shuffle, {fmt(rw[0])}x and {fmt(rw[1])}x with the row shuffle; linear Adam "
             f"{fmt(la[0])}x and {fmt(la[1])}x; a logistic L-BFGS iteration {fmt(lb[0])}x and "
             f"{fmt(lb[1])}x, a Newton iteration {fmt(nt[0])}x and {fmt(nt[1])}x; Fashion-MNIST "
             f"softmax {fmt(sm[0])}x and {fmt(sm[1])}x (section 4).")
    # MLP vs FLOPs
    sizes = [784, 256, 128, 10]
    mm = sum(sizes[i] * sizes[i + 1] for i in range(3))
    flops_per_row = 2 * mm + 2 * mm + 2 * sum(sizes[i] * sizes[i + 1] for i in range(1, 3))
    # weight the shapes by their FLOPs: the effective rate of one MLP step at batch 256
    mlp_rate = mlp_gemm_rate(sgemm)
    peak = med([x["median_gflops"] for x in sgemm if x["m"] == 2048])
    rows = []
    train_floor = {}
    cfgs = [(w, b, "", fash[("mlp", w, b)]) for w, b in ((1, 256), (2, 128), (2, 256))]
    cfgs += [(w, b, ", amx false", mlp_noamx[(w, b)]) for w, b in ((1, 256), (2, 128), (2, 256))
             if mlp_noamx.get((w, b))]
    for w, b, what, runs in cfgs:
        ntrain = med(mval(runs, "train_rows"))
        fl = ntrain * flops_per_row
        # each run against the floor of its own minutes: the sgemm rate
        # measured just before it (the run-start rate where there is none)
        ep_r, tr_r, floor_r, rate_r, own_r = [], [], [], [], []
        for r in runs:
            # the rate of all the run's cores together (w cores at once)
            rate = r.get("sgemm_rate") or mlp_rate * w
            rows_r = r["metrics"].get("train_rows", ntrain)
            fl_r = rows_r * flops_per_row
            rate_r.append(rate)
            floor_r.append(fl_r / (rate * 1e9))
            ep_r.append(epoch_median(r, "seconds"))
            # the training part alone: training rows / rows_per_second (the validation pass excluded)
            tr_r.append(rows_r / epoch_median(r, "rows_per_second"))
            # the training part against the floor at dml's own product's rate
            if r.get("own_rate"):
                own_r.append((r["own_rate"], tr_r[-1] / (fl_r / (r["own_rate"] * 1e9))))
        ep, tr, floor = med(ep_r), med(tr_r), med(floor_r)
        cores = [r.get("sgemm_cores") for r in runs if r.get("sgemm_cores")]
        slow = [min(c) / max(c) for c in cores if len(c) > 1 and max(c) > 0]
        train_floor[(w, b, what)] = med([t / f for t, f in zip(tr_r, floor_r)])
        rows.append([f"w{w} b{b}{what}", fmt(fl / 1e9) + " GFLOP",
                     fmt_med(rate_r) + (f" (slower core / faster: {fmt_med(slow)})" if slow else ""),
                     fmt(floor) + " s", fmt(ep) + " s",
                     fmt(med([e / f for e, f in zip(ep_r, floor_r)]), 3) + "x",
                     fmt(tr) + " s", fmt(med([t / f for t, f in zip(tr_r, floor_r)]), 3) + "x",
                     fmt(fl / tr / 1e9) + " GFLOP/s",
                     fmt_med([x[0] for x in own_r]) if own_r else "n/a",
                     fmt(med([x[1] for x in own_r]), 3) + "x" if own_r else "n/a"])
    s += ["### MLP 784-256-128-10 epoch vs the sgemm floor", "",
          f"FLOPs per training row = forward 2·Σ(in·out) + weight gradients 2·Σ(in·out) + input "
          f"gradients of layers 2..3 = {flops_per_row:,} (Σ in·out = {mm:,}). The rate is the "
          f"single-thread OpenBLAS sgemm rate at the MLP's shapes for the run's rows a worker "
          f"(the batch-256 ones below; at batch 128 the same with 128 in place of 256 where it is "
          f"the rows), FLOP-weighted over the "
          f"shapes, measured just before each dml run (`{adj_sgemm_cmd()}`; median and range over "
          f"the runs); for 2 workers, two such processes at once, each pinned to one core "
          f"(`taskset -c`, on the CPUs this process may use), their rates added, as STREAM's two threads (this host's two cores are "
          f"not always equally fast, nor is one core alone as fast as each of two busy at once). "
          f"Each run is divided by the floor of its own "
          f"minutes, and the ratios are the medians of the runs' ratios. At the run's start the "
          f"rate was {fmt(mlp_rate)} GFLOP/s ({fmt(peak)} GFLOP/s on 2048³). The epoch's time "
          f"includes dml's validation pass (a forward pass over the held-out rows, whose FLOPs the "
          f"floor does not count); its training part (training rows / `rows_per_second`) does not. "
          f"The MLP's hidden layers run on dml's own product (kernels/gemm.h) where the CPU has "
          f"AVX-512, and where it has AMX on AMX's tiles, each float32 in three bfloat16 parts "
          f"(kernels/gemm_amx.h: float32's accuracy, not an IEEE sgemm; the OpenBLAS floor's ratio "
          f"then says how much faster that product is as well as what the step adds to it): "
          f"the last two columns are its rate at the same shapes, measured the same way "
          f"just before each run (`{adj_sgemm_cmd(256, own=True)}`), and the training part against "
          f"the floor at that rate (n/a where it does not run). Where the training ran on AMX, each "
          f"run alternated with the same training with `options => '{{\"amx\": false}}'` (rows "
          f"\"amx false\"): dml's AVX-512 product, as on a CPU with AVX-512 and no AMX (the AMD "
          f"EPYC of the issue's first figures); its own-product columns are then gemm.h's rate "
          f"(`{adj_sgemm_cmd(256, own='dml')}`).", "",
          table(["dml run", "FLOPs / epoch", "rate (GFLOP/s, the run's cores together)", "floor", "dml epoch",
                 "epoch / floor", "training part", "training / floor", "achieved (training)",
                 "dml's own product's rate", "training / floor at that rate"], rows), "",
          codeblock([f"sgemm: {sgemm_cmd}   ({blas_cfg})"] +
                    [f"  {x['m']}x{x['n']}x{x['k']}: median {x['median_gflops']} GFLOP/s, best {x['gflops']}"
                     for x in sgemm] +
                    [f"mlp: {fash[('mlp', 1, 256)][0]['sql']}"]), ""]

    def floor_line(what):
        got = [(w, b, train_floor[(w, b, what)]) for w, b in ((1, 256), (2, 128), (2, 256))
               if (w, b, what) in train_floor]
        return ", ".join(f"w{w} b{b} {x:.3g}x" for w, b, x in got) + (
            " — met" if all(x <= 1.15 for _, _, x in got) else " — NOT met")
    rep.head("MLP epoch's training part against the OpenBLAS sgemm floor of its own minutes "
             "(goal within 1.15x, section 4): " + floor_line("") + (
                 "; with options amx false (dml's AVX-512 product, as a CPU without AMX): " +
                 floor_line(", amx false") if mlp_noamx else ""))
    # Which BLAS: the same sgemm benchmark linked against each single-threaded
    # BLAS this machine can get (bench/micro/blas_compare.sh)
    log("BLAS comparison")
    bc_cmd = (("DML_BLAS_COMPARE_MKL=0 " if a.mode == "quick" else "") +
              f"bash bench/micro/blas_compare.sh {a.workdir}/blas {M['sgemm_s']}")
    out, _ = sh(bc_cmd, check=False, timeout=1200)
    bc = jsonl(out)
    # dml's own product (kernels/gemm.h: the MLP's hidden layers on AVX-512),
    # the same program and shapes linked with dml's kernels
    dml_cmd = f"{micro}/sgemm_dml -k dml -s {M['sgemm_s']}"
    out, _ = sh(dml_cmd, check=False)
    own = [dict(x, blas="dml (kernels/gemm.h)") for x in jsonl(out) if x.get("bench") == "sgemm"]
    bc += own or [{"blas": "dml (kernels/gemm.h)", "error": "does not run on this CPU (no AVX-512)"}]
    # and on AMX's tiles (kernels/gemm_amx.h), as the worker's training runs them
    amx_cmd = f"{micro}/sgemm_dml -k amx -s {M['sgemm_s']}"
    p_amx = subprocess.run(["bash", "-c", amx_cmd], cwd=ROOT, capture_output=True, text=True, timeout=900)
    amx = [dict(x, blas="dml on AMX (kernels/gemm_amx.h, three bfloat16 parts)")
           for x in jsonl(p_amx.stdout) if x.get("bench") == "sgemm"]
    bc += amx if amx and "no AMX" not in p_amx.stderr else \
        [{"blas": "dml on AMX (kernels/gemm_amx.h, three bfloat16 parts)", "error": "no AMX on this CPU"}]
    dml_cmd += f"; {amx_cmd}"
    RAW["blas_compare"] = bc
    libs = []
    for x in bc:
        if x.get("blas") and x["blas"] not in libs:
            libs.append(x["blas"])
    brows = []
    wrate = {}
    for lib in libs:
        recs = [x for x in bc if x.get("blas") == lib and "m" in x]
        rb = {(x["m"], x["n"], x["k"]): x["median_gflops"] for x in recs}
        if not rb:
            brows.append([lib, "—", "—", "—", next((x.get("error", "") for x in bc if x.get("blas") == lib), "")])
            continue
        wrate[lib] = mlp_gemm_rate(recs)
        brows.append([lib, fmt(wrate[lib]), fmt(rb.get((256, 10, 128))), fmt(rb.get((2048, 2048, 2048))), ""])
    s2 = ["### Which BLAS", "",
          "The same sgemm benchmark linked against each single-threaded BLAS this machine can "
          "get, one after another in this run: Debian's OpenBLAS (dml's), Debian's BLIS (unpacked, "
          "not installed) and Intel MKL from PyPI (a measurement only: dml's dependencies come "
          "from Debian, where MKL is non-free); then dml's own products (kernels/gemm.h on AVX-512, "
          "and kernels/gemm_amx.h on AMX where the CPU has it), which "
          "the MLP's hidden layers run on where the CPU has AVX-512 (OpenBLAS elsewhere). "
          "Median GFLOP/s, 1 thread.", "",
          table(["BLAS", "MLP batch-256 shapes, FLOP-weighted", "256x10x128 (output layer)",
                 "2048³", "note"], brows), ""]
    if "openblas" in wrate and len(wrate) > 1:
        libs_only = {k: v for k, v in wrate.items() if not k.startswith("dml")}
        best = max(libs_only, key=lambda k: libs_only[k] or 0)
        own_rate = next((v for k, v in wrate.items() if k.startswith("dml (")), None)
        amx_rate = next((v for k, v in wrate.items() if k.startswith("dml on AMX")), None)
        s2.append(f"Fastest library at the MLP's shapes: {best}" + (
            " — dml keeps it." if best == "openblas" else
            f", {ratio(wrate[best], wrate['openblas'])} OpenBLAS's rate" + (
                "." if own_rate else
                ": the MLP epoch's sgemm part would shrink by that factor with it.")))
        if own_rate:
            s2.append(f"dml's own product: {ratio(own_rate, wrate['openblas'])} OpenBLAS's rate at these "
                      f"shapes ({ratio(own_rate, wrate[best])} the fastest library's). The MLP floor above "
                      "stays OpenBLAS's rate, Debian's sgemm.")
        if own_rate and amx_rate:
            s2.append(f"On AMX's tiles (float32 in three bfloat16 parts, six products: float32's accuracy, "
                      f"not an IEEE sgemm): {ratio(amx_rate, wrate['openblas'])} OpenBLAS's rate, "
                      f"{ratio(amx_rate, own_rate)} dml's AVX-512 product's; the worker's training runs "
                      "on it where the CPU has AMX (not with options \"amx\" false, or DML_AMX=off in the "
                      "server's environment).")
        s2.append("")
    s2 += [codeblock([bc_cmd, dml_cmd]), ""]
    s += s2
    rep.h("\n".join(s))

    # ------------------------------------------------------------------
    # 6 (run before 5 to keep the dml training runs together): communication
    # ------------------------------------------------------------------
    log("allreduce sweep")
    ar_cmd = f"{mpirun} -np 2 {micro}/allreduce -b 1K -e {M['ar_max']}"
    out, _ = sh(ar_cmd)
    sweep = [x for x in jsonl(out) if x.get("bench") == "allreduce"]
    RAW["allreduce_sweep"] = sweep

    comm_rows = []
    comm_cmds = [f"sweep: {ar_cmd}"]
    nparams = {"softmax": 784 * 10 + 10,
               "mlp": 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10}
    for kind in ("softmax", "mlp"):
        for b in (128, 256):
            runs = fash[(kind, 2, b)]
            # one all-reduce per step of the gradient, float32 (every rank knows the row count)
            buf = nparams[kind] * 4
            bpe = med([epoch_median(r, "bytes_sent") for r in runs])
            # bytes_sent counts 2(n-1) x buffer per all-reduce (plus a 16-byte loss sum)
            steps = int(round(bpe / 2.0 / buf))
            cmd = f"{mpirun} -np 2 {micro}/allreduce -b {buf} -e {buf}"
            ts = []
            for r in range(R):
                o, _ = sh(cmd)
                ts.append(next(x for x in jsonl(o) if x.get("bench") == "allreduce"))
            t_ar = med([x["time_s"] for x in ts])
            ep = med([epoch_median(r, "seconds") for r in runs])
            comm = steps * t_ar
            algbw = buf / t_ar / 1e9
            comm_rows.append([f"{kind} w2 b{b}", f"{buf:,} B ({nparams[kind]:,} params)",
                              f"{steps:,}", fmt(bpe / 1e6) + " MB",
                              fmt(t_ar * 1e6) + " µs", f"{fmt(algbw)} / {fmt(algbw)}",
                              fmt(comm) + " s", fmt(ep) + " s", f"{100 * comm / ep:.0f}%"])
            comm_cmds.append(f"{kind} w2 b{b} buffer: {cmd}")
    RAW["comm"] = comm_rows
    # dml's own all-reduce step (workers/sync.c) against raw MPI_Allreduce, alternately
    step_cmd = (f"{mpirun} -np 2 {micro}/sync_step -n {nparams['softmax']} -n {nparams['mlp']} "
                f"-r {max(R, 3) * 2 + 1}")
    log("sync_step")
    o, _ = sh(step_cmd)
    step = [x for x in jsonl(o) if x.get("bench") == "sync_step"]
    RAW["sync_step"] = step
    step_rows = [[f"{x['bytes']:,} B", x["method"], fmt(x["time_s"] * 1e6) + " µs",
                  f"{fmt(x['algbw_gbs'])} / {fmt(x['busbw_gbs'])}", fmt(x["vs_raw"], 3) + "x"]
                 for x in step]
    worst = max((x["vs_raw"] for x in step if x["method"] == "dml allreduce"), default=None)
    shm_mlp = [x for x in step if x["method"] == "dml shared memory" and x["floats"] == nparams["mlp"]]
    comm_cmds.append(f"dml step vs raw: {step_cmd}")
    s = ["## 6. Communication: dml's gradient all-reduce vs raw MPI_Allreduce", "",
         "dml's all-reduce step (`sync_step` of `workers/sync.c`, sync mode allreduce, the same "
         "code the workers run, optimizer step excluded) against a raw in-place MPI_Allreduce of "
         "the same buffer, timed alternately in one run (`bench/micro/sync_step`, 2 ranks, median "
         "over rounds of the slowest rank's mean). Bandwidths of the uncompressed buffer. "
         f"Uncompressed overhead, worst size: {fmt(worst, 3)}x raw (goal: at most 1.10x). The "
         "compressed steps add the compression and its error feedback to a smaller exchange: on "
         "shared memory they cost more time than they save; they pay where bytes are dear. "
         "\"dml shared memory\" is what the workers run instead when every rank is on one host "
         "and nothing is compressed (the default here): each rank writes its gradient into its "
         "slot of a segment all ranks map, then a fence, the sum of its 1/W of the coordinates, "
         "a fence (the write of the slot is timed too; the optimizer step that follows runs on "
         "1/W of the parameters, which the MPI path runs on all of them).", "",
         table(["buffer", "method", "time", "algbw / busbw GB/s", "vs raw"], step_rows), "",
         "Per epoch. Bandwidths as nccl-tests defines them: algbw = bytes / time, busbw = algbw · 2(n−1)/n "
         "(= algbw for n = 2). dml all-reduces one float buffer per step (the gradient; every "
         "rank knows the step's row count) and records `bytes_sent` per epoch in `dml.epochs` as "
         "2(n−1) x buffer bytes per all-reduce; the buffer is the parameters as float32, so bytes_sent / (2 x buffer) "
         "is the number of all-reduces (steps) per epoch. The same buffer size is "
         "timed with raw MPI_Allreduce (`bench/micro/allreduce`, launched like dml's workers: "
         "`--oversubscribe --bind-to none`). \"Comm floor\" = steps x raw time: what the "
         "all-reduces alone cost per epoch.", "",
         table(["dml run", "buffer / step", "steps / epoch", "bytes_sent / epoch", "raw MPI_Allreduce",
                "algbw / busbw GB/s", "comm floor / epoch", "dml epoch", "share"], comm_rows), "",
         "Raw MPI_Allreduce sweep (2 ranks, float sum):", "",
         table(["bytes", "time", "algbw GB/s", "busbw GB/s"],
               [[f"{x['bytes']:,}", fmt(x["time_s"] * 1e6) + " µs", fmt(x["algbw_gbs"]),
                 fmt(x["busbw_gbs"])] for x in sweep]), "",
         codeblock(comm_cmds), ""]
    comm_section = "\n".join(s)
    if worst is not None:
        rep.head(f"All-reduce step: dml's (workers/sync.c) takes {fmt(worst, 3)}x the time of a raw "
                 "MPI_Allreduce of the same buffer, worst of the softmax and MLP gradient sizes "
                 "(goal at most 1.10x)"
                 + (f"; through shared memory (the default on one host) the MLP's step takes "
                    f"{fmt(shm_mlp[0]['vs_raw'], 3)}x the raw MPI_Allreduce's time." if shm_mlp else "."))

    # ------------------------------------------------------------------
    # 5. inference
    # ------------------------------------------------------------------
    log("inference")
    mlp20 = dml_runs(conn, 1, "mlp20", "bench_mlp20", "synth_1m", "y", features=FEATS,
                     model="mlp", hidden=[64, 64], optimizer="adam", epochs=M["mlp20_epochs"],
                     workers=2)
    spec = q(conn, "SELECT spec FROM dml.models WHERE name = 'bench_lin_w2' "
                   "ORDER BY version DESC LIMIT 1")[0][0]
    coefs = spec["coefficients"]
    names = [f["name"] for f in spec["features"]]
    expr = repr(float(spec["intercept"])) + "".join(
        f" + {float(c)!r} * {n}" for c, n in zip(coefs, names))
    ic = connect()
    q(ic, "SET max_parallel_workers_per_gather = 0")
    # check the expression against the model before timing it
    chk = q(ic, f"SELECT max(abs(dml_predict('bench_lin_w2', {ARRAY_SQL}) - ({expr}))) "
                f"FROM (SELECT * FROM synth_1m LIMIT 1000) t")[0][0]
    queries = [
        ("scan only", f"SELECT sum(c1 + c20) FROM synth_1m"),
        ("linear as SQL expression", f"SELECT sum({expr}) FROM synth_1m"),
        ("linear, array form", f"SELECT sum(dml_predict('bench_lin_w2', {ARRAY_SQL})) FROM synth_1m"),
        ("linear, record form", "SELECT sum(dml_predict('bench_lin_w2', t)) FROM synth_1m t"),
        ("linear, record form, subquery row (not rewritten)",
         "SELECT sum(dml_predict('bench_lin_w2', s)) FROM (SELECT * FROM synth_1m OFFSET 0) s"),
        ("mlp 20-64-64-1, array form", f"SELECT sum(dml_predict('bench_mlp20', {ARRAY_SQL})) FROM synth_1m"),
        ("mlp 20-64-64-1, per-row into a table",
         f"DROP TABLE IF EXISTS bench_pred_rows; CREATE TABLE bench_pred_rows AS SELECT id, "
         f"dml_predict('bench_mlp20', {ARRAY_SQL}) AS prediction FROM synth_1m"),
        ("mlp 20-64-64-1, dml_predict_table",
         "DROP TABLE IF EXISTS bench_pred_tab; CALL dml_predict_table('bench_mlp20', 'synth_1m', "
         "'bench_pred_tab', 'id')"),
        ("linear, dml_predict_table",
         "DROP TABLE IF EXISTS bench_pred_tab; CALL dml_predict_table('bench_lin_w2', 'synth_1m', "
         "'bench_pred_tab', 'id')"),
        ("mlp 20-64-64-1, dml_predict_rows in sum()",
         "SELECT sum(value), count(id) FROM dml_predict_rows('bench_mlp20', 'synth_1m', 'id')"),
    ]
    inf = {label: dict(sql=sql, times=[]) for label, sql in queries}

    # a query that writes a table drops the last round's first, untimed: an
    # autovacuum of that table (1,000,000 rows just inserted) held the DROP
    # until it was cancelled at deadlock_timeout, a second in one round of
    # the goal's in a run of 2026-12-06.  Then a CHECKPOINT, untimed, so that
    # the query writes its WAL into recycled segments, as on a server that
    # has run a while, not into new ones that PostgreSQL zero-fills first
    # (half of a dml_predict_table call's time in this young cluster,
    # bench/SPEED-NOTES.md)
    def timed_query(sql):
        if sql.startswith("DROP TABLE"):
            drop, sql = sql.split("; ", 1)
            q(ic, drop)
            q(ic, "CHECKPOINT")
        return timed(ic, sql)

    for label, sql in queries:
        timed_query(sql)  # warm-up: model cache, buffers
    # in rounds, every query once a round: the goals' ratios are taken round
    # by round, each from the same minutes (the host's speed moves within one)
    for r in range(R):
        log(f"inference round {r + 1}/{R}")
        for label, sql in queries:
            inf[label]["times"].append(timed_query(sql))
    q(ic, "DROP TABLE IF EXISTS bench_pred_rows, bench_pred_tab")
    ic.close()
    # cold: first call in a new connection
    cold = {}
    for model in ("bench_lin_w2", "bench_mlp20"):
        sql1 = f"SELECT dml_predict('{model}', {ARRAY_SQL}) FROM synth_1m WHERE id = 1"
        lib_sql = "SELECT dml.can_use(10, 'x')"
        firsts, libs, after_lib, seconds = [], [], [], []
        for r in range(max(R, 3)):
            c = connect()
            firsts.append(timed(c, sql1))
            seconds.append(med([timed(c, sql1) for _ in range(3)]))
            c.close()
            c = connect()
            libs.append(timed(c, lib_sql))
            after_lib.append(timed(c, sql1))
            c.close()
        cold[model] = dict(sql=sql1, lib_sql=lib_sql, first=firsts, warm=seconds, lib=libs,
                           after_lib=after_lib)
    RAW["inference"] = dict(inf=inf, cold=cold, check=chk)

    def mt(label):
        return med(inf[label]["times"])

    def paired(a, b):
        """the median over the rounds of a's time / b's, and its range"""
        rs = [x / y for x, y in zip(inf[a]["times"], inf[b]["times"])]
        return med(rs), f"{fmt(med(rs), 3)}x" + (f" ({fmt(min(rs), 3)}–{fmt(max(rs), 3)}x)"
                                                 if len(rs) > 1 else "")
    n = n_synth
    rows = []
    for label, _ in queries:
        t = mt(label)
        rows.append([label, fmt_med(inf[label]["times"]) + " s", fmt(n / t) + " rows/s",
                     fmt((t - mt("scan only")) / n * 1e9) + " ns" if label != "scan only" else "—"])
    goal_pairs = [
        ("array form within 1.5x of the SQL expression",
         "linear, array form", "linear as SQL expression", lambda x: x <= 1.5),
        ("record form within 2x of the SQL expression",
         "linear, record form", "linear as SQL expression", lambda x: x <= 2),
        ("dml_predict_table >= 3x per-row predict (MLP, both writing a table)",
         "mlp 20-64-64-1, per-row into a table", "mlp 20-64-64-1, dml_predict_table",
         lambda x: x >= 3),
        ("dml_predict_table >= 3x per-row predict (MLP, per-row in sum(), writes nothing)",
         "mlp 20-64-64-1, array form", "mlp 20-64-64-1, dml_predict_table", lambda x: x >= 3),
    ]
    goals = []
    for g, a_, b_, ok in goal_pairs:
        x, txt = paired(a_, b_)
        goals.append((g, txt, ok(x)))
    cold_rows = []
    for model in cold:
        cm = cold[model]
        cold_rows.append([model, fmt_med([x * 1e3 for x in cm["first"]]) + " ms",
                          fmt_med([x * 1e3 for x in cm["lib"]]) + " ms",
                          fmt_med([x * 1e3 for x in cm["after_lib"]]) + " ms",
                          fmt_med([x * 1e3 for x in cm["warm"]]) + " ms",
                          ratio(med(cm["first"]), med(cm["warm"])),
                          ratio(med(cm["after_lib"]), med(cm["warm"]))])
    s = ["## 5. Inference", "",
         f"On `synth_1m` ({n:,} rows, 20 float8 features), one connection, "
         "`SET max_parallel_workers_per_gather = 0` (so every form runs on one core and the "
         "ratios measure per-row cost, not parallelism), after one warm-up run of each query; "
         "then every query once a round, and each goal's ratio is the median of its rounds' "
         "ratios (range in parentheses). A query that writes a table drops the last round's "
         "table just before, untimed (the `DROP TABLE` below), and a `CHECKPOINT` follows, "
         "untimed, so that it writes its WAL into recycled segments as on a server that has "
         "run a while, not into new ones zero-filled first (in this young cluster that was "
         "half of a `dml_predict_table` call's time, bench/SPEED-NOTES.md). "
         f"Linear model `bench_lin_w2` (exact); MLP `bench_mlp20` 20-64-64-1 (relu, "
         f"{M['mlp20_epochs']} adam epoch, regression on y). The SQL expression is the model "
         "written out from `spec->'coefficients'` and `spec->'intercept'` (coefficients on the "
         "raw features); max |dml_predict − expression| over 1,000 rows = "
         f"{fmt(chk, 3)}. \"per row beyond scan\" subtracts the scan-only query. The record form "
         "of a table's own row is planned as its columns (`dml.predict_cols(model, column names, "
         "t.id, t.c1, ...)`, by the record form's planner support function), so no composite "
         "datum is built per row; a row that is not a table's (here a subquery's, kept one by "
         "`OFFSET 0`) is passed as a record and taken apart by name in the function. "
         "`dml_predict_rows` is dml_predict_table's batch path returning its rows (id as text, "
         "value) into the query instead of a table, for a standby or a read-only transaction: "
         "a set-returning function, whose rows PostgreSQL keeps in a tuplestore (on disk past "
         "`work_mem`) before the query reads them.", "",
         table(["query", "time", "rows/s", "per row beyond scan"], rows), "",
         "Goals:", "",
         table(["goal", "measured", "met"], [[g, r, "yes" if ok else "**no**"] for g, r, ok in goals]),
         "",
         "First call in a new connection (cache cold: dml.so is loaded, the model is read from "
         "`dml.models` and parsed) vs the same one-row query repeated in that connection; and, "
         "in another new connection, a call that only loads the library (`SELECT dml.can_use(10, "
         "'x')`) followed by the first predict, which then pays only the model-cache miss. "
         f"{max(R, 3)} connections each:", "",
         table(["model", "first call (library + model)", "library load only",
                "first predict after library load (model cache cold)", "warm call",
                "first / warm", "model-cold / warm"], cold_rows), "",
         codeblock([f"{label}: {inf[label]['sql']}" for label, _ in queries] +
                   [f"cold {m}: new connection, then {cold[m]['sql']}; library only: "
                    f"{cold[m]['lib_sql']}" for m in cold] +
                   [f"mlp20 training: {mlp20[0]['sql']}",
                    f"SQL expression: {expr[:200]}..."]), ""]
    rep.h("\n".join(s))
    rep.h(comm_section)
    for g, r, ok in goals:
        rep.head(f"Inference goal \"{g}\": {r} — {'met' if ok else 'NOT met'}.")

    # ------------------------------------------------------------------
    # 8. sync modes (bench/sync_bench.py); the report keeps section order
    # ------------------------------------------------------------------
    log("sync modes")
    sync_md, sync_heads = sync_bench.section(conn, M, 1, globals())
    for x in sync_heads:
        rep.head(x)

    # ------------------------------------------------------------------
    # 7. GPU
    # ------------------------------------------------------------------
    # the CPU side of the GPU goal: MLP 784-1024-1024-10, global batch 1,024
    # (512 per worker, 2 workers), measured on this machine's CPU
    log("gpu-goal cpu baseline")
    big = dml_runs(conn, 1, "mlp-1024-cpu-w2", "bench_mlp1024", "fashion_train", "label",
                   features=["pixels"], model="mlp", hidden=[1024, 1024], optimizer="sgd",
                   learning_rate=0.01, batch_size=512, epochs=1, workers=2, device="cpu")
    big_sps = epoch_median(big[0], "rows_per_second")
    gpu_txt = [f"## 7. GPU", "",
               f"The CPU rate the GPU goal is measured against (\"at least 50x this project's 2-core "
               f"CPU rate\"): MLP 784-1024-1024-10 on `fashion_train`, plain SGD, batch 512 per "
               f"worker x 2 workers = 1,024, on this machine: **{fmt(big_sps)} samples/s**, so the "
               f"GPU goal is {fmt(50 * big_sps)} samples/s. `make gpu-check` on a GPU machine prints "
               "dml's and PyTorch's rate for the same step (batch 1,024, SGD) side by side.", "",
               codeblock([big[0]["sql"]]), ""]
    if info["gpu"] == "none":
        gpu_txt.append("GPU runs: not run here, no GPU on this machine (`nvidia-smi -L` found none). "
                       "The figures `make gpu-check` gave on a lent GPU (dml against PyTorch on the "
                       "same GPU, the device's sgemm, the load path, TF32) are in bench/GPU.md.")
    else:
        gpu_txt.append(f"`nvidia-smi -L`: {info['gpu']}. Run `make gpu-check` for the GPU "
                       "checks and the throughput table.")
    rep.h("\n".join(gpu_txt) + "\n")
    rep.head(f"GPU goal baseline: MLP 784-1024-1024-10, batch 1,024 on 2 CPU workers: "
             f"{fmt(big_sps)} samples/s (the goal is 50x this on a GPU).")

    rep.h(sync_md)

    log("export and import of the MLP goal model")
    travel_md, RAW["travel"], travel_ratio, travel_t = travel_bench(conn, "bench_mlp_goal", R)
    rep.h(travel_md)
    rep.head(f"Fashion-MNIST MLP out and in: dml_export {fmt(med(travel_t['dml_export(model) ONNX']) * 1000)} ms "
             f"(ONNX), dml_import {fmt(med(travel_t['dml_import(name, onnx)']) * 1000)} ms; inference "
             f"after the import {travel_ratio:.3f}x the native model's time.")

    # ------------------------------------------------------------------
    # 9. defaults on scikit-learn's datasets (bench/datasets.py)
    # ------------------------------------------------------------------
    log("dataset battery")
    ds_json = os.path.join(a.workdir, f"datasets-{a.mode}.json")
    ds_cmd = f"{PY} bench/datasets.py --json {ds_json}"
    out, _ = sh(ds_cmd, check=False)
    try:
        ds_rows = json.load(open(ds_json))
    except (OSError, ValueError):
        ds_rows = []
    RAW["datasets"] = ds_rows
    s = ["## 9. Defaults on scikit-learn's datasets", "",
         "Every dataset scikit-learn ships that fits a dml model kind, split 75/25 "
         "(`train_test_split(test_size=0.25, random_state=0)`, stratified for classes), loaded "
         "as tables and trained by `dml_train(name, relation, target => 'y')` with no other "
         "argument (the MLP rows add `model => 'mlp'`), against scikit-learn's defaults "
         "(`LogisticRegression()`, `LinearRegression()`, `MLPClassifier()`) fitted on the "
         "table exported to Python in the same run.  Scores are on the test table, computed in "
         "SQL for dml.  Times are the best of 5 runs each; scikit-learn's include the export "
         "(`SELECT` into numpy).  The checks (accuracy within 1 point, R2 within 0.02, time) "
         "run in the test suite (`regress/t/datasets.sh`).", ""]
    s.append(table(["dataset", "train rows", "features", "metric", "scikit-learn", "dml",
                    "scikit-learn fit + export (s)", "dml train (s)", "dml optimizer, iterations, stop"],
                   [[r["dataset"], r["train_rows"], r["features"], r["metric"],
                     f"{r['sklearn']:.4f}", f"{r['dml']:.4f}",
                     f"{r['sk_fit_s']:.4f} + {r['sk_export_s']:.4f}", f"{r['dml_s']:.4f}",
                     f"{r['dml_optimizer']}, {r['dml_epochs']}, {r['dml_stopped']}"] for r in ds_rows]))
    s += ["", "Command:", "", codeblock([ds_cmd]), ""]
    rep.h("\n".join(s))
    if ds_rows:
        passed = sum(r["score_ok"] and r["time_ok"] for r in ds_rows)
        rep.head(f"Defaults on scikit-learn's datasets: {passed} of {len(ds_rows)} within the "
                 "score margin and no slower than scikit-learn's fit plus export (section 9).")

    # ------------------------------------------------------------------
    # 10. logistic regression against liblinear and scikit-learn, each fed
    #     by an export of the table (bench/peers/linear_peers.py)
    # ------------------------------------------------------------------
    log("logistic regression peers (liblinear, scikit-learn lbfgs)")
    lr_runs = {}
    for w in (1, 2):
        lr_runs[w] = dml_runs(conn, R, f"logistic-default-w{w}", f"bench_logit_peer_w{w}", "synth_1m",
                              "label", features=FEATS, model="logistic", workers=w)
    lp_cmd = (f"{PY} bench/peers/linear_peers.py --table synth_1m --target label "
              f"--features {','.join(FEATS)} --C 10 --threads 1 --workdir {a.workdir} "
              f"--dml-model bench_logit_peer_w1 --dml-model bench_logit_peer_w2")
    out, _ = sh(lp_cmd, check=False, timeout=1800)
    lp = jsonl(out)
    RAW["linear_peers"] = lp
    lrows = [r for r in lp if r.get("peer")]
    dml_ll = {r["model"]: r["mean_logloss"] for r in lrows if r["peer"] == "dml"}
    best_ll = min([r["mean_logloss"] for r in lrows] or [float("nan")])
    same = lambda ll: ll <= best_ll * (1 + 1e-5)  # noqa: E731
    s = ["## 10. Logistic regression: dml against liblinear and scikit-learn", "",
         f"Binary logistic regression on `synth_1m` ({n_synth:,} rows x 20 float8 features), "
         "L2 penalty C = 10 in the sum form (dml's default weight_decay, 0.1 / rows, is the same "
         "problem). dml runs with its defaults (solver chosen by dml); the peers read an export of "
         "the table made in the same run, standardized in the export (their best setting, and the "
         "problem dml solves), and their times include it: liblinear's the COPY to its text format "
         "and its own read of the file (`liblinear-train -s 0`, trust-region Newton, one core); "
         "scikit-learn's the COPY to CSV, `pandas.read_csv` and `LogisticRegression(solver='lbfgs')`, "
         "pinned to one core. Every model's mean training log-loss is computed by one formula "
         "(float64, in linear_peers.py; dml's from `dml_predict_proba` over the table); a run reaches "
         "\"the same log-likelihood\" when it is within 1e-5 (relative) of the lowest (the penalties are the same problem up to how each counts rows and the bias, which moves the optimum by about 1e-6). Cores used = "
         "process CPU time / wall time, measured (below 1 when other work shared the machine); dml's "
         "is the CPU time of every process of the cluster during the dml_train call (the calling "
         "backend, the backends serving the workers' reads, mpirun and the workers: run.sh keeps the "
         "cluster in a cgroup of its own) over its wall time, so a worker's load overlapped with the "
         "server's reading shows as more than one core.", ""]
    rows = []
    # cores used in each run: the cluster's CPU seconds over the wall time, where measured
    cores_used = {w: [r["cpu"] / r["wall"] for r in lr_runs[w] if r.get("cpu") is not None and r["wall"] > 0]
                  for w in (1, 2)}
    for w in (1, 2):
        walls = [r["wall"] for r in lr_runs[w]]
        m0 = lr_runs[w][0]["metrics"]
        ll = dml_ll.get(f"bench_logit_peer_w{w}")
        cores = f"{med(cores_used[w]):.2f}" if cores_used[w] else f"{w} (not measured)"
        rows.append([f"dml, {w} worker{'s' if w > 1 else ''}", fmt_med(walls) + " s", "—",
                     f"{m0.get('optimizer')}, {m0.get('epochs')} iterations", cores,
                     "—" if ll is None else f"{ll:.9f}", "yes" if ll is not None and same(ll) else "no"])
    for r in lrows:
        if r["peer"] == "dml":
            continue
        what = (f"eps {r['eps']}" if r["peer"] == "liblinear"
                else f"tol {r['tol']}, {r.get('iterations')} iterations")
        rows.append([r["peer"], f"{r['total_s']:.3f} s", f"{r['export_s']:.3f} s", what,
                     str(r.get("cores")), f"{r['mean_logloss']:.9f}", "yes" if same(r["mean_logloss"]) else "no"])
    s.append(table(["who", "time (total)", "of which export and read", "setting", "cores used",
                    "mean log-loss", "same log-likelihood"], rows))
    s += ["", "Commands:", "", codeblock([lr_runs[1][0]["sql"], lp_cmd]), ""]
    rep.h("\n".join(s))
    d1 = med([r["wall"] for r in lr_runs[1]])
    reach = {}
    for r in lrows:
        if r["peer"] != "dml" and same(r["mean_logloss"]):
            reach[r["peer"]] = min(reach.get(r["peer"], float("inf")), r["total_s"])
    if dml_ll.get("bench_logit_peer_w1") is not None and same(dml_ll["bench_logit_peer_w1"]):
        parts = []
        for peer, goal in (("liblinear", 10), ("sklearn lbfgs", 3)):
            if peer in reach:
                parts.append(f"{peer} {ratio(reach[peer], d1)} (goal {goal}x: "
                             f"{'met' if reach[peer] / d1 >= goal else 'NOT met'})")
            else:
                parts.append(f"{peer} did not reach the same log-likelihood")
        used = f"{med(cores_used[1]):.2f} cores used" if cores_used[1] else "cores not measured"
        rep.head("Logistic regression on synth_1m to the same log-likelihood, peers on 1 core "
                 f"including their export: dml 1 worker ({used}, its load overlapping the server's "
                 "reading) faster than " + "; ".join(parts) + " (section 10).")
    else:
        rep.head("Logistic regression on synth_1m: dml's 1-worker model did not reach the lowest "
                 "log-likelihood of the peers (section 10).")

    # ------------------------------------------------------------------
    # write
    # ------------------------------------------------------------------
    conn.close()
    elapsed = time.perf_counter() - t_start
    info_end = open("/proc/loadavg").read().split()[:3]
    try:
        torch_v = torch_runs[("mlp", 1)]["runs"][0]["config"]["torch"]
        if torch_new:
            torch_v += " (Debian), " + torch_new[("mlp", 1)]["runs"][0]["config"]["torch"] + " (PyPI)"
    except (KeyError, IndexError):
        torch_v = "?"
    sk_v = next(iter(sk_runs[1]["runs"][0].values())).get("sklearn", "?")
    mpi_v = sh("mpirun --version 2>&1 | head -1", check=False)[0].strip()
    hdr = [f"# dml benchmarks ({a.mode} mode)", "",
           f"Generated by `bash bench/run.sh {a.mode}` (`make {'bench' if a.mode == 'full' else 'bench-quick'}`); "
           "do not edit by hand. Every figure is the median of "
           f"{R} run{'s' if R > 1 else ''} (range in parentheses where there are several), and "
           "the exact command or SQL behind it follows each table.", "",
           "| | |", "| --- | --- |",
           f"| date | {info['date']} |",
           f"| git commit | {info['commit']} |",
           f"| CPU | {info['cpu']}, {info['cores']} cores |",
           f"| vector extensions | {info['vector']} |",
           f"| memory | {fmt(info['mem_gib'])} GiB |",
           f"| GPU | {info['gpu']} |",
           f"| kernel | Linux {info['kernel']} |",
           f"| PostgreSQL | {pg_version} (private cluster from regress/pgcluster.sh: shared_buffers 512MB, fsync off) |",
           f"| Open MPI | {mpi_v} |",
           f"| BLAS | {blas_cfg.replace('sgemm: ', '')} |",
           f"| PyTorch / scikit-learn | {torch_v} / {sk_v} |",
           f"| load average at start / end | {' '.join(info['loadavg'])} / {' '.join(info_end)} |",
           f"| harness time | {elapsed:.0f} s (plus setup below) |", "",
           "The machine is shared: other work may run at the same time (see the load average), "
           "so absolute times are noisy; the side-by-side ratios are taken in the same run.", "",
           "Setup (timed once, not benchmarks):", "",
           codeblock([f"{k}: {v['cmd']}   # {v['seconds']:.1f} s" for k, v in setup.items()]), "",
           "## Headlines", ""] + [f"- {x}" for x in rep.headlines] + [""]
    body = "\n".join(hdr) + "\n" + "\n".join(rep.parts)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        f.write(body)
    with open(os.path.join(a.workdir, f"raw-{a.mode}.json"), "w") as f:
        json.dump(RAW, f, indent=1, default=str)
    log(f"wrote {a.out} in {elapsed:.0f} s")


if __name__ == "__main__":
    main()
