#!/bin/bash
# multihost.sh: training across hosts, on 3 hosts built as Linux namespaces
# on this machine (regress/nshosts.sh: a network, mount and UTS namespace
# each, a private /tmp, a bridge in a namespace of its own, addresses of a
# private range that exist only inside them).  PostgreSQL runs on host
# dmlh1 and listens on its address with scram-sha-256; every host has its
# own password file for the server's OS user; Open MPI starts its daemon on
# the other hosts through the launch agent regress/nsagent.sh and carries
# MPI over TCP between them.
#   1. 3 hosts x 2 ranks give the same full-batch model as 6 ranks on one
#      host and as 1 rank (1e-5), for linear, softmax and MLP; placement
#      is recorded (dml.epochs.hosts, metrics) and checked against dml.hosts
#   2. every sync mode, and both compressions, train across hosts to the
#      accuracy of one host
#   3. bytes across hosts per step, measured on the hosts' links: the
#      hierarchical all-reduce against a flat MPI_Allreduce of all ranks
#   4. a host's processes killed, and its link set down, mid-training: the
#      job restarts on the hosts left and finishes, or (max_restarts 0)
#      fails naming the host; no process left on any host within 2 s
#   5. cancel and pg_terminate_backend leave nothing on any host
#   6. dml_predict_table with 3 ranks on the 3 hosts gives, row for row, the
#      one-rank (backend) result; an ordinary role's ranks on every host see
#      only the rows its policy shows; cancel leaves nothing on any host
# Needs root (namespaces).  Runs on its own against the installed build:
#   bash regress/t/multihost.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
source regress/pgcluster.sh
source regress/tap.sh
source regress/nshosts.sh
PASSED=0
FAILED=0
ok() { n=$((n + 1)); PASSED=$((PASSED + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); FAILED=$((FAILED + 1)); echo "not ok $n - $1"; }

if [ "$(id -u)" != 0 ] || ! command -v setcap >/dev/null || ! command -v nsenter >/dev/null; then
	echo "ok 1 - multi-host tests # SKIP need root, nsenter and setcap"
	echo "0 passed, 0 failed, 1 skipped"
	exit 0
fi

# the suite's cluster variables are not ours: this test runs its own server
unset PGHOST PGPORT PGUSER PGDATABASE PGC_DIR
PGC_DIR=
cleanup() {
	pgc_stop
	nsh_down
}
trap cleanup EXIT
trap 'exit 1' INT TERM

sql1() { pgc_psql -At -c "SET client_min_messages = warning" -c "$1"; }

# processes of a job (mpirun, Open MPI's daemons, workers) on host i
host_job_procs() {
	local p n=0
	for p in $(ip netns pids "$NSH_TAG-dmlh$1" 2>/dev/null); do
		grep -qaE 'dml-worker|orted|mpirun' "/proc/$p/cmdline" 2>/dev/null &&
			[ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ] && n=$((n + 1))
	done
	echo $n
}
all_job_procs() { echo $(($(host_job_procs 1) + $(host_job_procs 2) + $(host_job_procs 3))); }

# ---------------------------------------------------------------------
# the hosts and the server
# ---------------------------------------------------------------------
nsh_up 3 || { notok "3 namespace hosts"; echo "$PASSED passed, $FAILED failed"; exit 1; }
nsh_cluster || { notok "server on dmlh1"; echo "$PASSED passed, $FAILED failed"; exit 1; }
check "the server's directory is hidden on dmlh2 and dmlh3" \
	'! nsh_exec 2 test -e "$PGC_DIR/data" && ! nsh_exec 3 test -e "$PGC_DIR/data" && test -e "$PGC_DIR/data"'
check "hba: scram over the hosts' network, no trust" \
	'grep -q "$NSH_NET.0/24 *scram-sha-256" "$PGC_DIR/data/pg_hba.conf" && ! grep -qE "^host.*trust" "$PGC_DIR/data/pg_hba.conf"'

# ---------------------------------------------------------------------
# 1. the same full-batch model on 3 hosts x 2 ranks, 6 ranks on one host, 1 rank
# ---------------------------------------------------------------------
sql1 "CREATE TABLE mh AS SELECT i, sin(i * 0.37)::float8 AS x1, cos(i * 0.91)::float8 AS x2,
	sin(i * 1.3)::float8 AS x3,
	(sin(i * 0.37) + 2 * cos(i * 0.91) - sin(i * 1.3))::float8 AS y,
	(CASE WHEN sin(i * 0.37) + cos(i * 0.91) > 0.5 THEN 'a'
		  WHEN sin(i * 1.3) > 0 THEN 'b' ELSE 'c' END) AS label
	FROM generate_series(1, 1200) i" >/dev/null
train() {
	# name kind target workers hosts extra
	sql1 "SELECT workers FROM dml_train('$1', 'mh', '$3', features => '{x1,x2,x3}', model => '$2',
		optimizer => 'sgd', learning_rate => 0.1, batch_size => 2000, epochs => 15, workers => $4,
		hosts => $5, device => 'cpu', hidden => ${6:-NULL})" 2>&1
}
maxdiff() {
	# largest difference of two models' outputs over the table
	if [ "$3" = linear ]; then
		sql1 "SELECT max(abs(dml_predict('$1', t) - dml_predict('$2', t))) < 1e-5 FROM mh t"
	else
		sql1 "SELECT max(abs(a - b)) < 1e-5 FROM (SELECT unnest(dml_predict_proba('$1', t)) a,
			unnest(dml_predict_proba('$2', t)) b FROM mh t) s"
	fi
}
for k in linear softmax mlp; do
	tgt=label; [ $k = linear ] && tgt=y
	hid=NULL; [ $k = mlp ] && hid="'{8}'"
	train "m_${k}_3x2" "$k" $tgt 6 NULL "$hid" >$T/mh-$k-a.log
	train "m_${k}_1x6" "$k" $tgt 6 "'{dmlh1}'" "$hid" >$T/mh-$k-b.log
	train "m_${k}_1" "$k" $tgt 1 NULL "$hid" >$T/mh-$k-c.log
	check "$k: 3 hosts x 2 ranks trained ($(tail -1 $T/mh-$k-a.log))" '[ "$(tail -1 $T/mh-$k-a.log)" = 6 ]'
	check "$k: 3 hosts x 2 ranks = 6 ranks on one host (1e-5)" '[ "$(maxdiff m_${k}_3x2 m_${k}_1x6 $k)" = t ]'
	check "$k: 3 hosts x 2 ranks = 1 rank (1e-5)" '[ "$(maxdiff m_${k}_3x2 m_${k}_1 $k)" = t ]'
