#!/bin/sh
# What the trace points cost, in instructions (Valgrind's callgrind), which
# a loaded or shared machine does not blur as it does times:
#
#   sh scripts/trace-cost.sh [BUILD]
#
# builds Benchmarks/trace_cost.c against $BUILD/libswiftqueues.a (tracing
# compiled in, default build/) and against build-notrace/ (-DSQ_NO_TRACE),
# runs each under callgrind (SQ_WORKERS=1, three times, the least count
# kept), and prints per operation the
# instructions without trace points, with them while not recording, and
# while recording. `make trace-cost` runs it.
set -eu
BUILD=${1:-build}
NOTRACE=build-notrace
CC=${CC:-cc}
LIBS=$(pkg-config --libs libevent_pthreads liburcu-cds)
out=$BUILD/trace-cost
mkdir -p "$out"

command -v valgrind >/dev/null 2>&1 || {
	echo "trace-cost: needs valgrind (Debian: apt-get install valgrind)" >&2
	exit 1
}

for variant in traced notrace; do
	lib=$BUILD/libswiftqueues.a
	[ "$variant" = notrace ] && lib=$NOTRACE/libswiftqueues.a
	$CC -std=gnu11 -O2 -g -pthread -Iinclude -o "$out/trace_cost-$variant" \
		Benchmarks/trace_cost.c "$lib" $LIBS
done

# One run: prints "name<TAB>instructions" per dump.
run() {
	rm -f "$out"/callgrind.out.*
	# shellcheck disable=SC2086 # VG_EXTRA is a list of options
	SQ_WORKERS=1 valgrind --tool=callgrind ${VG_EXTRA:-} \
		--callgrind-out-file="$out/callgrind.out.%p" \
		"$@" >/dev/null 2>&1
	for f in "$out"/callgrind.out.*; do
		name=$(sed -n 's/^desc: Trigger: Client Request: //p' "$f")
		total=$(sed -n 's/^totals: //p; s/^summary: //p' "$f" | head -n 1)
		[ -n "$name" ] && printf '%s\t%s\n' "$name" "$total"
	done | sort
}

# Three runs each, keeping each operation's smallest count: what the pool's
# other threads add meanwhile (a worker spinning for work, a park) varies
# from run to run and only ever adds.
best() {
	for i in 1 2 3; do run "$@"; done |
		awk -F '\t' '!($1 in m) || $2 < m[$1] { m[$1] = $2 }
			END { for (k in m) printf "%s\t%s\n", k, m[k] }' | sort
}
# The source row again, counted only inside the merge and the handler's
# queue drain: the rest of its loop waits for the worker to park.
SOURCE_ROW="source merge + handler"
TOGGLES="--collect-atstart=no --toggle-collect=sq_source_merge_data --toggle-collect=_sq_queue_drain"
measure() {
	dest=$1
	shift
	VG_EXTRA=
	best "$@" | grep -v "^$SOURCE_ROW" > "$dest"
	VG_EXTRA=$TOGGLES
	best "$@" | grep "^$SOURCE_ROW" >> "$dest"
	VG_EXTRA=
	sort -o "$dest" "$dest"
}
measure "$out/notrace.tsv" "$out/trace_cost-notrace"
measure "$out/off.tsv" "$out/trace_cost-traced"
measure "$out/on.tsv" "$out/trace_cost-traced" --record

printf '%-36s %12s %12s %8s %12s %9s\n' "instructions per operation" \
	"no points" "not recording" "added" "recording" "added"
join -t "$(printf '\t')" "$out/notrace.tsv" "$out/off.tsv" |
	join -t "$(printf '\t')" - "$out/on.tsv" |
	awk -F '\t' '{
		n = $1; sub(/.* x/, "", n); name = $1; sub(/ x[0-9]+$/, "", name)
		a = $2 / n; b = $3 / n; c = $4 / n
		printf "%-36s %12.1f %12.1f %7.2f%% %12.1f %+9.1f\n",
			name, a, b, (b - a) / a * 100, c, c - b
	}'
