"""The current image's metrics in a compact grid, and a histogram of the dataset's per-image soft Dice."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGridLayout, QLabel, QVBoxLayout, QWidget

from ..core.metrics import ImageMetrics
from . import colormaps

#: Shown fields: (ImageMetrics attribute, label, tooltip).
FIELDS = (
    ("soft_dice", "Soft Dice", "2·Σ(p·y) / (Σp² + Σy²), all classes, model resolution: main.py's number"),
    ("soft_iou", "Soft IoU", "Soft Dice / (2 − soft Dice), as main.py reported it"),
    ("foreground_dice", "Dice", "Hard Dice of the argmax at ROI resolution, every class ≥ 1 as foreground"),
    ("foreground_iou", "IoU", "Hard IoU (Jaccard) of the argmax at ROI resolution, foreground"),
    ("precision", "Precision", "TP / (TP + FP), foreground, at ROI resolution"),
    ("recall", "Recall", "TP / (TP + FN), foreground, at ROI resolution"),
)

#: Histogram bins over [0, 1].
BINS = 20


def _format(value: float) -> str:
    return "–" if math.isnan(value) else f"{value:.4f}"


class MetricsPanel(QWidget):
    """Per-image numbers (`show_metrics`) and the dataset's soft Dice histogram (`set_dataset_dice`)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        grid = QGridLayout()
        grid.setHorizontalSpacing(12)
        self.grid = grid
        self._pairs: list[tuple[QLabel, QLabel]] = []
        self._columns = 0
        self.value_labels: dict[str, QLabel] = {}
        for name, text, tooltip in FIELDS:
            caption = QLabel(text)
            value = QLabel("–")
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            value.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            for label in (caption, value):
                label.setToolTip(tooltip)
            self._pairs.append((caption, value))
            self.value_labels[name] = value
        self._reflow(2)
        self.per_class = QLabel("")
        self.per_class.setWordWrap(True)
        self.per_class.setToolTip("Hard Dice / IoU of each class at ROI resolution")
        self.note = QLabel("")  # why the numbers shown do not answer for the image now
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: #e6b450;")
        self.note.hide()

        self.plot = pg.PlotWidget()
        self.plot.setMinimumHeight(120)
        self.plot.setMenuEnabled(False)
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.setLabel("bottom", "soft Dice")
        self.plot.setLabel("left", "images")
        self.plot.setXRange(0.0, 1.0, padding=0.02)
        self.bars = pg.BarGraphItem(x0=[], x1=[], height=[], brush=pg.mkBrush(*colormaps.SKY_BLUE))
        self.plot.addItem(self.bars)
        self.current_line = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(colormaps.ORANGE, width=2))
        self.current_line.setToolTip("This image's soft Dice")
        self.current_line.hide()
        self.plot.addItem(self.current_line)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.note)
        layout.addLayout(grid)
        layout.addWidget(self.per_class)
        layout.addWidget(self.plot, 1)
        self.set_dataset_dice([])

    def _pair_width(self) -> int:
        metrics = self.fontMetrics()
        caption = max(metrics.horizontalAdvance(c.text()) for c, _ in self._pairs)
        return caption + metrics.horizontalAdvance("0.0000") + 3 * self.grid.horizontalSpacing()

    def _reflow(self, columns: int) -> None:
        """Lay the numbers out `columns` pairs a row (two when the dock is wide enough, else one): every
        value stays readable in a narrow dock."""
        if columns == self._columns:
            return
        self._columns = columns
        for index, (caption, value) in enumerate(self._pairs):
            row, col = divmod(index, columns)
            self.grid.addWidget(caption, row, 2 * col)
            self.grid.addWidget(value, row, 2 * col + 1)

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._reflow(2 if self.width() >= 2 * self._pair_width() + 16 else 1)

    def show_metrics(self, metrics: ImageMetrics | None, class_names: Sequence[str] = ()) -> None:
        """This image's metrics; None (no result, or no ground-truth mask) shows dashes."""
        for name, label in self.value_labels.items():
            label.setText("–" if metrics is None else _format(getattr(metrics, name)))
        if metrics is None:
            self.per_class.setText("")
            self.current_line.hide()
            return
        names = [class_names[i] if i < len(class_names) else f"class {i}" for i in range(len(metrics.dice))]
        self.per_class.setText(
            "  ".join(f"{n}: Dice {_format(d)}, IoU {_format(j)}"
                      for n, d, j in zip(names, metrics.dice, metrics.iou))
        )
        self.current_line.setPos(metrics.soft_dice)
        self.current_line.setVisible(not math.isnan(metrics.soft_dice))

    def set_note(self, note: str) -> None:
        """Mark the numbers stale with `note` (greyed, the note above them); "" shows them as current."""
        self.note.setText(note)
        self.note.setVisible(bool(note))
        for label in (*self.value_labels.values(), self.per_class):
            label.setEnabled(not note)

    def set_dataset_dice(self, values: Sequence[float]) -> None:
        """Per-image soft Dice of the dataset (NaN = an image without a mask, left out)."""
        finite = np.asarray([v for v in values if not math.isnan(v)], np.float64)
        counts, edges = np.histogram(np.clip(finite, 0.0, 1.0), bins=BINS, range=(0.0, 1.0))
        self.bars.setOpts(x0=edges[:-1], x1=edges[1:], height=counts)
        self.plot.setYRange(0, max(1, int(counts.max(initial=0))), padding=0.05)
        title = f"{finite.size} images, mean soft Dice {finite.mean():.4f}" if finite.size else "no Dice yet"
        self.plot.setTitle(title)

    def histogram(self) -> tuple[np.ndarray, np.ndarray]:
        """The bar heights (image counts) and bin edges the histogram draws."""
        opts = self.bars.opts
        return np.asarray(opts["height"]), np.append(opts["x0"], opts["x1"][-1:])
