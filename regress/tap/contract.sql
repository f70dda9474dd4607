-- contract.sql: the SQL surface of dml, as users' scripts rely on it.
-- Run with psql; prints TAP.  Everything happens in a transaction that is
-- rolled back.
\set ON_ERROR_STOP 0
SET client_min_messages = warning;
LOAD 'dml';
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
SELECT plan(66);

-- schema and catalog
SELECT has_schema('dml');
SELECT has_table('dml', 'models', 'dml.models exists');
SELECT has_table('dml', 'epochs', 'dml.epochs exists');
SELECT columns_are('dml', 'models',
	ARRAY['id', 'name', 'version', 'owner', 'created', 'kind', 'device', 'spec', 'weights', 'metrics']);
SELECT col_type_is('dml', 'models', 'spec', 'jsonb', 'spec is jsonb');
SELECT col_type_is('dml', 'models', 'weights', 'bytea', 'weights are bytea');
SELECT col_type_is('dml', 'models', 'metrics', 'jsonb', 'metrics are jsonb');
SELECT has_column('dml', 'epochs', 'loss', 'dml.epochs has loss');
SELECT has_column('dml', 'epochs', 'rows_per_second', 'dml.epochs has rows_per_second');
SELECT has_column('dml', 'epochs', 'bytes_sent', 'dml.epochs has bytes_sent');
SELECT has_column('dml', 'epochs', 'restarts', 'dml.epochs has restarts');
SELECT has_column('dml', 'epochs', 'staleness', 'dml.epochs has staleness');
SELECT has_column('dml', 'epochs', 'bytes_within', 'dml.epochs has bytes_within');
SELECT has_column('dml', 'epochs', 'bytes_across', 'dml.epochs has bytes_across');
SELECT has_column('dml', 'epochs', 'hosts', 'dml.epochs has hosts');
SELECT has_view('dml_models', 'dml_models view exists');

-- functions and their signatures
SELECT has_function('dml_train', ARRAY['text', 'regclass', 'text', 'text[]', 'text', 'integer[]',
	'text', 'text', 'double precision', 'integer', 'integer', 'double precision',
	'double precision', 'integer', 'text', 'integer', 'text', 'bigint', 'jsonb',
	'text', 'integer', 'integer', 'integer', 'text', 'double precision', 'double precision', 'text[]',
	'text', 'double precision'],
	'dml_train(name, relation, target, features, model, hidden, activation, optimizer, learning_rate, batch_size, epochs, weight_decay, validation, patience, nulls, workers, device, seed, options, sync, servers, staleness, average_every, compression, topk_ratio, max_seconds, hosts, class_weight, l1_ratio)');
SELECT function_returns('dml_train', ARRAY['text', 'regclass', 'text', 'text[]', 'text', 'integer[]',
	'text', 'text', 'double precision', 'integer', 'integer', 'double precision',
	'double precision', 'integer', 'text', 'integer', 'text', 'bigint', 'jsonb',
	'text', 'integer', 'integer', 'integer', 'text', 'double precision', 'double precision', 'text[]',
	'text', 'double precision'],
	'dml.train_result');
SELECT is((SELECT array_agg(attname::text ORDER BY attnum) FROM pg_attribute
		   WHERE attrelid = 'dml.train_result'::regclass AND attnum > 0),
		  ARRAY['model_id', 'name', 'version', 'epochs', 'final_loss', 'seconds',
				'rows_per_second', 'workers', 'device', 'kind', 'stopped'], 'dml_train returns id, name, version, epochs, loss, seconds, rows/s, workers, device, kind, stopped');
SELECT is((SELECT proargnames[1:4] FROM pg_proc WHERE proname = 'dml_train'),
		  ARRAY['name', 'relation', 'target', 'features'], 'dml_train argument names');
SELECT is((SELECT proargnames[20:25] FROM pg_proc WHERE proname = 'dml_train'),
		  ARRAY['sync', 'servers', 'staleness', 'average_every', 'compression', 'topk_ratio'],
		  'dml_train sync argument names');
SELECT is((SELECT proargnames[26] FROM pg_proc WHERE proname = 'dml_train'),
		  'max_seconds', 'dml_train time budget argument name');
SELECT is((SELECT proargnames[27] FROM pg_proc WHERE proname = 'dml_train'),
		  'hosts', 'dml_train hosts argument name');
SELECT is((SELECT proargnames[28] FROM pg_proc WHERE proname = 'dml_train'),
		  'class_weight', 'dml_train class_weight argument name');
