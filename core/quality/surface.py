"""Boundary metrics: HD95 and NSD (surface Dice at a tolerance) as DeepMind's `surface-distance` defines them.

Tools disagree on these numbers by large margins (Podobnik & Vrtovec 2024), so this is that package's
definition exactly, at a spacing of 1 pixel (`compute_surface_distances`, `compute_robust_hausdorff(d, 95)`,
`compute_surface_dice_at_tolerance(d, T)`; github.com/google-deepmind/surface-distance, Apache-2.0):

- The contour lies on pixel corners. Each corner gets the code of its 2x2 neighbourhood (top-left 8, top-right
  4, bottom-left 2, bottom-right 1; outside the image counts as background); a corner whose code is neither 0
  nor 15 is a contour element, weighted by the length of contour through it (1 for a straight edge, √2/2 for
  a corner cut, √2 for a saddle).
- Each contour element's distance to the other mask's contour is the Euclidean distance transform (scipy) to
  the nearest of its contour corners.
- HD95: per direction, the distance at which the length-weighted cumulative share of the sorted distances
  first reaches 95 %; the larger of the two directions.
- NSD@T: the length of both contours within T pixels of the other, over their total length.

Empty masks: both empty (the class is in neither prediction nor truth) is NaN, "n/a" (there is no contour
to measure; as the foreground Dice, it is left out of means); one empty is HD95 `inf` (no contour to measure
to; JSON writes null, the summary counts it) and NSD 0, as the package gives them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Contour length through a corner by its 2x2 neighbourhood code (DeepMind's `lookup_tables` at spacing 1).
_DIAGONAL = 0.5 * math.sqrt(2.0)
CONTOUR_LENGTH = np.zeros(16)
CONTOUR_LENGTH[[0b0001, 0b0010, 0b0100, 0b0111, 0b1000, 0b1011, 0b1101, 0b1110]] = _DIAGONAL
CONTOUR_LENGTH[[0b0011, 0b1100]] = 1.0  # horizontal edge
CONTOUR_LENGTH[[0b0101, 0b1010]] = 1.0  # vertical edge
CONTOUR_LENGTH[[0b0110, 0b1001]] = 2 * _DIAGONAL  # saddle: two corner cuts


@dataclass(frozen=True)
class SurfaceDistances:
    """Each contour element's distance to the other contour (sorted ascending) and its length."""

    truth_to_prediction: np.ndarray
    prediction_to_truth: np.ndarray
    truth_lengths: np.ndarray
    prediction_lengths: np.ndarray

    @property
    def truth_empty(self) -> bool:
        return self.truth_lengths.size == 0

    @property
    def prediction_empty(self) -> bool:
        return self.prediction_lengths.size == 0


def corner_codes(mask: np.ndarray) -> np.ndarray:
    """The (H+1) x (W+1) neighbourhood codes of the corners of an H x W bool mask."""
    padded = np.zeros((mask.shape[0] + 2, mask.shape[1] + 2), np.uint8)
    padded[1:-1, 1:-1] = mask
    return 8 * padded[:-1, :-1] + 4 * padded[:-1, 1:] + 2 * padded[1:, :-1] + padded[1:, 1:]


def _bounding_box(mask: np.ndarray) -> tuple[slice, slice] | None:
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    if rows.size == 0:
        return None
    return slice(rows[0], rows[-1] + 1), slice(cols[0], cols[-1] + 1)


def _sorted(distances: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((lengths, distances))  # by distance, then length, as the package sorts its pairs
    return distances[order], lengths[order]


def surface_distances(truth: np.ndarray, prediction: np.ndarray) -> SurfaceDistances:
    """`compute_surface_distances(truth, prediction, (1, 1))` of two bool masks of one shape."""
    box = _bounding_box(truth | prediction)  # the package's crop: same distances, less work
    if box is None:
        empty = np.zeros(0)
        return SurfaceDistances(empty, empty, empty, empty)
    codes_truth, codes_prediction = corner_codes(truth[box]), corner_codes(prediction[box])
    border_truth = (codes_truth != 0) & (codes_truth != 15)
    border_prediction = (codes_prediction != 0) & (codes_prediction != 15)
    to_truth = _distance_to(border_truth)
    to_prediction = _distance_to(border_prediction)
    truth_to_prediction, truth_lengths = _sorted(to_prediction[border_truth], CONTOUR_LENGTH[codes_truth[border_truth]])
    prediction_to_truth, prediction_lengths = _sorted(to_truth[border_prediction],
                                                      CONTOUR_LENGTH[codes_prediction[border_prediction]])
    return SurfaceDistances(truth_to_prediction, prediction_to_truth, truth_lengths, prediction_lengths)


def _distance_to(border: np.ndarray) -> np.ndarray:
    """Each corner's Euclidean distance to the nearest border corner (inf without one)."""
    if not border.any():
        return np.full(border.shape, np.inf)
    from scipy import ndimage  # here: SciPy's import (~0.25 s) is paid only by runs that ask for HD95/NSD

    return np.asarray(ndimage.distance_transform_edt(~border), dtype=np.float64)


def _percentile_distance(distances: np.ndarray, lengths: np.ndarray, percent: float) -> float:
    if distances.size == 0:
        return math.inf
    cumulative = np.cumsum(lengths) / np.sum(lengths)
    index = int(np.searchsorted(cumulative, percent / 100.0))
    return float(distances[min(index, distances.size - 1)])


def robust_hausdorff(distances: SurfaceDistances, percent: float = 95.0) -> float:
    """`compute_robust_hausdorff(d, percent)`, with the empty-mask values of the module's docstring."""
    if distances.truth_empty and distances.prediction_empty:
        return math.nan
    return max(_percentile_distance(distances.truth_to_prediction, distances.truth_lengths, percent),
               _percentile_distance(distances.prediction_to_truth, distances.prediction_lengths, percent))


def surface_dice(distances: SurfaceDistances, tolerance: float) -> float:
    """`compute_surface_dice_at_tolerance(d, tolerance)`, with the empty-mask values of the module's docstring."""
    total = float(np.sum(distances.truth_lengths) + np.sum(distances.prediction_lengths))
    if total == 0.0:
        return math.nan
    within = (np.sum(distances.truth_lengths[distances.truth_to_prediction <= tolerance])
              + np.sum(distances.prediction_lengths[distances.prediction_to_truth <= tolerance]))
    return float(within) / total