done
# hosts with unequal ranks (2, 2, 1): the leaders' ring, not the peers' rings
train m_linear_5 linear y 5 NULL >$T/mh-linear-5.log
hosts=$(sql1 "SELECT hosts::text || ' ' || (SELECT metrics->>'allreduce' FROM dml.models WHERE name = 'm_linear_5')
	FROM dml_epochs WHERE name = 'm_linear_5' AND epoch = 1")
check "5 ranks on 3 hosts ($hosts) = 1 rank (1e-5)" \
	'[ "$hosts" = "{dmlh1,dmlh1,dmlh2,dmlh2,dmlh3} hierarchical" ] && [ "$(maxdiff m_linear_5 m_linear_1 linear)" = t ]'
# a rank on each of 2 hosts: 2 ranks on this machine's 2 cores, so they poll
# as ranks with cores of their own do (MPI_Allreduce for a small model)
train m_linear_2 linear y 2 "'{dmlh1,dmlh2}'" >$T/mh-linear-2.log
hosts=$(sql1 "SELECT hosts::text FROM dml_epochs WHERE name = 'm_linear_2' AND epoch = 1")
check "2 ranks on 2 hosts ($hosts) = 1 rank (1e-5)" \
	'[ "$hosts" = "{dmlh1,dmlh2}" ] && [ "$(maxdiff m_linear_2 m_linear_1 linear)" = t ]'
hosts=$(sql1 "SELECT hosts FROM dml_epochs WHERE name = 'm_linear_3x2' AND epoch = 1")
check "dml.epochs says which host ran each rank ($hosts)" '[ "$hosts" = "{dmlh1,dmlh1,dmlh2,dmlh2,dmlh3,dmlh3}" ]'
how=$(sql1 "SELECT metrics->>'allreduce' || ' ' || (metrics->'hosts')::text FROM dml.models WHERE name = 'm_linear_3x2'")
check "the metrics say so, and that the all-reduce was hierarchical ($how)" \
	'[ "$how" = "hierarchical [\"dmlh1\", \"dmlh1\", \"dmlh2\", \"dmlh2\", \"dmlh3\", \"dmlh3\"]" ]'
hosts=$(sql1 "SELECT hosts FROM dml_epochs WHERE name = 'm_linear_1x6' AND epoch = 1")
check "hosts => '{dmlh1}' keeps every rank there ($hosts)" '[ "$hosts" = "{dmlh1,dmlh1,dmlh1,dmlh1,dmlh1,dmlh1}" ]'
out=$(train m_bad linear y 2 "'{dmlh1,dmlh9}'")
check "a host not in dml.hosts is refused" 'echo "$out" | grep -q "host \"dmlh9\" is not in dml.hosts"'
out=$(train m_bad linear y 2 "'{dmlh2,dmlh3}'")
check "a job without the server's host is refused (rank 0 runs there)" \
	'echo "$out" | grep -q "must include this server'"'"'s host"'
out=$(sql1 "CREATE ROLE mh_user LOGIN; SET ROLE mh_user; SET dml.hosts = 'dmlh2 slots=9'" 2>&1)
check "only a superuser sets dml.hosts" 'echo "$out" | grep -q "permission denied to set parameter \"dml.hosts\""'
out=$(sql1 "SET dml.hosts = 'dmlh1 slots=two'" 2>&1)
check "dml.hosts is checked when it is set" 'echo "$out" | grep -q "invalid value for parameter \"dml.hosts\""'

# ---------------------------------------------------------------------
# 2. every sync mode across hosts trains to the accuracy of one host
# ---------------------------------------------------------------------
sql1 "CREATE TABLE mhc AS SELECT i, sin(i * 0.37)::float8 AS x1, cos(i * 0.91)::float8 AS x2,
	(sin(i * 0.37) + 2 * cos(i * 0.91) > 0.1) AS y FROM generate_series(1, 6000) i" >/dev/null
syncrun() {
	# name workers hosts sync-arguments
	sql1 "SELECT workers FROM dml_train('$1', 'mhc', 'y', features => '{x1,x2}', model => 'logistic',
		optimizer => 'sgd', learning_rate => 0.5, batch_size => 64, epochs => 4, workers => $2,
		hosts => $3, device => 'cpu', $4)" >$T/mh-sync-$1.log 2>&1
	sql1 "SELECT round((dml_evaluate('$1', 'mhc')->>'accuracy')::numeric, 4)"
}
base=$(syncrun s_one 6 "'{dmlh1}'" "sync => 'allreduce'")
echo "# one host, allreduce: accuracy $base"
for mode in "allreduce|sync => 'allreduce'" "ps|sync => 'ps', servers => 2" \
	"ssp|sync => 'ssp', servers => 2, staleness => 1" "async|sync => 'async', servers => 2" \
	"gossip|sync => 'gossip'" "average|sync => 'average', average_every => 4" \
	"fp16|compression => 'fp16'" "topk|compression => 'topk', topk_ratio => 0.1" \
	"fp16_5|compression => 'fp16'" "topk_5|compression => 'topk', topk_ratio => 0.1"; do
	name=${mode%%|*}
	# 5 ranks: hosts of 2, 2 and 1, whose leaders exchange the whole host sums
	w=6; case $name in ps|ssp|async) w=4 ;; *_5) w=5 ;; esac
	acc=$(syncrun "s_$name" $w NULL "${mode#*|}")
	spread=$(sql1 "SELECT array_length(hosts, 1) || ' ranks on ' ||
		(SELECT count(DISTINCT h) FROM unnest(hosts) h) || ' hosts' FROM dml_epochs WHERE name = 's_$name' LIMIT 1")
	check "$name across hosts ($spread): accuracy $acc, one host $base" \
		'[ -n "$acc" ] && [ -n "$base" ] && awk -v a="$acc" -v b="$base" "BEGIN { exit !(a >= b - 0.02 && b > 0.8) }" &&
		 [ "${spread#* ranks on }" = "3 hosts" ]'
done
how=$(sql1 "SELECT string_agg(metrics->>'allreduce', ' ' ORDER BY name) FROM dml.models
	WHERE name IN ('s_fp16', 's_topk', 's_fp16_5', 's_topk_5')")
check "fp16 and top-k across hosts go through the hierarchical all-reduce ($how)" \
	'[ "$how" = "hierarchical hierarchical hierarchical hierarchical" ]'

# ---------------------------------------------------------------------
# 3. bytes across hosts per step, measured on the links
# ---------------------------------------------------------------------
tx() { # bytes every host has sent on its link
	local i s=0
	for i in 1 2 3; do
		s=$((s + $(nsh_exec "$i" cat /sys/class/net/eth0/statistics/tx_bytes)))
	done
	echo $s
}
sql1 "CREATE TABLE mhw AS SELECT i, sin(i * 0.37)::float8 AS x1, cos(i * 0.91)::float8 AS x2,
	(sin(i * 0.37) + 2 * cos(i * 0.91))::float8 AS y FROM generate_series(1, 300) i" >/dev/null
for how in hierarchical flat one fp16 topk; do
	opt='{}'; [ $how = flat ] && opt='{"shared_memory": false}'
	w=6; [ $how = one ] && w=3
	comp=; [ $how = fp16 ] && comp=", compression => 'fp16'"
	[ $how = topk ] && comp=", compression => 'topk', topk_ratio => 0.01"
	t0=$(tx)
	sql1 "SELECT workers FROM dml_train('w_$how', 'mhw', 'y', features => '{x1,x2}', model => 'mlp',
		hidden => '{256,256}', optimizer => 'sgd', learning_rate => 0.01, batch_size => 1000,
		epochs => 20, workers => $w, device => 'cpu', options => '$opt' $comp)" >$T/mh-bytes-$how.log 2>&1
	t1=$(tx)
	eval "net_$how=$((t1 - t0))"
done
# parameters of the 2-256-256-1 MLP
B=$((4 * (2 * 256 + 256 + 256 * 256 + 256 + 256 + 1)))
rec=$(sql1 "SELECT sum(bytes_across) FROM dml_epochs WHERE name = 'w_hierarchical'")
read -r copies_h copies_f copies_1 <<<"$(awk -v h="$net_hierarchical" -v f="$net_flat" \
	-v o="$net_one" -v b="$B" 'BEGIN { printf "%.2f %.2f %.2f", h / 60 / b, f / 60 / b, o / 60 / b }')"
echo "# gradient $B bytes; sent on the links per host per step (3 hosts, 20 steps, headers and loading included):"
echo "#   hierarchical, 2 ranks a host $copies_h copies; 1 rank a host $copies_1; flat MPI_Allreduce of 6 ranks $copies_f"
check "hierarchical all-reduce: about one copy per host per step crosses the network ($copies_h; a ring of 3 leaders sends 1.33)" \
	'awk -v c="$copies_h" "BEGIN { exit !(c >= 1.0 && c <= 2.0) }"'
check "... one copy per host, not per rank: 2 ranks a host send what 1 rank a host sends ($copies_h vs $copies_1)" \
	'awk -v h="$copies_h" -v o="$copies_1" "BEGIN { exit !(h <= 1.25 * o && h >= 0.75 * o) }"'
check "dml.epochs.bytes_across records the leaders' ring, 4 copies per step ($rec)" \
	'[ -n "$rec" ] && awk -v r="$rec" -v b="$B" "BEGIN { exit !(r >= 4 * 20 * b && r <= 4.2 * 20 * b) }"'
# compressed, the host sums cross the network compressed: fp16 half the
# bytes; top-k 1% as (index, value) pairs from each host to each other,
# k = ceil(0.01 n) of each local rank's range (2 ranges)
P=$((B / 4))
rec_f=$(sql1 "SELECT sum(bytes_across) FROM dml_epochs WHERE name = 'w_fp16'")
rec_t=$(sql1 "SELECT sum(bytes_across) FROM dml_epochs WHERE name = 'w_topk'")
want_t=$(awk -v p="$P" 'function ceil(x) { return x == int(x) ? x : int(x) + 1 }
	BEGIN { lo = int(p / 2 / 16) * 16; print 20 * 3 * 2 * 8 * (ceil(0.01 * lo) + ceil(0.01 * (p - lo))) }')
read -r share_f share_t <<<"$(awk -v f="$net_fp16" -v t="$net_topk" -v h="$net_hierarchical" \
	'BEGIN { printf "%.3f %.3f", f / h, t / h }')"
echo "# on the links, against uncompressed hierarchical: fp16 $share_f, top-k 0.01 $share_t; recorded across: fp16 $rec_f, top-k $rec_t"
check "hierarchical fp16: the links carry about half the uncompressed bytes ($share_f), recorded 2 copies of halves per step ($rec_f)" \
	'awk -v s="$share_f" -v r="$rec_f" -v b="$B" "BEGIN { exit !(s >= 0.4 && s <= 0.65 && r >= 2 * 20 * b && r <= 2.1 * 20 * b) }"'
# (the epochs' metric sums cross too: a few hundred bytes)
check "hierarchical top-k 1%: the links carry a small part of the uncompressed bytes ($share_t), recorded as the pairs sent ($rec_t; the pairs $want_t)" \
	'awk -v s="$share_t" -v r="$rec_t" -v w="$want_t" "BEGIN { exit !(s < 0.15 && r >= w && r <= 1.01 * w) }"'

# the launch's TCP settings reach the ranks on the other hosts: messages
# up to 1 MiB go eagerly (coordinator/launch.c), read from a remote rank's
# environment while it trains
pgc_psql -c "SELECT epochs FROM dml_train('w_eager', 'mhw', 'y', features => '{x1,x2}', model => 'mlp',
	hidden => '{256,256}', optimizer => 'sgd', learning_rate => 0.01, batch_size => 16,
	epochs => 400, workers => 6, device => 'cpu')" >$T/mh-eager.log 2>&1 &
client=$!
remote_worker() {
	local p
	for p in $(ip netns pids "$NSH_TAG-dmlh3" 2>/dev/null); do
		grep -qa 'dml-worker' "/proc/$p/cmdline" 2>/dev/null && grep -qa 'OMPI_COMM_WORLD_RANK' "/proc/$p/environ" &&
			{ echo "$p"; return; }
	done
}
wait_until 60 '[ -n "$(remote_worker)" ]'
eager=$(tr '\0' '\n' <"/proc/$(remote_worker)/environ" 2>/dev/null | grep -c '^OMPI_MCA_btl_tcp_\(eager_limit\|rndv_eager_limit\|max_send_size\)=1048576$')
sql1 "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%w_eager%' AND pid <> pg_backend_pid()" >/dev/null
wait "$client"
check "a rank on another host sends TCP messages up to 1 MiB eagerly ($eager of 3 settings in its environment)" '[ "$eager" = 3 ]'
wait_until 10 '[ "$(all_job_procs)" -eq 0 ]'

# ---------------------------------------------------------------------
# 4. a host lost mid-training
# ---------------------------------------------------------------------
sql1 "CREATE TABLE mhl AS SELECT i, sin(i * 0.37)::float8 AS x1, cos(i * 0.91)::float8 AS x2,
	(sin(i * 0.37) + 2 * cos(i * 0.91))::float8 AS y FROM generate_series(1, 30000) i" >/dev/null
lose() {
	# name how max_restarts: train, lose dmlh3 at epoch 2, wait for the end
	local log=$T/mh-lose-$1.log client t0 t1
	pgc_psql -c "SELECT epochs FROM dml_train('$1', 'mhl', 'y', features => '{x1,x2}', model => 'linear',
		optimizer => 'sgd', batch_size => 128, epochs => 12, workers => 6, device => 'cpu',
		options => '{\"max_restarts\": $3}')" >"$log" 2>&1 &
	client=$!
	wait_until 120 "grep -q 'epoch 2:' $log"
	if [ "$2" = kill ]; then
		for p in $(ip netns pids "$NSH_TAG-dmlh3"); do
			grep -qaE 'dml-worker|orted' "/proc/$p/cmdline" 2>/dev/null && kill -9 "$p"
		done
	else
		nsh_link 3 down
	fi
	wait "$client"
	t0=$(date +%s.%N)
	wait_until 10 '[ "$(all_job_procs)" -eq 0 ] && [ "$(pgc_job_procs)" -eq 0 ]'
	t1=$(date +%s.%N)
	nsh_link 3 up
	ELAPSED=$(echo "$t1 - $t0" | bc)
	LOG=$log
}
for how in kill link; do
	lose "l_$how" $how 2
	placed=$(sql1 "SELECT string_agg(DISTINCT restarts || ':' || hosts::text, ' ') FROM dml_epochs WHERE name = 'l_$how'")
	check "dmlh3 $how: the job restarts on the hosts left and finishes ($placed)" \
		'grep -q "^ *12$" $LOG && grep -q "host \"dmlh3\" lost" $LOG &&
		 [ "$placed" = "0:{dmlh1,dmlh1,dmlh2,dmlh2,dmlh3,dmlh3} 1:{dmlh1,dmlh1,dmlh1,dmlh2,dmlh2,dmlh2}" ]'
	check "dmlh3 $how: no process of the job left on any host (gone in ${ELAPSED}s)" \
		'[ "$(all_job_procs)" -eq 0 ]'
