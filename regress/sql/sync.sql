--
-- sync: the synchronization modes (allreduce, ps, ssp, async, gossip,
-- average), parameter servers, gradient compression, stragglers, and the
-- guarantee each mode makes
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

-- rerunnable: drop this file's models left by an earlier run
DO $$
DECLARE n text;
BEGIN
	FOR n IN SELECT DISTINCT name FROM dml.models WHERE name ~ '^(fb|mb|avg|sep|cmp|shm)_' LOOP
		PERFORM dml_drop_model(n);
	END LOOP;
END $$;

-- largest coordinate difference between two models' parameters, in the
-- data's units: a linear model's coefficients and intercept
CREATE FUNCTION coef_gap(a text, b text) RETURNS float8 LANGUAGE sql AS $$
	SELECT max(abs(x.c::float8 - y.c::float8))
	FROM (SELECT ord, c FROM dml.models m,
			   jsonb_array_elements_text(m.spec->'coefficients' || (m.spec->'intercept'))
			   WITH ORDINALITY AS e(c, ord) WHERE m.name = a) x
	JOIN (SELECT ord, c FROM dml.models m,
			   jsonb_array_elements_text(m.spec->'coefficients' || (m.spec->'intercept'))
			   WITH ORDINALITY AS e(c, ord) WHERE m.name = b) y USING (ord)
$$;

-- A regression with unequal slices: 3,000 rows, three features
CREATE TABLE sreg AS
SELECT i, x1, x2, x3, 3 * x1 - 2 * x2 + 0.5 * x3 + 1 + 0.1 * sin(i * 7.1) AS y
FROM (SELECT i, sin(i * 0.37)::float8 AS x1, cos(i * 0.91)::float8 AS x2,
			 sin(i * 1.31 + 0.2)::float8 AS x3
	  FROM generate_series(1, 3000) i) s;

-- ps equals allreduce in full-batch training (Adam runs on the servers), for 1 and 2 servers
SELECT name, workers FROM dml_train('fb_allreduce', 'sreg', 'y', features => '{x1,x2,x3}',
	model => 'linear', optimizer => 'adam', learning_rate => 0.05, epochs => 25,
	batch_size => 100000, workers => 2);
SELECT name, workers FROM dml_train('fb_ps1', 'sreg', 'y', features => '{x1,x2,x3}',
	model => 'linear', optimizer => 'adam', learning_rate => 0.05, epochs => 25,
	batch_size => 100000, workers => 2, sync => 'ps', servers => 1);
SELECT name, workers FROM dml_train('fb_ps2', 'sreg', 'y', features => '{x1,x2,x3}',
	model => 'linear', optimizer => 'adam', learning_rate => 0.05, epochs => 25,
	batch_size => 100000, workers => 2, sync => 'ps', servers => 2);
SELECT coef_gap('fb_allreduce', 'fb_ps1') < 1e-5 AS ps1_equals_allreduce,
	   coef_gap('fb_allreduce', 'fb_ps2') < 1e-5 AS ps2_equals_allreduce,
	   coef_gap('fb_allreduce', 'fb_ps1') IS NOT NULL AS compared;
-- and it learned: the coefficients are near the truth
SELECT abs((spec->'coefficients'->>0)::float8 - 3) < 0.5 AS learned
FROM dml.models WHERE name = 'fb_ps2';

-- ssp with staleness 0 equals ps, minibatches and momentum included
SELECT name FROM dml_train('mb_ps', 'sreg', 'y', features => '{x1,x2,x3}', model => 'linear',
	optimizer => 'momentum', learning_rate => 0.02, epochs => 3, batch_size => 50,
	workers => 3, sync => 'ps', servers => 2);
SELECT name FROM dml_train('mb_ssp0', 'sreg', 'y', features => '{x1,x2,x3}', model => 'linear',
	optimizer => 'momentum', learning_rate => 0.02, epochs => 3, batch_size => 50,
	workers => 3, sync => 'ssp', staleness => 0, servers => 2);
