#!/bin/bash
# shards.sh: training over data on several PostgreSQL servers, on 3 hosts
# built as Linux namespaces (regress/nshosts.sh).  Each host runs its own
# server holding one shard: dmlh1 the coordinating server (with dml, shard
# 1 in its database "shard"), dmlh2 and dmlh3 a plain PostgreSQL each
# (no dml), started here as the server's OS user inside the host.  On
# dmlh1 a partitioned table has the three shards as postgres_fdw foreign
# leaves (servers named by address and by host name, a remote column
# renamed by column_name).
#   1. the full-batch model over the shards equals the model trained on
#      the union of the rows in one local table (1e-5); the metrics say
#      each shard was read on its host, the spec records each server and
#      its snapshot's time; 2 ranks a shard (ctid ranges) give it too; a
#      plain foreign table is one shard; text labels, a one-hot feature,
#      the validation split and every sync mode across the shards
#   2. bytes on the shard hosts' links: with every shard's host among the
#      job's hosts no table data crosses them; a job on dmlh1 alone reads
#      shards 2 and 3 over the network (and says so in a NOTICE)
#   3. an ordinary role: trains with its own user mappings (passwords
#      never in ps, the server log or the job's files); without a mapping
#      for one shard's server it gets a clear error before anything
#      starts; a mapping to a remote role without rights cannot read; one
#      without a password is refused
#   4. a shard's server stopped: before the call, a clean error naming
#      it; mid-training (a rank lost too), a restart that reads the shard
#      again or a clean error naming it; stopped and back before a rank
#      is lost: the restart reads it again; no process left on any host
#      (polled with a deadline of 10 s)
#   5. dml_predict_table over the shards: ranks read each shard on its host
#      (one rank a host, or 2 a shard in ctid ranges) and give, row for row,
#      the backend's result over the union in one local table (1e-6); on
#      the links only predictions cross, no table data, against the same
#      call with every rank on dmlh1 (shards read over the network); an
#      ordinary role with its own mappings, and without one for a shard
# Needs root (namespaces).  Runs on its own against the installed build:
#   bash regress/t/shards.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh
source regress/nshosts.sh
source regress/nsshards.sh
PASSED=0
FAILED=0
ok() { n=$((n + 1)); PASSED=$((PASSED + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); FAILED=$((FAILED + 1)); echo "not ok $n - $1"; }
# (tap.sh's check, which shows what a failed check looked at, calls these two)

if [ "$(id -u)" != 0 ] || ! command -v setcap >/dev/null || ! command -v nsenter >/dev/null; then
	echo "ok 1 - shard tests # SKIP need root, nsenter and setcap"
	echo "0 passed, 0 failed, 1 skipped"
	exit 0
fi
if [ ! -e "$(pg_config --pkglibdir)/postgres_fdw.so" ]; then
	echo "ok 1 - shard tests # SKIP postgres_fdw is not installed"
	echo "0 passed, 0 failed, 1 skipped"
	exit 0
fi

unset PGHOST PGPORT PGUSER PGDATABASE PGC_DIR
PGC_DIR=
cleanup() {
	[ -n "$PGC_DIR" ] && cp "$PGC_DIR/server.log" "$T/server.log" 2>/dev/null
	pgc_stop
	nsh_down			# kills the shard servers with every process of the hosts
}
trap cleanup EXIT
trap 'exit 1' INT TERM

SHARD_PORT=$NSS_PORT
N=2000					# rows per shard, the equality test
B=60000					# rows per shard, the bytes test
sql1() { pgc_psql -At -c "SET client_min_messages = warning" -c "$1"; }

host_job_procs() {
	local p n=0
	for p in $(ip netns pids "$NSH_TAG-dmlh$1" 2>/dev/null); do
		grep -qaE 'dml-worker|orted|mpirun' "/proc/$p/cmdline" 2>/dev/null &&
			[ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ] && n=$((n + 1))
	done
	echo $n
}
all_job_procs() { echo $(($(host_job_procs 1) + $(host_job_procs 2) + $(host_job_procs 3))); }
tx_bytes() { nsh_exec "$1" cat /sys/class/net/eth0/statistics/tx_bytes; }

# ---------------------------------------------------------------------
# the hosts, their servers and the shards
# ---------------------------------------------------------------------
nsh_up 3 || { notok "3 namespace hosts"; echo "$PASSED passed, $FAILED failed"; exit 1; }
nsh_cluster || { notok "server on dmlh1"; echo "$PASSED passed, $FAILED failed"; exit 1; }
check "a server of its own on dmlh2" 'nss_start 2'
check "a server of its own on dmlh3" 'nss_start 3'
check "dml is not installed on the shard servers" \
	'[ "$(nss_psql 2 -d postgres -c "SELECT count(*) FROM pg_available_extensions WHERE name = '"'dml'"' AND installed_version IS NOT NULL")" = 0 ]'

a1=$(nsh_addr 1)
a3=$(nsh_addr 3)
pw_reader=rd$RANDOM$RANDOM$RANDOM
pw_user=us$RANDOM$RANDOM$RANDOM
pw_noread=nr$RANDOM$RANDOM$RANDOM
rows_sql() {
	# the rows of shard k (of size m): i in ((k-1)m, km], x2 named $3
	echo "CREATE TABLE $4 AS SELECT i, sin(i * 0.37)::float8 AS x1, cos(i * 0.91)::float8 AS $3,
		sin(i * 1.3)::float8 AS x3, (sin(i * 0.37) + 2 * cos(i * 0.91) - sin(i * 1.3) + 0.5)::float8 AS y,
		(CASE WHEN sin(i * 0.37) + cos(i * 0.91) > 0.5 THEN 'a' WHEN sin(i * 1.3) > 0 THEN 'b' ELSE 'c' END) AS lab,
		ARRAY[sin(i * 0.37), cos(i * 0.91), sin(i * 1.3)]::float8[] AS v
		FROM generate_series(($1 - 1) * $2 + 1, $1 * $2) i"
}
shard_setup() {
	# k, a psql for that server (database postgres), the name of x2 there
	local k=$1 x2=$3
	$2 -c "CREATE DATABASE shard" >/dev/null || return 1
	$2 -c "DO \$\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'reader') THEN
		CREATE ROLE reader LOGIN PASSWORD '$pw_reader'; CREATE ROLE noread LOGIN PASSWORD '$pw_noread'; END IF; END \$\$" >/dev/null || return 1
	${2/-d postgres/-d shard} -c "$(rows_sql "$k" $N "$x2" part)" -c "$(rows_sql "$k" $B "$x2" big)" \
		-c "GRANT SELECT ON part, big TO reader" >/dev/null
}
psql1() { pgc_psql -At "$@"; }
psql2() { nss_psql 2 "$@"; }
psql3() { nss_psql 3 "$@"; }
check "shard 1 in database shard on dmlh1's server" 'shard_setup 1 "psql1 -d postgres" x2'
check "shard 2 on dmlh2's server" 'shard_setup 2 "psql2 -d postgres" x2'
check "shard 3 on dmlh3's server, x2 named feat2 there" 'shard_setup 3 "psql3 -d postgres" feat2'

# the partitioned tables on dmlh1: s1 by address, s2 by host name, s3 by address
sql1 "CREATE EXTENSION postgres_fdw;
	CREATE SERVER s1 FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$a1', port '$PGC_PORT', dbname 'shard');
	CREATE SERVER s2 FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host 'dmlh2', port '$SHARD_PORT', dbname 'shard');
	CREATE SERVER s3 FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$a3', port '$SHARD_PORT', dbname 'shard');
	CREATE USER MAPPING FOR postgres SERVER s1 OPTIONS (user 'reader', password '$pw_reader');
	CREATE USER MAPPING FOR postgres SERVER s2 OPTIONS (user 'reader', password '$pw_reader');
	CREATE USER MAPPING FOR postgres SERVER s3 OPTIONS (user 'reader', password '$pw_reader');
	CREATE TABLE sh (i int, x1 float8, x2 float8, x3 float8, y float8, lab text, v float8[]) PARTITION BY RANGE (i);
	CREATE TABLE bg (i int, x1 float8, x2 float8, x3 float8, y float8, lab text, v float8[]) PARTITION BY RANGE (i);" >/dev/null
