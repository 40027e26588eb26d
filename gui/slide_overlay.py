"""A whole-slide run drawn over the slide: its foreground probability as a heatmap, and optionally its seams.

Both layers are one image each at the run's output scale, stretched over the stitched region's slide
rectangle above the slide's tiles and below the ROI box; each can be hidden (View menu).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF

from ..core.roi import Roi
from ..core.tiling import Stitched
from . import colormaps

#: Opacity of the heatmap where the probability is 1; it fades to transparent towards 0, so the slide's
#: texture stays visible wherever nothing was found.
HEATMAP_MAX_ALPHA = 200
#: Z values: above the slide tiles (1), below the ROI box.
HEATMAP_Z, SEAMS_Z, ROI_Z = 5, 6, 10


def _heatmap_lut() -> np.ndarray:
    """The heatmap's colours, with an opacity that grows with the probability."""
    lut = colormaps.heatmap_colormap().getLookupTable(nPts=256, alpha=True)
    lut[:, 3] = np.linspace(0, HEATMAP_MAX_ALPHA, 256).astype(np.uint8)
    return lut


def _seams_lut() -> np.ndarray:
    """Transparent where tiles agree, opaque vermillion where they disagree most."""
    lut = np.zeros((256, 4), np.uint8)
    lut[:, :3] = colormaps.VERMILLION
    lut[:, 3] = np.linspace(0, 255, 256).astype(np.uint8)
    return lut


class SlideOverlay:
    """The heatmap and seams layers of one view box: `show(stitched)`, `clear()`, `set_visible(...)`."""

    def __init__(self, view_box: pg.ViewBox) -> None:
        self.heatmap = pg.ImageItem(axisOrder="row-major")
        self.heatmap.setLookupTable(_heatmap_lut())
        self.heatmap.setZValue(HEATMAP_Z)
        self.seams = pg.ImageItem(axisOrder="row-major")
        self.seams.setLookupTable(_seams_lut())
        self.seams.setZValue(SEAMS_Z)
        for item in (self.heatmap, self.seams):
            item.setVisible(False)
            view_box.addItem(item)
        self.stitched: Stitched | None = None
        self.show_heatmap, self.show_seams = True, False

    def show(self, stitched: Stitched) -> None:
        """Draw `stitched` over its region of the slide."""
        self.stitched = stitched
        height, width = stitched.argmax.shape
        x0, y0, x1, y1 = stitched.to_slide(Roi(0, 0, width, height))
        rect = QRectF(x0, y0, x1 - x0, y1 - y0)
        self.heatmap.setImage(stitched.foreground(), autoLevels=False, levels=(0.0, 1.0))
        self.heatmap.setRect(rect)
        if stitched.seams is not None:
            self.seams.setImage(stitched.seams, autoLevels=False, levels=(0.0, 1.0))
            self.seams.setRect(rect)
        else:
            self.seams.clear()
        self._update_visible()

    def clear(self) -> None:
        self.stitched = None
        self.heatmap.clear()
        self.seams.clear()
        self._update_visible()

    def set_visible(self, heatmap: bool | None = None, seams: bool | None = None) -> None:
        """Show or hide a layer (None: leave it as it is)."""
        if heatmap is not None:
            self.show_heatmap = heatmap
        if seams is not None:
            self.show_seams = seams
        self._update_visible()

    def _update_visible(self) -> None:
        stitched = self.stitched
        self.heatmap.setVisible(stitched is not None and self.show_heatmap)
        self.seams.setVisible(stitched is not None and stitched.seams is not None and self.show_seams)
