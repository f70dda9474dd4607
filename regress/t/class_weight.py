#!/usr/bin/python3
"""class_weight.py: dml_train's class_weight against scikit-learn (issue 15).

Run by regress/t/class_weight.sh against the cluster regress/run.sh started.
Prints TAP lines.

1. An imbalanced real table (scikit-learn's breast cancer, two of its
   weakest features, every fourth malignant row kept: 407 rows, 50
   malignant): class_weight => 'balanced' raises the balanced accuracy on
   held-out rows, as it does for scikit-learn.
2. The weighted objective is scikit-learn's: with the same penalty
   (C = 1 / (n weight_decay) on the standardized inputs) the coefficients
   of LogisticRegression(class_weight='balanced'), of a map of label to
   weight, and of a three-class softmax (wine, one class thinned) match to
   5e-4 of the largest coefficient (float32 L-BFGS; seen: 2e-7 to 2.6e-4),
   in the server's fit and with 2 workers.  The coefficients are read
   back from dml_predict_proba (log-odds are affine in the inputs).
3. Mistakes are refused: a regression target, Newton, an unknown label, a
   malformed map; an ordinary role trains with it.
"""
import subprocess
import sys

import numpy as np
from sklearn.datasets import load_breast_cancer, load_wine
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import balanced_accuracy_score

n_tests = 0


def tap(ok, what, detail=""):
    global n_tests
    n_tests += 1
    print("%s %d - %s%s" % ("ok" if ok else "not ok", n_tests, what,
                            "" if ok or not detail else ": " + detail))
    sys.stdout.flush()


def psql(sql, role=None):
    pre = "SET client_min_messages = warning; " + ("SET ROLE %s; " % role if role else "")
    out = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-F", "|", "-v", "ON_ERROR_STOP=1", "-1", "-f", "-"],
                         input=pre + sql, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return [line.split("|") for line in out.stdout.splitlines() if line != ""]


def psql_error(sql):
    out = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql],
                         capture_output=True, text=True)
    return out.returncode, out.stderr


def load(table, X, y, train):
    feats = ["x%d" % j for j in range(X.shape[1])]
    values = ",\n".join("(%d, %s, %d, %s)" % (i, ", ".join(repr(float(v)) for v in X[i]), y[i],
                                              "true" if train[i] else "false") for i in range(len(y)))
    psql("DROP TABLE IF EXISTS %s CASCADE; CREATE TABLE %s (i int, %s, y int, train boolean); "
         "INSERT INTO %s VALUES %s; GRANT SELECT ON %s TO dml_cw_user"
         % (table, table, ", ".join("%s float8" % f for f in feats), table, values, table))
    psql("CREATE VIEW %s_train AS SELECT * FROM %s WHERE train; "
         "GRANT SELECT ON %s_train TO dml_cw_user" % (table, table, table))
    return feats


def train(model, table, feats, extra, role=None):
    psql("SELECT dml_drop_model(name) FROM dml_models WHERE name = '%s'" % model, role)
    psql("SELECT name FROM dml_train('%s', '%s_train', 'y', features => '{%s}', weight_decay => 0.001, "
         "optimizer => 'lbfgs', epochs => 2000, options => '{\"tolerance\": 1e-14%s}'%s)"
         % (model, table, ",".join(feats), extra[0], extra[1]), role)


def proba(model, table, feats, role=None):
    return np.array([[float(v) for v in r[0].strip("{}").split(",")] for r in
                     psql("SELECT dml_predict_proba('%s', ARRAY[%s]) FROM %s ORDER BY i"
                          % (model, ", ".join(feats), table), role)])


def raw_coefficients(P, X):
    """log(p_k / p_0) = [X, 1] c_k: the coefficients of every class against class 0"""
    A = np.column_stack([X, np.ones(len(X))])
    L = np.log(P[:, 1:]) - np.log(P[:, :1])
    return np.linalg.lstsq(A, L, rcond=None)[0].T


def sk_coefficients(m, mu, sd):
    """scikit-learn's standardized-scale fit as the same raw-scale differences"""
    W = m.coef_ / sd
    b = m.intercept_ - W @ mu
    if W.shape[0] == 1:
        return np.column_stack([W, b])
    return np.column_stack([W[1:] - W[0], b[1:] - b[0]])


MODES = [("in the server", ("", "")), ("2 workers", (", \"in_server\": false", ", workers => 2"))]