for k in 1 2 3; do
	sql1 "CREATE FOREIGN TABLE sh_$k PARTITION OF sh FOR VALUES FROM ($(((k - 1) * N + 1))) TO ($((k * N + 1)))
			SERVER s$k OPTIONS (schema_name 'public', table_name 'part');
		CREATE FOREIGN TABLE bg_$k PARTITION OF bg FOR VALUES FROM ($(((k - 1) * B + 1))) TO ($((k * B + 1)))
			SERVER s$k OPTIONS (table_name 'big')" >/dev/null
done
sql1 "ALTER FOREIGN TABLE sh_3 ALTER COLUMN x2 OPTIONS (column_name 'feat2');
	ALTER FOREIGN TABLE bg_3 ALTER COLUMN x2 OPTIONS (column_name 'feat2');
	$(rows_sql 1 $((3 * N)) x2 sh_all)" >/dev/null
check "the shards read through postgres_fdw ($(sql1 "SELECT count(*) FROM sh") rows)" \
	'[ "$(sql1 "SELECT count(*) FROM sh")" = $((3 * N)) ] && [ "$(sql1 "SELECT count(*) FROM bg")" = $((3 * B)) ]'

train() {
	# name relation workers hosts [extra]: prints the NOTICEs and the worker count
	pgc_psql -At -c "SELECT workers FROM dml_train('$1', '$2', 'y', features => '{x1,x2,x3}', model => 'linear',
		optimizer => 'sgd', learning_rate => 0.1, batch_size => 1000000, epochs => 10, workers => $3,
		hosts => $4, device => 'cpu'${5:+, $5})" 2>&1
}

