"""The Reliability dock: the reliability diagram (accuracy against confidence in 15 bins, the diagonal being
perfect calibration) of the current image beside that of every image run so far, with their ECE
(`core.quality.calibration`)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from ...core.quality.calibration import BINS, EDGES, Reliability
from ..widgets import colormaps

WIDTH = 1.0 / BINS


def bin_accuracy(reliability: Reliability | None) -> np.ndarray:
    """Each bin's accuracy (0 where it holds no pixel, so no bar is drawn)."""
    if reliability is None:
        return np.zeros(BINS)
    rows = reliability.bins()
    return np.array([row["accuracy"] if row["pixels"] else 0.0 for row in rows])


class ReliabilityPanel(QWidget):
    """`show_reliability(image, dataset, images)`: either may be None (not computed)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.note = QLabel("")
        self.note.setWordWrap(True)
        self.plot = pg.PlotWidget()
        self.plot.setMenuEnabled(False)
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.setXRange(0, 1, padding=0.02)
        self.plot.setYRange(0, 1, padding=0.02)
        self.plot.setLabel("bottom", "confidence (top-label probability)")
        self.plot.setLabel("left", "accuracy")
        self.plot.addLegend(offset=(10, 10))
        self.plot.plot([0, 1], [0, 1], pen=pg.mkPen((160, 160, 160), style=pg.QtCore.Qt.PenStyle.DashLine),
                       name="perfect calibration")
        left, right = EDGES[:-1] + WIDTH * 0.3, EDGES[:-1] + WIDTH * 0.7
        self.image_bars = pg.BarGraphItem(x=left, height=np.zeros(BINS), width=WIDTH * 0.4,
                                          brush=pg.mkBrush(*colormaps.ORANGE), name="this image")
        self.dataset_bars = pg.BarGraphItem(x=right, height=np.zeros(BINS), width=WIDTH * 0.4,
                                            brush=pg.mkBrush(*colormaps.SKY_BLUE), name="images run")
        for bars in (self.image_bars, self.dataset_bars):
            self.plot.addItem(bars)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.note)
        layout.addWidget(self.plot, 1)
        self.show_reliability(None, None, 0)

    def show_reliability(self, image: Reliability | None, dataset: Reliability | None, images: int) -> None:
        self.image_bars.setOpts(height=bin_accuracy(image))
        self.dataset_bars.setOpts(height=bin_accuracy(dataset))
        if dataset is None or not dataset.pixels:
            self.note.setText("No ECE yet: choose ece in Inspect > QA metrics… and run")
            return
        this = f"this image ECE {image.ece():.4f}" if image is not None and image.pixels else "this image: n/a"
        self.note.setText(f"{this} · {images} images run: ECE {dataset.ece():.4f} over {dataset.pixels:,} pixels "
                          "(bars: accuracy per confidence bin; the gap to the diagonal is miscalibration)")

    def heights(self) -> tuple[np.ndarray, np.ndarray]:
        """The bars drawn (this image's, the images run)."""
        return np.asarray(self.image_bars.opts["height"]), np.asarray(self.dataset_bars.opts["height"])
