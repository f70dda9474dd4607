--
-- hostile: names that need quoting, arguments that try to run SQL,
-- privileges, row-level security, out-of-range hyperparameters and bad
-- data.  Every rejection must be a clear error with a SQLSTATE (printed
-- after each statement by :st) and, for bad data, a hint.
--
SET client_min_messages = warning;
SET extra_float_digits = 0;
\set st '\\echo SQLSTATE :SQLSTATE'
CREATE SCHEMA hostile;
SET search_path = hostile, public;

-- a table whose presence proves that no argument ran SQL of its own
CREATE TABLE sentinel (x int);
INSERT INTO sentinel VALUES (1);

--
-- 1. Names with quotes, spaces, semicolons, mixed case, non-ASCII letters
--
CREATE TABLE "We""ird; DROP TABLE sentinel; --Tåble" AS
SELECT i AS "ïd ""key""",
	   sin(i)::float8 AS "Fé ""a"" ture;1",
	   cos(i)::float8 AS "MiXeD Çase",
	   (i % 3)::text AS "kätegorie'); DROP TABLE sentinel; --",
	   (1 + 2 * sin(i) - cos(i) + (i % 3))::float8 AS "tar'get); DROP TABLE sentinel; --"
FROM generate_series(1, 600) i;

SELECT name, version, epochs, workers
FROM dml_train('h''m; DROP TABLE sentinel; --',
			   '"We""ird; DROP TABLE sentinel; --Tåble"',
			   'tar''get); DROP TABLE sentinel; --',
			   features => ARRAY['Fé "a" ture;1', 'MiXeD Çase',
								 'kätegorie''); DROP TABLE sentinel; --']);
:st
SELECT name, version, features
FROM dml_models WHERE name = 'h''m; DROP TABLE sentinel; --';
-- predict by row: columns found by their (hostile) names
SELECT round(max(abs(dml_predict('h''m; DROP TABLE sentinel; --', t)
					 - "tar'get); DROP TABLE sentinel; --"))::numeric, 3) AS max_error
FROM "We""ird; DROP TABLE sentinel; --Tåble" t;
:st
-- the same with an MLP on SGD, 2 workers, default features (all but text)
SELECT name, version, epochs
FROM dml_train('MiXeD Mödel "quoted"', '"We""ird; DROP TABLE sentinel; --Tåble"',
			   'tar''get); DROP TABLE sentinel; --', model => 'mlp', hidden => '{4}',
			   optimizer => 'adam', epochs => 2, workers => 2);
:st
SELECT jsonb_array_length(features) AS nfeatures
FROM dml_models WHERE name = 'MiXeD Mödel "quoted"';
-- batch prediction into a table whose name needs quoting
CALL dml_predict_table('h''m; DROP TABLE sentinel; --',
					   '"We""ird; DROP TABLE sentinel; --Tåble"',
					   '"Öut ""tab""; DROP TABLE sentinel"', 'ïd "key"');
:st
SELECT count(*) FROM "Öut ""tab""; DROP TABLE sentinel";
SELECT (dml_evaluate('h''m; DROP TABLE sentinel; --',
					 '"We""ird; DROP TABLE sentinel; --Tåble"')->>'rows') AS rows;
:st

--
-- 2. Arguments that try to run SQL: each is a name or a value, never SQL
--
SELECT name FROM dml_train('hostile_x', 'sentinel', 'x); DROP TABLE sentinel; --');
:st
SELECT name FROM dml_train('hostile_x', '"We""ird; DROP TABLE sentinel; --Tåble"',
						   'tar''get); DROP TABLE sentinel; --',
						   features => '{"1) FROM pg_class; DROP TABLE sentinel; --"}');
:st
SELECT name FROM dml_train('hostile_x', '"We""ird; DROP TABLE sentinel; --Tåble"',
						   'tar''get); DROP TABLE sentinel; --',
						   features => '{"pg_sleep(1)"}');
:st
SELECT name FROM dml_train('hostile_x', 'sentinel; DROP TABLE sentinel', 'x');
:st
-- (terse: the hint lists every option, and the list grows)
\set VERBOSITY terse
SELECT name FROM dml_train('hostile_x', '"We""ird; DROP TABLE sentinel; --Tåble"',
						   'tar''get); DROP TABLE sentinel; --',
						   options => '{"x\"; DROP TABLE sentinel; --": 1}');
:st
\set VERBOSITY default
SELECT name FROM dml_train('hostile_x', '"We""ird; DROP TABLE sentinel; --Tåble"',
						   'tar''get); DROP TABLE sentinel; --',
						   model => 'linear''; DROP TABLE sentinel; --');
