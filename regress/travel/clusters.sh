# clusters.sh: more than one private cluster in a test (after pgcluster.sh).
#
#   pgc_save NAME          remember the current cluster under NAME
#   pgc_use NAME           make NAME the current cluster (PGHOST, PGPORT, ...)
#   pgc_start_standby      a streaming hot standby of the current cluster
#                          (pg_basebackup -R), started and made current
#   pgc_stop_all NAME...   stop every named cluster
pgc_save() { eval "$1=(\"\$PGC_DIR\" \"\$PGC_PORT\" \"\$PGC_SOCK\")"; }

pgc_use() {
	local -n c=$1
	PGC_DIR=${c[0]} PGC_PORT=${c[1]} PGC_SOCK=${c[2]}
	export PGC_DIR PGC_PORT PGC_SOCK PGHOST=${c[2]} PGPORT=${c[1]}
}

pgc_start_standby() {
	local port dir

	port=$(pgc_free_port)
	dir=$(mktemp -d /tmp/dml-pg.XXXXXX)
	chmod 755 "$dir"
	[ "$(id -u)" = 0 ] && chown "$PGC_OSUSER" "$dir"
	# the primary lets its server's OS user replicate over the socket
	echo "local   replication   all   peer map=dml" | pgc_as_pg tee -a "$PGC_DIR/data/pg_hba.conf" >/dev/null
	pgc_psql -d postgres -c "SELECT pg_reload_conf()" >/dev/null
	for _ in $(seq 1 200); do
		pgc_as_pg psql -X -q "replication=true" -c "IDENTIFY_SYSTEM" >/dev/null 2>&1 && break
		sleep 0.05
	done
	pgc_as_pg "$PG_BINDIR/pg_basebackup" -D "$dir/data" -R -X stream -c fast \
		>"$dir/basebackup.log" 2>&1 || { cat "$dir/basebackup.log"; return 1; }
	cat >>"$dir/data/postgresql.conf" <<CONF
port = $port
unix_socket_directories = '$dir'
hot_standby = on
CONF
	mkdir -p "$dir/tmp"
	[ "$(id -u)" = 0 ] && chown "$PGC_OSUSER" "$dir/tmp"
	pgc_as_pg env TMPDIR="$dir/tmp" DML_TEST_CLUSTER="$dir" \
		"$PG_BINDIR/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null ||
		{ cat "$dir/server.log"; return 1; }
	PGC_DIR=$dir PGC_PORT=$port PGC_SOCK=$dir
	export PGC_DIR PGC_PORT PGC_SOCK PGHOST=$dir PGPORT=$port
}

pgc_stop_all() {
	local name
	for name in "$@"; do
		[ -n "$(eval echo "\${$name[0]:-}")" ] || continue
		pgc_use "$name"
		pgc_stop
	done
}
