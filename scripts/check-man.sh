#!/bin/sh
# Checks the C API's man pages (man/*.3):
#
#   scripts/check-man.sh            (make test-man)
#   scripts/check-man.sh --list-functions | --list-names | --install-list
#
# (a) every public sq_ function declared in include/swiftqueues/*.h (block
#     forms and function-like macros too) is named in the NAME section of a
#     page; each missing one is printed as
#     "no man page: sq_x (include/swiftqueues/y.h)";
# (b) every page renders without warnings (groff -man -ww -z).
# A name a page documents that no header declares is a warning: the page
# is then written ahead of its declaration, and `make install` leaves out
# such names (and pages that document nothing declared).
#
# --list-functions  the declared functions, "name header"
# --list-names      every name the pages document, "name page" (what
#                   `make uninstall` removes)
# --install-list    the declared ones among them (what `make install`
#                   installs: the pages, and a link page for every other name)
set -eu
cd "$(dirname "$0")/.."
CC=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The documented names: the NAME section of each page, "a, b, c \- text".
for page in man/*.3; do
	awk -v page="$(basename "$page")" '
		/^\.SH/ { inname = ($0 ~ /NAME/); next }
		inname && /\\-/ {
			sub(/[ \t]*\\-.*/, "")
			n = split($0, names, /,[ \t]*/)
			for (i = 1; i <= n; i++) if (names[i] != "") print names[i], page
		}' "$page"
done | sort -u > "$tmp/names"

if [ "${1:-}" = --list-names ]; then
	cat "$tmp/names"
	exit 0
fi

# The declared functions: preprocess each header (block forms included)
# and keep the sq_ identifiers followed by "(" outside any braces, i.e. the
# names of declarations and inline definitions, not the calls in bodies.
for header in include/swiftqueues/*.h; do
	printf '#include <swiftqueues.h>\n#include <%s>\n' "${header#include/}" |
	$CC -E -P -D__BLOCKS__ -Iinclude -x c - 2>/dev/null |
	awk -v file="$header" -v name="$(basename "$header")" '
		# Keep only what comes from this header: the preprocessor
		# marks files with line markers, gone with -P; so every
		# header is read whole and names are attributed below.
		{
			line = $0
			while (line != "") {
				if (depth == 0 && match(line, /^[A-Za-z_][A-Za-z0-9_]*[ \t]*\(/)) {
					id = substr(line, 1, RLENGTH)
					sub(/[ \t]*\($/, "", id)
					if (id ~ /^sq_/) print id
				}
				c = substr(line, 1, 1)
				if (c == "{") depth++
				else if (c == "}") depth--
				if (match(line, /^[A-Za-z_][A-Za-z0-9_]*/)) line = substr(line, RLENGTH + 1)
				else line = substr(line, 2)
			}
		}'
done > "$tmp/functions"
# Function-like macros that make up the API (type-generic calls) count too.
sed -n 's/^#define \(sq_[a-z0-9_]*\)(.*/\1/p' include/swiftqueues/*.h >> "$tmp/functions"
sort -u "$tmp/functions" > "$tmp/all"

# Attribute each name to the header that declares it (the first that
# mentions it as a declaration or definition at the start of a line).
: > "$tmp/declared"
while read -r fn; do
	header=$(grep -lE "^(SQ_EXPORT.*[^a-z_]|SQ_INLINE.*[^a-z_]|#define |)$fn[ \t]*\(" include/swiftqueues/*.h | head -n 1)
	# Macro-generated families (the atomics): the header naming the stem.
	[ -n "$header" ] || header=$(grep -l "${fn%%[0-9_]*}[a-z_]*" include/swiftqueues/*.h | head -n 1)
	stem=$(printf '%s' "$fn" | cut -d_ -f1-2)
	[ -n "$header" ] || header=$(grep -l "$stem" include/swiftqueues/*.h | head -n 1)
	printf '%s %s\n' "$fn" "$header" >> "$tmp/declared"
done < "$tmp/all"

case ${1:-} in
--list-functions) cat "$tmp/declared"; exit 0 ;;
--install-list)
	while read -r name page; do
		if grep -q "^$name " "$tmp/declared"; then echo "$name $page"; fi
	done < "$tmp/names"
	exit 0 ;;
esac

status=0
missing=0
while read -r fn header; do
	if ! grep -q "^$fn " "$tmp/names"; then
		echo "no man page: $fn ($header)"
		missing=$((missing + 1))
	fi
done < "$tmp/declared"
if [ "$missing" -gt 0 ]; then
	echo "$missing public function(s) without a man page: add each name to the NAME"
	echo "section of the page of its family in man/ (or a new page)"
	status=1
fi

while read -r name page; do
	if ! grep -q "^$name " "$tmp/declared"; then
		echo "warning: $page documents $name, which include/swiftqueues/*.h does not declare"
	fi
done < "$tmp/names"

# Rendering: groff reports unknown macros, bad escapes and the like.
for page in man/*.3; do
	if ! groff -man -ww -z "$page" > "$tmp/render" 2>&1 || [ -s "$tmp/render" ]; then
		echo "$page does not render cleanly:"
		cat "$tmp/render"
		status=1
	fi
done

pages=$(ls man/*.3 | wc -l)
functions=$(wc -l < "$tmp/declared")
if [ "$status" -eq 0 ]; then
	echo "man pages: $functions public functions on $pages pages, all render without warnings"
fi
exit $status
