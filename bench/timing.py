"""What every benchmark here shares: variants timed interleaved (A B A B ...) and a median with its spread."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def interleaved(variants: dict[str, Callable[[], object]], rounds: int,
                pause: float = 0.0) -> dict[str, list[float]]:
    """Seconds per call of each variant, run A B A B ... after one warm-up call of each; `pause` seconds
    before each call let the previous variant's spinning worker threads go idle (runtimes differ)."""
    for fn in variants.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            time.sleep(pause)
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


def spread(values: list[float], scale: float = 1.0, unit: str = "s", digits: int = 2) -> str:
    """'median X unit (min, max, n)' of `values` multiplied by `scale`."""
    return (f"median {statistics.median(values) * scale:8.{digits}f} {unit} (min {min(values) * scale:.{digits}f}, "
            f"max {max(values) * scale:.{digits}f}, n={len(values)})")


def paired_ratios(numerators: list[float], denominators: list[float]) -> str:
    """'median R (min, max)' of the per-round ratios of two interleaved variants."""
    ratios = [a / b for a, b in zip(numerators, denominators)]
    return f"median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})"
