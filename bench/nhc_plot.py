#!/usr/bin/env python3
"""Plots an NHC timeline CSV (t, data_admit, load_admit and one or more
throughput columns) as an SVG with two panels: throughput on top, the
scheduler's data_admit and load_admit below. No dependencies.

    python3 bench/run.py nhc_plot -- TIMELINE.csv OUT.svg "title" [CHANGE_AT]

The CSV comes from `tiercache-sim nhc --csv-out` (columns t, state,
data_admit, load_admit, hit, nhc_reads_per_s, classic_reads_per_s) or from
bench/nhc_change.py (t, data_admit, load_admit, nhc_reads_per_s,
classic_reads_per_s; one pair of runs on loop devices). CHANGE_AT, if
given, draws a vertical line at that time (the working-set change)."""
import csv
import sys

W, H, M = 760, 420, 60
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e"]


def polyline(xs, ys, x0, x1, y0, y1, box, color, dash=""):
    bx, by, bw, bh = box
    pts = []
    for x, y in zip(xs, ys):
        px = bx + (x - x0) / max(x1 - x0, 1e-9) * bw
        py = by + bh - (y - y0) / max(y1 - y0, 1e-9) * bh
        pts.append(f"{px:.1f},{py:.1f}")
    d = f' stroke-dasharray="{dash}"' if dash else ""
    return f'<polyline fill="none" stroke="{color}" stroke-width="1.5"{d} points="{" ".join(pts)}"/>'


def panel(box, x0, x1, y0, y1, series, ylabel):
    bx, by, bw, bh = box
    out = [f'<rect x="{bx}" y="{by}" width="{bw}" height="{bh}" fill="none" stroke="#888"/>',
           f'<text x="{bx - 8}" y="{by + 10}" text-anchor="end" font-size="11">{y1:,.0f}</text>'
           if y1 > 2 else f'<text x="{bx - 8}" y="{by + 10}" text-anchor="end" font-size="11">{y1:g}</text>',
           f'<text x="{bx - 8}" y="{by + bh}" text-anchor="end" font-size="11">{y0:g}</text>',
           f'<text x="{bx - 45}" y="{by + bh / 2}" font-size="11" transform="rotate(-90 {bx - 45} {by + bh / 2})"'
           f' text-anchor="middle">{ylabel}</text>']
    for i, (name, xs, ys, dash) in enumerate(series):
        c = COLORS[i % len(COLORS)]
        out.append(polyline(xs, ys, x0, x1, y0, y1, box, c, dash))
        out.append(f'<text x="{bx + bw - 5}" y="{by + 14 + 13 * i}" text-anchor="end" font-size="11"'
                   f' fill="{c}">{name}</text>')
    return out


def main():
    src, dst, title = sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else ""
    change = float(sys.argv[4]) if len(sys.argv) > 4 else None
    rows = list(csv.DictReader(open(src)))
    t = [float(r["t"]) for r in rows]
    tput = [k for k in rows[0] if k.endswith("_per_s")]
    top = (M + 10, 40, W - M - 30, 200)
    bottom = (M + 10, 280, W - M - 30, 100)
    ymax = max(float(r[k]) for r in rows for k in tput) * 1.1
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif">',
           f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="13">{title}</text>']
    svg += panel(top, t[0], t[-1], 0, ymax,
                 [(k.replace("_reads_per_s", " reads/s"), t, [float(r[k]) for r in rows], "")
                  for k in tput], "flash reads/s")
    svg += panel(bottom, t[0], t[-1], 0, 1.05,
                 [("load_admit", t, [float(r["load_admit"]) for r in rows], ""),
                  ("data_admit", t, [float(r["data_admit"]) for r in rows], "4 3")], "admit")
    if change is not None and t[0] <= change <= t[-1]:
        for bx, by, bw, bh in (top, bottom):
            x = bx + (change - t[0]) / max(t[-1] - t[0], 1e-9) * bw
            svg.append(f'<line x1="{x:.1f}" y1="{by}" x2="{x:.1f}" y2="{by + bh}" stroke="#555" '
                       f'stroke-dasharray="2 3"/>')
        svg.append(f'<text x="{top[0] + (change - t[0]) / max(t[-1] - t[0], 1e-9) * top[2] + 4:.1f}" '
                   f'y="{top[1] + top[3] - 6}" font-size="10" fill="#555">working set changed</text>')
    svg.append(f'<text x="{W / 2}" y="{H - 8}" text-anchor="middle" font-size="11">time (s), '
               f'{t[0]:g} to {t[-1]:g}</text>')
    svg.append("</svg>")
    open(dst, "w").write("\n".join(svg))


if __name__ == "__main__":
    main()
