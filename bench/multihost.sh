#!/bin/bash
# multihost.sh: training across hosts, on the namespace hosts of
# regress/nshosts.sh with every link capped at 1 Gbit/s (tbf), in rounds
# (DML_BENCH_REPS, default 3) that each run every configuration once.
#
#   bash bench/multihost.sh          (as root; part of make bench)
#
# Writes bench/MULTIHOST.md:
#   1. time per epoch of an MLP (784-256-128-10, 6 ranks on 3 hosts):
#      hierarchical all-reduce against flat MPI_Allreduce over all ranks
#   2. fp16 and top-k against uncompressed across the capped links
#   3. the step time against the ring bound for that bandwidth
#   4. the cost model per step, with its figures measured here
# The three hosts share this machine's cores: see the report's notes.
set -euo pipefail
cd "$(dirname "$0")/.."
here=$PWD
source regress/pgcluster.sh
source regress/tap.sh
source regress/nshosts.sh
[ "$(id -u)" = 0 ] || { echo "multihost.sh: run as root (namespaces)" >&2; exit 1; }
report=$here/bench/MULTIHOST.md
RATE=${DML_BENCH_RATE:-1gbit}
unset PGHOST PGPORT PGUSER PGDATABASE
PGC_DIR=
trap 'pgc_stop; nsh_down' EXIT
sql1() { pgc_psql -At -c "SET client_min_messages = warning" -c "$1"; }

nsh_up 3
nsh_cluster
nsh_cap "$RATE"

ROWS=12000
sql1 "CREATE TABLE bm AS SELECT i, (i % 10) AS label,
	ARRAY(SELECT (random() + CASE WHEN j % 10 = i % 10 THEN 0.5 ELSE 0 END)::real
		  FROM generate_series(1, 784) j WHERE i > 0) AS x
	FROM generate_series(1, $ROWS) i"
sql1 "CREATE TABLE bl AS SELECT i, sin(i * 0.37)::float8 AS x1, cos(i * 0.91)::float8 AS x2,
	(sin(i * 0.37) + 2 * cos(i * 0.91))::float8 AS y FROM generate_series(1, 60000) i"
NP=$((784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10))
B=$((4 * NP))
BATCH=64
W=6

# name hosts options compression: one training of the MLP; prints
# "seconds-per-epoch steps-per-epoch accuracy bytes-across-per-step"
mlp() {
	sql1 "SELECT dml_drop_model(name) FROM dml.models WHERE name = '$1' LIMIT 1" >/dev/null
	sql1 "SELECT workers FROM dml_train('$1', 'bm', 'label', features => '{x}', model => 'mlp',
		hidden => '{256,128}', optimizer => 'sgd', learning_rate => 0.05, batch_size => $BATCH,
		epochs => 4, workers => $W, hosts => $2, device => 'cpu', options => '$3',
		compression => '$4', topk_ratio => 0.01)" >/dev/null
	sql1 "SELECT round(avg(seconds)::numeric, 3), $ROWS / $W / $BATCH,
		round((SELECT (dml_evaluate('$1', 'bm')->>'accuracy')::numeric), 4),
		round(avg(bytes_across) / ($ROWS / $W / $BATCH)) FROM dml_epochs WHERE name = '$1' AND epoch > 1" | tr '|' ' '
}