:st
SELECT dml_predict('x''; DROP TABLE sentinel; --', ARRAY[1, 2]::float8[]);
:st
SELECT dml_deploy('x''); DROP TABLE sentinel; --', 1);
:st
SELECT dml_drop_model('x''); DROP TABLE sentinel; --');
:st
SELECT dml_grant('h''m; DROP TABLE sentinel; --', 'x; DROP TABLE sentinel');
:st
CALL dml_predict_table('h''m; DROP TABLE sentinel; --',
					   '"We""ird; DROP TABLE sentinel; --Tåble"',
					   'o; DROP TABLE sentinel', 'ïd "key"');
:st
CALL dml_predict_table('h''m; DROP TABLE sentinel; --',
					   '"We""ird; DROP TABLE sentinel; --Tåble"',
					   'o2', 'x"; DROP TABLE sentinel; --');
:st
SELECT * FROM sentinel;

--
-- 3. Privileges: checked in the backend, before anything is launched
--
CREATE ROLE dml_hostile_nobody LOGIN;
CREATE ROLE dml_hostile_cols LOGIN;
CREATE ROLE dml_hostile_a LOGIN;
CREATE ROLE dml_hostile_b LOGIN;
CREATE ROLE dml_hostile_none LOGIN;
GRANT USAGE ON SCHEMA hostile TO dml_hostile_nobody, dml_hostile_cols,
	dml_hostile_a, dml_hostile_b, dml_hostile_none;
CREATE TABLE priv AS
SELECT i::float8 AS x1, (i % 7)::float8 AS x2, (3 * i)::float8 AS y
FROM generate_series(1, 100) i;
GRANT SELECT (x1, y) ON priv TO dml_hostile_cols;
SET ROLE dml_hostile_nobody;
SELECT name FROM dml_train('priv_nobody', 'priv', 'y', features => '{x1}');
:st
RESET ROLE;
SET ROLE dml_hostile_cols;
-- a used column without SELECT, named or by default
SELECT name FROM dml_train('priv_cols', 'priv', 'y', features => '{x1,x2}');
:st
SELECT name FROM dml_train('priv_cols', 'priv', 'y');
:st
-- the columns it may read are enough
SELECT name, epochs FROM dml_train('priv_cols', 'priv', 'y', features => '{x1}');
:st
SELECT round(dml_predict('priv_cols', ARRAY[10]::float8[])::numeric, 3) AS p;
-- a role cannot switch on the test hooks or choose what runs
SET dml.test_hooks = on;
:st
SET dml.mpirun = '/bin/sh';
:st
SET dml.worker_path = '/bin/sh';
:st
RESET ROLE;

--
-- 4. Row-level security: the workers see only the caller's rows
--
CREATE TABLE rls (owner name, x float8, y float8);
INSERT INTO rls SELECT 'dml_hostile_a', i, 2 * i + 1 FROM generate_series(1, 100) i;
INSERT INTO rls SELECT 'dml_hostile_b', i, -5 * i + 100 FROM generate_series(1, 300) i;
ALTER TABLE rls ENABLE ROW LEVEL SECURITY;
CREATE POLICY mine ON rls USING (owner = current_user);
GRANT SELECT ON rls TO dml_hostile_a, dml_hostile_b, dml_hostile_none;
SET ROLE dml_hostile_a;
SELECT name, epochs FROM dml_train('rls_a', 'rls', 'y', features => '{x}', workers => 2);
:st
SELECT metrics->>'rows' AS rows, round((metrics->>'r2')::numeric, 6) AS r2
FROM dml_models WHERE name = 'rls_a';
SELECT round(dml_predict('rls_a', ARRAY[10]::float8[])::numeric, 3) AS p;
RESET ROLE;
SET ROLE dml_hostile_b;
SELECT name, epochs FROM dml_train('rls_b', 'rls', 'y', features => '{x}', workers => 2,
								   optimizer => 'sgd', epochs => 2);
:st
SELECT metrics->>'rows' AS rows FROM dml_models WHERE name = 'rls_b';
-- another role's model is not there for it
SELECT dml_predict('rls_a', ARRAY[10]::float8[]);
:st
RESET ROLE;
SET ROLE dml_hostile_none;
SELECT name FROM dml_train('rls_none', 'rls', 'y', features => '{x}');
:st
RESET ROLE;