done
lose l_fail kill 0
check "dmlh3 killed, max_restarts 0: a clean error naming the host" \
	'grep -q "ERROR:  training job failed: host \"dmlh3\" lost" $LOG'
check "... and no process left on any host (gone in ${ELAPSED}s)" \
	'[ "$(all_job_procs)" -eq 0 ]'

# ---------------------------------------------------------------------
# 5. cancel and terminate leave nothing on any host
# ---------------------------------------------------------------------
for how in cancel terminate; do
	pgc_psql -c "SELECT * FROM dml_train('c_$how', 'mhl', 'y', features => '{x1,x2}', model => 'linear',
		optimizer => 'sgd', batch_size => 16, epochs => 100000, workers => 6, device => 'cpu')" \
		>$T/mh-$how.log 2>&1 &
	client=$!
	wait_until 60 "grep -q 'epoch 1:' $T/mh-$how.log"
	check "$how: ranks run on all 3 hosts" '[ "$(host_job_procs 2)" -ge 2 ] && [ "$(host_job_procs 3)" -ge 2 ]'
	stop_job "3 hosts, $how" $how "c_$how" $T/mh-$how.log $client 100
	check "$how: no process of the job on any host" '[ "$(all_job_procs)" -eq 0 ]'
done

# a model search across the hosts: its trials share one job of 6 ranks,
# which ends by itself at the end (rank 0 told that no trial follows) and
# leaves nothing on any host
ended=$(pgc_psql -At -c "SET client_min_messages = debug1" -c "SELECT count(*) FROM dml_tune('t_hosts', 'mhc', 'y',
	features => '{x1,x2}', search => '{\"learning_rate\": [0.1, 0.5]}', model => 'logistic',
	optimizer => 'sgd', batch_size => 64, epochs => 2, workers => 6, device => 'cpu')" 2>&1 |
	grep -o "the search's job ended by itself (mpirun's exit status [0-9-]*)" || true)
