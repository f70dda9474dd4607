#!/usr/bin/python3
"""certified.py: exact least squares against certified values and statsmodels.

Run by regress/t/certified.sh against the cluster regress/run.sh started
(PGHOST, PGPORT, PGUSER, PGDATABASE in the environment).  Prints TAP lines.

1. NIST StRD Longley (the data ship with python3-statsmodels) and Wampler1,
   Wampler2 (generated exactly from their definitions, x = 0..20): every
   coefficient, every standard error, the residual standard deviation and
   R^2 against the certified values, and every fitted value against the
   certified model evaluated exactly (fractions), with LRE >= 9 (correct
   significant digits; absolute when the certified value is 0).  Each is
   trained four ways: in the server (the QR aggregate), in the server
   with parallel workers forced (R factors combined), and by 1 and 3 MPI
   workers; the tables are padded so that 3 workers each read rows
   (checked).
2. Real datasets from statsmodels (stackloss, ccard, copper, scotland,
   statecrime, fair): coefficients, standard errors, t, p-values and the
   model-level figures against statsmodels' OLS, 1e-6 relative.
3. Collinear features are reported by name; rank_deficient => min_norm
   gives numpy's lstsq solution.
4. Binary logistic regression by Newton (float64 on the raw rows) on
   spector, ccard and fair: coefficients, standard errors, z, p-values,
   odds ratios, log-likelihood, pseudo R^2, AIC, BIC and the predicted
   probabilities against statsmodels' Logit, 1e-6 relative.
5. dml_summary and dml_summary_fit follow the access rule: a model the role
   may not use reads as one that does not exist; a grant without details
   does not show the statistics.
6. Softmax regression by Newton (float64 on the raw rows) on anes96 (7
   classes, and 3): coefficients, standard errors, z, p-values, relative
   risk ratios, log-likelihood, pseudo R^2, AIC, BIC and the predicted
   probabilities against statsmodels' MNLogit, 1e-6 relative, with the
   first class as the reference; the summary's coefficients (17 digits
   through jsonb) reproduce dml_predict_proba's float64 output to 1e-12.
7. options => '{"cov": "HC0" | "HC1"}': heteroskedasticity-robust standard
   errors, z, normal p-values and the robust Wald F against statsmodels'
   OLS(cov_type=...) and Logit(cov_type='HC0'), 1e-6; refused where it
   does not apply.
"""
import math
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import statsmodels.api as sm
import statsmodels.datasets as smd

n_tests = 0


def tap(ok, what, detail=""):
    global n_tests
    n_tests += 1
    print("%s %d - %s%s" % ("ok" if ok else "not ok", n_tests, what,
                            "" if ok or not detail else ": " + detail))
    sys.stdout.flush()


def psql(sql):
    """rows of a query as lists of strings (psql unaligned, '|' separated)"""
    out = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-F", "|", "-v", "ON_ERROR_STOP=1",
                          "-1", "-f", "-"], input=sql, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return [line.split("|") for line in out.stdout.splitlines() if line != ""]


def psql_error(sql):
    out = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                          "-v", "VERBOSITY=verbose", "-c", sql], capture_output=True, text=True)
    return out.returncode, out.stderr


def num(s):
    return float("nan") if s == "" else float(s)


def lre(got, cert):
    """log relative error: correct significant digits (absolute for cert 0), at most 15"""
    if math.isnan(got):
        return 0.0
    err = abs(got - cert) / abs(cert) if cert != 0 else abs(got - cert)
    return 15.0 if err == 0 else min(15.0, -math.log10(err))


def load_table(name, columns, rows):
    """a float8 table padded to about 3 rows a page, so several workers each get rows"""
    cols = ", ".join("%s float8" % c for c in columns)
    values = ",\n".join("(%s, %d)" % (", ".join(repr(float(v)) for v in r), i)
                        for i, r in enumerate(rows))
    psql("DROP TABLE IF EXISTS %s; CREATE TABLE %s (%s, i int, pad text) WITH (fillfactor = 10);"
         "ALTER TABLE %s ALTER COLUMN pad SET STORAGE PLAIN;"
         "INSERT INTO %s (%s, i) VALUES %s; UPDATE %s SET pad = repeat('x', 2000)"
         % (name, name, cols, name, name, ", ".join(columns), values, name))
    subprocess.run(["psql", "-X", "-q", "-c", "VACUUM ANALYZE %s" % name], check=True)


