"""The one rule that sums a metric up over images, used by the lines, `--json`, metrics.csv/json, the viewer's
means and the report (`core.metrics.catalogue.means` applies it to every metric).

An image's value of a metric is a number, infinite (HD95 when only one mask has the class: no contour to
measure to) or n/a (the metric does not apply: a class in neither mask; not computed). Following Metrics
Reloaded (Maier-Hein et al. 2024):
- n/a values are left out and counted (`na`), never scored as 1.0 or 0;
- infinite values are counted (`infinite`) and left out of the plain `mean` and `median`, which are over the
  finite values; beside them, the worst-case aggregate substitutes the metric's worst value for each infinite one
  (for HD95: the diagonal of the image's scored ROI, the largest distance two of its pixels can have) and gives
  that `worst_mean` and `worst_median`, stating what was substituted;
- counts (defects found, missed, ...) are summed (`total`), never averaged;
- the 95 % confidence interval of the plain mean, when asked for, is scipy's percentile bootstrap
  (`scipy.stats.bootstrap`, 9,999 resamples, seed 0), so the same values always give the same interval.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: The bootstrap's resamples and seed (the interval is reproducible).
RESAMPLES = 9999
SEED = 0
CONFIDENCE = 0.95
#: Bytes the bootstrap's resamples may take at once (an index and a value, 16 bytes, per value and resample): all
#: 9,999 resamples of 100,000 values would take 16 GB, so they are drawn in batches. The interval is the same: the
#: generator hands out its numbers in the same order however the draws are split.
RESAMPLE_BYTES = 64 << 20


@dataclass(frozen=True)
class Aggregate:
    """One metric over the images that have it (see the module docstring)."""

    images: int  # images scored (with a mask, the metric computed)
    na: int  # of them, n/a
    infinite: int  # of them, infinite
    mean: float | None = None  # over the finite values (None: there is none)
    median: float | None = None
    worst_mean: float | None = None  # infinite values replaced by `substitute` (None: no substitute defined)
    worst_median: float | None = None
    substitute: str = ""  # what replaced an infinite value, in words
    total: int | None = None  # counts: their sum (mean and median are then None)
    ci: tuple[float, float] | None = None  # 95 % bootstrap interval of `mean`, when asked for and defined

    @property
    def finite(self) -> int:
        return self.images - self.na - self.infinite

    def as_dict(self) -> dict[str, object]:
        """The aggregate as metrics.json and `--json` hold it (under `summary.aggregates.<metric>`)."""
        if self.total is not None:
            return {"images": self.images, "total": self.total}
        document: dict[str, object] = {"images": self.images, "finite": self.finite, "na": self.na,
                                       "infinite": self.infinite, "mean": self.mean, "median": self.median}
        if self.ci is not None:
            document["mean_ci95"] = list(self.ci)
        if self.substitute:
            document["worst_case"] = {"substitute": self.substitute, "mean": self.worst_mean,
                                      "median": self.worst_median}
        return document


def aggregate(values: Sequence[float | None], worst: Sequence[float] | None = None, substitute: str = "",
              count: bool = False, confidence: bool = False) -> Aggregate:
    """The aggregate of one value per image (None or NaN: n/a). `worst`: each image's worst value, substituted
    for an infinite one (`substitute` says what it is); `count`: the values are counts, summed; `confidence`:
    add the bootstrap interval of the mean."""
    present = [(float(v), w) for v, w in zip(values, worst or [math.nan] * len(values))
               if v is not None and not math.isnan(v)]
    na = len(values) - len(present)
    if count:
        return Aggregate(len(values), na, 0, total=sum(int(v) for v, _ in present))
    finite = [v for v, _ in present if math.isfinite(v)]
    infinite = len(present) - len(finite)
    worst_values = [w if math.isinf(v) else v for v, w in present] if worst is not None else None
    return Aggregate(len(values), na, infinite, _mean(finite), _median(finite),
                     _mean(worst_values) if worst_values is not None else None,
                     _median(worst_values) if worst_values is not None else None,
                     substitute if worst is not None else "", None,
                     bootstrap_interval(finite) if confidence else None)


def _mean(values: Sequence[float] | None) -> float | None:
    """The correctly rounded sum over the count: a running summary that adds and removes values gives the same
    (`core.metrics.running`), whatever the order."""
    return math.fsum(values) / len(values) if values else None


def _median(values: Sequence[float] | None) -> float | None:
    return float(np.median(values)) if values else None


def bootstrap_interval(values: Sequence[float]) -> tuple[float, float] | None:
    """The 95 % percentile-bootstrap interval of the mean of `values` (None under two values; a single value
    repeated gives that value twice)."""
    if len(values) < 2:
        return None
    data = np.asarray(values, np.float64)
    if np.all(data == data[0]):
        return float(data[0]), float(data[0])
    from scipy.stats import bootstrap  # scipy.stats takes ~0.3 s to import: only when an interval is asked for

    seed = {"rng" if "rng" in inspect.signature(bootstrap).parameters else "random_state": np.random.default_rng(SEED)}
    batch = min(RESAMPLES, max(1, RESAMPLE_BYTES // (16 * data.size)))
    result = bootstrap((data,), np.mean, confidence_level=CONFIDENCE, n_resamples=RESAMPLES, method="percentile",
                       vectorized=True, batch=batch, **seed)  # type: ignore[arg-type]
    return float(result.confidence_interval.low), float(result.confidence_interval.high)
