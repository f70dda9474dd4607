--
-- models: logistic, softmax and MLP; optimizers; feature preparation;
-- label types; NULL policies; metrics
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

-- A logistic problem whose separating line is known: 2 x1 - x2 + 0.5 = 0,
-- with label noise near the line so the classes are not separable
CREATE TABLE plane AS
SELECT i, x1, x2, (2 * x1 - x2 + 0.5 + 0.4 * sin(i * 12.9898) > 0) AS label
FROM (SELECT i, sin(i * 0.37)::float8 * 2 AS x1, cos(i * 0.91)::float8 * 2 AS x2
	  FROM generate_series(1, 4000) i) s;

-- The default for a small logistic model (L-BFGS in the server: workers 0) and Adam, 2 workers
SELECT name, stopped, workers
FROM dml_train('plane_newton', 'plane', 'label', features => '{x1,x2}', workers => 2);
SELECT name, epochs, workers
FROM dml_train('plane_adam', 'plane', 'label', features => '{x1,x2}', optimizer => 'adam',
			   learning_rate => 0.05, batch_size => 64, epochs => 15, workers => 2);
SELECT m, (metrics->>'accuracy')::float8 > 0.9 AS accurate, kind
FROM unnest(ARRAY['plane_newton', 'plane_adam']) m JOIN dml.models ON name = m;
-- on the line the probability is one half; far from it, near certainty
SELECT m,
	   abs((dml_predict_proba(m, ARRAY[0.0, 0.5]))[2] - 0.5) < 0.1 AS half_on_line,
	   abs((dml_predict_proba(m, ARRAY[1.0, 2.5]))[2] - 0.5) < 0.1 AS half_on_line_2,
	   (dml_predict_proba(m, ARRAY[2.0, -2.0]))[2] > 0.95 AS sure_positive,
	   (dml_predict_proba(m, ARRAY[-2.0, 2.0]))[2] < 0.05 AS sure_negative
FROM unnest(ARRAY['plane_newton', 'plane_adam']) m;
-- boolean labels come back as booleans (text) and as 0/1 numbers
SELECT dml_predict_class('plane_newton', ARRAY[2.0, -2.0]) AS class,
	   dml_predict('plane_newton', ARRAY[2.0, -2.0]) AS as_number,
	   classes FROM dml_models WHERE name = 'plane_newton';

-- Newton on the workers, stopped after its first float32 iteration
-- (epochs => 1): the float64 polish takes the remaining steps.  With the
-- default penalty the standard errors are null, so its passes after a
-- step leave out the Hessian and test for the stop with the step before's;
-- here that says go on each time, and the pass is made again with the
-- Hessian (workers/exact.c).  The same optimum as the converged float32 run's.
SELECT name, stopped FROM dml_train('plane_newton_w', 'plane', 'label', features => '{x1,x2}',
	optimizer => 'newton', workers => 2);
SELECT name, stopped FROM dml_train('plane_newton_1', 'plane', 'label', features => '{x1,x2}',
	optimizer => 'newton', epochs => 1, workers => 2);
SELECT bool_and(abs(a.c::float8 - b.c::float8) <= 1e-6 * abs(b.c::float8)) AS same_coefficients,
	   abs((sa.s->>'log_likelihood')::float8 - (sb.s->>'log_likelihood')::float8) <= 1e-9 AS same_likelihood,
	   sa.s->'std_errors'->>0 IS NULL AS penalized
FROM (SELECT metrics->'statistics' AS s FROM dml.models WHERE name = 'plane_newton_1') sa,
	 (SELECT metrics->'statistics' AS s FROM dml.models WHERE name = 'plane_newton_w') sb,
	 LATERAL jsonb_array_elements_text(sa.s->'coefficients') WITH ORDINALITY a(c, k)
	 JOIN LATERAL jsonb_array_elements_text(sb.s->'coefficients') WITH ORDINALITY b(c, k) USING (k)
