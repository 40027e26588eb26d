"""The current image's metrics in a compact grid, and a histogram of the dataset's ranking metric (the
foreground Dice unless the user picks another in the dataset panel)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QGridLayout, QLabel, QScrollArea, QSizePolicy, QVBoxLayout, QWidget

from ...core.metrics import catalogue
from ...core.metrics.aggregate import Aggregate
from ...core.metrics.catalogue import Metric
from ...core.metrics.scores import ImageMetrics
from ...core.wording import class_name, plural
from ..widgets import colormaps


def count_ticks(top: int, most: int = 5) -> range:
    """Whole-number ticks from 0 up to `top`, at most `most` + 1 of them, a step of 1, 2 or 5 times a power
    of ten (counts of images have no 2.5)."""
    scale = 1
    while True:
        for factor in (1, 2, 5):
            if top <= most * factor * scale:
                return range(0, top + 1, factor * scale)
        scale *= 10


#: Histogram bins over the metric's range.
BINS = 20


class MetricsPanel(QWidget):
    """Per-image numbers (`show_metrics`) and the histogram of the dataset's ranking metric
    (`set_dataset_values`)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        grid = QGridLayout()
        grid.setHorizontalSpacing(12)
        self.grid = grid
        self._pairs: list[tuple[QLabel, QLabel]] = []
        self._columns = 0
        self.value_labels: dict[str, QLabel] = {}
        self.caption_labels: dict[str, QLabel] = {}
        self.fields = catalogue.metrics()  # every per-image metric (per-class ones go on their own line)
        for metric in self.fields:
            caption = QLabel(metric.title)
            value = QLabel("–")
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            value.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            for label in (caption, value):
                label.setToolTip(f"{metric.label}: {metric.description}")
            self._pairs.append((caption, value))
            self.value_labels[metric.name] = value
            self.caption_labels[metric.name] = caption
        self._reflow(2)
        self.per_class = QLabel("")
        self.per_class.setWordWrap(True)
        self.per_class.setToolTip("Hard Dice / IoU of each class at ROI resolution (n/a where the class is in "
                                  "neither mask)")
        self.note = QLabel("")  # why the numbers shown do not answer for the image now
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: #e6b450;")
        self.note.hide()
        self.scope = QLabel("")  # what the numbers are of when not the ROI ("whole slide: …")
        self.scope.setWordWrap(True)
        self.scope.hide()

        self.plot = pg.PlotWidget()
        self.plot.setMinimumHeight(100)
        self.plot.setMaximumHeight(130)  # (a plot's own size hint is 640 x 480: the dock would scroll past its axis)
        self.plot.setMenuEnabled(False)
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.setLabel("left", "images")
        # image counts take no SI prefix: without it a new range does not set the axis label and lay it out again
        self.plot.getAxis("left").enableAutoSIPrefix(False)
        self.bars = pg.BarGraphItem(x0=[], x1=[], height=[], brush=pg.mkBrush(*colormaps.SKY_BLUE))
        self.plot.addItem(self.bars)
        self.current_line = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(colormaps.ORANGE, width=2))
        self.current_line.hide()
        self.plot.addItem(self.current_line)

        # The numbers (with the QA metrics, a dozen rows more) and the per-class line scroll in their own area
        # above the histogram, which keeps its height: its axis shows in a 1280x800 window's dock whatever is
        # computed.
        numbers = QWidget()
        column = QVBoxLayout(numbers)
        column.setContentsMargins(0, 0, 4, 0)
        column.addLayout(grid)
        column.addWidget(self.per_class)
        column.addStretch(1)
        self.numbers = QScrollArea()
        self.numbers.setWidgetResizable(True)
        self.numbers.setFrameShape(QFrame.Shape.NoFrame)
        self.numbers.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.numbers.setWidget(numbers)
        # it takes the height the dock has (its rows' height asked for would scroll the dock past the histogram)
        self.numbers.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Ignored)
        self.numbers.setMinimumHeight(3 * self.fontMetrics().lineSpacing())
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.note)
        layout.addWidget(self.scope)
        layout.addWidget(self.numbers, 1)
        layout.addWidget(self.plot)
        # what the axes show (each given to the plot again only when it changes)
        self._x_axis: tuple[float, float, str] | None = None
        self._top = 0
        self._ticks = range(0)
        self._title = ""
        self.plot.setTitle(self._title)  # (its row, once: its text is set as it changes)
        self.set_dataset_values(catalogue.lookup(catalogue.DEFAULT_RANKING), [], None)

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
        room = self.width() - self.numbers.verticalScrollBar().sizeHint().width()  # (its scroll bar may show)
        self._reflow(2 if room >= 2 * self._pair_width() + 16 else 1)

    def set_note(self, note: str) -> None:
        """Mark the numbers stale with `note` (greyed, the note above them); "" shows them as current."""
        self.note.setText(note)
        self.note.setVisible(bool(note))
        for label in (*self.value_labels.values(), self.per_class):
            label.setEnabled(not note)

    def set_scope(self, text: str) -> None:
        """Say what the numbers are of where it is not the ROI the panels show (""; nothing said)."""
        self.scope.setText(text)
        self.scope.setVisible(bool(text))

    def show_metrics(self, metrics: ImageMetrics | None, ranking: Metric, class_names: Sequence[str] = ()) -> None:
        """This image's metrics ("n/a" where one does not apply); None (no result, or no ground-truth mask)
        shows dashes. The histogram marks the image's value of `ranking`, the metric it draws (the session's)."""
        for metric in self.fields:
            self.value_labels[metric.name].setText("–" if metrics is None else metric.text(metric.of(metrics)))
            shown = not metric.optional or metric.computed(metrics)  # the QA metrics only where computed
            self.value_labels[metric.name].setVisible(shown)
            self.caption_labels[metric.name].setVisible(shown)
        current = ranking.of(metrics)
        self.current_line.setVisible(current is not None)
        if current is not None:
            self.current_line.setPos(current)
        if metrics is None:
            self.per_class.setText("")
            return
        families = [f for f in catalogue.per_class() if not f.optional or f.values(metrics) is not None]

        def scores(index: int) -> str:
            pairs = ((family.label, family.entry(index)) for family in families)
            return ", ".join(f"{label} {entry.text(entry.of(metrics))}" for label, entry in pairs)

        names = [class_name(class_names, i) for i in range(len(metrics.dice))]
        self.per_class.setText("  ".join(f"{name}: {scores(i)}" for i, name in enumerate(names)))

    def set_dataset_values(self, metric: Metric, values: Sequence[float | None] | np.ndarray,
                           summary: Aggregate | None) -> None:
        """The histogram of `metric` over the dataset's images with masks (None or NaN = n/a for that image, not
        binned), titled with the session's `summary` of it (its mean, or a count's total, as the status bar and
        `eval` give it). Only what changed is given to the plot (bars, x axis, y axis, title: each a repaint and
        a relayout of its axis), so a run's redraws where a bar grew by one cost the bars alone."""
        array = np.asarray(values, np.float64)  # (None: NaN, n/a like it)
        finite = array[np.isfinite(array)]
        if metric.bounds is not None:
            low, high = metric.bounds
        else:  # the data's range
            low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
            # (one value: a range of 1 past it, wider where adding 1 would not move it: 1e16 + 1 == 1e16)
            high = high if high > low else low + max(1.0, abs(low))
        counts, edges = np.histogram(np.clip(finite, low, high), bins=BINS, range=(low, high))
        shown_counts, shown_edges = self.histogram()
        if not (np.array_equal(counts, shown_counts) and np.array_equal(edges, shown_edges)):
            self.bars.setOpts(x0=edges[:-1], x1=edges[1:], height=counts)
        x_axis = (low, high, metric.label)
        if x_axis != self._x_axis:
            self._x_axis = x_axis
            self.plot.setXRange(low, high, padding=0.02)
            self.plot.setLabel("bottom", metric.label)
            self.current_line.setToolTip(f"This image's {metric.label}")
        ticks = count_ticks(max(1, int(counts.max(initial=0))))
        if ticks != self._ticks:
            self._ticks = ticks
            self.plot.getAxis("left").setTicks([[(v, str(v)) for v in ticks], []])  # whole images only
        # the axis ends at the tick at or above the tallest bar: it moves when that bar passes a tick, not each draw
        top = ticks[-1] + (ticks.step if ticks[-1] < counts.max(initial=0) else 0)
        if top != self._top:
            self._top = top
            self.plot.setYRange(0, top, padding=0.05)
        title = histogram_title(metric, summary)
        if title != self._title:
            self._title = title
            self.plot.getPlotItem().titleLabel.setText(title)  # (setTitle would lay its row out again)

    def histogram(self) -> tuple[np.ndarray, np.ndarray]:
        """The bar heights (image counts) and bin edges the histogram draws."""
        opts = self.bars.opts
        return np.asarray(opts["height"]), np.append(opts["x0"], opts["x1"][-1:])


def histogram_title(metric: Metric, summary: Aggregate | None) -> str:
    """"7 images, mean Dice 0.8123, 1 n/a"; a count's total ("3 images, total true positives 12")."""
    if summary is None or not summary.finite:
        return f"no {metric.title} yet"
    if summary.total is not None:
        return f"{plural(summary.finite, 'image')}, total {metric.title} {summary.total}"
    mean = "n/a" if summary.mean is None else metric.text(summary.mean)
    return (f"{plural(summary.finite, 'image')}, mean {metric.title} {mean}"
            + (f", {summary.infinite} infinite" if summary.infinite else "")
            + (f", {summary.na} n/a" if summary.na else ""))
