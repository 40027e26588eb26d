"""Error review: the current image's TP/FP/FN counts, its connected error regions, and dataset filtering.

`ReviewPanel` only displays what `core.metrics.review` computes (counts and regions come from one `ErrorMap`);
`Inspection` (gui/shell/inspection.py) decides when to compute it and what a region click zooms.
The filter box takes a `core.metrics.filter.MetricFilter` ("soft_dice < 0.9 and recall >= 0.5").
"""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QTableView,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ...core.errors import SegScopeError
from ...core.metrics import catalogue
from ...core.metrics.filter import MetricFilter
from ...core.metrics.review import ERROR_NAMES, FN, FP, TN, TP, ErrorMap, ErrorRegion
from ..widgets import colormaps
from ..widgets.row_table import Column, RowModel, RowTable

#: Regions listed at most (a noisy prediction can have tens of thousands); the count says how many exist.
MAX_LISTED = 1000
REGION_COLUMNS: tuple[Column[ErrorRegion], ...] = (
    Column("Type", lambda r: r.name, color=lambda r: QColor(*colormaps.ERROR_COLORS[r.kind]), width="Type"),
    Column("Area (px)", lambda r: f"{r.area:,}", key=lambda r: r.area, right=True, width="Area (px)"),
    Column("Box x0, y0, x1, y1 (slide)", lambda r: ", ".join(map(str, r.box.as_tuple())),
           key=lambda r: (r.box.y0, r.box.x0)),
)


class FilterBar(QWidget):
    """The dataset filter box; `changed(MetricFilter | None)` when a valid expression is entered."""

    changed = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.edit = QLineEdit()
        self.edit.setPlaceholderText("Filter, e.g. soft_dice < 0.9 and recall >= 0.5")
        self.edit.setClearButtonEnabled(True)
        self.edit.setToolTip("Show only the images whose metrics match (images not run yet, or where a metric is "
                             f"n/a, are hidden while a filter is set). Metrics: {', '.join(catalogue.names())}")
        self.edit.editingFinished.connect(self.apply)
        self.edit.textChanged.connect(lambda text: None if text else self.apply())  # the clear button filters at once
        self.error = QLabel("")
        self.error.setStyleSheet("color: #e06c5a;")
        self.error.setWordWrap(True)
        self.error.hide()
        self.count = QLabel("")
        self.count.setStyleSheet("color: #9aa0a6;")
        self.filter: MetricFilter | None = None
        row = QHBoxLayout()
        row.addWidget(self.edit, 1)
        row.addWidget(self.count)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.error)

    def apply(self) -> None:
        try:
            parsed = MetricFilter.parse(self.edit.text())
        except SegScopeError as exc:
            self.error.setText(str(exc))
            self.error.show()
            return
        self.error.hide()
        if parsed != self.filter:
            self.filter = parsed
            self.changed.emit(parsed)

    def clear(self) -> None:
        self.edit.clear()

    def set_count(self, shown: int, total: int, filtered: bool) -> None:
        self.count.setText(f"{shown} of {total}" if filtered else "")


