#!/bin/bash
# reliability.sh: measure how dml survives failures, cancellation and
# hostile input, and write the figures to regress/RELIABILITY.md.
#
#   bash regress/reliability.sh            (after make && make install)
#
# Starts a private cluster (regress/pgcluster.sh) and runs, against it:
#   regress/t/faults.sh         injected worker faults, recovery times
#   regress/t/server_events.sh  terminate / SIGKILL / fast shutdown (its own cluster)
#   regress/t/concurrency.sh    concurrent training, pgbench with 16 clients
#                               for PGBENCH_SECONDS (default 30)
#   regress/sql/hostile.sql     bad inputs, through pg_regress
#   regress/fuzz/run.sh         the model-format fuzzer for FUZZ_SECONDS
#                               (default 60; 0 skips it)
# then writes the tables.  Exits non-zero when any check failed; the report
# is written either way.  It does not build or install dml.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${RELIABILITY_OUT:-$ROOT/regress/RELIABILITY.md}
PGBENCH_SECONDS=${PGBENCH_SECONDS:-30}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
W=$(mktemp -d /tmp/dml-reliability.XXXXXX)
chmod 777 "$W"

source regress/pgcluster.sh
unset PGHOST PGPORT PGUSER PGDATABASE PGC_DIR
pgc_start >"$W/start.log" 2>&1 || { cat "$W/start.log"; echo "could not start PostgreSQL"; exit 1; }
trap 'pgc_stop; rm -rf "$W"' EXIT
export PGDATABASE=dml_regress
pgc_psql -d postgres -c "CREATE DATABASE dml_regress" >/dev/null
pgc_psql -c "CREATE EXTENSION dml" >/dev/null
pgc_psql -c "ALTER DATABASE dml_regress SET dml.test_hooks = on" >/dev/null

STATUS=0
echo "== faults"
t0=$(date +%s)
FAULT_RESULTS=$W/faults.tsv timeout 600 bash regress/t/faults.sh >"$W/faults.tap" 2>&1 || STATUS=1
echo "   $(grep -c '^ok' "$W/faults.tap") ok, $(grep -c '^not ok' "$W/faults.tap") not ok, $(( $(date +%s) - t0 ))s"
echo "== server events"
t0=$(date +%s)
( timeout 600 bash regress/t/server_events.sh ) >"$W/events.tap" 2>&1 || STATUS=1
echo "   $(grep -c '^ok' "$W/events.tap") ok, $(grep -c '^not ok' "$W/events.tap") not ok, $(( $(date +%s) - t0 ))s"
echo "== concurrency (pgbench ${PGBENCH_SECONDS}s)"
t0=$(date +%s)
PGBENCH_SECONDS=$PGBENCH_SECONDS CONCURRENCY_RESULTS=$W/conc.tsv \
	timeout 600 bash regress/t/concurrency.sh >"$W/conc.tap" 2>&1 || STATUS=1
echo "   $(grep -c '^ok' "$W/conc.tap") ok, $(grep -c '^not ok' "$W/conc.tap") not ok, $(( $(date +%s) - t0 ))s"
echo "== hostile input (pg_regress)"
PG_REGRESS=$(pg_config --pkglibdir)/pgxs/src/test/regress/pg_regress
mkdir -p "$W/regress" && chmod 777 "$W/regress"
"$PG_REGRESS" --use-existing --dbname=dml_regress --inputdir=regress \
	--outputdir="$W/regress" --host="$PGHOST" --port="$PGPORT" --user=postgres \
	hostile >"$W/regress.log" 2>&1
HOSTILE_RC=$?
[ $HOSTILE_RC = 0 ] || STATUS=1
grep -E '^(test|ok|not ok)' "$W/regress.log" | sed 's/^/   /'
echo "== fuzzing (${FUZZ_SECONDS}s)"
FUZZ_RC=skipped
if [ "$FUZZ_SECONDS" -gt 0 ] && [ -f regress/fuzz/run.sh ] && grep -q FUZZ_SUMMARY regress/fuzz/run.sh; then
	FUZZ_SUMMARY=$W/fuzz.tsv timeout $((FUZZ_SECONDS + 600)) bash regress/fuzz/run.sh "$FUZZ_SECONDS" \
		>"$W/fuzz.log" 2>&1
	FUZZ_RC=$?
	[ "$FUZZ_RC" = 0 ] || STATUS=1
	tail -3 "$W/fuzz.log" | sed 's/^/   /'
fi

# ---------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------
python3 - "$W" "$OUT" "$PGBENCH_SECONDS" "$FUZZ_SECONDS" "$FUZZ_RC" "$HOSTILE_RC" <<'PY'
import os, re, sys, platform, subprocess, datetime
W, OUT, PGB, FUZZS, FUZZ_RC, HOSTILE_RC = sys.argv[1:7]

def read(p):
    try:
        return open(os.path.join(W, p), encoding='utf-8', errors='replace').read()
    except OSError:
        return ''

