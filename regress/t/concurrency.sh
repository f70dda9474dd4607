#!/bin/bash
# concurrency.sh: two dml_train calls from two connections at once both
# succeed (two names, and two versions of one name); 16 pgbench clients
# running dml_predict see zero errors; a connection predicting while a new
# version trains keeps getting consistent answers (the old version's until
# the new one commits, then the new one's, never a mix within a statement,
# never back).  Runs against the cluster regress/run.sh started.
#
# PGBENCH_SECONDS (default 10) sets the pgbench run; regress/reliability.sh
# runs it for 30.  With CONCURRENCY_RESULTS=FILE, tab-separated lines
#   what  clients  seconds  transactions  errors
# are appended there.
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh
job_procs() { pgc_job_procs 2>/dev/null; }
job_dirs() { pgc_job_dirs 2>/dev/null; }
SECONDS_PGBENCH=${PGBENCH_SECONDS:-10}
CLIENTS=16
RESULTS=${CONCURRENCY_RESULTS:-/dev/null}

W=$(mktemp -d /tmp/dml-conc.XXXXXX)
chmod 755 "$W"
trap 'rm -rf "$W"' EXIT
sql1() { pgc_psql -At -c "$1"; }

sql1 "SET client_min_messages = warning;
	DROP TABLE IF EXISTS conc_data, conc_pts;
	CREATE TABLE conc_data AS
	SELECT i AS id, sin(i * 0.7)::float8 AS x1, cos(i * 1.3)::float8 AS x2,
		   (1 + 2 * sin(i * 0.7) - 3 * cos(i * 1.3) + 0.1 * sin(i * 7.1))::float8 AS y
	FROM generate_series(1, 20000) i;
	CREATE TABLE conc_pts AS SELECT * FROM conc_data WHERE id <= 200;
	GRANT SELECT ON conc_data, conc_pts TO PUBLIC" >/dev/null
sql1 "SELECT dml_drop_model(name) FROM (SELECT DISTINCT name FROM dml.models WHERE name LIKE 'conc\_%') m" >/dev/null

# ---------------------------------------------------------------------
# 1. Two trainings at once, from two connections
# ---------------------------------------------------------------------
train() { # name log [extra]
	pgc_psql -At -c "SET client_min_messages = warning" -c "SELECT name, version FROM dml_train('$1', 'conc_data', 'y',
		features => '{x1,x2}', optimizer => 'adam', epochs => 5, batch_size => 128, workers => 2${3:+, $3})" >"$2" 2>&1
}
train conc_a "$W/a.log" & pa=$!
train conc_b "$W/b.log" & pb=$!
wait $pa; ra=$?
wait $pb; rb=$?
check "two trainings at once: the first succeeds ($(tr '\n' ' ' <"$W/a.log"))" '[ $ra = 0 ] && grep -q "^conc_a|1$" "$W/a.log"'
check "two trainings at once: the second succeeds ($(tr '\n' ' ' <"$W/b.log"))" '[ $rb = 0 ] && grep -q "^conc_b|1$" "$W/b.log"'
train conc_same "$W/s1.log" & pa=$!
train conc_same "$W/s2.log" "seed => 7" & pb=$!
wait $pa; ra=$?
wait $pb; rb=$?
versions=$(sql1 "SELECT string_agg(version::text, ',' ORDER BY version) FROM dml.models WHERE name = 'conc_same'")
check "two versions of one name at once: both succeed ($(cat "$W/s1.log" "$W/s2.log" | tr '\n' ' '))" '[ $ra = 0 ] && [ $rb = 0 ]'
check "two versions of one name at once: versions 1 and 2 stored (${versions:-none})" '[ "$versions" = "1,2" ]'
printf 'concurrent dml_train\t2\t-\t%s\t%s\n' 4 \
	$(( (ra != 0) + (rb != 0) + ($(grep -c ERROR "$W/a.log") > 0) + ($(grep -c ERROR "$W/b.log") > 0) )) >>"$RESULTS"
check "no job process left after the concurrent trainings" '[ "$(job_procs)" -eq 0 ]'

# ---------------------------------------------------------------------
# 2. 16 pgbench clients running dml_predict
# ---------------------------------------------------------------------
cat >"$W/predict.sql" <<'EOF'
\set i random(1, 20000)
SELECT dml_predict('conc_a', ARRAY[sin(:i * 0.7), cos(:i * 1.3)]::float8[]);
SELECT dml_predict('conc_a', t) FROM conc_pts t WHERE id = 1 + :i % 200;
SELECT dml_predict_class('conc_b', ARRAY[0.5, 0.25]::float8[]);
EOF
chmod 644 "$W/predict.sql"
pgc_as_pg pgbench -n -c $CLIENTS -j 2 -T "$SECONDS_PGBENCH" -f "$W/predict.sql" \
	>"$W/pgbench.log" 2>&1
