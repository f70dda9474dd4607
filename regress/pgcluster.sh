# pgcluster.sh: start and stop a private PostgreSQL cluster for tests,
# benchmarks and the demo.  Source it, then:
#
#   pgc_start [port]     initdb + start in a fresh temporary directory, run
#                        as the non-root 'postgres' OS user, listening only
#                        on a private Unix socket and 127.0.0.1:port;
#                        sets PGC_DIR PGC_PORT PGC_SOCK PGHOST PGPORT PGUSER.
#                        For the multi-host tests: PGC_ROOT (where the
#                        directory goes, /tmp by default), PGC_LISTEN (an
#                        address it also listens on), PGC_HBA_NET (the
#                        network allowed there, with scram-sha-256),
#                        PGC_WRAP (a command, run as root, that every
#                        command of pgc_as_pg runs under, such as one
#                        entering a host's namespaces) and PGC_ENV (more of
#                        the server's environment).  PGC_INITDB_OPTS: more
#                        initdb options (--data-checksums)
#   pgc_psql ...         psql as the cluster's superuser (-X -v ON_ERROR_STOP=1)
#   pgc_available EXT    true where the server has extension EXT to create
#                        (a contrib module a wheel's server may lack)
#   pgc_allow_role R...  let the server's OS user log in as roles R (the
#                        pg_ident.conf line dml's workers need on PostgreSQL
#                        15, where a map cannot say "every role"), reload,
#                        and wait until the server has the new lines
#   pgc_as_pg CMD...     run a command as the 'postgres' OS user
#   pgc_stop             fast shutdown and remove the directory
#   pgc_restart MODE     pg_ctl restart -m MODE, same environment
#   pgc_job_procs        count mpirun/dml-worker processes of this cluster
#   pgc_job_dirs         count job directories of this cluster
#
# The server runs with TMPDIR=$PGC_DIR/tmp (so job directories land there)
# and DML_TEST_CLUSTER=$PGC_DIR in its environment, which backends, mpirun
# and workers inherit: tests count only their own cluster's processes even
# when other clusters run jobs on the same machine.
#
# The server refuses to run as root, so when we are root everything that
# touches the data directory runs through runuser as 'postgres'.
#
# Authentication is the README's setup, not trust: on the socket, peer
# authentication with map "dml" (an OS user logs in as its own name, and
# the server's OS user as the roles listed with pgc_allow_role: dml's
# workers log in as the calling role); over TCP, scram-sha-256.  The user
# running the scripts may also log in as the superuser.  dml is in
# shared_preload_libraries, as the README recommends.

PG_BINDIR=${PG_BINDIR:-$(pg_config --bindir)}
PGC_OSUSER=${PGC_OSUSER:-postgres}

pgc_as_pg() {
	if [ "$(id -u)" = 0 ]; then
		local v envs=()
		for v in PGHOST PGPORT PGUSER PGDATABASE; do
			[ -n "${!v:-}" ] && envs+=("$v=${!v}")
		done
		${PGC_WRAP:-} runuser -u "$PGC_OSUSER" -- env PATH="$PATH" "${envs[@]}" "$@"
	else
		"$@"
	fi
}

# a free TCP port for a cluster: below the kernel's range of ephemeral
# ports, where no outgoing connection (a client's, MPI's) can hold it as its
# local port (one did: the server's bind failed, "Address already in use",
# on a port nothing listened on), and one nothing listens on (the suite's
# shared cluster and a test's own run at once, and clusters of other runs)
pgc_free_port() {
	local lo=32768 port

	read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || lo=32768
	[ "$lo" -gt 12000 ] 2>/dev/null || lo=40000
	while :; do
		port=$((10000 + RANDOM % (lo - 10000)))
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
	done
	echo $port
}

