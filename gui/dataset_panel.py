"""The dataset panel: open a folder (dialog, drag-and-drop, recent list), the sortable image table and the
metric that ranks the images (Worst first; the table gets a column for it when it is not one of its own)."""

from __future__ import annotations

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
from PySide6.QtGui import QColor, QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
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

from ..core.metrics import catalogue
from ..core.metrics.catalogue import Metric
from ..core.metrics.scores import ImageMetrics
from ..core.session.views import DONE, UNSAVED_MARK, ItemView
from . import settings
from .compact import shrinkable
from .shortcuts import with_key

#: The metrics come right after the id, so a narrow dock still shows them; the status is last.
TABLE_METRICS = ("soft_dice", "foreground_dice", "foreground_iou")
#: The id column is at most this wide (pixels); a longer id is cut in the middle, whole on hover.
IMAGE_COLUMN_MAX = 140


@dataclass
class Row:
    """What the table shows of an image: `core.session.views.ItemView`'s parts."""

    item_id: str
    status: str = ""
    metrics: ImageMetrics | None = None
    error: str = ""
    truth: str = ""  # the truth it is scored against ("mask_corrected.png", ...)
    truth_kind: str = ""  # in a word ("corrected", ...): the Truth column
    note: str = ""  # why its numbers do not answer for it ("" when they do)


class ImageTableModel(QAbstractTableModel):
    """One row per dataset image; the metric columns (`metric_columns`: the table's own, then the ranking
    metric when it is another) sort worst first in ascending order, images without the value last."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.rows: list[Row] = []
        self._index: dict[str, int] = {}
        self.metric_columns: list[Metric] = [catalogue.lookup(name) for name in TABLE_METRICS]

    @property
    def truth_column(self) -> int:
        return len(self.metric_columns) + 1

    @property
    def status_column(self) -> int:
        return self.truth_column + 1

    def metric_at(self, column: int) -> Metric | None:
        return self.metric_columns[column - 1] if 0 < column < self.truth_column else None

    def show_ranking(self, metric: Metric) -> int:
        """The column of `metric`: one of the table's own, or a column of its own before Status (replacing the
        previous ranking's)."""
        base = len(TABLE_METRICS)
        if len(self.metric_columns) > base and self.metric_columns[base] != metric:
            self.beginRemoveColumns(QModelIndex(), base + 1, base + 1)
            del self.metric_columns[base:]
            self.endRemoveColumns()
        if metric not in self.metric_columns:
            self.beginInsertColumns(QModelIndex(), base + 1, base + 1)
            self.metric_columns.append(metric)
            self.endInsertColumns()
        return self.metric_columns.index(metric) + 1

    def set_items(self, item_ids: list[str]) -> None:
        self.beginResetModel()
        self.rows = [Row(i) for i in item_ids]
        self._index = {r.item_id: n for n, r in enumerate(self.rows)}
        self.endResetModel()

    def row(self, item_id: str) -> Row:
        return self.rows[self._index[item_id]]

    def source_index(self, item_id: str) -> QModelIndex:
        return self.index(self._index[item_id], 0)

    def show(self, view: ItemView) -> None:
        """An image's row as the session derives it."""
        n = self._index[view.item_id]
        row = self.rows[n]  # (in place: a reader holding the row sees it change)
        row.status, row.metrics, row.error, row.note = view.status, view.metrics, view.error, view.note
        row.truth, row.truth_kind = view.truth, view.truth_kind
        self.dataChanged.emit(self.index(n, 0), self.index(n, self.status_column))

    def has(self, item_id: str) -> bool:
        return item_id in self._index

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: B008 - Qt's signature
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else self.status_column + 1

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation != Qt.Orientation.Horizontal:
            return None
        metric = self.metric_at(section)
        if role == Qt.ItemDataRole.DisplayRole:
            return metric.title if metric else {0: "Image", self.truth_column: "Truth"}.get(section, "Status")
        if role == Qt.ItemDataRole.ToolTipRole:
            if metric:
                return f"{metric.label}: {metric.description}"
            return {0: "Image id (sub-folder or file name)",
                    self.truth_column: "The ground truth the numbers are scored against: the original mask, a saved "
                                       "correction (mask_corrected.png) or unsaved edits (on screen, or recovered "
                                       "after a crash); no mask: none"}.get(
                section, "queued / done / whole slide / ROI changed / other model / error (· unsaved: edits)")
        return None

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):  # type: ignore[override]
        if not index.isValid():
            return None
        row, column = self.rows[index.row()], index.column()
        metric = self.metric_at(column)
        text = {0: row.item_id, self.truth_column: row.truth_kind, self.status_column: row.status}
        if role == Qt.ItemDataRole.DisplayRole:
            if metric is None:
                return text[column]
            return "" if row.metrics is None else metric.text(metric.of(row.metrics))
        if role == Qt.ItemDataRole.UserRole:  # sort key: ascending is worst first, n/a and not run last
            if metric is None:
                return text[column]
            return metric.worst_first_key(metric.of(row.metrics))
        if role == Qt.ItemDataRole.ToolTipRole:
            why = row.error or row.note  # (the status first: a status cut with "…" is whole on hover)
            return {0: row.item_id, self.truth_column: row.truth,
                    self.status_column: f"{row.status}: {why}" if why else row.status}.get(column, row.note or None)
        if role == Qt.ItemDataRole.ForegroundRole and metric is not None and row.note:
            return QColor("#9aa0a6")  # numbers that do not answer for the image (stale, being re-scored)
        if role == Qt.ItemDataRole.TextAlignmentRole and metric is not None:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


