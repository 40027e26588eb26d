"""Uncertainty panel: where the model hesitates between its two most likely classes."""

from __future__ import annotations

import numpy as np

from ..result import InferenceResult
from . import ResultView, register


def uncertainty(result: InferenceResult, _class_index: int = 0, _truth: np.ndarray | None = None) -> np.ndarray:
    """1 − (p_first − p_second) per pixel: 0 where one class is certain, 1 where two classes tie."""
    top_two = np.sort(result.probabilities, axis=-1)[..., -2:]
    return (1.0 - (top_two[..., 1] - top_two[..., 0])).astype(np.float32)


register(ResultView("uncertainty", "Uncertainty", "1 − margin between the two most likely classes: bright where "
                    "the model hesitates (a border, a faint defect)", uncertainty))