SELECT is((SELECT proargnames[29] FROM pg_proc WHERE proname = 'dml_train'),
		  'l1_ratio', 'dml_train l1_ratio argument name');
SELECT has_function('dml_predict', ARRAY['text', 'double precision[]']);
SELECT function_returns('dml_predict', ARRAY['text', 'double precision[]'], 'double precision');
SELECT has_function('dml_predict', ARRAY['text', 'record']);
SELECT has_function('dml_predict_class', ARRAY['text', 'double precision[]']);
SELECT has_function('dml_predict_proba', ARRAY['text', 'double precision[]']);
SELECT has_function('dml_evaluate', ARRAY['text', 'regclass']);
SELECT has_function('dml_deploy', ARRAY['text', 'integer']);
SELECT has_function('dml_drop_model', ARRAY['text', 'integer']);
SELECT has_function('dml_grant', ARRAY['text', 'regrole', 'boolean']);
SELECT has_function('dml_revoke', ARRAY['text', 'regrole']);
SELECT is((SELECT prokind FROM pg_proc WHERE proname = 'dml_predict_table'), 'p',
		  'dml_predict_table is a procedure');
SELECT is((SELECT pg_get_function_arguments(oid) FROM pg_proc WHERE proname = 'dml_predict_table'),
		  'IN model text, IN source regclass, IN target text, IN id_column text DEFAULT NULL::text, IN device text DEFAULT ''cpu''::text, IN workers integer DEFAULT NULL::integer',
		  'dml_predict_table(model, source, target, id_column, device => ''cpu'', workers => NULL)');
SELECT is((SELECT provolatile FROM pg_proc WHERE oid = 'dml_predict(text, float8[])'::regprocedure), 's',
		  'dml_predict is STABLE, not IMMUTABLE');
SELECT is((SELECT proparallel FROM pg_proc WHERE oid = 'dml_predict(text, float8[])'::regprocedure), 's',
		  'dml_predict is PARALLEL SAFE');
SELECT is((SELECT proparallel FROM pg_proc WHERE proname = 'dml_train'), 'u',
		  'dml_train is PARALLEL UNSAFE');
-- the record forms: names and flags as ever, planned by dml.predict_support
-- into the column forms when the row is a table's own
SELECT is((SELECT array_agg(format('%s(%s) %s%s%s', proname, array_to_string(proargnames, ','),
								   provolatile, proparallel, proisstrict) ORDER BY proname)
		   FROM pg_proc WHERE oid IN ('dml_predict(text, record)'::regprocedure,
									  'dml_predict_class(text, record)'::regprocedure,
									  'dml_predict_proba(text, record)'::regprocedure)),
		  ARRAY['dml_predict(model,row) sst', 'dml_predict_class(model,row) sst',
				'dml_predict_proba(model,row) sst'],
		  'record forms are STABLE, PARALLEL SAFE, STRICT, with arguments (model, row)');
SELECT is((SELECT array_agg(prosupport::regproc::text ORDER BY proname)
		   FROM pg_proc WHERE oid IN ('dml_predict(text, record)'::regprocedure,
									  'dml_predict_class(text, record)'::regprocedure,
									  'dml_predict_proba(text, record)'::regprocedure)),
		  ARRAY['dml.predict_support', 'dml.predict_support', 'dml.predict_support'],
		  'record forms have the planner support function dml.predict_support');
SELECT is((SELECT array_agg(format('%s %s%s%s', oid::regprocedure, provolatile, proparallel, proisstrict)
							ORDER BY proname)
		   FROM pg_proc WHERE pronamespace = 'dml'::regnamespace AND proname LIKE 'predict%\_cols'),
		  ARRAY['dml.predict_class_cols(text,text[],"any") ssf', 'dml.predict_cols(text,text[],"any") ssf',
				'dml.predict_proba_cols(text,text[],"any") ssf'],
		  'column forms dml.predict_cols, _class_cols, _proba_cols: STABLE, PARALLEL SAFE, not STRICT');
SELECT is((SELECT array_agg(prosupport::regproc::text ORDER BY proname)
		   FROM pg_proc WHERE oid IN ('dml_predict(text, float8[])'::regprocedure,
									  'dml_predict_class(text, float8[])'::regprocedure,
									  'dml_predict_proba(text, float8[])'::regprocedure)),
		  ARRAY['dml.predict_support', 'dml.predict_support', 'dml.predict_support'],
		  'array forms have the planner support function dml.predict_support');
