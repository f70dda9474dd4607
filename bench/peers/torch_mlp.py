#!/usr/bin/python3
"""Reference peer: PyTorch MLP or softmax regression on Fashion-MNIST (CPU).

Run with Debian's interpreter (/usr/bin/python3), which has torch:

    /usr/bin/python3 bench/peers/torch_mlp.py --hidden 256,128 --optimizer sgd \
        --lr 0.1 --batch-size 64 --epochs 5 --threads 1
    /usr/bin/python3 bench/peers/torch_mlp.py --model logistic --epochs 5

Prints JSON lines: one "config", one "epoch" per epoch (training seconds and
samples/s, mean training loss, test loss and accuracy; evaluation is timed
apart and not counted in samples/s) and one "done".  Data comes from the IDX
files (--data-dir) or a .npy cache (--npy DIR, written on first use).

The model mirrors dml's: dense layers, the activation between them, softmax
cross-entropy on the last one; torch's default initialization.
"""

import argparse
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def pin_threads(argv):
    """Hold the process to --threads cores before torch starts its pools.

    torch.set_num_threads(1) alone does not make one core: Debian's torch
    runs its BLAS on every core (CPU time / wall 1.96 on a 2048-cube matmul
    at one thread).  So the cores themselves are limited (affinity, which
    every thread pool started later inherits) and the pools are sized to
    them; each epoch reports the cores it really used (CPU time / wall)."""
    n = 1
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            n = int(argv[i + 1])
        elif a.startswith("--threads="):
            n = int(a.split("=", 1)[1])
    n = max(n, 1)
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[v] = str(n)
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:n])


pin_threads(sys.argv)

import numpy as np  # noqa: E402
import torch  # noqa: E402


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

from fashion import emit, fail, load_fashion, standardize  # noqa: E402

ACTIVATIONS = {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh, "sigmoid": torch.nn.Sigmoid}


def parse_sizes(text, what):
    """A comma-separated list of positive ints ("" is the empty list)."""
    if text is None or text.strip() in ("", "{}"):
        return []
    try:
        sizes = [int(s) for s in text.strip("{}").split(",")]
    except ValueError:
        fail(f"invalid {what} \"{text}\": expected comma-separated integers")
    if any(s < 1 for s in sizes):
        fail(f"invalid {what} \"{text}\": sizes must be positive")
    return sizes


def add_training_args(p):
    """Options shared with export_path.py: the model and how to train it."""
    p.add_argument("--model", choices=["mlp", "logistic"], default="mlp",
                   help="logistic = softmax regression (no hidden layer)")
    p.add_argument("--hidden", default="256,128",
                   help="hidden layer sizes, e.g. 256,128 (mlp only)")
    p.add_argument("--layers", default=None,
                   help="all layer sizes incl. input and output, e.g. 784,256,10 "
                        "(overrides --hidden; must match the data)")
    p.add_argument("--act", choices=sorted(ACTIVATIONS), default="relu")
    p.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    p.add_argument("--lr", type=float, default=None,
                   help="learning rate (default 0.1 for sgd, 0.001 for adam)")
    p.add_argument("--momentum", type=float, default=0.0, help="sgd momentum")
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--batch-size", type=int, default=64,
                   help="minibatch size; 0 = full batch")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--threads", type=int, default=1,
                   help="torch.set_num_threads (default 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--matmul-precision", choices=["none", "bf16", "tf32"], default="none",
                   help="torch.backends.mkldnn.matmul.fp32_precision where this torch has it: "
                        "bf16 lets oneDNN run float32 products in bfloat16 (AMX where the CPU "
                        "has it; bfloat16's accuracy, not float32's)")
    p.add_argument("--standardize", action="store_true",
                   help="scale features by the training mean/std")


