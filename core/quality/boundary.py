"""Where the boundary is wrong, and by how much: the picture behind HD95 for the viewer's overlay.

A boundary pixel of a mask is a foreground pixel with a 4-neighbour outside it (or on the image's edge). A
boundary pixel of one mask that is not a boundary pixel of the other is wrong; its error is the Euclidean
distance to the other mask's nearest boundary pixel (OpenCV's exact distance transform), `inf` when the other
mask has none. HD95 (`surface.py`) measures the same gap on pixel corners, length-weighted; this map is at
pixel level, for looking, and costs a few milliseconds at 1800 x 1800.
"""

from __future__ import annotations

import cv2
import numpy as np

_CROSS = cv2.getStructuringElement(cv2.MORPH_CROSS, (3, 3))


def boundary(mask: np.ndarray) -> np.ndarray:
    """The boundary pixels of a bool mask."""
    pixels = mask.view(np.uint8)
    inner = cv2.erode(pixels, _CROSS, borderType=cv2.BORDER_CONSTANT, borderValue=0)
    return (pixels > inner).view(bool)


def _distance_to(edge: np.ndarray) -> np.ndarray:
    if not edge.any():
        return np.full(edge.shape, np.inf, np.float32)
    return cv2.distanceTransform((~edge).view(np.uint8), cv2.DIST_L2, 5)


def boundary_errors(truth: np.ndarray, prediction: np.ndarray) -> np.ndarray:
    """Per pixel of two bool masks of one shape: each wrong boundary pixel's distance to the other mask's
    boundary (float32, `inf` when that has none), 0 everywhere else."""
    out = np.zeros(truth.shape, np.float32)
    edges = boundary(truth), boundary(prediction)
    rows, cols = np.flatnonzero((edges[0] | edges[1]).any(axis=1)), np.flatnonzero((edges[0] | edges[1]).any(axis=0))
    if rows.size == 0:
        return out
    box = slice(rows[0], rows[-1] + 1), slice(cols[0], cols[-1] + 1)  # every boundary pixel lies inside
    for own, other in ((edges[0][box], edges[1][box]), (edges[1][box], edges[0][box])):
        wrong = own & ~other
        if wrong.any():
            out[box][wrong] = _distance_to(other)[wrong]
    return out