SELECT coef_gap('mb_ps', 'mb_ssp0') < 1e-5 AS ssp0_equals_ps;
SELECT max(staleness) AS ps_staleness FROM dml_epochs WHERE name IN ('mb_ps', 'mb_ssp0');

-- average with average_every 1 and plain SGD equals allreduce (4 workers)
SELECT name FROM dml_train('avg_allreduce', 'sreg', 'y', features => '{x1,x2,x3}',
	model => 'linear', optimizer => 'sgd', learning_rate => 0.1, epochs => 4, batch_size => 64,
	workers => 4);
SELECT name FROM dml_train('avg_every1', 'sreg', 'y', features => '{x1,x2,x3}',
	model => 'linear', optimizer => 'sgd', learning_rate => 0.1, epochs => 4, batch_size => 64,
	workers => 4, sync => 'average', average_every => 1);
SELECT coef_gap('avg_allreduce', 'avg_every1') < 1e-5 AS average1_equals_allreduce;
-- averaging less often is a different (cheaper) algorithm: fewer bytes
SELECT name FROM dml_train('avg_every8', 'sreg', 'y', features => '{x1,x2,x3}',
	model => 'linear', optimizer => 'sgd', learning_rate => 0.1, epochs => 4, batch_size => 64,
	workers => 4, sync => 'average', average_every => 8);
SELECT (SELECT sum(bytes_sent) FROM dml_epochs WHERE name = 'avg_every8') <
	   (SELECT sum(bytes_sent) FROM dml_epochs WHERE name = 'avg_every1') / 4 AS fewer_bytes,
	   (SELECT (metrics->>'r2')::float8 FROM dml.models WHERE name = 'avg_every8') > 0.95 AS fits;

-- A separable classification problem, with a validation split
CREATE TABLE sep AS
SELECT i, x1, x2, x3, (x1 + 2 * x2 - x3 > 0) AS y
FROM (SELECT i, sin(i * 0.37)::float8 AS x1, cos(i * 0.91)::float8 AS x2,
			 sin(i * 1.7 + 1)::float8 AS x3
	  FROM generate_series(1, 8000) i) s;

SELECT name FROM dml_train('sep_allreduce', 'sep', 'y', features => '{x1,x2,x3}',
	model => 'logistic', optimizer => 'adam', learning_rate => 0.05, epochs => 5,
	batch_size => 64, workers => 4, validation => 0.2);
-- async (2 servers) and gossip reach at least 0.95 of allreduce's validation accuracy
SELECT name FROM dml_train('sep_async', 'sep', 'y', features => '{x1,x2,x3}',
	model => 'logistic', optimizer => 'adam', learning_rate => 0.05, epochs => 5,
	batch_size => 64, workers => 4, validation => 0.2, sync => 'async', servers => 2);
SELECT name FROM dml_train('sep_gossip', 'sep', 'y', features => '{x1,x2,x3}',
	model => 'logistic', optimizer => 'adam', learning_rate => 0.05, epochs => 5,
	batch_size => 64, workers => 4, validation => 0.2, sync => 'gossip');
SELECT m.name, (m.metrics->>'accuracy')::float8 >= 0.95 * (b.metrics->>'accuracy')::float8
		   AS within_95pct_of_allreduce
FROM dml.models m, dml.models b
WHERE m.name IN ('sep_async', 'sep_gossip') AND b.name = 'sep_allreduce' ORDER BY m.name;
-- async records the staleness it saw (updates behind); gossip's replicas
-- end within 5% (relative L2) of their average, the model returned
SELECT bool_and(staleness IS NOT NULL AND staleness >= 0) AS async_staleness_recorded
FROM dml_epochs WHERE name = 'sep_async';
SELECT (metrics->>'consensus_distance')::float8 < 0.05 AS replicas_near_average,
	   metrics->>'sync' AS sync
FROM dml.models WHERE name = 'sep_gossip';