prc=$?
tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$W/pgbench.log")
failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$W/pgbench.log")
aborted=$(grep -c 'aborted in command' "$W/pgbench.log")
errs=$(( ${failed:-0} + aborted + $(grep -cE 'ERROR|FATAL' "$W/pgbench.log") ))
tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$W/pgbench.log" | head -1)
check "pgbench: $CLIENTS clients, ${SECONDS_PGBENCH}s of dml_predict, ${tx:-0} transactions (${tps:-?} tps), $errs errors" \
	'[ $prc = 0 ] && [ "${tx:-0}" -gt 0 ] && [ $errs = 0 ]'
[ $prc = 0 ] || tail -5 "$W/pgbench.log" | sed 's/^/# /'
printf 'pgbench dml_predict\t%s\t%s\t%s\t%s\n' $CLIENTS "$SECONDS_PGBENCH" "${tx:-0}" "$errs" >>"$RESULTS"

# ---------------------------------------------------------------------
# 3. A connection predicting while a new version trains
# ---------------------------------------------------------------------
# version 1: the exact least-squares fit; version 2 will be a few epochs of
# SGD from another seed, so their answers differ
pgc_psql -At -c "SET client_min_messages = warning" \
	-c "SELECT version FROM dml_train('conc_live', 'conc_data', 'y', features => '{x1,x2}')" >/dev/null
Q="SELECT dml_predict('conc_live', ARRAY[0.5, 0.25]::float8[]) || ' ' || (SELECT sum(dml_predict('conc_live', t)) FROM conc_pts t) || ' ' || dml_predict('conc_live', ARRAY[-1, 2]::float8[]);"
# One connection reads through a FIFO, fed by a writer that goes on until
# the training has ended and then sends 50 queries more: the reader sees
# version 1 before the training (at least 5 answers are waited for) and
# version 2 after it, however long the training takes on a busy machine.
# (A fixed script of 400 queries, 8 s of reading, had ended before a
# training under two busy loops did.)
mkfifo "$W/live.fifo"
chmod 644 "$W/live.fifo"
pgc_psql -At -v ON_ERROR_STOP=0 <"$W/live.fifo" >"$W/live.out" 2>&1 &
pl=$!
{
	echo "SET extra_float_digits = 3;"
	while [ ! -e "$W/live.trained" ]; do
		echo "$Q"
		echo "SELECT pg_sleep(0.02);"
	done
	for i in $(seq 1 50); do
		echo "$Q"
		echo "SELECT pg_sleep(0.02);"
	done
} >"$W/live.fifo" &
writer=$!
# the reader is under way before the training starts
# (grep -c reads stdin: it prints one count, 0 before the file has a line)
wait_until 60 '[ "$(cat "$W/live.out" 2>/dev/null | grep -c .)" -ge 5 ]'
pgc_psql -At -c "SET client_min_messages = warning" -c "SELECT version FROM dml_train('conc_live', 'conc_data', 'y',
	features => '{x1,x2}', optimizer => 'sgd', learning_rate => 0.01, batch_size => 16, epochs => 6,
	seed => 9, workers => 2)" >"$W/live_train.log" 2>&1
trc=$?
touch "$W/live.trained"
wait $writer
wait $pl
# the answers of each version, computed alone afterwards
v2=$(pgc_psql -At -c "SET extra_float_digits = 3" -c "$Q")
v1=$(pgc_psql -At -c "SET extra_float_digits = 3" -c "SELECT dml_deploy('conc_live', 1)" -c "$Q" | tail -1)
grep -vE '^$' "$W/live.out" >"$W/live.ans"
total=$(wc -l <"$W/live.ans")
n1=$(grep -cxF "$v1" "$W/live.ans")
n2=$(grep -cxF "$v2" "$W/live.ans")
other=$((total - n1 - n2))
# once the new version was seen, the old one must not come back
back=$(awk -v a="$v1" -v b="$v2" '$0 == b { seen = 1 } seen && $0 == a { c++ } END { print c + 0 }' "$W/live.ans")
check "live: the new version trained while another connection predicted (rc $trc)" '[ $trc = 0 ]'
check "live: $total answers, $n1 from version 1, $n2 from version 2, $other other (errors or mixed)" \
	'[ "$total" -ge 55 ] && [ $other = 0 ]'
check "live: the connection saw both versions" '[ $n1 -gt 0 ] && [ $n2 -gt 0 ]'
check "live: never back to version 1 after version 2 ($back times)" '[ $back = 0 ]'
[ $other = 0 ] || grep -vxF -e "$v1" -e "$v2" "$W/live.ans" | head -3 | sed 's/^/# /'
printf 'predicting during a new version\t1\t-\t%s\t%s\n' "$total" "$other" >>"$RESULTS"

check "no job process left" '[ "$(job_procs)" -eq 0 ]'
check "no job directory left" '[ "$(job_dirs)" -eq 0 ]'
sql1 "SELECT dml_drop_model(name) FROM (SELECT DISTINCT name FROM dml.models WHERE name LIKE 'conc\_%') m" >/dev/null
sql1 "DROP TABLE IF EXISTS conc_data, conc_pts" >/dev/null