SELECT is((SELECT array_agg(format('%s %s%s%s', oid::regprocedure, provolatile, proparallel, proisstrict)
							ORDER BY proname)
		   FROM pg_proc WHERE pronamespace = 'dml'::regnamespace AND proname LIKE 'predict%\_vals'),
		  ARRAY['dml.predict_class_vals(text,"any") ssf', 'dml.predict_proba_vals(text,"any") ssf',
				'dml.predict_vals(text,"any") ssf'],
		  'values forms dml.predict_vals, _class_vals, _proba_vals: STABLE, PARALLEL SAFE, not STRICT');

-- the extension is not trusted
SELECT is((SELECT bool_or(trusted) FROM pg_available_extension_versions WHERE name = 'dml'), false,
		  'dml is not a trusted extension, in any version');

-- settings: the ones that decide what runs and where are superuser-only
SELECT is((SELECT context FROM pg_settings WHERE name = 'dml.workers'), 'user', 'dml.workers is a user setting');
SELECT is((SELECT context FROM pg_settings WHERE name = 'dml.mpirun'), 'superuser', 'dml.mpirun is superuser-only');
SELECT is((SELECT context FROM pg_settings WHERE name = 'dml.worker_path'), 'superuser', 'dml.worker_path is superuser-only');
SELECT is((SELECT context FROM pg_settings WHERE name = 'dml.conninfo'), 'superuser', 'dml.conninfo is superuser-only');
SELECT is((SELECT context FROM pg_settings WHERE name = 'dml.hosts'), 'superuser', 'dml.hosts is superuser-only');
SELECT is((SELECT context FROM pg_settings WHERE name = 'dml.test_hooks'), 'superuser', 'dml.test_hooks is superuser-only');
SELECT ok(current_setting('dml.device') = 'auto', 'dml.device defaults to auto');
SELECT ok(current_setting('dml.max_restarts')::int = 2, 'dml.max_restarts defaults to 2');

-- privileges: PUBLIC cannot touch the catalog tables
CREATE ROLE tap_user LOGIN;
SELECT ok(NOT has_table_privilege('tap_user', 'dml.models', 'SELECT'), 'PUBLIC cannot read dml.models');
SELECT ok(NOT has_table_privilege('tap_user', 'dml.models', 'INSERT'), 'PUBLIC cannot write dml.models');
SELECT ok(NOT has_table_privilege('tap_user', 'dml.epochs', 'SELECT'), 'PUBLIC cannot read dml.epochs');
SELECT ok(has_table_privilege('tap_user', 'dml_models', 'SELECT'), 'PUBLIC reads its models through dml_models');
SELECT ok(has_function_privilege('tap_user', 'dml.predict_cols(text, text[], "any")', 'EXECUTE') AND
		  has_function_privilege('tap_user', 'dml.predict_class_cols(text, text[], "any")', 'EXECUTE') AND
		  has_function_privilege('tap_user', 'dml.predict_proba_cols(text, text[], "any")', 'EXECUTE'),
		  'PUBLIC may run the column forms');
SELECT ok(has_function_privilege('tap_user', 'dml.predict_vals(text, "any")', 'EXECUTE') AND
		  has_function_privilege('tap_user', 'dml.predict_class_vals(text, "any")', 'EXECUTE') AND
		  has_function_privilege('tap_user', 'dml.predict_proba_vals(text, "any")', 'EXECUTE'),
		  'PUBLIC may run the values forms');
SET LOCAL ROLE tap_user;
SELECT throws_ok($$SET dml.mpirun = '/bin/sh'$$, '42501', NULL, 'a role cannot choose the program that runs');
RESET ROLE;

-- errors, with SQLSTATEs
CREATE TABLE tap_t (x float8, y float8, s text);
SELECT throws_ok($$SELECT dml_train('t', 'tap_t', 'y')$$, '22000', 'relation "tap_t" has no rows', 'empty relation');
INSERT INTO tap_t VALUES (1, 2, 'a'), (2, 3, 'b');
SELECT throws_ok($$SELECT dml_train('t', 'tap_t', 'nope')$$, '42703', NULL, 'missing column');
SELECT throws_ok($$SELECT dml_train('t', 'tap_t', 's', model => 'linear')$$, '42804', NULL, 'non-numeric target');
SELECT throws_ok($$SELECT dml_train('t', 'tap_t', 'y', workers => 0)$$, '22023', 'workers is out of range', 'workers < 1');
SELECT throws_ok($$SELECT dml_train('t', 'tap_t', 'y', model => 'lnear')$$, '22023', 'unknown model kind "lnear"', 'misspelled model kind');

SELECT * FROM finish();
ROLLBACK;
