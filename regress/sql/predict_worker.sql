--
-- predict_worker: dml_predict_table in a dml-worker (device => 'gpu', and
-- 'auto' where a GPU is visible) writes what the in-backend path writes.
-- The test machine may have no GPU, so the worker's path runs here on its
-- CPU kernels (device => 'worker-cpu', a test hook): the same job, spec,
-- COPY, encoding, streaming and writing, only the GEMMs on the CPU.
-- regress/gpu/predict_table.sh compares a GPU with the CPU where there is one;
-- regress/t/predict_worker.sh covers 'gpu' without a GPU and cancel.
--
SET client_min_messages = warning;
SET extra_float_digits = 0;

CREATE OR REPLACE FUNCTION sqlerr(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE q;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	DECLARE hint text;
	BEGIN
		GET STACKED DIAGNOSTICS hint = PG_EXCEPTION_HINT;
		RETURN SQLSTATE || ': ' || SQLERRM || coalesce(' (hint: ' || nullif(hint, '') || ')', '');
	END;
END $$;

-- every kind of feature: float8, float4, int, boolean, an array, a category
CREATE TABLE wp AS
SELECT i, 'row ' || i AS tid, x1, x2, n, flag, v, color,
	   2 * x1 - x2 + 0.5 * n + v[1] - v[2] + (color = 'red')::int + flag::int AS y,
	   CASE WHEN x1 + v[2] > 0.4 THEN 'high' WHEN x1 + v[2] > -0.4 THEN 'mid' ELSE 'low' END AS band,
	   x1 - 0.5 * x2 + (color = 'blue')::int > 0 AS yes
FROM (SELECT i, sin(i * 0.37)::float8 AS x1, cos(i * 0.91)::float4 AS x2, (i % 5)::int AS n,
			 i % 7 = 0 AS flag, ARRAY[sin(i * 0.1), cos(i * 0.23)]::float8[] AS v,
			 (ARRAY['red', 'green', 'blue'])[1 + i % 3] AS color
	  FROM generate_series(1, 5000) i) s;

SELECT name, kind FROM dml_train('wreg', 'wp', 'y', features => '{x1,x2,n,flag,v,color}',
								 model => 'mlp', hidden => '{16,8}', epochs => 3, workers => 1);
SELECT name, kind FROM dml_train('wcls', 'wp', 'band', features => '{x1,x2,n,flag,v,color}',
								 model => 'mlp', hidden => '{16}', epochs => 3, workers => 1);
SELECT name, kind FROM dml_train('wbin', 'wp', 'yes', features => '{x1,x2,color}', workers => 1,
								 optimizer => 'newton');

-- regression, by id: the worker says where it runs, then the same rows and values
SET client_min_messages = notice;
CALL dml_predict_table('wreg', 'wp', 'wreg_cpu', 'i');
CALL dml_predict_table('wreg', 'wp', 'wreg_wrk', 'i', device => 'worker-cpu');
SET client_min_messages = warning;
SELECT (SELECT count(*) FROM wreg_wrk) AS rows,
	   count(*) FILTER (WHERE c.i IS NULL OR w.i IS NULL) AS unmatched,
	   bool_and(abs(c.prediction - w.prediction) <= 1e-6 * (1 + abs(c.prediction))) AS same_value,
	   bool_and(abs(w.prediction - dml_predict('wreg', p)) <= 1e-5 * (1 + abs(w.prediction))) AS equals_dml_predict
FROM wreg_cpu c FULL JOIN wreg_wrk w ON w.i = c.i LEFT JOIN wp p ON p.i = w.i;

-- softmax over three labels, by a text id
CALL dml_predict_table('wcls', 'wp', 'wcls_cpu', 'tid');
CALL dml_predict_table('wcls', 'wp', 'wcls_wrk', 'tid', device => 'worker-cpu');
SELECT (SELECT count(*) FROM wcls_wrk) AS rows,
	   count(*) FILTER (WHERE c.tid IS NULL OR w.tid IS NULL) AS unmatched,
	   bool_and(c.prediction = w.prediction) AS same_class,
	   bool_and(abs(c.probability - w.probability) <= 1e-6) AS same_probability,
	   bool_and(w.prediction = dml_predict_class('wcls', p)) AS equals_dml_predict_class,
	   count(DISTINCT w.prediction) AS classes
FROM wcls_cpu c FULL JOIN wcls_wrk w ON w.tid = c.tid LEFT JOIN wp p ON p.tid = w.tid;

-- logistic on a boolean, rows numbered in scan order; Newton's model is
-- float64: the worker computes it in float64 as the backend does (inputs
-- read at full precision), so probabilities agree to 1e-12
CALL dml_predict_table('wbin', 'wp', 'wbin_cpu');
SET client_min_messages = notice;
CALL dml_predict_table('wbin', 'wp', 'wbin_wrk', device => 'worker-cpu');
SET client_min_messages = warning;
SELECT (SELECT count(*) FROM wbin_wrk) AS rows,
	   count(*) FILTER (WHERE c.row_number IS NULL OR w.row_number IS NULL) AS unmatched,
	   bool_and(c.prediction = w.prediction) AS same_class,
	   bool_and(abs(c.probability - w.probability) <= 1e-12) AS same_probability
FROM wbin_cpu c FULL JOIN wbin_wrk w ON w.row_number = c.row_number;

-- float64 models in the worker: exact least squares and softmax by Newton,
-- against dml_predict / dml_predict_proba (both float64) to 1e-12; a
-- float32 rounding anywhere would show as 1e-8 or more
SELECT name FROM dml_train('wlin', 'wp', 'y', features => '{x1,x2,n,v}', optimizer => 'exact');
SELECT name FROM dml_train('wsm', 'wp', 'band', features => '{x1,x2,n}', model => 'softmax',
						   optimizer => 'newton', weight_decay => 0.01, workers => 1);
SET client_min_messages = notice;
CALL dml_predict_table('wlin', 'wp', 'wlin_wrk', 'i', device => 'worker-cpu');
SET client_min_messages = warning;
CALL dml_predict_table('wsm', 'wp', 'wsm_wrk', 'i', device => 'worker-cpu');
SELECT count(*) AS rows,
	   bool_and(abs(w.prediction - dml_predict('wlin', p)) <=
				1e-12 * (1 + abs(w.prediction))) AS linear_equals_dml_predict
FROM wlin_wrk w JOIN wp p ON p.i = w.i;
SELECT count(*) AS rows,
	   bool_and(w.prediction = dml_predict_class('wsm', p)) AS same_class,
	   bool_and(abs(w.probability - (SELECT max(v) FROM unnest(dml_predict_proba('wsm', p)) v))
				<= 1e-12) AS softmax_equals_dml_predict_proba
FROM wsm_wrk w JOIN wp p ON p.i = w.i;

-- NULL ids stay NULL; numeric and integer columns are read as numbers; an
-- unseen category is all zeros, in both paths
CREATE TABLE wp2 AS
SELECT CASE WHEN i % 10 = 0 THEN NULL ELSE i::numeric END AS i, x1::numeric AS x1, x2,
	   n::int8 AS n, flag, v::float4[] AS v,
	   CASE WHEN i % 4 = 0 THEN 'purple' ELSE color END AS color
FROM wp WHERE i <= 300;
CALL dml_predict_table('wreg', 'wp2', 'wp2_cpu', 'i');
CALL dml_predict_table('wreg', 'wp2', 'wp2_wrk', 'i', device => 'worker-cpu');
SELECT count(*) AS rows, count(*) FILTER (WHERE i IS NULL) AS null_ids,
	   -- the NULL ids' predictions, in order, to float32 GEMM rounding: the worker
	   -- may run other BLAS kernels than the backend (dml_blas_core_override)
	   (SELECT count(c.p) = 30 AND count(w.p) = 30 AND bool_and(abs(c.p - w.p) <= 1e-6 * (1 + abs(c.p)))
		FROM (SELECT prediction AS p, row_number() OVER (ORDER BY prediction) AS r FROM wp2_cpu WHERE i IS NULL) c
		FULL JOIN (SELECT prediction AS p, row_number() OVER (ORDER BY prediction) AS r FROM wp2_wrk WHERE i IS NULL) w
		USING (r)) AS same_for_null_ids,
	   (SELECT bool_and(abs(c.prediction - w.prediction) <= 1e-6 * (1 + abs(c.prediction)))
		FROM wp2_cpu c JOIN wp2_wrk w ON w.i = c.i) AS same_value,
	   pg_typeof((SELECT i FROM wp2_wrk LIMIT 1)) AS id_type
FROM wp2_wrk;

-- row-level security applies to the worker as to the backend: it reads as the caller
CREATE ROLE dml_wp_reader LOGIN;
GRANT SELECT ON wp TO dml_wp_reader;
GRANT CREATE ON SCHEMA public TO dml_wp_reader;
SELECT dml_grant('wreg', 'dml_wp_reader');
ALTER TABLE wp ENABLE ROW LEVEL SECURITY;
CREATE POLICY wp_odd ON wp FOR SELECT TO dml_wp_reader USING (i % 2 = 1);
SET ROLE dml_wp_reader;
CALL dml_predict_table('wreg', 'wp', 'wrls_cpu', 'i');
CALL dml_predict_table('wreg', 'wp', 'wrls_wrk', 'i', device => 'worker-cpu');
SELECT (SELECT count(*) FROM wrls_cpu) AS cpu_rows, (SELECT count(*) FROM wrls_wrk) AS worker_rows,
	   (SELECT bool_and(i % 2 = 1) FROM wrls_wrk) AS only_visible_rows;
RESET ROLE;
ALTER TABLE wp DISABLE ROW LEVEL SECURITY;
REVOKE SELECT ON wp FROM dml_wp_reader;
SET ROLE dml_wp_reader;
SELECT sqlerr($$CALL dml_predict_table('wreg', 'wp', 'wdenied', 'i', device => 'worker-cpu')$$);
RESET ROLE;
DROP TABLE wrls_cpu, wrls_wrk;
REVOKE CREATE ON SCHEMA public FROM dml_wp_reader;
SELECT dml_revoke('wreg', 'dml_wp_reader');
DROP POLICY wp_odd ON wp;
DROP ROLE dml_wp_reader;

-- bad rows fail the same way in both paths, and leave no table behind
CREATE TABLE wbad (i int, x1 float8, x2 float4, n int, flag bool, v float8[], color text);
INSERT INTO wbad SELECT i, x1, x2, n, flag, v, color FROM wp WHERE i <= 50;
UPDATE wbad SET x1 = NULL WHERE i = 40;
SELECT sqlerr($$CALL dml_predict_table('wreg', 'wbad', 'wbad_out', 'i')$$) AS cpu,
	   sqlerr($$CALL dml_predict_table('wreg', 'wbad', 'wbad_out', 'i', device => 'worker-cpu')$$) AS worker;
UPDATE wbad SET x1 = 'Infinity' WHERE i = 40;
SELECT sqlerr($$CALL dml_predict_table('wreg', 'wbad', 'wbad_out', 'i')$$) AS cpu,
	   sqlerr($$CALL dml_predict_table('wreg', 'wbad', 'wbad_out', 'i', device => 'worker-cpu')$$) AS worker;
UPDATE wbad SET x1 = 0, v = ARRAY[1, 2, 3] WHERE i = 40;
SELECT sqlerr($$CALL dml_predict_table('wreg', 'wbad', 'wbad_out', 'i')$$) AS cpu,
	   sqlerr($$CALL dml_predict_table('wreg', 'wbad', 'wbad_out', 'i', device => 'worker-cpu')$$) AS worker;
UPDATE wbad SET v = ARRAY[1, NULL] WHERE i = 40;
SELECT sqlerr($$CALL dml_predict_table('wreg', 'wbad', 'wbad_out', 'i')$$) AS cpu,
	   sqlerr($$CALL dml_predict_table('wreg', 'wbad', 'wbad_out', 'i', device => 'worker-cpu')$$) AS worker;
UPDATE wbad SET v = NULL WHERE i = 40;
SELECT sqlerr($$CALL dml_predict_table('wreg', 'wbad', 'wbad_out', 'i')$$) AS cpu,
	   sqlerr($$CALL dml_predict_table('wreg', 'wbad', 'wbad_out', 'i', device => 'worker-cpu')$$) AS worker;
ALTER TABLE wbad ALTER COLUMN x1 TYPE text;
SELECT sqlerr($$CALL dml_predict_table('wreg', 'wbad', 'wbad_out', 'i')$$) AS cpu,
	   sqlerr($$CALL dml_predict_table('wreg', 'wbad', 'wbad_out', 'i', device => 'worker-cpu')$$) AS worker;
ALTER TABLE wbad DROP COLUMN x1;
SELECT sqlerr($$CALL dml_predict_table('wreg', 'wbad', 'wbad_out', 'i')$$) AS cpu,
	   sqlerr($$CALL dml_predict_table('wreg', 'wbad', 'wbad_out', 'i', device => 'worker-cpu')$$) AS worker;
SELECT to_regclass('wbad_out') AS no_table_left;

-- a source altered in the same transaction cannot be read by a worker
BEGIN;
ALTER TABLE wp2 ADD COLUMN extra int;
SELECT sqlerr($$CALL dml_predict_table('wreg', 'wp2', 'walt', 'i', device => 'worker-cpu')$$);
ROLLBACK;

-- devices: 'auto' without a GPU runs in the backend (with one, on the GPU:
-- the same values up to its rounding); unknown devices; the test hook
CALL dml_predict_table('wreg', 'wp', 'wreg_auto', 'i', device => 'auto');
SELECT count(*) AS rows, bool_and(abs(c.prediction - a.prediction) <= 1e-4 * (1 + abs(c.prediction))) AS same_value
FROM wreg_cpu c JOIN wreg_auto a ON a.i = c.i;
SELECT sqlerr($$CALL dml_predict_table('wreg', 'wp', 'wdev', 'i', device => 'tpu')$$);
SELECT sqlerr($$CALL dml_predict_table('wreg', 'wp', 'wdev', 'i', device => NULL)$$);
DROP TABLE wdev;
SET dml.test_hooks = off;
SELECT sqlerr($$CALL dml_predict_table('wreg', 'wp', 'wdev', 'i', device => 'worker-cpu')$$);
RESET dml.test_hooks;

-- in a transaction that rolls back, nothing is left; nothing of any job either
BEGIN;
CALL dml_predict_table('wreg', 'wp', 'wrolled', 'i', device => 'worker-cpu');
SELECT count(*) AS rows_in_transaction FROM wrolled;
ROLLBACK;
SELECT to_regclass('wrolled') AS rolled_back;
SELECT count(*) AS job_dirs FROM pg_ls_dir(current_setting('data_directory') || '/../tmp') d
WHERE d LIKE 'dml-job-%';
