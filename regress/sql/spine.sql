--
-- spine: dml_train on MPI workers over table slices, the catalog, predict
--
SET client_min_messages = warning;
SET extra_float_digits = 0;

-- A well-conditioned linear problem with a little noise
CREATE TABLE lin AS
SELECT i AS id,
	   sin(i * 0.7)::float8 AS x1,
	   cos(i * 1.3)::float8 AS x2,
	   ((i % 17) / 17.0)::float8 AS x3,
	   (1 + 2 * sin(i * 0.7) - 3 * cos(i * 1.3) + 0.5 * ((i % 17) / 17.0)
		+ 0.1 * sin(i * 7.1))::float8 AS y
FROM generate_series(1, 3000) i;

-- The least-squares solution computed independently: normal equations from
-- SQL aggregates, solved by Gaussian elimination in PL/pgSQL.
CREATE FUNCTION ls_solution(rel regclass) RETURNS float8[] LANGUAGE plpgsql AS $$
DECLARE
	a float8[];
	n int := 4;
	f float8;
	x float8[] := '{0,0,0,0}';
BEGIN
	EXECUTE format($q$
	SELECT ARRAY[
		count(*), sum(x1), sum(x2), sum(x3), sum(y),
		sum(x1), sum(x1*x1), sum(x1*x2), sum(x1*x3), sum(x1*y),
		sum(x2), sum(x2*x1), sum(x2*x2), sum(x2*x3), sum(x2*y),
		sum(x3), sum(x3*x1), sum(x3*x2), sum(x3*x3), sum(x3*y)]::float8[]
	FROM %s $q$, rel) INTO a;
	-- a is the 4 x 5 augmented matrix, row-major, 1-based
	FOR k IN 0..n-1 LOOP
		FOR r IN k+1..n-1 LOOP
			f := a[r*5 + k + 1] / a[k*5 + k + 1];
			FOR c IN k..4 LOOP
				a[r*5 + c + 1] := a[r*5 + c + 1] - f * a[k*5 + c + 1];
			END LOOP;
		END LOOP;
	END LOOP;
	FOR r IN REVERSE n-1..0 LOOP
		f := a[r*5 + 5];
		FOR c IN r+1..n-1 LOOP
			f := f - a[r*5 + c + 1] * x[c + 1];
		END LOOP;
		x[r + 1] := f / a[r*5 + r + 1];
	END LOOP;
	RETURN x;	-- intercept, b1, b2, b3
END $$;

-- the fitted [intercept, b1, b2, b3] of a model's newest version
CREATE FUNCTION fitted(m text) RETURNS float8[] LANGUAGE sql AS $$
	SELECT ARRAY[(spec->>'intercept')::float8] ||
		   ARRAY(SELECT jsonb_array_elements_text(spec->'coefficients')::float8)
	FROM dml.models WHERE name = m ORDER BY version DESC LIMIT 1 $$;

-- largest absolute difference of two arrays
CREATE FUNCTION maxdiff(a float8[], b float8[]) RETURNS float8 LANGUAGE sql AS $$
	SELECT max(abs(x - y)) FROM unnest(a, b) AS t(x, y) $$;

SELECT round(x::numeric, 3) AS ls FROM unnest(ls_solution('lin')) x;

-- Full-batch gradient descent (batch_size above every slice) with 1, 2 and
-- 4 workers: the same model, equal to the least-squares solution.
SELECT name, version, epochs, workers, device, final_loss < 0.01 AS small_loss
FROM dml_train('gd1', 'lin', 'y', features => '{x1,x2,x3}', optimizer => 'sgd',
			   learning_rate => 0.3, batch_size => 100000, epochs => 300, workers => 1);
SELECT name, workers FROM dml_train('gd2', 'lin', 'y', features => '{x1,x2,x3}', optimizer => 'sgd',
			   learning_rate => 0.3, batch_size => 100000, epochs => 300, workers => 2);
SELECT name, workers FROM dml_train('gd4', 'lin', 'y', features => '{x1,x2,x3}', optimizer => 'sgd',
			   learning_rate => 0.3, batch_size => 100000, epochs => 300, workers => 4);
