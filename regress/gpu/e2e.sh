#!/bin/bash
#
# e2e.sh: dml_train(..., device => 'gpu') end to end through a real server,
# run by regress/gpu_check.sh when a CUDA device is visible.  It starts its
# own private cluster (regress/pgcluster.sh), loads Fashion-MNIST
# ($FASHION_DIR, bench/load_fashion.sh) and two synthetic tables, and
# checks:
#   - every model kind (linear, logistic, softmax, mlp) trains on the GPU,
#     says so (NOTICE and the model's metrics), and scores within a few
#     points of the same training on the CPU (not bit-equal: float sums in
#     another order, and the runs diverge chaotically from there);
#   - device 'auto' takes the GPU; more GPU ranks than the host has GPUs,
#     a sync mode or compression the GPU loop lacks: clear errors (with
#     'auto', such a job runs on the CPU and says so);
#   - with two or more GPUs, two GPU ranks (NCCL) train;
#   - a canceled GPU training and one whose GPU worker is killed (SIGKILL)
#     end within a deadline, leave no process, and give back the device
#     memory (nvidia-smi lists no compute process of ours, memory in use
#     back to what it was).
# Then it measures, one run, this device:
#   - the load from PostgreSQL to device memory (the model's load_seconds)
#     against the COPY floor (COPY ... TO STDOUT (FORMAT binary) of the
#     same columns, read and thrown away by psql);
#   - the Fashion-MNIST MLP (784-256-128-10, adam, batch 128) and MLP
#     784-1024-1024-10 (sgd, batch 1024): rows/s per epoch on the GPU,
#     and PyTorch on the same GPU with the same batch and precision
#     (regress/gpu/torch_peer.py, eager and CUDA-graph replay; the faster
#     is its figure); test accuracy of each.
#
# DML_E2E_DEVICE=cpu runs the same script with device 'cpu' wherever it
# says 'gpu', to check the script itself on a machine without a GPU (the
# GPU-only checks are then skipped).
#
# Output: ok / not ok / skip lines, "# " lines with figures, then
# "N passed, N failed, N skipped".

set -u
cd "$(dirname "$0")/../.."
DEV=${DML_E2E_DEVICE:-gpu}
PY=${PYTHON:-python3}
source regress/gpu/lib.sh
now() { date +%s.%N; }

ngpu=0
command -v nvidia-smi >/dev/null && ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$DEV" = gpu ] && [ "$ngpu" -eq 0 ] && { notok "a CUDA device for the end-to-end checks"; finish; }

gpu_cluster e2e
LOG=$PGC_DIR/e2e.log

q -c "CREATE EXTENSION dml" >/dev/null
t0=$(now)
if bash bench/load_fashion.sh ${E2E_FASHION_LIMIT:+--limit $E2E_FASHION_LIMIT} >"$LOG" 2>&1; then
	ok "Fashion-MNIST loaded ($(q -c "SELECT count(*) FROM fashion_train") + $(q -c "SELECT count(*) FROM fashion_test") rows)"
else
	sed 's/^/#   /' "$LOG"
	notok "Fashion-MNIST loaded"
	finish
fi
echo "# dml-load-idx: Fashion-MNIST into PostgreSQL in $(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }') s"
q -c "CREATE TABLE reg AS SELECT i, x1, x2, x3, x4, 3 * x1 - 2 * x2 + x3 * 0.5 - x4 + 0.05 * sin(i * 7.1) AS y,
		(x1 + x2 - x3 > 0.1)::int AS c
	FROM (SELECT i, sin(i * 0.37) AS x1, cos(i * 0.91) AS x2, sin(i * 1.3 + 1) AS x3, cos(i * 0.17) AS x4
		  FROM generate_series(1, 40000) i) s" >/dev/null
q -c "CREATE TABLE reg_test AS SELECT * FROM reg WHERE i % 5 = 0" >/dev/null