class DatasetPanel(QWidget):
    """`openRequested(Path)` when the user picks a folder; `currentChanged(str)` with the selected item id."""

    openRequested = Signal(Path)
    currentChanged = Signal(str)
    #: the name of the metric the user picked to rank by
    rankingChosen = Signal(str)

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
        header.setMinimumSectionSize(24)
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 8)
        self._ids: list[str] = []
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
        self.worst_button.clicked.connect(self.sort_worst_first)
        self.ranking_combo = shrinkable(QComboBox())
        self.ranking_combo.setToolTip("The metric that ranks the images: Worst first, the next/previous worst "
                                      "keys and the Metrics dock's histogram")
        self.ranking_combo.activated.connect(lambda _index: self.rankingChosen.emit(self.ranking_combo.currentData()))
        self.ranking = catalogue.lookup(catalogue.DEFAULT_RANKING)
        self.set_ranking_choices(catalogue.metrics(), self.ranking)
        self.path_label = QLabel("Drop a dataset folder here")
        self.path_label.setWordWrap(True)
        self.path_label.setStyleSheet("color: #9aa0a6;")

        top = QHBoxLayout()
        top.addWidget(self.open_button)
        top.addWidget(self.worst_button)
        top.addWidget(QLabel("by"))
        top.addWidget(self.ranking_combo, 1)
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
    def _size_columns(self) -> None:
        """Numbers at their width, the id column at the longest of the first ids (capped), the status what is
        left, at least "done · unsaved"; the table (so the dock) is never narrower than that."""
        metrics, header, model = self.table.fontMetrics(), self.table.horizontalHeader(), self.model

        def width(texts: list[str]) -> int:
            return max(metrics.horizontalAdvance(t) for t in texts) + 16

        # The status takes what is left, down to the minimum, never past the view (a stretched last section would
        # keep Qt's default 100 px and run out of a narrow dock, cut: "ROI chang").
        header.setSectionResizeMode(model.status_column, QHeaderView.ResizeMode.Stretch)
        header.resizeSection(0, min(width(["Image", *self._ids[:200]]), IMAGE_COLUMN_MAX))
        for column in range(1, model.truth_column):
            header.resizeSection(column, width([str(model.headerData(column, Qt.Orientation.Horizontal)), "0.0000"]))
        header.resizeSection(model.truth_column, width(["corrected"]))
        self.table.setMinimumWidth(sum(header.sectionSize(c) for c in range(model.status_column))
                                   + width([DONE + UNSAVED_MARK])  # the status of an edited image, whole
                                   + 2 * self.table.frameWidth() + self.table.verticalScrollBar().sizeHint().width())

    def set_dataset(self, root: Path, item_ids: list[str]) -> None:
        self.path_label.setText(str(root))
        self.path_label.setToolTip(str(root))
        self.model.set_items(item_ids)
        self._ids = item_ids
        self._size_columns()

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

    def set_ranking_choices(self, choices: list[Metric], current: Metric) -> None:
        """The metrics offered to rank by (every metric, per class for the model's classes) and the current one."""
        self.ranking_combo.clear()
        for metric in choices:
            self.ranking_combo.addItem(metric.label, metric.name)
            self.ranking_combo.setItemData(self.ranking_combo.count() - 1, metric.description,
                                           Qt.ItemDataRole.ToolTipRole)
        self.show_ranking(current)

    def show_ranking(self, metric: Metric) -> None:
        """Rank by `metric` from now on (the session says which; the table gets its column if it needs one)."""
        self.ranking = metric
        self.ranking_combo.setCurrentIndex(self.ranking_combo.findData(metric.name))
        self.worst_button.setToolTip(with_key(f"Sort by {metric.label}, worst first", "worst_first"))
        self.model.show_ranking(metric)
        self._size_columns()

    def sort_worst_first(self) -> None:
        self.table.sortByColumn(self.model.show_ranking(self.ranking), Qt.SortOrder.AscendingOrder)
        self.select_row(0)

    def visible_order(self) -> list[str]:
        """Item ids in the order the table shows them."""
        return [self.model.rows[self.proxy.mapToSource(self.proxy.index(r, 0)).row()].item_id
                for r in range(self.proxy.rowCount())]

    def _on_current_row(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid():
            self.currentChanged.emit(self.model.rows[self.proxy.mapToSource(current).row()].item_id)
