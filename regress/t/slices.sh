#!/bin/bash
# slices.sh: a table's rows are cut between the ranks by the blocks that
# hold them.  Pages left empty at a table's end (PostgreSQL 16 and later
# extend a table by many pages at once in a bulk load; here a DELETE and a
# VACUUM that may not truncate leave them) no longer count as a rank's
# share, and every row is still read: a plain table, a partitioned one, and
# one with no row left.
#
# Runs against the cluster regress/run.sh started (PGHOST, PGPORT, PGUSER,
# PGDATABASE=dml_regress).
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh

q() { pgc_psql -qAt -c "SET client_min_messages = warning" -c "$1" 2>&1; }
# train MODEL on TABLE with 2 ranks; print the slices' DEBUG lines and any error
train2() {
	pgc_psql -qAt -c "SET client_min_messages = debug1" -c "SELECT 1 FROM dml_train('$1', '$2', 'y',
		features => '{x1,x2}', model => 'mlp', hidden => '{8}', optimizer => 'sgd', epochs => 1,
		batch_size => 32, workers => 2)" 2>&1 | grep -E 'dml: rank|ERROR' | sed 's/^DEBUG: *//'
}
# emptied TABLE [ROWS]: ROWS rows (3000), then 2000 more, deleted and vacuumed
# away with their pages kept at the end
emptied() {
	q "DROP TABLE IF EXISTS $1 CASCADE;
	CREATE TABLE $1 (i int, x1 float8, x2 float8, y float8)
		WITH (vacuum_truncate = off, autovacuum_enabled = off);
	INSERT INTO $1 SELECT i, sin(i * 0.37), cos(i * 0.91), 3 * sin(i * 0.37) - 2 * cos(i * 0.91)
		FROM generate_series(1, ${2:-3000}) i;
	INSERT INTO $1 SELECT i, 0, 0, 0 FROM generate_series(100001, 102000) i;
	DELETE FROM $1 WHERE i > 100000" >/dev/null
	q "VACUUM $1" >/dev/null
}
q "DELETE FROM dml.models WHERE name LIKE 'sl\_%'" >/dev/null

# -- a plain table: the cut at half of the pages that hold rows
emptied sl_plain
pages=$(q "SELECT pg_relation_size('sl_plain') / 8192")
used=$(q "SELECT max((ctid::text::point)[0])::int + 1 FROM sl_plain")
half=$((used / 2))
out=$(train2 sl_plain sl_plain)
want="dml: rank 0 reads \"sl_plain\" blocks 0 to $((half - 1))
dml: rank 1 reads \"sl_plain\" from block $half to its end"
check "sl_plain has $pages pages, rows on the first $used: the two ranks get $half and the rest" \
	'[ "$pages" -gt "$used" ] && [ "$out" = "$want" ]' "$out"
check "every row of sl_plain was read" \
	'[ "$(q "SELECT metrics->>'"'train_rows'"' FROM dml.models WHERE name = '"'sl_plain'"'")" = 3000 ]'

# -- rows on the last page after a gap: nothing to pass over, the cut at half of every page
q "DROP TABLE IF EXISTS sl_gap; CREATE TABLE sl_gap (LIKE sl_plain)
	WITH (vacuum_truncate = off, autovacuum_enabled = off);
	INSERT INTO sl_gap SELECT * FROM sl_plain ORDER BY i;
	INSERT INTO sl_gap SELECT i, 0, 0, 0 FROM generate_series(100001, 102000) i;
	INSERT INTO sl_gap SELECT i, sin(i * 0.37), cos(i * 0.91), 3 * sin(i * 0.37) - 2 * cos(i * 0.91)
		FROM generate_series(3001, 3010) i;
	DELETE FROM sl_gap WHERE i > 100000" >/dev/null
q "VACUUM sl_gap" >/dev/null
gpages=$(q "SELECT pg_relation_size('sl_gap') / 8192")
glast=$(q "SELECT max((ctid::text::point)[0])::int + 1 FROM sl_gap")
out=$(train2 sl_gap sl_gap)
check "sl_gap's last page ($glast of $gpages) holds rows: the cut at half of them all" \
	'[ "$glast" = "$gpages" ] && grep -q "rank 1 reads \"sl_gap\" from block $((gpages / 2)) to its end" <<<"$out"' "$out"
check "every row of sl_gap was read" \
	'[ "$(q "SELECT metrics->>'"'train_rows'"' FROM dml.models WHERE name = '"'sl_gap'"'")" = 3010 ]'

# -- no row left: it fails as an empty table does
emptied sl_none 0
q "DROP TABLE IF EXISTS sl_fresh; CREATE TABLE sl_fresh (LIKE sl_none)" >/dev/null
none=$(train2 sl_none sl_none | sed 's/sl_none/T/g')
fresh=$(train2 sl_fresh sl_fresh | sed 's/sl_fresh/T/g')
check "sl_none ($(q "SELECT pg_relation_size('sl_none') / 8192") pages, no row) fails as an empty table: $fresh" \
	'[ -n "$fresh" ] && [ "$none" = "$fresh" ]' "$none"

# -- a partitioned table whose leaves have empty pages at their ends
q "DROP TABLE IF EXISTS sl_parts;
	CREATE TABLE sl_parts (i int, x1 float8, x2 float8, y float8) PARTITION BY RANGE (i)" >/dev/null
emptied sl_leaf_a 3000
emptied sl_leaf_b 1500
q "UPDATE sl_leaf_b SET i = i + 10000" >/dev/null
q "VACUUM sl_leaf_b" >/dev/null
emptied sl_leaf_c 0
q "ALTER TABLE sl_parts ATTACH PARTITION sl_leaf_a FOR VALUES FROM (1) TO (10001);
	ALTER TABLE sl_parts ATTACH PARTITION sl_leaf_b FOR VALUES FROM (10001) TO (20001);
	ALTER TABLE sl_parts ATTACH PARTITION sl_leaf_c FOR VALUES FROM (20001) TO (30001)" >/dev/null
out=$(train2 sl_parts sl_parts)
check "sl_parts: every leaf read to its end, the one with no row from its first block by the last rank" \
	'grep -q "\"sl_leaf_a\" from block [0-9]* to its end" <<<"$out" &&
	grep -q "\"sl_leaf_b\" from block [0-9]* to its end" <<<"$out" &&
	grep -q "rank 1 reads \"sl_leaf_c\" from block 0 to its end" <<<"$out"' "$out"
check "every row of sl_parts was read ($(q "SELECT count(*) FROM sl_parts"))" \
	'[ "$(q "SELECT metrics->>'"'train_rows'"' FROM dml.models WHERE name = '"'sl_parts'"'")" = 4500 ]'

q "DROP TABLE IF EXISTS sl_plain, sl_gap, sl_none, sl_fresh, sl_parts CASCADE;
	DELETE FROM dml.models WHERE name LIKE 'sl\_%'" >/dev/null
echo "$n tests"
