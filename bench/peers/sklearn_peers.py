#!/usr/bin/python3
"""Reference peers: scikit-learn classifiers on Fashion-MNIST (CPU).

    /usr/bin/python3 bench/peers/sklearn_peers.py --models sgd,logreg,mlp \
        --epochs 5 --threads 1

Models:
  sgd     SGDClassifier(loss="log_loss"): one-vs-rest logistic regression by SGD,
          --epochs passes (max_iter, tol=None so it runs them all)
  logreg  LogisticRegression (lbfgs, multinomial), --max-iter iterations
  mlp     MLPClassifier(--hidden, relu, --optimizer sgd|adam, --batch-size, --lr),
          --epochs passes

Prints JSON lines: one per model with fit seconds, samples/s (rows x passes /
fit seconds, where the passes are known), training and test accuracy.  BLAS
threads are limited to --threads before numpy is imported.
"""

import argparse
import os
import sys


def parse_args():
    """The command line (parsed before numpy is imported, to set BLAS threads)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="sgd,logreg,mlp")
    p.add_argument("--epochs", type=int, default=5, help="passes for sgd and mlp")
    p.add_argument("--max-iter", type=int, default=100, help="lbfgs iterations for logreg")
    p.add_argument("--hidden", default="256,128", help="mlp hidden layer sizes")
    p.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd", help="mlp solver")
    p.add_argument("--lr", type=float, default=None,
                   help="mlp learning rate (default 0.1 for sgd, 0.001 for adam)")
    p.add_argument("--batch-size", type=int, default=64, help="mlp minibatch")
    p.add_argument("--alpha", type=float, default=1e-4, help="L2 penalty (sgd, mlp)")
    p.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP threads")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--standardize", action="store_true")
    p.add_argument("--limit", type=int, default=None, help="use the first N training rows")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--npy", default=None, metavar="DIR", help=".npy cache directory")
    return p.parse_args()


ARGS = parse_args()
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(ARGS.threads)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import sklearn  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.linear_model import LogisticRegression, SGDClassifier  # noqa: E402
from sklearn.neural_network import MLPClassifier  # noqa: E402

from fashion import emit, fail, load_fashion, standardize  # noqa: E402


def make_model(name, a):
    """The estimator and the number of passes over the data it will make (or None)."""
    if name == "sgd":
        return SGDClassifier(loss="log_loss", alpha=a.alpha, max_iter=a.epochs, tol=None,
                             random_state=a.seed), a.epochs
    if name == "logreg":
        return LogisticRegression(max_iter=a.max_iter, random_state=a.seed), None
    if name == "mlp":
        hidden = tuple(int(s) for s in a.hidden.split(",") if s)
        lr = a.lr if a.lr is not None else (0.1 if a.optimizer == "sgd" else 0.001)
        return MLPClassifier(hidden_layer_sizes=hidden, activation="relu", solver=a.optimizer,
                             learning_rate_init=lr, batch_size=a.batch_size, alpha=a.alpha,
                             momentum=0.0, max_iter=a.epochs, tol=0.0,
                             n_iter_no_change=a.epochs + 1, shuffle=True,
                             random_state=a.seed), a.epochs
    fail(f"unknown model \"{name}\" (expected sgd, logreg, mlp)")
    return None, None


def main():
    """Load the data and fit each model in turn."""
    a = ARGS
    try:
        xtr, ytr, xte, yte, info = load_fashion(a.data_dir, a.npy)
    except (OSError, ValueError) as e:
        fail(str(e))
    if a.limit:
        xtr, ytr = xtr[:a.limit], ytr[:a.limit]
    if a.standardize:
        xtr, xte = standardize(xtr, xte)
    for name in [m.strip() for m in a.models.split(",") if m.strip()]:
        model, passes = make_model(name, a)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            t0 = time.perf_counter()
            model.fit(xtr, ytr)
            fit_s = time.perf_counter() - t0
        n_iter = getattr(model, "n_iter_", None)
        if isinstance(n_iter, np.ndarray):
            n_iter = int(n_iter.max())
        t1 = time.perf_counter()
        test_acc = float((model.predict(xte) == yte).mean())
        predict_s = time.perf_counter() - t1
        train_acc = float((model.predict(xtr) == ytr).mean())
        rec = {"peer": f"sklearn_{name}", "event": "done", "estimator": type(model).__name__,
               "fit_s": round(fit_s, 4), "n_iter": n_iter,
               "samples_per_s": round(len(ytr) * passes / fit_s, 1) if passes else None,
               "train_acc": train_acc, "test_acc": test_acc,
               "predict_test_s": round(predict_s, 4), "train_rows": int(len(ytr)),
               "threads": a.threads, "converged": not any(
                   issubclass(w.category, ConvergenceWarning) for w in caught),
               "data": info["source"], "sklearn": sklearn.__version__}
        if hasattr(model, "loss_"):
            rec["loss"] = round(float(model.loss_), 6)
        emit(rec)


if __name__ == "__main__":
    main()