# train NAME DEVICE ARGS: dml_train, the NOTICEs in $LOG; prints the model id
train() {
	local name=$1 dev=$2
	shift 2
	q -c "SET client_min_messages = notice" \
		-c "SELECT model_id FROM dml_train('$name', $*, device => '$dev', workers => 1)" 2>"$LOG"
}
metric() { q -c "SELECT metrics ->> '$2' FROM dml.models WHERE id = $1"; }
score() { q -c "SELECT round((dml_evaluate('$1', '$2') ->> '$3')::numeric, 4)"; }

# every model kind on the device and on the CPU
kinds=(
	"linear|'reg', 'y', features => '{x1,x2,x3,x4}', model => 'linear', optimizer => 'adam', learning_rate => 0.01, batch_size => 256, epochs => 10|reg_test|r2|0.01"
	"logistic|'reg', 'c', features => '{x1,x2,x3,x4}', model => 'logistic', optimizer => 'adam', learning_rate => 0.01, batch_size => 256, epochs => 10|reg_test|accuracy|0.01"
	"softmax|'fashion_train', 'label', features => '{pixels}', model => 'softmax', optimizer => 'adam', learning_rate => 0.001, batch_size => 128, epochs => 3|fashion_test|accuracy|0.015"
	"mlp|'fashion_train', 'label', features => '{pixels}', model => 'mlp', hidden => '{256,128}', optimizer => 'adam', learning_rate => 0.001, batch_size => 128, epochs => 3|fashion_test|accuracy|0.015"
)
for k in "${kinds[@]}"; do
	IFS='|' read -r kind args test what tol <<<"$k"
	id=$(train "e_${kind}_dev" "$DEV" "$args")
	if [ -z "$id" ]; then
		sed 's/^/#   /' "$LOG"
		notok "$kind trains with device '$DEV'"
		continue
	fi
	check "$kind on '$DEV': the NOTICE says it trained on $DEV" "grep -q 'training $kind on $DEV with 1 worker' '$LOG'"
	check "$kind on '$DEV': the model's metrics say device $DEV" '[ "$(metric "$id" device)" = "$DEV" ]'
	idc=$(train "e_${kind}_cpu" cpu "$args")
	a=$(score "e_${kind}_dev" "$test" "$what")
	b=$(score "e_${kind}_cpu" "$test" "$what")
	echo "# $kind: $what on $test: $DEV $a, cpu $b; train rows/s $DEV $(metric "$id" rows_per_second), cpu $(metric "$idc" rows_per_second)"
	check "$kind on '$DEV': $what $a within $tol of the CPU's $b" \
		"awk -v a='$a' -v b='$b' -v t='$tol' 'BEGIN { d = a - b; exit !(a != \"\" && b != \"\" && (d < 0 ? -d : d) <= t) }'"
done

# validation rows: each epoch's figures and the model's, evaluated where it trained
for run in "dev $DEV" "ref cpu"; do
	train "e_val_${run% *}" "${run#* }" "'fashion_train', 'label', features => '{pixels}', model => 'mlp', hidden => '{256,128}',
		optimizer => 'adam', learning_rate => 0.001, batch_size => 128, epochs => 2, validation => 0.2" >/dev/null
done
read -r on va vn <<<"$(q -c "SELECT (metrics ->> 'evaluated_on') || ' ' || (metrics ->> 'accuracy') || ' ' ||
	(SELECT count(val_loss) FROM dml.epochs e WHERE e.model_id = m.id) FROM dml.models m WHERE name = 'e_val_dev'")"
vc=$(q -c "SELECT metrics ->> 'accuracy' FROM dml.models WHERE name = 'e_val_ref'")
echo "# validation 0.2: accuracy on the held-out rows: $DEV $va, cpu $vc"
check "validation on '$DEV': both epochs and the model have figures over the held-out rows, within 0.015 of the CPU's" \
	"[ '$on' = validation ] && [ '$vn' = 2 ] && awk -v a='$va' -v b='$vc' 'BEGIN { d = a - b; exit !(a > 0.5 && (d < 0 ? -d : d) <= 0.015) }'"