SELECT m, maxdiff(fitted(m), ls_solution('lin')) < 1e-4 AS equals_least_squares,
	   maxdiff(fitted(m), fitted('gd1')) < 1e-5 AS equals_one_worker
FROM unnest(ARRAY['gd1', 'gd2', 'gd4']) m;

-- one dml.epochs row per epoch, in order
SELECT count(*) AS epochs, min(epoch), max(epoch), bool_and(loss >= 0) AS losses,
	   bool_and(rows_per_second > 0) AS rates
FROM dml.epochs e JOIN dml.models m ON m.id = e.model_id WHERE m.name = 'gd2';

-- predict in the backend equals the fitted linear function
SELECT abs(dml_predict('gd2', ARRAY[0.1, -0.2, 0.3]) -
		   (f[1] + 0.1 * f[2] - 0.2 * f[3] + 0.3 * f[4])) < 1e-5 AS predict_ok
FROM fitted('gd2') f;

-- Minibatch SGD converges too
SELECT final_loss < 0.05 AS converged
FROM dml_train('sgd', 'lin', 'y', features => '{x1,x2,x3}', optimizer => 'sgd',
			   learning_rate => 0.05, batch_size => 32, epochs => 20, workers => 2);

-- A declaratively partitioned table: leaves balanced across ranks
CREATE TABLE plin (LIKE lin) PARTITION BY RANGE (id);
CREATE TABLE plin_small PARTITION OF plin FOR VALUES FROM (0) TO (200);
CREATE TABLE plin_big PARTITION OF plin FOR VALUES FROM (200) TO (2500);
CREATE TABLE plin_rest PARTITION OF plin FOR VALUES FROM (2500) TO (10000);
INSERT INTO plin SELECT * FROM lin;
SELECT workers FROM dml_train('part', 'plin', 'y', features => '{x1,x2,x3}', optimizer => 'sgd',
			   learning_rate => 0.3, batch_size => 100000, epochs => 300, workers => 3);
SELECT maxdiff(fitted('part'), ls_solution('lin')) < 1e-4 AS partitioned_ok;

-- A table whose slices differ a lot in rows: wide rows in the first blocks
CREATE TABLE uneven (id int, x1 float8, x2 float8, x3 float8, y float8, pad text);
INSERT INTO uneven SELECT id, x1, x2, x3, y, CASE WHEN id <= 300 THEN repeat('x', 1500) END
FROM lin ORDER BY id;
SELECT pg_relation_size('uneven') / 8192 AS blocks,
	   count(*) FILTER (WHERE ctid < '(40,0)') AS rank0_rows,
	   count(*) FILTER (WHERE ctid >= '(40,0)') AS rank1_rows
FROM uneven;
SELECT workers FROM dml_train('uneven', 'uneven', 'y', features => '{x1,x2,x3}', optimizer => 'sgd',
			   learning_rate => 0.3, batch_size => 100000, epochs => 300, workers => 2);
SELECT maxdiff(fitted('uneven'), ls_solution('lin')) < 1e-4 AS uneven_ok;

-- A view is read by rank 0 and dealt out to the ranks
CREATE VIEW lin_view AS SELECT * FROM lin WHERE id % 3 <> 0;
SELECT workers FROM dml_train('view', 'lin_view', 'y', features => '{x1,x2,x3}', optimizer => 'sgd',
			   learning_rate => 0.3, batch_size => 100000, epochs => 300, workers => 2);
SELECT maxdiff(fitted('view'), ls_solution('lin_view')) < 1e-4 AS view_ok;

-- The exact solver (normal equations) is the default for linear models:
-- one parallel aggregate pass inside the server (no workers), or on
-- request on the workers (one pass, one all-reduce, a Cholesky solve)
SELECT epochs, workers FROM dml_train('exact', 'lin', 'y', features => '{x1,x2,x3}', workers => 2);
SELECT maxdiff(fitted('exact'), ls_solution('lin')) < 1e-5 AS exact_ok;
SELECT epochs, workers FROM dml_train('exact_mpi', 'lin', 'y', features => '{x1,x2,x3}', workers => 2,
									   options => '{"in_server": false}');
