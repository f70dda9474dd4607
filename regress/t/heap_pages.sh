#!/bin/bash
# heap_pages.sh: where its rows have an int id or row numbers,
# dml_predict_table writes the pages of the table it creates itself
# (extension/heap_pages.c), not through shared buffers; what PostgreSQL's
# own inserts would have left, as durable.
#   1. With data checksums (every page read back is verified) and wal_level
#      replica: each row, some ids NULL, lies where PostgreSQL's inserts put
#      it (a CREATE TABLE AS copy holds the same row at every ctid),
#      amcheck's verify_heapam finds nothing, the predictions are
#      dml_predict's, and the WAL holds the tables as whole pages (FPI
#      records, no heap inserts).
#   2. Crash recovery rebuilds them from that WAL alone: stopped at once
#      (no shutdown checkpoint) and with the tables' files emptied, as if
#      the writes had never reached the disk, the cluster comes back with
#      the same rows at the same places.
#   3. ROLLBACK leaves no table and no file; ROLLBACK TO SAVEPOINT leaves no
#      table, and the same call after it writes the same rows.
#   4. wal_level minimal (WAL skipped, the commit syncs the new table) and
#      logical: the same rows, sound; with logical they go in as heap
#      inserts (MULTI_INSERT records, which logical decoding reads and
#      whole pages are not), and a text id goes that way anywhere.
# Starts a cluster of its own.  Where the server lacks the contrib modules
# amcheck or pg_walinspect (PyPI's pgserver 16 ships neither), the checks
# that need them say so, skipped, or leave that part out and say which.
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh
trap '[ -n "${DML_KEEP:-}" ] || pgc_stop' EXIT

PGC_INITDB_OPTS=--data-checksums pgc_start || { notok "cluster started"; exit 1; }
q() { pgc_psql -qAt -c "SET client_min_messages = warning" -c "$1" 2>&1; }
q "CREATE EXTENSION dml" >/dev/null
# the contrib modules the checks read with, where the server has them
have() {
	pgc_available "$1" || return 0
	q "CREATE EXTENSION $1" >/dev/null	# (a failure here fails the checks that read it)
	echo yes
}
AMCHECK=$(have amcheck)
WALINSPECT=$(have pg_walinspect)
# the name of a check that leaves verify_heapam out, and one that only reads it
NOHEAP=; [ -n "$AMCHECK" ] || NOHEAP=" (verify_heapam not run: amcheck is not installed)"
heapcheck() {	# what cond
	if [ -n "$AMCHECK" ]; then check "$1" "$2"; else ok "$1 # SKIP amcheck is not installed"; fi
}
NOWAL=; [ -n "$WALINSPECT" ] || NOWAL=" (its WAL records not read: pg_walinspect is not installed)"
# whether walrecs' list W is heap inserts and no whole pages (true where not read)
heap_inserts() { [ -z "$WALINSPECT" ] || { [[ "$1" == *MULTI_INSERT* ]] && [[ "$1" != *FPI* ]]; }; }
# no timed checkpoint may move recovery's start past this test's WAL
pgc_psql -c "ALTER SYSTEM SET checkpoint_timeout = '1h'" -c "SELECT pg_reload_conf()" >/dev/null
check "data checksums are on" '[ "$(q "SHOW data_checksums")" = on ]'

q "CREATE TABLE src AS SELECT i::int8 AS id, sin(i * 0.37) AS x1, cos(i * 0.11) AS x2,
	2 * sin(i * 0.37) - cos(i * 0.11) AS y,
	(ARRAY['low','middle','high'])[1 + (i % 3)] AS lab FROM generate_series(1, 20000) i;
   UPDATE src SET id = NULL WHERE id % 97 = 0" >/dev/null
q "SELECT name FROM dml_train('hp_reg', 'src', 'y', features => '{x1,x2}', model => 'linear')
   UNION ALL SELECT name FROM dml_train('hp_cls', 'src', 'lab', features => '{x1,x2}',
	model => 'softmax', epochs => 2, workers => 1)" >"$T/hp-train.log"
check "a regression and a classifier trained" '[ "$(q "SELECT count(*) FROM dml.models")" = 2 ]' ||
	cat "$T/hp-train.log"