spread=$(sql1 "SELECT count(DISTINCT h) FROM dml_epochs, unnest(hosts) h WHERE name = 't_hosts'")
check "dml_tune across hosts (ranks on $spread hosts): its job ends by itself: $ended" \
	'[ "$spread" = 3 ] && [ "$ended" = "the search'"'"'s job ended by itself (mpirun'"'"'s exit status 0)" ]'
wait_until 10 '[ "$(all_job_procs)" -eq 0 ]'
check "... and leaves no process on any host" '[ "$(all_job_procs)" -eq 0 ]'

# ---------------------------------------------------------------------
# 6. dml_predict_table on 3 ranks, one on each host
# ---------------------------------------------------------------------
sql1 "CREATE TABLE mhp AS SELECT i, sin(i * 0.37)::float8 AS x1, cos(i * 0.91)::float8 AS x2,
	sin(i * 1.3)::float8 AS x3 FROM generate_series(1, 20000) i" >/dev/null
pgc_psql -c "CALL dml_predict_table('m_mlp_1', 'mhp', 'mhp_1', 'i')" >/dev/null 2>&1
pgc_psql -c "CALL dml_predict_table('m_mlp_1', 'mhp', 'mhp_3', 'i', workers => 3)" >$T/mh-predict.log 2>&1
check "predict_table: 3 ranks, one on each host ($(grep -o '3 ranks on hosts.*' $T/mh-predict.log))" \
	"grep -q 'dml_predict_table: 3 ranks on hosts dmlh1, dmlh2, dmlh3' $T/mh-predict.log"