-- ssp with staleness 2 and a slow worker: the staleness each server saw
-- is recorded, reaches the bound (the fast workers run ahead) and never
-- exceeds it
SELECT name FROM dml_train('sep_ssp2', 'sep', 'y', features => '{x1,x2,x3}',
	model => 'logistic', optimizer => 'adam', learning_rate => 0.05, epochs => 2,
	batch_size => 64, workers => 3, servers => 2, validation => 0.2, sync => 'ssp',
	staleness => 2, options => '{"straggler": "1:3"}');
SELECT max(staleness) BETWEEN 1 AND 2 AS bounded_and_reached, count(*) AS epochs
FROM dml_epochs WHERE name = 'sep_ssp2';
SELECT jsonb_array_length(metrics->'server_staleness') AS servers,
	   (SELECT bool_and(v::int <= 2) FROM jsonb_array_elements_text(metrics->'server_staleness') v)
		   AS every_server_within_bound,
	   metrics->>'staleness_bound' AS bound
FROM dml.models WHERE name = 'sep_ssp2';

-- random stragglers ("*:ms:p": each worker slowed in a share of its steps): still within the bound
SELECT name FROM dml_train('sep_ssp_random', 'sep', 'y', features => '{x1,x2,x3}',
	model => 'logistic', optimizer => 'adam', learning_rate => 0.05, epochs => 2,
	batch_size => 64, workers => 3, servers => 1, validation => 0.2, sync => 'ssp',
	staleness => 1, options => '{"straggler": "*:2:0.3"}');
SELECT max(staleness) <= 1 AS bounded, count(*) AS epochs
FROM dml_epochs WHERE name = 'sep_ssp_random';

-- every mode records bytes sent per epoch
SELECT name, bool_and(bytes_sent > 0) AS bytes_recorded
FROM dml_epochs
WHERE name IN ('fb_ps1', 'mb_ssp0', 'avg_every1', 'sep_async', 'sep_gossip', 'sep_ssp2', 'sep_allreduce')
GROUP BY name ORDER BY name;

-- compression with error feedback: fp16 halves the bytes of all-reduce,
-- top-k sends a small fraction; both still learn
SELECT name FROM dml_train('cmp_fp16', 'sep', 'y', features => '{x1,x2,x3}',
	model => 'logistic', optimizer => 'sgd', learning_rate => 0.5, epochs => 5,
	batch_size => 64, workers => 2, validation => 0.2, compression => 'fp16');
SELECT name FROM dml_train('cmp_none', 'sep', 'y', features => '{x1,x2,x3}',
	model => 'logistic', optimizer => 'sgd', learning_rate => 0.5, epochs => 5,
	batch_size => 64, workers => 2, validation => 0.2);
SELECT name FROM dml_train('cmp_topk_ps', 'sep', 'y', features => '{x1,x2,x3}',
	model => 'logistic', optimizer => 'sgd', learning_rate => 0.5, epochs => 5,
	batch_size => 64, workers => 2, validation => 0.2, sync => 'ps', servers => 2,
	compression => 'topk', topk_ratio => 0.5);
SELECT (SELECT sum(bytes_sent) FROM dml_epochs WHERE name = 'cmp_fp16')::float8 /
	   (SELECT sum(bytes_sent) FROM dml_epochs WHERE name = 'cmp_none')
	   BETWEEN 0.5 AND 0.6 AS fp16_about_half_the_bytes;
SELECT name, (metrics->>'accuracy')::float8 > 0.95 AS learned, metrics->>'compression' AS compression
FROM dml.models WHERE name LIKE 'cmp\_%' ORDER BY name;

