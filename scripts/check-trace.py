#!/usr/bin/env python3
"""Checks a SwiftQueues trace (Chrome's JSON trace event format).

    python3 scripts/check-trace.py build/trace-demo.json [--expect-thread NAME]...

Checks that the file is JSON with a traceEvents list; that every complete
slice ("X") has ts, dur, pid and tid; that slices on a thread nest (a slice
that starts inside another ends inside it); that every thread with events
is named; and that flow arrows pair up: each bind_id has one start
(flow_out), one end (flow_in) after it, and any steps (both) between.
Prints a summary; exits 1 on the first kind of problem found.
"""
import json
import sys
from collections import defaultdict


def fail(message):
    print("check-trace: " + message, file=sys.stderr)
    sys.exit(1)


def main(argv):
    paths = [a for a in argv if not a.startswith("--")]
    expected = [argv[i + 1] for i, a in enumerate(argv)
                if a == "--expect-thread" and i + 1 < len(argv)]
    paths = [p for p in paths if p not in expected]
    if len(paths) != 1:
        fail("usage: check-trace.py TRACE.json [--expect-thread NAME]...")
    with open(paths[0]) as f:
        try:
            doc = json.load(f)
        except json.JSONDecodeError as e:
            fail("%s: not JSON: %s" % (paths[0], e))
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        fail("no traceEvents list")

    names = {}
    slices = defaultdict(list)
    flows = defaultdict(lambda: {"out": [], "in": [], "step": []})
    counts = defaultdict(int)
    for e in events:
        ph = e.get("ph")
        counts[ph] += 1
        if ph == "M" and e.get("name") == "thread_name":
            names[e["tid"]] = e["args"]["name"]
            continue
        if ph == "X":
            for key in ("ts", "dur", "pid", "tid", "name"):
                if key not in e:
                    fail("slice without %s: %s" % (key, json.dumps(e)))
            if e["dur"] < 0:
                fail("negative duration: %s" % json.dumps(e))
            slices[e["tid"]].append(e)
            if "bind_id" in e:
                fin, fout = e.get("flow_in"), e.get("flow_out")
                kind = "step" if fin and fout else "in" if fin else \
                    "out" if fout else None
                if kind is None:
                    fail("bind_id without a direction: %s" % json.dumps(e))
                flows[e["bind_id"]][kind].append(e)
        elif ph in ("i", "C"):
            for key in ("ts", "pid", "name"):
                if key not in e:
                    fail("%s event without %s: %s" % (ph, key, json.dumps(e)))

    for tid, evs in slices.items():
        if tid not in names:
            fail("thread %s has slices but no name" % tid)
        # Nesting: sorted by start (longer first on a tie), each slice
        # must end inside the innermost open one it starts in.
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        eps = 0.002  # the writer's rounding, in microseconds
        for e in evs:
            while stack and stack[-1] <= e["ts"] - eps:
                stack.pop()
            end = e["ts"] + e["dur"]
            if stack and end > stack[-1] + eps:
                fail("slice %r on thread %s (ts %.3f) ends after the slice"
                     " it starts in" % (e["name"], names[tid], e["ts"]))
            stack.append(end)

    for bind_id, f in flows.items():
        if len(f["out"]) != 1 or len(f["in"]) != 1:
            fail("flow %s has %d start(s) and %d end(s)"
                 % (bind_id, len(f["out"]), len(f["in"])))
        start, end = f["out"][0]["ts"], f["in"][0]["ts"]
        if end < start:
            fail("flow %s ends before it starts" % bind_id)
        for s in f["step"]:
            if not start <= s["ts"] <= end:
                fail("flow %s has a step outside it" % bind_id)

    for name in expected:
        if not any(n == name or n.startswith(name + " ")
                   for n in names.values()):
            fail("no thread named %r (have: %s)"
                 % (name, ", ".join(sorted(set(names.values())))))

    print("%s: %d events: %d slices on %d named threads, %d flows, "
          "%d instants, %d counter points; dropped %s"
          % (paths[0], len(events), counts["X"], len(names), len(flows),
             counts["i"], counts["C"],
             doc.get("otherData", {}).get("dropped_events", "?")))


if __name__ == "__main__":
    main(sys.argv[1:])