# the same model predicts in SQL as its stored weights say, whatever trained it
check "a GPU-trained model predicts in SQL (dml_predict_class over fashion_test)" \
	'[ "$(q -c "SELECT count(dml_predict_class('"'"'e_mlp_dev'"'"', pixels)) FROM fashion_test")" = "$(q -c "SELECT count(*) FROM fashion_test")" ]'

# device 'auto' and the GPU loop's limits
if [ "$DEV" = gpu ]; then
	q -c "SET client_min_messages = notice" -c "SELECT model_id FROM dml_train('e_auto', 'reg', 'y',
		features => '{x1,x2,x3,x4}', model => 'linear', optimizer => 'adam', epochs => 2, device => 'auto', workers => 1)" \
		>/dev/null 2>"$LOG"
	check "device 'auto' trains on the GPU and says so" "grep -q 'training linear on gpu' '$LOG'"
	q -c "SELECT model_id FROM dml_train('e_ranks', 'reg', 'y', features => '{x1,x2,x3,x4}', model => 'linear',
		optimizer => 'adam', epochs => 1, device => 'gpu', workers => $((ngpu + 1)))" >/dev/null 2>"$LOG"
	check "$((ngpu + 1)) GPU workers on a host with $ngpu GPU(s): a clear error" \
		"grep -q 'GPU workers on a host with $ngpu GPU' '$LOG'"
	sed 's/^/#   /' "$LOG"
	q -c "SET client_min_messages = notice" -c "SELECT model_id FROM dml_train('e_auto_ssp', 'reg', 'y',
		features => '{x1,x2,x3,x4}', model => 'linear', optimizer => 'adam', epochs => 2, device => 'auto',
		workers => 2, sync => 'ssp')" >/dev/null 2>"$LOG"
	check "device 'auto' with sync 'ssp' trains on the CPU and says so" "grep -q 'training linear on cpu with 2 workers, sync ssp' '$LOG'"
	if [ "$ngpu" -ge 2 ]; then
		id=$(q -c "SELECT model_id FROM dml_train('e_nccl', 'fashion_train', 'label', features => '{pixels}',
			model => 'mlp', hidden => '{256,128}', optimizer => 'adam', learning_rate => 0.001, batch_size => 128,
			epochs => 3, device => 'gpu', workers => 2)" 2>"$LOG")
		check "two GPU ranks (NCCL) train" '[ -n "$id" ] && [ "$(metric "$id" device)" = gpu ]'
		echo "# 2 GPUs: accuracy $(score e_nccl fashion_test accuracy), rows/s $(metric "$id" rows_per_second)"
	else
		skip "two GPU ranks (NCCL): one GPU on this machine"
	fi
fi

