"""The dataset panel: open a folder (dialog, drag-and-drop, recent list) and the sortable image table."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
    Signal,
)
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMenu,
    QTableView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ..core.metrics import ImageMetrics
from . import settings
from .shortcuts import with_key

#: The metrics come right after the id, so a narrow dock still shows them; the status is last.
COLUMNS = ("Image", "Soft Dice", "Dice", "IoU", "Status")
#: The id column is at most this wide (pixels); a longer id is cut in the middle, whole on hover.
IMAGE_COLUMN_MAX = 140
SOFT_DICE_COLUMN = 1
STATUS_COLUMN = 4


@dataclass
class Row:
    item_id: str
    status: str = "not run"
    metrics: ImageMetrics | None = None
    error: str = ""

    def value(self, column: int) -> float | None:
        if self.metrics is None:
            return None
        return (None, self.metrics.soft_dice, self.metrics.foreground_dice, self.metrics.foreground_iou, None)[column]


class ImageTableModel(QAbstractTableModel):
    """One row per dataset image; metrics columns sort numerically with missing values last."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.rows: list[Row] = []
        self._index: dict[str, int] = {}

    def set_items(self, item_ids: list[str]) -> None:
        self.beginResetModel()
        self.rows = [Row(i) for i in item_ids]
        self._index = {r.item_id: n for n, r in enumerate(self.rows)}
        self.endResetModel()

    def row(self, item_id: str) -> Row:
        return self.rows[self._index[item_id]]

    def source_index(self, item_id: str) -> QModelIndex:
        return self.index(self._index[item_id], 0)

    def update(self, item_id: str, status: str, metrics: ImageMetrics | None = None, error: str = "") -> None:
        n = self._index[item_id]
        self.rows[n].status = status
        self.rows[n].error = error
        if metrics is not None:
            self.rows[n].metrics = metrics
        self.dataChanged.emit(self.index(n, 0), self.index(n, len(COLUMNS) - 1))

    def set_metrics(self, item_id: str, metrics: ImageMetrics | None) -> None:
        """Replace a row's metrics (None clears them: the session is their one source)."""
        n = self._index[item_id]
        self.rows[n].metrics = metrics
        self.dataChanged.emit(self.index(n, 0), self.index(n, len(COLUMNS) - 1))

    def has(self, item_id: str) -> bool:
        return item_id in self._index

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.ToolTipRole:
            return (
                "Image id (sub-folder or file name)",
                "The original script's soft Dice: softmax vs one-hot mask at model resolution",
                "Hard foreground Dice of the argmax at ROI resolution",
                "Hard foreground IoU of the argmax at ROI resolution",
                "not run / queued / done / ROI changed / error",
            )[section]
        return None

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):  # type: ignore[override]
        if not index.isValid():
            return None
        row, column = self.rows[index.row()], index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if column == 0:
                return row.item_id
            if column == STATUS_COLUMN:
                return row.status
            value = row.value(column)
            return "" if value is None else f"{value:.4f}"
        if role == Qt.ItemDataRole.UserRole:  # sort key: missing metrics sort after every number
            if column == 0:
                return row.item_id
            if column == STATUS_COLUMN:
                return row.status
            value = row.value(column)
            return math.inf if value is None or math.isnan(value) else value
        if role == Qt.ItemDataRole.ToolTipRole and column == STATUS_COLUMN:
            return row.error or row.status
        if role == Qt.ItemDataRole.ToolTipRole and column == 0:
            return row.item_id
        if role == Qt.ItemDataRole.TextAlignmentRole and 0 < column < STATUS_COLUMN:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


