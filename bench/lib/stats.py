"""Medians and the way runs are shown in a table."""
import statistics


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def med_of(key, xs):
    """The median of x[key] over the results xs."""
    return median([x[key] for x in xs])


def fmt_runs(xs, f="{:,.0f}"):
    return " / ".join(f.format(x) if x is not None else "n/a" for x in xs)


def delta(a, b, k):
    """How much the stat K grew from the stats A to B (a missing or empty stat is 0)."""
    return (b.get(k, 0) or 0) - (a.get(k, 0) or 0)


def alternate(rounds, variants, one, swap=True):
    """ROUNDS rounds of ONE(variant, round) for each variant, the order reversed
    every other round if SWAP (paired runs, neither side always first);
    returns {variant: [results in round order]}."""
    out = {v: [] for v in variants}
    for i in range(rounds):
        for v in variants[::-1] if swap and i % 2 else variants:
            out[v].append(one(v, i))
    return out


def paired(a, b, f=lambda x: x):
    """Per-round ratios f(b) / f(a) of two variants' paired results, and their median."""
    rs = [f(y) / f(x) if f(x) else float("nan") for x, y in zip(a, b)]
    return median(rs), rs
