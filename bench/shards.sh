#!/bin/bash
# shards.sh: load time of a table sharded over 3 PostgreSQL servers, each
# on a namespace host of regress/nshosts.sh with every link capped (tbf,
# 1 Gbit/s by default), read where each shard is against the same job
# reading every shard from one host over the network.
#
#   bash bench/shards.sh          (as root; part of make bench)
#
# Writes bench/SHARDS.md.  The three hosts share this machine's cores:
# see the report's notes.
set -euo pipefail
cd "$(dirname "$0")/.."
here=$PWD
source regress/pgcluster.sh
source regress/tap.sh
source regress/nshosts.sh
source regress/nsshards.sh
[ "$(id -u)" = 0 ] || { echo "shards.sh: run as root (namespaces)" >&2; exit 1; }
[ -e "$(pg_config --pkglibdir)/postgres_fdw.so" ] || { echo "shards.sh: postgres_fdw is not installed" >&2; exit 1; }
report=$here/bench/SHARDS.md
RATE=${DML_BENCH_RATE:-1gbit}
R=${DML_BENCH_SHARD_ROWS:-500000}	# rows per shard
REPS=3
unset PGHOST PGPORT PGUSER PGDATABASE
PGC_DIR=
trap 'pgc_stop; nsh_down' EXIT
sql1() { pgc_psql -At -c "SET client_min_messages = warning" -c "$1"; }

nsh_up 3
nsh_cluster
nss_start 2
nss_start 3
pw=bp$RANDOM$RANDOM$RANDOM
rows="CREATE TABLE big AS SELECT i, sin(i * 0.37)::float8 AS x1, cos(i * 0.91)::float8 AS x2,
	sin(i * 1.3)::float8 AS x3, (sin(i * 0.37) + 2 * cos(i * 0.91) - sin(i * 1.3))::float8 AS y
	FROM generate_series(1, $R) i; GRANT SELECT ON big TO reader"
pgc_psql -c "CREATE DATABASE shard" -c "CREATE ROLE reader LOGIN PASSWORD '$pw'" >/dev/null
pgc_psql -d shard -c "$rows" >/dev/null
for i in 2 3; do
	nss_psql "$i" -d postgres -c "CREATE DATABASE shard" -c "CREATE ROLE reader LOGIN PASSWORD '$pw'" >/dev/null
	nss_psql "$i" -d shard -c "$rows" >/dev/null
done
sql1 "CREATE EXTENSION postgres_fdw;
	CREATE SERVER s1 FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '$(nsh_addr 1)', port '$PGC_PORT', dbname 'shard');
	CREATE SERVER s2 FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host 'dmlh2', port '$NSS_PORT', dbname 'shard');
	CREATE SERVER s3 FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host 'dmlh3', port '$NSS_PORT', dbname 'shard');
	CREATE TABLE bg (i int, x1 float8, x2 float8, x3 float8, y float8) PARTITION BY LIST ((i % 3))" >/dev/null
for k in 1 2 3; do
	sql1 "CREATE USER MAPPING FOR postgres SERVER s$k OPTIONS (user 'reader', password '$pw');
		CREATE FOREIGN TABLE bg_$k PARTITION OF bg FOR VALUES IN ($((k - 1))) SERVER s$k OPTIONS (table_name 'big')" >/dev/null
done
nsh_cap "$RATE"

tx() { echo $(($(nsh_exec 2 cat /sys/class/net/eth0/statistics/tx_bytes) + $(nsh_exec 3 cat /sys/class/net/eth0/statistics/tx_bytes))); }
# name hosts: one training of one epoch; prints "load-seconds wall-seconds link-bytes"
run() {
	local t0 b0 t1 b1
	b0=$(tx)
	t0=$(date +%s.%N)
	sql1 "SELECT workers FROM dml_train('$1', 'bg', 'y', features => '{x1,x2,x3}', model => 'linear',
		optimizer => 'sgd', learning_rate => 0.1, batch_size => 10000000, epochs => 1, workers => 3,
		hosts => $2, device => 'cpu')" >/dev/null
	t1=$(date +%s.%N)
	b1=$(tx)
	echo "$(sql1 "SELECT metrics->>'load_seconds' FROM dml.models WHERE name = '$1' ORDER BY version DESC LIMIT 1") $(echo "$t1 - $t0" | bc | awk '{ printf "%.2f", $1 }') $((b1 - b0))"
}
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
lines=
all_l=
all_n=
for rep in $(seq 1 $REPS); do
	read -r ll lw lb <<<"$(run b_local NULL)"
	read -r nl nw nb <<<"$(run b_net "'{dmlh1}'")"
	lines+="| $rep | $ll | $nl | $(awk -v a="$nl" -v b="$ll" 'BEGIN { printf "%.2f", a / b }') | $lw | $nw | $lb | $nb |
"
	all_l+=" $ll"
	all_n+=" $nl"
done
med() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ml=$(med "$all_l")
mn=$(med "$all_n")
mb=$((2 * R * 50))

cat >"$report" <<EOF2
# Training over shards on several servers: bench/shards.sh

$(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')),
$(free -g | awk '/Mem:/ {print $2}') GiB; PostgreSQL $(pg_config --version | awk '{print $2}'); Open MPI $(mpirun --version | head -1 | awk '{print $NF}').
3 hosts as namespaces on this machine (regress/nshosts.sh), every link capped at
$RATE by tbf on both ends.  Each host runs its own PostgreSQL server holding one
shard of $R rows (4 float8 columns read: binary COPY about 50 bytes a row, so
$mb bytes for the two shards off dmlh1); on dmlh1 a partitioned table has the
three shards as postgres_fdw foreign leaves.  One job of 3 ranks, linear model, one
full-batch epoch; "load" is the metrics' load_seconds (the ranks' read, slowest
rank), "wall" the whole dml_train call; link bytes are what dmlh2 and dmlh3 sent.

- local: ranks on each shard's host (dml.hosts lists all three), each reading its
  shard from its own server;
- network: hosts => '{dmlh1}', all 3 ranks on dmlh1, shards 2 and 3 read over the
  capped links.

| rep | load local (s) | load network (s) | network / local | wall local (s) | wall network (s) | link bytes local | link bytes network |
| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
$lines
Median load: local $ml s, network $mn s: local is $(awk -v a="$mn" -v b="$ml" 'BEGIN { printf "%.2f", a / b }')x faster (goal 2x).

Load average of the machine (1, 5, 15 min) before the runs: $load_before, after:
$(cut -d' ' -f1-3 /proc/loadavg) (other helpers' builds and tests ran at the same time).

Command: \`bash bench/shards.sh\` (DML_BENCH_RATE, DML_BENCH_SHARD_ROWS to change
the cap and the rows).  $REPS repetitions, alternating, one after the other.

## What these figures do and do not say

The three hosts and their servers share this machine's cores, and other work ran
on it: the local read runs three servers' COPY and three ranks' decoding at once on
those shared cores, so its time is bounded by the machine's CPU, not by the hosts;
on real hosts each shard's read would have its own cores and disk.  The network
read moves the two remote shards through one capped link into dmlh1 (the bytes
above); at $RATE that alone is about $(awk -v b="$mb" -v r="$(echo "$RATE" | sed 's/gbit/*1000000000/; s/mbit/*1000000/' | bc)" 'BEGIN { printf "%.2f", b * 8 / r }') s, and
it grows with the data while the local read does not cross the network at all
(link bytes local: MPI's start-up, the coordinator's queries and the gradients).
EOF2
cat "$report"
