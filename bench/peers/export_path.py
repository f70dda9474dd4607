#!/usr/bin/python3
"""Reference peer: the "export to Python" path -- fetch a table, then train in PyTorch.

What dml avoids: moving the rows out of PostgreSQL into a Python process
before training.  The table is fetched with psycopg2 into numpy, then
trained on with the same code as torch_mlp.py; fetch and training are timed
apart and reported with their total.

    # Fashion-MNIST loaded by bench/load_fashion.sh (real[] pixels)
    /usr/bin/python3 bench/peers/export_path.py --table fashion_train \
        --test-table fashion_test --features pixels --epochs 5
    # bench/sql/synth.sql (20 float8 columns, binary label)
    /usr/bin/python3 bench/peers/export_path.py --table synth_1m \
        --features auto --model logistic --epochs 1 --standardize

Connection: libpq's PG* environment, or --dsn.  --features is one array
column, a comma-separated list of columns, or "auto" (every float column but
the label, id and y).  Without --test-table the last --test-fraction of the
rows by id is held out.

--method fetch   what most code does: a server-side cursor, fetchmany in
                 chunks, rows converted to numpy (psycopg2 parses the text)
--method copy    COPY (SELECT ...) TO STDOUT (FORMAT binary), parsed with
                 numpy as fixed-width records: the fastest export a careful
                 Python user would write
"""

import argparse
import io
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import psycopg2  # noqa: E402
from psycopg2 import sql  # noqa: E402

from fashion import emit, fail  # noqa: E402
from torch_mlp import add_training_args, train_torch  # noqa: E402

FLOAT_OIDS = {700: ">f4", 701: ">f8"}
ARRAY_OIDS = {1021: ">f4", 1022: ">f8"}
INT_OIDS = {21: ">i2", 23: ">i4", 20: ">i8"}


def resolve_columns(conn, table, features, label):
    """The feature column names, the label column, and their type OIDs."""
    rel = sql.SQL(".").join(sql.Identifier(p) for p in table.split("."))
    with conn.cursor() as cur:
        cur.execute(sql.SQL("SELECT * FROM {} LIMIT 0").format(rel))
        types = {d.name: d.type_code for d in cur.description}
    if label not in types:
        fail(f"table {table} has no column \"{label}\"")
    if features == "auto":
        cols = [c for c, t in types.items()
                if t in FLOAT_OIDS and c not in (label, "id", "y")]
    else:
        cols = [c.strip() for c in features.split(",") if c.strip()]
    if not cols:
        fail(f"no feature columns in {table}")
    for c in cols:
        if c not in types:
            fail(f"table {table} has no column \"{c}\"")
        if types[c] not in FLOAT_OIDS and types[c] not in ARRAY_OIDS:
            fail(f"column \"{c}\" is neither a float nor a float array")
    if len(cols) > 1 and any(types[c] in ARRAY_OIDS for c in cols):
        fail("an array feature column must be the only feature column")
    if types[label] not in INT_OIDS:
        fail(f"label column \"{label}\" must be an integer column")
    return rel, cols, {c: types[c] for c in cols + [label]}


def select_query(rel, cols, label):
    """SELECT label, features FROM rel ORDER BY id."""
    return sql.SQL("SELECT {}, {} FROM {} ORDER BY id").format(
        sql.Identifier(label), sql.SQL(", ").join(sql.Identifier(c) for c in cols), rel)


def fetch_cursor(conn, query, is_array, chunk=20000):
    """Rows through a named cursor, converted chunk by chunk; returns x, y."""
    xs, ys = [], []
    with conn.cursor(name="dml_export") as cur:
        cur.itersize = chunk
        cur.execute(query)
        while True:
            rows = cur.fetchmany(chunk)
            if not rows:
                break
            ys.append(np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)))
            if is_array:
                xs.append(np.array([r[1] for r in rows], dtype=np.float32))
            else:
                xs.append(np.array([r[1:] for r in rows], dtype=np.float32))
    return np.concatenate(xs), np.concatenate(ys)


