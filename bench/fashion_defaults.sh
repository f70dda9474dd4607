#!/bin/bash
# fashion_defaults.sh: issue 15's Fashion-MNIST goals with defaults only.
#
#   bash bench/fashion_defaults.sh [OUT.md]
#
# Starts its own private PostgreSQL cluster (regress/pgcluster.sh), loads
# Fashion-MNIST (bench/load_fashion.sh: 60,000 training rows, 10,000 test
# rows), and trains with nothing but name, relation and target:
#   dml_train('fd_softmax', 'fashion_train', 'label', model => 'softmax')
#   dml_train('fd_mlp', 'fashion_train', 'label', model => 'mlp')
# (model named, since a 784-pixel array with 10 labels is softmax by
# default anyway), then the official test accuracy (dml_evaluate on
# fashion_test).  Prints a markdown table (and writes it to OUT.md): wall
# time of each dml_train, the optimizer the defaults chose, why training
# stopped and after how many epochs, and the test accuracy against the
# goals (softmax 0.84, MLP 0.885).  Needs the extension installed (make
# install).  No PyTorch run here: bench/run.sh full has the side-by-side.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
out=${1:-}
source regress/pgcluster.sh
pgc_start
trap pgc_stop EXIT
export PGDATABASE=dml_fashion_defaults
pgc_psql -d postgres -c "CREATE DATABASE $PGDATABASE" >/dev/null
pgc_psql -c "CREATE EXTENSION dml" >/dev/null
bash bench/load_fashion.sh >/dev/null
cores=$(nproc)
load=$(cut -d' ' -f1-3 /proc/loadavg)
rows=("| model | call | optimizer | stopped | epochs | dml_train wall s | test accuracy | goal |"
      "| --- | --- | --- | --- | --- | --- | --- | --- |")
for spec in "softmax:0.84" "mlp:0.885"; do
	kind=${spec%%:*}
	goal=${spec##*:}
	call="dml_train('fd_$kind', 'fashion_train', 'label', model => '$kind')"
	t0=$(date +%s.%N)
	pgc_psql -q -c "SET client_min_messages = warning" -c "SELECT name FROM $call" >/dev/null
	t1=$(date +%s.%N)
	facts=$(pgc_psql -At -F' | ' -c "SELECT metrics->>'optimizer', metrics->>'stopped', metrics->>'epochs'
		FROM dml.models WHERE name = 'fd_$kind' ORDER BY version DESC LIMIT 1")
	acc=$(pgc_psql -At -c "SELECT round((dml_evaluate('fd_$kind', 'fashion_test') ->> 'accuracy')::numeric, 4)")
	rows+=("| $kind | \`$call\` | $facts | $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') | $acc | $goal |")
done
{
	echo "Fashion-MNIST with dml's defaults ($(date -u '+%Y-%m-%d %H:%M UTC'); $cores cores; load average $load at the start)"
	echo
	printf '%s\n' "${rows[@]}"
} | tee ${out:+"$out"}
