#!/bin/bash
# predict_ranks.sh: dml_predict_table(..., workers => N) on one host.
#   1. workers => 2 and 3 give, row for row, the predictions of the backend
#      (workers => 1): a regression MLP (1e-6) and a classifier (the same
#      labels, probabilities within 1e-6), on a plain and on a partitioned
#      table; the NOTICE says how many ranks ran where; numeric features
#      come in dml.pack_rows64 blocks, with int8 (past 2^32), int2 and NULL
#      ids back as they were.
#   2. an ordinary role: its predictions cover only the rows its row-level
#      security policy shows it, equal to its own backend's; a column it may
#      not read, or another role's model without a grant, is an error before
#      any rank starts; no table is left by a failed call.
#   3. an error in a rank that is not rank 0 (a NULL feature in the last
#      slice) reaches the caller with dml_predict's SQLSTATE and message;
#      so does device 'gpu' without a GPU, found by every rank at start.
#   4. cancel and pg_terminate_backend during a 2-rank predict end every job
#      process and leave no table and no job directory.
# Runs against the cluster regress/run.sh started (or /work/wt/one.sh).
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh
job_procs() { pgc_job_procs; }
job_dirs() { pgc_job_dirs; }
table_exists() { [ "$(pgc_psql -t -A -c "SELECT to_regclass('$1') IS NOT NULL")" = t ]; }
q() { pgc_psql -t -A -c "$1"; }

pgc_psql -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS pr_data, pr_part, pr_big, pr_r1, pr_r2,
		pr_r3, pr_c1, pr_c2, pr_p1, pr_p2, pr_n1, pr_nb, pr_ids, pr_i1, pr_i2, pr_s1, pr_s2, pr_null CASCADE;
	DROP ROLE IF EXISTS pr_user; CREATE ROLE pr_user LOGIN;
	CREATE TABLE pr_data AS SELECT i AS id, sin(i * 0.1) AS x1, cos(i * 0.3)::real AS x2,
		(i % 7)::int AS x3, (ARRAY['a','b','c'])[1 + i % 3] AS c,
		sin(i * 0.1) + 0.5 * cos(i * 0.3) AS y, (i % 3 = 0) AS lab
		FROM generate_series(1, 30000) i;
	CREATE TABLE pr_part (id int, x1 float8, x2 real, x3 int, c text, y float8, lab boolean)
		PARTITION BY RANGE (id);
	CREATE TABLE pr_part_1 PARTITION OF pr_part FOR VALUES FROM (MINVALUE) TO (12000);
	CREATE TABLE pr_part_2 PARTITION OF pr_part FOR VALUES FROM (12000) TO (MAXVALUE);
	INSERT INTO pr_part SELECT * FROM pr_data;
	ANALYZE pr_data, pr_part" >/dev/null
pgc_allow_role pr_user

pgc_psql -c "SELECT name FROM dml_train('pr_reg', 'pr_data', 'y', features => '{x1,x2,x3,c}',
	model => 'mlp', hidden => '{16,8}', epochs => 2, workers => 1)" >/dev/null 2>&1
pgc_psql -c "SELECT name FROM dml_train('pr_cls', 'pr_data', 'lab', features => '{x1,x2,x3,c}',
	model => 'mlp', hidden => '{8}', epochs => 2, workers => 1)" >/dev/null 2>&1
check "two models to predict with" \
	'[ "$(q "SELECT count(DISTINCT name) FROM dml.models WHERE name IN ('"'pr_reg'"', '"'pr_cls'"')")" = 2 ]'

# equal: same ids, each prediction within 1e-6 (and the same label)
same_reg() {
	[ "$(q "SELECT count(*) FROM $1 a FULL JOIN $2 b USING (id)
		WHERE a.id IS NULL OR b.id IS NULL OR abs(a.prediction - b.prediction) > 1e-6
			OR a.prediction IS NULL OR b.prediction IS NULL")" = 0 ] &&
		[ "$(q "SELECT count(*) FROM $1")" = "$3" ]
}
same_cls() {
	[ "$(q "SELECT count(*) FROM $1 a FULL JOIN $2 b USING (id)
		WHERE a.id IS NULL OR b.id IS NULL OR a.prediction IS DISTINCT FROM b.prediction
			OR abs(a.probability - b.probability) > 1e-6")" = 0 ] &&
		[ "$(q "SELECT count(*) FROM $1")" = "$3" ]
}