same=$(sql1 "SELECT count(*) FILTER (WHERE a.prediction = b.prediction
		AND abs(a.probability - b.probability) <= 1e-6) || '/' || count(*)
	FROM mhp_1 a FULL JOIN mhp_3 b USING (i)")
check "predict_table: 3 ranks on 3 hosts = 1 rank, row for row ($same equal)" '[ "$same" = 20000/20000 ]'
# an ordinary role: its ranks log in as it on every host (its own password
# file line there) and see the rows its policy shows
pw2=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
for i in 1 2 3; do
	echo "$(nsh_addr 1):$PGC_PORT:*:mh_user:$pw2" | nsh_exec "$i" sh -c 'cat >>/tmp/dml-pgpass'
done
sql1 "DO \$\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'mh_user') THEN
		CREATE ROLE mh_user LOGIN; END IF; END \$\$;
	ALTER TABLE mhp ENABLE ROW LEVEL SECURITY;
	ALTER ROLE mh_user PASSWORD '$pw2'; GRANT SELECT ON mhp TO mh_user;
	GRANT CREATE ON SCHEMA public TO mh_user; SELECT dml_grant('m_mlp_1', 'mh_user');
	CREATE POLICY mhp_third ON mhp FOR SELECT TO mh_user USING (i % 3 = 0)" >/dev/null