class DatasetPanel(QWidget):
    """`openRequested(Path)` when the user picks a folder; `currentChanged(str)` with the selected item id."""

    openRequested = Signal(Path)
    currentChanged = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAcceptDrops(True)
        self.model = ImageTableModel(self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(Qt.ItemDataRole.UserRole)

        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, Qt.SortOrder.AscendingOrder)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.setAlternatingRowColors(True)
        header = self.table.horizontalHeader()
        # Columns sized once (never per row: a dataset of thousands fills in milliseconds), all in view: the
        # numbers fit, a long id or status is cut in the middle with the whole on hover, no horizontal scroll.
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        header.setMinimumSectionSize(24)
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 8)
        self._size_columns([])
        self.table.selectionModel().currentRowChanged.connect(self._on_current_row)
        self.proxy.layoutChanged.connect(lambda: self.table.scrollTo(self.table.currentIndex()))  # after a re-sort

        self.open_button = QToolButton()
        self.open_button.setText("Open…")
        self.open_button.setToolTip(with_key("Open a dataset folder (or drop one here)", "open"))
        self.open_button.setPopupMode(QToolButton.ToolButtonPopupMode.MenuButtonPopup)
        self.open_button.clicked.connect(self.choose_folder)
        self.recent_menu = QMenu("Open recent", self)
        self.recent_menu.aboutToShow.connect(self._fill_recent_menu)
        self.open_button.setMenu(self.recent_menu)
        self.worst_button = QToolButton()
        self.worst_button.setText("Worst first")
        self.worst_button.setToolTip(with_key("Sort by soft Dice, lowest first", "worst_first"))
        self.worst_button.clicked.connect(self.sort_worst_first)
        self.path_label = QLabel("Drop a dataset folder here")
        self.path_label.setWordWrap(True)
        self.path_label.setStyleSheet("color: #9aa0a6;")

        top = QHBoxLayout()
        top.addWidget(self.open_button)
        top.addWidget(self.worst_button)
        top.addStretch(1)
        self._column = QVBoxLayout(self)
        self._column.setContentsMargins(4, 4, 4, 4)
        self._column.addLayout(top)
        self._column.addWidget(self.path_label)
        self._column.addWidget(self.table, 1)

    def insert_widget(self, index: int, widget: QWidget) -> None:
        """Add a tool row (e.g. the filter box) at `index` of the panel's column."""
        self._column.insertWidget(index, widget)

    # ------------------------------------------------------------- opening
    def choose_folder(self) -> None:
        recent = settings.recent_datasets()
        start = str(recent[0].parent) if recent else ""
        folder = QFileDialog.getExistingDirectory(self, "Open a dataset folder", start)
        if folder:
            self.openRequested.emit(Path(folder))

    def _fill_recent_menu(self) -> None:
        self.recent_menu.clear()
        recent = settings.recent_datasets()
        for path in recent:
            action = self.recent_menu.addAction(str(path))
            action.setEnabled(path.is_dir())
            action.triggered.connect(lambda _=False, p=path: self.openRequested.emit(p))
        if not recent:
            self.recent_menu.addAction("(no recent datasets)").setEnabled(False)

    @staticmethod
    def dropped_folder(event: QDropEvent | QDragEnterEvent) -> Path | None:
        """The folder a drop carries: a dropped folder, or the folder of a dropped file."""
        for url in event.mimeData().urls():
            if url.isLocalFile():
                path = Path(url.toLocalFile())
                return path if path.is_dir() else path.parent
        return None

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if self.dropped_folder(event) is not None:
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        folder = self.dropped_folder(event)
        if folder is not None:
            event.acceptProposedAction()
            self.openRequested.emit(folder)

    # --------------------------------------------------------------- table
    def _size_columns(self, item_ids: list[str]) -> None:
        """Numbers at their width, the id column at the longest of the first ids (capped), the status what is
        left; the table (so the dock) is never narrower than that."""
        metrics, header = self.table.fontMetrics(), self.table.horizontalHeader()
        pad = 16

        def width(texts: list[str]) -> int:
            return max(metrics.horizontalAdvance(t) for t in texts) + pad

        image = min(width([COLUMNS[0], *item_ids[:200]]), IMAGE_COLUMN_MAX)
        header.resizeSection(0, image)
        for column in range(1, STATUS_COLUMN):
            header.resizeSection(column, width([COLUMNS[column], "0.0000"]))
        status = width(["done"])
        self.table.setMinimumWidth(sum(header.sectionSize(c) for c in range(STATUS_COLUMN)) + status
                                   + 2 * self.table.frameWidth() + self.table.verticalScrollBar().sizeHint().width())

    def set_dataset(self, root: Path, item_ids: list[str]) -> None:
        self.path_label.setText(str(root))
        self.path_label.setToolTip(str(root))
        self.model.set_items(item_ids)
        self._size_columns(item_ids)
        if item_ids:
            self.select_row(0)

    def current_item(self) -> str | None:
        index = self.table.currentIndex()
        if not index.isValid():
            return None
        return self.model.rows[self.proxy.mapToSource(index).row()].item_id

    def select_item(self, item_id: str) -> None:
        self._select(self.proxy.mapFromSource(self.model.source_index(item_id)))

    def select_row(self, row: int) -> None:
        if 0 <= row < self.proxy.rowCount():
            self._select(self.proxy.index(row, 0))

    def select_offset(self, step: int) -> None:
        """Move the selection `step` rows in the current sort order (PgUp/PgDown)."""
        current = self.table.currentIndex()
        self.select_row((current.row() if current.isValid() else -1) + step)

    def _select(self, index: QModelIndex | QPersistentModelIndex) -> None:
        self.table.setCurrentIndex(index)
        self.table.scrollTo(index)

    def sort_worst_first(self) -> None:
        self.table.sortByColumn(SOFT_DICE_COLUMN, Qt.SortOrder.AscendingOrder)
        self.select_row(0)

    def visible_order(self) -> list[str]:
        """Item ids in the order the table shows them."""
        return [self.model.rows[self.proxy.mapToSource(self.proxy.index(r, 0)).row()].item_id
                for r in range(self.proxy.rowCount())]

    def _on_current_row(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid():
            self.currentChanged.emit(self.model.rows[self.proxy.mapToSource(current).row()].item_id)
