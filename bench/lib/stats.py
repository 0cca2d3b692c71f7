"""Medians and the way runs are shown in a table."""
import statistics


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt_runs(xs, f="{:,.0f}"):
    return " / ".join(f.format(x) if x is not None else "n/a" for x in xs)


def delta(a, b, k):
    """How much the stat K grew from the stats A to B (a missing or empty stat is 0)."""
    return (b.get(k, 0) or 0) - (a.get(k, 0) or 0)