# cancel, and a killed GPU worker: nothing left, device memory given back
gpu_apps() {
	[ "$ngpu" -gt 0 ] || { echo 0; return; }
	nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | grep -c '[0-9]'
}
gpu_used() {
	[ "$ngpu" -gt 0 ] || { echo 0; return; }
	nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'
}
no_procs() { [ "$(pgc_job_procs)" -eq 0 ]; }
no_gpu_apps() { [ "$(gpu_apps)" -eq 0 ]; }
mem_back() { [ "$(gpu_used)" -le $((used0 + 64)) ]; }
running() { [ "$(q -c "SELECT count(*) FROM dml.progress WHERE name = '$1' AND epoch >= 1")" -ge 1 ]; }
used0=$(gpu_used)
for how in cancel kill; do
	name=e_$how
	( q -c "SET dml.max_restarts = 0" -c "SELECT model_id FROM dml_train('$name', 'fashion_train', 'label',
		features => '{pixels}', model => 'mlp', hidden => '{1024,1024}', optimizer => 'sgd', batch_size => 256,
		epochs => 100000, device => '$DEV', workers => 1)" >"$PGC_DIR/$how.out" 2>&1 ) &
	bg=$!
	if ! wait_until 180 "running $name"; then
		notok "$how: the long training was seen running"
		kill "$bg" 2>/dev/null
		wait "$bg"
		continue
	fi
	[ "$DEV" = gpu ] && check "$how: the training holds the GPU (a compute process, memory in use)" \
		'[ "$(gpu_apps)" -ge 1 ] && [ "$(gpu_used)" -gt "$used0" ]'
	if [ "$how" = cancel ]; then
		q -c "SELECT pg_cancel_backend(pid) FROM dml.progress WHERE name = '$name'" >/dev/null
	else
		for p in $(pgrep -f "dml-worker"); do
			grep -qzxF "DML_TEST_CLUSTER=$PGC_DIR" "/proc/$p/environ" 2>/dev/null && kill -KILL "$p"
		done
	fi
	ended() { ! kill -0 "$bg" 2>/dev/null; }
	check "$how: the dml_train call ends" "wait_until 60 ended"
	wait "$bg" 2>/dev/null
	sed 's/^/#   /' "$PGC_DIR/$how.out"
	if [ "$how" = cancel ]; then
		check "cancel: the call reports the cancel" "grep -q 'canceling statement due to user request' '$PGC_DIR/$how.out'"
	else
		check "kill: the call fails with an error" "grep -q 'ERROR' '$PGC_DIR/$how.out'"
	fi
	check "$how: no mpirun or dml-worker left" "wait_until 30 no_procs"
	if [ "$DEV" = gpu ]; then
		check "$how: no compute process left on the GPU" "wait_until 30 no_gpu_apps"
		check "$how: device memory in use back to $used0 MiB (+64) (now $(gpu_used) MiB)" "wait_until 30 mem_back"
	fi
done
check "no job directory left" '[ "$(pgc_job_dirs)" -eq 0 ]'

# ---------------------------------------------------------------------
# measurements
# ---------------------------------------------------------------------
# the COPY floor: the server reads the table and writes it out in binary,
# to /dev/null, timed by psql (median of 3)
copy_s=$(for i in 1 2 3; do
	q -c '\timing on' -c "COPY (SELECT label, pixels FROM fashion_train) TO '/dev/null' (FORMAT binary)"
done | awk '/^Time:/ { print $2 / 1000 }' | sort -g | sed -n 2p)
bytes=$(q -c "SELECT pg_total_relation_size('fashion_train')")

# median of a model's epochs' rows/s
epoch_rps() { q -c "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY rows_per_second) FROM dml.epochs WHERE model_id = $1"; }
declare -A rps acc
runs=(
	"fashion|'fashion_train', 'label', features => '{pixels}', model => 'mlp', hidden => '{256,128}', optimizer => 'adam', learning_rate => 0.001, batch_size => 128, epochs => 5, validation => 0"
	"big|'fashion_train', 'label', features => '{pixels}', model => 'mlp', hidden => '{1024,1024}', optimizer => 'sgd', learning_rate => 0.01, batch_size => 1024, epochs => 5, validation => 0"
)
if [ "$DEV" = gpu ]; then
	runs+=("${runs[0]/fashion|/fashion_tf32|}, options => '{\"tf32\": true}'"
		"${runs[1]/big|/big_tf32|}, options => '{\"tf32\": true}'")