--
-- 5. Out-of-range hyperparameters
--
CREATE TABLE hp AS
SELECT i::float8 AS x, (i % 3)::float8 AS x2, (2 * i + (i % 3))::float8 AS y, (i % 2 = 0) AS b
FROM generate_series(1, 200) i;
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', learning_rate => 0);
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', learning_rate => 'NaN');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', learning_rate => 1e9);
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', batch_size => 0);
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', epochs => 0);
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', epochs => 2000000000);
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', weight_decay => -1);
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', weight_decay => 'NaN');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', validation => 1);
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', patience => -1);
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', workers => 0);
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', workers => 100000);
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', model => 'mlp', hidden => '{0}');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', model => 'mlp', hidden => '{}');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', model => 'mlp',
						   hidden => array_fill(2, ARRAY[40]));
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', model => 'mlp', hidden => '{NULL}');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', model => 'bogus');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', optimizer => 'bogus');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', activation => 'bogus');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', nulls => 'bogus');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', device => 'bogus');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', optimizer => 'exact', model => 'mlp');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'b', model => 'linear');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', model => 'logistic');
:st
-- (terse: the hint lists every option, and the list grows)
\set VERBOSITY terse
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', options => '{"bogus": 1}');
:st
\set VERBOSITY default
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', options => '[1]');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', options => '{"max_restarts": -1}');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', options => '{"max_restarts": "a"}');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', options => '{"checkpoint_every": -1}');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', options => '{"epoch_timeout": -1}');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', options => '{"momentum": 2}');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', options => '{"beta1": 1}');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', options => '{"schedule": "bogus"}');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', options => '{"fault": 5}');
:st
-- a fault that is not "rank:epoch:how" (how = kill, exit, drop or hang,
-- with an optional "!") is refused, not silently ignored
\set VERBOSITY sqlstate
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', options => '{"fault": "0:1:kill; rm -rf /"}');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', options => '{"fault": "zero:one:kill"}');
:st
\set VERBOSITY default
-- the fault hook is refused while dml.test_hooks is off
SET dml.test_hooks = off;
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', options => '{"fault": "0:1:kill"}');
:st
RESET dml.test_hooks;
SELECT name FROM dml_train('', 'hp', 'y');
:st
SELECT name FROM dml_train(repeat('n', 201), 'hp', 'y');
:st
SELECT name FROM dml_train(NULL, 'hp', 'y');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'nope');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', features => '{y}');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', features => '{x,x}');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', features => '{}');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', features => '{NULL}');
:st
SELECT name FROM dml_train('hostile_hp', 'hp', 'y', features => '{ctid}');
:st
SELECT name FROM dml_train('hostile_catalog', 'pg_catalog.pg_class', 'relpages', features => '{reltuples}',
						   workers => 1);
:st

