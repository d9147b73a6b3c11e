"""Line charts as standalone SVG files, written by hand (no plotting library).

    import svg_plot
    svg_plot.line_chart(
        "busbw.svg", "all-reduce, 2 processes", "message size", "bus bandwidth (GB/s)",
        [svg_plot.Series("strata-shm", [(4096, 3.3), (1 << 20, 15.1)]),
         svg_plot.Series("memcpy", [(4096, 150.0), (1 << 20, 60.0)], dashed=True)],
        x_log=2, y_log=10, x_format=svg_plot.bytes_label)

Axes are linear or logarithmic (x_log / y_log: the base, or 0 for linear);
points with a missing or, on a log axis, non-positive value are left out, and
a series' line breaks there. Each series gets a colour from a fixed palette
(in order) unless it names its own, a marker per point, and a legend entry to
the right of the plot (the image widens to fit the longest name). A note goes
under the title.
"""
import math
from collections import namedtuple
from xml.sax.saxutils import escape

Series = namedtuple("Series", "name points dashed colour", defaults=(False, None))

# Colour-blind-safe palette (Okabe-Ito), then greys.
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
           "#F0E442", "#777777", "#AAAAAA"]
WIDTH, HEIGHT = 760, 420
LEFT, RIGHT, TOP, BOTTOM = 70, 200, 40, 55


def bytes_label(v):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if v >= scale:
            return f"{v / scale:g} {unit}"
    return f"{v:g} B"


def number_label(v):
    if v == 0:
        return "0"
    if abs(v) >= 1e6:
        return f"{v / 1e6:g}M"
    if abs(v) >= 1e3:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def _usable(v, log):
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v) and (v > 0 or not log)


def _ticks(lo, hi, log):
    """Tick values covering [lo, hi] and the (possibly widened) range."""
    if log:
        a, b = math.floor(math.log(lo, log) + 1e-9), math.ceil(math.log(hi, log) - 1e-9)
        if a == b:
            b += 1
        step = max(1, math.ceil((b - a) / 10))
        ticks = [log ** e for e in range(a, b + 1, step)]
        return ticks, log ** a, log ** b
    if lo == hi:
        lo, hi = (lo - 1, hi + 1) if lo else (0, 1)
    raw = (hi - lo) / 6
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    end = math.ceil(hi / step) * step
    n = int(round((end - start) / step))
    return [start + i * step for i in range(n + 1)], start, end


def line_chart(path, title, x_label, y_label, series, x_log=0, y_log=0, x_format=number_label,
               y_format=number_label, y_from_zero=False, note=""):
    """Writes an SVG line chart to path. series: a list of Series."""
    pts = [(x, y) for s in series for x, y in s.points if _usable(x, x_log) and _usable(y, y_log)]
    if not pts:
        raise ValueError(f"{path}: no plottable points")
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    y_lo = 0 if (y_from_zero and not y_log) else min(ys)
    x_ticks, x0, x1 = _ticks(min(xs), max(xs), x_log)
    y_ticks, y0, y1 = _ticks(y_lo, max(ys), y_log)
    if not x_log:  # keep the data's own x range on linear axes (workers 1..2, not 0..3)
        x_ticks = sorted(set(xs)) if len(set(xs)) <= 12 else x_ticks
        x0, x1 = (min(xs), max(xs)) if min(xs) < max(xs) else (min(xs) - 1, max(xs) + 1)
    # About 7 px per character of the legend's 12 px sans-serif text.
    width = WIDTH - RIGHT + max(RIGHT, 60 + 7 * max(len(s.name) for s in series))
    top = TOP + (14 if note else 0)
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - top - BOTTOM

    def fx(v):
        t = (math.log(v) - math.log(x0)) / (math.log(x1) - math.log(x0)) if x_log else (v - x0) / (x1 - x0)
        return LEFT + t * pw

    def fy(v):
        t = (math.log(v) - math.log(y0)) / (math.log(y1) - math.log(y0)) if y_log else (v - y0) / (y1 - y0)
        return top + ph - t * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{HEIGHT}" '
           f'viewBox="0 0 {width} {HEIGHT}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{LEFT + pw / 2:.0f}" y="22" text-anchor="middle" font-size="15" '
           f'font-weight="bold">{escape(title)}</text>']
    if note:
        out.append(f'<text x="{LEFT + pw / 2:.0f}" y="38" text-anchor="middle" font-size="11" '
                   f'fill="#555">{escape(note)}</text>')
    for v in y_ticks:
        y = fy(v)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + pw}" y2="{y:.1f}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(y_format(v))}</text>')
    for v in x_ticks:
        x = fx(v)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{x:.1f}" y="{top + ph + 18}" text-anchor="middle">{escape(x_format(v))}</text>')
    out.append(f'<rect x="{LEFT}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>')
    out.append(f'<text x="{LEFT + pw / 2:.0f}" y="{HEIGHT - 14}" text-anchor="middle">{escape(x_label)}</text>')
    out.append(f'<text transform="translate(16,{top + ph / 2:.0f}) rotate(-90)" '
               f'text-anchor="middle">{escape(y_label)}</text>')
    for i, s in enumerate(series):
        colour = s.colour or PALETTE[i % len(PALETTE)]
        dash = ' stroke-dasharray="6,4"' if s.dashed else ""
        runs, run = [], []
        for x, y in sorted(s.points, key=lambda p: p[0]):
            if _usable(x, x_log) and _usable(y, y_log):
                run.append((fx(x), fy(y)))
            elif run:
                runs.append(run)
                run = []
        if run:
            runs.append(run)
        for r in runs:
            if len(r) > 1:
                d = " ".join(f"{x:.1f},{y:.1f}" for x, y in r)
                out.append(f'<polyline points="{d}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
            for x, y in r:
                out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>')
        ly = top + 10 + i * 20
        lx = LEFT + pw + 14
        out.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 24}" y2="{ly}" stroke="{colour}" '
                   f'stroke-width="2"{dash}/>')
        out.append(f'<circle cx="{lx + 12}" cy="{ly}" r="3" fill="{colour}"/>')
        out.append(f'<text x="{lx + 30}" y="{ly + 4}">{escape(s.name)}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
