#!/bin/bash
# fashion_defaults.sh: issue 15's Fashion-MNIST goals with defaults only,
# side by side with PyTorch's time to the same test accuracy.
#
#   bash bench/fashion_defaults.sh [OUT.md]
#
#   DML_FASHION_REPS=N       rounds (default 3); each round runs every
#                            trainer once, in turn, and the table gives the
#                            median (min-max) over the rounds
#   DML_BENCH_TORCH_PY=PY    the interpreter with torch (default
#                            /usr/bin/python3, Debian's)
#   DML_FASHION_TORCH_BATCH  PyTorch's batch sizes (default "256 G", G being
#                            dml's global batch: workers x batch_size)
#
# Starts its own private PostgreSQL cluster (regress/pgcluster.sh), loads
# Fashion-MNIST (bench/load_fashion.sh: 60,000 training rows, 10,000 test
# rows), and trains with nothing but name, relation and target:
#   dml_train('fd_softmax', 'fashion_train', 'label', model => 'softmax')
#   dml_train('fd_mlp', 'fashion_train', 'label', model => 'mlp')
# (model named, since a 784-pixel array with 10 labels is softmax by
# default anyway), then the official test accuracy (dml_evaluate on
# fashion_test) against the goals (softmax 0.84, MLP 0.885).
#
# Beside each, PyTorch (bench/peers/torch_mlp.py) trains the same network
# (the layers dml's default gave, read from the stored model) its usual
# way: Adam at 0.001, standardized pixels, all 60,000 training rows, both
# cores (--threads 2: the process is pinned to them and each epoch reports
# the cores it really used), and stops after the first epoch whose TEST
# accuracy reaches the goal (--until-test-acc: PyTorch is told when to
# stop by the test set itself, which dml's defaults never see).  Its
# figures: the process's wall time (start of the interpreter to its exit:
# import, reading the .npy cache, training, an evaluation per epoch) and
# the training time to the goal (the epochs' training only).  dml's: the
# wall time of the whole dml_train (reading the table, starting the
# workers, training to convergence, storing the model).  Needs the
# extension installed (make install).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
out=${1:-}
reps=${DML_FASHION_REPS:-3}
torch_py=${DML_BENCH_TORCH_PY:-/usr/bin/python3}
npy=$here/bench/out/npy
mkdir -p "$npy"
raw=$(mktemp /tmp/fashion-defaults.XXXXXX)
source regress/pgcluster.sh
pgc_start
trap 'pgc_stop; rm -f "$raw"' EXIT
# the peers on the OpenBLAS kernels dml-worker runs (peer_blas.sh)
source bench/peer_blas.sh
echo "fashion_defaults.sh: peers' OpenBLAS kernels: $PEER_BLAS" >&2
export PGDATABASE=dml_fashion_defaults
pgc_psql -d postgres -c "CREATE DATABASE $PGDATABASE" >/dev/null
pgc_psql -c "CREATE EXTENSION dml" >/dev/null
bash bench/load_fashion.sh >/dev/null
# PyTorch reads the same IDX files through a .npy cache, made before any timing
"$torch_py" -c "import sys; sys.path.insert(0, 'bench/peers'); from fashion import load_fashion; load_fashion(None, '$npy')"
torch_version=$("$torch_py" -c "import torch; print(torch.__version__)" 2>/dev/null)
cores=$(nproc)
load=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u '+%Y-%m-%d %H:%M UTC')

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# one dml_train with defaults: a raw line "dml KIND wall epochs stopped optimizer acc hidden global_batch"
run_dml() {
	local kind=$1 t0 t1 facts
	pgc_psql -q -c "SET client_min_messages = warning" \
		-c "SELECT dml_drop_model('fd_$kind') FROM dml.models WHERE name = 'fd_$kind' LIMIT 1" >/dev/null
	t0=$(now)
	pgc_psql -q -c "SET client_min_messages = warning" \
		-c "SELECT name FROM dml_train('fd_$kind', 'fashion_train', 'label', model => '$kind')" >/dev/null
	t1=$(now)
	facts=$(pgc_psql -At -F' ' -c "SELECT metrics->>'epochs', replace(metrics->>'stopped', ' ', '_'),
			metrics->>'optimizer',
			round((dml_evaluate('fd_$kind', 'fashion_test') ->> 'accuracy')::numeric, 4),
			coalesce((SELECT string_agg(h, ',') FROM jsonb_array_elements_text(spec->'hidden') h), '-'),
			(spec->'hyperparameters'->>'batch_size')::int * (metrics->>'workers')::int
		FROM dml.models WHERE name = 'fd_$kind' ORDER BY version DESC LIMIT 1")
	echo "dml $kind $(secs "$t0" "$t1") $facts" >>"$raw"
	echo "$facts"
}

# PyTorch to the goal: a raw line "torchBATCH KIND wall train_s epochs reached cores acc"
run_torch() {
	local kind=$1 goal=$2 hidden=$3 batch=$4 t0 t1 log
	local model=(--model mlp --hidden "$hidden")
	[ "$kind" = softmax ] && model=(--model logistic)
	log=$(mktemp /tmp/fashion-torch.XXXXXX)
	t0=$(now)
	"$torch_py" bench/peers/torch_mlp.py "${model[@]}" --optimizer adam --lr 0.001 \
		--batch-size "$batch" --epochs 200 --threads 2 --standardize --npy "$npy" \
		--until-test-acc "$goal" >"$log"
	t1=$(now)
	/usr/bin/python3 - "$log" "$kind" "$batch" "$(secs "$t0" "$t1")" >>"$raw" <<-'EOF'
		import json, sys
		rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
		ep = [r for r in rows if r["event"] == "epoch"]
		done = [r for r in rows if r["event"] == "done"][0]
		train = sum(r["seconds"] for r in ep)
		cores = sum(r["cores"] * r["seconds"] for r in ep) / train
		print(f"torch{sys.argv[3]} {sys.argv[2]} {sys.argv[4]} {train:.2f} {len(ep)} "
		      f"{'yes' if done.get('reached_epoch') else 'no'} {cores:.2f} {done['test_acc']:.4f}")
	EOF
	rm -f "$log"
}

for round in $(seq 1 "$reps"); do
	for spec in "softmax:0.84" "mlp:0.885"; do
		kind=${spec%%:*}
		goal=${spec##*:}
		read -r _ _ _ _ hidden gbatch <<<"$(run_dml "$kind")"
		for b in ${DML_FASHION_TORCH_BATCH:-256 $gbatch}; do
			run_torch "$kind" "$goal" "$hidden" "$b"
		done
	done
done

/usr/bin/python3 - "$raw" "$cores" "$load" "$started" "$reps" "$torch_version" "$torch_py" \
	"$(cut -d' ' -f1-3 /proc/loadavg)" <<-'EOF' | tee ${out:+"$out"}
	import statistics, sys
	raw, cores, load, started, reps, tv, tpy, load_end = sys.argv[1:9]
	lines = [l.split() for l in open(raw)]
	def med(xs, fmt=".2f"):
	    xs = [float(x) for x in xs]
	    m = statistics.median(xs)
	    if min(xs) == max(xs):
	        return f"{m:{fmt}}"
	    return f"{m:{fmt}} ({min(xs):{fmt}}–{max(xs):{fmt}})"
	goals = {"softmax": "0.84", "mlp": "0.885"}
	print(f"Fashion-MNIST with dml's defaults beside PyTorch to the same test accuracy "
	      f"({started}; {cores} cores; load average {load} at the start, {load_end} at the end; "
	      f"{reps} rounds, median (min–max))")
	print()
	print("| model | trainer | how it stops | epochs | test accuracy | goal | wall s | training s to the goal | cores |")
	print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for kind in ("softmax", "mlp"):
	    d = [l for l in lines if l[0] == "dml" and l[1] == kind]
	    hidden, gb = d[0][7], d[0][8]
	    net = "784-10" if hidden == "-" else "784-" + hidden.replace(",", "-") + "-10"
	    stops = sorted({l[4].replace("_", " ") for l in d})
	    print(f"| {kind} {net} | dml defaults: `dml_train('fd_{kind}', 'fashion_train', 'label', "
	          f"model => '{kind}')` ({d[0][5]}, global batch {gb} where minibatch) | "
	          f"{', '.join(stops)} | {med([l[3] for l in d], '.0f')} | {med([l[6] for l in d], '.4f')} | "
	          f"{goals[kind]} | {med([l[2] for l in d])} | — | 2 workers |")
	    for tb in sorted({l[0] for l in lines if l[0].startswith("torch") and l[1] == kind},
	                     key=lambda s: int(s[5:])):
	        t = [l for l in lines if l[0] == tb and l[1] == kind]
	        reached = sum(1 for l in t if l[5] == "yes")
	        print(f"| {kind} {net} | PyTorch {tv} Adam 0.001, batch {tb[5:]}, 2 threads | "
	              f"first epoch at the goal on the test set ({reached} of {len(t)} reached it) | "
	              f"{med([l[4] for l in t], '.0f')} | {med([l[7] for l in t], '.4f')} | {goals[kind]} | "
	              f"{med([l[2] for l in t])} (process) | {med([l[3] for l in t])} | "
	              f"{med([l[6] for l in t])} |")
	print()
	print(f"PyTorch: `{tpy} bench/peers/torch_mlp.py --model mlp --hidden H (or --model logistic) "
	      f"--optimizer adam --lr 0.001 --batch-size B --epochs 200 --threads 2 --standardize "
	      f"--npy bench/out/npy --until-test-acc GOAL`")
	EOF