class ReviewPanel(QWidget):
    """Counts and areas of TP/FP/FN/TN and the error regions, largest first.

    `regionActivated(ErrorRegion)` when the user clicks a region (or moves to it with the keyboard).
    """

    regionActivated = Signal(object)

    COUNT_ROWS = (TP, FP, FN, TN)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.regions: list[ErrorRegion] = []
        self.errors: ErrorMap | None = None

        self.prev_button, self.next_button = QToolButton(), QToolButton()
        steps = QHBoxLayout()
        steps.addWidget(QLabel("Worst images (ranked as picked in the dataset panel)"), 1)
        steps.addWidget(self.prev_button)
        steps.addWidget(self.next_button)

        self.summary = QLabel("")
        self.summary.setWordWrap(True)
        self.counts_table = QTableWidget(len(self.COUNT_ROWS), 2)
        self.counts_table.setHorizontalHeaderLabels(["Pixels", "% of ROI"])
        self.counts_table.setVerticalHeaderLabels([ERROR_NAMES[k] for k in self.COUNT_ROWS])
        self.counts_table.setToolTip("Pixels of each kind at ROI resolution (the pixels behind hard Dice/IoU)")
        for row, kind in enumerate(self.COUNT_ROWS):
            row_header = self.counts_table.verticalHeaderItem(row)
            if kind in colormaps.ERROR_COLORS:
                row_header.setForeground(QColor(*colormaps.ERROR_COLORS[kind]))
        _fixed_table(self.counts_table)
        for header in (self.counts_table.horizontalHeader(), self.counts_table.verticalHeader()):
            header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)  # 4 x 2 cells: cheap
        height = self.counts_table.horizontalHeader().height() + sum(
            self.counts_table.rowHeight(r) for r in range(self.counts_table.rowCount()))
        self.counts_table.setFixedHeight(height + 2 * self.counts_table.frameWidth())

        self.regions_label = QLabel("Error regions")
        self.region_model: RowModel[ErrorRegion] = RowModel(REGION_COLUMNS, self)
        self.regions_table = RowTable(self.region_model, sortable=True)
        self.regions_table.setToolTip("8-connected false-positive / false-negative regions, largest first; "
                                      "click one to zoom the result panels and the slide to it")
        self.regions_table.selectionModel().currentRowChanged.connect(self._on_current_row)
        self.regions_table.clicked.connect(lambda index: self._activate(index.row()))

        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(steps)
        layout.addWidget(self.summary)
        layout.addWidget(self.counts_table)
        layout.addWidget(self.regions_label)
        layout.addWidget(self.regions_table, 1)
        self.show_errors(None, "Run an image that has a ground-truth mask to review its errors")

    def set_computing(self, item_id: str) -> None:
        """Empty the tables while the error map of `item_id` is computed (nothing stale stays clickable)."""
        self.show_errors(None, f"Finding the error regions of {item_id}…")

    def show_errors(self, errors: ErrorMap | None, note: str = "", regions: list[ErrorRegion] | None = None,
                    class_name: str = "", counts: dict[str, int] | None = None) -> None:
        """Show an error map's counts (`errors.counts()`, counted here unless given: a window counts on a
        worker) and its regions (from `core.metrics.review.error_regions`), or `note`."""
        self.errors = errors
        self.regions = regions or []
        counts = counts if counts is not None else errors.counts() if errors else {}
        fractions = {name: n / errors.labels.size for name, n in counts.items()} if errors else {}
        for row, kind in enumerate(self.COUNT_ROWS):
            name = ERROR_NAMES[kind]
            texts = (f"{counts[name]:,}", f"{100 * fractions[name]:.2f}") if errors else ("", "")
            for col, text in enumerate(texts):
                item = QTableWidgetItem(text)
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.counts_table.setItem(row, col, item)
        if errors is None:
            self.summary.setText(note)
        else:
            roi = errors.roi
            self.summary.setText(f"Class {class_name or errors.positive} on ROI {roi} "
                                 f"({roi.width} x {roi.height} px)")
        self.region_model.set_rows(self.regions[:MAX_LISTED])  # a reset: no current row, nothing activated
        more = f" (largest {MAX_LISTED} listed)" if len(self.regions) > MAX_LISTED else ""
        self.regions_label.setText(f"Error regions: {len(self.regions):,}{more}" if errors else "Error regions")

    def _on_current_row(self, current: QModelIndex, previous: QModelIndex) -> None:
        if current.row() != previous.row():
            self._activate(current.row())

    def _activate(self, row: int) -> None:
        if 0 <= row < self.region_model.rowCount():
            self.regionActivated.emit(self.region_model.row(row))


def _fixed_table(table: QTableView) -> None:
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