# ---------------------------------------------------------------------
# 1. the model over the shards = the model over their union
# ---------------------------------------------------------------------
out=$(train m_sh sh 3 NULL)
check "3 shards on 3 hosts trained ($(tail -1 <<<"$out"))" '[ "$(tail -1 <<<"$out")" = 3 ]'
out2=$(train m_all sh_all 1 "'{dmlh1}'")
check "the union in one local table trained" '[ "$(tail -1 <<<"$out2")" = 1 ]'
diff=$(sql1 "SELECT max(abs(dml_predict('m_sh', t) - dml_predict('m_all', t))) FROM sh_all t")
check "the model over the shards = the model over the union (max difference $diff)" \
	'awk -v d="$diff" "BEGIN { exit !(d != \"\" && d < 1e-5) }"'
reads=$(sql1 "SELECT string_agg(s->>'relation' || '@' || (s->>'host') || ':' || (s->>'read'), ' ' ORDER BY s->>'relation')
	FROM dml.models m, jsonb_array_elements(m.metrics->'shards') s WHERE m.name = 'm_sh'")
check "metrics: each shard read on its host ($reads)" \
	'[ "$reads" = "sh_1@dmlh1:on its host sh_2@dmlh2:on its host sh_3@dmlh3:on its host" ]'
hosts=$(sql1 "SELECT hosts FROM dml_epochs WHERE name = 'm_sh' AND epoch = 1")
check "one rank on each host ($hosts)" '[ "$hosts" = "{dmlh1,dmlh2,dmlh3}" ]'
spec=$(sql1 "SELECT string_agg((s->>'server') || ':' || (s->>'snapshot_time' IS NOT NULL)::text, ' ' ORDER BY s->>'server')
	FROM dml.models m, jsonb_array_elements(m.spec->'shards') s WHERE m.name = 'm_sh'")
check "the spec records each server and its snapshot's time ($spec)" '[ "$spec" = "s1:true s2:true s3:true" ]'
check "no process of the job left on any host" 'wait_until 10 "[ \$(all_job_procs) = 0 ]"'
out=$(train m_sh6 sh 6 NULL)
diff=$(sql1 "SELECT max(abs(dml_predict('m_sh6', t) - dml_predict('m_all', t))) FROM sh_all t")
check "2 ranks per shard (ctid ranges on each host): same model (max difference $diff)" \
	'[ "$(tail -1 <<<"$out")" = 6 ] && awk -v d="$diff" "BEGIN { exit !(d != \"\" && d < 1e-5) }"'

# a plain foreign table is one shard, read on its host
sql1 "CREATE TABLE sh2_local AS SELECT * FROM sh_all WHERE i > $N AND i <= $((2 * N))" >/dev/null
out=$(train m_f2 sh_2 3 NULL)
out2=$(train m_f2_local sh2_local 1 "'{dmlh1}'")
diff=$(sql1 "SELECT max(abs(dml_predict('m_f2', t) - dml_predict('m_f2_local', t))) FROM sh2_local t")
reads=$(sql1 "SELECT string_agg(s->>'relation' || '@' || (s->>'host') || ':' || (s->>'read'), ' ')
	FROM dml.models m, jsonb_array_elements(m.metrics->'shards') s WHERE m.name = 'm_f2'")
check "a plain foreign table: one shard, read on its host ($reads), the same model (max difference $diff)" \
	'[ "$reads" = "sh_2@dmlh2:on its host" ] && awk -v d="$diff" "BEGIN { exit !(d != \"\" && d < 1e-5) }"' "$out $out2"

# labels, the validation split and every sync mode across the shards
strain() {
	# name relation hosts sync-arguments
	sql1 "SELECT workers FROM dml_train('$1', '$2', 'lab', features => '{x1,x2,x3}', model => 'softmax',
		optimizer => 'sgd', learning_rate => 0.5, batch_size => ${5:-64}, epochs => 4, workers => 3, hosts => $3,
		validation => 0.2, device => 'cpu', $4)" >"$T/sync-$1.log" 2>&1
	sql1 "SELECT round((dml_evaluate('$1', 'sh_all')->>'accuracy')::numeric, 4)"
}
strain c_sh_full sh NULL "sync => 'allreduce'" 100000 >/dev/null
strain c_all_full sh_all "'{dmlh1}'" "sync => 'allreduce'" 100000 >/dev/null
same=$(sql1 "SELECT max(abs(a - b)) < 1e-5 FROM (SELECT unnest(dml_predict_proba('c_sh_full', t)) a,
	unnest(dml_predict_proba('c_all_full', t)) b FROM sh_all t) s")
vrows=$(sql1 "SELECT string_agg(metrics->>'validation_rows', ',' ORDER BY name) FROM dml.models WHERE name IN ('c_sh_full', 'c_all_full')")
check "text labels and a validation split over the shards: the union's full-batch softmax (1e-5; validation rows $vrows)" \
	'[ "$same" = t ] && [ "${vrows%,*}" = "${vrows#*,}" ] && [ "${vrows%,*}" -gt 0 ]' "$(cat "$T/sync-c_sh_full.log")"
ftrain() {
	# features name relation workers hosts: train()'s linear model on other features
	sql1 "SELECT workers FROM dml_train('$2', '$3', 'y', features => '$1', model => 'linear',
		optimizer => 'sgd', learning_rate => 0.1, batch_size => 1000000, epochs => 10, workers => $4,
		hosts => $5, device => 'cpu')" 2>&1
}
out=$(ftrain '{x1,lab}' o_sh sh 3 NULL)
out2=$(ftrain '{x1,lab}' o_all sh_all 1 "'{dmlh1}'")
diff=$(sql1 "SELECT max(abs(dml_predict('o_sh', t) - dml_predict('o_all', t))) FROM sh_all t")
levels=$(sql1 "SELECT spec->'features' FROM dml.models WHERE name = 'o_sh'" | grep -o '"a", "b", "c"' || true)
check "a one-hot feature over the shards: levels listed on each server, the union's model (max difference $diff)" \
	'[ -n "$levels" ] && awk -v d="$diff" "BEGIN { exit !(d != \"\" && d < 1e-5) }"' "$out $out2"
# an array feature: each server sends float4[] in PostgreSQL's binary format (no dml there)
out=$(ftrain '{v}' v_sh sh 3 NULL)
out2=$(ftrain '{v}' v_all sh_all 1 "'{dmlh1}'")
diff=$(sql1 "SELECT max(abs(dml_predict('v_sh', t) - dml_predict('v_all', t))) FROM sh_all t")
reads=$(sql1 "SELECT string_agg(s->>'read', ',' ORDER BY s->>'relation')
	FROM dml.models m, jsonb_array_elements(m.metrics->'shards') s WHERE m.name = 'v_sh'")
check "an array feature over the shards, read on their hosts ($reads): the union's model (max difference $diff)" \
	'[ "$reads" = "on its host,on its host,on its host" ] &&
	 awk -v d="$diff" "BEGIN { exit !(d != \"\" && d < 1e-5) }"' "$out $out2"
# a NULL element makes the row's array NULL (nulls => 'error' names it); a 2-D array is a shape error
psql2 -d shard -c "UPDATE part SET v = ARRAY[1, NULL, 2]::float8[] WHERE i = $((N + 5))" >/dev/null
out=$(ftrain '{v}' v_null sh 3 NULL)
check "a NULL element in a shard's array: the NULL policy's error names the feature" \
	'grep -q "NULL" <<<"$out" && grep -q "\"v\"" <<<"$out"' "$out"
psql2 -d shard -c "UPDATE part SET v = ARRAY[[1, 2, 3], [4, 5, 6]]::float8[] WHERE i = $((N + 5))" >/dev/null
out=$(ftrain '{v}' v_2d sh 3 NULL)
check "a 2-D array in a shard: the shape error names the feature" \
	'grep -q "\"v\"" <<<"$out" && ! grep -q "^3$" <<<"$out"' "$out"
psql2 -d shard -c "UPDATE part SET v = ARRAY[sin(i * 0.37), cos(i * 0.91), sin(i * 1.3)]::float8[] WHERE i = $((N + 5))" >/dev/null
base=$(strain c_all sh_all "'{dmlh1}'" "sync => 'allreduce'")
for mode in "allreduce|sync => 'allreduce'" "ps|sync => 'ps', servers => 1" \
	"ssp|sync => 'ssp', servers => 1, staleness => 1" "async|sync => 'async', servers => 1" \
	"gossip|sync => 'gossip'" "average|sync => 'average', average_every => 4"; do
	name=${mode%%|*}
	acc=$(strain "c_$name" sh NULL "${mode#*|}")
	check "$name over the shards: accuracy $acc, the union on one host $base" \
		'[ -n "$acc" ] && [ -n "$base" ] && awk -v a="$acc" -v b="$base" "BEGIN { exit !(a >= b - 0.03 && b > 0.7) }"' \
		"$(cat "$T/sync-c_$name.log")"
done

# ---------------------------------------------------------------------
# 2. table data on the links: none when every shard's host has ranks
# ---------------------------------------------------------------------
copy_bytes=$(((2 + 4 * 12) * 2 * B))	# binary COPY of shards 2 and 3: 4 float8 fields a row
t2=$(tx_bytes 2)
t3=$(tx_bytes 3)
out=$(train m_bg_local bg 3 NULL)
local_tx=$(($(tx_bytes 2) - t2 + $(tx_bytes 3) - t3))
t2=$(tx_bytes 2)
t3=$(tx_bytes 3)
out2=$(train m_bg_net bg 3 "'{dmlh1}'")
net_tx=$(($(tx_bytes 2) - t2 + $(tx_bytes 3) - t3))
echo "# bytes sent by dmlh2 and dmlh3: shards read on their hosts $local_tx, read over the network $net_tx; binary COPY of the two shards $copy_bytes"
check "shards read on their hosts: both trained" '[ "$(tail -1 <<<"$out")" = 3 ] && [ "$(tail -1 <<<"$out2")" = 3 ]'
check "read over the network: a NOTICE names each shard read so" \
	'grep -q "shard \"bg_2\" on server \"s2\" is read over the network" <<<"$out2" &&
	 grep -q "shard \"bg_3\" on server \"s3\" is read over the network" <<<"$out2" &&
	 ! grep -q "over the network" <<<"$out"'
check "over the network the links carried the shards ($net_tx - $local_tx >= 0.9 x $copy_bytes)" \
	'[ $((net_tx - local_tx)) -ge $((copy_bytes * 9 / 10)) ]'
check "on their hosts, no table data crossed: $local_tx bytes, under 5% of the shards' $copy_bytes" \
	'[ $((local_tx * 20)) -lt $copy_bytes ]'
diff=$(sql1 "SELECT max(abs(dml_predict('m_bg_local', t) - dml_predict('m_bg_net', t))) FROM sh_all t")
check "the same model either way (max difference $diff)" 'awk -v d="$diff" "BEGIN { exit !(d != \"\" && d < 1e-5) }"'
reads=$(sql1 "SELECT string_agg(s->>'read', ',' ORDER BY s->>'relation') FROM dml.models m,
	jsonb_array_elements(m.metrics->'shards') s WHERE m.name = 'm_bg_net'")
check "metrics of the network read ($reads)" '[ "$reads" = "on its host,over the network,over the network" ]'

# ---------------------------------------------------------------------
# 3. an ordinary role: its own mappings, none, or no rights there
# ---------------------------------------------------------------------
sql1 "CREATE ROLE shard_user LOGIN PASSWORD '$pw_user';
	GRANT SELECT ON sh, sh_1, sh_2, sh_3, sh_all TO shard_user;
	CREATE USER MAPPING FOR shard_user SERVER s1 OPTIONS (user 'reader', password '$pw_reader');
	CREATE USER MAPPING FOR shard_user SERVER s2 OPTIONS (user 'reader', password '$pw_reader')" >/dev/null
pgc_allow_role shard_user
for i in 1 2 3; do
	echo "$a1:$PGC_PORT:*:shard_user:$pw_user" | nsh_exec "$i" sh -c 'cat >>/tmp/dml-pgpass'
done
utrain() {
	pgc_psql -At -c "SET ROLE shard_user" -c "SELECT workers FROM dml_train('$1', 'sh', 'y', features => '{x1,x2,x3}',
		model => 'linear', optimizer => 'sgd', learning_rate => 0.1, batch_size => 1000000, epochs => 10,
		workers => 3, device => 'cpu')" 2>&1
}
out=$(utrain u_none)
check "no user mapping for s3: a clear error" \
	'grep -q "role \"shard_user\" has no user mapping for server \"s3\"" <<<"$out"' "$out"
check "... before anything started (no job, no process)" \
	'[ "$(sql1 "SELECT count(*) FROM dml.progress")" = 0 ] && [ "$(all_job_procs)" = 0 ] &&
	 [ "$(sql1 "SELECT count(*) FROM dml.models WHERE name = '"'u_none'"'")" = 0 ]'
sql1 "CREATE USER MAPPING FOR shard_user SERVER s3 OPTIONS (user 'noread', password '$pw_noread')" >/dev/null
out=$(utrain u_noread)
check "a mapping to a remote role without rights cannot read the shard" \
	'grep -q "shard server \"s3\" failed: permission denied for table part" <<<"$out"' "$out"
sql1 "ALTER USER MAPPING FOR shard_user SERVER s3 OPTIONS (DROP password)" >/dev/null
sql1 "ALTER USER MAPPING FOR shard_user SERVER s3 OPTIONS (SET user 'reader')" >/dev/null
out=$(utrain u_nopw)
check "an ordinary role's mapping without a password is refused (no password file of the server's)" \
	'grep -q "password is required to read shard server \"s3\"" <<<"$out"' "$out"
sql1 "ALTER USER MAPPING FOR shard_user SERVER s3 OPTIONS (ADD password '$pw_reader')" >/dev/null
# the job's processes, looked at while they run: no password on a command line
( utrain u_ok >"$T/u_ok.out" ) &
upid=$!
seen=0
psout=
while kill -0 $upid 2>/dev/null; do
	if [ "$(all_job_procs)" -gt 0 ]; then
		seen=1
		psout+=$(ps -eo args)
	fi
	sleep 0.05
done
wait $upid
check "an ordinary role trains over the shards with its own mappings" '[ "$(tail -1 "$T/u_ok.out")" = 3 ]' "$(cat "$T/u_ok.out")"
diff=$(sql1 "SELECT max(abs(dml_predict('u_ok', t) - dml_predict('m_all', t))) FROM sh_all t")
check "... the same model (max difference $diff)" 'awk -v d="$diff" "BEGIN { exit !(d != \"\" && d < 1e-5) }"'
check "no password on a command line while the job ran (looked $seen)" \
	'[ $seen = 1 ] && ! grep -q "$pw_reader\|$pw_user" <<<"$psout"'
check "no password in the server's log or the job's files" \
	'! grep -rqa "$pw_reader" "$PGC_DIR/server.log" "$PGC_DIR/tmp" 2>/dev/null'

# ---------------------------------------------------------------------
# 4. a shard's server stopped
# ---------------------------------------------------------------------
nss_stop 3 fast
out=$(train m_down sh 3 NULL)
check "s3 stopped before the call: a clean error naming it" \
	'grep -q "connecting to shard server \"s3\" failed" <<<"$out"' "$out"
check "... and no process anywhere" '[ "$(all_job_procs)" = 0 ]'
nss_restart 3
check "s3 back" 'wait_until 20 "nss_psql 3 -d shard -c \"SELECT 1\" >/dev/null 2>&1"'
pgc_psql -c "ALTER SYSTEM SET dml.test_hooks = on" -c "SELECT pg_reload_conf()" >/dev/null
wait_until 10 '[ "$(sql1 "SHOW dml.test_hooks")" = on ]'
# mid-training: s3 stops once the job runs, and a rank is lost at epoch 8
( pgc_psql -At -c "SELECT stopped FROM dml_train('m_mid', 'sh', 'y', features => '{x1,x2,x3}', model => 'linear',
	optimizer => 'sgd', learning_rate => 0.1, batch_size => 1000000, epochs => 40, workers => 3, device => 'cpu',
	options => '{\"fault\": \"2:8:exit\", \"straggler\": \"*:150:1\", \"max_restarts\": 2}')" >"$T/mid.out" 2>&1 ) &
mpid=$!
wait_until 60 '[ "$(sql1 "SELECT coalesce(max(epoch), 0) FROM dml.progress WHERE name = '"'m_mid'"'")" -ge 1 ] || ! kill -0 $mpid 2>/dev/null'
nss_stop 3 immediate
wait $mpid
out=$(cat "$T/mid.out")
echo "# mid-training: $(tr '\n' ' ' <<<"$out" | cut -c1-300)"
check "s3 stopped mid-training: a clean error naming it, or a restart that read it again" \
	'grep -q "shard server \"s3\"" <<<"$out" && ! grep -qi "crash\|terminated abnormally" <<<"$out"' "$out"
check "no process of the job left on any host (polled up to 10 s)" 'wait_until 10 "[ \$(all_job_procs) = 0 ]"'
# s3 stopped and back before a rank is lost: the restart reads it again
check "s3 back again" 'nss_restart 3; wait_until 20 "nss_psql 3 -d shard -c \"SELECT 1\" >/dev/null 2>&1"'
( pgc_psql -At -c "SELECT stopped FROM dml_train('m_back', 'sh', 'y', features => '{x1,x2,x3}', model => 'linear',
	optimizer => 'sgd', learning_rate => 0.1, batch_size => 1000000, epochs => 60, workers => 3, device => 'cpu',
	options => '{\"fault\": \"2:40:exit\", \"straggler\": \"*:150:1\", \"max_restarts\": 2}')" >"$T/back.out" 2>&1 ) &
mpid=$!
wait_until 60 '[ "$(sql1 "SELECT coalesce(max(epoch), 0) FROM dml.progress WHERE name = '"'m_back'"'")" -ge 1 ] || ! kill -0 $mpid 2>/dev/null'
nss_stop 3 immediate
nss_restart 3
wait_until 20 'nss_psql 3 -d shard -c "SELECT 1" >/dev/null 2>&1'
at=$(sql1 "SELECT coalesce(max(epoch), 0) FROM dml.progress WHERE name = 'm_back'")
wait $mpid
out=$(cat "$T/back.out")
if [ "$at" -gt 0 ] && [ "$at" -lt 39 ]; then
	check "s3 stopped and back by epoch $at: the restart reads it under a new snapshot and finishes" \
		'grep -q "shard server \"s3\" is read again under a new snapshot" <<<"$out" && grep -q "restarting from the checkpoint" <<<"$out" &&
		 [ "$(tail -1 <<<"$out")" = "max epochs" ]' "$out"
else
	ok "s3 back after the lost rank (epoch $at) # SKIP the machine was too slow to test the restart's read"
fi
check "no process of the job left on any host (polled up to 10 s)" 'wait_until 10 "[ \$(all_job_procs) = 0 ]"'

# ---------------------------------------------------------------------
# 5. batch inference over the shards: ranks read each shard on its host
# ---------------------------------------------------------------------
same_scores() {
	# tables a and b: the same ids, predictions within 1e-6; prints "equal/all"
	sql1 "SELECT count(*) FILTER (WHERE abs(a.prediction - b.prediction) <= 1e-6) || '/' || count(*)
		FROM $1 a FULL JOIN $2 b USING (i)"
}
sql1 "CALL dml_predict_table('m_sh', 'sh_all', 'sh_local', 'i')" >/dev/null
out=$(pgc_psql -c "CALL dml_predict_table('m_sh', 'sh', 'sh_scores', 'i')" 2>&1)
same=$(same_scores sh_scores sh_local)
check "dml_predict_table over the shards: one rank on each shard's host ($(grep -o '[0-9]* ranks on hosts.*' <<<"$out"))" \
	'grep -q "3 ranks on hosts dmlh1, dmlh2, dmlh3" <<<"$out" && ! grep -q "over the network" <<<"$out"' "$out"
check "... written on this server, row for row the local result over the union ($same equal)" \
	'[ "$same" = $((3 * N))/$((3 * N)) ]' "$out"
out=$(pgc_psql -c "CALL dml_predict_table('m_sh', 'sh', 'sh_scores6', 'i', workers => 6)" 2>&1)
same=$(same_scores sh_scores6 sh_local)
check "2 ranks a shard (ctid ranges on each host): the same ($same equal)" \
	'[ "$same" = $((3 * N))/$((3 * N)) ] && grep -q "6 ranks on hosts dmlh1, dmlh1, dmlh2, dmlh2, dmlh3, dmlh3" <<<"$out"' "$out"
# a one-hot text feature and an array feature, read on each shard's server (no dml there)
for m in o_sh v_sh; do
	sql1 "CALL dml_predict_table('$m', 'sh_all', '${m}_local', 'i')" >/dev/null
	out=$(pgc_psql -c "CALL dml_predict_table('$m', 'sh', '${m}_scores', 'i')" 2>&1)
	same=$(same_scores ${m}_scores ${m}_local)
	check "$m (features: $(sql1 "SELECT string_agg(f->>'name' || ' ' || (f->>'kind'), ', ')
		FROM dml.models m, jsonb_array_elements(m.spec->'features') f WHERE m.name = '$m'")) over the shards: the local result ($same equal)" \
		'[ "$same" = $((3 * N))/$((3 * N)) ]' "$out"
done
# on the links: only the predictions of shards 2 and 3 leave their hosts
sql1 "CREATE TABLE bg_all AS SELECT * FROM bg" >/dev/null
sql1 "CALL dml_predict_table('m_sh', 'bg_all', 'bg_local', 'i')" >/dev/null
t2=$(tx_bytes 2)
t3=$(tx_bytes 3)
out=$(pgc_psql -c "CALL dml_predict_table('m_sh', 'bg', 'bg_scores', 'i')" 2>&1)
local_tx=$(($(tx_bytes 2) - t2 + $(tx_bytes 3) - t3))
t2=$(tx_bytes 2)
t3=$(tx_bytes 3)
out2=$(pgc_psql -c "SET dml.hosts = 'dmlh1 slots=3'" -c "CALL dml_predict_table('m_sh', 'bg', 'bg_net', 'i')" 2>&1)
net_tx=$(($(tx_bytes 2) - t2 + $(tx_bytes 3) - t3))
data_bytes=$(((2 + 8 + 3 * 12) * 2 * B))	# binary COPY of shards 2 and 3: id and 3 float8 features a row
pred_bytes=$(((4 + 4 + 4) * 2 * B))			# what comes back: id and one float32 output a row
echo "# predict_table, bytes sent by dmlh2 and dmlh3: shards read on their hosts $local_tx, over the network $net_tx; the shards' features $data_bytes, their predictions $pred_bytes"
check "predict over bg: both ways, the local result row for row" \
	'[ "$(same_scores bg_scores bg_local)" = $((3 * B))/$((3 * B)) ] && [ "$(same_scores bg_net bg_local)" = $((3 * B))/$((3 * B)) ]' "$out $out2"
check "every rank on dmlh1: a NOTICE names the shards read over the network" \
	'grep -q "shard \"bg_2\" on server \"s2\" is read over the network" <<<"$out2" &&
	 grep -q "shard \"bg_3\" on server \"s3\" is read over the network" <<<"$out2"'
check "over the network the links carried the shards' rows ($net_tx >= 0.9 x $data_bytes)" \
	'[ $net_tx -ge $((data_bytes * 9 / 10)) ]'
check "on their hosts no table data crossed: $local_tx bytes, about the predictions' $pred_bytes, under half the features' $data_bytes" \
	'[ $((local_tx * 2)) -lt $data_bytes ] && [ $((local_tx * 10)) -lt $((pred_bytes * 15)) ]'
# an ordinary role, with its own mappings (section 3), and without one
sql1 "GRANT CREATE ON SCHEMA public TO shard_user; SELECT dml_grant('m_sh', 'shard_user')" >/dev/null
out=$(pgc_psql -c "SET ROLE shard_user" -c "CALL dml_predict_table('m_sh', 'sh', 'sh_user', 'i')" 2>&1)
same=$(same_scores sh_user sh_local)
check "an ordinary role predicts over the shards with its own mappings ($same equal)" \
	'[ "$same" = $((3 * N))/$((3 * N)) ]' "$out"
sql1 "DROP USER MAPPING FOR shard_user SERVER s3" >/dev/null
out=$(pgc_psql -c "SET ROLE shard_user" -c "CALL dml_predict_table('m_sh', 'sh', 'sh_user2', 'i')" 2>&1)
check "without a mapping for s3: a clear error, no table, no process" \
	'grep -q "role \"shard_user\" has no user mapping for server \"s3\"" <<<"$out" &&
	 [ "$(sql1 "SELECT to_regclass('"'sh_user2'"') IS NULL")" = t ] && [ "$(all_job_procs)" = 0 ]' "$out"
check "no process of a predict job left on any host (polled up to 10 s)" 'wait_until 10 "[ \$(all_job_procs) = 0 ]"'

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
