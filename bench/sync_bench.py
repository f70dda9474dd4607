"""sync_bench.py: section 8 of the benchmark report, the sync modes.

Called by harness.py (bench/run.sh) with the harness's own helpers.  For
each sync mode, Fashion-MNIST softmax (adam, batch 128 per worker, 10% of
the rows held out for validation) with 2 and 4 workers: evenly fast, with
one slow worker (the straggler test hook: worker 1 sleeps a fixed time every
step), and with random stragglers (every worker sleeps in a quarter of its
steps): time to a target validation accuracy (summed epoch seconds, start-up
and load excluded), the accuracy reached, and the bytes sent per epoch.
"""


def configs():
    """(label, dml_train keyword arguments) of every mode benchmarked"""
    return [
        ("allreduce", dict(sync="allreduce")),
        ("allreduce + fp16", dict(sync="allreduce", compression="fp16")),
        ("allreduce + topk 0.01", dict(sync="allreduce", compression="topk", topk_ratio=0.01)),
        ("ps, 1 server", dict(sync="ps", servers=1)),
        ("ssp s=4, 1 server", dict(sync="ssp", servers=1, staleness=4)),
        ("async, 1 server", dict(sync="async", servers=1)),
        ("gossip", dict(sync="gossip")),
        ("average every 8", dict(sync="average", average_every=8)),
    ]


def section(conn, M, R, h):
    """Run the sync-mode benchmarks; returns (markdown, headlines)."""
    epochs = M["sync_epochs"]
    target = M["sync_target"]
    delay = M["sync_delay_ms"]
    workers = M["sync_workers"]
    runs = {}
    h["q"](conn, "SET dml.test_hooks = on")  # the straggler option is a test hook
    # even: no delay; slow: worker 1 slowed every step; random: every worker
    # slowed in a quarter of its steps, independently (transient stragglers)
    settings = {"even": None, "slow": f"1:{delay}", "random": f"*:{delay}:0.25"}
    for w in workers:
        for slow, hook in settings.items():
            for label, kw in configs():
                args = dict(features=["pixels"], model="softmax", optimizer="adam",
                            learning_rate=0.001, batch_size=128, epochs=epochs,
                            validation=0.1, workers=w, **kw)
                if hook:
                    args["options"] = {"straggler": hook}
                key = f"sync-{label}-w{w}-{slow}"
                runs[(label, w, slow)] = h["dml_runs"](conn, R, key, "bench_sync",
                                                       "fashion_train", "label", **args)
    fmt, med, table, codeblock = h["fmt"], h["med"], h["table"], h["codeblock"]

    def summary(rs):
        ttt = [h["time_to_target"](r["epochs"], "val_metric", "seconds", target)[1] for r in rs]
        reached = [t for t in ttt if t is not None]
        acc = [max((e["val_metric"] or 0) for e in r["epochs"]) for r in rs]
        bpe = [med([e["bytes_sent"] for e in r["epochs"]]) for r in rs]
        ep_s = [med([e["seconds"] for e in r["epochs"]]) for r in rs]
        return dict(ttt=med(reached) if len(reached) == len(rs) else None, acc=med(acc),
                    bpe=med(bpe), epoch_s=med(ep_s))

    S = {k: summary(v) for k, v in runs.items()}
    rows = []
    for w in workers:
        for label, _ in configs():
            row = [label, str(w)]
            for slow in settings:
                s = S[(label, w, slow)]
                b = S[("allreduce", w, slow)]
                speed = (fmt(b["ttt"] / s["ttt"], 2) + "x") if s["ttt"] and b["ttt"] else "—"
                row += [fmt(s["ttt"]) + " s" if s["ttt"] else f"not reached ({fmt(s['acc'], 4)})",
                        speed]
            s = S[(label, w, "even")]
            row += [fmt(s["epoch_s"]) + " s", f"{s['bpe']:,.0f}" if s["bpe"] is not None else "n/a",
                    fmt(s["acc"], 4)]
            rows.append(row)
    heads = ["mode", "workers", f"time to {target} (even)", "vs allreduce",
             f"(worker 1 +{delay} ms every step)", "vs allreduce",
             f"(each worker +{delay} ms in 1/4 of steps)", "vs allreduce",
             "epoch (even)", "bytes / epoch", "best val. accuracy (even)"]
    wins = {}
    for slow in ("slow", "random"):
        wins[slow] = []
        for w in workers:
            b = S[("allreduce", w, slow)]["ttt"]
            for label, _ in configs():
                s = S[(label, w, slow)]["ttt"]
                if label != "allreduce" and s and b and s < 0.95 * b:  # beyond noise
                    wins[slow].append(f"{label} with {w} workers ({fmt(b / s, 2)}x)")
    sql = [runs[(label, 2, "slow")][0]["sql"] for label, _ in configs()]
    md = ["## 8. Sync modes", "",
          f"Fashion-MNIST softmax (`fashion_train`, adam, lr 0.001, batch 128 per worker, "
          f"validation 0.1, {epochs} epochs), every sync mode, with {' and '.join(map(str, workers))} "
          "workers (4 workers and the servers oversubscribe this machine's 2 cores): evenly fast; "
          f"with worker 1 slowed by {delay} ms every step (`options => '{{\"straggler\": "
          f"\"1:{delay}\"}}'`, a test hook); and with every worker slowed by {delay} ms in a random "
          f"quarter of its steps (`\"*:{delay}:0.25\"`). "
          f"\"time to {target}\" sums the epoch seconds up to the first epoch whose validation "
          "accuracy reaches it (job start-up and load excluded, the same for every mode); "
          "\"vs allreduce\" is allreduce's time over the mode's, in the same setting. Bytes per "
          "epoch are `dml.epochs.bytes_sent` (collectives counted as a ring moves them; "
          "point-to-point messages as sent).", "",
          table(heads, rows), "",
          "Faster than allreduce (by more than 5%) to the target with one slow worker: " +
          (", ".join(wins["slow"]) or "none") + ".", "",
          "Faster than allreduce (by more than 5%) to the target with random stragglers: " +
          (", ".join(wins["random"]) or "none") + ".", "",
          "Commands (2 workers, one slow worker; the others differ in `workers` and `options`: "
          f"none, or `{{\"straggler\": \"*:{delay}:0.25\"}}`):", "",
          codeblock(sql), ""]
    heads_out = ["Sync modes faster than allreduce to validation accuracy %s, one worker +%d ms "
                 "every step: %s." % (target, delay, ", ".join(wins["slow"]) or "none"),
                 "Sync modes faster than allreduce to validation accuracy %s, each worker +%d ms "
                 "in a quarter of its steps: %s." % (target, delay, ", ".join(wins["random"]) or "none")]
    return "\n".join(md), heads_out
