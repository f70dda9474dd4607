#!/bin/bash
#
# predict_table.sh: dml_predict_table on the GPU (one dml-worker, cuBLAS)
# against the in-backend CPU path, through a real server.  Run by
# regress/gpu_check.sh when a CUDA device is visible; it starts its own
# private cluster (regress/pgcluster.sh) and stops it on exit.  Needs the
# extension built and installed for the pg_config on PATH; when it is not
# installed yet, it runs make install (as regress/run.sh does).
#
# Checks, on 150,000 rows (three GPU blocks, the last one partial) of
# numbers, an array and a category:
#   - regression: every row, the same ids, |gpu - cpu| <= 1e-5 + 1e-4 |cpu|
#     (FP32 GEMMs summed in another order; the inputs, standardization and
#     output function are the same code on both sides);
#   - softmax classification: the same label wherever the CPU's top two
#     probabilities are 1e-4 or more apart, probabilities within 1e-5;
#   - device => 'auto' runs on the GPU and says so;
#   - no job process or directory is left.
#
# DML_PREDICT_DEVICE=worker-cpu runs the same script through the worker's
# CPU path (with dml.test_hooks), to check the script itself on a machine
# without a GPU.
#
# Output: ok / not ok lines, then "N passed, N failed, N skipped".

set -u
cd "$(dirname "$0")/../.."
DEVICE=${DML_PREDICT_DEVICE:-gpu}
source regress/gpu/lib.sh
gpu_cluster predict

q -c "CREATE EXTENSION dml" >/dev/null
q -c "ALTER DATABASE postgres SET dml.test_hooks = on" >/dev/null
q -c "CREATE TABLE gp AS
	SELECT i, x1, x2, n, v, color,
		   2 * x1 - x2 + 0.3 * n + v[1] * v[2] + (color = 'red')::int AS y,
		   CASE WHEN x1 + v[2] > 0.4 THEN 'high' WHEN x1 + v[2] > -0.4 THEN 'mid' ELSE 'low' END AS band
	FROM (SELECT i, sin(i * 0.37) AS x1, cos(i * 0.91)::float4 AS x2, i % 5 AS n,
				 ARRAY[sin(i * 0.1), cos(i * 0.23)] AS v, (ARRAY['red', 'green', 'blue'])[1 + i % 3] AS color
		  FROM generate_series(1, 150000) i) s" >/dev/null
q -c "CREATE TABLE gp_train AS SELECT * FROM gp WHERE i % 7 = 0" >/dev/null
q -c "SELECT name FROM dml_train('gpreg', 'gp_train', 'y', features => '{x1,x2,n,v,color}',
	model => 'mlp', hidden => '{256,128}', epochs => 3, device => 'cpu', workers => 1)" >/dev/null 2>&1
q -c "SELECT name FROM dml_train('gpcls', 'gp_train', 'band', features => '{x1,x2,n,v,color}',
	model => 'mlp', hidden => '{128}', epochs => 3, device => 'cpu', workers => 1)" >/dev/null 2>&1
check "models trained" '[ "$(q -c "SELECT count(*) FROM dml.models")" = 2 ]'

q -c "CALL dml_predict_table('gpreg', 'gp', 'reg_cpu', 'i')" >/dev/null 2>&1
if q -c "CALL dml_predict_table('gpreg', 'gp', 'reg_dev', 'i', device => '$DEVICE')" >/tmp/dml-gpu-predict.log 2>&1; then
	ok "regression on $DEVICE: dml_predict_table succeeds"
else
	sed 's/^/#   /' /tmp/dml-gpu-predict.log
	notok "regression on $DEVICE: dml_predict_table succeeds"
fi
sed 's/^/# /' /tmp/dml-gpu-predict.log
where=gpu
[ "$DEVICE" = worker-cpu ] && where=cpu
check "regression on $DEVICE: the worker said it ran on $where" \
	"grep -q 'predicting on $where ' /tmp/dml-gpu-predict.log"
res=$(q -c "SELECT count(*) FILTER (WHERE c.i IS NULL OR d.i IS NULL) || ' ' ||
			count(*) FILTER (WHERE abs(d.prediction - c.prediction) > 1e-5 + 1e-4 * abs(c.prediction)) || ' ' ||
			coalesce(max(abs(d.prediction - c.prediction)), -1) || ' ' || count(*)
		FROM reg_cpu c FULL JOIN reg_dev d ON d.i = c.i" 2>&1)
echo "# regression: unmatched, beyond tolerance, max |diff|, rows: $res"
read -r unmatched beyond maxdiff rows <<<"$res"
check "regression on $DEVICE: the same 150000 ids" '[ "$unmatched" = 0 ] && [ "$rows" = 150000 ]'
check "regression on $DEVICE: every value within 1e-5 + 1e-4 |cpu| of the CPU's (max $maxdiff)" '[ "$beyond" = 0 ]'

q -c "CALL dml_predict_table('gpcls', 'gp', 'cls_cpu', 'i')" >/dev/null 2>&1
q -c "CALL dml_predict_table('gpcls', 'gp', 'cls_dev', 'i', device => '$DEVICE')" >/dev/null 2>&1
res=$(q -c "WITH margin AS (
			SELECT i, (SELECT p[1] - p[2] FROM (SELECT array_agg(x ORDER BY x DESC) AS p
						FROM unnest(dml_predict_proba('gpcls', g)) x) s) AS m
			FROM gp g)
		SELECT count(*) FILTER (WHERE c.i IS NULL OR d.i IS NULL) || ' ' ||
			   count(*) FILTER (WHERE c.prediction <> d.prediction AND margin.m >= 1e-4) || ' ' ||
			   count(*) FILTER (WHERE abs(c.probability - d.probability) > 1e-5) || ' ' || count(*)
		FROM cls_cpu c FULL JOIN cls_dev d ON d.i = c.i LEFT JOIN margin ON margin.i = c.i" 2>&1)
echo "# classification: unmatched, labels differing (clear margin), probabilities beyond 1e-5, rows: $res"
read -r unmatched labels probs rows <<<"$res"
check "classification on $DEVICE: the same 150000 ids" '[ "$unmatched" = 0 ] && [ "$rows" = 150000 ]'
check "classification on $DEVICE: the same label wherever the margin is clear" '[ "$labels" = 0 ]'
check "classification on $DEVICE: probabilities within 1e-5" '[ "$probs" = 0 ]'

if [ "$DEVICE" = gpu ]; then
	q -c "SET client_min_messages = notice" -c "CALL dml_predict_table('gpreg', 'gp', 'reg_auto', 'i', device => 'auto')" \
		>/tmp/dml-gpu-predict.log 2>&1
	check "device 'auto' runs on the GPU and says so" "grep -q 'predicting on gpu' /tmp/dml-gpu-predict.log"
	check "device 'auto' writes what 'gpu' wrote" \
		'[ "$(q -c "SELECT count(*) FROM reg_auto a JOIN reg_dev d USING (i)
				   WHERE abs(a.prediction - d.prediction) <= 1e-6 * (1 + abs(d.prediction))")" = 150000 ]'
fi
rm -f /tmp/dml-gpu-predict.log
check "no job process or directory left" '[ "$(pgc_job_procs)" -eq 0 ] && [ "$(pgc_job_dirs)" -eq 0 ]'
finish