GROUP BY sa.s, sb.s;

-- Newton on the workers over 100,000 rows (at least 16 x 4,096): each
-- float32 iteration locates its step on every 16th row and the next
-- statistics pass, over every row, measures it (metrics->'newton_steps'
-- counts the steps so "sampled").  In decoy the sampled rows (every 16th of
-- the table, read in order by one worker) are separable on x1 while the
-- others' labels are noise, so the step located on them raises the loss of
-- the whole table and is searched again on every row ("again");
-- decoy_mixed holds the same rows in another order.  The same optimum.
CREATE TABLE decoy AS
SELECT i, x1, x2, CASE WHEN i % 16 = 1 THEN x1 > 0 ELSE (hashint4(i) & 1) = 1 END AS label
FROM (SELECT i, sin(i * 0.37)::float8 * 2 AS x1, cos(i * 0.91)::float8 AS x2
	  FROM generate_series(1, 100000) i) s;
CREATE TABLE decoy_mixed AS SELECT * FROM decoy ORDER BY hashint4(i + 7);
SELECT name, stopped FROM dml_train('decoy', 'decoy', 'label', features => '{x1,x2}',
	optimizer => 'newton', workers => 1);
SELECT name, stopped FROM dml_train('decoy_mixed', 'decoy_mixed', 'label', features => '{x1,x2}',
	optimizer => 'newton', workers => 1);
SELECT name, (metrics->'newton_steps'->>'sampled')::int >= 1 AS located,
	   (metrics->'newton_steps'->>'again')::int >= 1 AS searched_again
FROM dml.models WHERE name IN ('decoy', 'decoy_mixed') ORDER BY name;
SELECT bool_and(abs(a.c::float8 - b.c::float8) <= 1e-6 * abs(b.c::float8)) AS same_coefficients,
	   abs((sa.s->>'log_likelihood')::float8 / (sb.s->>'log_likelihood')::float8 - 1) <= 1e-12 AS same_likelihood
FROM (SELECT metrics->'statistics' AS s FROM dml.models WHERE name = 'decoy') sa,
	 (SELECT metrics->'statistics' AS s FROM dml.models WHERE name = 'decoy_mixed') sb,
	 LATERAL jsonb_array_elements_text(sa.s->'coefficients') WITH ORDINALITY a(c, k)
	 JOIN LATERAL jsonb_array_elements_text(sb.s->'coefficients') WITH ORDINALITY b(c, k) USING (k)
GROUP BY sa.s, sb.s;
DROP TABLE decoy, decoy_mixed;

-- Newton's fallback to a double Hessian (exact.c, newton_direction failing
-- on the float32 one): five features, each with a twin 1e-6 away.  The
-- float32 Hessian's rounding (about 1e-8 of an entry) is far over what
-- tells a twin from its feature (1e-12), so its Cholesky factorization
-- fails; in double the 1e-10 n ridge keeps it positive definite.  The
-- first pass laid the rows out as panels (metrics->'newton_steps'
-- "panels"), so the double pass has them back as rows first
-- (dataset_unpanel) and forms the Hessian from "precise" on.  Which split
-- between twins the flat direction ends at is not determined, but each
-- pair's coefficients add up to the one feature's coefficient in the model
-- without the twins, and the log-likelihood is at least as high.
CREATE TABLE twins AS
SELECT i, a, b, c, d, e,
	   a + 1e-6 * sin(i * 7.77) AS a2, b + 1e-6 * sin(i * 5.31) AS b2,
	   c + 1e-6 * sin(i * 3.33) AS c2, d + 1e-6 * sin(i * 9.19) AS d2,
	   e + 1e-6 * sin(i * 4.41) AS e2,
	   (hashint4(i) & 1023) / 1024.0 < 1 / (1 + exp(-(2 * a - b + 0.5 * c))) AS label