-- allreduce with every rank on one host goes through shared memory: the
-- ranks sum and step one shared copy of the parameters 2,048 at a time,
-- each taking chunks from its list of 1/W of them or, once its own are
-- done or waiting for a gradient, from another rank's (sync.c's
-- claimed_step); or, for a model of at most 1,024 parameters, every rank
-- sums all of them and steps its own copy.
-- {"shared_memory": false} keeps MPI_Allreduce.  Two ranks give the same
-- weights bit for bit (a + b = b + a; MLPs with Adam, 3-16-8-1 and
-- 3-256-32-1: 209 and 9,281 parameters, the second's ranks each stepping
-- three chunks); three and four ranks sum in
-- another order, so the same model to float rounding (momentum; SGD with
-- 4 parameters on 4 ranks).
SELECT name FROM dml_train('shm_mlp', 'sep', 'y', features => '{x1,x2,x3}', model => 'mlp',
	hidden => '{16,8}', optimizer => 'adam', epochs => 3, batch_size => 64, workers => 2,
	validation => 0.2);
SELECT name FROM dml_train('shm_mlp_mpi', 'sep', 'y', features => '{x1,x2,x3}', model => 'mlp',
	hidden => '{16,8}', optimizer => 'adam', epochs => 3, batch_size => 64, workers => 2,
	validation => 0.2, options => '{"shared_memory": false}');
SELECT name FROM dml_train('shm_mlp_wide', 'sep', 'y', features => '{x1,x2,x3}', model => 'mlp',
	hidden => '{256,32}', optimizer => 'adam', epochs => 3, batch_size => 64, workers => 2,
	validation => 0.2);
SELECT name FROM dml_train('shm_mlp_wide_mpi', 'sep', 'y', features => '{x1,x2,x3}', model => 'mlp',
	hidden => '{256,32}', optimizer => 'adam', epochs => 3, batch_size => 64, workers => 2,
	validation => 0.2, options => '{"shared_memory": false}');
SELECT a.name, a.weights = b.weights AS same_weights,
	   (a.metrics->>'accuracy')::float8 > 0.9 AS learned
