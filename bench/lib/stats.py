"""Medians and the way runs are shown in a table."""
import statistics


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt_runs(xs, f="{:,.0f}"):
    return " / ".join(f.format(x) if x is not None else "n/a" for x in xs)