def fetch_copy(conn, query, cols, oids, label, nfeat):
    """Rows through binary COPY, parsed as fixed-width numpy records; returns x, y."""
    buf = io.BytesIO()
    with conn.cursor() as cur:
        copy = sql.SQL("COPY ({}) TO STDOUT (FORMAT binary)").format(query)
        cur.copy_expert(copy.as_string(conn), buf)
    raw = buf.getbuffer()
    header = 11 + 4 + 4
    if bytes(raw[:11]) != b"PGCOPY\n\xff\r\n\x00":
        fail("unexpected COPY binary signature")
    ext = int.from_bytes(raw[15:19], "big")
    body = raw[header + ext:len(raw) - 2]
    fields = [("nf", ">i2"), ("llen", ">i4"), ("label", INT_OIDS[oids[label]])]
    if oids[cols[0]] in ARRAY_OIDS:
        et = ARRAY_OIDS[oids[cols[0]]]
        fields += [("alen", ">i4"), ("ndim", ">i4"), ("flags", ">i4"), ("eoid", ">i4"),
                   ("dim", ">i4"), ("lb", ">i4"),
                   ("x", np.dtype([("len", ">i4"), ("v", et)]), (nfeat,))]
    else:
        for i, c in enumerate(cols):
            fields += [(f"len{i}", ">i4"), (f"x{i}", FLOAT_OIDS[oids[c]])]
    dt = np.dtype(fields)
    if len(body) % dt.itemsize:
        fail("rows are not all the same width (arrays of different lengths or NULLs?); "
             "use --method fetch")
    rec = np.frombuffer(body, dtype=dt)
    if len(rec) and (np.any(rec["nf"] != len(cols) + 1) or
                     ("dim" in rec.dtype.names and np.any(rec["dim"] != nfeat))):
        fail("rows are not all the same shape; use --method fetch")
    y = rec["label"].astype(np.int64)
    if "x" in rec.dtype.names:
        x = rec["x"]["v"].astype(np.float32)
    else:
        x = np.stack([rec[f"x{i}"] for i in range(len(cols))], axis=1).astype(np.float32)
    return x, y


def feature_count(conn, rel, cols, oids):
    """Width of the feature vector (array length of the first row for an array column)."""
    if oids[cols[0]] not in ARRAY_OIDS:
        return len(cols)
    with conn.cursor() as cur:
        cur.execute(sql.SQL("SELECT array_length({}, 1) FROM {} LIMIT 1").format(
            sql.Identifier(cols[0]), rel))
        row = cur.fetchone()
    return row[0] if row else 0


def export(conn, a, table):
    """Fetch one table into numpy arrays x, y."""
    rel, cols, oids = resolve_columns(conn, table, a.features, a.label)
    query = select_query(rel, cols, a.label)
    if a.method == "copy":
        return fetch_copy(conn, query, cols, oids, a.label, feature_count(conn, rel, cols, oids))
    return fetch_cursor(conn, query, oids[cols[0]] in ARRAY_OIDS)


def main():
    """Fetch, then train, timing each."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_training_args(p)
    p.add_argument("--dsn", default="", help="libpq connection string (default: PG* env)")
    p.add_argument("--table", required=True)
    p.add_argument("--test-table", default=None)
    p.add_argument("--test-fraction", type=float, default=0.1)
    p.add_argument("--features", default="pixels")
    p.add_argument("--label", default="label")
    p.add_argument("--method", choices=["fetch", "copy"], default="fetch")
    a = p.parse_args()

    t0 = time.perf_counter()
    try:
        conn = psycopg2.connect(a.dsn)
        conn.set_session(readonly=True)
        if a.test_table:
            xtr, ytr = export(conn, a, a.table)
            xte, yte = export(conn, a, a.test_table)
        else:
            x, y = export(conn, a, a.table)
            cut = int(round(len(y) * (1.0 - a.test_fraction)))
            xtr, ytr, xte, yte = x[:cut], y[:cut], x[cut:], y[cut:]
        conn.rollback()
        conn.close()
    except psycopg2.Error as e:
        fail(str(e).strip())
    fetch_s = time.perf_counter() - t0
    nbytes = xtr.nbytes + xte.nbytes
    emit({"peer": "export_path", "event": "fetch", "method": a.method, "table": a.table,
          "rows": int(len(ytr) + len(yte)), "features": int(xtr.shape[1]),
          "fetch_s": round(fetch_s, 4), "rows_per_s": round((len(ytr) + len(yte)) / fetch_s, 1),
          "float32_mb": round(nbytes / 1e6, 2)})
    t1 = time.perf_counter()
    done = train_torch(a, xtr, ytr, xte, yte, "export_path",
                       {"table": a.table, "method": a.method})
    train_s = time.perf_counter() - t1
    emit({"peer": "export_path", "event": "total", "method": a.method,
          "fetch_s": round(fetch_s, 4), "train_s": round(train_s, 4),
          "total_s": round(fetch_s + train_s, 4), "test_acc": done["test_acc"]})


if __name__ == "__main__":
    main()
