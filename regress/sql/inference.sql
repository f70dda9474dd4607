--
-- inference: predict by array and by row, classes and probabilities, the
-- batch procedure, evaluation, versions, the cache, access, bad weights
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

CREATE TABLE pts AS
SELECT i, x1, x2, (1.5 * x1 - x2 + 0.3 + 0.5 * sin(i * 12.9898) > 0) AS label,
	   (2 * x1 + 3 * x2 + 1)::float8 AS y
FROM (SELECT i, sin(i * 0.37)::float8 AS x1, cos(i * 0.91)::float8 AS x2
	  FROM generate_series(1, 3000) i) s;

SELECT name, version, kind FROM dml_train('clf', 'pts', 'label', features => '{x1,x2}', optimizer => 'newton', weight_decay => 0, workers => 2);
SELECT name, version, kind FROM dml_train('reg', 'pts', 'y', features => '{x1,x2}', workers => 2);

-- array, record, class and probability forms agree
SELECT count(*) AS rows,
	   bool_and(dml_predict('clf', ARRAY[x1, x2]) = dml_predict('clf', p)) AS array_equals_record,
	   bool_and(dml_predict_class('clf', p) = (dml_predict('clf', p) = 1)::text) AS class_matches,
	   bool_and(abs((dml_predict_proba('clf', p))[1] + (dml_predict_proba('clf', p))[2] - 1) < 1e-6) AS proba_sums_to_one,
	   bool_and(((dml_predict_proba('clf', p))[2] >= 0.5) = (dml_predict('clf', p) = 1)) AS proba_matches_label
FROM pts p;

-- predictions equal those computed independently from the stored weights:
-- decode the little-endian float32 arrays of the blob in SQL
CREATE FUNCTION f32(b bytea, off int) RETURNS float8 LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
	bits bigint := get_byte(b, off) + 256 * get_byte(b, off + 1) + 65536 * get_byte(b, off + 2)
				   + 16777216::bigint * get_byte(b, off + 3);
	s int := (bits >> 31)::int;
	e int := ((bits >> 23) & 255)::int;
	m bigint := bits & 8388607;
BEGIN
	IF e = 0 THEN RETURN (1 - 2 * s) * m * 2.0 ^ (-149); END IF;
	RETURN (1 - 2 * s) * (1 + m / 8388608.0) * 2.0 ^ (e - 127);