# the flat baseline at its best: Open MPI's own choice, and its ring (coll
# tuned algorithm 4) forced; the faster of the two is the baseline
opts0=$(sql1 "SHOW dml.mpi_options")
set_opts() {
	sql1 "ALTER SYSTEM SET dml.mpi_options = '$1'" >/dev/null
	sql1 "SELECT pg_reload_conf()" >/dev/null
	wait_until 10 "[ \"\$(sql1 'SHOW dml.mpi_options')\" = '$1' ]"
}
# latency: a 3-parameter model, so a step is nearly all messages; prints us a step
lat_steps=$((60000 / W / 16))
lat() {
	sql1 "SELECT dml_drop_model(name) FROM dml.models WHERE name = '$1' LIMIT 1" >/dev/null
	sql1 "SELECT workers FROM dml_train('$1', 'bl', 'y', features => '{x1,x2}', model => 'linear',
		optimizer => 'sgd', batch_size => 16, epochs => 2, workers => $W, hosts => $2,
		device => 'cpu')" >/dev/null
	sql1 "SELECT round((avg(seconds) / $lat_steps * 1e6)::numeric) FROM dml_epochs
		WHERE name = '$1' AND epoch > 1"
}
# time to a validation accuracy, on real rows: Fashion-MNIST's first
# $AROWS training images, 0.2 held out, $AEPOCHS epochs; prints
# "epoch cumulative-seconds validation-accuracy" lines
AROWS=15000
AEPOCHS=8
acc_run() {
	sql1 "SELECT dml_drop_model(name) FROM dml.models WHERE name = '$1' LIMIT 1" >/dev/null
	sql1 "SELECT workers FROM dml_train('$1', 'fashion_train', 'label', features => '{pixels}',
		model => 'mlp', hidden => '{256,128}', optimizer => 'sgd', learning_rate => 0.05,
		batch_size => $BATCH, epochs => $AEPOCHS, validation => 0.2, workers => $W,
		device => 'cpu', compression => '$2', topk_ratio => 0.01)" >/dev/null
	sql1 "SELECT epoch, round((sum(seconds) OVER (ORDER BY epoch))::numeric, 3),
		round(val_metric::numeric, 4) FROM dml_epochs
		WHERE name = '$1' ORDER BY epoch" | tr '|' ' '
}
# seconds until the first epoch at or above target: "seconds epoch", or "- -"
to_target() {
	awk -v t="$2" '$3 >= t { printf "%s %s", $2, $1; found = 1; exit } END { if (!found) printf "- -" }' <<<"$1"
}
best_acc() { awk 'BEGIN { m = 0 } $3 > m { m = $3 } END { print m }' <<<"$1"; }
env DML_LOAD_IDX= bash bench/load_fashion.sh --limit $AROWS >/dev/null

# the machine is shared: every configuration runs once a round, interleaved,
# REPS rounds; the report gives medians over the rounds
REPS=${DML_BENCH_REPS:-3}
med() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
# dml's launch sends TCP messages up to 1 MiB eagerly (coordinator/launch.c);
# these are Open MPI's own limits, for the rows that compare with them
OWN="--mca btl_tcp_eager_limit 65536 --mca btl_tcp_rndv_eager_limit 65536 --mca btl_tcp_max_send_size 131072"
H= F= FR= FE= HE= P= T= O= LA= L1= LOADS= PAIRED= ACC= ACCF= ACCROWS=
for rep in $(seq 1 "$REPS"); do
	l0=$(cut -d' ' -f1 /proc/loadavg)
	read -r s steps h_acc h_x <<<"$(mlp b_hier NULL '{}' none)"; H+=" $s"; hs=$s
	read -r s _ f_acc f_x <<<"$(mlp b_flat NULL '{"shared_memory": false}' none)"; F+=" $s"; fs=$s
	set_opts "$opts0 --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4"
	read -r s _ fr_acc fr_x <<<"$(mlp b_flatr NULL '{"shared_memory": false}' none)"; FR+=" $s"
	frs=$s
	# Open MPI's own TCP limits: a rendezvous handshake above 64 KiB
	set_opts "$opts0 $OWN"
	read -r s _ fe_acc fe_x <<<"$(mlp b_flate NULL '{"shared_memory": false}' none)"; FE+=" $s"; fes=$s
	read -r s _ he_acc he_x <<<"$(mlp b_hiere NULL '{}' none)"; HE+=" $s"; hes=$s
	set_opts "$opts0"
	PAIRED+=" $(awk -v a="$fs" -v b="$frs" -v c="$fes" -v h="$hs" -v i="$hes" 'BEGIN {
		f = a; if (b < f) f = b; if (c < f) f = c; if (i < h) h = i; printf "%.2f", f / h }')"
	read -r s _ p_acc p_x <<<"$(mlp b_fp16 NULL '{}' fp16)"; P+=" $s"
	read -r s _ t_acc t_x <<<"$(mlp b_topk NULL '{}' topk)"; T+=" $s"
	read -r s _ o_acc _ <<<"$(mlp b_one "'{dmlh1}'" '{}' none)"; O+=" $s"
	# to the accuracy both reach: the lower of the two runs' best validation accuracy
	an=$(acc_run a_none none); at=$(acc_run a_topk topk); af=$(acc_run a_fp16 fp16)
	tgt=$(awk -v a="$(best_acc "$an")" -v b="$(best_acc "$at")" 'BEGIN { print (a < b ? a : b) }')
	read -r sn en <<<"$(to_target "$an" "$tgt")"; read -r st et <<<"$(to_target "$at" "$tgt")"
	tgf=$(awk -v a="$(best_acc "$an")" -v b="$(best_acc "$af")" 'BEGIN { print (a < b ? a : b) }')
	read -r sn2 en2 <<<"$(to_target "$an" "$tgf")"; read -r sf ef <<<"$(to_target "$af" "$tgf")"
	ACC+=" $(awk -v a="$sn" -v b="$st" 'BEGIN { printf "%.2f", a / b }')"
	ACCF+=" $(awk -v a="$sn2" -v b="$sf" 'BEGIN { printf "%.2f", a / b }')"
	ACCROWS+="| $rep | $tgt | $sn s (epoch $en) | $st s (epoch $et) | $tgf | $sn2 s (epoch $en2) | $sf s (epoch $ef) |