# in the server, with PostgreSQL's parallel workers forced (their R factors meet in the combine function)
PARALLEL = ("SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET seq_page_cost = 0; "
            "SET cpu_operator_cost = 10; SET min_parallel_table_scan_size = 0; "
            "SET max_parallel_workers_per_gather = 2; SET parallel_leader_participation = off; ")
MODES = [("in-server", ""), ("in-server parallel", "parallel"), ("1 worker", ", workers => 1, options => '{\"in_server\": false}'"),
         ("3 workers", ", workers => 3, options => '{\"in_server\": false}'")]


def train(model, table, target, features, extra):
    psql("SELECT dml_drop_model(name) FROM dml_models WHERE name = '%s'" % model)
    prefix = PARALLEL if extra == "parallel" else ""
    psql("%sSELECT name FROM dml_train('%s', '%s', '%s', features => '{%s}'%s)"
         % (prefix, model, table, target, ",".join(features), "" if extra == "parallel" else extra))


def summary(model):
    rows = psql("SELECT term, coefficient, std_error, statistic, p_value FROM dml_summary('%s')" % model)
    fit = psql("SELECT n, df_model, df_resid, r2, adj_r2, residual_std_error, f_statistic, f_p_value, "
               "log_likelihood, aic, bic, condition_number FROM dml_summary_fit('%s')" % model)[0]
    keys = ["n", "df_model", "df_resid", "r2", "adj_r2", "sigma", "f", "f_p", "llf", "aic", "bic", "cond"]
    return ([r[0] for r in rows], [[num(x) for x in r[1:]] for r in rows],
            dict(zip(keys, [num(x) for x in fit])))


def fitted(model, table, features):
    return [float(r[0]) for r in psql("SELECT dml_predict('%s', ARRAY[%s]) FROM %s ORDER BY i"
                                      % (model, ", ".join(features), table))]


# --- 1. certified datasets ---------------------------------------------------

