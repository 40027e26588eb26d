"""What a reviewer decides on a queue entry, applied to the truth: `accept` the prediction there (the entry's true
components cleared to background, its predicted components painted in its class), `remove` the truth's components
(cleared), or `keep` the truth as it is (the entry marked reviewed). For a missed defect, accepting the prediction
is removing the truth's component; for a false alarm, removing changes nothing; for a wrong class, accepting
repaints the defect in the predicted class (one decision for what the queue once listed as a miss and a false
alarm)."""

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
    again from the entry's seeds (of at least `min_area` pixels), inside the entry's box, where the queue found them
    whole (so a decision costs the entry's size, not the ROI's). Returns the slide box that changed (None: nothing
    did)."""
    if decision not in DECISIONS:
        raise ValueError(f"unknown decision {decision!r}: expected one of {', '.join(DECISIONS)}")
    if decision == "keep":
        return None
    height, width = window.shape
    x0, y0 = max(entry.bbox[0] - roi.x0, 0), max(entry.bbox[1] - roi.y0, 0)
    x1, y1 = min(entry.bbox[2] - roi.x0, width), min(entry.bbox[3] - roi.y0, height)
    if x0 >= x1 or y0 >= y1:
        return None
    box = Roi(roi.x0 + x0, roi.y0 + y0, roi.x0 + x1, roi.y0 + y1)  # the entry's box in slide pixels, in the ROI
    part = window[y0:y1, x0:x1]
    before = part.copy()
    part[_picked(part == entry.cls, entry.truth_seeds, box, min_area)] = 0
    if decision == "accept":
        painted = entry.predicted_cls  # (a wrong class: the class predicted replaces the true one)
        part[_picked(prediction[y0:y1, x0:x1] == painted, entry.prediction_seeds, box, min_area)] = painted
    changed = np.argwhere(part != before)
    if not changed.size:
        return None
    (cy0, cx0), (cy1, cx1) = changed.min(axis=0), changed.max(axis=0) + 1
    return Roi(int(cx0) + box.x0, int(cy0) + box.y0, int(cx1) + box.x0, int(cy1) + box.y0)


def _picked(mask: np.ndarray, seeds: tuple[tuple[int, int], ...], box: Roi, min_area: int) -> np.ndarray:
    """The components of `mask` (the pixels of slide `box`) holding any of the slide pixels `seeds`."""
    labels, _, _ = components(mask, min_area)
    picked = {int(labels[y - box.y0, x - box.x0]) for x, y in seeds
              if box.x0 <= x < box.x1 and box.y0 <= y < box.y1} - {0}
    return np.isin(labels, sorted(picked))
