"""Loss curves as time_to_target.py reports them and plot.py draws them (no torch: plot.py runs without it)."""

from __future__ import annotations

from itertools import accumulate


def running_mean(values: list, window: int) -> list:
    """Element i: the mean of values[i - window + 1 .. i] (fewer at the start)."""
    return [sum(values[max(0, i - window + 1):i + 1]) / (i + 1 - max(0, i - window + 1)) for i in range(len(values))]


def wall_clock(step_seconds: list) -> list:
    """Element i: the wall time at the end of step i."""
    return list(accumulate(step_seconds))
