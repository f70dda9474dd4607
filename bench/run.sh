#!/bin/bash
# run.sh: the benchmark harness (make bench / make bench-quick).
#
#   bash bench/run.sh full     all benchmarks at full size (~20 min on 2 cores),
#                              report in bench/RESULTS.md
#   bash bench/run.sh quick    the same code on small sizes (< 3 min),
#                              report in bench/out/RESULTS-quick.md
#
#   DML_BENCH_BASELINE=REV bash bench/run.sh full
#                              also builds REV's dml-worker (git archive) and runs
#                              the MPI exact solvers with it side by side
#
# Starts its own private PostgreSQL cluster (regress/pgcluster.sh) and stops
# it on exit, builds the micro benchmarks (bench/micro) into build/micro,
# loads synth_1m (bench/sql/synth.sql) and Fashion-MNIST
# (bench/load_fashion.sh), then runs bench/harness.py, which runs every
# benchmark side by side and writes the report.  Needs the dml extension
# installed (make install) and /usr/bin/python3 with numpy, psycopg2, torch
# and scikit-learn.  Raw results: bench/out/raw-MODE.json; log:
# bench/out/run-MODE.log.
set -euo pipefail

mode=${1:-quick}
case "$mode" in
	quick|full) ;;
	*) echo "usage: bash bench/run.sh quick|full" >&2; exit 2 ;;
esac

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
out_dir=$here/bench/out
mkdir -p "$out_dir"
if [ "$mode" = full ]; then
	report=$here/bench/RESULTS.md
	synth_rows=1000000
	fashion_limit=()
else
	report=$out_dir/RESULTS-quick.md
	synth_rows=20000
	fashion_limit=(--limit 3000)
fi
PY=/usr/bin/python3
t_begin=$(date +%s)

# --- what we need, installed only if missing --------------------------------
need_pkgs=()
command -v mpicc >/dev/null 2>&1 || need_pkgs+=(libopenmpi-dev openmpi-bin)
[ -e /usr/include/x86_64-linux-gnu/cblas.h ] || [ -e /usr/include/cblas.h ] ||
	[ -e /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h ] || need_pkgs+=(libopenblas-dev)
