# nshosts.sh: hosts for the multi-host tests and benchmarks, built as Linux
# namespaces on this machine.  Source it, as root:
#
#   nsh_up N          hosts dmlh1..dmlhN, each with a network namespace
#                     (eth0, 10.<a>.<b>.<i>/24), a mount namespace (a tmpfs
#                     on /tmp and /dev/shm, an /etc/hosts naming the hosts)
#                     and a UTS namespace (its hostname); sets NSH_DIR,
#                     NSH_NET (the /24), NSH_AGENT (Open MPI's launch agent)
#   nsh_addr I        host I's address
#   nsh_exec I CMD..  run CMD on host I (in all its namespaces), as root
#   nsh_link I up|down        set host I's link up or down
#   nsh_cap RATE              cap every host's link (tbf, both ways), e.g. 1gbit
#   nsh_mask I PATH           hide PATH on host I (an empty tmpfs over it)
#   nsh_down          remove every namespace, link, mount and file
#   nsh_cluster       after nsh_up: a PostgreSQL cluster (regress/pgcluster.sh)
#                     on dmlh1, listening on its address with scram-sha-256,
#                     a password file for the server's OS user on every host
#                     (its /tmp/dml-pgpass), the server's directory hidden on
#                     the other hosts, dml installed in database postgres and
#                     dml.conninfo, dml.hosts (dmlh1 slots=6, dmlh2 and
#                     dmlh3 slots=3) and dml.mpi_options set for the hosts
#
# The hosts' links are veth pairs whose other ends sit on a bridge inside a
# namespace of its own (the "switch"): no interface, address or route is
# added to the machine's own network namespace, so the private range is
# reachable only from inside the hosts and no packet can leave them.
#
# The agent (nsagent.sh) is what Open MPI runs in place of ssh to start its
# daemon on a host: it enters the host's namespaces with a copy of nsenter
# that has CAP_SYS_ADMIN and CAP_SYS_CHROOT as file capabilities, executable
# only by the server's OS user, and runs the daemon there as that user with
# a fresh environment, as a login through ssh would.  Every file of it lives
# in NSH_DIR and goes with nsh_down.

NSH_OSUSER=${NSH_OSUSER:-postgres}
NSH_N=0
NSH_DIR=
NSH_TAG=

nsh_addr() { echo "$NSH_NET.$1"; }

# a /24 of 10/8 that no interface of this machine uses
nsh_pick_net() {
	local a b
	for _ in $(seq 1 50); do
		a=$((RANDOM % 200 + 40)); b=$((RANDOM % 250 + 1))
		ip -4 addr show | grep -q "inet 10\.$a\.$b\." && continue
		ip -4 route show | grep -q "^10\.$a\.$b\." && continue
		echo "10.$a.$b"; return 0
	done
	return 1
}

nsh_up() {
	local n=$1 i h
	NSH_TAG=dmlnsh$$
	NSH_DIR=$(mktemp -d /var/tmp/dml-nsh.XXXXXX) || return 1
	NSH_NET=$(nsh_pick_net) || return 1
	chmod 755 "$NSH_DIR"
	: >"$NSH_DIR/hosts"
	echo "127.0.0.1 localhost" >>"$NSH_DIR/hosts"
	for i in $(seq 1 "$n"); do
		echo "$(nsh_addr "$i") dmlh$i" >>"$NSH_DIR/hosts"
	done
	ip netns add "$NSH_TAG-sw" || return 1
	ip -n "$NSH_TAG-sw" link add br0 type bridge || return 1
	ip -n "$NSH_TAG-sw" link set br0 up
	ip -n "$NSH_TAG-sw" link set lo up
	for i in $(seq 1 "$n"); do
		h=dmlh$i
		ip netns add "$NSH_TAG-$h" || return 1
		NSH_N=$i
		ip link add "nsh$$p$i" netns "$NSH_TAG-sw" type veth peer name eth0 netns "$NSH_TAG-$h" || return 1
		ip -n "$NSH_TAG-sw" link set "nsh$$p$i" master br0 up
		ip -n "$NSH_TAG-$h" link set lo up
		ip -n "$NSH_TAG-$h" addr add "$(nsh_addr "$i")/24" dev eth0
		ip -n "$NSH_TAG-$h" link set eth0 up
		# the host's keeper: holds its mount and UTS namespaces, which
		# nsenter -t enters (through /proc, so every host sees every other)
		nsenter --net="/run/netns/$NSH_TAG-$h" \
			unshare --mount --uts --propagation private \
			sh -ec "hostname $h
				mount -t tmpfs -o mode=1777 tmpfs /tmp
				mount -t tmpfs -o mode=1777 tmpfs /dev/shm
				mount -t sysfs sysfs /sys
				mount --bind '$NSH_DIR/hosts' /etc/hosts
				touch /tmp/.nsh-ready
				exec sleep infinity" </dev/null >/dev/null 2>&1 &
		echo $! >"$NSH_DIR/$h.pid"
		disown $!
		wait_until 10 "nsh_exec $i test -e /tmp/.nsh-ready 2>/dev/null" || return 1
	done
	# the agent and its nsenter
	cp "$(dirname "${BASH_SOURCE[0]}")/nsagent.sh" "$NSH_DIR/nsagent"
	install -m 0750 -o root -g "$(id -gn "$NSH_OSUSER")" "$(command -v nsenter)" "$NSH_DIR/nsenter"
	setcap cap_sys_admin,cap_sys_chroot,cap_sys_ptrace+ep "$NSH_DIR/nsenter" || return 1
	chmod 755 "$NSH_DIR/nsagent"
	NSH_AGENT=$NSH_DIR/nsagent
	export NSH_DIR NSH_NET NSH_AGENT NSH_TAG
}

