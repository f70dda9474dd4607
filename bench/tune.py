#!/usr/bin/python3
"""Model selection benchmark (issue 17): dml_tune against a loop of dml_train
calls, against scikit-learn's GridSearchCV, and halving against grid.

    /usr/bin/python3 bench/tune.py --mode quick|full --out REPORT.md [--json RAW.json]

Connects with the PG* environment to a database holding fashion_train
(bench/load_fashion.sh).  Every search is the same: an MLP, adam, batch 64,
5 epochs, 2 ranks, seed 1, 0.2 of the rows held out (dml's split), over
learning_rate x hidden.  One run of each: the machine is shared, so the
report gives the load average before and after each part.
"""

import argparse
import json
import os
import time

for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import sys  # noqa: E402

import numpy as np  # noqa: E402
import psycopg2  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
import export_path  # noqa: E402  (the peers' fastest export: binary COPY into numpy)

LRS = [0.0003, 0.001, 0.003, 0.01]
HIDDEN = [[32], [128]]
FIXED = dict(model="mlp", optimizer="adam", batch_size=64, epochs=5, workers=2, seed=1,
             validation=0.2)


def lit(v):
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, list):
        return "'{" + ",".join(str(x) for x in v) + "}'"
    return repr(v)


def load():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def q(conn, sql, args=None):
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall() if cur.description else None


def fixed_sql(**over):
    kw = dict(FIXED, **over)
    return ", ".join(f"{k} => {lit(v)}" for k, v in kw.items())


def run_tune(conn, name, strategy):
    search = json.dumps({"learning_rate": LRS, "hidden": HIDDEN})
    sql = (f"SELECT trial, arguments, metric_value, epochs_run, seconds, state, search_id "
           f"FROM dml_tune({lit(name)}, 'fashion_train', 'label', search => {lit(search)}, "
           f"strategy => {lit(strategy)}, {fixed_sql()})")
    la = load()
    t0 = time.perf_counter()
    rows = q(conn, sql)
    wall = time.perf_counter() - t0
    # the seconds its trials' epochs took (dml.trials), the rest is outside training
    epochs_s = q(conn, "SELECT sum((e->>'seconds')::float8) FROM dml.trials t, "
                       "jsonb_array_elements(t.epoch_metrics) e WHERE t.search_id = %s",
                 (rows[0][6],))[0][0]
    # the kept model: its place in the search's job and the job's one load
    facts = q(conn, "SELECT (metrics->>'trial_in_job')::int, (metrics->>'load_seconds')::float8 "
                    "FROM dml.models WHERE name = %s ORDER BY version DESC LIMIT 1", (name,))
    return dict(sql=sql, wall=wall, load_before=la, load_after=load(),
                epoch_seconds=epochs_s,
                trial_in_job=facts[0][0] if facts else None,
                load_seconds=facts[0][1] if facts else None,
                trials=[dict(trial=r[0], arguments=r[1], metric=r[2], epochs=r[3], seconds=r[4],
                             state=r[5]) for r in rows],
                best=rows[0][2], best_args=rows[0][1])


def run_loop(conn):
    la = load()
    t0 = time.perf_counter()
    runs = []
    for lr in LRS:
        for h in HIDDEN:
            sql = (f"SELECT model_id FROM dml_train('bench_tune_loop', 'fashion_train', 'label', "
                   f"learning_rate => {lr!r}, hidden => {lit(h)}, {fixed_sql()})")
            mid = q(conn, sql)[0][0]
            acc, ls, es = q(conn, "SELECT (metrics->>'accuracy')::float8, (metrics->>'load_seconds')::float8, "
                            "(SELECT sum(seconds) FROM dml.epochs WHERE model_id = m.id) "
                            "FROM dml.models m WHERE id = %s", (mid,))[0]
            runs.append(dict(learning_rate=lr, hidden=h, accuracy=acc, load_seconds=ls,
                             epoch_seconds=es))
    wall = time.perf_counter() - t0
    best = max(runs, key=lambda r: r["accuracy"])
    return dict(wall=wall, load_before=la, load_after=load(), runs=runs, best=best["accuracy"],
                load_seconds=sum(r["load_seconds"] for r in runs),
                epoch_seconds=sum(r["epoch_seconds"] for r in runs),
                best_args=dict(learning_rate=best["learning_rate"], hidden=best["hidden"]))


