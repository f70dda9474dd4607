#!/bin/bash
# stream.sh: data larger than memory (issue 18), one run; part of make bench.
#
#   bash bench/stream.sh [quick]      (as root or the cluster's owner)
#
# Writes bench/STREAM.md (quick: bench/out/STREAM-quick.md):
#   1. epoch throughput streamed against in memory, for the Fashion-MNIST
#      MLP (784-256-128-10, adam, batch 128) and logistic regression on
#      synth_1m (1,000,000 x 20), each with a memory budget of 1/8 of the
#      table's float32 rows (in memory: 2GB); the median of epochs 2.. of
#      dml.epochs.rows_per_second, and the runs alternate in pairs so that
#      the machine's load falls on both sides of a ratio
#   2. the spill's read rate (what the workers' reads moved, over the time
#      they took) against dd reading a file of the same size from the same
#      file system, once through the page cache and once with O_DIRECT
#   each streamed with the spill as float32, fp16 and (Fashion-MNIST, whose
#   pixels are read here as the integers 0..255 they were: fashion_u8) int8
# Starts its own cluster (regress/pgcluster.sh) and stops it on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
here=$PWD
source regress/pgcluster.sh
mode=${1:-full}
if [ "$mode" = quick ]; then
	report=$here/bench/out/STREAM-quick.md
	synth_rows=200000
	fashion_limit=(--limit 10000)
	pairs=1
else
	report=$here/bench/STREAM.md
	synth_rows=1000000
	fashion_limit=()
	pairs=3
fi
mkdir -p bench/out
unset PGHOST PGPORT PGUSER PGDATABASE
PGC_DIR=
trap 'pgc_stop' EXIT
pgc_start >/dev/null
export PGDATABASE=postgres
sql1() { pgc_psql -At -c "SET client_min_messages = warning" -c "$1"; }
sql1 "CREATE EXTENSION dml" >/dev/null
# as run.sh does: root's psql logs in as the superuser (pgcluster.sh's map)
psql -X -q -v ON_ERROR_STOP=1 -v rows=$synth_rows -f bench/sql/synth.sql >/dev/null
bash bench/load_fashion.sh "${fashion_limit[@]}" >/dev/null
sql1 "VACUUM ANALYZE synth_1m" >/dev/null
# the pixels as the bytes they were (load_idx.c scales them to [0, 1]): an int8 spill keeps them exactly
sql1 "CREATE TABLE fashion_u8 AS SELECT id, label,
	(SELECT array_agg(round(p::float8 * 255)::real ORDER BY i) FROM unnest(pixels) WITH ORDINALITY u(p, i)) AS pixels
	FROM fashion_train" >/dev/null
sql1 "VACUUM ANALYZE fashion_u8" >/dev/null

# float32 bytes of a table's rows: inputs and target
mb_eighth() { echo $(( ($1 * ($2 + 1) * 4 / 8 + 1048575) / 1048576 )); }
n_synth=$(sql1 "SELECT count(*) FROM synth_1m")
n_fashion=$(sql1 "SELECT count(*) FROM fashion_u8")
b_synth=$(mb_eighth "$n_synth" 20)
b_fashion=$(mb_eighth "$n_fashion" 784)
[ "$b_synth" -lt 8 ] && b_synth=8
[ "$b_fashion" -lt 8 ] && b_fashion=8

# train NAME MEMORY [SPILL]: the median rows/s of epochs 2.., and the model's metrics
train() {
	local name=$1 mem=$2 spill=${3:-float32} call
	case $name in
		synth*) call="dml_train('$name', 'synth_1m', 'label', features => '{$(seq -s, -f 'c%g' 1 20)}',
			model => 'logistic', optimizer => 'adam', learning_rate => 0.01, batch_size => 512,
			epochs => 4, workers => 2, seed => 1,
			options => '{\"memory\": \"$mem\", \"spill\": \"$spill\", \"in_server\": false}')" ;;
		*) call="dml_train('$name', 'fashion_u8', 'label', features => '{pixels}', model => 'mlp',
			hidden => '{256,128}', optimizer => 'adam', learning_rate => 0.001, batch_size => 128,
			epochs => 3, workers => 2, seed => 1, options => '{\"memory\": \"$mem\", \"spill\": \"$spill\"}')" ;;
	esac
	sql1 "SELECT model_id FROM $call" >/dev/null
	sql1 "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY e.rows_per_second)
		FROM dml.epochs e JOIN dml.models m ON m.id = e.model_id
		WHERE m.name = '$name' AND m.version = (SELECT max(version) FROM dml.models WHERE name = '$name')
		AND e.epoch >= 2"
}
metric() { sql1 "SELECT metrics->>'$2' FROM dml.models WHERE name = '$1' ORDER BY version DESC LIMIT 1"; }

