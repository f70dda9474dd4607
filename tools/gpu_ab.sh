#!/bin/bash
#
# gpu_ab.sh: two builds of dml-worker-gpu side by side on a GPU machine,
# alternating in one cluster, for the A/B figures of bench/GPU.md.
#
#   bash tools/gpu_ab.sh OLD_WORKER [ROUNDS]
#
# Run it on the GPU machine with .gpucarry/ carried there (tools/gpu_carry.sh):
# it sets up PostgreSQL and dml from it (regress/gpu/device_setup.sh, into
# /opt/dmlgpu) unless `make gpu-check` already did.
# OLD_WORKER is the other build's dml-worker-gpu (built here from another
# commit, `make build/dml-worker-gpu`, and carried there); the installed
# one is the new.  For each round, each worker trains the same two jobs on
# Fashion-MNIST (the 1,024-wide MLP with no validation rows, the Fashion
# MLP with validation 0.2, and the first in TF32, 5 epochs each) and prints
# a line per job, with the first 8 hex digits of the weights' md5:
#   AB JOB WORKER round N: total S train S load S acc A on ROWS weights H epochs R rows/s
# The installed worker is put back at the end.

set -u
cd "$(dirname "$0")/.."
old=${1:?usage: gpu_ab.sh OLD_WORKER [ROUNDS]}
rounds=${2:-2}
source regress/gpu/device_setup.sh
if [ ! -x /opt/dmlgpu/usr/lib/postgresql/15/bin/dml-worker-gpu ]; then
	dml_device_setup || exit 1
fi
export PG_BINDIR=/opt/dmlgpu/usr/lib/postgresql/15/bin
export PATH=$PG_BINDIR:$PATH
export FASHION_DIR=${FASHION_DIR:-$PWD/.gpucarry/fashion}
new=$(mktemp /tmp/dml-worker-gpu.new.XXXXXX)
cp "$PG_BINDIR/dml-worker-gpu" "$new"

source regress/pgcluster.sh
pgc_start >/tmp/gpu_ab.log 2>&1 || { cat /tmp/gpu_ab.log; exit 1; }
trap 'cp "$new" "$PG_BINDIR/dml-worker-gpu"; rm -f "$new"; pgc_stop' EXIT
q() { pgc_psql -t -A "$@"; }
q -c "CREATE EXTENSION dml" >/dev/null
DML_LOAD_IDX=$PG_BINDIR/dml-load-idx bash bench/load_fashion.sh >/dev/null 2>&1 || { echo "loading Fashion-MNIST failed"; exit 1; }

jobs=(
	"big|hidden => '{1024,1024}', optimizer => 'sgd', learning_rate => 0.01, batch_size => 1024, epochs => 5, validation => 0"
	"fashion_val|hidden => '{256,128}', optimizer => 'adam', learning_rate => 0.001, batch_size => 128, epochs => 5, validation => 0.2"
	"big_tf32|hidden => '{1024,1024}', optimizer => 'sgd', learning_rate => 0.01, batch_size => 1024, epochs => 5, validation => 0, options => '{\"tf32\": true}'"
)
for round in $(seq 1 "$rounds"); do
	for w in new old; do
		if [ "$w" = old ]; then cp "$old" "$PG_BINDIR/dml-worker-gpu"; else cp "$new" "$PG_BINDIR/dml-worker-gpu"; fi
		for j in "${jobs[@]}"; do
			IFS='|' read -r what args <<<"$j"
			id=$(q -c "SELECT model_id FROM dml_train('ab_${what}_${w}_$round', 'fashion_train', 'label',
				features => '{pixels}', model => 'mlp', $args, device => 'gpu', workers => 1)" 2>>/tmp/gpu_ab.log)
			[ -n "$id" ] || { echo "AB $what $w round $round: failed"; tail -n 3 /tmp/gpu_ab.log; continue; }
			echo "AB $what $w round $round: $(q -c "SELECT 'total ' || (metrics ->> 'total_seconds') ||
				' train ' || (metrics ->> 'train_seconds') || ' load ' || (metrics ->> 'load_seconds') ||
				' acc ' || (metrics ->> 'accuracy') || ' on ' || (metrics ->> 'evaluated_on') ||
				' weights ' || left(md5(weights), 8) FROM dml.models WHERE id = $id") epochs $(q -c "SELECT round(percentile_cont(0.5)
				WITHIN GROUP (ORDER BY rows_per_second)) FROM dml.epochs WHERE model_id = $id") rows/s"
		done
	done
done