def case(name, table, X, y, train_rows, cw_sql, cw_sk, check_bacc=False):
    feats = load(table, X, y, train_rows)
    Xt, yt = X[train_rows], y[train_rows]
    mu, sd = Xt.mean(0), Xt.std(0)
    n = len(yt)
    ref = LogisticRegression(C=1 / (n * 0.001), class_weight=cw_sk, tol=1e-12, max_iter=100000).fit(
        (Xt - mu) / sd, yt)
    want = sk_coefficients(ref, mu, sd)
    for mode, extra in MODES:
        model = "cw_%s_%s" % (table, mode.split()[0])
        train(model, table, feats, (extra[0], extra[1] + cw_sql))
        P = proba(model, table, feats)
        got = raw_coefficients(P, X)
        # on the standardized scale the fit is made on: slopes * sd, intercept + slopes . mu
        gs = np.column_stack([got[:, :-1] * sd, got[:, -1] + got[:, :-1] @ mu])
        ws = np.column_stack([want[:, :-1] * sd, want[:, -1] + want[:, :-1] @ mu])
        err = np.max(np.abs(gs - ws)) / np.max(np.abs(ws))
        # L-BFGS's loss and gradients are float32 sums: its optimum is scikit-learn's
        # to a few 1e-4 of the largest coefficient (the flat directions of the loss)
        tap(got.shape == want.shape and err <= 5e-4,
            "%s, %s: coefficients match scikit-learn's to 5e-4 (%.1e of the largest)" % (name, mode, err),
            "%s vs %s" % (gs.tolist(), ws.tolist()))
        if check_bacc:
            pred = P.argmax(axis=1)
            plain = "cw_%s_plain_%s" % (table, mode.split()[0])
            train(plain, table, feats, extra)
            pred0 = proba(plain, table, feats).argmax(axis=1)
            test = ~train_rows
            b0 = balanced_accuracy_score(y[test], pred0[test])
            b1 = balanced_accuracy_score(y[test], pred[test])
            tap(b1 > b0 + 0.1, "%s, %s: balanced accuracy on held-out rows %.3f without, %.3f with class_weight"
                % (name, mode, b0, b1))


def main():
    psql("DROP ROLE IF EXISTS dml_cw_user; CREATE ROLE dml_cw_user LOGIN")
    bc = load_breast_cancer()
    keep = np.array([i for i in range(len(bc.target)) if bc.target[i] == 1 or i % 4 == 0])
    X = bc.data[keep][:, [1, 4]]
    y = (bc.target[keep] == 0).astype(int)      # 1: malignant, the rare class
    train_rows = np.arange(len(y)) % 3 != 0
    tap(len(y) == 407 and y.sum() == 50, "breast cancer subsample: 407 rows, 50 malignant")
    case("breast cancer, balanced", "cw_bc", X, y, train_rows, ", class_weight => 'balanced'", "balanced",
         check_bacc=True)
    case("breast cancer, a map", "cw_bc", X, y, train_rows, ", class_weight => '{\"1\": 3.5}'", {0: 1, 1: 3.5})
    # an MLP (L-BFGS, the same weighted loss through its layers)
    for mode, opt, extra in [("in the server", "", ""), ("2 workers", ", \"in_server\": false", ", workers => 2")]:
        accs = []
        for cw in ["", ", class_weight => 'balanced'"]:
            m = "cw_mlp_%s_%d" % (mode.split()[0], len(accs))
            psql("SELECT dml_drop_model(name) FROM dml_models WHERE name = '%s'" % m)
            psql("SELECT name FROM dml_train('%s', 'cw_bc_train', 'y', features => '{x0,x1}', model => 'mlp', "
                 "hidden => '{8}', optimizer => 'lbfgs', epochs => 300, weight_decay => 0.001%s%s%s)"
                 % (m, ", options => '{\"in_server\": false}'" if opt else "", extra, cw))
            pred = proba(m, "cw_bc", ["x0", "x1"]).argmax(axis=1)
            accs.append(balanced_accuracy_score(y[~train_rows], pred[~train_rows]))
        tap(accs[1] > accs[0] + 0.1, "MLP, %s: balanced accuracy on held-out rows %.3f without, %.3f with class_weight"
            % (mode, accs[0], accs[1]))
    wine = load_wine()
    keep = np.array([i for i in range(len(wine.target)) if wine.target[i] != 2 or i % 3 == 0])
    Xw = wine.data[keep][:, [0, 1, 9, 12]]
    yw = wine.target[keep]
    case("wine (3 classes, one thinned), softmax, balanced", "cw_wine", Xw, yw, np.ones(len(yw), bool),
         ", class_weight => 'balanced'", "balanced")
    # an ordinary role
    try:
        train("cw_user_model", "cw_bc", ["x0", "x1"], ("", ", class_weight => 'balanced'"), role="dml_cw_user")
        ok = psql("SELECT count(*) FROM dml_models WHERE name = 'cw_user_model'") == [["1"]]
        spec = psql("SELECT spec->'hyperparameters'->>'class_weight' FROM dml.models WHERE name = 'cw_user_model'")
        tap(ok and spec == [["balanced"]], "an ordinary role trains with class_weight; the spec records it", str(spec))
    except RuntimeError as e:
        tap(False, "an ordinary role trains with class_weight", str(e))
    for sql, want in [
            ("SELECT dml_train('cw_bad', 'cw_bc', 'x0', class_weight => 'balanced')", "classification only"),
            ("SELECT dml_train('cw_bad', 'cw_bc', 'y', optimizer => 'newton', class_weight => 'balanced')",
             "not supported with optimizer"),
            ("SELECT dml_train('cw_bad', 'cw_bc', 'y', class_weight => '{\"7\": 2}')", "does not have"),
            ("SELECT dml_train('cw_bad', 'cw_bc', 'y', class_weight => '[1, 2]')", "JSON object of label to weight"),
            ("SELECT dml_train('cw_bad', 'cw_bc', 'y', class_weight => '{\"1\": -2}')", "at least 0"),
            ("SELECT dml_train('cw_bad', 'cw_bc', 'y', device => 'gpu', class_weight => 'balanced')",
             "not supported on device")]:
        rc, err = psql_error(sql)
        tap(rc != 0 and want in err, "refused: %s" % want, err.strip())
    psql("DROP OWNED BY dml_cw_user; DROP ROLE dml_cw_user")
    print("# %d checks" % n_tests)


main()
