"""clDice, centreline Dice for thin structures (Shit et al., CVPR 2021): does the prediction keep a crack in one
piece and does its centreline lie inside the truth?

Tprec = |S(P) ∩ G| / |S(P)|, Tsens = |S(G) ∩ P| / |S(G)|, clDice = 2·Tprec·Tsens / (Tprec + Tsens), with the
skeletons S by scikit-image's `skeletonize` (2-D default). Both masks empty: NaN, "n/a" (no centreline to
compare); exactly one empty: 0 (the skeleton of the other lies wholly outside it).
"""

from __future__ import annotations

import math

import numpy as np


def _box(mask: np.ndarray) -> tuple[slice, slice]:
    """The bounding box of a non-empty mask widened by one pixel within the image: skeletonize decides each
    pixel from its 3x3 neighbourhood, so the skeleton of the crop is the skeleton of the whole, cropped."""
    rows, cols = np.flatnonzero(mask.any(axis=1)), np.flatnonzero(mask.any(axis=0))
    return (slice(max(rows[0] - 1, 0), rows[-1] + 2), slice(max(cols[0] - 1, 0), cols[-1] + 2))


def skeleton(mask: np.ndarray) -> np.ndarray:
    """`skeletonize(mask)` of a bool mask, computed on the mask's bounding box only."""
    from skimage.morphology import skeletonize  # here: scikit-image's import is paid only by clDice runs

    out = np.zeros(mask.shape, bool)
    if mask.any():
        box = _box(mask)
        out[box] = skeletonize(mask[box])
    return out


def cldice(truth: np.ndarray, prediction: np.ndarray) -> float:
    """clDice of two bool masks of one shape (see the module docstring for empty masks)."""
    truth_any, prediction_any = bool(truth.any()), bool(prediction.any())
    if not (truth_any or prediction_any):
        return math.nan
    if not (truth_any and prediction_any):
        return 0.0
    skeleton_prediction, skeleton_truth = skeleton(prediction), skeleton(truth)
    precision = np.count_nonzero(skeleton_prediction & truth) / np.count_nonzero(skeleton_prediction)
    sensitivity = np.count_nonzero(skeleton_truth & prediction) / np.count_nonzero(skeleton_truth)
    if precision + sensitivity == 0:
        return 0.0
    return float(2 * precision * sensitivity / (precision + sensitivity))
