#!/usr/bin/env python3
"""Compares two `make bench` result files row by row.

    python3 scripts/compare-bench.py build/bench/results.json \
        build-notrace/bench/results.json

For `make bench-trace-cost`: the first file is the library with its trace
points compiled in (and not observed), the second one built with
-DSQ_NO_TRACE. Prints each SwiftQueues row's median ns/op in both and
their ratio, and flags a row more than 2% slower. Rows that record a trace
("tracing on: ...") are left out: the second build cannot record.
Wall-clock figures: meaningful only from a quiet machine.
"""
import json
import sys


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        traced = {s["name"]: s for s in json.load(f)["scenarios"]}
    with open(argv[1]) as f:
        plain = {s["name"]: s for s in json.load(f)["scenarios"]}
    print("%-34s %12s %12s %7s" % ("scenario (ours, ns/op)", "points off",
                                   "no points", "ratio"))
    over = 0
    for name, row in traced.items():
        if name.startswith("tracing on") or name not in plain:
            continue
        a, b = row["ours_median"], plain[name]["ours_median"]
        ratio = a / b if b else 0
        flag = "  > 2%" if ratio > 1.02 else ""
        over += ratio > 1.02
        print("%-34s %12.2f %12.2f %7.3f%s" % (name[:34], a, b, ratio, flag))
    print("%d row(s) more than 2%% slower with the points compiled in" % over)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