median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END {printf "%.1f\n", (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# the spill formats each table streams with (synth's inputs are not integers: no int8)
declare -A formats=([synth]="float32 fp16" [fashion]="float32 fp16 int8")
declare -A runs
rows_md=""
read_md=""
runs_md=""
last_spill=0
for set in synth fashion; do
	eval b=\$b_$set
	runs[$set.mem]=""
	for f in ${formats[$set]}; do runs[$set.$f]=""; done
	# each round runs every configuration once, in the same order
	for p in $(seq 1 $pairs); do
		runs[$set.mem]+="$(train ${set}_mem 2GB) "
		for f in ${formats[$set]}; do
			runs[$set.$f]+="$(train ${set}_$f ${b}MB $f) "
		done
	done
	med_mem=$(median "${runs[$set.mem]}")
	rows_md+="| $set | in memory (2GB) | - | $(printf '%.0f' "$med_mem") | 1 | $(metric ${set}_mem accuracy) | $(metric ${set}_mem peak_rss) |\n"
	runs_md+="- $set in memory: ${runs[$set.mem]}\n"
	for f in ${formats[$set]}; do
		med=$(median "${runs[$set.$f]}")
		rows_md+="| $set | $f spill, ${b}MB | $(metric ${set}_$f streamed) | $(printf '%.0f' "$med") | $(echo "scale=2; $med / $med_mem" | bc -l) | $(metric ${set}_$f accuracy) | $(metric ${set}_$f peak_rss) |\n"
		runs_md+="- $set $f spill: ${runs[$set.$f]}\n"
		rb=$(metric ${set}_$f spill_read_bytes)
		rs=$(metric ${set}_$f spill_read_seconds)
		sb=$(metric ${set}_$f spill_bytes)
		read_md+="| $set | $f | $(echo "scale=1; $sb / 1048576" | bc -l) MB | $(echo "scale=1; $rb / 1048576" | bc -l) MB | $(echo "scale=1; $rb / 1048576 / $rs" | bc -l) MB/s |\n"
		[ "${sb%.*}" -gt "$last_spill" ] && last_spill=${sb%.*}
	done
done

# dd on the spill's file system: a file the size of the last spill, read twice
f=$PGC_DIR/data/base/pgsql_tmp/dd-probe
mkdir -p "$(dirname "$f")"
count=$(( last_spill / 1048576 + 1 ))
dd if=/dev/urandom of="$f" bs=1M count=$count conv=fsync status=none
dd_cached=$(dd if="$f" of=/dev/null bs=1M 2>&1 | tail -1)
dd_direct=$(dd if="$f" of=/dev/null bs=1M iflag=direct 2>&1 | tail -1 || echo "O_DIRECT refused")
rm -f "$f"

{
	echo "# Data larger than memory: streamed against in memory"
	echo
	echo "Written by \`bash bench/stream.sh${mode:+ $mode}\` at $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname),"
	echo "$(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GB memory. Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
	echo "The machine is shared with other jobs (at the time five engineers' builds and tests on its"
	echo "$(nproc) cores): every figure here was taken under that load,"
	echo "so ratios of runs taken in alternation are more telling than the figures themselves."
	echo
	echo "## Epoch throughput (median rows/s of epochs 2.., $pairs runs each, alternating)"
	echo
	echo "Budget: 1/8 of the table's float32 rows (per rank; 2 ranks).  In memory: 2GB.  synth is"
	echo "synth_1m (logistic regression, 20 float inputs); fashion is Fashion-MNIST's 60,000 training"
	echo "images (MLP 784-256-128-10) with the pixels as the integers 0..255 (fashion_u8)."
	echo
	echo "| table | rows held | ranks streamed | rows/s | against in memory | accuracy | peak RSS per rank (bytes) |"
	echo "| --- | --- | --- | --- | --- | --- | --- |"
	printf "%b" "$rows_md"
	echo
	echo "Runs, rows/s, in the order taken within each table:"
	echo
	printf "%b" "$runs_md"
	echo
	echo "## Spill read rate"
	echo
	echo "What the workers' reads of their spill moved over the seconds those reads took (both"
	echo "ranks, every epoch and evaluation pass; the file was just written, so most of it"
	echo "comes from the page cache, as it would on a server with that memory free)."
	echo
	echo "| table | spill | spilled | read back | read rate |"
	echo "| --- | --- | --- | --- | --- |"
	printf "%b" "$read_md"
	echo
	echo "dd on the same file system, a file of $count MB (the largest spill):"
	echo
	echo "- through the page cache: $dd_cached"
	echo "- O_DIRECT (the device): $dd_direct"
	echo
	echo "## Notes"
	echo
	echo "rows/s is dml.epochs.rows_per_second: rows over the epoch's training seconds (steps and"
	echo "synchronization; not the load, not the validation pass).  In memory, each step gathers"
	echo "its rows at random from the rank's whole slice; streamed, from a window of a few blocks"
	echo "that stays in the CPU's caches: likely (not profiled) why a streamed epoch can beat an in-memory one"
	echo "when the model is small (logistic regression) and cost about the same when compute"
	echo "dominates (the MLP).  The spill read rate counts only the time inside pread(), on the"
	echo "read-ahead thread; the spill was freshly written and fits the page cache here, so it is"
	echo "compared with dd through the page cache as well as with O_DIRECT.  The read rate"
	echo "counts the bytes of the file: a compact spill moves fewer of them for the same rows, and"
	echo "widens them to float32 later (an epoch's window as each row is drawn; not counted).  A"
	echo "compact spill's window keeps its rows compact, so for the same budget its blocks hold more"
	echo "rows than float32's: its epochs draw the rows in another order, which is why the accuracies"
	echo "differ after 3 epochs here (fp16 and int8 hold the pixels 0..255 exactly)."
} >"$report"
cat "$report"
