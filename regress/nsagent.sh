#!/bin/sh
# nsagent: Open MPI's launch agent for the namespace hosts of nshosts.sh,
# in place of ssh (dml.mpi_options: --mca plm_rsh_agent <this file>).
#
#   nsagent HOST COMMAND...
#
# Open MPI calls it as it would call ssh: a host name, then the command
# line that starts its daemon there (shell syntax).  The agent enters the
# host's network, mount and UTS namespaces with the capable copy of nsenter
# beside it and runs the command with /bin/sh as the calling user, in a
# fresh environment, as an ssh login would: PATH, and PGPASSFILE naming the
# host's own password file (in its private /tmp).  DML_TEST_CLUSTER is the
# test suite's marker of its cluster's processes and is passed on.
dir=$(dirname "$0")
host=$1
shift
case $host in
	dmlh[0-9]*) ;;
	*) echo "nsagent: no such host: $host" >&2; exit 255 ;;
esac
exec "$dir/nsenter" -t "$(cat "$dir/$host.pid")" -n -m -u -- \
	env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/tmp PGPASSFILE=/tmp/dml-pgpass \
	${DML_TEST_CLUSTER:+DML_TEST_CLUSTER=$DML_TEST_CLUSTER} \
	/bin/sh -c "$*"