def certified():
    ll = smd.longley.load_pandas().data
    lcols = ["GNPDEFL", "GNP", "UNEMP", "ARMED", "POP", "YEAR"]
    sets = [("longley", "totemp", [c.lower() for c in lcols],
             [[r.TOTEMP] + [getattr(r, c) for c in lcols] for r in ll.itertuples()],
             # NIST certified: intercept first, then the features; residual SD; R^2
             ["-3482258.63459582", "15.0618722713733", "-0.358191792925910E-01",
              "-2.02022980381683", "-1.03322686717359", "-0.511041056535807E-01", "1829.15146461355"],
             ["890420.383607373", "84.9149257747669", "0.334910077722432E-01", "0.488399681651699",
              "0.214274163161675", "0.226073200069370", "455.478499142212"],
             "304.854073561965", "0.995479004577296")]
    xs = list(range(21))
    for name, coef in [("wampler1", ["1"] * 6),
                       ("wampler2", ["1", "0.1", "0.01", "0.001", "0.0001", "0.00001"])]:
        rows = [[sum(Fraction(c) * x ** k for k, c in enumerate(coef))] + [x ** k for k in range(1, 6)]
                for x in xs]
        sets.append((name, "y", ["x%d" % k for k in range(1, 6)], rows, coef, ["0"] * 6, "0", "1"))
    for name, target, features, rows, cert, cert_se, cert_sd, cert_r2 in sets:
        load_table(name, [target] + features, rows)
        pages = int(psql("SELECT count(DISTINCT (ctid::text::point)[0]) FROM %s" % name)[0][0])
        tap(pages >= 3, "%s: rows on %d pages, so 3 workers each read some" % (name, pages))
        plan = "\n".join(r[0] for r in psql("%sEXPLAIN SELECT dml.qr_cols(%s) FROM %s"
                                             % (PARALLEL, ", ".join([target] + features), name)))
        tap("Partial Aggregate" in plan and "Finalize Aggregate" in plan,
            "%s: the in-server parallel mode runs a partial QR aggregate per worker" % name, plan)
        # the certified model, evaluated exactly on the stored (float64) data
        fit_cert = [Fraction(cert[0]) + sum(Fraction(c) * Fraction(float(v))
                                            for c, v in zip(cert[1:], r[1:])) for r in rows]
        for mode, extra in MODES:
            model = "%s_%s" % (name, mode.replace(" ", "_").replace("-", "_"))
            train(model, name, target, features, extra)
            terms, est, fit = summary(model)
            coef_lre = [lre(e[0], float(c)) for e, c in zip(est, cert)]
            se_lre = [lre(e[1], float(c)) for e, c in zip(est, cert_se)]
            pred = fitted(model, name, features)
            fit_lre = [lre(p, float(c)) for p, c in zip(pred, fit_cert)]
            tap(terms == ["(Intercept)"] + features, "%s, %s: terms" % (name, mode), str(terms))
            tap(min(coef_lre) >= 9, "%s, %s: coefficients LRE >= 9 (min %.1f)" % (name, mode, min(coef_lre)),
                str(["%.1f" % v for v in coef_lre]))
            tap(min(se_lre) >= 9, "%s, %s: standard errors LRE >= 9 (min %.1f)" % (name, mode, min(se_lre)),
                str(["%.1f" % v for v in se_lre]))
            sd_lre = lre(fit["sigma"], float(cert_sd))
            r2_lre = lre(fit["r2"], float(cert_r2))
            tap(sd_lre >= 9 and r2_lre >= 9, "%s, %s: residual SD and R^2 LRE >= 9 (%.1f, %.1f)"
                % (name, mode, sd_lre, r2_lre))
            tap(min(fit_lre) >= 9, "%s, %s: fitted values (dml_predict) LRE >= 9 (min %.1f)"
                % (name, mode, min(fit_lre)))
            if mode == "in-server":
                # the batch path computes in float64 too
                psql("DROP TABLE IF EXISTS certified_pt; CALL dml_predict_table('%s', '%s', 'certified_pt', 'i')"
                     % (model, name))
                batch = [float(r[0]) for r in psql("SELECT prediction FROM certified_pt ORDER BY i")]
                batch_lre = [lre(p, float(c)) for p, c in zip(batch, fit_cert)]
                tap(len(batch) == len(rows) and min(batch_lre) >= 9,
                    "%s: dml_predict_table's predictions LRE >= 9 (min %.1f)" % (name, min(batch_lre)))
            print("# LRE %s %s: coefficients %s; std errors %s; fitted min %.1f" %
                  (name, mode, " ".join("%.1f" % v for v in coef_lre),
                   " ".join("%.1f" % v for v in se_lre), min(fit_lre)))


# --- 2. statsmodels OLS on real datasets --------------------------------------

def close(got, want, rtol=1e-6, atol=1e-300):
    return abs(got - want) <= atol + rtol * abs(want)