# every row of TABLE with its ctid, and a digest of them
rows() { q "SELECT count(*) || ' ' || md5(string_agg(ctid::text || ' ' || t::text, ',' ORDER BY ctid)) FROM $1 t"; }
# verify_heapam's complaints about TABLE
# (0 where amcheck is not installed: the checks then say verify_heapam was not run)
corrupt() { if [ -n "$AMCHECK" ]; then q "SELECT count(*) FROM verify_heapam('$1', check_toast => true)"; else echo 0; fi; }
# records of the WAL from LSN to the flushed end that name TABLE's file: TYPE count
walrecs() {
	[ -n "$WALINSPECT" ] || { echo "not read"; return; }
	q "SELECT coalesce(string_agg(record_type || ' ' || n, ',' ORDER BY record_type), 'none') FROM (
		SELECT record_type, count(*) AS n FROM pg_get_wal_records_info('$1', pg_current_wal_flush_lsn())
		WHERE block_ref LIKE '%/' || pg_relation_filenode('$2') || ' %' GROUP BY 1) r"
}
# predict into TABLE (regression by id, classes by row number) as the call would be made
predict() {	# suffix
	pgc_psql -qAt -c "SET synchronous_commit = on" -c "SET client_min_messages = warning" \
		-c "CALL dml_predict_table('hp_reg', 'src', 'reg_$1', 'id')" \
		-c "CALL dml_predict_table('hp_cls', 'src', 'cls_$1')"
}

# 1. replica, checksums
lsn=$(q "SELECT pg_current_wal_flush_lsn()")
predict a
for t in reg_a cls_a; do
	q "CREATE TABLE copy_$t AS SELECT * FROM $t" >/dev/null
	r=$(rows "$t")
	check "replica: $t has its 20000 rows where PostgreSQL's inserts put them (a copy has each at the same ctid)" \
		'[ "${r%% *}" = 20000 ] && [ "$r" = "$(rows "copy_$t")" ]'
	heapcheck "replica: verify_heapam finds nothing wrong in $t" '[ "$(corrupt "$t")" = 0 ]'
	w=$(walrecs "$lsn" "$t")
	if [ -n "$WALINSPECT" ]; then
		check "replica: $t is in the WAL as whole pages, no heap inserts ($w)" \
			'[[ "$w" =~ ^FPI\ [0-9]+$ ]]'
	else
		ok "replica: $t is in the WAL as whole pages # SKIP pg_walinspect is not installed"
	fi
