#!/bin/sh
# The Swift module's reference with DocC (make docs-swift):
#
#   scripts/swift-docs.sh SWIFT DOCC OUTPUT
#
# `swift build` builds the module (in .build, as usual), the toolchain's
# swift-symbolgraph-extract writes its symbol graph, and `docc convert`
# turns SwiftQueues' into a static site in OUTPUT (open OUTPUT/index.html
# through a web server, or `docc preview`). No plugin, no Package.swift
# change. It also counts the public symbols without a doc comment (members
# a protocol's default implementation gives, such as hash(into:), left out).
set -eu
cd "$(dirname "$0")/.."
SWIFT=${1:-swift}
DOCC=${2:-docc}
OUTPUT=${3:-build/docs/swift}

"$SWIFT" build --target SwiftQueues > /dev/null
bin=$("$SWIFT" build --show-bin-path)
triple=$(basename "$(dirname "$bin")")
graphs=$(mktemp -d)
input=$(mktemp -d)
trap 'rm -rf "$graphs" "$input"' EXIT
"$(dirname "$(command -v "$SWIFT")")"/swift-symbolgraph-extract -module-name SwiftQueues \
	-target "$triple" -I "$bin/Modules" \
	-Xcc -fmodule-map-file="$bin/CSwiftQueues.build/module.modulemap" \
	-Xcc -I -Xcc Sources/CRuntime/include \
	-minimum-access-level public -skip-synthesized-members -output-dir "$graphs"

cp "$graphs"/SwiftQueues.symbols.json "$input"/
for extension in "$graphs"/SwiftQueues@*.symbols.json; do
	[ -f "$extension" ] && cp "$extension" "$input"/
done

python3 - "$input" <<'EOF'
import glob, json, sys
total, missing = 0, []
for path in glob.glob(sys.argv[1] + "/*.symbols.json"):
    for symbol in json.load(open(path))["symbols"]:
        if symbol["accessLevel"] not in ("public", "open"):
            continue
        total += 1
        if not symbol.get("docComment"):
            missing.append(".".join(symbol["pathComponents"]))
print("Swift: %d public symbols, %d documented, %d without a doc comment"
      % (total, total - len(missing), len(missing)))
for name in sorted(missing):
    print("  undocumented: " + name)
EOF

rm -rf "$OUTPUT"
mkdir -p "$(dirname "$OUTPUT")"
"$DOCC" convert --additional-symbol-graph-dir "$input" \
	--fallback-display-name SwiftQueues \
	--fallback-bundle-identifier org.swiftqueues.SwiftQueues \
	--fallback-bundle-version 0.1.0 \
	--transform-for-static-hosting --output-path "$OUTPUT" > "$input/docc.log" 2>&1 ||
	{ cat "$input/docc.log"; exit 1; }
grep -c 'warning' "$input/docc.log" | sed 's/^/DocC warnings: /'
echo "Swift docs: $OUTPUT/index.html"
