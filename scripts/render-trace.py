#!/usr/bin/env python3
"""Draws a SwiftQueues trace's timeline as a PNG, the way Perfetto UI lays
it out: a track per named thread, slices stacked by depth and labelled by
name (the queue's label for tasks), instants as ticks, and an arrow from
each submission to the run it led to.

    pip install matplotlib
    python3 scripts/render-trace.py build/trace-demo.json docs/trace-demo.png \
        [--from MS] [--to MS] [--title TEXT]

--from / --to pick a window, in milliseconds from the first event.
docs/trace-demo.png is this script's drawing of `make trace-demo`'s trace.
"""
import argparse
import json
import zlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, Rectangle  # noqa: E402

PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
           "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#86bcb6",
           "#a0cbe8", "#ffbe7d", "#8cd17d", "#f1ce63", "#d4a6c8"]
COLORS = {}


def color_for(name):
    """A colour per slice name, in order of first appearance."""
    if name not in COLORS:
        COLORS[name] = PALETTE[len(COLORS) % len(PALETTE)] \
            if len(COLORS) < len(PALETTE) else \
            PALETTE[zlib.crc32(name.encode()) % len(PALETTE)]
    return COLORS[name]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("png")
    ap.add_argument("--from", dest="start", type=float, default=None)
    ap.add_argument("--to", dest="end", type=float, default=None)
    ap.add_argument("--title", default=None)
    args = ap.parse_args()

    with open(args.trace) as f:
        events = json.load(f)["traceEvents"]
    names, order = {}, {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[e["tid"]] = e["args"]["name"]
        if e.get("ph") == "M" and e.get("name") == "thread_sort_index":
            order[e["tid"]] = e["args"]["sort_index"]
    timed = [e for e in events if "ts" in e and e.get("ph") in ("X", "i")]
    t0 = min(e["ts"] for e in timed)
    lo = args.start if args.start is not None else 0.0
    if args.end is not None:
        hi = args.end
    else:
        hi = max(e["ts"] + e.get("dur", 0) for e in timed) / 1000 - t0 / 1000
        hi += (hi - lo) * 0.03  # room for the last slices' labels

    def ms(ts):
        return (ts - t0) / 1000.0

    # Depth of each slice on its thread (sorted by start, longer first).
    slices = sorted((e for e in events if e.get("ph") == "X"),
                    key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    depth, stacks = {}, {}
    for e in slices:
        st = stacks.setdefault(e["tid"], [])
        while st and st[-1] <= e["ts"]:
            st.pop()
        depth[id(e)] = len(st)
        st.append(e["ts"] + e["dur"])
    tids = sorted({e["tid"] for e in slices if ms(e["ts"]) <= hi and
                   ms(e["ts"] + e["dur"]) >= lo} | {e["tid"] for e in timed
                   if e["ph"] == "i" and lo <= ms(e["ts"]) <= hi},
                  key=lambda t: (order.get(t, 9999), t))
    rows = {}
    y = 0.0
    for t in tids:
        d = max([depth[id(e)] for e in slices if e["tid"] == t] or [0]) + 1
        rows[t] = (y, d)
        y += d + 0.6
    height = y

    fig, ax = plt.subplots(figsize=(16, 0.42 * height + 1.6), dpi=110)
    ax.set_xlim(lo, hi)
    ax.set_ylim(height, -0.3)
    ax.set_yticks([rows[t][0] + rows[t][1] / 2 for t in tids])
    ax.set_yticklabels([names.get(t, str(t)) for t in tids], fontsize=9)
    ax.set_xlabel("milliseconds")
    for t in tids:
        ax.axhspan(rows[t][0] - 0.15, rows[t][0] + rows[t][1] - 0.25,
                   color="#f2f2f2", zorder=0)

    span = hi - lo
    where = {}
    for e in slices:
        if e["tid"] not in rows:
            continue
        x, w = ms(e["ts"]), e["dur"] / 1000.0
        if x > hi or x + w < lo:
            continue
        yy = rows[e["tid"]][0] + depth[id(e)]
        where[id(e)] = (x, w, yy)
        if w < span / 2500:
            # Zero-length slices (submissions): a small marker.
            ax.plot([x], [yy + 0.4], marker="v", markersize=4,
                    color="#555555", zorder=3)
            continue
        rect = Rectangle((x, yy), w, 0.8, facecolor=color_for(e["name"]),
                         edgecolor="white", linewidth=0.4, zorder=2)
        ax.add_patch(rect)
        if w > span / 60:
            label = e["name"]
            fn = e.get("args", {}).get("function")
            if fn:
                label += "  " + fn
            text = ax.text(x + span / 800, yy + 0.55, label, fontsize=7,
                           zorder=4, color="black")
            text.set_clip_on(True)
            text.set_clip_path(rect)

    for e in timed:
        if e["ph"] == "i" and e["tid"] in rows and lo <= ms(e["ts"]) <= hi:
            yy = rows[e["tid"]][0]
            ax.plot([ms(e["ts"])], [yy - 0.05], marker="|", markersize=6,
                    color="#888888", zorder=3)

    # Arrows: from the slice that starts a flow to the one that ends it,
    # through any step.
    flows = {}
    for e in slices:
        if "bind_id" in e and id(e) in where:
            flows.setdefault(e["bind_id"], []).append(e)
    arrows = 0
    for chain in flows.values():
        chain.sort(key=lambda e: e["ts"])
        for a, b in zip(chain, chain[1:]):
            xa, wa, ya = where[id(a)]
            xb, _, yb = where[id(b)]
            ax.add_patch(FancyArrowPatch((xa + wa, ya + 0.4), (xb, yb + 0.4),
                                         arrowstyle="-|>", mutation_scale=7,
                                         color="#222222", linewidth=0.5,
                                         alpha=0.55, zorder=5))
            arrows += 1
    ax.set_title(args.title or "%s: %d threads, %d slices, %d arrows" % (
        args.trace, len(tids), len(where), arrows), fontsize=10)
    fig.tight_layout()
    fig.savefig(args.png)
    print("%s: %d tracks, %d slices, %d arrows" % (args.png, len(tids),
                                                   len(where), arrows))


if __name__ == "__main__":
    main()
