#!/bin/sh
# Compiles every Swift and C snippet of README.md and docs/*.md.
#
#   scripts/check-snippets.sh [BUILD_DIR]      (make test-snippets)
#
# Each ```swift block becomes the main.swift of its own executable target in
# ONE scratch package (BUILD_DIR/snippets/pkg) that depends on this package
# by path, as a user's package would; the package also holds the consumer
# program in Tests/Snippets/Consumer. One `swift build`, every warning an
# error. Each ```c block is compiled with $CC against include/ and compat/
# (libdispatch's names, <dispatch/dispatch.h>) (block forms
# with $BLOCKS_CC -fblocks). A line `<!-- snippet: MODE -->` right before a
# block (a blank line between is allowed) says how to take it:
#
#   (none)          Swift: a whole main.swift; C: a whole translation unit
#   fragment        statements: wrapped in a function (Swift: `throws`;
#                   C: `void f(void)`, after #include <swiftqueues.h>)
#   async-fragment  Swift statements wrapped in an `async throws` function
#   declarations    Swift declarations only, compiled in a library file
#   main-type       a whole Swift program whose entry point is a @main
#                   type: compiled as a file other than main.swift
#   manifest        part of a Package.swift (inside `Package(...)`): checked
#                   with `swift package dump-package`, with every
#                   `.package(path: ...)` pointing at this checkout
#   skip            not compiled (say why in the text)
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
OUT=$BUILD/snippets
SWIFT=${SWIFT:-swift}
CC=${CC:-cc}
SNIPPET_CFLAGS=${SNIPPET_CFLAGS:--std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-unused-function}

rm -rf "$OUT/extract" "$OUT/pkg/Sources" "$OUT/manifests" "$OUT/c"
mkdir -p "$OUT/extract" "$OUT/pkg/Sources" "$OUT/manifests" "$OUT/c"
# A link named SwiftQueues, so that the dependency's identity is
# "swiftqueues" whatever this checkout's folder is called.
ln -sfn "$ROOT" "$OUT/SwiftQueues"

