# worker_ab.sh: the setup the A/B benchmarks share (newton_ab.sh, mlp_ab.sh),
# sourced from the top of the tree.
#
#   worker_ab_start REV OUT
#
# Builds REV's dml-worker (git archive, CPU only) under OUT/src, with this
# tree's coordinator/protocol.h where REV's differs (the installed
# coordinator reads this tree's messages; a field REV does not know is left
# zero), starts a private cluster (regress/pgcluster.sh; stopped on exit) and creates the
# extension.  Each build runs through a wrapper, $PGC_DIR/base-wrapped
# (REV's) and $PGC_DIR/this-wrapped (the installed one), that appends its
# ranks' CPU seconds (user + system, /usr/bin/time) to $PGC_DIR/cpu/base or
# $PGC_DIR/cpu/this: a figure that other work on the machine disturbs far
# less than wall time.  Point dml.worker_path at a wrapper to pick a build,
# or run the statement through worker_ab_train.
#
#   worker_ab_train WHO STATEMENT
#
# Runs STATEMENT (a SELECT of one model_id) with WHO's build (base or this)
# and sets WAB_ID (the model), WAB_T0 and WAB_T1 (the statement's start and
# end, seconds since the epoch) and WAB_CPU (its ranks' CPU seconds).
# worker_ab_synth loads synth_1m and sets WAB_FEATS (its features);
# worker_ab_ratios OUT COL:NAME... prints the builds' ratio for each column
# of their runs' lines.  median reads numbers, one a line, and prints their
# median; worker_ab_cpu prints the CPU's model name, family and model number.
worker_ab_start() {
	local rev=$1 out=$2 who real
	rm -rf "$out"
	mkdir -p "$out/src"
	git archive "$rev" | tar -x -C "$out/src"
	if ! cmp -s coordinator/protocol.h "$out/src/coordinator/protocol.h"; then
		echo "baseline $rev built with this tree's coordinator/protocol.h" >&2
		cp coordinator/protocol.h "$out/src/coordinator/protocol.h"
	fi
	make -C "$out/src" -s build/dml-worker HAVE_CUDA=no >"$out/build.log" 2>&1 || {
		cat "$out/build.log" >&2; return 1; }
	source regress/pgcluster.sh
	export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"
	trap 'pgc_stop' EXIT
	pgc_start >/dev/null
	install -m 755 "$out/src/build/dml-worker" "$PGC_DIR/base-dml-worker"
	mkdir -m 777 "$PGC_DIR/cpu"
	for who in base this; do
		real=$PGC_DIR/base-dml-worker
		[ $who = this ] && real=$(pg_config --bindir)/dml-worker
		printf '#!/bin/sh\nexec /usr/bin/time -a -o %s -f "%%U %%S" %s "$@"\n' "$PGC_DIR/cpu/$who" "$real" >"$PGC_DIR/$who-wrapped"
		chmod 755 "$PGC_DIR/$who-wrapped"
	done
	pgc_psql -q -c 'CREATE EXTENSION dml'
}

worker_ab_train() {
	: >"$PGC_DIR/cpu/$1"
	chmod 666 "$PGC_DIR/cpu/$1"	# the server's OS user appends to it
	WAB_T0=$(date +%s.%N)
	WAB_ID=$(pgc_psql -X -q -t -A -v ON_ERROR_STOP=1 -c "SET dml.worker_path = '$PGC_DIR/$1-wrapped'" \
		-c "$2" | tail -n 1)
	WAB_T1=$(date +%s.%N)
	WAB_CPU=$(awk '{s += $1 + $2} END {print s}' "$PGC_DIR/cpu/$1")
}

# worker_ab_synth: loads synth_1m (bench/sql/synth.sql, 1,000,000 rows) into
# the cluster and analyzes it; WAB_FEATS is its 20 features as an array literal
worker_ab_synth() {
	psql -X -q -v ON_ERROR_STOP=1 -v rows=1000000 -f bench/sql/synth.sql >/dev/null
	pgc_psql -q -c 'VACUUM ANALYZE' >/dev/null
	WAB_FEATS="'{c1,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17,c18,c19,c20}'"
}

# worker_ab_ratios OUT COL:NAME...: for each column COL of the runs' lines in
# OUT/base and OUT/this, the ratio of the medians (baseline / this) and
# every run's figure
worker_ab_ratios() {
	local out=$1 f c
	shift
	for f in "$@"; do
		c=${f%:*}
		printf '%s baseline/this %.3fx; runs: %s | %s\n' "${f#*:}" \
			"$(awk "BEGIN {print $(cut -d' ' -f"$c" "$out/base" | median) / $(cut -d' ' -f"$c" "$out/this" | median)}")" \
			"$(cut -d' ' -f"$c" "$out/base" | tr '\n' ' ')" "$(cut -d' ' -f"$c" "$out/this" | tr '\n' ' ')"
	done
}

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

worker_ab_cpu() {
	echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') (family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), model $(grep -m1 '^model\s' /proc/cpuinfo | cut -d: -f2 | tr -d ' '))"
}