pgc_start() {
	local try

	PGC_PORT=${1:-$(pgc_free_port)}
	PGC_DIR=$(mktemp -d "${PGC_ROOT:-/tmp}/dml-pg.XXXXXX")
	chmod 755 "$PGC_DIR"
	[ "$(id -u)" = 0 ] && chown "$PGC_OSUSER" "$PGC_DIR"
	PGC_SOCK=$PGC_DIR
	pgc_as_pg "$PG_BINDIR/initdb" -D "$PGC_DIR/data" -U postgres -A trust \
		-E UTF8 --locale=C.UTF-8 ${PGC_INITDB_OPTS:-} >"$PGC_DIR/initdb.log" 2>&1 || {
		cat "$PGC_DIR/initdb.log"; return 1; }
	cat >>"$PGC_DIR/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1${PGC_LISTEN:+,$PGC_LISTEN}'
port = $PGC_PORT
unix_socket_directories = '$PGC_SOCK'
max_connections = 64
shared_buffers = 512MB
fsync = off
synchronous_commit = off
full_page_writes = off
max_parallel_workers_per_gather = 2
log_min_messages = warning
shared_preload_libraries = 'dml'
EOF
	cat >"$PGC_DIR/data/pg_hba.conf" <<EOF
local   all   all                  peer map=dml
host    all   all   127.0.0.1/32   scram-sha-256
host    all   all   ::1/128        scram-sha-256
EOF
	[ -n "${PGC_HBA_NET:-}" ] &&
		echo "host    all   all   $PGC_HBA_NET   scram-sha-256" >>"$PGC_DIR/data/pg_hba.conf"
	cat >"$PGC_DIR/data/pg_ident.conf" <<EOF
dml   /^(.*)\$   \\1
dml   $(id -un)   postgres
EOF
	mkdir -p "$PGC_DIR/tmp"
	[ "$(id -u)" = 0 ] && chown "$PGC_OSUSER" "$PGC_DIR/tmp"
	# another port where the chosen one was taken between the check and the
	# bind (a port of our choosing only; a few tries)
	for try in 1 2 3 4 5; do
		pgc_as_pg env TMPDIR="$PGC_DIR/tmp" DML_TEST_CLUSTER="$PGC_DIR" ${PGC_ENV:-} \
			"$PG_BINDIR/pg_ctl" -D "$PGC_DIR/data" -l "$PGC_DIR/server.log" \
			-w -t 60 start >/dev/null 2>"$PGC_DIR/pg_ctl.err" && break
		if [ -z "${1:-}" ] && [ $try -lt 5 ] && grep -q "could not bind\|could not create any TCP/IP sockets" "$PGC_DIR/server.log"; then
			PGC_PORT=$(pgc_free_port)
			echo "port = $PGC_PORT" | pgc_as_pg tee -a "$PGC_DIR/data/postgresql.conf" >/dev/null
			continue
		fi
		cat "$PGC_DIR/pg_ctl.err" "$PGC_DIR/server.log"
		return 1
	done
	export PGHOST=$PGC_SOCK PGPORT=$PGC_PORT PGUSER=postgres PGDATABASE=postgres
	export PGC_DIR PGC_PORT PGC_SOCK
}

pgc_psql() {
	pgc_as_pg psql -X -q -v ON_ERROR_STOP=1 "$@"
}

pgc_available() {
	[ "$(pgc_psql -At -c "SELECT count(*) FROM pg_available_extensions WHERE name = '$1'")" = 1 ]
}

pgc_allow_role() {
	local r i
	for r in "$@" dml_ident_probe; do
		echo "dml   $PGC_OSUSER   $r" | pgc_as_pg tee -a "$PGC_DIR/data/pg_ident.conf" >/dev/null
	done
	pgc_psql -d postgres -c "SET client_min_messages = warning" -c "DROP ROLE IF EXISTS dml_ident_probe" -c "CREATE ROLE dml_ident_probe LOGIN" \
		-c "SELECT pg_reload_conf()" >/dev/null || return 1
	for i in $(seq 1 200); do
		pgc_as_pg psql -X -q -U dml_ident_probe -d postgres -c "SELECT 1" >/dev/null 2>&1 && break
		sleep 0.05
	done
	pgc_psql -d postgres -c "DROP ROLE dml_ident_probe" >/dev/null
}

pgc_stop() {
	[ -n "$PGC_DIR" ] || return 0
	pgc_as_pg "$PG_BINDIR/pg_ctl" -D "$PGC_DIR/data" -m fast -w stop >/dev/null 2>&1
	rm -rf "$PGC_DIR"
	PGC_DIR=
}

pgc_job_procs() {
	local n=0 p
	for p in $(pgrep -f 'dml-worker|mpirun'); do
		# a child mpirun forked that has not yet become its rank is not one
		# more process: counting it made the count fall back when it execs
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = mpirun ] &&
			[ "$(cat "/proc/$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)/comm" 2>/dev/null)" = mpirun ] &&
			continue
		# grep reads the NUL-separated entries itself: no pipe.  With
		# tr | grep -q under pipefail, grep's exit at the match killed tr by
		# SIGPIPE whenever the environment was longer than tr's 4 KB of
		# output (a rank's is about 4 KB), and a live process went uncounted
		if grep -qzxF "DML_TEST_CLUSTER=$PGC_DIR" "/proc/$p/environ" 2>/dev/null; then
			# a zombie has already exited
			[ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" = Z ] || n=$((n + 1))
		fi
	done
	echo $n
}

pgc_job_dirs() {
	ls -d "$PGC_DIR"/tmp/dml-job-* 2>/dev/null | wc -l
}

# pgc_restart MODE: pg_ctl restart -m MODE (fast, immediate) with the
# environment pgc_start gave the server
pgc_restart() {
	pgc_as_pg env TMPDIR="$PGC_DIR/tmp" DML_TEST_CLUSTER="$PGC_DIR" \
		"$PG_BINDIR/pg_ctl" -D "$PGC_DIR/data" -l "$PGC_DIR/server.log" \
		-m "$1" -w -t 60 restart >/dev/null
}