--
-- 6. Bad data: clear errors with a SQLSTATE and a hint
--
CREATE TABLE d_empty (x float8, y float8);
SELECT name FROM dml_train('hostile_d', 'd_empty', 'y');
:st
CREATE TABLE d_one AS SELECT 1.0::float8 AS x, 2.0::float8 AS y;
SELECT name FROM dml_train('hostile_d', 'd_one', 'y');
:st
SELECT name FROM dml_train('hostile_d', 'd_one', 'y', optimizer => 'sgd', epochs => 2);
:st
CREATE TABLE d_class AS SELECT i::float8 AS x, true AS y FROM generate_series(1, 100) i;
SELECT name FROM dml_train('hostile_d', 'd_class', 'y');
:st
CREATE TABLE d_const AS
SELECT i::float8 AS x, 5.0::float8 AS c, (2 * i)::float8 AS y FROM generate_series(1, 100) i;
SELECT name FROM dml_train('hostile_const', 'd_const', 'y');
:st
CREATE TABLE d_null AS
SELECT i::float8 AS x, NULL::float8 AS n, (2 * i)::float8 AS y FROM generate_series(1, 100) i;
SELECT name FROM dml_train('hostile_d', 'd_null', 'y', features => '{x,n}');
:st
SELECT name FROM dml_train('hostile_d', 'd_null', 'y', features => '{x,n}', nulls => 'impute');
:st
CREATE TABLE d_some_null AS
SELECT i::float8 AS x, (2 * i)::float8 AS y FROM generate_series(1, 100) i;
UPDATE d_some_null SET x = NULL WHERE y = 14;
SELECT name FROM dml_train('hostile_d', 'd_some_null', 'y');
:st
UPDATE d_some_null SET x = 7, y = NULL WHERE y = 14;
SELECT name FROM dml_train('hostile_d', 'd_some_null', 'y');
:st
CREATE TABLE d_nan AS SELECT i::float8 AS x, (2 * i)::float8 AS y FROM generate_series(1, 100) i;
UPDATE d_nan SET x = 'NaN' WHERE x = 7;
SELECT name FROM dml_train('hostile_d', 'd_nan', 'y');
:st
UPDATE d_nan SET x = 'Infinity' WHERE x = 'NaN';
SELECT name FROM dml_train('hostile_d', 'd_nan', 'y');
:st
UPDATE d_nan SET x = 7, y = '-Infinity' WHERE x = 'Infinity';
SELECT name FROM dml_train('hostile_d', 'd_nan', 'y');
:st
-- finite in SQL, but beyond what the workers' float32 holds: a data
-- error (22000, like NaN) before anything is stored; only the SQLSTATE is
-- shown, the wording is the product's to choose
CREATE TABLE d_huge AS SELECT i::float8 AS x, (1e300 * i)::float8 AS y FROM generate_series(1, 100) i;
\set VERBOSITY sqlstate
SELECT name FROM dml_train('hostile_d', 'd_huge', 'y');
:st
CREATE TABLE d_huge_x AS SELECT (1e300 * i)::float8 AS x, i::float8 AS y FROM generate_series(1, 100) i;
SELECT name FROM dml_train('hostile_d', 'd_huge_x', 'y');
:st
\set VERBOSITY default
-- feature arrays: wrong element type, NULL elements, ragged, two-dimensional
CREATE TABLE d_arr_text AS
SELECT ARRAY[i::text, 'a'] AS v, (2 * i)::float8 AS y FROM generate_series(1, 100) i;
SELECT name FROM dml_train('hostile_d', 'd_arr_text', 'y', features => '{v}');
:st
CREATE TABLE d_arr_ts AS
SELECT ARRAY[now()] AS v, (2 * i)::float8 AS y FROM generate_series(1, 100) i;
SELECT name FROM dml_train('hostile_d', 'd_arr_ts', 'y', features => '{v}');
:st
CREATE TABLE d_arr AS
SELECT ARRAY[i, (i * 7) % 11]::float8[] AS v, (2 * i)::float8 AS y FROM generate_series(1, 100) i;
UPDATE d_arr SET v = ARRAY[1, NULL]::float8[] WHERE y = 14;
SELECT name FROM dml_train('hostile_d', 'd_arr', 'y', features => '{v}');
:st
UPDATE d_arr SET v = ARRAY[1, 2, 3]::float8[] WHERE y = 14;
SELECT name FROM dml_train('hostile_d', 'd_arr', 'y', features => '{v}');
:st
UPDATE d_arr SET v = ARRAY['NaN', 2]::float8[] WHERE y = 14;
SELECT name FROM dml_train('hostile_d', 'd_arr', 'y', features => '{v}');
:st
CREATE TABLE d_arr2 AS
SELECT ARRAY[ARRAY[i, (i * 7) % 11]]::float8[] AS v, (2 * i)::float8 AS y FROM generate_series(1, 100) i;
SELECT name FROM dml_train('hostile_d', 'd_arr2', 'y', features => '{v}');
:st
CREATE TABLE d_type AS SELECT i::float8 AS x, now() AS t, (2 * i)::float8 AS y FROM generate_series(1, 100) i;
SELECT name FROM dml_train('hostile_d', 'd_type', 'y', features => '{x,t}');
:st
SELECT name FROM dml_train('hostile_d', 'd_type', 't');
:st
-- nothing was stored for any of them
SELECT count(*) FROM dml_models WHERE name IN ('hostile_d', 'hostile_hp', 'hostile_x', 'priv_nobody', 'rls_none');

--
-- 7. Predict with bad input
--
SELECT dml_predict('priv_cols', ARRAY[NULL]::float8[]);
:st
SELECT dml_predict('priv_cols', ARRAY['NaN']::float8[]);
:st
SELECT dml_predict('priv_cols', ARRAY[1, 2]::float8[]);
:st
SELECT dml_predict('priv_cols', ARRAY[[1]]::float8[]);
:st
SELECT dml_predict('priv_cols', ROW(1));
:st
SELECT dml_predict('no such model', ARRAY[1]::float8[]);
:st

-- clean up
SELECT dml_drop_model(name) FROM (SELECT DISTINCT name FROM dml.models
	WHERE name IN ('h''m; DROP TABLE sentinel; --', 'MiXeD Mödel "quoted"',
				   'priv_cols', 'rls_a', 'rls_b', 'hostile_catalog')) m ORDER BY name;
RESET search_path;
DROP SCHEMA hostile CASCADE;
DROP ROLE dml_hostile_nobody, dml_hostile_cols, dml_hostile_a, dml_hostile_b, dml_hostile_none;
