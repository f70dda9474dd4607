#!/bin/bash
# run.sh: fuzz the model blob parser (kernels/format.c) and dml_import's
# readers (extension/onnx.c, extension/package.c), or replay what the fuzzer
# found.
#
#   bash regress/fuzz/run.sh [SECONDS]   fuzz for SECONDS in all (default 60),
#                                        split between the targets
#   bash regress/fuzz/run.sh replay      the regression test: every file of
#                                        corpus/ and crashes/ through the
#                                        same checks, built with gcc
#   bash regress/fuzz/run.sh corpus      rewrite the seed corpus
#
# Targets (clang -fsanitize=fuzzer,address,undefined):
#   fuzz_format       raw bytes into dml_model_parse
#   fuzz_format_body  the same checks, with a custom mutator that repairs
#                     the length and CRC so mutants reach the shape checks
#                     and dml_model_predict
#   fuzz_import       raw bytes into the ONNX reader and the package reader
#                     (seeds: corpus_import/, exports and hostile files)
# Each runs on a copy of its corpus in a temporary directory.  An input that
# crashes, leaks, times out or runs out of memory is copied into crashes/
# as TARGET-KIND-SHA1 and the script exits 1; replay then fails on it until
# the parser is fixed.  With FUZZ_SUMMARY=FILE set, a tab-separated line
# per target (target, seconds, executions, exec_per_sec, cov, corpus,
# crashes) is written there under a header line.
#
# Environment: CLANG (default clang), CC for replay (default gcc),
# FUZZ_MAX_LEN (bytes, default 1048576), FUZZ_KEEP=1 keeps the temporary
# directory.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
FUZZ=regress/fuzz
BUILD=build/fuzz
KERNELS="kernels/format.c kernels/net.c kernels/common.c kernels/layers.c kernels/losses.c kernels/optim.c kernels/solve.c kernels/metrics.c kernels/lsq.c kernels/robust.c kernels/stats.c"
LIBS="-lopenblas -lm"
TARGETS="fuzz_format fuzz_format_body fuzz_import"
# what fuzz_import links besides the kernels: the readers, protobuf-c's
# messages of onnx.proto (generated as the Makefile does)
IMPORT_SRCS="extension/onnx.c extension/package.c build/proto/onnx.pb-c.c"
IMPORT_FLAGS="-Iextension -Ibuild/proto"
IMPORT_LIBS="-lprotobuf-c"
ONNX_PROTO=${ONNX_PROTO:-/usr/include/onnx/onnx.proto}

gen_proto() {
	[ build/proto/onnx.pb-c.c -nt "$ONNX_PROTO" ] && return 0
	mkdir -p build/proto &&
		protoc-c --c_out=build/proto -I"$(dirname "$ONNX_PROTO")" "$ONNX_PROTO"
}
# sources, flags and seeds of one target
target_srcs() { [ "$1" = fuzz_import ] && echo "$IMPORT_SRCS $IMPORT_FLAGS $IMPORT_LIBS"; }
target_corpus() { if [ "$1" = fuzz_import ]; then echo "$FUZZ/corpus_import"; else echo "$FUZZ/corpus"; fi; }
CLANG=${CLANG:-clang}
MAX_LEN=${FUZZ_MAX_LEN:-1048576}

# one BLAS thread: the fuzzer runs one input at a time, and threads only
# add noise under the sanitizers
export OPENBLAS_NUM_THREADS=1

SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo

# apt-get install, waiting for any other apt or dpkg to let go of the lock
apt_install() {
	$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq &&
		DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 \
			install -y -qq "$@"
}

# does $CLANG link a libFuzzer program?
have_libfuzzer() {
	local d
	command -v "$CLANG" >/dev/null 2>&1 || return 1
	d=$(mktemp -d) || return 1
	printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
		'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }' >"$d/t.c"
	"$CLANG" -fsanitize=fuzzer,address,undefined "$d/t.c" -o "$d/t" >/dev/null 2>&1
	local rc=$?
	rm -rf "$d"
	return $rc
}

# clang with the libFuzzer runtime (Debian 12: clang, libclang-rt-14-dev)
ensure_clang() {
	have_libfuzzer && return 0
	echo "clang with libFuzzer missing: installing clang libclang-rt-14-dev"
	apt_install clang libclang-rt-14-dev || apt_install clang libclang-rt-dev
	have_libfuzzer || { echo "cannot build libFuzzer targets with $CLANG"; return 1; }
}

