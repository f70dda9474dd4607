# wait.sh: polling with a deadline, for the test scripts.  Source it:
#
#   wait_until S 'cond'  poll the shell condition every 0.05 s for at most S
#                        (whole) seconds; true as soon as it holds, false at
#                        the deadline (and says so on stderr: a wait that
#                        runs out is a test's whole deadline spent, even
#                        where the check after it passes)
#
#   eval_cond 'cond'     the condition's status, evaluated with pipefail off
#                        (tap.sh's check and wait_until use it)
#
# Why eval_cond: under pipefail a condition such as
# 'echo "$out" | grep -q "does not exist"' failed now and then where it
# held.  bash's echo writes its argument a line at a time; grep -q exits at
# the first matching line, and echo's write of the next line then dies of
# SIGPIPE, which pipefail makes the pipeline's status (2 in 3,000 such
# pipelines with a CPU-bound process beside them; t/onnx failed so in a
# suite run on a loaded machine).  A condition means "this holds", the last
# command's status.
#
# The clock is bash's own ($EPOCHREALTIME, bash 5), so a poll starts no
# process and needs no bc, which a bare machine (a lent GPU image) may lack.
eval_cond() {
	if shopt -qo pipefail; then
		set +o pipefail
		eval "$1"
		local rc=$?
		set -o pipefail
		return $rc
	fi
	eval "$1"
}

wait_until() {
	local now deadline
	now=${EPOCHREALTIME//[^0-9]/}
	deadline=$((now + $1 * 1000000))
	until eval_cond "$2"; do
		now=${EPOCHREALTIME//[^0-9]/}
		if [ "$now" -gt "$deadline" ]; then
			echo "# wait_until: gave up after $1 s: $2" >&2
			return 1
		fi
		sleep 0.05
	done
}