# --- 1. N ranks equal one --------------------------------------------------
pgc_psql -c "DROP TABLE IF EXISTS pr_r1, pr_r2, pr_r3, pr_c1, pr_c2, pr_p1, pr_p2" >/dev/null 2>&1
pgc_psql -c "CALL dml_predict_table('pr_reg', 'pr_data', 'pr_r1', 'id', workers => 1)" >/dev/null 2>&1
pgc_psql -c "CALL dml_predict_table('pr_reg', 'pr_data', 'pr_r2', 'id', workers => 2)" >$T/pr-r2.log 2>&1
check "regression: workers => 2 succeeds" '[ $? -eq 0 ] || true; table_exists pr_r2'
check "regression: the NOTICE says 2 ranks and their hosts" \
	"grep -q 'dml_predict_table: 2 ranks on hosts ' $T/pr-r2.log"
check "regression: 2 ranks give the backend's predictions, row for row (1e-6)" 'same_reg pr_r1 pr_r2 30000'
pgc_psql -c "CALL dml_predict_table('pr_reg', 'pr_data', 'pr_r3', 'id', workers => 3)" >/dev/null 2>&1
check "regression: 3 ranks give the backend's predictions, row for row (1e-6)" 'same_reg pr_r1 pr_r3 30000'
pgc_psql -c "CALL dml_predict_table('pr_cls', 'pr_data', 'pr_c1', 'id')" >/dev/null 2>&1
pgc_psql -c "CALL dml_predict_table('pr_cls', 'pr_data', 'pr_c2', 'id', workers => 2)" >/dev/null 2>&1
check "classifier: 2 ranks give the backend's labels and probabilities (1e-6)" 'same_cls pr_c1 pr_c2 30000'
pgc_psql -c "CALL dml_predict_table('pr_reg', 'pr_part', 'pr_p1', 'id')" >/dev/null 2>&1
pgc_psql -c "CALL dml_predict_table('pr_reg', 'pr_part', 'pr_p2', 'id', workers => 2)" >/dev/null 2>&1
check "partitioned: 2 ranks over the leaves give the backend's predictions" 'same_reg pr_p1 pr_p2 30000'
check "partitioned: the same as the plain table's" 'same_reg pr_r1 pr_p2 30000'
# every feature a number and an integer id: the ranks read dml.pack_rows64 blocks
pgc_psql -c "SELECT name FROM dml_train('pr_num', 'pr_data', 'y', features => '{x1,x2,x3}',
	model => 'mlp', hidden => '{16,8}', epochs => 2, workers => 1)" >/dev/null 2>&1
pgc_psql -c "CALL dml_predict_table('pr_num', 'pr_data', 'pr_n1', 'id')" >/dev/null 2>&1
pgc_psql -c "CALL dml_predict_table('pr_num', 'pr_data', 'pr_nb', 'id', workers => 2)" >/dev/null 2>&1
check "numeric features (packed blocks): 2 ranks give the backend's predictions (1e-6)" 'same_reg pr_n1 pr_nb 30000'
# dml_predict, a row at a time, against the batches: where the MLP's layers
# run on dml's kernels (AVX-512, or AVX2 with FMA) the cached model's row
# alone runs as in a batch (kernels/format.c, predict_alone): the same
# bits, in the backend's batches and in 2 ranks'; otherwise within 1e-6
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then tol=0; else tol=1e-6; fi
check "dml_predict row by row: the batches' predictions (off by at most $tol)" \
	'[ "$(q "SELECT count(*) FROM pr_data d JOIN pr_n1 a USING (id) JOIN pr_nb b USING (id)
		WHERE abs(dml_predict('"'pr_num'"', ARRAY[d.x1, d.x2, d.x3]) - a.prediction) > $tol
		   OR abs(dml_predict('"'pr_num'"', ARRAY[d.x1, d.x2, d.x3]) - b.prediction) > $tol")" = 0 ]'
pgc_psql -c "CREATE TABLE pr_ids AS SELECT CASE WHEN id = 777 THEN NULL ELSE id::int8 * 1000000 END AS id,
		(id % 30000)::int2 AS sid, x1, x2, x3 FROM pr_data" >/dev/null
pgc_psql -c "CALL dml_predict_table('pr_num', 'pr_ids', 'pr_i1', 'id')" >/dev/null 2>&1
pgc_psql -c "CALL dml_predict_table('pr_num', 'pr_ids', 'pr_i2', 'id', workers => 2)" >/dev/null 2>&1
check "a bigint id past 2^32, and a NULL id, come back as they were" \
	'[ "$(q "SELECT count(*) FROM pr_i1 a JOIN pr_i2 b USING (id) WHERE abs(a.prediction - b.prediction) <= 1e-6")" = 29999 ] &&
	 [ "$(q "SELECT count(*) || '"'/'"' || max(id) FROM pr_i2 WHERE id IS NULL OR id = 30000000000")" = "2/30000000000" ]'
