#!/bin/bash
# load_fashion.sh: load Fashion-MNIST into fashion_train (60,000 rows) and
# fashion_test (10,000 rows) of the database the usual PG* variables name
# (PGHOST, PGPORT, PGUSER, PGDATABASE, ...), replacing existing tables.
#
#   bench/load_fashion.sh [--limit N] [DATADIR]
#
# DATADIR defaults to $FASHION_DIR or /usr/share/datasets/fashion-mnist.
# dml-load-idx is taken from $DML_LOAD_IDX, else PATH, else
# $(pg_config --bindir), else build/ of this checkout.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
limit=()
if [ "${1:-}" = "--limit" ]; then
    limit=(--limit "$2")
    shift 2
fi
datadir=${1:-${FASHION_DIR:-/usr/share/datasets/fashion-mnist}}

find_loader() {
    if [ -n "${DML_LOAD_IDX:-}" ]; then
        echo "$DML_LOAD_IDX"
    elif command -v dml-load-idx >/dev/null 2>&1; then
        command -v dml-load-idx
    elif [ -x "$(pg_config --bindir 2>/dev/null)/dml-load-idx" ]; then
        echo "$(pg_config --bindir)/dml-load-idx"
    elif [ -x "$here/build/dml-load-idx" ]; then
        echo "$here/build/dml-load-idx"
    else
        echo "load_fashion.sh: dml-load-idx not found (run make, or set DML_LOAD_IDX)" >&2
        return 1
    fi
}
loader=$(find_loader)

for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz \
         t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
    if [ ! -r "$datadir/$f" ]; then
        echo "load_fashion.sh: cannot read $datadir/$f" >&2
        exit 1
    fi
done

"$loader" --replace "${limit[@]}" "$datadir/train-images-idx3-ubyte.gz" \
    "$datadir/train-labels-idx1-ubyte.gz" fashion_train
"$loader" --replace "${limit[@]}" "$datadir/t10k-images-idx3-ubyte.gz" \
    "$datadir/t10k-labels-idx1-ubyte.gz" fashion_test