def tap(p):
    t = read(p)
    oks = [l for l in t.splitlines() if l.startswith('ok ')]
    bad = [l for l in t.splitlines() if l.startswith('not ok ')]
    return oks, bad, t

def md(s):
    return str(s).replace('|', '\\|').replace('\n', ' ')

out = []
w = out.append

def failed_checks(bad):
    if bad:
        w('Failed checks:')
        w('')
        for l in bad:
            w('- ' + md(l))
        w('')

cpu = ''
try:
    for l in open('/proc/cpuinfo'):
        if l.startswith('model name'):
            cpu = l.split(':', 1)[1].strip(); break
except OSError:
    pass
pgv = subprocess.run(['pg_config', '--version'], capture_output=True, text=True).stdout.strip()
mpi = subprocess.run(['mpirun', '--version'], capture_output=True, text=True).stdout.splitlines()
w('# Reliability of dml: failures, cancellation, hostile input')
w('')
w('Written by `bash regress/reliability.sh` on %s UTC.' % datetime.datetime.utcnow().strftime('%Y-%m-%d %H:%M'))
w('Machine: %s, %d CPUs; %s; %s.' % (cpu or platform.machine(), os.cpu_count() or 0, pgv, mpi[0] if mpi else 'no mpirun'))
w('Each figure comes from the test scripts named in its section; rerun the script to reproduce it.')
w('')

# summary
f_ok, f_bad, _ = tap('faults.tap')
e_ok, e_bad, e_txt = tap('events.tap')
c_ok, c_bad, c_txt = tap('conc.tap')
w('## Summary')
w('')
w('| part | checks passed | checks failed |')
w('| --- | ---: | ---: |')
w('| worker faults (`regress/t/faults.sh`) | %d | %d |' % (len(f_ok), len(f_bad)))
w('| backend and server events (`regress/t/server_events.sh`) | %d | %d |' % (len(e_ok), len(e_bad)))
w('| concurrency (`regress/t/concurrency.sh`) | %d | %d |' % (len(c_ok), len(c_bad)))
w('| hostile input (`regress/sql/hostile.sql`) | %s | %s |' % (('1 suite', '0') if HOSTILE_RC == '0' else ('0', '1 suite (see below)')))
w('')

# faults
w('## Faults injected')
w('')
w('`options => \'{"fault": "RANK:EPOCH:HOW"}\'` with `dml.test_hooks = on`, 2 workers, SGD, 6 epochs on 20,000 rows, a checkpoint every epoch. '
  '"Noticed" is the time from the last epoch reported before the fault to the restart NOTICE '
  '(for `drop`, which strikes while the slice loads: from the call, less the time a job takes to start); '
  '"training again" is the time from the restart NOTICE to the next epoch reported. '
  'A `!` faults again after every restart, so the call must fail after `max_restarts` (1 here).')
w('')
w('| fault | rank | outcome | noticed (s) | training again (s) | where |')
w('| --- | ---: | --- | ---: | ---: | --- |')
rows = [l.split('\t') for l in read('faults.tsv').splitlines() if l.strip()]
for r in rows:
    r += [''] * (6 - len(r))
    w('| `%s` | %s | %s | %s | %s | %s |' % tuple(md(x) for x in r[:6]))
if not rows:
    w('| (faults.sh wrote no figures) | | | | | |')
w('')
surv = [r for r in rows if not r[0].endswith('!') and r[2] == 'survived']
if surv:
    det = [float(r[3]) for r in surv if re.match(r'^[0-9.]+$', r[3])]
    if det:
        w('%d of %d single faults survived; noticed after %.2f s at most, %.2f s on average.' %
          (len(surv), len([r for r in rows if not r[0].endswith('!')]), max(det), sum(det) / len(det)))
        w('')
failed_checks(f_bad)

# server events
w('## Backend and server events')
w('')
w('A job of 2 workers is running when the event strikes (a private cluster). The time is from the event until no `mpirun` or `dml-worker` process of that cluster is left.')
w('')
w('| event | every job process gone after | result |')
w('| --- | ---: | --- |')
for key, label in (('terminate: every job process', '`pg_terminate_backend` of the training backend'),
                   ('SIGKILL: every process of both jobs', 'SIGKILL of a training backend (a second job runs in another backend; the postmaster restarts all backends)'),
                   ('shutdown: every job process', '`pg_ctl stop -m fast` during training')):
    line = next((l for l in e_txt.splitlines() if key in l), None)
    if line is None:
        w('| %s | - | not run |' % label); continue
    m = re.search(r'\(([0-9.]+)s\)', line)
    secs = '%.2f s' % float(m.group(1)) if m else '?'
    w('| %s | %s | %s |' % (label, secs, 'ok' if line.startswith('ok') else 'FAILED'))
w('')
for l in e_txt.splitlines():
    if l.startswith('# '):
        w('Note: ' + md(l[2:]))
        w('')