# ---- extract ----------------------------------------------------------------
# Writes OUT/extract/<n>.<swift|c> and a line "<n> <lang> <mode> <file>:<line>"
# per block to OUT/extract/index.
cd "$ROOT"
# shellcheck disable=SC2046
awk -v out="$OUT/extract" '
    /^[ \t]*<!--[ \t]*snippet:[ \t]*[a-z-]+[ \t]*-->[ \t]*$/ && !inblock && !skipping {
        pending = $0
        sub(/^[ \t]*<!--[ \t]*snippet:[ \t]*/, "", pending)
        sub(/[ \t]*-->[ \t]*$/, "", pending)
        next
    }
    /^```/ && inblock { inblock = 0; close(file); next }
    /^```/ && skipping { skipping = 0; next }
    /^```/ {
        lang = substr($0, 4)
        gsub(/[ \t]/, "", lang)
        mode = pending; pending = ""
        if (lang != "swift" && lang != "c") { skipping = 1; next }
        if (mode == "") mode = "program"
        inblock = 1
        n++
        file = out "/" n "." lang
        printf "" > file
        printf "%d %s %s %s:%d\n", n, lang, mode, FILENAME, FNR > (out "/index")
        next
    }
    inblock { print > file; next }
    skipping { next }
    /[^ \t]/ { pending = "" }
' README.md $(ls docs/*.md 2>/dev/null)
touch "$OUT/extract/index"

# ---- Swift: one scratch package ------------------------------------------
targets=""
swift_count=0
c_count=0
while read -r n lang mode where; do
    src=$OUT/extract/$n.$lang
    name=Snippet$n
    case $lang:$mode in
    swift:skip|c:skip)
        echo "snippet $where: skipped"
        continue ;;
    swift:manifest)
        dir=$OUT/manifests/$n
        mkdir -p "$dir"
        {
            echo "// swift-tools-version:6.0"
            echo "// From $where"
            echo "import PackageDescription"
            echo "let package = Package("
            echo "    name: \"ManifestSnippet$n\","
            sed "s|\.package(path: *\"[^\"]*\")|.package(path: \"$OUT/SwiftQueues\")|" "$src"
            echo ")"
        } > "$dir/Package.swift"
        "$SWIFT" package --package-path "$dir" dump-package > "$dir/dump.json" 2> "$dir/errors" || {
            echo "snippet $where (manifest) does not parse:" >&2
            cat "$dir/errors" >&2
            exit 1
        }
        continue ;;
    swift:*)
        mkdir -p "$OUT/pkg/Sources/$name"
        case $mode in
        program)
            { echo "// From $where"; cat "$src"; } > "$OUT/pkg/Sources/$name/main.swift" ;;
        fragment|async-fragment)
            effects="throws"
            [ "$mode" = async-fragment ] && effects="async throws"
            {
                echo "// From $where"
                grep '^import ' "$src" || true
                echo "import SwiftQueues"
                echo "func snippet() $effects {"
                grep -v '^import ' "$src" | sed 's/^/    /'
                echo "}"
            } > "$OUT/pkg/Sources/$name/main.swift" ;;
        declarations|main-type)
            { echo "// From $where"; cat "$src"; } > "$OUT/pkg/Sources/$name/Snippet.swift" ;;
        *)
            echo "snippet $where: unknown mode '$mode'" >&2; exit 1 ;;
        esac
        if [ "$mode" = declarations ]; then kind=target; else kind=executableTarget; fi
        targets="$targets        .$kind(name: \"$name\", dependencies: deps, swiftSettings: strict),
"
        swift_count=$((swift_count + 1))
        continue ;;
    c:*)
        out=$OUT/c/$n.c
        case $mode in
        program) { echo "#line 1 \"$where\""; cat "$src"; } > "$out" ;;
        fragment)
            {
                echo "#include <swiftqueues.h>"
                echo "void snippet_$n(void);"
                echo "void snippet_$n(void) {"
                echo "#line 1 \"$where\""
                cat "$src"
                echo "}"
            } > "$out" ;;
        *) echo "snippet $where: mode '$mode' is not for C" >&2; exit 1 ;;
        esac
        compiler=$CC
        extra=""
        if grep -q '\^[ ({]' "$src"; then
            compiler=${BLOCKS_CC:-clang}
            extra=-fblocks
        fi
        # shellcheck disable=SC2086
        $compiler $SNIPPET_CFLAGS $extra -Werror -I"$ROOT/include" -I"$ROOT/compat" -c "$out" -o "$out.o" || {
            echo "C snippet $where does not compile" >&2
            exit 1
        }
        c_count=$((c_count + 1))
        continue ;;
    esac
done < "$OUT/extract/index"

mkdir -p "$OUT/pkg/Sources/Consumer"
cp "$ROOT"/Tests/Snippets/Consumer/*.swift "$OUT/pkg/Sources/Consumer/"
cat > "$OUT/pkg/Package.swift" <<MANIFEST
// swift-tools-version:6.0
// Generated by scripts/check-snippets.sh: a user's package, depending on
// SwiftQueues by path, one target per documentation snippet.
import PackageDescription

let deps: [Target.Dependency] = [
    .product(name: "SwiftQueues", package: "SwiftQueues"),
    .product(name: "CSwiftQueues", package: "SwiftQueues"),
]
let strict: [SwiftSetting] = [.unsafeFlags(["-warnings-as-errors"])]

let package = Package(
    name: "Snippets",
    dependencies: [.package(path: "$OUT/SwiftQueues")],
    targets: [
        .executableTarget(name: "Consumer", dependencies: deps, swiftSettings: strict),
$targets    ],
    swiftLanguageModes: [.v6]
)
MANIFEST

env -u CC "$SWIFT" build --package-path "$OUT/pkg" --scratch-path "$OUT/.build" 2>&1 | tee "$OUT/build.log" | grep -E 'error|warning|Compiling Snippet|Build complete' || true
if grep -q 'Build complete' "$OUT/build.log" && ! grep -q 'warning:' "$OUT/build.log"; then
    :
else
    echo "snippets: the scratch package did not build cleanly (see $OUT/build.log)" >&2
    exit 1
fi
"$OUT/.build/debug/Consumer"
echo "snippets: $swift_count Swift, $c_count C, consumer package ok"
