"""Errors and flag parsing shared by the profiler's commands: `python -m profiler run`
(`profiler.measure`) and the ground-truth commands (`profiler.groundtruth`). Below both, so
neither imports the other's command line for them. Imports nothing of the profiler but
its limits (`profiler.options`)."""

from __future__ import annotations

from profiler import options as lim


class UsageError(ValueError):
    """A bad flag value; the message starts with the flag's name."""


def parse_ints(
    text: str,
    flag: str,
    *,
    minimum: int,
    maximum: int | None = None,
    max_values: int = lim.MAX_GRID_POINTS,
) -> list[int]:
    """'1,2,4' or '1-8' or '1-3,6' -> sorted unique ints; UsageError names the flag.

    Bounds and the number of values are checked before a range is expanded, so
    '1-100000000000' is refused at once instead of filling memory.
    """
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo_text, dash, hi_text = part.partition("-")
        try:
            lo = int(lo_text)
            hi = int(hi_text) if dash else lo
        except ValueError:
            raise UsageError(
                f"{flag}: '{part}' is not a whole number or a range like 1-8"
            ) from None
        if hi < lo:
            raise UsageError(f"{flag}: range '{part}' runs backwards")
        if lo < minimum or (maximum is not None and hi > maximum):
            bound = f"{minimum}..{maximum}" if maximum is not None else f">= {minimum}"
            raise UsageError(f"{flag}: '{part}' is outside {bound}")
        if hi - lo + 1 + len(out) > max_values:
            raise UsageError(f"{flag}: more than {max_values:,} values; give at most that many")
        out.update(range(lo, hi + 1))
    if not out:
        raise UsageError(f"{flag}: no values given")
    return sorted(out)


def parse_temperatures(text: str, flag: str = "--temperatures") -> tuple[float, ...]:
    """'0,1' -> (0.0, 1.0): finite temperatures from 0 (greedy) up to the simulator's limit
    for its `temperature` column; UsageError names the flag."""
    from simulator.inputs.scenarios import LIMITS

    most, why = LIMITS["temperature"]
    try:
        temps = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"{flag}: '{text}' is not numbers") from None
    if not temps:
        raise UsageError(f"{flag}: give numbers from 0 (greedy) to {most:g}")
    for t in temps:
        if not 0 <= t <= most:
            raise UsageError(f"{flag}: {t:g} is outside 0..{most:g} (0 = greedy; {why})")
    return temps


def check_whole(flag: str, value: int | None, low: int, high: int | None) -> None:
    """`_whole`'s check for a flag parsed as a plain int (the ground-truth commands, whose
    defaults come from their settings): UsageError naming the flag and its limits, none
    when `value` is None. Absurd values ended in an out-of-memory libgomp abort
    (--threads 99999), a traceback (--seq-len past the corpus) or a run of days."""
    if value is None:
        return
    if high is None and value < low:
        raise UsageError(f"{flag}: {value} must be >= {low}")
    if high is not None and not low <= value <= high:
        raise UsageError(f"{flag}: {value} is outside {low}..{high:,}")
