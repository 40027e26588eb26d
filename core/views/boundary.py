"""Boundary-error panel: each boundary pixel where prediction and truth disagree, coloured by how far it lies
from the other mask's boundary (`core.quality.boundary`): the picture behind HD95."""

from __future__ import annotations

import numpy as np

from ..metrics.scores import argmax_at_roi
from ..quality.boundary import boundary_errors
from ..result import InferenceResult
from . import ResultView, register

#: Distances from 0 to this many pixels span the colour map; farther ones (and `inf`) take its top colour.
CAP_PX = 10.0
#: A wrong pixel is never drawn darker than this, so a 1-px error still shows against the black background.
FLOOR = 0.25


def boundary_error_image(result: InferenceResult, class_index: int, truth: np.ndarray | None) -> np.ndarray:
    """Wrong boundary pixels of `class_index` at ROI resolution: FLOOR + (1 - FLOOR)·min(d, CAP_PX)/CAP_PX,
    0 elsewhere (and everywhere without a ground truth)."""
    if truth is None:
        return np.zeros((result.roi.height, result.roi.width), np.float32)
    errors = boundary_errors(truth == class_index, argmax_at_roi(result) == class_index)
    scaled = FLOOR + (1.0 - FLOOR) * np.minimum(errors, CAP_PX) / CAP_PX
    return np.where(errors > 0, scaled, 0.0).astype(np.float32)


register(ResultView("boundary", "Boundary error", "Wrong boundary pixels of the chosen class, by their distance to "
                    f"the other mask's boundary: dim 1 px, bright {CAP_PX:g} px or more (black: right or no "
                    "boundary). What HD95 summarises", boundary_error_image, colormap="inferno"))