SELECT maxdiff(fitted('exact_mpi'), ls_solution('lin')) < 1e-5 AS exact_workers_ok;
-- ridge: both paths solve the same penalized problem
SELECT name FROM dml_train('ridge_srv', 'lin', 'y', features => '{x1,x2,x3}', weight_decay => 0.5);
SELECT name FROM dml_train('ridge_mpi', 'lin', 'y', features => '{x1,x2,x3}', weight_decay => 0.5,
						   workers => 2, options => '{"in_server": false}');
SELECT maxdiff(fitted('ridge_srv'), fitted('ridge_mpi')) < 1e-5 AS ridge_paths_agree,
	   maxdiff(fitted('ridge_srv'), ls_solution('lin')) > 0.01 AS ridge_shrinks;

-- Default features: every other numeric column
SELECT name FROM dml_train('defaults', 'lin', 'y');
SELECT ARRAY(SELECT f->>'name' FROM jsonb_array_elements(spec->'features') f) AS default_features
FROM dml.models WHERE name = 'defaults';

-- Versions: the same name again makes version 2
SELECT version FROM dml_train('gd1', 'lin', 'y', features => '{x1,x2,x3}', workers => 1);

-- A rolled-back transaction leaves no model behind
BEGIN;
SELECT version FROM dml_train('rolled', 'lin', 'y', features => '{x1}', workers => 1);
ROLLBACK;
SELECT count(*) AS rolled_models FROM dml.models WHERE name = 'rolled';

-- Errors, with their SQLSTATEs
CREATE FUNCTION sqlerr(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE q;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
CREATE TABLE empty (x float8, y float8);
CREATE TABLE words (x float8, y text);
INSERT INTO words VALUES (1, 'a'), (2, 'b');
SELECT sqlerr($$SELECT dml_train('e', 'no_such_table', 'y')$$);
SELECT sqlerr($$SELECT dml_train('e', 'lin', 'no_such_column')$$);
SELECT sqlerr($$SELECT dml_train('e', 'lin', 'y', features => '{x1,nope}')$$);
SELECT sqlerr($$SELECT dml_train('e', 'words', 'y', model => 'linear')$$);
SELECT sqlerr($$SELECT dml_train('e', 'lin', 'y', workers => 0)$$);
SELECT sqlerr($$SELECT dml_train('e', 'lin', 'y', workers => 100000)$$);
SELECT sqlerr($$SELECT dml_train('e', 'empty', 'y')$$);
SELECT sqlerr($$SELECT dml_train('e', 'lin', 'y', model => 'linaer')$$);
SELECT sqlerr($$SELECT dml_train('e', 'lin', 'y', learning_rate => 0)$$);
SELECT sqlerr($$SELECT dml_train('e', 'lin', 'y', epochs => 0)$$);
SELECT sqlerr($$SELECT dml_train('e', 'lin', 'y', epochs => 100000000)$$);
SELECT sqlerr($$SELECT dml_train('e', 'lin', 'y', batch_size => 0)$$);
SELECT sqlerr($$SELECT dml_train('e', 'lin', 'y', optimizer => 'adagrad')$$);
SELECT sqlerr($$SELECT dml_train('e', 'lin', 'y', options => '{"bogus": 1}')$$);
SELECT sqlerr($$SELECT dml_predict('no_such_model', ARRAY[1.0])$$);
SELECT sqlerr($$SELECT dml_predict('gd2', ARRAY[1.0, 2.0])$$);
SELECT sqlerr($$SELECT dml_predict('gd2', ARRAY[1.0, NULL, 2.0])$$);

-- Nothing of any job is left in the job directories
-- (the test cluster runs with TMPDIR beside its data directory)
SELECT count(*) AS job_dirs FROM pg_ls_dir(current_setting('data_directory') || '/../tmp') d
WHERE d LIKE 'dml-job-%';
