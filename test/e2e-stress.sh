#!/usr/bin/env bash
# e2e-stress.sh RUNS
#
# Runs `make e2e` RUNS times with a CPU hog on every core (one busy shell loop per core, at the
# tests' own priority), to find the tests that depend on timing: a test that passes only on an
# idle machine fails CI at random (issue 33). The hogs stop when this script ends. Prints pass or
# fail per run, with the failed tests; exits 1 if any run failed. Logs: $STRESS_LOG_DIR (default
# bin/e2e-stress).
set -uo pipefail

runs="${1:-3}"
make="${MAKE:-make}"
logdir="${STRESS_LOG_DIR:-bin/e2e-stress}"
mkdir -p "$logdir"

hogs=()
stop_hogs() { kill "${hogs[@]}" 2>/dev/null; wait "${hogs[@]}" 2>/dev/null; }
trap stop_hogs EXIT
for _ in $(seq "$(nproc)"); do
	bash -c 'while :; do :; done' &
	hogs+=($!)
done
echo "e2e-stress: ${#hogs[@]} CPU hogs on $(nproc) cores; ${runs} runs of make e2e; logs in ${logdir}"

failed=0
report=""
for run in $(seq "$runs"); do
	log="${logdir}/run-${run}.log"
	start=$(date +%s)
	if "$make" --no-print-directory e2e GO_TEST_FLAGS="-count=1 -v" >"$log" 2>&1; then
		result=pass
	else
		result=FAIL
		failed=1
	fi
	took=$(($(date +%s) - start))
	tests="$(grep -E '^\s*--- FAIL' "$log" | sed 's/^ *--- FAIL: //' | tr '\n' ' ')"
	report+="run ${run}: ${result} in ${took}s ${tests}"$'\n'
	echo "e2e-stress: run ${run}: ${result} in ${took}s ${tests}"
done
echo
echo "=== e2e-stress"
printf '%s' "$report"
exit "$failed"