FROM (SELECT i, sin(i * 0.37) AS a, cos(i * 0.91) AS b, sin(i * 1.7 + 1) AS c,
			 cos(i * 2.3) AS d, sin(i * 0.13 + 2) AS e
	  FROM generate_series(1, 100000) i) s;
SELECT name, stopped FROM dml_train('twins_1', 'twins', 'label',
	features => '{a,a2,b,b2,c,c2,d,d2,e,e2}', optimizer => 'newton', weight_decay => 0, workers => 1);
SELECT name, stopped FROM dml_train('twins_2', 'twins', 'label',
	features => '{a,a2,b,b2,c,c2,d,d2,e,e2}', optimizer => 'newton', weight_decay => 0, workers => 2);
SELECT name, stopped FROM dml_train('twins_none', 'twins', 'label',
	features => '{a,b,c,d,e}', optimizer => 'newton', weight_decay => 0, workers => 2);
SELECT name, (metrics->'newton_steps'->>'panels')::int >= 1 AS panels,
	   (metrics->'newton_steps'->>'precise')::int AS precise_from
FROM dml.models WHERE name LIKE 'twins\_%' ORDER BY name;
-- coefficient k of the model without twins (k = 0 the intercept) against
-- coefficients 2k - 1 and 2k of a model with them
SELECT t.name,
	   max(abs(CASE WHEN k = 0 THEN (t.s->'coefficients'->>0)::float8
			   ELSE (t.s->'coefficients'->>(2 * k - 1))::float8 + (t.s->'coefficients'->>(2 * k))::float8
			   END - c::float8)) < 1e-5 AS pairs_add_up,
	   (t.s->>'log_likelihood')::float8 >= (b.s->>'log_likelihood')::float8 * (1 + 1e-12) AS likelihood_as_high
FROM (SELECT name, metrics->'statistics' AS s FROM dml.models WHERE name IN ('twins_1', 'twins_2')) t,
	 (SELECT metrics->'statistics' AS s FROM dml.models WHERE name = 'twins_none') b,
	 LATERAL jsonb_array_elements_text(b.s->'coefficients') WITH ORDINALITY o(c, k1),
	 LATERAL (SELECT k1::int - 1 AS k) kk
GROUP BY t.name, t.s, b.s ORDER BY t.name;
-- the model's final metrics, which read the rows the double pass left,
-- against its predictions over the table (rows left as panels gave an
-- accuracy of 0.50 and a log-loss of 15)
SELECT name, abs((metrics->>'log_loss')::float8 - ll) < 1e-6 AS log_loss_agrees,
	   abs((metrics->>'accuracy')::float8 - acc) < 1e-3 AS accuracy_agrees
FROM dml.models,
	 LATERAL (SELECT avg(CASE WHEN label THEN -ln(p[2]) ELSE -ln(p[1]) END) AS ll,
					 avg(((p[2] > 0.5) = label)::int) AS acc
			  FROM (SELECT label, dml_predict_proba(name, ARRAY[a, a2, b, b2, c, c2, d, d2, e, e2]) p
					FROM twins) s) t
WHERE name IN ('twins_1', 'twins_2') ORDER BY name;
SELECT dml_drop_model(name) FROM (VALUES ('twins_1'), ('twins_2'), ('twins_none')) v(name);
DROP TABLE twins;

-- dml.epochs rows wait in the backend while the job runs and are stored
-- when it ends (catalog.c, DmlFlushEpochs), 1,024 at a time.  A job that
-- fails after two epochs, its error caught, leaves none behind for the
-- next job to store (they would point at a model that never was: the
-- deferred foreign key would fail the statement at commit); a job of
-- 1,100 epochs stores them all.
SELECT sqlerr($$SELECT dml_train('epochs_fail', 'plane', 'label', features => '{x1,x2}',
	optimizer => 'adam', epochs => 5, workers => 1,
	options => '{"fault": "0:3:exit", "max_restarts": 0}')$$) LIKE '%training job failed%' AS failed;