def run_groups(conn, reps=3):
    """The measurement behind one group of all ranks (DESIGN, "Model selection"):
    an epoch of each hidden size on 1 rank and on 2, the grid's other settings,
    alternating; medians of the per-epoch seconds over epochs 2-3 and the runs."""
    out = {}
    for rep in range(reps):
        for h in HIDDEN:
            for w in (1, 2):
                name = f"bench_tune_w{w}_h{h[0]}"
                q(conn, f"SELECT dml_drop_model({lit(name)}) FROM dml.models WHERE name = {lit(name)} LIMIT 1")
                q(conn, f"SELECT 1 FROM dml_train({lit(name)}, 'fashion_train', 'label', "
                        f"features => '{{pixels}}', hidden => {lit(h)}, learning_rate => 0.001, "
                        f"{fixed_sql(epochs=3, workers=w)})")
                secs = [r[0] for r in q(conn, "SELECT seconds FROM dml_epochs WHERE name = %s AND epoch > 1",
                                        (name,))]
                out.setdefault(f"{h[0]}:{w}", []).extend(secs)
    return {k: float(np.median(v)) for k, v in out.items()}


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def run_sklearn(conn):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import GridSearchCV
    from sklearn.neural_network import MLPClassifier
    import warnings

    la = load()
    t0 = time.perf_counter()
    # the peer's best export: binary COPY parsed by numpy (bench/peers/export_path.py
    # --method copy), not a fetch of Python lists (4-5x slower here)
    rel, cols, oids = export_path.resolve_columns(conn, "fashion_train", "pixels", "label")
    X, y = export_path.fetch_copy(conn, export_path.select_query(rel, cols, "label"), cols, oids,
                                  "label", export_path.feature_count(conn, rel, cols, oids))
    export = time.perf_counter() - t0
    n = len(y)
    idx = np.random.RandomState(1).permutation(n)
    nval = int(round(0.2 * n))
    split = [(idx[nval:], idx[:nval])]
    grid = GridSearchCV(
        MLPClassifier(solver="adam", batch_size=64, max_iter=5, random_state=1, alpha=0.0,
                      shuffle=True),
        {"learning_rate_init": LRS, "hidden_layer_sizes": [tuple(h) for h in HIDDEN]},
        cv=split, n_jobs=2, refit=False, scoring="accuracy")
    t1 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        grid.fit(X, y)
    fit = time.perf_counter() - t1
    return dict(export=export, fit=fit, wall=export + fit, load_before=la, load_after=load(),
                best=float(grid.best_score_), best_args={k: (list(v) if isinstance(v, tuple) else v)
                                                         for k, v in grid.best_params_.items()})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="quick")
    ap.add_argument("--out", required=True)
    ap.add_argument("--json", default=None)
    ap.add_argument("--skip-sklearn", action="store_true")
    ap.add_argument("--rounds", type=int, default=3,
                    help="loop and grid this many times, alternating which goes first")
    a = ap.parse_args()
    conn = psycopg2.connect("")
    conn.autocommit = True
    q(conn, "SET client_min_messages = warning")
    rows = q(conn, "SELECT count(*) FROM fashion_train")[0][0]
    res = dict(rows=rows, cores=os.cpu_count(), mode=a.mode)
    # the machine is shared: loop and grid side by side, several rounds, the order alternating
    res["rounds"] = []
    for r in range(a.rounds):
        rd = {}
        for part in (("loop", "grid") if r % 2 == 0 else ("grid", "loop")):
            print(f"tune.py: round {r + 1}: {part}", flush=True)
            if part == "loop":
                q(conn, "SELECT dml_drop_model('bench_tune_loop') FROM dml.models "
                        "WHERE name = 'bench_tune_loop' LIMIT 1")
                rd["loop"] = run_loop(conn)
            else:
                q(conn, "SELECT dml_drop_model('bench_tune_grid') FROM dml.models "
                        "WHERE name = 'bench_tune_grid' LIMIT 1")
                rd["grid"] = run_tune(conn, "bench_tune_grid", "grid")
        res["rounds"].append(rd)
    res["loop"] = sorted((rd["loop"] for rd in res["rounds"]), key=lambda x: x["wall"])[a.rounds // 2]
    res["grid"] = sorted((rd["grid"] for rd in res["rounds"]), key=lambda x: x["wall"])[a.rounds // 2]
    # halving is short, so one run of it moves most with the machine: as many runs as rounds
    hv_runs = []
    for r in range(a.rounds):
        print(f"tune.py: dml_tune halving, run {r + 1}", flush=True)
        q(conn, "SELECT dml_drop_model('bench_tune_halving') FROM dml.models "
                "WHERE name = 'bench_tune_halving' LIMIT 1")
        hv_runs.append(run_tune(conn, "bench_tune_halving", "halving"))
    res["halving_walls"] = [h["wall"] for h in hv_runs]
    res["halving"] = sorted(hv_runs, key=lambda x: x["wall"])[a.rounds // 2]
    print("tune.py: 1 rank against 2 ranks, the measurement behind one group", flush=True)
    res["groups"] = run_groups(conn)
    if not a.skip_sklearn:
        print("tune.py: scikit-learn GridSearchCV", flush=True)
        res["sklearn"] = run_sklearn(conn)
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1, default=str)

    g, lp, hv, sk = res["grid"], res["loop"], res["halving"], res.get("sklearn")
    md = ["# Model selection (issue 17)", "",
          f"Fashion-MNIST, fashion_train ({rows} rows), MLP, adam, batch 64, 5 epochs, 2 ranks, "
          f"0.2 held out; grid learning_rate {LRS} x hidden {HIDDEN} (8 configurations). "
          f"On a {os.cpu_count()}-core machine shared with other work: the load "
          "average (1, 5, 15 min) before and after each row is part of the figure. "
          f"The loop and the grid ran {a.rounds} times side by side, alternating which went "
          "first; the table gives the median run of each, the rounds follow. "
          "Command: `bash bench/tune.sh " + a.mode + "`. "
          f"CPU: {cpu_model()}; scikit-learn's OpenBLAS kernels: {os.environ.get('PEER_BLAS', 'not recorded')} "
          "(bench/peer_blas.sh: the core type dml-worker forces where OpenBLAS falls back to its SSE3 kernels).", "",
          "| run | wall s | best validation accuracy | best configuration | load before | load after |",
          "| --- | ---: | ---: | --- | --- | --- |",
          f"| loop of 8 dml_train | {lp['wall']:.1f} | {lp['best']:.4f} | {json.dumps(lp['best_args'])} "
          f"| {lp['load_before']} | {lp['load_after']} |",
          f"| dml_tune grid | {g['wall']:.1f} | {g['best']:.4f} | {json.dumps(g['best_args'])} "
          f"| {g['load_before']} | {g['load_after']} |",
          f"| dml_tune halving | {hv['wall']:.1f} | {hv['best']:.4f} | {json.dumps(hv['best_args'])} "
          f"| {hv['load_before']} | {hv['load_after']} |"]
    if sk:
        md.append(f"| scikit-learn GridSearchCV (n_jobs=2), export (binary COPY into numpy) {sk['export']:.1f} s + fit "
                  f"{sk['fit']:.1f} s | {sk['wall']:.1f} | {sk['best']:.4f} | "
                  f"{json.dumps(sk['best_args'])} | {sk['load_before']} | {sk['load_after']} |")
    md += ["", "Rounds (wall s, load average before each; outside training = wall less the "
           "seconds of every epoch, from dml.epochs and dml.trials: launches, loads, checks, stores):", ""]
    for i, rd in enumerate(res["rounds"]):
        lo, gr = rd["loop"], rd["grid"]
        md.append(f"- round {i + 1}: loop {lo['wall']:.1f} ({lo['load_before']}), "
                  f"grid {gr['wall']:.1f} ({gr['load_before']}): {lo['wall'] / gr['wall']:.2f}x; "
                  f"outside training: loop {lo['wall'] - lo['epoch_seconds']:.1f}, "
                  f"grid {gr['wall'] - gr['epoch_seconds']:.1f}")
    md += ["", "Ratios (wall time, medians):", "",
           f"- loop / dml_tune grid: {lp['wall'] / g['wall']:.2f}x (goal 1.5x)",
           f"- dml_tune grid / halving: {g['wall'] / hv['wall']:.2f}x (goal 2x; halving's runs: "
           + ", ".join(f"{w:.1f}" for w in res["halving_walls"]) + " s)"]
    if sk:
        md.append(f"- scikit-learn / dml_tune grid: {sk['wall'] / g['wall']:.2f}x (goal 5x)")
    md += ["", "Loading (each rank's read of its slice, rank 0's seconds, from the models' metrics):", "",
           f"- loop: 8 launches, 8 loads, {lp['load_seconds']:.2f} s of loading in all",
           f"- dml_tune grid: its trials ran in one job (the kept model was trial {g['trial_in_job']} "
           f"of it), one load of {g['load_seconds']:.2f} s",
           f"- dml_tune halving: one job (kept model: trial {hv['trial_in_job']} of it), one load of "
           f"{hv['load_seconds']:.2f} s"]
    gr = res["groups"]
    md += ["", "Groups or one group: dml_tune runs its trials one after another on all the job's "
           "ranks, each trial trained as dml_train trains it (so a trial equals its dml_train twin, "
           "which t/tune checks bit for bit). The other way, a group of 1 rank per trial with 2 trials "
           "in flight, would train as fast as 1 rank trains one model. Median seconds per epoch "
           "(epochs 2-3, 3 runs alternating; dml_train with the grid's settings, learning_rate 0.001):", "",
           "| hidden | 1 rank | 2 ranks | 2 ranks' speed-up | epochs per second: 2 groups of 1 / 1 group of 2 |",
           "| --- | ---: | ---: | ---: | ---: |"]
    for h in HIDDEN:
        one, two = gr[f"{h[0]}:1"], gr[f"{h[0]}:2"]
        md.append(f"| {h} | {one:.3f} | {two:.3f} | {one / two:.2f}x | {(2 / one) / (1 / two):.2f}x |")
    md += ["", "Halving's trials (state, epochs, validation accuracy):", ""]
    for t in hv["trials"]:
        md.append(f"- trial {t['trial']} {json.dumps(t['arguments'])}: {t['state']}, "
                  f"{t['epochs']} epochs, {t['metric']}")
    md.append("")
    open(a.out, "w").write("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
