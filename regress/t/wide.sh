#!/bin/bash
# wide.sh: tables as wide as real ones train and predict (PostgreSQL's
# function-argument limit of 100 is no limit on features), and an error that
# would happen again on every try (a SQL error in a worker's query, a bad
# value in the data) fails the job at once with that error, not restarted.
#
# Runs against the cluster regress/run.sh started (PGHOST, PGPORT, PGUSER,
# PGDATABASE=dml_regress with dml.test_hooks = on).
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh

q() { pgc_psql -qAt -c "SET client_min_messages = warning" -c "$1" 2>&1; }

# wide TABLE NCOLS: id, c1..cN uniform random, y from the first five
wide() {
	local t=$1 ncol=$2 cols sel
	cols=$(seq -s, -f 'c%g float8' 1 "$ncol")
	sel=$(seq -s, -f 'random() + 0 * %g' 1 "$ncol")
	q "DROP TABLE IF EXISTS $t; CREATE TABLE $t (id int, y float8, $cols)" >/dev/null
	q "SELECT setseed(0.25); INSERT INTO $t SELECT i, 0, $sel FROM generate_series(1, 400) i" >/dev/null
	q "UPDATE $t SET y = c1 + 2 * c2 - c3 + 0.5 * c4 + c5 + (id % 7) * 0.01" >/dev/null
}

for ncol in 300 1000; do
	wide "wide$ncol" "$ncol"
	out=$(q "SELECT model_id IS NOT NULL FROM dml_train('wide$ncol', 'wide$ncol', 'y',
		features => (SELECT array_agg('c' || g ORDER BY g) FROM generate_series(1, $ncol) g),
		workers => 2, options => '{\"in_server\": false}')")
	check "$ncol numeric columns: linear trains with 2 workers ($out)" '[ "$out" = t ]'
	out=$(q "SELECT model_id IS NOT NULL FROM dml_train('wide${ncol}_mlp', 'wide$ncol', 'y',
		features => (SELECT array_agg('c' || g ORDER BY g) FROM generate_series(1, $ncol) g),
		model => 'mlp', hidden => '{8}', epochs => 2, workers => 2)")
	check "$ncol numeric columns: mlp trains with 2 workers ($out)" '[ "$out" = t ]'
	out=$(q "SELECT count(*) FILTER (WHERE dml_predict('wide$ncol', w) IS NOT NULL) FROM wide$ncol w")
	check "$ncol numeric columns: dml_predict by row scores every row ($out)" '[ "$out" = 400 ]'
	out=$(q "CALL dml_predict_table('wide${ncol}_mlp', 'wide$ncol', 'wide${ncol}_scores');
		SELECT count(*) FROM wide${ncol}_scores")
	check "$ncol numeric columns: dml_predict_table scores every row ($out)" '[ "$out" = 400 ]'
done

# a wide numeric + one-hot mix: 250 numbers, 3 text columns
wide widemix 250
q "ALTER TABLE widemix ADD COLUMN k1 text, ADD COLUMN k2 text, ADD COLUMN k3 text, ADD COLUMN label text" >/dev/null
q "UPDATE widemix SET k1 = 'a' || (id % 3), k2 = 'b' || (id % 5), k3 = 'c' || (id % 2),
	label = CASE WHEN y > 2 THEN 'hi' ELSE 'lo' END" >/dev/null
out=$(q "SELECT model_id IS NOT NULL FROM dml_train('widemix', 'widemix', 'label',
	features => (SELECT array_agg('c' || g ORDER BY g) FROM generate_series(1, 250) g) || '{k1,k2,k3}'::text[],
	model => 'logistic', workers => 2)")
check "250 numeric and 3 one-hot columns: logistic trains with 2 workers ($out)" '[ "$out" = t ]'
out=$(q "SELECT count(*) FILTER (WHERE dml_predict_class('widemix', w) IN ('hi', 'lo')) FROM widemix w")
check "250 numeric and 3 one-hot columns: every row gets a class ($out)" '[ "$out" = 400 ]'

# errors that would repeat: no restart, the error as it is
q "DROP TABLE IF EXISTS badlab; CREATE TABLE badlab (x float8, lab int8)" >/dev/null
q "INSERT INTO badlab SELECT i, i % 3 FROM generate_series(1, 2000) i" >/dev/null
q "DROP FUNCTION IF EXISTS dml_t_boom(float8); CREATE FUNCTION dml_t_boom(float8) RETURNS float8
	LANGUAGE plpgsql IMMUTABLE AS \$\$ BEGIN IF \$1 > 1500 THEN RAISE EXCEPTION 'boom at %', \$1
	USING ERRCODE = '22023'; END IF; RETURN \$1; END \$\$" >/dev/null
q "CREATE OR REPLACE VIEW boomv AS SELECT dml_t_boom(x) AS x, x AS y FROM badlab" >/dev/null
out=$(q "SELECT model_id IS NOT NULL FROM dml_train('boom', 'boomv', 'y', workers => 2, options => '{\"in_server\": false, \"max_restarts\": 2}')")
check "a SQL error in a worker's query fails the job with it (${out//$'\n'/ })" \
	'echo "$out" | grep -q "boom at" && ! echo "$out" | grep -q restarting'
# bad data on a plain table, in the last rank's slice: a numeric too large
# for float8
q "DROP TABLE IF EXISTS boomt; CREATE TABLE boomt (x numeric, y float8)" >/dev/null
q "INSERT INTO boomt SELECT i, i FROM generate_series(1, 20000) i" >/dev/null
q "INSERT INTO boomt VALUES (1e400, 1)" >/dev/null
out=$(pgc_psql -qAt -c "SET client_min_messages = notice" -c "SELECT model_id IS NOT NULL FROM dml_train('boom2', 'boomt', 'y',
	model => 'mlp', hidden => '{4}', epochs => 1, workers => 2, options => '{\"max_restarts\": 2}')" 2>&1)
check "bad data in another rank's slice fails the job with its error (${out:0:80}...)" \
	'echo "$out" | grep -q "out of range" && ! echo "$out" | grep -q restarting'
out=$(q "SELECT count(*) FROM dml.models WHERE name IN ('boom', 'boom2')")
check "no model is stored after such an error" '[ "$out" = 0 ]'
check "every job process is gone" 'wait_until 10 "[ \$(pgc_job_procs) -eq 0 ]"'

echo "$n tests"
