#!/bin/bash
#
# gpu_carry.sh: what a bare GPU machine needs to run dml end to end, put
# together here, on this (Debian 12) machine, in .gpucarry/ (ignored by
# git), for a machine that can reach no package registry.
#
#   bash tools/gpu_carry.sh          # then carry .gpucarry to the GPU machine
#
# .gpucarry/ holds:
#   pg.tar.xz    PostgreSQL 15 as Debian ships it (postgresql-15,
#                postgresql-client-15 and the libraries such a machine may
#                lack: libpq5, libicu72, libldap-2.5-0, libprotobuf-c1,
#                tzdata), unpacked from the .deb files `apt-get download`
#                fetches, without LLVM bitcode, translations and manuals;
#   dml.tar.xz   this checkout built here and installed with
#                DESTDIR (dml.so, the SQL files, dml-worker, dml-worker-gpu,
#                dml-load-idx), in the same Debian layout;
#   fashion/     the Fashion-MNIST IDX files (Debian's dataset-fashion-mnist).
# regress/gpu/device_setup.sh unpacks them into /opt/dmlgpu on that machine,
# where PostgreSQL finds its files relative to its own binaries.  Open MPI,
# OpenBLAS, CUDA and NCCL are the GPU machine's own (the worker links
# libmpi.so.40, libopenblas.so.0, libcudart.so.13, libcublas.so.13 and
# libnccl.so.2 by soname).
#
# Needs: apt-get (Debian's registry), the build dependencies (.ci/setup.sh).

set -euo pipefail
cd "$(dirname "$0")/.."
here=$(pwd)
out=$here/.gpucarry
work=$(mktemp -d /tmp/dml-gpucarry.XXXXXX)
trap 'rm -rf "$work"' EXIT

pkgs=(postgresql-15 postgresql-client-15 libpq5 libicu72 libldap-2.5-0 libprotobuf-c1 tzdata)
mkdir -p "$work/debs" "$work/root" "$work/stage"
# apt's sandbox user cannot write to a root-owned mktemp directory
chmod 777 "$work/debs"
(cd "$work/debs" && apt-get download "${pkgs[@]}" dataset-fashion-mnist >/dev/null)
for p in "${pkgs[@]}"; do
	dpkg -x "$work"/debs/"${p}"_*.deb "$work/root"
done
rm -rf "$work/root/usr/lib/postgresql/15/lib/bitcode" "$work/root/usr/lib/postgresql/15/lib/llvmjit"* \
	"$work/root/usr/share/locale" "$work/root/usr/share/doc" "$work/root/usr/share/man"
rm -rf "$out"
mkdir -p "$out/fashion"
tar -C "$work/root" -cJf "$out/pg.tar.xz" .
(cd "$work/debs" && ls) > "$out/packages.txt"

# this checkout, built for the system PostgreSQL 15 (the same binaries)
make -s -j"$(nproc)" >/dev/null
make -s install DESTDIR="$work/stage" >/dev/null
tar -C "$work/stage" -cJf "$out/dml.tar.xz" .
git rev-parse --short HEAD > "$out/commit.txt"
git status --short >> "$out/commit.txt"

dpkg -x "$work"/debs/dataset-fashion-mnist_*.deb "$work/fashion"
cp "$work"/fashion/usr/share/datasets/fashion-mnist/*.gz "$out/fashion/"
du -sh "$out" "$out"/*
