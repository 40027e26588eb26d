"""What a reviewer decides on a queue entry, applied to the truth: `accept` the prediction there (the entry's true
components cleared to background, its predicted components painted in its class), `remove` the truth's components
(cleared), or `keep` the truth as it is (the entry marked reviewed). For a missed defect, accepting the prediction
is removing the truth's component; for a false alarm, removing changes nothing."""

from __future__ import annotations

import numpy as np

from ..quality.defects import components
from ..roi import Roi
from .queue import ReviewEntry

DECISIONS = ("accept", "remove", "keep")


def apply_decision(window: np.ndarray, prediction: np.ndarray, roi: Roi, entry: ReviewEntry, decision: str,
                   min_area: int = 1) -> Roi | None:
    """Apply `decision` on `entry` to `window` (the true classes under `roi`, ROI-sized, changed in place: a view of
    the slide's truth changes it) with `prediction` (the predicted classes under `roi`); the components are found
    again from the entry's seeds (of at least `min_area` pixels, as the queue found them). Returns the slide box
    that changed (None: nothing did)."""
    if decision not in DECISIONS:
        raise ValueError(f"unknown decision {decision!r}: expected one of {', '.join(DECISIONS)}")
    if decision == "keep":
        return None
    before = window.copy()
    window[_picked(window == entry.cls, entry.truth_seeds, roi, min_area)] = 0
    if decision == "accept":
        window[_picked(prediction == entry.cls, entry.prediction_seeds, roi, min_area)] = entry.cls
    changed = np.argwhere(window != before)
    if not changed.size:
        return None
    (y0, x0), (y1, x1) = changed.min(axis=0), changed.max(axis=0) + 1
    return Roi(int(x0) + roi.x0, int(y0) + roi.y0, int(x1) + roi.x0, int(y1) + roi.y0)


def _picked(mask: np.ndarray, seeds: tuple[tuple[int, int], ...], roi: Roi, min_area: int) -> np.ndarray:
    """The components of `mask` (ROI-sized) holding any of the slide pixels `seeds`."""
    if not seeds:
        return np.zeros(mask.shape, bool)
    labels, _, _ = components(mask, min_area)
    picked = {int(labels[y - roi.y0, x - roi.x0]) for x, y in seeds} - {0}
    return np.isin(labels, sorted(picked))
