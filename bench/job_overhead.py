#!/usr/bin/python3
"""job_overhead.py: a background job's overhead against the same dml_train
(issue 16: under 3% of training time on the Fashion-MNIST MLP).

    /usr/bin/python3 bench/job_overhead.py PAIRS EPOCHS [OPTIONS]

Runs, PAIRS times, the MLP goal's training of bench/harness.py (hidden
256,128, adam, batch 128, validation 0.1, 2 workers) once as dml_train and
once as dml_train_async + dml_wait, alternating which goes first, and prints
one line per run and the median of the pairs' ratios job/sync.  A job's
extra: the worker's start and login, its queue claim, the commits of its
state, the live epoch file, progress and step messages, checkpoints at the
default interval.  Against the private cluster bench/jobs.sh starts (PG*
environment).  Each pair also records the 1-minute load average before it.
OPTIONS (JSON) goes to both as dml_train's options, e.g. '{"checkpoint_every": 0}'
to see what the job's durable checkpoints cost.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def fmt(t):
    return "/".join("-" if v is None else f"{v:.2f}" for v in t)


def main(pairs, epochs, options=None):
    conn = harness.connect()
    kw = dict(features=["pixels"], model="mlp", hidden=[256, 128], optimizer="adam",
              learning_rate=0.001, batch_size=128, epochs=epochs, validation=0.1, workers=2)
    if options:
        kw["options"] = options
    ratios = []
    for p in range(pairs):
        load = os.getloadavg()[0]
        d, j = harness.job_pair(conn, p % 2 == 0, **kw)
        runs = {"sync": d["wall"], "job": j["wall"]}
        # where the time went: the workers' load and training, and the epochs' sum
        parts = {how: harness.q(conn, "SELECT (metrics->>'load_seconds')::float8, "
                                "(metrics->>'train_seconds')::float8, "
                                "(SELECT sum(seconds) FROM dml.epochs WHERE model_id = m.id) "
                                "FROM dml.models m WHERE id = %s", (mid,))[0]
                 for how, mid in (("sync", d["result"]["model_id"]), ("job", j["model_id"]))}
        ratios.append(runs["job"] / runs["sync"])
        print(f"pair {p + 1}: load {load:.2f} first {'sync' if p % 2 == 0 else 'job'}: dml_train {runs['sync']:.3f} s, "
              f"dml_train_async + dml_wait {runs['job']:.3f} s, ratio {ratios[-1]:.4f}; "
              f"workers' load/train/epochs s: sync {fmt(parts['sync'])}, job {fmt(parts['job'])}",
              flush=True)
    print(f"median ratio job/sync over {pairs} pairs: {statistics.median(ratios):.4f} "
          f"(min {min(ratios):.4f}, max {max(ratios):.4f})")
    print("sql: " + harness.train_sql("bench_job_sync", "fashion_train", "label", **kw))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5, int(sys.argv[2]) if len(sys.argv) > 2 else 5,
         sys.argv[3] if len(sys.argv) > 3 else None)