pgc_psql -c "CALL dml_predict_table('pr_num', 'pr_ids', 'pr_s1', 'sid')" >/dev/null 2>&1
pgc_psql -c "CALL dml_predict_table('pr_num', 'pr_ids', 'pr_s2', 'sid', workers => 3)" >/dev/null 2>&1
check "a smallint id: 3 ranks, the backend's rows (1e-6)" \
	'[ "$(q "SELECT count(*) FILTER (WHERE abs(a.prediction - b.prediction) <= 1e-6) || '"'/'"' || count(*)
		FROM pr_s1 a FULL JOIN pr_s2 b USING (sid)")" = 30000/30000 ]'
pgc_psql -c "CALL dml_predict_table('pr_reg', 'pr_data', 'pr_bad', 'id', workers => 0)" >$T/pr-bad.log 2>&1
check "workers => 0 is refused" "grep -q 'workers must be between 1 and' $T/pr-bad.log && ! table_exists pr_bad"
check "nothing of any job is left" '[ "$(job_procs)" -eq 0 ] && [ "$(job_dirs)" -eq 0 ]'

# --- 2. an ordinary role ---------------------------------------------------
pgc_psql -c "ALTER TABLE pr_data ENABLE ROW LEVEL SECURITY;
	GRANT SELECT ON pr_data TO pr_user; GRANT CREATE ON SCHEMA public TO pr_user;
	CREATE POLICY pr_even ON pr_data FOR SELECT TO pr_user USING (id % 2 = 0)" >/dev/null
as_user() { pgc_psql -c "SET ROLE pr_user" -c "$1"; }
as_user "CALL dml_predict_table('pr_reg', 'pr_data', 'pr_u0', 'id', workers => 2)" >$T/pr-u0.log 2>&1
check "another role's model without a grant: an error, no table" \
	"grep -q 'ERROR:' $T/pr-u0.log && grep -q 'pr_reg' $T/pr-u0.log && ! table_exists pr_u0"
sed 's/^/# /' $T/pr-u0.log | head -3
pgc_psql -c "SELECT dml_grant('pr_reg', 'pr_user')" >/dev/null
as_user "CALL dml_predict_table('pr_reg', 'pr_data', 'pr_u1', 'id')" >/dev/null 2>&1
as_user "CALL dml_predict_table('pr_reg', 'pr_data', 'pr_u2', 'id', workers => 2)" >$T/pr-u2.log 2>&1
check "ordinary role: 2 ranks predict its rows" 'table_exists pr_u2'
check "ordinary role: only the rows its policy shows (15000, even ids)" \
	'[ "$(q "SELECT count(*) || '"'/'"' || count(*) FILTER (WHERE id % 2 = 0) FROM pr_u2")" = 15000/15000 ]'
check "ordinary role: equal to its backend's predictions" 'same_reg pr_u1 pr_u2 15000'
check "ordinary role: and to the owner's on those rows" \
	'[ "$(q "SELECT count(*) FROM pr_u2 a JOIN pr_r1 b USING (id) WHERE abs(a.prediction - b.prediction) <= 1e-6")" = 15000 ]'
pgc_psql -c "REVOKE SELECT ON pr_data FROM pr_user; GRANT SELECT (id, x1, x2, x3) ON pr_data TO pr_user" >/dev/null
as_user "CALL dml_predict_table('pr_reg', 'pr_data', 'pr_u3', 'id', workers => 2)" >$T/pr-u3.log 2>&1
check "a column the role may not read: permission denied, no table, no job" \
	"grep -q 'permission denied' $T/pr-u3.log && ! table_exists pr_u3 && [ \"\$(job_procs)\" -eq 0 ]"
sed 's/^/# /' $T/pr-u3.log | head -2
pgc_psql -c "DROP TABLE IF EXISTS pr_u1, pr_u2; ALTER TABLE pr_data DISABLE ROW LEVEL SECURITY" >/dev/null

# --- 3. an error in rank 1 ------------------------------------------------
pgc_psql -c "CREATE TABLE pr_null AS SELECT * FROM pr_data;
	UPDATE pr_null SET x1 = NULL WHERE id = 30000" >/dev/null
pgc_psql -v VERBOSITY=verbose -c "CALL dml_predict_table('pr_reg', 'pr_null', 'pr_n2', 'id', workers => 2)" \
	>$T/pr-n2.log 2>&1
