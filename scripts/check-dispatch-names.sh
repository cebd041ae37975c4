#!/bin/sh
# Every public name of the toolchain's libdispatch headers has its row in
# docs/FEATURES.md ("libdispatch names") and its mapping in the
# compatibility headers (compat/dispatch/*.h), unless that row says
# "not provided". Fails listing each name that is missing.
#
#   sh scripts/check-dispatch-names.sh            check
#   sh scripts/check-dispatch-names.sh --list     print the public names
#
# The names: every DISPATCH_ / dispatch_ macro the headers define
# (clang -dM), and every DISPATCH_ / dispatch_ identifier in their
# declarations (functions, types, enumerators, globals; struct tags and
# names with a leading underscore are not public), from <dispatch/dispatch.h>
# and <dispatch/introspection.h>. The headers are found next to `swift`
# (DISPATCH_INCLUDE=<dir holding dispatch/> overrides); without them the
# check is skipped with a message.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
features="$root/docs/FEATURES.md"
swift_bin=$(command -v "${SWIFT:-swift}" 2>/dev/null || true)
if [ -z "${DISPATCH_INCLUDE:-}" ] && [ -n "$swift_bin" ]; then
	DISPATCH_INCLUDE="$(dirname "$(readlink -f "$swift_bin")")/../lib/swift"
fi
inc=${DISPATCH_INCLUDE:-}
if [ -z "$inc" ] || [ ! -f "$inc/dispatch/dispatch.h" ]; then
	echo "check-dispatch-names: libdispatch's headers not found (no swift toolchain, or" \
	     "set DISPATCH_INCLUDE): skipped"
	exit 0
fi
# clang for the block declarations (-fblocks); cc otherwise.
cc=${BLOCKS_CC:-}
if [ -z "$cc" ] && [ -n "$swift_bin" ] && [ -x "$(dirname "$(readlink -f "$swift_bin")")/clang" ]; then
	cc="$(dirname "$(readlink -f "$swift_bin")")/clang"
fi
blocks=-fblocks
if [ -z "$cc" ]; then cc=${CC:-cc}; blocks=; fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include <dispatch/dispatch.h>\n#include <dispatch/introspection.h>\n' > "$tmp/all.c"
$cc $blocks -I"$inc" -E -dM "$tmp/all.c" | awk '{ sub(/\(.*/, "", $2); print $2 }' \
	| grep -E '^(DISPATCH|dispatch)_' > "$tmp/names"
# Declarations: only the lines that come from libdispatch's headers.
$cc $blocks -I"$inc" -E "$tmp/all.c" \
	| awk '/^# [0-9]+ "/ { keep = ($3 ~ /\/dispatch\/[a-z_]+\.h"$/); next } keep' \
	| sed -E 's/struct[[:space:]]+[A-Za-z0-9_]+//g' \
	| grep -oE '\b(DISPATCH|dispatch)_[A-Za-z0-9_]+' >> "$tmp/names" || true
sort -u "$tmp/names" > "$tmp/public"
total=$(wc -l < "$tmp/public")
if [ "$total" -lt 100 ]; then
	echo "check-dispatch-names: only $total names found in $inc/dispatch: the extraction failed"
	exit 1
fi
if [ "${1:-}" = "--list" ]; then
	cat "$tmp/public"
	exit 0
fi

# The section's rows: the first column's `names`; "not provided" rows apart.
awk '/^## libdispatch names/ { on = 1; next } /^## / { on = 0 } on && /^\| `/' "$features" \
	> "$tmp/rows"
status=0
missing=0
while read -r name; do
	row=$(grep -E "^\\| [^|]*\`$name\`" "$tmp/rows" || true)
	if [ -z "$row" ]; then
		echo "docs/FEATURES.md, libdispatch names: no row for $name"
		missing=$((missing + 1))
		status=1
		continue
	fi
	case $row in *"not provided"*) continue ;; esac
	if ! grep -qE "(define|typedef[^;]*)[[:space:]]+$name\\b" "$root"/compat/dispatch/*.h; then
		echo "compat/dispatch: $name is not defined (its FEATURES row does not say \"not provided\")"
		missing=$((missing + 1))
		status=1
	fi
done < "$tmp/public"
if [ "$status" -eq 0 ]; then
	echo "check-dispatch-names: all $total public libdispatch names are in docs/FEATURES.md" \
	     "and mapped by compat/dispatch (or marked not provided)"
else
	echo "check-dispatch-names: $missing of $total names missing"
fi
exit $status