def real_datasets():
    sets = []
    for name in ["stackloss", "ccard", "copper", "scotland", "statecrime", "fair"]:
        ds = getattr(smd, name).load_pandas()
        if name == "statecrime":
            y = ds.data["murder"]
            X = ds.data[["urban", "poverty", "hs_grad", "single"]]
        elif name == "fair":
            y = ds.data["affairs"]
            X = ds.data.drop(columns=["affairs"])
        else:
            y = ds.endog
            X = ds.exog
        sets.append((name, y.astype(float), X.astype(float)))
    for name, y, X in sets:
        table = "real_" + name
        feats = ["x_" + c.lower().replace(" ", "_") for c in X.columns]
        rows = [[yy] + list(xx) for yy, xx in zip(y.values, X.values)]
        cols = ", ".join("%s float8" % c for c in ["y"] + feats)
        values = ",\n".join("(%s, %d)" % (", ".join(repr(float(v)) for v in r), i)
                            for i, r in enumerate(rows))
        psql("DROP TABLE IF EXISTS %s; CREATE TABLE %s (%s, i int); INSERT INTO %s (%s, i) VALUES %s"
             % (table, table, cols, table, ", ".join(["y"] + feats), values))
        ref = sm.OLS(y.values, sm.add_constant(X.values, prepend=True)).fit()
        for mode, extra in [MODES[0], MODES[3]]:
            model = "%s_%s" % (table, mode.replace(" ", "_").replace("-", "_"))
            train(model, table, "y", feats, extra)
            terms, est, fit = summary(model)
            est = np.array(est)
            checks = [
                ("coefficients", est[:, 0], ref.params), ("std errors", est[:, 1], ref.bse),
                ("t", est[:, 2], ref.tvalues), ("p-values", est[:, 3], ref.pvalues),
                ("R^2, adjusted R^2", [fit["r2"], fit["adj_r2"]], [ref.rsquared, ref.rsquared_adj]),
                ("F and its p-value", [fit["f"], fit["f_p"]], [ref.fvalue, ref.f_pvalue]),
                ("log-likelihood, AIC, BIC", [fit["llf"], fit["aic"], fit["bic"]], [ref.llf, ref.aic, ref.bic]),
                ("residual SD, condition number", [fit["sigma"], fit["cond"]],
                 [math.sqrt(ref.scale), ref.condition_number]),
                ("df", [fit["n"], fit["df_model"], fit["df_resid"]], [ref.nobs, ref.df_model, ref.df_resid]),
            ]
            for what, got, want in checks:
                bad = [(g, w) for g, w in zip(got, want) if not close(g, w)]
                tap(not bad, "%s (%d x %d), %s: %s within 1e-6 of statsmodels OLS"
                    % (name, len(rows), len(feats), mode, what), str(bad[:3]))


# --- 3. rank deficiency ------------------------------------------------------

def rank_deficient():
    rows = [[i + (i * 7 % 5) + 0.5 * math.sin(i), i, 2 * i, i * 7 % 5] for i in range(1, 41)]
    load_table("collinear", ["y", "a", "b", "c"], rows)
    for mode, extra in [MODES[0], MODES[3]]:
        rc, err = psql_error("SELECT dml_train('coll', 'collinear', 'y', features => '{a,b,c}'%s)" % extra)
        tap(rc != 0 and "the features are collinear" in err and ('"a"' in err or '"b"' in err)
            and "min_norm" in err, "collinear features, %s: an error naming the column" % mode, err.strip())
        model = "coll_min_norm_%s" % mode.replace(" ", "_").replace("-", "_")
        extra_mn = extra.replace("'{", "'{\"rank_deficient\": \"min_norm\", ") if "options" in extra \
            else ", options => '{\"rank_deficient\": \"min_norm\"}'"
        extra_mn = extra_mn.replace(", }", "}")
        train(model, "collinear", "y", ["a", "b", "c"], extra_mn)
        _, est, fit = summary(model)
        A = np.array([[r[1], r[2], r[3], 1.0] for r in rows])
        ref = np.linalg.lstsq(A, np.array([r[0] for r in rows]), rcond=None)[0]
        got = [e[0] for e in est[1:]] + [est[0][0]]
        tap(all(close(g, w, 1e-9, 1e-12) for g, w in zip(got, ref)) and fit["df_model"] == 2,
            "rank_deficient => min_norm, %s: lstsq's minimum-norm solution, rank 3" % mode,
            "%s vs %s" % (got, list(ref)))


# --- 4. statsmodels Logit on real datasets ---------------------------------------

