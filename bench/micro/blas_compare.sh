#!/bin/bash
# blas_compare.sh: the sgemm micro benchmark (sgemm.c) linked against each
# single-threaded BLAS this machine can get, side by side, to choose dml's
# BLAS by measurement (bench/RESULTS.md section 4).
#
#   bench/micro/blas_compare.sh OUTDIR [SECONDS]
#
#   openblas  Debian's libopenblas0-serial (what dml links)
#   blis      Debian's libblis4-serial, unpacked under OUTDIR (apt-get
#             download + dpkg -x), not installed: installing it would make
#             it an alternative for libblas.so.3 under numpy and the peers
#   mkl       Intel MKL from PyPI (the "mkl" wheel) in a virtual environment
#             under OUTDIR: a measurement of what MKL would buy, not a
#             dependency (dml's come from Debian, where MKL is non-free)
#
# DML_BLAS_COMPARE_MKL=0 leaves MKL out (make bench-quick does: no download of
# a few hundred MB in the test suite).
# Prints sgemm.c's JSON lines with a "blas" field added; a BLAS that cannot
# be had prints one {"blas": ..., "error": ...} line instead.
set -uo pipefail
src=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: blas_compare.sh OUTDIR [SECONDS]}
secs=${2:-0.5}
mkdir -p "$out"
out=$(cd "$out" && pwd)
CBLAS_INC=/usr/include/x86_64-linux-gnu/openblas-serial
[ -e "$CBLAS_INC/cblas.h" ] || CBLAS_INC=/usr/include/x86_64-linux-gnu/openblas-pthread

tag() { sed -n "s/^{\"bench\": \"sgemm\"/{\"blas\": \"$1\", \"bench\": \"sgemm\"/p"; }

# openblas: the build dml uses
gcc -O2 -o "$out/sgemm_openblas" "$src/sgemm.c" -I"$CBLAS_INC" \
	-L/usr/lib/x86_64-linux-gnu/openblas-serial -Wl,-rpath,/usr/lib/x86_64-linux-gnu/openblas-serial \
	-l:libopenblas.so.0 &&
	OPENBLAS_NUM_THREADS=1 "$out/sgemm_openblas" -t 1 -s "$secs" | tag openblas

# the other libraries get the two OpenBLAS calls sgemm.c makes from a shim
shim() {
	cat >"$out/shim_$1.c" <<EOF
$2
void openblas_set_num_threads(int n) { $3 }
char *openblas_get_config(void) { return "$1"; }
EOF
}

# blis
blis_dir="$out/blis"
if [ ! -e "$blis_dir/usr/lib/x86_64-linux-gnu/blis-serial/libblis.so.4" ]; then
	rm -rf "$blis_dir" && mkdir -p "$blis_dir"
	(cd "$blis_dir" && apt-get download -qq libblis4-serial >/dev/null 2>&1 &&
		dpkg -x libblis4-serial_*.deb .) || true
fi
L="$blis_dir/usr/lib/x86_64-linux-gnu/blis-serial"
if [ -e "$L/libblis.so.4" ]; then
	ver=$(ls "$blis_dir"/libblis4-serial_*.deb 2>/dev/null | sed 's/.*serial_\([^_]*\)_.*/\1/')
	shim blis "" "(void) n;"
	gcc -O2 -o "$out/sgemm_blis" "$src/sgemm.c" "$out/shim_blis.c" -I"$CBLAS_INC" \
		"$L/libblis.so.4" -Wl,-rpath,"$L" &&
		BLIS_NUM_THREADS=1 "$out/sgemm_blis" -t 1 -s "$secs" | tag "blis $ver"
else
	echo '{"blas": "blis", "error": "apt-get download libblis4-serial failed"}'
fi

# mkl
venv="$out/mklenv"
if [ "${DML_BLAS_COMPARE_MKL:-1}" = 0 ]; then
	echo '{"blas": "mkl", "error": "left out (DML_BLAS_COMPARE_MKL=0)"}'
	exit 0
fi
if [ ! -x "$venv/bin/pip" ] || ! ls "$venv"/lib/libmkl_rt.so.* >/dev/null 2>&1; then
	rm -rf "$venv"
	/usr/bin/python3 -m venv "$venv" >/dev/null 2>&1 &&
		"$venv/bin/pip" install -q --disable-pip-version-check mkl >/dev/null 2>&1 || true
fi
rt=$(ls "$venv"/lib/libmkl_rt.so.* 2>/dev/null | head -1)
if [ -n "$rt" ]; then
	ver=$("$venv/bin/pip" show mkl 2>/dev/null | sed -n 's/^Version: //p')
	shim mkl "void MKL_Set_Num_Threads(int);" "MKL_Set_Num_Threads(n);"
	gcc -O2 -o "$out/sgemm_mkl" "$src/sgemm.c" "$out/shim_mkl.c" -I"$CBLAS_INC" \
		"$rt" -Wl,-rpath,"$venv/lib" &&
		MKL_NUM_THREADS=1 "$out/sgemm_mkl" -t 1 -s "$secs" | tag "mkl $ver"
else
	echo '{"blas": "mkl", "error": "pip install mkl failed"}'
fi
exit 0
