#!/bin/sh
# Runs each C test program, then prints the total over all of them.
passed=0
failed=0
status=0
for t in "$@"; do
	out=$("$t" 2>&1)
	rc=$?
	printf '%s\n' "$out"
	line=$(printf '%s\n' "$out" | grep -E '[0-9]+ passed, [0-9]+ failed' | tail -n 1)
	p=$(printf '%s' "$line" | sed -E 's/.* ([0-9]+) passed, ([0-9]+) failed.*/\1/')
	f=$(printf '%s' "$line" | sed -E 's/.* ([0-9]+) passed, ([0-9]+) failed.*/\2/')
	if [ -z "$line" ]; then
		echo "$t: no result line (exit $rc)"
		p=0
		f=1
	fi
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "$t: exit status $rc"
		f=1
	fi
	passed=$((passed + p))
	failed=$((failed + f))
	[ "$f" -ne 0 ] && status=1
done
echo "C tests: $passed passed, $failed failed"
exit $status