pgc_psql -c "SET ROLE mh_user" -c "CALL dml_predict_table('m_mlp_1', 'mhp', 'mhp_u', 'i', workers => 3)" \
	>$T/mh-predict-u.log 2>&1
seen=$(sql1 "SELECT count(*) FILTER (WHERE u.i % 3 = 0 AND u.prediction = a.prediction
		AND abs(u.probability - a.probability) <= 1e-6) || '/' || count(*) FROM mhp_u u JOIN mhp_1 a USING (i)")
check "predict_table as an ordinary role on 3 hosts: only its policy's rows, as predicted by 1 rank ($seen)" \
	'[ "$seen" = 6666/6666 ] && grep -q "3 ranks on hosts dmlh1, dmlh2, dmlh3" $T/mh-predict-u.log'
sed 's/^/# /' $T/mh-predict-u.log | grep -v NOTICE | head -3
sql1 "ALTER TABLE mhp DISABLE ROW LEVEL SECURITY" >/dev/null
# cancel while the three ranks score a wide model
sql1 "CREATE TABLE mhp_big AS SELECT i, sin(i * 0.37)::float8 AS x1, cos(i * 0.91)::float8 AS x2,
	sin(i * 1.3)::float8 AS x3 FROM generate_series(1, 400000) i" >/dev/null
