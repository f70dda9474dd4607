# wait.sh: polling with a deadline, for the test scripts.  Source it:
#
#   wait_until S 'cond'  poll the shell condition every 0.05 s for at most S
#                        (whole) seconds; true as soon as it holds, false at
#                        the deadline (and says so on stderr: a wait that
#                        runs out is a test's whole deadline spent, even
#                        where the check after it passes)
#
# The clock is bash's own ($EPOCHREALTIME, bash 5), so a poll starts no
# process and needs no bc, which a bare machine (a lent GPU image) may lack.
wait_until() {
	local now deadline
	now=${EPOCHREALTIME//[^0-9]/}
	deadline=$((now + $1 * 1000000))
	until eval "$2"; do
		now=${EPOCHREALTIME//[^0-9]/}
		if [ "$now" -gt "$deadline" ]; then
			echo "# wait_until: gave up after $1 s: $2" >&2
			return 1
		fi
		sleep 0.05
	done
}