CREATE TABLE tiny AS SELECT * FROM plane WHERE i <= 40;
SELECT name, epochs FROM dml_train('epochs_many', 'tiny', 'label', features => '{x1,x2}',
	optimizer => 'sgd', epochs => 1100, workers => 1, options => '{"tolerance": 0}');
SELECT count(*) AS rows, count(DISTINCT epoch) AS epochs, min(epoch), max(epoch),
	   count(stopped) AS stopped_marked
FROM dml.epochs e JOIN dml.models m ON m.id = e.model_id WHERE m.name = 'epochs_many';
SELECT count(*) AS orphans FROM dml.epochs e
WHERE NOT EXISTS (SELECT 1 FROM dml.models m WHERE m.id = e.model_id);
SELECT count(*) AS failed_models FROM dml.models WHERE name = 'epochs_fail';
SELECT dml_drop_model('epochs_many');
DROP TABLE tiny;

-- Softmax: three classes by region, labels as text; momentum and Nesterov
CREATE TABLE regions AS
SELECT i, x1, x2,
	   CASE WHEN x1 + x2 > 1 THEN 'north' WHEN x1 - x2 > 1 THEN 'east' ELSE 'south' END AS region
FROM (SELECT i, sin(i * 0.37)::float8 * 2 AS x1, cos(i * 0.91)::float8 * 2 AS x2
	  FROM generate_series(1, 4000) i) s;
SELECT name, kind FROM dml_train('regions', 'regions', 'region', features => '{x1,x2}', workers => 2);
SELECT name, kind FROM dml_train('regions_nesterov', 'regions', 'region', features => '{x1,x2}',
	model => 'softmax', optimizer => 'momentum', learning_rate => 0.1, epochs => 20,
	options => '{"nesterov": true, "momentum": 0.9}', workers => 2);
SELECT name, (metrics->>'accuracy')::float8 > 0.95 AS accurate,
	   spec->'hyperparameters'->>'optimizer' AS optimizer,
	   jsonb_array_length(metrics->'confusion') AS confusion_rows,
	   (metrics->>'macro_f1')::float8 > 0.9 AS f1
FROM dml.models WHERE name LIKE 'regions%' ORDER BY name;
SELECT dml_predict_class('regions', ARRAY[1.5, 1.5]) AS north,
	   dml_predict_class('regions', ARRAY[1.8, -0.5]) AS east,
	   dml_predict_class('regions', ARRAY[-1.5, -1.5]) AS south;
SELECT classes FROM dml_models WHERE name = 'regions';
SELECT sqlerr($$SELECT dml_predict('regions', ARRAY[1.5, 1.5])$$);

-- Integer labels: auto picks softmax for a few distinct values
CREATE TABLE intlab AS SELECT i, x1, x2, CASE region WHEN 'north' THEN 7 WHEN 'east' THEN 3 ELSE 5 END AS code
FROM regions r(i, x1, x2, region);
SELECT kind FROM dml_train('intlab', 'intlab', 'code', features => '{x1,x2}', workers => 1);
SELECT dml_predict('intlab', ARRAY[1.5, 1.5]) AS north_is_7, dml_predict_class('intlab', ARRAY[1.8, -0.5]) AS east_is_3;

-- An MLP learns XOR, which a linear model cannot
CREATE TABLE xor AS
SELECT i, a, b, ((a > 0) <> (b > 0)) AS y
FROM (SELECT i, sin(i * 0.37)::float8 AS a, cos(i * 0.91)::float8 AS b FROM generate_series(1, 4000) i) s;
SELECT name, kind FROM dml_train('xor_linear', 'xor', 'y', features => '{a,b}', workers => 2);
SELECT name, kind FROM dml_train('xor_mlp', 'xor', 'y', features => '{a,b}', model => 'mlp',
	hidden => '{32,16}', activation => 'tanh', learning_rate => 0.01, batch_size => 32, epochs => 40,
	workers => 2);
