#!/bin/bash
# setup.sh: install the Debian packages dml needs, when they are missing.
# Both README commands call this; it is safe to run again (it only asks
# apt-get for what is not installed).  Needs root (or sudo) when something
# is missing.
#
#   bash .ci/setup.sh           product, build and test dependencies
#   bash .ci/setup.sh --bench   also the benchmark peers (PyTorch, scikit-learn)
set -euo pipefail

PKGS=(
	make gcc libc6-dev
	postgresql-15 postgresql-server-dev-15 postgresql-client-15
	libpq-dev postgresql-15-pgtap
	openmpi-bin libopenmpi-dev
	libopenblas-dev libopenblas0-serial zlib1g-dev
	dataset-fashion-mnist
	procps util-linux psmisc bc
	python3-numpy python3-psycopg2 python3-sklearn python3-scipy python3-statsmodels
	libonnx-dev protobuf-c-compiler libprotobuf-c-dev
	python3-onnx python3-venv python3-torch
)
if [ "${1:-}" = "--bench" ]; then
	PKGS+=(python3-torch python3-pandas liblinear-tools)
fi

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
# a lock held by another apt run: wait for it rather than fail
for i in $(seq 1 120); do
	if ! fuser /var/lib/dpkg/lock-frontend >/dev/null 2>&1; then break; fi
	sleep 2
done
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian creates a default cluster with the server package; dml's scripts
# start private clusters of their own and do not need it running.