check "a NULL feature in rank 1's slice: dml_predict's error (22004)" \
	"grep -q 'ERROR:  22004: feature \"x1\" is NULL' $T/pr-n2.log"
check "a NULL feature in rank 1's slice: no table, nothing left" \
	'! table_exists pr_n2 && [ "$(job_procs)" -eq 0 ] && [ "$(job_dirs)" -eq 0 ]'
sed 's/^/# /' $T/pr-n2.log | head -3
pgc_psql -c "CALL dml_predict_table('pr_num', 'pr_null', 'pr_n3', 'id', workers => 2)" >$T/pr-n3.log 2>&1
check "... and from a packed block (numeric features): the same error, no table" \
	"grep -q 'ERROR:  feature \"x1\" is NULL' $T/pr-n3.log && ! table_exists pr_n3"
pgc_psql -c "UPDATE pr_null SET x1 = 'NaN' WHERE id = 30000" >/dev/null
pgc_psql -c "CALL dml_predict_table('pr_num', 'pr_null', 'pr_n4', 'id', workers => 2)" >$T/pr-n4.log 2>&1
check "a NaN feature in a packed block: dml_predict's error" \
	"grep -q 'ERROR:  feature \"x1\" is NaN or infinite' $T/pr-n4.log && ! table_exists pr_n4 && [ \"\$(job_procs)\" -eq 0 ]"
pgc_psql -c "DROP TABLE pr_null" >/dev/null
# device 'gpu' on 2 ranks where no GPU is visible: every rank finds it before
# rank 0 relays anything; the error still reaches the caller, nothing hangs
if { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; } ||
	[ -e /dev/nvidia0 ]; then
	echo "skip - device 'gpu' on 2 ranks without a GPU: a GPU is visible here # SKIP"
else
	pgc_psql -v VERBOSITY=verbose -c "CALL dml_predict_table('pr_reg', 'pr_data', 'pr_g2', 'id',
		device => 'gpu', workers => 2)" >$T/pr-g2.log 2>&1
	check "device 'gpu' on 2 ranks without a GPU: SQLSTATE 55000, no table, nothing left" \
		"grep -q 'ERROR:  55000: device .gpu. was asked for' $T/pr-g2.log && ! table_exists pr_g2 &&
		 [ \"\$(job_procs)\" -eq 0 ]"
	sed 's/^/# /' $T/pr-g2.log | grep ERROR | head -1
fi

# --- 4. cancel and terminate ------------------------------------------------
pgc_psql -c "CREATE TABLE pr_big AS SELECT i AS id, sin(i * 0.1) AS x1, cos(i * 0.3)::real AS x2,
		(i % 7)::int AS x3, (ARRAY['a','b','c'])[1 + i % 3] AS c FROM generate_series(1, 400000) i" >/dev/null
pgc_psql -c "SELECT name FROM dml_train('pr_wide', 'pr_data', 'y', features => '{x1,x2,x3,c}',
	model => 'mlp', hidden => '{512,512}', epochs => 1, workers => 1)" >/dev/null 2>&1
for how in cancel terminate; do
	out=pr_stop_$how
	pgc_psql -c "CALL dml_predict_table('pr_wide', 'pr_big', '$out', 'id', workers => 2)" >$T/pr-$how.log 2>&1 &
	client=$!
	wait_until 60 '[ "$(q "SELECT count(*) FROM pg_stat_activity WHERE application_name = '"'"'dml-worker'"'"'")" -ge 2 ]'
	check "$how: both ranks are reading ($(job_procs) processes)" '[ "$(job_procs)" -ge 2 ]'
	stop_job "$how" "$how" "$out" $T/pr-$how.log $client 200
	check "$how: no target table left" "! table_exists $out"
	check "$how: no job directory left" '[ "$(job_dirs)" -eq 0 ]'
done

pgc_psql -c "DROP TABLE IF EXISTS pr_data, pr_part, pr_big, pr_r1, pr_r2, pr_r3, pr_c1, pr_c2, pr_p1, pr_p2,
	pr_n1, pr_nb, pr_ids, pr_i1, pr_i2, pr_s1, pr_s2 CASCADE" >/dev/null
pgc_psql -c "SELECT dml_drop_model(n) FROM unnest('{pr_reg,pr_cls,pr_wide,pr_num}'::text[]) n" >/dev/null 2>&1
pgc_psql -c "REVOKE ALL ON SCHEMA public FROM pr_user" -c "DROP OWNED BY pr_user" -c "DROP ROLE pr_user" >/dev/null 2>&1
check "the server is still up" 'pgc_psql -t -A -c "SELECT 1" | grep -q 1'
