"""A whole-slide run drawn over the slide: its foreground probability as a heatmap, and optionally its seams.

The stitched output can be far larger than a screen (a 16k slide's is 8k x 8k), so what is drawn is a
pyramid made on a worker (`overlay_pyramid`): 8-bit levels, each max-pooled 2x from the one before, so a
thin defect stays visible when zoomed out (a plain downscale would drop it); the view picks the level
whose pixels are about one screen pixel (`update_level`), stretched over the stitched region's slide
rectangle above the slide's tiles and below the ROI box. Each layer can be hidden (View menu).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF

from ...core.roi import Roi
from ...core.wholeslide.tiling import Stitched
from ..widgets import colormaps

#: Opacity of the heatmap where the probability is 1; it fades to transparent towards 0, so the slide's
#: texture stays visible wherever nothing was found (and stays readable where something was, at any zoom).
HEATMAP_MAX_ALPHA = 210
HEATMAP_MIN_ALPHA = 40  # at the lowest probability drawn (above 1/255)
#: Z values: above the slide tiles (1), below the ROI box.
HEATMAP_Z, SEAMS_Z, ROI_Z = 5, 6, 10
#: The finest level has at most this many pixels a side; the coarsest at least COARSEST_SIDE.
OVERLAY_MAX_SIDE = 4096
COARSEST_SIDE = 256


def _heatmap_lut() -> np.ndarray:
    """The heatmap's colours, with an opacity that grows with the probability (0: transparent)."""
    lut = colormaps.heatmap_colormap().getLookupTable(nPts=256, alpha=True)
    lut[:, 3] = np.linspace(HEATMAP_MIN_ALPHA, HEATMAP_MAX_ALPHA, 256).astype(np.uint8)
    lut[0, 3] = 0
    return lut


def _seams_lut() -> np.ndarray:
    """Transparent where tiles agree, opaque vermillion where they disagree most."""
    lut = np.zeros((256, 4), np.uint8)
    lut[:, :3] = colormaps.VERMILLION
    lut[:, 3] = np.linspace(0, 255, 256).astype(np.uint8)
    return lut


def max_pool(image: np.ndarray, factor: int) -> np.ndarray:
    """Each `factor` x `factor` block's maximum (the image padded with 0 to whole blocks)."""
    if factor == 1:
        return image
    height, width = image.shape
    padded = np.zeros((-(-height // factor) * factor, -(-width // factor) * factor), image.dtype)
    padded[:height, :width] = image
    return padded.reshape(padded.shape[0] // factor, factor, padded.shape[1] // factor, factor).max(axis=(1, 3))


def _levels(image: np.ndarray) -> list[np.ndarray]:
    first = max(1, math.ceil(max(image.shape) / OVERLAY_MAX_SIDE))
    levels = [max_pool(image, first)]
    while max(levels[-1].shape) > COARSEST_SIDE:
        levels.append(max_pool(levels[-1], 2))
    return levels


def _as_uint8(values: np.ndarray) -> np.ndarray:
    return np.round(np.clip(values, 0.0, 1.0) * 255).astype(np.uint8)


@dataclass(frozen=True)
class OverlayPyramid:
    """What the view draws of one stitched run: its slide rectangle (x, y, width, height of the finest
    level, whose padding lies past the region) and 8-bit levels, finest first."""

    rect: tuple[float, float, float, float]
    out_per_pixel: float  # output pixels per pixel of the finest level
    scale: float  # output pixels per slide pixel
    heatmap: list[np.ndarray]
    seams: list[np.ndarray] | None

    def level_for(self, slide_per_screen: float) -> int:
        """The coarsest level whose pixels are at most one screen pixel (`slide_per_screen`: slide pixels per
        screen pixel)."""
        level_pixel = self.out_per_pixel / self.scale  # slide pixels per pixel of level 0
        if slide_per_screen <= level_pixel:
            return 0
        return min(int(math.log2(slide_per_screen / level_pixel)), len(self.heatmap) - 1)


def overlay_pyramid(stitched: Stitched) -> OverlayPyramid:
    """The overlay of a stitched run (numpy only: made on a worker)."""
    heatmap = _levels(_as_uint8(stitched.foreground()))
    seams = _levels(_as_uint8(stitched.seams)) if stitched.seams is not None else None
    factor = -(-max(stitched.argmax.shape) // OVERLAY_MAX_SIDE)
    height, width = heatmap[0].shape
    x0, y0, _, _ = stitched.to_slide(Roi(0, 0, 1, 1))
    return OverlayPyramid((x0, y0, width * factor / stitched.scale, height * factor / stitched.scale),
                          float(factor), stitched.scale, heatmap, seams)


class SlideOverlay:
    """The heatmap and seams layers of one view box: `show(pyramid)`, `clear()`, `set_visible(...)`."""

    def __init__(self, view_box: pg.ViewBox) -> None:
        self.view_box = view_box
        self.heatmap = pg.ImageItem(axisOrder="row-major")
        self.heatmap.setLookupTable(_heatmap_lut())
        self.heatmap.setZValue(HEATMAP_Z)
        self.seams = pg.ImageItem(axisOrder="row-major")
        self.seams.setLookupTable(_seams_lut())
        self.seams.setZValue(SEAMS_Z)
        for item in (self.heatmap, self.seams):
            item.setVisible(False)
            view_box.addItem(item)
        self.pyramid: OverlayPyramid | None = None
        self.level = -1
        self.show_heatmap, self.show_seams = True, False

    def show(self, pyramid: OverlayPyramid) -> None:
        """Draw `pyramid` over its region of the slide, at the level the current zoom needs."""
        self.pyramid, self.level = pyramid, -1
        self.update_level()
        self._update_visible()

    def update_level(self) -> None:
        """Switch to the level whose pixels are about one screen pixel (after a zoom)."""
        pyramid = self.pyramid
        if pyramid is None:
            return
        level = pyramid.level_for(self.view_box.viewPixelSize()[0])
        if level == self.level:
            return
        self.level = level
        rect = QRectF(*pyramid.rect)
        self.heatmap.setImage(pyramid.heatmap[level], autoLevels=False, levels=(0, 255))
        self.heatmap.setRect(rect)
        if pyramid.seams is not None:
            self.seams.setImage(pyramid.seams[level], autoLevels=False, levels=(0, 255))
            self.seams.setRect(rect)
        else:
            self.seams.clear()

    def clear(self) -> None:
        self.pyramid, self.level = None, -1
        self.heatmap.clear()
        self.seams.clear()
        self._update_visible()

    @property
    def has_seams(self) -> bool:
        return self.pyramid is not None and self.pyramid.seams is not None

    def set_visible(self, heatmap: bool | None = None, seams: bool | None = None) -> None:
        """Show or hide a layer (None: leave it as it is)."""
        if heatmap is not None:
            self.show_heatmap = heatmap
        if seams is not None:
            self.show_seams = seams
        self._update_visible()

    def _update_visible(self) -> None:
        self.heatmap.setVisible(self.pyramid is not None and self.show_heatmap)
        self.seams.setVisible(self.has_seams and self.show_seams)