SELECT name, (metrics->>'accuracy')::float8 > 0.95 AS learned_xor FROM dml.models WHERE name LIKE 'xor%' ORDER BY name;

-- MLP regression with a validation set and early stopping
CREATE TABLE wave AS
SELECT i, x, sin(3 * x) + 0.5 * x * x AS y FROM (SELECT i, (i % 1000) / 250.0 - 2 AS x FROM generate_series(1, 5000) i) s;
SELECT name, epochs <= 60 AS bounded FROM dml_train('wave', 'wave', 'y', features => '{x}', model => 'mlp',
	hidden => '{64,64}', learning_rate => 0.005, batch_size => 64, epochs => 60,
	validation => 0.2, patience => 5, workers => 2);
SELECT (metrics->>'r2')::float8 > 0.95 AS fits, metrics->>'evaluated_on' AS evaluated_on,
	   (metrics->>'validation_rows')::int BETWEEN 800 AND 1200 AS held_out
FROM dml.models WHERE name = 'wave';
SELECT count(*) > 0 AS epochs_logged, bool_and(val_loss IS NOT NULL) AS val_loss_logged,
	   bool_and(val_metric IS NOT NULL) AS r2_logged
FROM dml_epochs WHERE name = 'wave';

-- The standardization stored equals SQL aggregates over the whole table
SELECT abs((f->>'mean')::float8 - (SELECT avg(x1) FROM plane)) < 1e-5 AS mean_ok,
	   abs((f->>'std')::float8 - (SELECT stddev_pop(x1) FROM plane)) < 1e-5 AS std_ok
FROM dml.models, jsonb_array_elements(spec->'features') f
WHERE name = 'plane_newton' AND f->>'name' = 'x1';

-- Text features are one-hot encoded with their vocabulary
CREATE TABLE shop AS
SELECT i, (ARRAY['red', 'green', 'blue'])[1 + i % 3] AS color, (i % 10)::float8 AS qty,
	   CASE i % 3 WHEN 0 THEN 10 WHEN 1 THEN 20 ELSE 30 END + 2 * (i % 10)::float8 AS price
FROM generate_series(1, 600) i;
SELECT name FROM dml_train('shop', 'shop', 'price', features => '{color,qty}', workers => 2);
SELECT f->>'name' AS feature, f->>'kind' AS kind, f->'levels' AS levels
FROM dml.models, jsonb_array_elements(spec->'features') f WHERE name = 'shop';
SELECT round(dml_predict('shop', s)::numeric, 3) AS predicted, price
FROM shop s WHERE i IN (3, 4, 5) ORDER BY i;

-- Ridge: weight_decay shrinks the exact solution
SELECT name FROM dml_train('ridge', 'shop', 'price', features => '{qty}', weight_decay => 10, workers => 1);
SELECT name FROM dml_train('plain', 'shop', 'price', features => '{qty}', workers => 1);
SELECT (SELECT (spec->'coefficients'->>0)::float8 FROM dml.models WHERE name = 'ridge') <
	   (SELECT (spec->'coefficients'->>0)::float8 FROM dml.models WHERE name = 'plain') AS shrunk;

-- NULL policies
CREATE TABLE holes AS SELECT i, CASE WHEN i % 10 = 0 THEN NULL ELSE sin(i)::float8 END AS x,
	cos(i)::float8 AS z, 3 * sin(i) + cos(i) AS y FROM generate_series(1, 1000) i;
SELECT sqlerr($$SELECT dml_train('holes', 'holes', 'y', features => '{x,z}')$$);
SELECT name FROM dml_train('holes_skip', 'holes', 'y', features => '{x,z}', nulls => 'skip');
SELECT name FROM dml_train('holes_impute', 'holes', 'y', features => '{x,z}', nulls => 'impute');
SELECT name, (metrics->>'train_rows')::int AS rows FROM dml.models WHERE name LIKE 'holes%' ORDER BY name;

