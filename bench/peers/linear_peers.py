#!/usr/bin/python3
"""Reference peers for binary logistic regression on a table: liblinear and
scikit-learn, each fed by an export of the table (timed with it).

    /usr/bin/python3 bench/peers/linear_peers.py --table synth_1m --target label \
        --features c1,...,c20 --C 10 --workdir bench/out

Connects with the usual PG* environment.  Steps, each timed:

  statistics   the features' means and standard deviations (one SELECT): the
               peers get standardized columns, as dml standardizes its own,
               so both solve the same problem (their best setting: on the raw
               columns, whose means and scales differ by 10x, they converge
               far slower)
  svm export   COPY of the standardized rows in liblinear's text format,
               written by the server's COPY (no Python loop)
  liblinear    liblinear-train -s 0 (L2-regularized logistic regression,
               trust-region Newton, primal) -B 1, for each tolerance in
               --eps; its time includes reading the file
  csv export   COPY of the same standardized rows as CSV
  read         pandas.read_csv (C parser) into a float64 matrix
  sklearn      LogisticRegression(C, solver="lbfgs", tol, max_iter=10000) for
               each tolerance in --sk-tol

Every solution's mean training log-loss is computed here in float64 on the
exported rows, so the peers and dml (its weights are passed back in by the
harness with --dml-weights) are judged by one formula.  The objective: C
times the sum of the log-losses plus half the squared weights (liblinear
also penalizes the bias: -B 1 appends a constant feature).

Each peer runs pinned to --threads cores (sched_setaffinity, and BLAS/OpenMP
threads set before numpy is imported); its CPU time over wall time is
reported as the cores it really used.  Prints one JSON line per result.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--table", required=True)
    p.add_argument("--target", required=True)
    p.add_argument("--features", required=True, help="comma-separated columns")
    p.add_argument("--C", type=float, default=10.0, help="inverse regularization (sum form)")
    p.add_argument("--eps", default="0.01,0.001,0.0001", help="liblinear tolerances to try")
    p.add_argument("--sk-tol", default="1e-4,1e-6,1e-8", help="scikit-learn tolerances to try")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--workdir", default="bench/out")
    p.add_argument("--skip", default="", help="comma-separated: liblinear,sklearn")
    p.add_argument("--dml-model", action="append", default=[],
                   help="a dml model to score by the same formula (repeatable)")
    return p.parse_args()


ARGS = parse_args()
for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[v] = str(ARGS.threads)
CPUS = sorted(os.sched_getaffinity(0))[:ARGS.threads]
os.sched_setaffinity(0, CPUS)

import numpy as np  # noqa: E402
import psycopg2  # noqa: E402


def emit(rec):
    print(json.dumps(rec), flush=True)


def cpu_self():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def ident(name):
    return '"' + name.replace('"', '""') + '"'


def mean_logloss(X, y, w, b):
    """Mean of log(1 + e^z) - y z over the rows, z = X w + b, in float64."""
    z = X @ w + b
    return float(np.mean(np.logaddexp(0.0, z) - y * z))


def main():
    feats = [f for f in ARGS.features.split(",") if f]
    os.makedirs(ARGS.workdir, exist_ok=True)
    conn = psycopg2.connect("")
    conn.autocommit = True
    cur = conn.cursor()

    t0 = time.perf_counter()
    cur.execute("SELECT " + ", ".join(f"avg({ident(f)}::float8), stddev_pop({ident(f)}::float8)"
                                      for f in feats) + f" FROM {ident(ARGS.table)}")
    st = cur.fetchone()
    stats_s = time.perf_counter() - t0
    mean = [st[2 * i] for i in range(len(feats))]
    sd = [st[2 * i + 1] or 1.0 for i in range(len(feats))]
    zcols = [f"(({ident(f)}::float8 - {mean[i]!r}) / {sd[i]!r})" for i, f in enumerate(feats)]
    emit({"step": "statistics", "seconds": round(stats_s, 4), "rows": None})

    skip = set(ARGS.skip.split(","))
    svm = os.path.join(ARGS.workdir, f"{ARGS.table}.svm")
    csv = os.path.join(ARGS.workdir, f"{ARGS.table}.csv")

    # the CSV first: the log-loss of every solution is computed on it
    sel = f"SELECT {ident(ARGS.target)}::int, " + ", ".join(zcols) + f" FROM {ident(ARGS.table)}"
    t0 = time.perf_counter()
    with open(csv, "w") as f:
        cur.copy_expert(f"COPY ({sel}) TO STDOUT (FORMAT csv)", f)
    csv_s = time.perf_counter() - t0
    emit({"step": "csv export", "seconds": round(csv_s, 4), "bytes": os.path.getsize(csv)})

    import pandas as pd
    c0, t0 = cpu_self(), time.perf_counter()
    df = pd.read_csv(csv, header=None, dtype=np.float64, engine="c")
    M = df.to_numpy()
    y = M[:, 0].copy()
    X = np.ascontiguousarray(M[:, 1:])
    read_s, read_cpu = time.perf_counter() - t0, cpu_self() - c0
    del df, M
    emit({"step": "read", "seconds": round(read_s, 4), "rows": int(X.shape[0])})

    if "liblinear" not in skip:
        parts = ", ".join(f"'{i + 1}:' || {z}" for i, z in enumerate(zcols))
        sel_svm = (f"SELECT concat_ws(' ', CASE WHEN {ident(ARGS.target)}::int = 1 THEN '+1' "
                   f"ELSE '-1' END, {parts}) FROM {ident(ARGS.table)}")
        t0 = time.perf_counter()
        with open(svm, "w") as f:
            cur.copy_expert(f"COPY ({sel_svm}) TO STDOUT", f)
        svm_s = time.perf_counter() - t0
        emit({"step": "svm export", "seconds": round(svm_s, 4), "bytes": os.path.getsize(svm)})
        for eps in [float(e) for e in ARGS.eps.split(",") if e]:
            model = os.path.join(ARGS.workdir, f"{ARGS.table}.liblinear")
            cmd = ["liblinear-train", "-q", "-s", "0", "-c", repr(ARGS.C), "-e", repr(eps),
                   "-B", "1", svm, model]
            c0, t0 = cpu_children(), time.perf_counter()
            subprocess.run(cmd, check=True)
            wall, cpu = time.perf_counter() - t0, cpu_children() - c0
            w, labels = read_liblinear(model, len(feats))
            # liblinear's first label is the positive class of its decision value
            sign = 1.0 if labels[0] == 1 else -1.0
            ll = mean_logloss(X, y, sign * w[:-1], sign * w[-1])
            emit({"peer": "liblinear", "eps": eps, "seconds": round(wall, 4),
                  "export_s": round(svm_s + stats_s, 4), "total_s": round(wall + svm_s + stats_s, 4),
                  "cores": round(cpu / wall, 2) if wall > 0 else None, "mean_logloss": ll,
                  "cmd": " ".join(cmd)})

    if "sklearn" not in skip:
        from sklearn.linear_model import LogisticRegression
        import sklearn
        for tol in [float(t) for t in ARGS.sk_tol.split(",") if t]:
            clf = LogisticRegression(C=ARGS.C, solver="lbfgs", tol=tol, max_iter=10000)
            c0, t0 = cpu_self(), time.perf_counter()
            clf.fit(X, y)
            wall, cpu = time.perf_counter() - t0, cpu_self() - c0
            ll = mean_logloss(X, y, clf.coef_[0], clf.intercept_[0])
            emit({"peer": "sklearn lbfgs", "tol": tol, "seconds": round(wall, 4),
                  "iterations": int(clf.n_iter_[0]),
                  "export_s": round(csv_s + read_s + stats_s, 4),
                  "total_s": round(wall + csv_s + read_s + stats_s, 4),
                  "cores": round((cpu + read_cpu) / (wall + read_s), 2), "mean_logloss": ll,
                  "sklearn": sklearn.__version__,
                  "cmd": f"LogisticRegression(C={ARGS.C}, solver='lbfgs', tol={tol}, max_iter=10000)"})

    # dml's models, judged by the same formula: its probabilities over the
    # same rows, in the server (not timed)
    for name in ARGS.dml_model:
        arr = "ARRAY[" + ", ".join(ident(f) + "::float8" for f in feats) + "]"
        cur.execute(f"SELECT avg(CASE WHEN {ident(ARGS.target)}::int = 1 THEN -ln(greatest(p[2], 1e-300)) "
                    f"ELSE -ln(greatest(p[1], 1e-300)) END) FROM (SELECT {ident(ARGS.target)}, "
                    f"dml_predict_proba(%s, {arr}) p FROM {ident(ARGS.table)}) s", (name,))
        emit({"peer": "dml", "model": name, "mean_logloss": float(cur.fetchone()[0])})
    for path in (svm, csv):
        if os.path.exists(path):
            os.remove(path)
    emit({"step": "done", "cpus": CPUS})


def read_liblinear(path, nfeat):
    """Weights (nfeat + 1 with the bias feature) and the label order of a model file."""
    with open(path) as f:
        lines = f.read().split("\n")
    labels = []
    w = []
    in_w = False
    for ln in lines:
        if ln.startswith("label "):
            labels = [int(x) for x in ln.split()[1:]]
        elif ln.strip() == "w":
            in_w = True
        elif in_w and ln.strip():
            w.append(float(ln.split()[0]))
    if len(w) != nfeat + 1:
        sys.exit(f"liblinear model has {len(w)} weights, expected {nfeat + 1}")
    return np.array(w), labels


if __name__ == "__main__":
    main()