FROM dml.models a JOIN dml.models b ON b.name = a.name || '_mpi'
WHERE a.name IN ('shm_mlp', 'shm_mlp_wide') ORDER BY a.name;
-- Whoever steps a chunk, the bits are the same: rank 1 slowed by 3 ms
-- after each gradient (the straggler hook), rank 0 steps rank 1's chunks
-- too, as soon as rank 1's backward pass says each layer is done, and the
-- weights are those of the run without it.  On 3 ranks (more than this
-- machine's cores) the same against the 3 ranks' own run.
SET dml.test_hooks = on;
SELECT name FROM dml_train('shm_mlp_wide_slow', 'sep', 'y', features => '{x1,x2,x3}', model => 'mlp',
	hidden => '{256,32}', optimizer => 'adam', epochs => 3, batch_size => 64, workers => 2,
	validation => 0.2, options => '{"straggler": "1:3"}');
SELECT name FROM dml_train('shm_mlp_wide3', 'sep', 'y', features => '{x1,x2,x3}', model => 'mlp',
	hidden => '{256,32}', optimizer => 'adam', epochs => 2, batch_size => 64, workers => 3,
	validation => 0.2);
SELECT name FROM dml_train('shm_mlp_wide3_slow', 'sep', 'y', features => '{x1,x2,x3}', model => 'mlp',
	hidden => '{256,32}', optimizer => 'adam', epochs => 2, batch_size => 64, workers => 3,
	validation => 0.2, options => '{"straggler": "2:3"}');
RESET dml.test_hooks;
SELECT a.name, a.weights = b.weights AS same_weights,
	   (a.metrics->>'chunks_taken')::int > 0 AS chunks_taken
FROM dml.models a JOIN dml.models b ON a.name = b.name || '_slow'
WHERE b.name IN ('shm_mlp_wide', 'shm_mlp_wide3') ORDER BY a.name;
SELECT name FROM dml_train('shm_mom3', 'sreg', 'y', features => '{x1,x2,x3}', model => 'linear',
	optimizer => 'momentum', learning_rate => 0.02, epochs => 3, batch_size => 50, workers => 3);
SELECT name FROM dml_train('shm_mom3_mpi', 'sreg', 'y', features => '{x1,x2,x3}', model => 'linear',
	optimizer => 'momentum', learning_rate => 0.02, epochs => 3, batch_size => 50, workers => 3,
	options => '{"shared_memory": false}');
SELECT name FROM dml_train('shm_sgd4_mpi', 'sreg', 'y', features => '{x1,x2,x3}',
	model => 'linear', optimizer => 'sgd', learning_rate => 0.1, epochs => 4, batch_size => 64,
	workers => 4, options => '{"shared_memory": false}');
SELECT coef_gap('shm_mom3', 'shm_mom3_mpi') < 1e-5 AS momentum_3_ranks_same,
	   coef_gap('avg_allreduce', 'shm_sgd4_mpi') < 1e-5 AS sgd_4_ranks_same;
SELECT name, metrics->>'allreduce' AS allreduce, (metrics->>'bytes_sent')::float8 > 0 AS bytes_counted
FROM dml.models WHERE name IN ('shm_mlp', 'shm_mlp_mpi', 'shm_mom3', 'avg_allreduce', 'fb_ps1')
ORDER BY name;
SELECT sqlerr($$SELECT dml_train('x', 'sep', 'y', options => '{"shared_memory": "yes"}')$$);

-- options "balance": true: on one host, with the sharded step, each
-- step's rows go into the segment and every rank computes a share of all
-- of them, cut by the ranks' measured seconds a row.  Rank 1 slowed by
-- 3 ms a step (the straggler hook) hands rows to rank 0, over sreg's
-- unequal slices; the gradient is still the global minibatch's, so the
-- model is the default's (each rank its own rows) up to the float rounding
-- of how its sum is grouped (plain SGD: predictions within 1e-4; the two
-- differed by 2e-6).  The metrics count the steps cut otherwise than the
-- rows are held and the rows so moved.  A model small enough to be stepped
-- on every rank (at most 1,024 parameters), or MPI_Allreduce: not balanced.
-- bal_twins(w): the balanced MLP and its default twin on w ranks, rank 1
-- delayed 3 ms a step, as bal_on and bal_off (bal_on3, bal_off3 on 3 ranks)
CREATE FUNCTION bal_twins(w int) RETURNS TABLE (steps_cut_by_speed bool, rows_moved bool,
	off_balanced bool, same_model bool, r2 float8, same_rows bool)
LANGUAGE plpgsql AS $$
DECLARE
	on_name text := format('bal_on%s', nullif(w, 2));
	off_name text := format('bal_off%s', nullif(w, 2));
BEGIN
	FOR i IN 1..2 LOOP
		PERFORM dml_train(CASE i WHEN 1 THEN on_name ELSE off_name END, 'sreg', 'y',
			features => '{x1,x2,x3}', model => 'mlp', hidden => '{256,32}', optimizer => 'sgd',
			learning_rate => 0.05, epochs => 2, batch_size => 32, workers => w,
			options => CASE i WHEN 1 THEN '{"straggler": "1:3", "balance": true}'
						ELSE '{"straggler": "1:3"}' END::jsonb);
	END LOOP;
	RETURN QUERY
	SELECT (a.metrics->'balance'->>'steps')::int > 0,
		   (a.metrics->'balance'->>'rows_moved')::int > 0,
		   b.metrics ? 'balance',
		   (SELECT max(abs(dml_predict(on_name, ARRAY[x1, x2, x3]) -
						   dml_predict(off_name, ARRAY[x1, x2, x3]))) FROM sreg) < 1e-4,
		   (a.metrics->>'r2')::float8,
		   a.metrics->>'train_rows' = b.metrics->>'train_rows'
	FROM dml.models a, dml.models b WHERE a.name = on_name AND b.name = off_name;
END $$;
SELECT steps_cut_by_speed, rows_moved, off_balanced, same_model, r2 > 0.95 AS learned, same_rows
FROM bal_twins(2);
-- three ranks (more than this machine's cores): three shares, two boundaries
SELECT rows_moved, same_model, same_rows FROM bal_twins(3);
SELECT name FROM dml_train('bal_small', 'sreg', 'y', features => '{x1,x2,x3}', model => 'mlp',
	hidden => '{16}', optimizer => 'sgd', epochs => 1, batch_size => 32, workers => 2,
	options => '{"balance": true}');
SELECT name FROM dml_train('bal_mpi', 'sreg', 'y', features => '{x1,x2,x3}', model => 'mlp',
	hidden => '{256,32}', optimizer => 'sgd', epochs => 1, batch_size => 32, workers => 2,
	options => '{"balance": true, "shared_memory": false}');
SELECT name, metrics ? 'balance' AS balanced FROM dml.models
WHERE name IN ('bal_on', 'bal_small', 'bal_mpi') ORDER BY name;
SELECT sqlerr($$SELECT dml_train('x', 'sep', 'y', options => '{"balance": 1}')$$);
DROP FUNCTION bal_twins(int);

-- the choices are checked
SELECT sqlerr($$SELECT dml_train('x', 'sep', 'y', sync => 'bsp')$$);
SELECT sqlerr($$SELECT dml_train('x', 'sep', 'y', servers => 2)$$);
SELECT sqlerr($$SELECT dml_train('x', 'sep', 'y', optimizer => 'sgd', sync => 'ps', servers => 0)$$);
SELECT sqlerr($$SELECT dml_train('x', 'sep', 'y', optimizer => 'sgd', sync => 'ps', staleness => 2)$$);
SELECT sqlerr($$SELECT dml_train('x', 'sep', 'y', optimizer => 'sgd', sync => 'ssp', staleness => -1)$$);
SELECT sqlerr($$SELECT dml_train('x', 'sep', 'y', optimizer => 'sgd', average_every => 4)$$);
SELECT sqlerr($$SELECT dml_train('x', 'sep', 'y', optimizer => 'sgd', sync => 'average', average_every => 0)$$);
SELECT sqlerr($$SELECT dml_train('x', 'sep', 'y', optimizer => 'sgd', compression => 'zip')$$);
SELECT sqlerr($$SELECT dml_train('x', 'sep', 'y', optimizer => 'sgd', sync => 'gossip', compression => 'topk')$$);
SELECT sqlerr($$SELECT dml_train('x', 'sep', 'y', optimizer => 'sgd', compression => 'topk', topk_ratio => 0)$$);
SELECT sqlerr($$SELECT dml_train('x', 'sep', 'y', optimizer => 'newton', sync => 'ps')$$);
SELECT sqlerr($$SELECT dml_train('x', 'sep', 'y', optimizer => 'sgd', sync => 'ps', device => 'gpu')$$);
-- options tf32: GPU GEMMs on TF32 inputs; a boolean, and only where a GPU may train
SELECT sqlerr($$SELECT dml_train('x', 'sep', 'y', optimizer => 'sgd', device => 'cpu', options => '{"tf32": true}')$$);
SELECT sqlerr($$SELECT dml_train('x', 'sep', 'y', optimizer => 'sgd', device => 'gpu', options => '{"tf32": 1}')$$);
-- options shuffle: auto, rows or blocks (regress/t/shuffle.sh trains with each)
SELECT sqlerr($$SELECT dml_train('x', 'sep', 'y', optimizer => 'sgd', options => '{"shuffle": "sorted"}')$$);
SELECT sqlerr($$SELECT dml_train('x', 'sep', 'y', optimizer => 'sgd', options => '{"shuffle": true}')$$);
SELECT sqlerr($$SELECT dml_train('x', 'sep', 'y', optimizer => 'sgd', options => '{"straggler": "1"}')$$);
SELECT sqlerr($$SELECT dml_train('x', 'sep', 'y', optimizer => 'sgd', options => '{"straggler": "*:5:1.5"}')$$);
SET dml.test_hooks = off;
SELECT sqlerr($$SELECT dml_train('x', 'sep', 'y', optimizer => 'sgd', options => '{"straggler": "0:5"}')$$);
RESET dml.test_hooks;
SELECT count(*) AS no_model_x FROM dml.models WHERE name = 'x';

DROP TABLE sreg, sep;
DROP FUNCTION coef_gap(text, text);