failed_checks(e_bad)

# concurrency
w('## Concurrent clients')
w('')
w('| what | clients | seconds | statements or calls | errors |')
w('| --- | ---: | ---: | ---: | ---: |')
crow = [l.split('\t') for l in read('conc.tsv').splitlines() if l.strip()]
for r in crow:
    r += [''] * (5 - len(r))
    w('| %s | %s | %s | %s | %s |' % tuple(md(x) for x in r[:5]))
if not crow:
    w('| (concurrency.sh wrote no figures) | | | | |')
w('')
tps = re.search(r'\(([0-9.]+) tps\)', c_txt)
if tps:
    w('pgbench ran %s clients for %s s at %s transactions/s (each: 3 predictions, by array, by row, by class).' % (16, PGB, tps.group(1)))
    w('')
failed_checks(c_bad)

# hostile input
w('## Bad inputs tried')
w('')
res = read('regress/results/hostile.out')
w('From `regress/sql/hostile.sql` (pg_regress). Every statement below is expected to fail with the SQLSTATE shown, before any row is stored; '
  'the suite %s against `regress/expected/hostile.out`.' % ('matched' if HOSTILE_RC == '0' else '**did not match**'))
w('')
w('| # | input | SQLSTATE | error | hint or detail |')
w('| ---: | --- | --- | --- | --- |')
chunks = res.split('\n:st\n')
k = 0
accepted = []
for i in range(len(chunks) - 1):
    nxt = chunks[i + 1].splitlines()[0] if chunks[i + 1] else ''
    m = re.match(r'SQLSTATE (\w+)', nxt)
    if not m:
        continue
    code = m.group(1)
    body = chunks[i]
    # the statement: from the last line starting a statement in this chunk
    lines = body.splitlines()
    if i > 0:
        lines = lines[1:]      # the previous SQLSTATE line
    stmt_lines, rest, in_stmt = [], [], False
    for l in lines:
        if not in_stmt and re.match(r'^(SELECT|CALL|SET|UPDATE|CREATE|INSERT|RESET|GRANT|ALTER)\b', l):
            stmt_lines, rest = [l], []
            in_stmt = not l.rstrip().endswith(';')
        elif in_stmt:
            stmt_lines.append(l)
            in_stmt = not l.rstrip().endswith(';')
        elif not l.startswith('--'):
            rest.append(l)
    stmt = ' '.join(s.strip() for s in stmt_lines)
    if code == '00000':
        if re.search(r"dml_train\('hostile_(hp|d|x)'", stmt):
            accepted.append(stmt)
        continue
    err = next((l[len('ERROR:'):].strip() for l in rest if l.startswith('ERROR:')), '')
    hint = next((l.split(':', 1)[1].strip() for l in rest if l.startswith('HINT:')), '')
    det = next((l.split(':', 1)[1].strip() for l in rest if l.startswith('DETAIL:')), '')
    k += 1
    if len(stmt) > 140:
        stmt = stmt[:137] + '...'
    w('| %d | `%s` | %s | %s | %s |' % (k, md(stmt).replace('`', "'"), code, md(err), md(hint or det)))
if k == 0:
    w('| | (hostile.sql did not run) | | | |')
w('')
w('%d bad inputs rejected with a SQLSTATE.' % k)
if accepted:
    w('')
    w('Accepted although they should have been rejected:')
    w('')
    for s in accepted:
        w('- `%s`' % md(s).replace('`', "'"))
diffs = read('regress/regression.diffs')
if diffs.strip():
    w('')
    w('Differences from the expected output:')
    w('')
    w('```diff')
    w(diffs.strip()[:6000])
    w('```')
w('')

# fuzzing
w('## Fuzzing')
w('')
fz = [l.split('\t') for l in read('fuzz.tsv').splitlines()[1:] if l.strip()]
if fz:
    w('`FUZZ_SUMMARY=... bash regress/fuzz/run.sh %s` (libFuzzer with ASan and UBSan on the model blob parser).' % FUZZS)
    w('')
    w('| target | seconds | executions | executions/s | coverage | corpus | crashes |')
    w('| --- | ---: | ---: | ---: | ---: | ---: | ---: |')
    for r in fz:
        r += [''] * (7 - len(r))
        w('| %s |' % ' | '.join(md(x) for x in r[:7]))
    tot = sum(int(r[2]) for r in fz if r[2].isdigit())
    w('')
    w('%s executions in all; exit status %s.' % (format(tot, ','), FUZZ_RC))
else:
    w('| target | seconds | executions | crashes |')
    w('| --- | ---: | ---: | ---: |')
    w('| **NOT RUN** (placeholder: `regress/fuzz/run.sh` left no summary rows; exit status %s, see its log) | - | - | - |' % FUZZ_RC)
w('')
open(OUT, 'w', encoding='utf-8').write('\n'.join(out))
print('wrote', OUT)
PY
exit $STATUS
