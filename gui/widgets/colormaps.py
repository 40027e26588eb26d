"""Colour tables shared by the viewer: class labels, TP/FP/FN error codes and the probability heatmap.

All label colours come from the Okabe-Ito palette (`core.palette`), which stays distinguishable with the
common forms of colour blindness. Tables are 256 x 4 uint8 RGBA, the form pyqtgraph's ImageItem applies fastest to uint8
images (one table lookup per pixel, no float scaling). Treat the returned tables as read-only.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pyqtgraph as pg

from ...core.metrics.review import ERROR_COLORS, ERROR_NAMES, FN, FP, TN, TP
from ...core.palette import (  # noqa: F401 (re-exported: the viewer's colours)
    BLUE,
    BLUISH_GREEN,
    CLASS_COLORS,
    HEATMAP_COLORMAP,
    ORANGE,
    REDDISH_PURPLE,
    SKY_BLUE,
    VERMILLION,
    YELLOW,
    class_color,
    series_color,
)

__all__ = ["ERROR_COLORS", "ERROR_NAMES", "FN", "FP", "TN", "TP", "error_lut", "heatmap_colormap", "label_lut"]

#: Class 0 and TN on an opaque panel: a dark grey, so an empty mask is visibly a mask, not the background.
BACKGROUND = (46, 50, 58)


@cache  # one array per variant: handing ImageItem the same table again costs nothing
def label_lut(transparent_background: bool = False) -> np.ndarray:
    """A 256-entry RGBA table for class-id images: 0 dark grey (or transparent), k the colour of class k."""
    lut = np.zeros((256, 4), np.uint8)
    lut[:, 3] = 255
    lut[0, :3] = BACKGROUND
    for index in range(1, 256):
        lut[index, :3] = class_color(index)
    if transparent_background:
        lut[0, 3] = 0
    return lut


@cache
def error_lut(transparent_background: bool = False) -> np.ndarray:
    """A 256-entry RGBA table for error codes (TN, TP, FP, FN)."""
    lut = np.zeros((256, 4), np.uint8)
    lut[:, 3] = 255
    lut[TN, :3] = BACKGROUND
    for code, rgb in ERROR_COLORS.items():
        lut[code, :3] = rgb
    if transparent_background:
        lut[TN, 3] = 0
    return lut


def heatmap_colormap() -> pg.ColorMap:
    return pg.colormap.get(HEATMAP_COLORMAP)