def build_model(cfg, n_in, n_out):
    """The torch module and its layer sizes for this config."""
    if cfg.layers:
        sizes = parse_sizes(cfg.layers, "--layers")
        if len(sizes) < 2 or sizes[0] != n_in or sizes[-1] != n_out:
            fail(f"--layers {cfg.layers} does not fit the data ({n_in} inputs, {n_out} classes)")
    elif cfg.model == "logistic":
        sizes = [n_in, n_out]
    else:
        sizes = [n_in] + parse_sizes(cfg.hidden, "--hidden") + [n_out]
    mods = []
    for i in range(len(sizes) - 1):
        mods.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            mods.append(ACTIVATIONS[cfg.act]())
    return torch.nn.Sequential(*mods), sizes


@torch.no_grad()
def evaluate(model, x, y, batch=8192):
    """Mean cross-entropy and accuracy of model on (x, y)."""
    model.eval()
    loss_sum = 0.0
    correct = 0
    for i in range(0, x.shape[0], batch):
        out = model(x[i:i + batch])
        loss_sum += torch.nn.functional.cross_entropy(out, y[i:i + batch], reduction="sum").item()
        correct += (out.argmax(1) == y[i:i + batch]).sum().item()
    model.train()
    return loss_sum / x.shape[0], correct / x.shape[0]


def train_torch(cfg, xtr, ytr, xte, yte, peer, extra=None, xval=None, yval=None):
    # --until-test-acc is main()'s option; export_path.py's configs lack it
    until = getattr(cfg, "until_test_acc", None)
    """Train on numpy arrays per cfg, emitting JSON lines; return the final record.

    With xval/yval (a hold-out of the training rows) each epoch also reports
    val_loss and val_acc on them, the way dml's validation => does."""
    torch.set_num_threads(cfg.threads)
    if getattr(cfg, "matmul_precision", "none") != "none":
        mm = getattr(getattr(torch.backends, "mkldnn", None), "matmul", None)
        if mm is None or not hasattr(mm, "fp32_precision"):
            fail(f"--matmul-precision {cfg.matmul_precision}: this torch ({torch.__version__}) has no "
                 "torch.backends.mkldnn.matmul.fp32_precision")
        mm.fp32_precision = cfg.matmul_precision
    torch.manual_seed(cfg.seed)
    if cfg.standardize:
        if xval is not None:
            xtr_raw = xtr
            xtr, xte = standardize(xtr_raw, xte)
            _, xval = standardize(xtr_raw, xval)
        else:
            xtr, xte = standardize(xtr, xte)
    n_out = int(max(ytr.max(), yte.max() if len(yte) else 0)) + 1
    xtr_t = torch.from_numpy(np.ascontiguousarray(xtr, dtype=np.float32))
    ytr_t = torch.from_numpy(np.ascontiguousarray(ytr, dtype=np.int64))
    xte_t = torch.from_numpy(np.ascontiguousarray(xte, dtype=np.float32))
    yte_t = torch.from_numpy(np.ascontiguousarray(yte, dtype=np.int64))
    if xval is not None:
        xval_t = torch.from_numpy(np.ascontiguousarray(xval, dtype=np.float32))
        yval_t = torch.from_numpy(np.ascontiguousarray(yval, dtype=np.int64))
    n = xtr_t.shape[0]
    model, sizes = build_model(cfg, xtr_t.shape[1], n_out)
    lr = cfg.lr if cfg.lr is not None else (0.1 if cfg.optimizer == "sgd" else 0.001)
    if cfg.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=cfg.momentum,
                              weight_decay=cfg.weight_decay)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=cfg.weight_decay)
    bs = n if cfg.batch_size <= 0 else min(cfg.batch_size, n)
    gen = torch.Generator().manual_seed(cfg.seed)

    emit({"peer": peer, "event": "config", "layers": sizes, "act": cfg.act,
          "optimizer": cfg.optimizer, "lr": lr, "momentum": cfg.momentum,
          "batch_size": bs, "epochs": cfg.epochs, "threads": torch.get_num_threads(),
          "train_rows": n, "test_rows": int(xte_t.shape[0]),
          "standardize": cfg.standardize, "torch": torch.__version__, **(extra or {})})

    total_train = 0.0
    total_cpu = 0.0
    rec = {}
    reached = None
    epochs_run = 0
    for epoch in range(1, cfg.epochs + 1):
        c0 = cpu_seconds()
        t0 = time.perf_counter()
        perm = torch.randperm(n, generator=gen) if bs < n else torch.arange(n)
        loss_sum = 0.0
        for i in range(0, n, bs):
            idx = perm[i:i + bs]
            xb = xtr_t[idx] if bs < n else xtr_t
            yb = ytr_t[idx] if bs < n else ytr_t
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            loss_sum += loss.item() * yb.shape[0]
        secs = time.perf_counter() - t0
        cpu = cpu_seconds() - c0
        total_train += secs
        total_cpu += cpu
        t1 = time.perf_counter()
        test_loss, test_acc = evaluate(model, xte_t, yte_t) if len(yte) else (None, None)
        rec = {"peer": peer, "event": "epoch", "epoch": epoch, "seconds": round(secs, 4),
               "samples_per_s": round(n / secs, 1), "cores": round(cpu / secs, 2),
               "loss": round(loss_sum / n, 6),
               "test_loss": None if test_loss is None else round(test_loss, 6),
               "test_acc": test_acc}
        if xval is not None:
            val_loss, val_acc = evaluate(model, xval_t, yval_t)
            rec["val_loss"] = round(val_loss, 6)
            rec["val_acc"] = val_acc
        rec["eval_s"] = round(time.perf_counter() - t1, 4)
        emit(rec)
        epochs_run = epoch
        if until is not None and test_acc is not None and test_acc >= until:
            reached = epoch
            break
    done = {"peer": peer, "event": "done", "train_s": round(total_train, 4),
            "samples_per_s": round(n * epochs_run / total_train, 1) if total_train else None,
            "cores": round(total_cpu / total_train, 2) if total_train else None,
            "loss": rec.get("loss"), "test_acc": rec.get("test_acc"), "epochs": epochs_run}
    if until is not None:
        done["until_test_acc"] = until
        done["reached_epoch"] = reached
    emit(done)
    return done