"
	LA+=" $(lat b_lat NULL)"
	L1+=" $(lat b_lat1 "'{dmlh1}'")"
	LOADS+=" $l0-$(cut -d' ' -f1 /proc/loadavg)"
done
h_s=$(echo "$H" | med); f_s=$(echo "$F" | med); fr_s=$(echo "$FR" | med)
p_s=$(echo "$P" | med); t_s=$(echo "$T" | med); o_s=$(echo "$O" | med)
lat=$(echo "$LA" | med); lat1=$(echo "$L1" | med)
fe_s=$(echo "$FE" | med); he_s=$(echo "$HE" | med)
fb_s=$(awk -v a="$f_s" -v b="$fr_s" -v c="$fe_s" 'BEGIN { m = a; if (b < m) m = b; if (c < m) m = c; print m }')
hb_s=$(awk -v a="$h_s" -v b="$he_s" 'BEGIN { print (b < a ? b : a) }')

bw=$(echo "$RATE" | sed 's/gbit/*1000000000/; s/mbit/*1000000/' | bc)
ms() { awk -v s="$1" -v n="$2" 'BEGIN { printf "%.1f", s / n * 1000 }'; }
ring_ms=$(awk -v b="$B" -v bw="$bw" 'BEGIN { printf "%.1f", 2 * 2 / 3 * b * 8 / bw * 1000 }')
bound_ms=$(awk -v o="$(ms "$o_s" "$steps")" -v r="$ring_ms" 'BEGIN { printf "%.1f", o + r }')
# tbf lets a full bucket (burst 256 KiB, regress/nshosts.sh) pass at the
# veth's speed; it refills at the rate while the step computes, so each step
# sends min(burst, compute x rate) of its bytes without waiting on the rate
BURST=262144
tbf_ms=$(awk -v b="$B" -v bw="$bw" -v o="$(ms "$o_s" "$steps")" -v u="$BURST" 'BEGIN {
	r = o / 1000 * bw / 8; if (r > u) r = u; x = 4 / 3 * b - r; if (x < 0) x = 0
	printf "%.1f", o + x * 8 / bw * 1000 }')
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# earlier runs' figures stay beside the new ones: the replaced report's run,
# then the earlier runs it kept, the last three in all
prev= older=
if [ -f "$report" ]; then
	prev=$(awk '/^## Cost model/ || /^## Earlier run/ { exit } NR > 2 { print }' "$report")
	older=$(awk '/^## Earlier run/ { n++ } n >= 1 && n <= 2 { print }' "$report")