fi
for r in "${runs[@]}"; do
	IFS='|' read -r what args <<<"$r"
	id=$(train "m_$what" "$DEV" "$args")
	if [ -z "$id" ]; then
		sed 's/^/#   /' "$LOG"
		notok "measure $what on $DEV"
		continue
	fi
	rps[$what]=$(epoch_rps "$id")
	acc[$what]=$(score "m_$what" fashion_test accuracy)
	echo "# $what on $DEV: median epoch $(printf '%.0f' "${rps[$what]}") rows/s, test accuracy ${acc[$what]}, load $(metric "$id" load_seconds) s, train $(metric "$id" train_seconds) s, total $(metric "$id" total_seconds) s"
	[ "$what" = fashion ] && load_s=$(metric "$id" load_seconds)
	# with no validation rows the model's figures are over its training rows,
	# computed where it trained (on the GPU in FP32, TF32 or not): the CPU's
	# evaluation of the stored model over the same table agrees to a few
	# near-tied rows and to float rounding of the loss
	ev=$(q -c "SELECT (m.metrics ->> 'evaluated_on') || ' ' || (m.metrics ->> 'accuracy') || ' ' ||
		(m.metrics ->> 'log_loss') || ' ' || (e ->> 'accuracy') || ' ' || (e ->> 'log_loss')
		FROM dml.models m, dml_evaluate('m_$what', 'fashion_train') e WHERE m.id = $id")
	read -r on ma ml ea el <<<"$ev"
	echo "# $what: metrics over the training rows: accuracy $ma, log loss $ml; dml_evaluate on the CPU: $ea, $el"
	check "$what: the model's metrics over its training rows equal the CPU's evaluation (accuracy within 5e-4, loss within 1e-4 relative)" \
		"[ '$on' = training ] && awk -v a='$ma' -v b='$ea' -v c='$ml' -v d='$el' 'BEGIN { x = a - b; y = (c - d) / d; exit !(b != \"\" && d > 0 && (x < 0 ? -x : x) <= 5e-4 && (y < 0 ? -y : y) <= 1e-4) }'"
	if [ "${what%_tf32}" != "$what" ]; then
		check "$what: the NOTICE says tf32 and the metrics record it" \
			"grep -q 'on gpu with 1 worker, tf32' '$LOG' && [ \"\$(metric $id tf32)\" = true ]"
		check "$what: test accuracy ${acc[$what]} within 0.01 of fp32's ${acc[${what%_tf32}]:-}" \
			"awk -v a='${acc[$what]}' -v b='${acc[${what%_tf32}]:-}' 'BEGIN { d = a - b; exit !(b != \"\" && (d < 0 ? -d : d) <= 0.01) }'"
		echo "# $what: TF32 buys $(awk -v a="${rps[$what]}" -v b="${rps[${what%_tf32}]:-0}" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')x rows/s over fp32"
	fi
done
echo "# load to device: $load_s s for fashion_train ($bytes bytes on disk); COPY (FORMAT binary) floor $copy_s s: $(awk -v a="$load_s" -v b="$copy_s" 'BEGIN { printf "%.2f", a / b }')x"

if [ "$DEV" = gpu ]; then
	if peer=$($PY regress/gpu/torch_peer.py --fashion "$FASHION_DIR" 2>"$PGC_DIR/torch.err"); then
		echo "$peer" | sed 's/^/# torch: /'
		for w in fashion:fp32 big:fp32 fashion_tf32:tf32 big_tf32:tf32; do
			what=${w%%:*}
			prec=${w#*:}
			t=$(echo "$peer" | $PY -c "import json, sys
rs = [json.loads(l) for l in sys.stdin if l.strip()]
best = max((r for r in rs if r['what'] == '${what%_tf32}' and r['precision'] == '$prec'), key=lambda r: r['samples_per_s'])
print(best['samples_per_s'], best['mode'], best.get('test_accuracy', ''))")
			read -r tsps tmode tacc <<<"$t"
			echo "# ${what%_tf32} $prec, same batch: dml $(printf '%.0f' "${rps[$what]:-0}") rows/s (accuracy ${acc[$what]:-}), PyTorch $tsps samples/s ($tmode, accuracy $tacc): dml/PyTorch $(awk -v a="${rps[$what]:-0}" -v b="$tsps" 'BEGIN { printf "%.2f", a / b }')"
		done
	else
		echo "# PyTorch comparison not run: $(tail -n 1 "$PGC_DIR/torch.err")"
	fi
fi
finish