-- Data the workers refuse, with SQLSTATE and hint
CREATE TABLE nans AS SELECT i, CASE WHEN i = 7 THEN 'NaN'::float8 ELSE i::float8 END AS x,
	i * 2.0 AS y FROM generate_series(1, 100) i;
SELECT sqlerr($$SELECT dml_train('nans', 'nans', 'y', features => '{x}')$$);
CREATE TABLE consts AS SELECT i, 5.0::float8 AS c, i::float8 AS x, i * 2.0 AS y FROM generate_series(1, 100) i;
SELECT name FROM dml_train('consts', 'consts', 'y', features => '{c,x}');
SELECT metrics->'constant_features' AS constant, (metrics->>'r2')::float8 > 0.999 AS fits,
	   dml_predict('consts', ARRAY[7, 10]) BETWEEN 19.99 AND 20.01 AS predicts
FROM dml.models WHERE name = 'consts';
CREATE TABLE allnull AS SELECT i, NULL::float8 AS n, i::float8 AS x, i * 2.0 AS y FROM generate_series(1, 100) i;
SELECT sqlerr($$SELECT dml_train('allnull', 'allnull', 'y', features => '{n,x}')$$);
CREATE TABLE oneclass AS SELECT i::float8 AS x, true AS y FROM generate_series(1, 100) i;
SELECT sqlerr($$SELECT dml_train('oneclass', 'oneclass', 'y')$$);
CREATE TABLE onerow AS SELECT 1.0::float8 AS x, 2.0::float8 AS y;
SELECT sqlerr($$SELECT dml_train('onerow', 'onerow', 'y')$$);
SELECT sqlerr($$SELECT dml_train('x', 'plane', 'label', optimizer => 'exact')$$);
SELECT sqlerr($$SELECT dml_train('x', 'plane', 'label', model => 'logistic', hidden => '{4}')$$);
SELECT sqlerr($$SELECT dml_train('x', 'regions', 'region', model => 'logistic')$$);
SELECT sqlerr($$SELECT dml_train('x', 'plane', 'label', activation => 'gelu')$$);
SELECT sqlerr($$SELECT dml_train('x', 'plane', 'label', nulls => 'ignore')$$);
SELECT sqlerr($$SELECT dml_train('x', 'plane', 'label', patience => -1)$$);

-- Two load paths: an all-numeric job reads each slice as one dml.pack_rows
-- block, {"load": "copy"} reads the same rows through binary COPY.  They
-- must agree on everything: the weights, the NULL counts, the split.
CREATE TABLE mixed AS
SELECT i, CASE WHEN i % 13 = 0 THEN NULL ELSE sin(i)::float8 END AS x,
	(i % 7)::int2 AS small, (i % 3 = 0) AS flag, cos(i)::numeric(10, 4) AS num,
	CASE WHEN i % 97 = 0 THEN NULL ELSE (sin(i) + 0.3 * cos(i) > 0.2) END AS label,
	CASE WHEN i % 89 = 0 THEN NULL ELSE (CASE WHEN sin(i) > 0.4 THEN 10 WHEN sin(i) > -0.3 THEN 2 ELSE 1 END)::int8 END AS code,
	CASE WHEN i % 83 = 0 THEN NULL ELSE 2 * sin(i) + cos(i) END AS y
