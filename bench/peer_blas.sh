# peer_blas.sh: sourced by the benchmarks once their cluster is started.
#
# Where Debian's OpenBLAS does not know the CPU it runs its SSE3 kernels
# ("Core: Prescott"), 4-5x slower than its AVX2 or AVX-512 ones.
# dml-worker then forces a core type (dml_blas_core_override in
# kernels/common.c), and so must every peer that runs on OpenBLAS (numpy,
# scikit-learn, Debian's PyTorch), or the peer is not at its best setting.
# This exports OPENBLAS_CORETYPE as the worker chooses it, for every command
# started after it; the server, started before, keeps OpenBLAS's own choice
# for its in-server work, as a user's server does.  A value already set is
# kept.  PEER_BLAS says what the peers run (for the reports).
peer_blas_core() {
	local core flags
	if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
		echo "$OPENBLAS_CORETYPE"
		return
	fi
	core=$(OPENBLAS_VERBOSE=2 /usr/bin/python3 -c 'import numpy' 2>&1 | sed -n 's/^Core: //p' | head -n 1)
	case "${core,,}" in
		haswell | zen | skylakex | cooperlake | sapphirerapids | "") return ;;
	esac
	flags=" $(grep -m 1 '^flags' /proc/cpuinfo) "
	if [[ $flags == *" avx512f "* && $flags == *" avx512bw "* && $flags == *" avx512vl "* && $flags == *" avx512dq "* ]]; then
		echo SkylakeX
	elif [[ $flags == *" avx2 "* && $flags == *" fma "* ]]; then
		echo Haswell
	fi
}
PEER_BLAS=$(peer_blas_core)
if [ -n "$PEER_BLAS" ]; then
	export OPENBLAS_CORETYPE=$PEER_BLAS
else
	PEER_BLAS="OpenBLAS's own choice"
fi
export PEER_BLAS
