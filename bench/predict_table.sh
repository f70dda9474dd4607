#!/bin/bash
# predict_table.sh: dml_predict_table against per-row predict into a table,
# the comparison of bench/harness.py section 5 on its own, measured as a
# ratio on a shared machine: the queries interleaved, R rounds, medians of
# wall time and of the backend's CPU time (from /proc, so other processes
# on the machine disturb it less).
#
#   bash bench/predict_table.sh [rounds] [rows]      (defaults 7, 1000000)
#
# Starts its own private cluster (regress/pgcluster.sh), loads synth_1m
# (bench/sql/synth.sql), trains bench_mlp20 as the harness does (MLP
# 20-64-64-1, relu, 1 adam epoch, 2 workers), then runs, with
# max_parallel_workers_per_gather = 0 as the harness does:
#   per-row (array)   CREATE TABLE .. AS SELECT id, dml_predict(m, ARRAY[c1..c20]) ..
#   per-row (record)  CREATE TABLE .. AS SELECT id, dml_predict(m, t) ..
#   predict_table     CALL dml_predict_table(m, 'synth_1m', .., 'id')
#   predict_table, N ranks   the same with workers => N (the third argument,
#                     default 2; 0 leaves it out): N dml-worker ranks on this
#                     host score their slices and the backend writes (its
#                     CPU column is the backend's share only: reading and
#                     scoring run in the ranks)
#
#   bash bench/predict_table.sh [rounds] [rows] [ranks]
# Needs the extension installed and /usr/bin/python3 with psycopg2.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-7}
rows=${2:-1000000}
ranks=${3:-2}
source regress/pgcluster.sh
trap 'pgc_stop' EXIT
pgc_start
pgc_psql -c 'CREATE EXTENSION dml' >/dev/null
echo "predict_table.sh: loading $rows rows" >&2
pgc_as_pg psql -X -q -v ON_ERROR_STOP=1 -v rows="$rows" -f bench/sql/synth.sql >/dev/null
# every page all-visible, as after a vacuum in use (bench/run.sh says why the CHECKPOINT)
pgc_psql -c 'CHECKPOINT' -c 'VACUUM' -c 'ANALYZE' >/dev/null
pgc_psql -c "SELECT name FROM dml_train('bench_mlp20', 'synth_1m', 'y',
	features => '{c1,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17,c18,c19,c20}',
	model => 'mlp', hidden => '{64,64}', optimizer => 'adam', epochs => 1, workers => 2)" >/dev/null 2>&1
echo "predict_table.sh: $rounds interleaved rounds" >&2
/usr/bin/python3 - "$rounds" "$ranks" <<'EOF'
import os, statistics, sys, time
import psycopg2

rounds = int(sys.argv[1])
ranks = int(sys.argv[2])
arr = "ARRAY[" + ", ".join(f"c{i}" for i in range(1, 21)) + "]"
queries = [
    ("per-row (array)", "DROP TABLE IF EXISTS b_rows; CREATE TABLE b_rows AS SELECT id, "
                        f"dml_predict('bench_mlp20', {arr}) AS prediction FROM synth_1m"),
    ("per-row (record)", "DROP TABLE IF EXISTS b_rec; CREATE TABLE b_rec AS SELECT id, "
                         "dml_predict('bench_mlp20', t) AS prediction FROM synth_1m t"),
    ("predict_table", "DROP TABLE IF EXISTS b_tab; "
                      "CALL dml_predict_table('bench_mlp20', 'synth_1m', 'b_tab', 'id')"),
]
if ranks > 1:
    queries.append((f"predict_table, {ranks} ranks",
                    "DROP TABLE IF EXISTS b_ranks; CALL dml_predict_table('bench_mlp20', 'synth_1m', "
                    f"'b_ranks', 'id', workers => {ranks})"))
conn = psycopg2.connect("")
conn.autocommit = True
cur = conn.cursor()
cur.execute("SET max_parallel_workers_per_gather = 0; SET client_min_messages = warning")
cur.execute("SELECT pg_backend_pid()")
pid = cur.fetchone()[0]
tick = os.sysconf("SC_CLK_TCK")


def cpu():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / tick


def run(sql):
    c0, t0 = cpu(), time.perf_counter()
    cur.execute(sql)
    return time.perf_counter() - t0, cpu() - c0


for _, sql in queries:  # warm-up: model cache, buffers, hint bits
    run(sql)
wall = {k: [] for k, _ in queries}
proc = {k: [] for k, _ in queries}
for r in range(rounds):
    for k, sql in queries:
        w, c = run(sql)
        wall[k].append(w)
        proc[k].append(c)
cur.execute("SELECT max(abs(r.prediction - t.prediction)) FROM b_rows r JOIN b_tab t USING (id)")
maxdiff = cur.fetchone()[0]
print(f"{'query':26} {'wall median':>12} {'cpu median':>11}   wall per round")
for k, _ in queries:
    print(f"{k:26} {statistics.median(wall[k]):10.3f} s {statistics.median(proc[k]):9.3f} s   "
          + " ".join(f"{x:.2f}" for x in wall[k]))
for k in ("per-row (array)", "per-row (record)"):
    rw = statistics.median(wall[k]) / statistics.median(wall["predict_table"])
    rc = statistics.median(proc[k]) / statistics.median(proc["predict_table"])
    per = [a / b for a, b in zip(wall[k], wall["predict_table"])]
    print(f"ratio {k} / predict_table: wall {rw:.2f}x, cpu {rc:.2f}x "
          f"(per round {min(per):.2f}..{max(per):.2f})")
print(f"max |per-row - predict_table| = {maxdiff:.3g}")
if ranks > 1:
    k = f"predict_table, {ranks} ranks"
    rw = statistics.median(wall["predict_table"]) / statistics.median(wall[k])
    per = [a / b for a, b in zip(wall["predict_table"], wall[k])]
    cur.execute("SELECT max(abs(r.prediction - t.prediction)) FROM b_ranks r JOIN b_tab t USING (id)")
    print(f"ratio predict_table / predict_table with {ranks} ranks: wall {rw:.2f}x "
          f"(per round {min(per):.2f}..{max(per):.2f}); max |difference| = {cur.fetchone()[0]:.3g}")
EOF