FROM generate_series(1, 3000) i;
CREATE FUNCTION both_loads(target text, model text, nulls text) RETURNS TABLE (paths text, same_weights bool, same_rows bool)
LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1..2 LOOP
		PERFORM dml_train(format('load_%s_%s', target, i), 'mixed', target,
			features => '{x,small,flag,num}', model => model, optimizer => 'adam', epochs => 3,
			batch_size => 64, validation => 0.2, nulls => nulls, workers => 2,
			options => CASE i WHEN 1 THEN '{"load": "auto"}' ELSE '{"load": "copy"}' END::jsonb);
	END LOOP;
	RETURN QUERY SELECT a.metrics->>'load' || ' vs ' || (b.metrics->>'load'), a.weights = b.weights,
		(a.metrics->>'train_rows', a.metrics->>'validation_rows') = (b.metrics->>'train_rows', b.metrics->>'validation_rows')
	FROM dml.models a, dml.models b
	WHERE a.name = format('load_%s_1', target) AND b.name = format('load_%s_2', target);
END $$;
SELECT * FROM both_loads('y', 'linear', 'impute');
SELECT * FROM both_loads('label', 'logistic', 'skip');
SELECT * FROM both_loads('code', 'softmax', 'impute');
SELECT name, metrics->>'train_rows' AS train_rows, metrics->>'validation_rows' AS validation_rows
FROM dml.models WHERE name LIKE 'load\_%\_1' ORDER BY name;
-- integer labels are listed in the type's order, not as text
SELECT classes FROM dml_models WHERE name = 'load_code_1';
-- the same errors either way
SELECT sqlerr($$SELECT dml_train('e', 'mixed', 'y', features => '{x,small}', workers => 2, optimizer => 'adam')$$);
SELECT sqlerr($$SELECT dml_train('e', 'mixed', 'y', features => '{x,small}', workers => 2, optimizer => 'adam',
	options => '{"load": "copy"}')$$);
SELECT sqlerr($$SELECT dml_train('e', 'mixed', 'y', features => '{x}', options => '{"load": "fast"}')$$);

-- Integer and boolean labels of a logistic model, or of a softmax model with
-- a named optimizer, are listed by the workers as they load (no scan in the
-- coordinator); they equal the list SQL gives, and break the same rules.
SELECT name FROM dml_train('code_auto', 'mixed', 'code', features => '{x,small}', nulls => 'skip', workers => 2);
SELECT (SELECT classes FROM dml_models WHERE name = 'code_auto') =
	   (SELECT classes FROM dml_models WHERE name = 'load_code_1') AS same_classes;
SELECT sqlerr($$SELECT dml_train('e', 'mixed', 'code', features => '{x,small}', model => 'logistic',
	nulls => 'skip', workers => 2)$$);
CREATE TABLE onelabel AS SELECT i::float8 AS x, 4 AS y FROM generate_series(1, 50) i;
SELECT sqlerr($$SELECT dml_train('e', 'onelabel', 'y', model => 'logistic')$$);
CREATE TABLE nolabel AS SELECT i::float8 AS x, NULL::int AS y FROM generate_series(1, 50) i;
SELECT sqlerr($$SELECT dml_train('e', 'nolabel', 'y', model => 'softmax', optimizer => 'sgd', workers => 2)$$);
CREATE TABLE manylabels AS SELECT i::float8 AS x, i AS y FROM generate_series(1, 1500) i;
SELECT sqlerr($$SELECT dml_train('e', 'manylabels', 'y', model => 'softmax', optimizer => 'adam', workers => 2)$$);
SELECT sqlerr($$SELECT dml_train('e', 'manylabels', 'y', model => 'softmax', workers => 2)$$);
-- A view is read whole by rank 0 (COPY) and dealt out; its labels are
-- listed the same way, every rank taking part
CREATE VIEW mixed_v AS SELECT * FROM mixed WHERE label IS NOT NULL;
SELECT name FROM dml_train('view_logit', 'mixed_v', 'label', features => '{x,small}', model => 'logistic',
	nulls => 'impute', workers => 2);
SELECT metrics->>'load' AS load, (metrics->>'accuracy')::float8 > 0.8 AS learned,
	   (SELECT classes FROM dml_models WHERE name = 'view_logit') AS classes
FROM dml.models WHERE name = 'view_logit';