nsh_exec() {
	local h=dmlh$1
	shift
	nsenter -t "$(cat "$NSH_DIR/$h.pid")" -n -m -u -- "$@"
}

nsh_link() {
	ip -n "$NSH_TAG-dmlh$1" link set eth0 "$2"
}

# tbf on both ends of every link: egress of the host and of the switch port
nsh_cap() {
	local i
	for i in $(seq 1 "$NSH_N"); do
		tc -n "$NSH_TAG-dmlh$i" qdisc replace dev eth0 root tbf rate "$1" burst 256kb latency 50ms || return 1
		tc -n "$NSH_TAG-sw" qdisc replace dev "nsh$$p$i" root tbf rate "$1" burst 256kb latency 50ms || return 1
	done
}

nsh_mask() {
	nsh_exec "$1" mount -t tmpfs -o mode=700 tmpfs "$2"
}

nsh_down() {
	local i h p
	[ -n "$NSH_DIR" ] || return 0
	for i in $(seq 1 "$NSH_N"); do
		h=dmlh$i
		# processes this test started on the host: its keeper, a server, ranks
		for p in $(ip netns pids "$NSH_TAG-$h" 2>/dev/null); do
			kill -9 "$p" 2>/dev/null
		done
		ip netns del "$NSH_TAG-$h" 2>/dev/null
	done
	ip netns del "$NSH_TAG-sw" 2>/dev/null
	rm -rf "$NSH_DIR"
	NSH_DIR=
	NSH_N=0
}

nsh_cluster() {
	local a1 pw i opts
	a1=$(nsh_addr 1)
	export PGC_WRAP="nsenter -t $(cat "$NSH_DIR/dmlh1.pid") -n -m -u --"
	PGC_ROOT=/var/tmp PGC_LISTEN=$a1 PGC_HBA_NET=$NSH_NET.0/24 PGC_ENV="PGPASSFILE=/tmp/dml-pgpass" \
		pgc_start || return 1
	export PGDATABASE=postgres
	pw=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
	for i in $(seq 1 "$NSH_N"); do
		# each host's own password file, in its private /tmp
		echo "$a1:$PGC_PORT:*:postgres:$pw" | nsh_exec "$i" sh -c \
			'umask 077; cat >/tmp/dml-pgpass; chown postgres /tmp/dml-pgpass' || return 1
	done
	# nothing but the network is shared: the server's files are not on the other hosts
	for i in $(seq 2 "$NSH_N"); do
		nsh_mask "$i" "$PGC_DIR" || return 1
	done
	opts="--mca plm_rsh_agent $NSH_AGENT --mca plm_rsh_no_tree_spawn 1"
	opts+=" --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0"
	# a lost link is noticed by the daemons' TCP keepalive in about 3 s
	opts+=" --mca oob_tcp_keepalive_time 1 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 2"
	# the hosts share this machine's cores: a waiting rank yields its core
	# (without it, a 32-byte MPI_Allreduce of 3 hosts took 14 ms, with it 50 us)
	opts+=" --mca mpi_yield_when_idle 1"
	pgc_psql -c "ALTER ROLE postgres PASSWORD '$pw'" -c "CREATE EXTENSION dml" \
		-c "ALTER SYSTEM SET dml.conninfo = 'host=$a1 port=$PGC_PORT'" \
		-c "ALTER SYSTEM SET dml.hosts = 'dmlh1 slots=6, dmlh2 slots=3, dmlh3 slots=3'" \
		-c "ALTER SYSTEM SET dml.mpi_options = '$opts'" \
		-c "SELECT pg_reload_conf()" >/dev/null || return 1
	wait_until 10 '[ -n "$(pgc_psql -At -c "SHOW dml.hosts")" ]'
}
