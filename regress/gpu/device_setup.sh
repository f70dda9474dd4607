# device_setup.sh: source it on a GPU machine with no PostgreSQL of its own
# and no package registry.  Unpacks what tools/gpu_carry.sh put in
# .gpucarry/ (PostgreSQL 15 from Debian's packages, this checkout's build,
# Fashion-MNIST) into /opt/dmlgpu, makes the libraries findable
# (/etc/ld.so.conf.d/dml-gpu.conf, with the NCCL a Python wheel ships when
# the CUDA toolkit has none), creates the 'postgres' OS user, and exports
# PATH, PG_BINDIR and FASHION_DIR.  Refuses (returns 1) when a program it
# will run lacks a library.  Needs root: it is meant for a lent, throwaway
# machine, never for a developer's own.

dml_device_setup() {
	local carry=${DML_GPU_CARRY:-.gpucarry} root=/opt/dmlgpu d missing f py
	[ "$(id -u)" = 0 ] || { echo "# device_setup.sh: needs root"; return 1; }
	[ -f "$carry/pg.tar.xz" ] && [ -f "$carry/dml.tar.xz" ] || {
		echo "# device_setup.sh: no $carry/pg.tar.xz and dml.tar.xz (run tools/gpu_carry.sh here, carry .gpucarry)"
		return 1
	}
	mkdir -p "$root"
	tar -C "$root" -xJf "$carry/pg.tar.xz" || return 1
	tar -C "$root" -xJf "$carry/dml.tar.xz" || return 1
	echo "# device_setup.sh: PostgreSQL and dml $(head -n 1 "$carry/commit.txt") unpacked into $root"
	{
		echo "$root/usr/lib/x86_64-linux-gnu"
		[ -d "${CUDA_HOME:-/usr/local/cuda}/lib64" ] && echo "${CUDA_HOME:-/usr/local/cuda}/lib64"
		for py in ${PYTHON:-} python3 /usr/bin/python3; do
			d=$($py -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null) || continue
			[ -f "$d/lib/libnccl.so.2" ] && { echo "$d/lib"; break; }
		done
	} > "${DML_LDCONF:-/etc/ld.so.conf.d/dml-gpu.conf}"
	[ -n "${DML_LDCONF:-}" ] || ldconfig
	# Debian's server reads time zones from /usr/share/zoneinfo
	[ -e /usr/share/zoneinfo/UTC ] || { mkdir -p /usr/share && ln -sfn "$root/usr/share/zoneinfo" /usr/share/zoneinfo; }
	id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
	export PG_BINDIR=$root/usr/lib/postgresql/15/bin
	export PATH=$PG_BINDIR:$PATH
	export FASHION_DIR=$PWD/$carry/fashion
	chmod -R a+rX "$carry" 2>/dev/null
	missing=0
	for f in "$PG_BINDIR/postgres" "$PG_BINDIR/psql" "$PG_BINDIR/initdb" "$PG_BINDIR/dml-worker" \
		"$PG_BINDIR/dml-worker-gpu" "$PG_BINDIR/dml-load-idx" "$root/usr/lib/postgresql/15/lib/dml.so"; do
		if ldd "$f" | grep -q 'not found'; then
			echo "# device_setup.sh: $f lacks $(ldd "$f" | grep 'not found' | awk '{print $1}' | tr '\n' ' ')"
			missing=1
		fi
	done
	command -v mpirun >/dev/null || { echo "# device_setup.sh: no mpirun on PATH"; missing=1; }
	[ "$missing" = 0 ]
}