done
same_reg=$(q "SELECT count(*) FILTER (WHERE r.id IS NULL) || ' ' ||
		bool_and(abs(r.prediction - dml_predict('hp_reg', ARRAY[s.x1, s.x2])) < 1e-9)
	FROM (SELECT row_number() OVER () AS n, * FROM reg_a) r
	JOIN (SELECT row_number() OVER () AS n, * FROM src) s ON s.n = r.n")
same_cls=$(q "SELECT count(*) || ' ' || bool_and(c.prediction = dml_predict_class('hp_cls', ARRAY[s.x1, s.x2]))
	FROM cls_a c JOIN (SELECT row_number() OVER () AS n, * FROM src) s ON s.n = c.row_number")
check "replica: the predictions are dml_predict's, NULL ids kept ($same_reg; $same_cls)" \
	'[ "$same_reg" = "206 true" ] && [ "$same_cls" = "20000 true" ]'
before_reg=$(rows reg_a)
before_cls=$(rows cls_a)

# 2. crash: stop at once, empty the files, recover from the WAL
files=$(q "SELECT pg_relation_filepath('reg_a') || ' ' || pg_relation_filepath('cls_a')")
redo_ok=$(q "SELECT redo_lsn < '$lsn'::pg_lsn FROM pg_control_checkpoint()")
pgc_as_pg "$PG_BINDIR/pg_ctl" -D "$PGC_DIR/data" -m immediate -w stop >/dev/null
for f in $files; do pgc_as_pg truncate -s 0 "$PGC_DIR/data/$f"; done
pgc_as_pg env TMPDIR="$PGC_DIR/tmp" DML_TEST_CLUSTER="$PGC_DIR" "$PG_BINDIR/pg_ctl" \
	-D "$PGC_DIR/data" -l "$PGC_DIR/server.log" -w -t 60 start >/dev/null
check "crash: recovery started before the tables' WAL (no checkpoint since)" '[ "$redo_ok" = t ]'
check "crash: with their files emptied, recovery gives both tables back, the same rows at the same places" \
	'[ "${before_reg%% *}" = 20000 ] && [ "${before_cls%% *}" = 20000 ] &&
	 [ "$(rows reg_a)" = "$before_reg" ] && [ "$(rows cls_a)" = "$before_cls" ]'
heapcheck "crash: verify_heapam finds nothing wrong after recovery" \
	'[ "$(corrupt reg_a) $(corrupt cls_a)" = "0 0" ]'

# 3. rollback
out=$(pgc_psql -qAt -c "SET client_min_messages = warning" -c "BEGIN" \
	-c "CALL dml_predict_table('hp_reg', 'src', 'reg_r', 'id')" \
	-c "SELECT pg_relation_filepath('reg_r')" -c "ROLLBACK" 2>&1)
gone=$(q "SELECT to_regclass('reg_r') IS NULL")
# (the file is emptied at once and unlinked at the next checkpoint)
check "rollback: no table left, and its file ($out) empty" \
	'[ "$gone" = t ] && [[ "$out" =~ ^base/[0-9]+/[0-9]+$ ]] && ! [ -s "$PGC_DIR/data/$out" ]'
pgc_psql -qAt -c "SET client_min_messages = warning" -c "BEGIN" -c "SAVEPOINT s" \
	-c "CALL dml_predict_table('hp_reg', 'src', 'reg_s', 'id')" -c "ROLLBACK TO SAVEPOINT s" \
	-c "SELECT to_regclass('reg_s') IS NULL" \
	-c "CALL dml_predict_table('hp_reg', 'src', 'reg_s', 'id')" -c "COMMIT" >"$T/hp-savepoint.log" 2>&1
check "savepoint: rolled back it leaves no table; the same call after it writes the same rows$NOHEAP" \
	'[ "$(head -1 "$T/hp-savepoint.log")" = t ] && [ "$(rows reg_s)" = "$before_reg" ] && [ "$(corrupt reg_s)" = 0 ]'

# 4. wal_level minimal and logical
walrestart() {
	pgc_psql -c "ALTER SYSTEM SET wal_level = $1" -c "ALTER SYSTEM SET max_wal_senders = $2" >/dev/null
	pgc_restart fast
	level=$(q "SHOW wal_level")
	check "wal_level is $1" '[ "$level" = '"$1"' ]'
}
walrestart minimal 0
predict m
check "minimal: the same rows in the same places, sound$NOHEAP" \
	'[ "$(rows reg_m)" = "$before_reg" ] && [ "$(rows cls_m)" = "$before_cls" ] &&
	 [ "$(corrupt reg_m) $(corrupt cls_m)" = "0 0" ]'
walrestart logical 10
lsn=$(q "SELECT pg_current_wal_flush_lsn()")
predict l
w=$(walrecs "$lsn" reg_l)
check "logical: the same rows, sound, gone in as heap inserts ($w)$NOHEAP$NOWAL" \
	'[ "$(rows reg_l)" = "$before_reg" ] && [ "$(rows cls_l)" = "$before_cls" ] &&
	 [ "$(corrupt reg_l) $(corrupt cls_l)" = "0 0" ] &&
	 heap_inserts "$w"'
walrestart replica 10
q "CREATE TABLE src_text AS SELECT id::text AS id, x1, x2 FROM src" >/dev/null
lsn=$(q "SELECT pg_current_wal_flush_lsn()")
pgc_psql -qAt -c "SET synchronous_commit = on" -c "SET client_min_messages = warning" \
	-c "CALL dml_predict_table('hp_reg', 'src_text', 'reg_t', 'id')"
w=$(walrecs "$lsn" reg_t)
check "a text id: heap inserts on replica too, the same predictions ($w)$NOWAL" \
	'heap_inserts "$w" &&
	 [ "$(q "SELECT count(*) FROM reg_t t JOIN reg_a a ON a.id::text = t.id AND a.prediction = t.prediction")" = 19794 ]'
