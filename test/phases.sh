#!/usr/bin/env bash
# phases.sh PHASE...
#
# Runs `make PHASE` for each phase in order (the phases of `make test`), prints the duration of
# each as it ends, and a table of all of them at the end, also when a phase fails (then it stops
# there and exits 1). $MAKE is the make to call (the Makefile passes its own).
set -uo pipefail

make="${MAKE:-make}"
table=""
total=$(date +%s)
line() { printf '%-24s %6ss %s\n' "$1" "$2" "$3"; }
summary() {
	echo
	echo "=== phase durations"
	printf '%s' "$table"
	line total $(($(date +%s) - total)) "$1"
}
for phase in "$@"; do
	echo "=== phase ${phase}"
	start=$(date +%s)
	if ! "$make" --no-print-directory "$phase"; then
		table+="$(line "$phase" $(($(date +%s) - start)) FAILED)"$'\n'
		summary "(failed in ${phase})"
		exit 1
	fi
	took=$(($(date +%s) - start))
	table+="$(line "$phase" "$took" "")"$'\n'
	echo "=== phase ${phase}: ${took}s"
done
summary ""