def main():
    """Parse the command line, load Fashion-MNIST, train."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_training_args(p)
    p.add_argument("--data-dir", default=None, help="IDX files (default $FASHION_DIR or "
                   "/usr/share/datasets/fashion-mnist)")
    p.add_argument("--npy", default=None, metavar="DIR", help=".npy cache directory")
    p.add_argument("--limit", type=int, default=None, help="use the first N training rows")
    p.add_argument("--until-test-acc", type=float, default=None, metavar="ACC",
                   help="stop after the first epoch whose test accuracy reaches ACC "
                        "(at most --epochs); \"done\" says whether and when it did")
    p.add_argument("--holdout", type=float, default=0.0,
                   help="hold out this fraction of the training rows (a seeded random "
                        "choice) and report val_acc on them each epoch, as dml's "
                        "validation => does")
    cfg = p.parse_args()
    if cfg.threads < 1 or cfg.epochs < 1:
        fail("--threads and --epochs must be at least 1")
    try:
        xtr, ytr, xte, yte, info = load_fashion(cfg.data_dir, cfg.npy)
    except (OSError, ValueError) as e:
        fail(str(e))
    if cfg.limit:
        xtr, ytr = xtr[:cfg.limit], ytr[:cfg.limit]
    peer = "torch_logistic" if cfg.model == "logistic" and not cfg.layers else "torch_mlp"
    xval = yval = None
    if cfg.holdout > 0:
        if not cfg.holdout < 1:
            fail("--holdout must be below 1")
        perm = np.random.default_rng(cfg.seed).permutation(len(ytr))
        nval = int(round(len(ytr) * cfg.holdout))
        xval, yval = xtr[perm[:nval]], ytr[perm[:nval]]
        xtr, ytr = xtr[perm[nval:]], ytr[perm[nval:]]
    train_torch(cfg, xtr, ytr, xte, yte, peer,
                {"data": info["source"], "data_load_s": round(info["load_s"], 4),
                 "holdout_rows": 0 if yval is None else int(len(yval))}, xval, yval)


if __name__ == "__main__":
    main()