build_fuzzers() {
	local t
	mkdir -p "$BUILD" || return 1
	gen_proto || return 1
	for t in $TARGETS; do
		"$CLANG" -g -O1 -fsanitize=fuzzer,address,undefined \
			-fno-sanitize-recover=undefined -fno-omit-frame-pointer \
			-Ikernels -I$FUZZ -o "$BUILD/$t" "$FUZZ/$t.c" $KERNELS $(target_srcs $t) $LIBS || return 1
	done
}

# gcc flags that add ASan and UBSan, when this machine can run them
replay_sanitizers() {
	local d cc=${CC:-gcc} f="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
	d=$(mktemp -d) || return 0
	printf '%s\n' '#include <stdlib.h>' \
		'int main(void) { free(malloc(16)); return 0; }' >"$d/t.c"
	if $cc $f "$d/t.c" -o "$d/t" >/dev/null 2>&1 && "$d/t" >/dev/null 2>&1; then
		echo "$f"
	fi
	rm -rf "$d"
}

# ---------------------------------------------------------------------
# replay: the regression test, run by regress/run.sh
# ---------------------------------------------------------------------
if [ "${1:-}" = replay ]; then
	CC=${CC:-gcc}
	SAN=$(replay_sanitizers)
	mkdir -p "$BUILD"
	STATUS=0
	gen_proto >"$BUILD/replay-build.log" 2>&1 || STATUS=1
	RFLAGS="-std=gnu11 -g -O1 -Wall -Wextra -Wno-unused-parameter -Werror $SAN"
	# the kernels compiled once for both families, nproc at a time, layers.c
	# first: its kernels for two instruction sets take about a minute under
	# the sanitizers, the rest a few seconds together
	OBJ=$BUILD/replay-obj
	rm -rf "$OBJ"
	mkdir -p "$OBJ"
	OBJS=()
	built=1
	for src in kernels/layers.c $(printf '%s\n' $KERNELS | grep -vx kernels/layers.c); do
		obj=$OBJ/$(basename "$src" .c).o
		OBJS+=("$obj")
		$CC $RFLAGS -Ikernels -c "$src" -o "$obj" >"$obj.log" 2>&1 &
		while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n; done
	done
	wait
	for obj in "${OBJS[@]}"; do
		cat "$obj.log" >>"$BUILD/replay-build.log"
		[ -s "$obj" ] || built=0
	done
	# one replay per family of targets: its checks, its seeds, its crashes
	for family in format import; do
		if [ $family = format ]; then
			extra="" dirs=("$FUZZ/corpus")
			crashes=$(ls "$FUZZ"/crashes/* 2>/dev/null | grep -v '/fuzz_import-')
		else
			extra="-DFUZZ_TARGET_FILE=\"fuzz_import.c\" $(target_srcs fuzz_import)"
			dirs=("$FUZZ/corpus_import")
			crashes=$(ls "$FUZZ"/crashes/fuzz_import-* 2>/dev/null)
		fi
		# shellcheck disable=SC2086
		if [ "$built" != 1 ] || ! $CC $RFLAGS -Ikernels -I$FUZZ -o "$BUILD/replay-$family" \
			"$FUZZ/replay.c" "${OBJS[@]}" $extra $LIBS >>"$BUILD/replay-build.log" 2>&1; then
			cat "$BUILD/replay-build.log"
			echo "not ok - build regress/fuzz/replay.c for $family"
			STATUS=1
			continue
		fi
		echo "# replay-$family built with $CC${SAN:+ $SAN}"
		# shellcheck disable=SC2086
		"$BUILD/replay-$family" "${dirs[@]}" $crashes | grep -v '^[0-9]* passed' || true
		[ "${PIPESTATUS[0]}" = 0 ] || STATUS=1
	done
	exit $STATUS
fi

# ---------------------------------------------------------------------
# corpus: rewrite the seeds
# ---------------------------------------------------------------------
if [ "${1:-}" = corpus ]; then
	mkdir -p "$BUILD" "$FUZZ/corpus" || exit 1
	${CC:-gcc} -std=gnu11 -g -O1 -Wall -Wextra -Wno-unused-parameter -Werror \
		-Ikernels -o "$BUILD/make_corpus" "$FUZZ/make_corpus.c" $KERNELS $LIBS || exit 1
	rm -f "$FUZZ"/corpus/*
	"$BUILD/make_corpus" "$FUZZ/corpus"
	exit $?
fi

# ---------------------------------------------------------------------
# fuzz
# ---------------------------------------------------------------------
TOTAL=${1:-60}
case $TOTAL in
	'' | *[!0-9]*) echo "usage: $0 [SECONDS | replay | corpus]"; exit 2 ;;
esac
set -- $TARGETS
PER=$((TOTAL / $#))
[ "$PER" -ge 1 ] || PER=1

ensure_clang || exit 1
echo "== build ($CLANG, libFuzzer + ASan + UBSan)"
build_fuzzers || { echo "build failed"; exit 1; }

WORK=$(mktemp -d /tmp/dml-fuzz.XXXXXX) || exit 1
[ "${FUZZ_KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT
if [ -n "${FUZZ_SUMMARY:-}" ]; then
	printf 'target\tseconds\texecutions\texec_per_sec\tcov\tcorpus\tcrashes\n' >"$FUZZ_SUMMARY"
fi

ALL_EXECS=0
ALL_CRASHES=0
STATUS=0
for t in $TARGETS; do
	mkdir -p "$WORK/$t/corpus" "$WORK/$t/artifacts"
	cp "$(target_corpus $t)"/* "$WORK/$t/corpus/" 2>/dev/null
	seeds=$(ls "$WORK/$t/corpus" | wc -l)
	echo "== $t: $PER s, $seeds seeds, -max_len=$MAX_LEN"
	start=$(date +%s)
	ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1} \
	UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
		"$BUILD/$t" -max_total_time="$PER" -max_len="$MAX_LEN" -timeout=10 \
		-rss_limit_mb=2048 -print_final_stats=1 -print_pcs=0 \
		-artifact_prefix="$WORK/$t/artifacts/" "$WORK/$t/corpus" \
		>"$WORK/$t/log" 2>&1
	rc=$?
	secs=$(($(date +%s) - start))

	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$WORK/$t/log" | tail -1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$WORK/$t/log" | tail -1)
	cov=$(grep -oE 'cov: [0-9]+' "$WORK/$t/log" | tail -1 | cut -d' ' -f2)
	corp=$(ls "$WORK/$t/corpus" | wc -l)

	crashes=0
	for a in "$WORK/$t/artifacts"/*; do
		[ -f "$a" ] || continue
		case $(basename "$a") in
			crash-* | leak-* | timeout-* | oom-*) ;;
			*) continue ;;			# slow-unit-*: reported by libFuzzer, not a failure
		esac
		mkdir -p "$FUZZ/crashes"
		cp "$a" "$FUZZ/crashes/$t-$(basename "$a")"
		echo "   saved $FUZZ/crashes/$t-$(basename "$a")"
		crashes=$((crashes + 1))
	done
	if [ "$crashes" -gt 0 ] || [ "$rc" -ne 0 ]; then
		# the report: sanitizer or check message, and the top of the stack
		grep -E 'ERROR|SUMMARY|check failed|runtime error|#[0-9]+ 0x' "$WORK/$t/log" | head -40
		[ "$crashes" -gt 0 ] || crashes=1	# died without an artifact
		STATUS=1
	fi

	echo "   $t: ${secs} s, ${execs:-0} executions, ${rate:-0} exec/s, cov ${cov:-?}, corpus $seeds -> $corp, $crashes crashes"
	if [ -n "${FUZZ_SUMMARY:-}" ]; then
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$secs" "${execs:-0}" "${rate:-0}" \
			"${cov:-}" "$corp" "$crashes" >>"$FUZZ_SUMMARY"
	fi
	ALL_EXECS=$((ALL_EXECS + ${execs:-0}))
	ALL_CRASHES=$((ALL_CRASHES + crashes))
done

[ "${FUZZ_KEEP:-0}" = 1 ] && echo "kept $WORK"
echo "fuzz: $ALL_EXECS executions in $TOTAL s, $ALL_CRASHES crashes"
exit $STATUS