command -v pg_config >/dev/null 2>&1 || need_pkgs+=(postgresql-server-dev-15)
[ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
	[ -n "${FASHION_DIR:-}" ] || need_pkgs+=(dataset-fashion-mnist)
if [ ${#need_pkgs[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ]; then
		echo "run.sh: installing ${need_pkgs[*]}" >&2
		apt-get install -y --no-install-recommends "${need_pkgs[@]}" >&2
	else
		echo "run.sh: missing ${need_pkgs[*]} (install them as root)" >&2
		exit 1
	fi
fi
if ! $PY -c 'import numpy, psycopg2, torch, sklearn' 2>/dev/null; then
	echo "run.sh: $PY lacks one of numpy, psycopg2, torch, scikit-learn" >&2
	exit 1
fi
if [ ! -e "$(pg_config --sharedir)/extension/dml.control" ]; then
	echo "run.sh: the dml extension is not installed (run make && make install)" >&2
	exit 1
fi

# --- the newest PyTorch from PyPI, beside Debian's (full mode) -------------------
# A virtual environment under build/ (about 3 GB: PyPI's Linux wheel brings
# its CUDA libraries); made once, used only as a peer.  DML_BENCH_TORCH_PYPI=0
# leaves it out; quick mode never makes it.
torch_args=()
TORCH_PYPI=${DML_BENCH_TORCH_PYPI_VERSION:-2.15.0}
if [ "$mode" = full ] && [ "${DML_BENCH_TORCH_PYPI:-1}" != 0 ]; then
	tenv="$here/build/torchenv"
	if ! "$tenv/bin/python" -c "import torch, numpy; assert torch.__version__.startswith('$TORCH_PYPI')" 2>/dev/null; then
		echo "run.sh: making $tenv (torch==$TORCH_PYPI from PyPI)" >&2
		rm -rf "$tenv"
		$PY -m venv "$tenv" && "$tenv/bin/pip" install -q --disable-pip-version-check \
			"torch==$TORCH_PYPI" numpy >"$out_dir/torchenv.log" 2>&1 ||
			{ echo "run.sh: could not make $tenv (see $out_dir/torchenv.log); PyPI's PyTorch left out" >&2; rm -rf "$tenv"; }
	fi
	[ -x "$tenv/bin/python" ] && torch_args=(--torch-py "$tenv/bin/python")
fi
# or an interpreter named by the caller, in either mode
[ -n "${DML_BENCH_TORCH_PY:-}" ] && torch_args=(--torch-py "$DML_BENCH_TORCH_PY")

# --- micro benchmarks ---------------------------------------------------------
bash bench/micro/build.sh "$here/build/micro" >"$out_dir/build-micro.log" 2>&1 || {
	cat "$out_dir/build-micro.log" >&2; exit 1; }

# --- a previous build's dml-worker, to compare with (optional) ------------------
baseline_args=()
if [ -n "${DML_BENCH_BASELINE:-}" ]; then
	bsrc=$out_dir/baseline-src
	rm -rf "$bsrc"
	mkdir -p "$bsrc"
	git -C "$here" archive "$DML_BENCH_BASELINE" | tar -x -C "$bsrc"
	# CPU only: the exact solvers it is compared on do not use CUDA
	make -C "$bsrc" -s build/dml-worker HAVE_CUDA=no >"$out_dir/build-baseline.log" 2>&1 || {
		cat "$out_dir/build-baseline.log" >&2; exit 1; }
	baseline_label="dml-worker of $(git -C "$here" rev-parse --short "$DML_BENCH_BASELINE")"
fi

# --- private cluster ------------------------------------------------------------
# shellcheck source=../regress/pgcluster.sh
source regress/pgcluster.sh
cluster_cg=
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	pgc_stop || true
	[ -n "$cluster_cg" ] && rmdir "$cluster_cg" 2>/dev/null
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
pgc_start
echo "run.sh: cluster in $PGC_DIR, port $PGC_PORT" >&2
# The cluster's processes in a cgroup of their own (root only; cgroup v2, or
# v1's cpuacct), so that the CPU time of a dml_train (its backend, the
# backends serving the workers' reads, mpirun, the workers) can be read:
# harness.py's "cores used".  New backends inherit the postmaster's group.
cluster_cpu=
if [ "$(id -u)" = 0 ]; then
	pm=$(head -n 1 "$PGC_DIR/data/postmaster.pid")
	for root in /sys/fs/cgroup /sys/fs/cgroup/unified /sys/fs/cgroup/cpuacct; do
		if [ -f "$root/cgroup.controllers" ] || [ -f "$root/cpuacct.usage" ]; then
			cg=$root/dml-bench-$$
			if mkdir "$cg" 2>/dev/null; then
				cluster_cg=$cg
				# a child that ended since pgrep (an autovacuum worker, say) cannot be
				# moved: that write fails, and under set -e it ended the whole run
				for p in "$pm" $(pgrep -P "$pm"); do echo "$p" >"$cg/cgroup.procs" 2>/dev/null || true; done
				if grep -qx "$pm" "$cg/cgroup.procs" 2>/dev/null; then
					[ -f "$cg/cpu.stat" ] && cluster_cpu=$cg/cpu.stat
					[ -f "$cg/cpuacct.usage" ] && cluster_cpu=$cg/cpuacct.usage
				fi
				[ -n "$cluster_cpu" ] && break
			fi
		fi
	done
fi
echo "run.sh: the cluster's CPU time from ${cluster_cpu:-nowhere (no cgroup)}" >&2
# the peers on the OpenBLAS kernels dml-worker runs (peer_blas.sh)
source bench/peer_blas.sh
echo "run.sh: peers' OpenBLAS kernels: $PEER_BLAS" >&2
# the benchmark runs as root; the socket directory must let root's psql in
pgc_psql -c 'CREATE EXTENSION dml'
if [ -n "${DML_BENCH_BASELINE:-}" ]; then
	# where the server's user can run it
	install -m 755 "$bsrc/build/dml-worker" "$PGC_DIR/baseline-dml-worker"
	baseline_args=(--baseline-worker "$PGC_DIR/baseline-dml-worker" --baseline-label "$baseline_label")
fi

setup_json=$out_dir/setup-$mode.json
timed_setup() {	# name, command...
	local name=$1; shift
	local t0 t1
	t0=$(date +%s.%N)
	"$@" >>"$out_dir/run-$mode.log" 2>&1
	t1=$(date +%s.%N)
	printf '%s\t%s\t%s\n' "$name" "$(awk "BEGIN{print $t1 - $t0}")" "$*" >>"$setup_json.tsv"
}
: >"$out_dir/run-$mode.log"
: >"$setup_json.tsv"
echo "run.sh: loading synth_1m ($synth_rows rows) and Fashion-MNIST" >&2
timed_setup synth_1m psql -X -q -v ON_ERROR_STOP=1 -v rows=$synth_rows -f bench/sql/synth.sql
timed_setup fashion env DML_LOAD_IDX="${DML_LOAD_IDX:-}" bash bench/load_fashion.sh "${fashion_limit[@]}"
# the tables as a vacuumed table is: every page all-visible.  The cluster
# commits asynchronously (synchronous_commit off), and VACUUM marks a page
# all-visible only where its rows' commits are on disk (their hint bits
# set).  VACUUM ANALYZE right after a load marked none (pg_class
# .relallvisible 0 for synth_1m), and every scan then checked each row's
# visibility: the load's commit was not written yet, or ANALYZE's own
# commits of the tables before, in the same group of the commit log, kept
# it from counting as written.  So: a CHECKPOINT (every commit written),
# VACUUM, then ANALYZE.
pgc_psql -c 'CHECKPOINT' -c 'VACUUM' -c 'ANALYZE'
$PY - "$setup_json.tsv" "$setup_json" <<'EOF'
import json, sys
d = {}
for line in open(sys.argv[1]):
    name, secs, cmd = line.rstrip("\n").split("\t", 2)
    d[name] = {"seconds": float(secs), "cmd": cmd}
json.dump(d, open(sys.argv[2], "w"))
EOF

# --- the benchmarks -----------------------------------------------------------
$PY bench/harness.py --mode "$mode" --out "$report" --micro "$here/build/micro" \
	--workdir "$out_dir" --setup-json "$setup_json" ${cluster_cpu:+--cluster-cpu "$cluster_cpu"} "${baseline_args[@]}" "${torch_args[@]}" 2>&1 | tee -a "$out_dir/run-$mode.log" >&2

echo "run.sh: $mode done in $(( $(date +%s) - t_begin )) s; report: $report" >&2
