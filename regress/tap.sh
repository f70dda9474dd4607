# tap.sh: TAP output for the process tests under regress/t.  Source it:
#
#   ok "what"            print "ok N - what"
#   notok "what"         print "not ok N - what"
#   check "what" 'cond'  ok or notok as the shell condition says
#
# N counts up from 1 in the variable n.
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; }
check() { if eval "$2"; then ok "$1"; else notok "$1"; fi; }