sql1 "SELECT workers FROM dml_train('m_wide', 'mh', 'y', features => '{x1,x2,x3}', model => 'mlp',
	hidden => '{512,512}', epochs => 1, workers => 2, device => 'cpu', options => '{\"in_server\": false}')" >/dev/null 2>&1
pgc_psql -c "CALL dml_predict_table('m_wide', 'mhp_big', 'mhp_c', 'i', workers => 3)" >$T/mh-predict-c.log 2>&1 &
client=$!
wait_until 60 '[ "$(host_job_procs 2)" -ge 1 ] && [ "$(host_job_procs 3)" -ge 1 ] &&
	[ "$(sql1 "SELECT count(*) FROM pg_stat_activity WHERE application_name = '"'"'dml-worker'"'"'")" -ge 3 ]'
check "predict_table cancel: ranks read on all 3 hosts" '[ "$(host_job_procs 2)" -ge 1 ] && [ "$(host_job_procs 3)" -ge 1 ]'
stop_job "predict_table on 3 hosts, cancel" cancel mhp_c $T/mh-predict-c.log $client 100
check "predict_table cancel: no process on any host, no table" \
	'[ "$(all_job_procs)" -eq 0 ] && [ "$(sql1 "SELECT to_regclass('"'mhp_c'"') IS NULL")" = t ]'

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
