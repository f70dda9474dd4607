-- synth.sql: a deterministic synthetic table for benchmarks,
--   synth_1m (id int PRIMARY KEY, c1 .. c20 float8, y float8, label int)
-- 1,000,000 rows by default; psql -v rows=N for another count.
--
--   psql -X -v ON_ERROR_STOP=1 -f bench/sql/synth.sql
--   psql -X -v ON_ERROR_STOP=1 -v rows=10000 -f bench/sql/synth.sql
--
-- The same rows every time (setseed, one backend, random() called in a fixed
-- order; INSERT ... SELECT runs no parallel workers).  The true model:
--
--   c_i ~ Normal(mean_i, sd_i), independent (Box-Muller on random())
--   z_i = (c_i - mean_i) / sd_i
--   y   = 0.3 + sum_i weight_i * z_i + 0.5 * Normal(0, 1)
--   label = 1 if y > 0 else 0
--
--   c1   mean  -9  sd 2  weight  1.487
--   c2   mean  -8  sd 3  weight -0.383
--   c3   mean  -7  sd 4  weight -1.389
--   c4   mean  -6  sd 1  weight  0.741
--   c5   mean  -5  sd 2  weight  1.198
--   c6   mean  -4  sd 3  weight  -1.05
--   c7   mean  -3  sd 4  weight -0.927
--   c8   mean  -2  sd 1  weight  1.289
--   c9   mean  -1  sd 2  weight  0.595
--   c10  mean   0  sd 3  weight -1.442
--   c11  mean   1  sd 4  weight -0.223
--   c12  mean   2  sd 1  weight    1.5
--   c13  mean   3  sd 2  weight -0.163
--   c14  mean   4  sd 3  weight -1.458
--   c15  mean   5  sd 4  weight  0.539
--   c16  mean   6  sd 1  weight      0
--   c17  mean   7  sd 2  weight      0
--   c18  mean   8  sd 3  weight      0
--   c19  mean   9  sd 4  weight      0
--   c20  mean  10  sd 1  weight      0
--
-- So linear regression of y recovers the weights (on z), logistic regression
-- of label is well specified up to the noise, c16..c20 are pure noise, and
-- the unequal means and scales make feature standardization matter.

\if :{?rows}
\else
\set rows 1000000
\endif

SET client_min_messages = warning;
DROP TABLE IF EXISTS synth_1m;

CREATE TABLE synth_1m (
	id int PRIMARY KEY,
	c1 float8 NOT NULL,
	c2 float8 NOT NULL,
	c3 float8 NOT NULL,
	c4 float8 NOT NULL,
	c5 float8 NOT NULL,
	c6 float8 NOT NULL,
	c7 float8 NOT NULL,
	c8 float8 NOT NULL,
	c9 float8 NOT NULL,
	c10 float8 NOT NULL,
	c11 float8 NOT NULL,
	c12 float8 NOT NULL,
	c13 float8 NOT NULL,
	c14 float8 NOT NULL,
	c15 float8 NOT NULL,
	c16 float8 NOT NULL,
	c17 float8 NOT NULL,
	c18 float8 NOT NULL,
	c19 float8 NOT NULL,
	c20 float8 NOT NULL,
	y float8 NOT NULL,
	label int NOT NULL
);

-- a standard normal draw; two random() calls per value
CREATE FUNCTION pg_temp.normal() RETURNS float8
LANGUAGE sql VOLATILE
AS $$ SELECT sqrt(-2.0 * ln(1.0 - random())) * cos(2.0 * pi() * random()) $$;

SELECT setseed(0.42) AS seed \gset

INSERT INTO synth_1m (id, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20, y, label)
SELECT id, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20, y, (y > 0)::int
FROM (
	SELECT id, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17, c18, c19, c20,
			0.3
			+ 1.487 * (c1 - (-9)) / 2
			- 0.383 * (c2 - (-8)) / 3
			- 1.389 * (c3 - (-7)) / 4
			+ 0.741 * (c4 - (-6)) / 1
			+ 1.198 * (c5 - (-5)) / 2
			- 1.05 * (c6 - (-4)) / 3
			- 0.927 * (c7 - (-3)) / 4
			+ 1.289 * (c8 - (-2)) / 1
			+ 0.595 * (c9 - (-1)) / 2
			- 1.442 * (c10 - (0)) / 3
			- 0.223 * (c11 - (1)) / 4
			+ 1.5 * (c12 - (2)) / 1
			- 0.163 * (c13 - (3)) / 2
			- 1.458 * (c14 - (4)) / 3
			+ 0.539 * (c15 - (5)) / 4
			+ 0.5 * pg_temp.normal() AS y
	FROM (
		SELECT g AS id,
			-9 + 2 * pg_temp.normal() AS c1,
			-8 + 3 * pg_temp.normal() AS c2,
			-7 + 4 * pg_temp.normal() AS c3,
			-6 + 1 * pg_temp.normal() AS c4,
			-5 + 2 * pg_temp.normal() AS c5,
			-4 + 3 * pg_temp.normal() AS c6,
			-3 + 4 * pg_temp.normal() AS c7,
			-2 + 1 * pg_temp.normal() AS c8,
			-1 + 2 * pg_temp.normal() AS c9,
			0 + 3 * pg_temp.normal() AS c10,
			1 + 4 * pg_temp.normal() AS c11,
			2 + 1 * pg_temp.normal() AS c12,
			3 + 2 * pg_temp.normal() AS c13,
			4 + 3 * pg_temp.normal() AS c14,
			5 + 4 * pg_temp.normal() AS c15,
			6 + 1 * pg_temp.normal() AS c16,
			7 + 2 * pg_temp.normal() AS c17,
			8 + 3 * pg_temp.normal() AS c18,
			9 + 4 * pg_temp.normal() AS c19,
			10 + 1 * pg_temp.normal() AS c20
		FROM generate_series(1, :rows) AS g
		OFFSET 0
	) AS features
	OFFSET 0
) AS r;

ANALYZE synth_1m;
SELECT count(*) AS rows, round(avg(label), 4) AS positive_fraction,
	round(avg(y)::numeric, 4) AS mean_y
FROM synth_1m;