END $$;
-- and float64 ones (format version 2: exact least squares and Newton's logistic)
CREATE FUNCTION f64(b bytea, off int) RETURNS float8 LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
	lo bigint := get_byte(b, off) + 256 * get_byte(b, off + 1) + 65536 * get_byte(b, off + 2)
				 + 16777216::bigint * get_byte(b, off + 3);
	hi bigint := get_byte(b, off + 4) + 256 * get_byte(b, off + 5) + 65536 * get_byte(b, off + 6)
				 + 16777216::bigint * get_byte(b, off + 7);
	s int := (hi >> 31)::int;
	e int := ((hi >> 20) & 2047)::int;
	m numeric := (hi & 1048575) * 4294967296::numeric + lo;
BEGIN
	IF e = 0 THEN RETURN (1 - 2 * s) * m * 2.0 ^ (-1074); END IF;
	RETURN (1 - 2 * s) * (1 + m / 4503599627370496.0) * 2.0 ^ (e - 1023);
END $$;
-- value i of a model's body: version 1 has 24 header bytes, 2 sizes, float32s;
-- version 2 a precision field more and float64s
CREATE FUNCTION fval(b bytea, i int) RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
	SELECT CASE get_byte(b, 4) WHEN 1 THEN f32(b, 24 + 2 * 4 + 4 * i) ELSE f64(b, 28 + 2 * 4 + 8 * i) END
$$;
-- a one-layer model with C inputs and one output
CREATE FUNCTION by_hand(b bytea, x float8[]) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
	c int := get_byte(b, CASE get_byte(b, 4) WHEN 1 THEN 24 ELSE 28 END);	-- sizes[0], below 256 here
	z float8;
BEGIN
	-- params follow in_mean[c], in_scale[c], out_mean[1], out_scale[1]
	z := fval(b, 2 * c + 2 + c);			-- bias
	FOR i IN 1..c LOOP
		z := z + fval(b, 2 * c + 2 + i - 1) * (x[i] - fval(b, i - 1)) * fval(b, c + i - 1);
	END LOOP;
	RETURN z;
END $$;
SELECT name, get_byte(weights, 4) AS format_version FROM dml.models WHERE name IN ('clf', 'reg') ORDER BY name;
SELECT bool_and(abs(1 / (1 + exp(-by_hand(weights, ARRAY[x1, x2]))) - (dml_predict_proba('clf', ARRAY[x1, x2]))[2]) < 1e-5)
	   AS logistic_by_hand
FROM dml.models, pts WHERE name = 'clf' AND i <= 200;
-- the float64 model predicts in float64: agreement to about 1e-15, not float32's 1e-7
SELECT bool_and(abs(by_hand(weights, ARRAY[x1, x2]) * fval(weights, 5) + fval(weights, 4)
					- dml_predict('reg', ARRAY[x1, x2])) < 1e-12 * (1 + abs(dml_predict('reg', ARRAY[x1, x2]))))
	   AS linear_by_hand
FROM dml.models, pts WHERE name = 'reg' AND i <= 200;

-- a row that lacks a feature column; wrong element types in a feature array
SELECT sqlerr($$SELECT dml_predict('clf', ROW(1.0, 2.0))$$);
SELECT sqlerr($$SELECT dml_predict('clf', t) FROM (SELECT 1.0::float8 AS x1, 'a'::text AS x2) t$$);
SELECT sqlerr($$SELECT dml_predict('clf', t) FROM (SELECT 1.0::float8 AS x1, NULL::float8 AS x2) t$$);
SELECT sqlerr($$SELECT dml_predict('clf', ARRAY['NaN'::float8, 1.0])$$);
SELECT sqlerr($$SELECT dml_predict_proba('reg', ARRAY[1.0, 1.0])$$);
-- integer and numeric columns are read as numbers in the record form
SELECT dml_predict('reg', t) = dml_predict('reg', ARRAY[1.0, 2.0]) AS coerced
FROM (SELECT 1::int AS x1, 2.0::numeric AS x2) t;

-- evaluation: the same metrics as training, on any relation
SELECT (dml_evaluate('clf', 'pts')->>'accuracy')::float8 =
	   (SELECT (metrics->>'accuracy')::float8 FROM dml.models WHERE name = 'clf') AS same_accuracy,
	   (dml_evaluate('reg', 'pts')->>'r2')::float8 > 0.999 AS r2;
SELECT jsonb_object_keys(dml_evaluate('clf', 'pts')) AS classification_metric ORDER BY 1;

-- the batch procedure writes the same predictions as the row function
CALL dml_predict_table('clf', 'pts', 'clf_out', 'i');
CALL dml_predict_table('reg', 'pts', 'public.reg_out');
SELECT count(*) AS rows, bool_and(o.prediction = dml_predict_class('clf', p)) AS same_class,
	   bool_and(abs(o.probability - greatest((dml_predict_proba('clf', p))[1], (dml_predict_proba('clf', p))[2])) < 1e-6) AS same_probability
FROM clf_out o JOIN pts p ON p.i = o.i;
SELECT count(*) AS rows, bool_and(abs(o.prediction - dml_predict('reg', p)) < 1e-5) AS same_value
FROM reg_out o JOIN pts p ON p.i = o.row_number;
SELECT sqlerr($$CALL dml_predict_table('clf', 'pts', 'clf_out', 'i')$$);
SELECT sqlerr($$CALL dml_predict_table('clf', 'pts', 'other_out', 'no_such_column')$$);
-- the same whichever way rows are read and written: whole rows of a table
-- with a dropped column, or named columns for a role with column privileges
-- only; int ids, some NULL, next to rows numbered
CREATE TABLE pts2 AS SELECT i, 0 AS gone, x1, x2 FROM pts;
ALTER TABLE pts2 DROP COLUMN gone;
UPDATE pts2 SET i = NULL WHERE i % 7 = 0;
CALL dml_predict_table('clf', 'pts2', 'clf_out2', 'i');
CALL dml_predict_table('reg', 'pts2', 'reg_out2');
CREATE ROLE dml_inf_cols LOGIN;
GRANT SELECT (i, x1, x2) ON pts2 TO dml_inf_cols;
GRANT CREATE ON SCHEMA public TO dml_inf_cols;
SELECT dml_grant('clf', 'dml_inf_cols');
SET ROLE dml_inf_cols;
CALL dml_predict_table('clf', 'pts2', 'clf_out3', 'i');
RESET ROLE;
SELECT count(*) AS rows, count(*) FILTER (WHERE o.i IS NULL) AS null_ids,
	   bool_and(o.prediction = dml_predict_class('clf', ARRAY[p.x1, p.x2])) AS same_class,
	   bool_and(abs(o.probability - greatest((dml_predict_proba('clf', ARRAY[p.x1, p.x2]))[1],
											 (dml_predict_proba('clf', ARRAY[p.x1, p.x2]))[2])) < 1e-6) AS same_probability
FROM (SELECT row_number() OVER () AS n, * FROM clf_out2) o
JOIN (SELECT row_number() OVER () AS n, * FROM pts2) p ON p.n = o.n AND p.i IS NOT DISTINCT FROM o.i;
SELECT count(*) AS rows, bool_and(a.prediction = b.prediction AND a.probability = b.probability
								  AND a.i IS NOT DISTINCT FROM b.i) AS column_privileges_same
FROM (SELECT row_number() OVER () AS n, * FROM clf_out2) a
JOIN (SELECT row_number() OVER () AS n, * FROM clf_out3) b ON a.n = b.n;
SELECT count(*) AS rows, bool_and(abs(o.prediction - dml_predict('reg', ARRAY[p.x1, p.x2])) < 1e-5) AS same_value
FROM (SELECT row_number() OVER () AS n, * FROM pts2) p JOIN reg_out2 o ON o.row_number = p.n;
-- a table's rows are read from their tuples' bytes where every column up
-- to the last one used has a fixed width: the same predictions as the named
-- columns' (projected) rows, with an int2 that puts the next float8 on the
-- next 8 bytes; rows with a NULL (the columns after it lie 8 bytes
-- earlier) and rows older than the id column (fewer columns in the tuple)
-- are read from the slot as before
CREATE TABLE pts3 (k int4, s int8, x1 float8, t int2, x2 float8);
INSERT INTO pts3 SELECT i, CASE WHEN i % 5 <> 0 THEN i % 3 END, x1, 7, x2 FROM pts;
ALTER TABLE pts3 ADD COLUMN i int8;
UPDATE pts3 SET i = k WHERE k % 4 <> 0 AND k % 11 <> 0;
CALL dml_predict_table('clf', 'pts3', 'clf_out4', 'i');
GRANT SELECT (i, x1, x2) ON pts3 TO dml_inf_cols;
SET ROLE dml_inf_cols;
CALL dml_predict_table('clf', 'pts3', 'clf_out5', 'i');
RESET ROLE;
SELECT count(*) AS rows, count(*) FILTER (WHERE a.i IS NULL) AS null_ids,
	   count(*) FILTER (WHERE p.s IS NULL) AS null_s,
	   bool_and(a.prediction = b.prediction AND a.probability = b.probability
				AND a.i IS NOT DISTINCT FROM b.i) AS tuple_bytes_same,
	   bool_and(a.prediction = dml_predict_class('clf', ARRAY[p.x1, p.x2])) AS same_class
FROM (SELECT row_number() OVER () AS n, * FROM clf_out4) a
JOIN (SELECT row_number() OVER () AS n, * FROM clf_out5) b ON a.n = b.n
JOIN (SELECT row_number() OVER () AS n, * FROM pts3) p ON p.n = a.n;
-- dml_predict_rows: the same rows with their ids as text, as the id's type
-- writes it: int8 ids (NULLs and both extremes), int4 ids, row numbers
UPDATE pts3 SET i = -9223372036854775808 WHERE k = 1;
UPDATE pts3 SET i = 9223372036854775807 WHERE k = 2;
SELECT count(*) AS rows, count(*) FILTER (WHERE r.id IS NULL) AS null_ids,
	   bool_and(r.id IS NOT DISTINCT FROM p.i::text) AS int8_ids_as_text,
	   bool_and(r.label = dml_predict_class('clf', ARRAY[p.x1, p.x2])) AS same_class,
	   min(r.id COLLATE "C") AS least_id_text,
	   count(*) FILTER (WHERE r.id = '9223372036854775807') AS greatest_ids
FROM (SELECT row_number() OVER () AS n, * FROM dml_predict_rows('clf', 'pts3', 'i')) r
JOIN (SELECT row_number() OVER () AS n, * FROM pts3) p ON p.n = r.n;
SELECT count(*) AS rows, bool_and(r.id = p.i::text) AS int4_ids_as_text,
	   bool_and(abs(r.value - dml_predict('reg', p)) < 1e-5) AS same_value
FROM (SELECT row_number() OVER () AS n, * FROM dml_predict_rows('reg', 'pts', 'i')) r
JOIN (SELECT row_number() OVER () AS n, * FROM pts) p ON p.n = r.n;
SELECT count(*) AS rows, bool_and(r.id = r.n::text) AS row_numbers_as_text
FROM (SELECT row_number() OVER () AS n, * FROM dml_predict_rows('reg', 'pts')) r;
-- ids of other types, as their output functions write them: text of
-- every length from none to past the templates' 64 characters, NULLs, and
-- numeric
CREATE TABLE pts4 AS SELECT repeat(chr(97 + i % 26), i % 91) AS t,
	   CASE WHEN i % 9 <> 0 THEN i * 1.5 END AS num, x1, x2 FROM pts;
UPDATE pts4 SET t = NULL WHERE num IS NULL;
SELECT count(*) AS rows, count(*) FILTER (WHERE r.id IS NULL) AS null_ids,
	   count(*) FILTER (WHERE r.id = '') AS empty_ids, count(*) FILTER (WHERE length(r.id) > 64) AS past_64,
	   bool_and(r.id IS NOT DISTINCT FROM p.t) AS text_ids,
	   bool_and(r.label = dml_predict_class('clf', ARRAY[p.x1, p.x2])) AS same_class,
	   bool_and(abs(r.probability - greatest((dml_predict_proba('clf', ARRAY[p.x1, p.x2]))[1],
											 (dml_predict_proba('clf', ARRAY[p.x1, p.x2]))[2])) < 1e-6) AS same_probability
FROM (SELECT row_number() OVER () AS n, * FROM dml_predict_rows('clf', 'pts4', 't')) r
JOIN (SELECT row_number() OVER () AS n, * FROM pts4) p ON p.n = r.n;
SELECT count(*) AS rows, bool_and(r.id IS NOT DISTINCT FROM p.num::text) AS numeric_ids,
	   bool_and(abs(r.value - dml_predict('reg', ARRAY[p.x1, p.x2])) < 1e-5) AS same_value
FROM (SELECT row_number() OVER () AS n, * FROM dml_predict_rows('reg', 'pts4', 'num')) r
JOIN (SELECT row_number() OVER () AS n, * FROM pts4) p ON p.n = r.n;
DROP TABLE pts4;
-- labels long enough to be stored with a 4-byte header (aligned, unlike a
-- short one), beside a one-letter label: dml_predict_rows as
-- dml_predict_table, by id and by row number
CREATE TABLE ll AS SELECT i, x1, x2,
	   CASE WHEN x1 > 0.3 THEN repeat('a', 150) WHEN x1 < -0.3 THEN 'b' ELSE repeat('c', 140) END AS lab
FROM pts;
SELECT name FROM dml_train('llm', 'll', 'lab', features => '{x1,x2}', model => 'softmax', workers => 1);
CALL dml_predict_table('llm', 'll', 'll_out', 'i');
SELECT count(*) AS rows, count(DISTINCT r.label) AS classes,
	   bool_and(r.label = o.prediction AND r.probability = o.probability AND r.value IS NULL) AS same
FROM dml_predict_rows('llm', 'll', 'i') r JOIN ll_out o ON o.i::text = r.id;
SELECT count(*) AS rows, bool_and(r.label = o.prediction AND r.probability = o.probability) AS same_by_row_number
FROM (SELECT row_number() OVER () AS n, * FROM dml_predict_rows('llm', 'll')) r
JOIN (SELECT row_number() OVER () AS n, * FROM ll_out) o ON o.n = r.n AND r.id = r.n::text;
SELECT dml_drop_model('llm');
DROP TABLE ll, ll_out;
DROP TABLE clf_out3, clf_out5;
REVOKE ALL ON pts3 FROM dml_inf_cols;
REVOKE CREATE ON SCHEMA public FROM dml_inf_cols;
SELECT dml_revoke('clf', 'dml_inf_cols');
REVOKE ALL ON pts2 FROM dml_inf_cols;
DROP ROLE dml_inf_cols;

-- the record form of a table's own row is planned as its columns
-- (dml.predict_cols and its twins: the executor builds no composite per
-- row); a row that is not a table's, here a subquery's kept from being
-- pulled up by OFFSET 0, stays a record.  The two agree to the bit, with
-- the array form too, for text (one-hot) and boolean features.
CREATE FUNCTION planned_as_columns(q text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	line text;
	hit boolean := false;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || q LOOP
		hit := hit OR line ~ 'dml\.predict(_class|_proba)?_cols\(';
	END LOOP;
	RETURN hit;
END $$;
CREATE TABLE mix AS
SELECT i, sin(i * 0.37)::float8 AS x1, (i % 3 = 0) AS flag,
	   (ARRAY['red', 'green', 'blue'])[1 + i % 3] AS color,
	   (sin(i * 0.37) + (i % 3 = 0)::int + CASE i % 3 WHEN 1 THEN 0.5 ELSE -0.4 END
		+ 0.3 * sin(i * 7.1) > 0) AS label,
	   (2 * sin(i * 0.37) + 3 * (i % 3 = 0)::int + i % 3 + 0.1 * cos(i * 5.3))::float8 AS y
FROM generate_series(1, 2000) i;
SELECT name, kind FROM dml_train('mixc', 'mix', 'label', features => '{x1,flag,color}', workers => 1);
SELECT name, kind FROM dml_train('mixr', 'mix', 'y', features => '{color,x1,flag}', workers => 1);
SELECT name, features FROM dml_models WHERE name IN ('mixc', 'mixr') ORDER BY name;
EXPLAIN (VERBOSE, COSTS OFF) SELECT dml_predict_class('mixc', m) FROM mix m;
EXPLAIN (VERBOSE, COSTS OFF) SELECT dml_predict_class('mixc', s) FROM (SELECT * FROM mix OFFSET 0) s;
CREATE TEMP TABLE by_columns AS
SELECT i, dml_predict('mixc', m) AS v, dml_predict_class('mixc', m) AS c,
	   dml_predict_proba('mixc', m) AS p, dml_predict('mixr', m) AS r,
	   dml_predict_class('mixr', m) AS rc
FROM mix m;
CREATE TEMP TABLE by_record AS
SELECT i, dml_predict('mixc', s) AS v, dml_predict_class('mixc', s) AS c,
	   dml_predict_proba('mixc', s) AS p, dml_predict('mixr', s) AS r,
	   dml_predict_class('mixr', s) AS rc
FROM (SELECT * FROM mix OFFSET 0) s;
-- the array form: x1, flag as 0/1, then color one-hot over the sorted levels
CREATE TEMP TABLE by_array AS
SELECT i, dml_predict('mixc', a) AS v, dml_predict_class('mixc', a) AS c,
	   dml_predict_proba('mixc', a) AS p
FROM (SELECT i, ARRAY[x1, flag::int, (color = 'blue')::int, (color = 'green')::int,
					  (color = 'red')::int]::float8[] AS a
	  FROM mix) s;
SELECT planned_as_columns($$SELECT dml_predict('mixc', m), dml_predict_proba('mixc', m) FROM mix m$$) AS columns,
	   planned_as_columns($$SELECT dml_predict('mixc', s) FROM (SELECT * FROM mix OFFSET 0) s$$) AS subquery_row;
SELECT count(*) AS rows,
	   bool_and(a.v = b.v) AS value_same, bool_and(a.c = b.c) AS class_same,
	   bool_and(a.p = b.p) AS proba_same, bool_and(a.r = b.r) AS regression_same,
	   bool_and(a.rc = b.rc) AS regression_class_same,
	   bool_and(a.v = x.v AND a.c = x.c AND a.p = x.p) AS array_same,
	   count(DISTINCT a.c) AS classes
FROM by_columns a JOIN by_record b USING (i) JOIN by_array x USING (i);
-- the same row where a query names it m.*, and in WHERE
SELECT planned_as_columns($$SELECT i FROM mix m WHERE dml_predict('mixr', m.*) > 3$$) AS in_where,
	   (SELECT count(*) FROM mix m WHERE dml_predict('mixr', m.*) > 3) =
	   (SELECT count(*) FROM by_record WHERE r > 3) AS same_rows;
-- the nullable side of an outer join stays a record: its row is NULL where
-- the join found nothing (predict gives NULL), not a row of NULL features
CREATE TABLE ids AS SELECT g AS i FROM generate_series(1, 4) g;
SELECT planned_as_columns($$SELECT dml_predict('mixr', m) FROM ids LEFT JOIN mix m ON m.i = ids.i$$) AS left_join,
	   planned_as_columns($$SELECT dml_predict('mixr', m) FROM mix m RIGHT JOIN ids ON m.i = ids.i$$) AS right_join,
	   planned_as_columns($$SELECT dml_predict('mixr', m) FROM mix m FULL JOIN ids ON m.i = ids.i$$) AS full_join,
	   planned_as_columns($$SELECT dml_predict('mixr', m) FROM mix m LEFT JOIN ids ON m.i = ids.i$$) AS outer_side,
	   planned_as_columns($$SELECT dml_predict('mixr', m) FROM mix m JOIN ids ON m.i = ids.i$$) AS inner_join;
SELECT ids.i, dml_predict('mixr', m) = r.r AS same, dml_predict('mixr', m) IS NULL AS null_row
FROM ids LEFT JOIN mix m ON m.i = ids.i AND m.i <= 2 LEFT JOIN by_record r ON r.i = m.i
ORDER BY ids.i;
-- a row without a feature column: the record form's error, either way
SELECT sqlerr($$SELECT dml_predict('mixr', k) FROM ids k$$);
SELECT sqlerr($$SELECT dml_predict('mixr', k) FROM (SELECT * FROM ids OFFSET 0) k$$);
-- a NULL feature column is an error, a NULL model name a NULL
UPDATE mix SET flag = NULL WHERE i = 7;
SELECT sqlerr($$SELECT dml_predict('mixr', m) FROM mix m WHERE i = 7$$);
SELECT sqlerr($$SELECT dml_predict('mixr', s) FROM (SELECT * FROM mix OFFSET 0) s WHERE i = 7$$);
UPDATE mix SET flag = (i % 3 = 0) WHERE i = 7;
SELECT dml_predict(NULL, m) IS NULL AS null_model FROM mix m WHERE i = 1;
-- dropped columns are left out; odd column names are found
CREATE TABLE mix2 AS SELECT i, 0 AS gone, color, 'x' AS "we ird", flag, 1 AS "a""b,{c}", x1 FROM mix;
ALTER TABLE mix2 DROP COLUMN gone;
EXPLAIN (VERBOSE, COSTS OFF) SELECT dml_predict('mixr', m) FROM mix2 m;
SELECT count(*) AS rows, bool_and(dml_predict('mixr', m) = r.r) AS same
FROM mix2 m JOIN by_record r USING (i);
CREATE TABLE mix3 AS SELECT i, x1 AS "a""b,{c}", flag AS "we ird", color AS "NULL", y FROM mix;
SELECT name FROM dml_train('mixodd', 'mix3', 'y', features => ARRAY['a"b,{c}', 'we ird', 'NULL'],
						   workers => 1);
SELECT planned_as_columns($$SELECT dml_predict('mixodd', m) FROM mix3 m$$) AS columns,
	   bool_and(dml_predict('mixodd', m) = dml_predict('mixodd', s)) AS same
FROM mix3 m JOIN (SELECT * FROM mix3 OFFSET 0) s USING (i);
-- privileges are those of the whole row: a role that may read only some
-- columns gets the same error as ever, and the array form of those columns
CREATE ROLE dml_inf_part LOGIN;
GRANT SELECT (i, x1, flag, color) ON mix TO dml_inf_part;
SELECT dml_grant('mixr', 'dml_inf_part');
SET ROLE dml_inf_part;
SELECT sqlerr($$SELECT dml_predict('mixr', m) FROM mix m$$);
SELECT sqlerr($$SELECT dml_predict('mixr', m) FROM mix m WHERE false$$);
SELECT count(dml_predict('mixr', ARRAY[(color = 'blue')::int, (color = 'green')::int,
									   (color = 'red')::int, x1, flag::int]::float8[])) AS array_form
FROM mix;
RESET ROLE;
GRANT SELECT ON mix TO dml_inf_part;
SET ROLE dml_inf_part;
CREATE TEMP TABLE granted AS SELECT i, dml_predict('mixr', m) AS r FROM mix m;
RESET ROLE;
SELECT count(*) AS rows, bool_and(g.r = r.r) AS granted_same FROM granted g JOIN by_record r USING (i);
DROP TABLE granted;
-- and EXECUTE on the record form is still what it takes, even through a
-- plan made by another role
REVOKE EXECUTE ON FUNCTION dml_predict(text, record) FROM PUBLIC;
SET plan_cache_mode = force_generic_plan;
PREPARE owner_plan AS SELECT count(dml_predict('mixr', m)) FROM mix m;
EXECUTE owner_plan;
SET ROLE dml_inf_part;
SELECT sqlerr($$SELECT dml_predict('mixr', m) FROM mix m$$);
SELECT sqlerr($$EXECUTE owner_plan$$);
SELECT sqlerr($$SELECT dml.predict_cols('mixr', '{x1}', 1.0::float8)$$);
RESET ROLE;
GRANT EXECUTE ON FUNCTION dml_predict(text, record) TO PUBLIC;
DEALLOCATE owner_plan;
SELECT dml_revoke('mixr', 'dml_inf_part');
REVOKE ALL ON mix FROM dml_inf_part;
DROP ROLE dml_inf_part;
-- a plan cached under version 1 serves version 2, trained on other
-- features: the features are found among the columns by name at run time
SET max_parallel_workers_per_gather = 0;
SELECT version FROM dml_train('mixv', 'mix', 'y', features => '{x1,flag}', workers => 1);
PREPARE by_row AS SELECT sum(dml_predict('mixv', m)) AS s FROM mix m;
CREATE TEMP TABLE v1 AS EXECUTE by_row;
SELECT (SELECT s FROM v1) = sum(dml_predict('mixv', ARRAY[x1, flag::int]::float8[])) AS v1_right
FROM mix;
SELECT version FROM dml_train('mixv', 'mix', 'y', features => '{color,x1}', workers => 1);
CREATE TEMP TABLE v2 AS EXECUTE by_row;
SELECT planned_as_columns('EXECUTE by_row') AS cached_plan_columns,
	   (SELECT s FROM v2) = (SELECT sum(dml_predict('mixv', s)) FROM (SELECT * FROM mix OFFSET 0) s) AS v2_right,
	   (SELECT s FROM v1) <> (SELECT s FROM v2) AS versions_differ;
DEALLOCATE by_row;
RESET plan_cache_mode;
RESET max_parallel_workers_per_gather;

-- a parallel sequential scan with predict gives the same answer, by row
-- (planned as columns) as by a subquery's row on one core
CREATE TABLE big AS SELECT i, sin(i * 0.37)::float8 AS x1, cos(i * 0.91)::float8 AS x2
FROM generate_series(1, 200000) i;
ANALYZE big;
SET max_parallel_workers_per_gather = 0;
SELECT sum(dml_predict('reg', b)) AS serial_sum,
	   (SELECT sum(dml_predict('reg', s)) FROM (SELECT * FROM big OFFSET 0) s) AS record_sum
INTO TEMP serial FROM big b;
SELECT serial_sum = record_sum AS columns_equal_record FROM serial;
SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
EXPLAIN (COSTS OFF) SELECT sum(dml_predict('reg', b)) FROM big b;
SELECT planned_as_columns($$SELECT sum(dml_predict('reg', b)) FROM big b$$) AS parallel_columns;
SELECT abs(sum(dml_predict('reg', b)) - (SELECT serial_sum FROM serial)) < 1e-6 AS parallel_equals_serial FROM big b;
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;

-- versions: training a name again makes version n+1, used from the next statement
CREATE TABLE shifted AS SELECT i, x1, x2, y + 100 AS y FROM pts;
SELECT round(dml_predict('reg', ARRAY[0.0, 0.0])::numeric, 3) AS v1_prediction;
SELECT version FROM dml_train('reg', 'shifted', 'y', features => '{x1,x2}', workers => 1);
SELECT round(dml_predict('reg', ARRAY[0.0, 0.0])::numeric, 3) AS v2_prediction;
-- pinning: dml_deploy keeps predict on version 1 while newer versions train
SELECT dml_deploy('reg', 1);
SELECT version FROM dml_train('reg', 'shifted', 'y', features => '{x1,x2}', workers => 1);
SELECT round(dml_predict('reg', ARRAY[0.0, 0.0])::numeric, 3) AS pinned_prediction;
SELECT version, deployed FROM dml_models WHERE name = 'reg' ORDER BY version;
SELECT dml_deploy('reg', NULL);
SELECT round(dml_predict('reg', ARRAY[0.0, 0.0])::numeric, 3) AS newest_prediction;
SELECT sqlerr($$SELECT dml_deploy('reg', 9)$$);
-- dropping the newest version falls back to the one before
SELECT dml_drop_model('reg', 3) AS dropped;
SELECT max(version) AS newest FROM dml_models WHERE name = 'reg';
SELECT round(dml_predict('reg', ARRAY[0.0, 0.0])::numeric, 3) AS after_drop;
SELECT dml_drop_model('reg') AS dropped_all;
SELECT sqlerr($$SELECT dml_predict('reg', ARRAY[0.0, 0.0])$$);

-- access: a second role uses a model only when granted
CREATE ROLE dml_other LOGIN;
GRANT SELECT ON pts TO dml_other;
SET ROLE dml_other;
SELECT sqlerr($$SELECT dml_predict('clf', ARRAY[0.0, 0.0])$$);
SELECT count(*) AS visible_models FROM dml_models;
SELECT sqlerr($$SELECT weights FROM dml.models$$);
SELECT sqlerr($$SELECT * FROM dml.epochs$$);
SELECT sqlerr($$SELECT dml_grant('clf', 'dml_other')$$);
SELECT sqlerr($$SELECT dml_drop_model('clf')$$);
SELECT sqlerr($$SELECT dml_train('clf', 'pts', 'label', features => '{x1,x2}')$$);
RESET ROLE;
SELECT dml_grant('clf', 'dml_other');
SET ROLE dml_other;
SELECT dml_predict('clf', ARRAY[2.0, -2.0]) AS granted_prediction;
SELECT name, owner FROM dml_models;
SELECT sqlerr($$SELECT dml_grant('clf', 'dml_other')$$);
RESET ROLE;
SELECT dml_revoke('clf', 'dml_other');
SET ROLE dml_other;
SELECT sqlerr($$SELECT dml_predict('clf', ARRAY[0.0, 0.0])$$);
RESET ROLE;
-- a member of the owner's role uses its models
CREATE ROLE dml_member LOGIN;
GRANT postgres TO dml_member;
SET ROLE dml_member;
SELECT dml_predict('clf', ARRAY[2.0, -2.0]) AS member_prediction;
RESET ROLE;

-- the array form with its array written out is planned as its elements
-- (dml.predict_vals and its twins: the executor builds no array per row);
-- any other array, here a function's result or integers cast as a whole,
-- stays an array.  The same answers to the bit, the same errors in the
-- same order, the same EXECUTE rule, a plan made by another role included.
CREATE FUNCTION planned_as_values(q text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	line text;
	hit boolean := false;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || q LOOP
		hit := hit OR line ~ 'dml\.predict(_class|_proba)?_vals\(';
	END LOOP;
	RETURN hit;
END $$;
CREATE TABLE arr AS SELECT i, sin(i * 0.37)::float8 AS x1, cos(i * 0.91)::float8 AS x2,
	(2 * sin(i * 0.37) - cos(i * 0.91) + sin(i * 1.3))::float8 AS y
FROM generate_series(1, 5000) i;
SELECT name FROM dml_train('arrm', 'arr', 'y', features => '{x1,x2}', model => 'mlp', hidden => '{8}',
						   epochs => 2, workers => 1);
SELECT planned_as_values($$SELECT dml_predict('arrm', ARRAY[x1, x2]) FROM arr$$) AS value_form,
	   planned_as_values($$SELECT dml_predict_class('clf', ARRAY[x1, x2]) FROM arr$$) AS class_form,
	   planned_as_values($$SELECT dml_predict_proba('clf', ARRAY[x1, x2]) FROM arr$$) AS proba_form,
	   planned_as_values($$SELECT dml_predict('arrm', ARRAY[x1, 1]) FROM arr$$) AS with_a_constant,
	   planned_as_values($$SELECT dml_predict('arrm', array_cat(ARRAY[x1, x2], '{}')) FROM arr$$) AS function_array,
	   planned_as_values($$SELECT dml_predict('arrm', ARRAY[i, i]) FROM arr$$) AS integer_array;
SELECT count(*) AS rows,
	   bool_and(dml_predict('arrm', ARRAY[x1, x2]) = dml_predict('arrm', array_cat(ARRAY[x1, x2], '{}'))) AS same_value,
	   bool_and(dml_predict_class('clf', ARRAY[x1, x2]) = dml_predict_class('clf', array_cat(ARRAY[x1, x2], '{}'))) AS same_class,
	   bool_and(dml_predict_proba('clf', ARRAY[x1, x2]) = dml_predict_proba('clf', array_cat(ARRAY[x1, x2], '{}'))) AS same_proba,
	   bool_and(dml_predict('arrm', ARRAY[i, i]) = dml_predict('arrm', ARRAY[i::float8, i])) AS same_cast
FROM arr;
SELECT sqlerr($$SELECT dml_predict('arrm', ARRAY[x1, NULL]) FROM arr$$) AS null_value,
	   sqlerr($$SELECT dml_predict('arrm', array_cat(ARRAY[x1, NULL], '{}')) FROM arr$$) AS null_element;
SELECT sqlerr($$SELECT dml_predict('arrm', ARRAY[x1]) FROM arr$$) AS one_value,
	   sqlerr($$SELECT dml_predict('arrm', array_cat(ARRAY[x1], '{}')) FROM arr$$) AS one_element;
SELECT sqlerr($$SELECT dml_predict('arrm', ARRAY[x2, 'Infinity']) FROM arr$$) AS infinite_value,
	   sqlerr($$SELECT dml_predict('arrm', array_cat(ARRAY[x2, 'Infinity'], '{}')) FROM arr$$) AS infinite_element;
SELECT sqlerr($$SELECT dml_predict('nope', ARRAY[x1, NULL]) FROM arr$$) AS no_model_first;
SELECT count(*) AS null_model_rows FROM arr WHERE dml_predict(NULL, ARRAY[x1, NULL]) IS NULL;
-- called by hand, dml.predict_vals takes float8 values one by one
SELECT dml.predict_vals('arrm', 1.0::float8, 2.0::float8) = dml_predict('arrm', '{1,2}'::float8[]) AS by_hand;
SELECT sqlerr($$SELECT dml.predict_vals('arrm', 1, 2)$$);
SELECT sqlerr($$SELECT dml.predict_vals('arrm', VARIADIC ARRAY[1.0::float8, 2.0])$$);
CREATE ROLE dml_inf_arr;
GRANT SELECT ON arr TO dml_inf_arr;
SELECT dml_grant('arrm', 'dml_inf_arr');
REVOKE EXECUTE ON FUNCTION dml_predict(text, float8[]) FROM PUBLIC;
SET plan_cache_mode = force_generic_plan;
PREPARE arr_plan AS SELECT count(dml_predict('arrm', ARRAY[x1, x2])) FROM arr;
EXECUTE arr_plan;
SET ROLE dml_inf_arr;
SELECT sqlerr($$SELECT dml_predict('arrm', ARRAY[x1, x2]) FROM arr$$);
SELECT sqlerr($$EXECUTE arr_plan$$);
SELECT sqlerr($$SELECT dml.predict_vals('arrm', 1.0::float8, 2.0::float8)$$);
RESET ROLE;
GRANT EXECUTE ON FUNCTION dml_predict(text, float8[]) TO PUBLIC;
SET ROLE dml_inf_arr;
EXECUTE arr_plan;
RESET ROLE;
DEALLOCATE arr_plan;
RESET plan_cache_mode;
SELECT dml_revoke('arrm', 'dml_inf_arr');
REVOKE ALL ON arr FROM dml_inf_arr;
DROP ROLE dml_inf_arr;
SELECT dml_drop_model('arrm');
DROP TABLE arr;

-- corrupted weights, written by a superuser: an error, and the backend lives
SELECT name FROM dml_train('fragile', 'pts', 'y', features => '{x1,x2}', workers => 1);
UPDATE dml.models SET weights = set_byte(weights, 40, 7) WHERE name = 'fragile';
SELECT dml_predict('fragile', ARRAY[0.0, 0.0]);
UPDATE dml.models SET weights = substring(weights FROM 1 FOR 30) WHERE name = 'fragile';
SELECT dml_predict('fragile', ARRAY[0.0, 0.0]);
UPDATE dml.models SET weights = '\x00'::bytea WHERE name = 'fragile';
SELECT dml_predict('fragile', ARRAY[0.0, 0.0]);
SELECT 1 AS backend_alive;