fi
cat >"$report" <<EOF
# Training across hosts: bench/multihost.sh

$(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')),
$(free -g | awk '/Mem:/ {print $2}') GiB; Open MPI $(mpirun --version | head -1 | awk '{print $NF}').
3 hosts as namespaces on this machine (regress/nshosts.sh), every link capped at
$RATE by tbf on both ends; MPI over TCP (ob1, btl tcp between hosts, vader within).
$REPS rounds, each configuration once a round, interleaved; medians over the rounds
(load average at the start-end of each round:$LOADS).  MLP 784-256-128-10 ($NP parameters, B = $B bytes of gradient), $ROWS rows,
$W ranks (2 a host), $BATCH rows per rank per step, $steps steps an epoch, plain SGD;
seconds per epoch are the mean of epochs 2-4 (dml_epochs).

| run | s/epoch | ms/step | train accuracy | bytes across hosts / step (recorded) | s/epoch by round |
| --- | ---: | ---: | ---: | ---: | --- |
| hierarchical all-reduce (dml's defaults: TCP eager up to 1 MiB) | $h_s | $(ms "$h_s" "$steps") | $h_acc | $h_x |$H |
| flat MPI_Allreduce, 6 ranks (shared_memory => false) | $f_s | $(ms "$f_s" "$steps") | $f_acc | $f_x |$F |
| flat MPI_Allreduce, its ring forced (coll tuned algorithm 4) | $fr_s | $(ms "$fr_s" "$steps") | $fr_acc | $fr_x |$FR |
| flat MPI_Allreduce, Open MPI's own TCP limits (eager up to 64 KiB) | $fe_s | $(ms "$fe_s" "$steps") | $fe_acc | $fe_x |$FE |
| hierarchical, Open MPI's own TCP limits | $he_s | $(ms "$he_s" "$steps") | $he_acc | $he_x |$HE |
| fp16 (hierarchical: each host's sum in halves between hosts) | $p_s | $(ms "$p_s" "$steps") | $p_acc | $p_x |$P |
| top-k 0.01 (hierarchical: each host's top 1% between hosts) | $t_s | $(ms "$t_s" "$steps") | $t_acc | $t_x |$T |
| 6 ranks on one host (no network) | $o_s | $(ms "$o_s" "$steps") | $o_acc | 0 |$O |

- hierarchical vs flat (the fastest flat row against the faster hierarchical row):
  $(ratio "$fb_s" "$hb_s")x faster per epoch (goal 1.5x); against flat with Open MPI's own settings (fourth row) $(ratio "$fe_s" "$h_s")x;
  paired within each round:$PAIRED.
  Where the step is bound by the links' bandwidth the cost model allows at most
  (2 (W-1)/W) / (2 (H-1)/H) = $(awk -v w="$W" 'BEGIN { printf "%.2f", (2 * (w - 1) / w) / (2 * 2 / 3) }')x: a flat ring of $W ranks with each host's ranks
  consecutive crosses every host's link with 2 (W-1)/W B, the leaders' ring with 2 (H-1)/H B.
  More than that comes from the flat all-reduce's own costs here (its waiting ranks, 2 (W-1)
  messages a step instead of 2 (H-1)), not from the network.
- fp16 vs uncompressed hierarchical: $(ratio "$h_s" "$p_s")x; top-k vs uncompressed: $(ratio "$h_s" "$t_s")x
  per epoch (goal for top-k: 1.5x to the same accuracy; accuracies above after 4 epochs).
- time to the same validation accuracy (Fashion-MNIST, the first $AROWS training images,
  0.2 held out, the same MLP and steps, $AEPOCHS epochs; the target is the lower of the two
  runs' best validation accuracy; seconds are the epochs' sums from dml_epochs):
  uncompressed / top-k $(echo "$ACC" | med)x (goal 1.5x), uncompressed / fp16 $(echo "$ACCF" | med)x,
  medians over the rounds (rounds:$ACC and$ACCF).

  | round | target (top-k) | uncompressed | top-k 0.01 | target (fp16) | uncompressed | fp16 |
  | --- | ---: | ---: | ---: | ---: | ---: | ---: |
$(printf '%s' "$ACCROWS" | sed 's/^/  /')

- ring bound: a ring of the hosts moves 2 (H-1)/H B = $(awk -v b="$B" 'BEGIN { printf "%.0f", 4 / 3 * b }') bytes a host a step,
  $ring_ms ms at $RATE; with the one-host step ($(ms "$o_s" "$steps") ms) the bound is $bound_ms ms;
  the hierarchical step takes $(ms "$h_s" "$steps") ms, $(ratio "$(ms "$h_s" "$steps")" "$bound_ms")x the bound (goal 1.3x).
  tbf's bucket (burst 256 KiB, refilled while the step computes) lets part of each step's
  bytes through at the veth's speed: counting it, the bound is $tbf_ms ms and the step
  $(ratio "$(ms "$h_s" "$steps")" "$tbf_ms")x it.
  Both sides are measured in the same rounds, but load from other processes stretches the
  compute (the one-host row) and the waits differently: the ratio means something only
  on a quiet machine.
- per-step latency (3-parameter model, 16 rows a rank): $lat us across 3 hosts, $lat1 us on one host
  (rounds:$LA and$L1).

## Cost model per step

T(step) = T_compute(rows a rank) + T_host(L) + 2 (H-1)/H * B / bandwidth + 2 (H-1) * alpha

with T_host the within-host part (four fences of the segment and the sum of
1/L of the host's gradients: the one-host row above minus compute), B the
gradient bytes, H hosts, and alpha the cost of one message between hosts.
Here alpha is bounded by the latency row: $lat us a step across hosts against
$lat1 us on one host.  Measured here, T_compute + T_host = $(ms "$o_s" "$steps") ms,
the network term $ring_ms ms at $RATE.

Waiting: the three hosts' 6 ranks share the machine's cores, which the ranks
see by the kernel's boot id (workers/comm.c); a waiting rank polls 20 us and
then naps 50 us, in the segment's fences and in the leaders' ring, so the rank
the step waits for has the core.  Before, each host's 2 ranks counted its
2 CPUs as their own: fences polled 2 ms and the leaders' MPI_Allreduce
polled for as long as it waited (the 3-parameter step took 19 ms).  The
flat rows use Open MPI's blocking collectives, which poll with
mpi_yield_when_idle (set in dml.mpi_options by regress/nshosts.sh).

What these figures do and do not predict: the three hosts share $(nproc) cores, so
every rank's compute, every fence and every TCP copy competes for the same two
cores, and the 1 Gbit/s links are tbf queues in one kernel with no propagation
delay (this kernel has no netem).  The ratios of network volume (one copy per
host a step, against a flat all-reduce) and the bandwidth term carry over to
real machines; the compute and latency terms do not: on real hosts each has its
own cores (T_compute shrinks by the ranks a core runs here) and alpha grows by
the network's round trip (tens of us on a LAN), which the cost model adds.
On real hosts with the MLP's B = $B bytes at $RATE the network term
($ring_ms ms hierarchical, $(awk -v b="$B" -v bw="$bw" -v w="$W" 'BEGIN { printf "%.1f", 2 * (w - 1) / w * b * 8 / bw * 1000 }') ms for the flat ring) dominates
the step once compute is spread over real cores, so hierarchical against flat
tends to the bound above, not more.
EOF
if [ -n "$prev" ]; then
	{
		echo
		echo "## Earlier run"
		echo
		echo "$prev"
		[ -z "$older" ] || { echo; echo "$older"; }
	} >>"$report"
fi
cat "$report"