def logit_datasets():
    sp = smd.spector.load_pandas()
    cc = smd.ccard.load_pandas().data
    fa = smd.fair.load_pandas().data
    sets = [("spector", sp.endog, sp.exog),
            ("ccard_ownrent", cc["OWNRENT"], cc[["AGE", "INCOME", "AVGEXP"]]),
            ("fair_any", (fa["affairs"] > 0).astype(float), fa.drop(columns=["affairs"]))]
    for name, y, X in sets:
        table = "logit_" + name
        feats = ["x_" + c.lower() for c in X.columns]
        rows = [[int(yy)] + [float(v) for v in xx] for yy, xx in zip(y.values, X.values)]
        cols = "y int, " + ", ".join("%s float8" % c for c in feats)
        values = ",\n".join("(%d, %s, %d)" % (r[0], ", ".join(repr(v) for v in r[1:]), i)
                            for i, r in enumerate(rows))
        psql("DROP TABLE IF EXISTS %s; CREATE TABLE %s (%s, i int); INSERT INTO %s (y, %s, i) VALUES %s"
             % (table, table, cols, table, ", ".join(feats), values))
        ref = sm.Logit(y.values.astype(float), sm.add_constant(X.values.astype(float), prepend=True)).fit(
            disp=0, method="newton", tol=1e-12, maxiter=100)
        for mode, extra in [("1 worker", ", workers => 1"), ("3 workers", ", workers => 3")]:
            model = "%s_%s" % (table, mode.replace(" ", "_"))
            psql("SELECT dml_drop_model(name) FROM dml_models WHERE name = '%s'" % model)
            psql("SELECT name FROM dml_train('%s', '%s', 'y', features => '{%s}', model => 'logistic', optimizer => 'newton', weight_decay => 0%s)"
                 % (model, table, ",".join(feats), extra))
            rows_s = psql("SELECT coefficient, std_error, statistic, p_value, odds_ratio FROM dml_summary('%s')"
                          % model)
            est = np.array([[num(x) for x in r] for r in rows_s])
            fit = psql("SELECT method, n, df_model, df_resid, r2, log_likelihood, aic, bic "
                       "FROM dml_summary_fit('%s')" % model)[0]
            checks = [
                ("coefficients", est[:, 0], ref.params), ("std errors", est[:, 1], ref.bse),
                ("z", est[:, 2], ref.tvalues), ("p-values", est[:, 3], ref.pvalues),
                ("odds ratios", est[:, 4], np.exp(ref.params)),
                ("log-likelihood, pseudo R^2, AIC, BIC",
                 [num(fit[5]), num(fit[4]), num(fit[6]), num(fit[7])],
                 [ref.llf, ref.prsquared, ref.aic, ref.bic]),
                ("n and df", [num(fit[1]), num(fit[2]), num(fit[3])], [ref.nobs, ref.df_model, ref.df_resid]),
            ]
            tap(fit[0] == "logit", "%s, %s: method logit" % (name, mode), fit[0])
            for what, got, want in checks:
                bad = [(g, w) for g, w in zip(got, want) if not close(g, w)]
                tap(not bad, "%s (%d x %d), %s: %s within 1e-6 of statsmodels Logit"
                    % (name, len(rows), len(feats), mode, what), str(bad[:3]))
            pred = [float(r[0]) for r in psql("SELECT (dml_predict_proba('%s', ARRAY[%s]))[2] FROM %s ORDER BY i"
                                               % (model, ", ".join(feats), table))]
            bad = [(g, w) for g, w in zip(pred, ref.predict()) if not close(g, w, 1e-6, 1e-12)]
            tap(not bad, "%s, %s: predicted probabilities within 1e-6 of statsmodels" % (name, mode),
                str(bad[:3]))
            if name == "fair_any":
                # every rank's float32 passes read row panels (6,366 rows: at least 16 a
                # rank, consecutive), and the model's training metrics, taken from the
                # rows the panels left, are dml_evaluate's on the same table
                workers = int(mode.split()[0])
                m = psql("SELECT metrics->'newton_steps'->>'panels', metrics->>'accuracy', metrics->>'log_loss', "
                         "e->>'accuracy', e->>'log_loss' FROM dml.models, dml_evaluate('%s', '%s') e "
                         "WHERE name = '%s' ORDER BY version DESC LIMIT 1" % (model, table, model))[0]
                tap(m[0] == str(workers), "%s, %s: the float32 iterations read row panels on every rank (%s)"
                    % (name, mode, m[0]), str(m))
                tap(num(m[1]) == num(m[3]) and close(num(m[2]), num(m[4])),
                    "%s, %s: the training metrics (accuracy %s, log loss %s) are dml_evaluate's" % (name, mode, m[1], m[2]),
                    str(m))


