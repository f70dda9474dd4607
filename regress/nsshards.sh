# nsshards.sh: a PostgreSQL server of its own on a namespace host of
# regress/nshosts.sh, for the shard tests and benchmarks.  Source it after
# nshosts.sh (and pgcluster.sh, for PG_BINDIR), as root:
#
#   nss_start I         initdb and start a server on host I, as the
#                       server's OS user, its files in the host's private
#                       /tmp/shard, listening on the host's address and
#                       port NSS_PORT (5433), peer on its socket in /tmp,
#                       scram-sha-256 over the hosts' network; no dml
#   nss_restart I       start it again (after nss_stop)
#   nss_stop I [MODE]   pg_ctl stop -m MODE (fast)
#   nss_psql I ARGS..   psql as the server's superuser on its socket (-At)
#
# nsh_down ends the servers with every other process of the hosts.

NSS_PORT=${NSS_PORT:-5433}

nss_start() {
	local i=$1
	nsh_exec "$i" runuser -u postgres -- "$PG_BINDIR/initdb" -D /tmp/shard -U postgres \
		--auth-local=peer --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >/dev/null || return 1
	printf "listen_addresses = '%s'\nport = %s\nunix_socket_directories = '/tmp'\nfsync = off\nmax_connections = 40\n" \
		"$(nsh_addr "$i")" "$NSS_PORT" | nsh_exec "$i" sh -c 'cat >>/tmp/shard/postgresql.conf'
	echo "host all all $NSH_NET.0/24 scram-sha-256" | nsh_exec "$i" sh -c 'cat >>/tmp/shard/pg_hba.conf'
	nss_restart "$i"
}

nss_restart() {
	nsh_exec "$1" runuser -u postgres -- "$PG_BINDIR/pg_ctl" -D /tmp/shard -l /tmp/shard.log -w start >/dev/null 2>&1
}

nss_stop() {
	nsh_exec "$1" runuser -u postgres -- "$PG_BINDIR/pg_ctl" -D /tmp/shard -m "${2:-fast}" -w stop >/dev/null 2>&1
}

nss_psql() {
	local i=$1
	shift
	nsh_exec "$i" runuser -u postgres -- psql -X -q -At -v ON_ERROR_STOP=1 -h /tmp -p "$NSS_PORT" "$@"
}