# --- 6. statsmodels MNLogit (softmax by Newton, float64) --------------------------

def mnlogit_datasets():
    an = smd.anes96.load_pandas().data
    sets = [("anes96", an["PID"].astype(int), an[["logpopul", "selfLR", "age", "educ", "income"]]),
            # three classes from the same survey: fewer equations, other features
            ("anes96_vote3", (an["PID"] // 3).astype(int), an[["TVnews", "ClinLR", "DoleLR", "age"]])]
    for name, y, X in sets:
        table = "mnlogit_" + name
        feats = ["x_" + c.lower() for c in X.columns]
        rows = [[int(yy)] + [float(v) for v in xx] for yy, xx in zip(y.values, X.values)]
        cols = "y int, " + ", ".join("%s float8" % c for c in feats)
        values = ",\n".join("(%d, %s, %d)" % (r[0], ", ".join(repr(v) for v in r[1:]), i)
                            for i, r in enumerate(rows))
        psql("DROP TABLE IF EXISTS %s; CREATE TABLE %s (%s, i int); INSERT INTO %s (y, %s, i) VALUES %s"
             % (table, table, cols, table, ", ".join(feats), values))
        ref = sm.MNLogit(y.values, sm.add_constant(X.values.astype(float), prepend=True)).fit(
            disp=0, method="newton", tol=1e-12, maxiter=100)
        labels = [str(v) for v in np.unique(y.values)]
        # statsmodels: params (p, K-1), the first class the reference; ours equation by equation
        want = {"coefficients": np.asarray(ref.params).T.ravel(), "std errors": np.asarray(ref.bse).T.ravel(),
                "z": np.asarray(ref.tvalues).T.ravel(), "p-values": np.asarray(ref.pvalues).T.ravel()}
        for mode, extra in [("1 worker", ", workers => 1"), ("3 workers", ", workers => 3")]:
            model = "%s_%s" % (table, mode.replace(" ", "_"))
            psql("SELECT dml_drop_model(name) FROM dml_models WHERE name = '%s'" % model)
            psql("SELECT name FROM dml_train('%s', '%s', 'y', features => '{%s}', model => 'softmax', "
                 "optimizer => 'newton', weight_decay => 0%s)" % (model, table, ",".join(feats), extra))
            rows_s = psql("SELECT class, term, coefficient, std_error, statistic, p_value, odds_ratio "
                          "FROM dml_summary('%s')" % model)
            est = np.array([[num(x) for x in r[2:]] for r in rows_s])
            fit = psql("SELECT method, n, df_model, df_resid, r2, log_likelihood, aic, bic "
                       "FROM dml_summary_fit('%s')" % model)[0]
            tap(fit[0] == "mnlogit", "%s, %s: method mnlogit" % (name, mode), fit[0])
            want_classes = [c for c in labels[1:] for _ in range(len(feats) + 1)]
            tap([r[0] for r in rows_s] == want_classes and
                [r[1] for r in rows_s] == (["(Intercept)"] + feats) * (len(labels) - 1),
                "%s, %s: one equation per class against class %s" % (name, mode, labels[0]),
                str([r[:2] for r in rows_s[:3]]))
            checks = [(k, est[:, i], want[k]) for i, k in enumerate(["coefficients", "std errors", "z", "p-values"])]
            checks += [
                ("relative risk ratios", est[:, 4], np.exp(want["coefficients"])),
                ("log-likelihood, pseudo R^2, AIC, BIC",
                 [num(fit[5]), num(fit[4]), num(fit[6]), num(fit[7])],
                 [ref.llf, ref.prsquared, ref.aic, ref.bic]),
                ("n and df", [num(fit[1]), num(fit[2]), num(fit[3])], [ref.nobs, ref.df_model, ref.df_resid]),
            ]
            for what, got, wnt in checks:
                bad = [(g, w) for g, w in zip(got, wnt) if not close(g, w)]
                tap(len(got) == len(wnt) and not bad, "%s (%d x %d, %d classes), %s: %s within 1e-6 of statsmodels MNLogit"
                    % (name, len(rows), len(feats), len(labels), mode, what), str(bad[:3]))
            pred = np.array([[float(v) for v in r[0].strip("{}").split(",")] for r in
                             psql("SELECT dml_predict_proba('%s', ARRAY[%s]) FROM %s ORDER BY i"
                                  % (model, ", ".join(feats), table))])
            refp = ref.predict()
            tap(pred.shape == refp.shape and np.all(np.abs(pred - refp) <= 1e-6 * np.abs(refp) + 1e-12),
                "%s, %s: predicted probabilities within 1e-6 of statsmodels" % (name, mode),
                str(np.max(np.abs(pred - refp))) if pred.shape == refp.shape else str(pred.shape))
            # the statistics travel as text (17 digits) into jsonb: the coefficients
            # read back give dml_predict_proba's float64 probabilities to 1e-12
            B = est[:, 0].reshape(len(labels) - 1, len(feats) + 1)
            Xa = np.column_stack([np.ones(len(rows)), np.array([r[1:] for r in rows])])
            eta = np.column_stack([np.zeros(len(rows)), Xa @ B.T])
            eta -= eta.max(axis=1, keepdims=True)
            mine = np.exp(eta) / np.exp(eta).sum(axis=1, keepdims=True)
            tap(pred.shape == mine.shape and np.max(np.abs(pred - mine)) <= 1e-12,
                "%s, %s: the summary's coefficients reproduce the float64 model to 1e-12" % (name, mode),
                str(np.max(np.abs(pred - mine))) if pred.shape == mine.shape else "")


# --- 7. heteroskedasticity-robust standard errors (options => '{"cov": ...}') -------

def robust():
    for name in ["stackloss", "ccard", "statecrime"]:
        table = "real_" + name      # loaded by real_datasets()
        cols = [r[0] for r in psql("SELECT attname FROM pg_attribute WHERE attrelid = '%s'::regclass "
                                   "AND attnum > 0 AND attname LIKE 'x\\_%%' ORDER BY attnum" % table)]
        data = np.array([[float(v) for v in r] for r in psql("SELECT y, %s FROM %s ORDER BY i" % (", ".join(cols), table))])
        for cov in ["HC0", "HC1"]:
            ref = sm.OLS(data[:, 0], sm.add_constant(data[:, 1:], prepend=True)).fit(cov_type=cov)
            for mode, extra in [("default path", ""), ("3 workers", ", workers => 3")]:
                model = "robust_%s_%s_%s" % (name, cov.lower(), mode.replace(" ", "_"))
                train(model, table, "y", cols, extra + ", options => '{\"cov\": \"%s\"}'" % cov)
                terms, est, fit = summary(model)
                est = np.array(est)
                checks = [("coefficients", est[:, 0], ref.params), ("std errors", est[:, 1], ref.bse),
                          ("z", est[:, 2], ref.tvalues), ("p-values (normal)", est[:, 3], ref.pvalues),
                          ("robust Wald F and its p-value", [fit["f"], fit["f_p"]], [ref.fvalue, ref.f_pvalue])]
                for what, got, want in checks:
                    bad = [(g, w) for g, w in zip(got, want) if not close(g, w)]
                    tap(len(got) == len(want) and not bad, "OLS %s, cov %s, %s: %s within 1e-6 of statsmodels"
                        % (name, cov, mode, what), str(bad[:3]))
        # the robust errors differ from the model-based ones (the check can fail)
        ref0 = sm.OLS(data[:, 0], sm.add_constant(data[:, 1:], prepend=True)).fit()
        tap(not np.allclose(ref0.bse, ref.bse, rtol=1e-3),
            "OLS %s: its HC1 and model-based errors differ, so the checks above discriminate" % name)
    for name in ["spector", "ccard_ownrent"]:
        table = "logit_" + name     # loaded by logit_datasets()
        cols = [r[0] for r in psql("SELECT attname FROM pg_attribute WHERE attrelid = '%s'::regclass "
                                   "AND attnum > 0 AND attname LIKE 'x\\_%%' ORDER BY attnum" % table)]
        data = np.array([[float(v) for v in r] for r in psql("SELECT y, %s FROM %s ORDER BY i" % (", ".join(cols), table))])
        ref = sm.Logit(data[:, 0], sm.add_constant(data[:, 1:], prepend=True)).fit(
            disp=0, method="newton", tol=1e-12, maxiter=100, cov_type="HC0")
        for mode, extra in [("1 worker", ", workers => 1"), ("3 workers", ", workers => 3")]:
            model = "robust_%s_%s" % (table, mode.replace(" ", "_"))
            psql("SELECT dml_drop_model(name) FROM dml_models WHERE name = '%s'" % model)
            psql("SELECT name FROM dml_train('%s', '%s', 'y', features => '{%s}', model => 'logistic', "
                 "optimizer => 'newton', weight_decay => 0, options => '{\"cov\": \"HC0\"}'%s)"
                 % (model, table, ",".join(cols), extra))
            est = np.array([[num(x) for x in r] for r in
                            psql("SELECT coefficient, std_error, statistic, p_value FROM dml_summary('%s')" % model)])
            for what, got, want in [("std errors", est[:, 1], ref.bse), ("z", est[:, 2], ref.tvalues),
                                    ("p-values", est[:, 3], ref.pvalues)]:
                bad = [(g, w) for g, w in zip(got, want) if not close(g, w)]
                tap(len(got) == len(want) and not bad, "Logit %s, cov HC0, %s: %s within 1e-6 of statsmodels"
                    % (name, mode, what), str(bad[:3]))
    for sql, want in [
            ("SELECT dml_train('rb', 'real_stackloss', 'y', options => '{\"cov\": \"HC9\"}')",
             'option "cov" must be'),
            ("SELECT dml_train('rb', 'logit_spector', 'y', model => 'logistic', optimizer => 'newton', "
             "options => '{\"cov\": \"HC1\"}')", 'must be "nonrobust" or "HC0"'),
            ("SELECT dml_train('rb', 'real_stackloss', 'y', optimizer => 'lbfgs', options => '{\"cov\": \"HC0\"}')",
             'option "cov" applies only')]:
        rc, err = psql_error(sql)
        tap(rc != 0 and want in err, "cov: refused where it does not apply (%s)" % want, err.strip())


# --- 5. who may read the statistics -------------------------------------------------

def access():
    model = "longley_in_server"
    psql("DROP ROLE IF EXISTS dml_cert_stranger; CREATE ROLE dml_cert_stranger")
    for fn in ("dml_summary", "dml_summary_fit"):
        rc1, err1 = psql_error("SET ROLE dml_cert_stranger; SELECT * FROM %s('%s')" % (fn, model))
        rc2, err2 = psql_error("SET ROLE dml_cert_stranger; SELECT * FROM %s('no_such_model_at_all')" % fn)
        same = err1.replace(model, "M") == err2.replace("no_such_model_at_all", "M")
        tap(rc1 != 0 and "does not exist" in err1 and same,
            "%s: a model the role may not use reads as one that does not exist" % fn, err1 + err2)
    psql("SELECT dml_grant('%s', 'dml_cert_stranger', details => false)" % model)
    rc, err = psql_error("SET ROLE dml_cert_stranger; SELECT * FROM dml_summary('%s')" % model)
    tap(rc != 0 and "42501" in err, "dml_summary: a grant without details does not show the statistics", err)
    psql("SELECT dml_revoke('%s', 'dml_cert_stranger'); SELECT dml_grant('%s', 'dml_cert_stranger')"
         % (model, model))
    rows = psql("SET ROLE dml_cert_stranger; SELECT count(*) FROM dml_summary('%s')" % model)
    tap(rows == [["7"]], "dml_summary: a grant with details shows them", str(rows))
    psql("SELECT dml_revoke('%s', 'dml_cert_stranger'); DROP ROLE dml_cert_stranger" % model)


certified()
real_datasets()
rank_deficient()
logit_datasets()
mnlogit_datasets()
robust()
access()
