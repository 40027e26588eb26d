"""The dataset panel: open a folder (dialog, drag-and-drop, recent list), the sortable image table and the
metric that ranks the images (Worst first; the table gets a column for it when it is not one of its own)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QColor
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

from ...core.metrics import catalogue
from ...core.metrics.catalogue import Metric
from ...core.metrics.scores import ImageMetrics
from ...core.session.views import DONE, UNSAVED_MARK, ItemView
from ..runtime import settings
from ..widgets.compact import shrinkable
from ..widgets.folder_drop import FolderDrop
from ..widgets.shortcuts import with_key

#: The id column is at most this wide (pixels); a longer id is cut in the middle, whole on hover.
IMAGE_COLUMN_MAX = 140
#: What a sort reads of a row besides a metric: its id, its truth, its status.
ID, TRUTH, STATUS = "id", "truth", "status"
#: Changed rows are announced as at most this many ranges of rows (else one range spanning them).
MAX_RANGES = 16
_Parent = Union[QModelIndex, QPersistentModelIndex]  # noqa: UP007 (run-time alias, Python 3.9)


@dataclass
class Row:
    """What the table shows of an image: `core.session.views.ItemView`'s parts (`derived` False: to be read
    again, its image changed)."""

    item_id: str
    status: str = ""
    metrics: ImageMetrics | None = None
    error: str = ""
    truth: str = ""  # the truth it is scored against ("mask_corrected.png", ...)
    truth_kind: str = ""  # in a word ("corrected", ...): the Truth column
    note: str = ""  # why its numbers do not answer for it ("" when they do)
    derived: bool = False

    def take(self, view: ItemView) -> None:
        """Show `view` (in place: a reader holding the row sees it change)."""
        self.status, self.metrics, self.error, self.note = view.status, view.metrics, view.error, view.note
        self.truth, self.truth_kind, self.derived = view.truth, view.truth_kind, True


#: What a row's view is derived by (the session's `item_view`; None: nothing to show, the dataset is gone).
ViewOf = Callable[[str], Optional[ItemView]]
#: Whether a row is shown (a filter; None: every row is).
Accepts = Callable[[Row], bool]
#: Rows derived in one go before a sort or a filter that reads every row; more are derived this many at a time
#: between events, the previous order shown meanwhile (a first Worst first on 100,000 images never freezes).
SLICE_ROWS = 2000
#: What a sort reads of a row: the id, a metric's worst-first key, the truth or the status.
SortBy = Union[str, Metric, None]  # noqa: UP007 (run-time alias, Python 3.9)


class ImageTableModel(QAbstractTableModel):
    """One row per dataset image, in the order the table shows them: sorted by a column (`sort`, as a header
    click asks; metric columns sort worst first in ascending order, images without the value last, ties in
    dataset order) and filtered (`set_filter`). Built for 100,000 images: a row is derived from the session
    (`view_of`) when first read (the rows on screen) and read again after its image changed (`changed`); the
    changed rows are redrawn together (`show_changed`, at the rate the caller chooses). A sort or filter reads
    each row's key once and keeps it, so a change re-sorts from the keys kept, not from the rows."""

    #: The rows shown or their order changed (a sort, a filter, rows that moved or were filtered out).
    arranged = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.metric_columns: list[Metric] = [catalogue.lookup(name) for name in catalogue.BRIEF]
        self._ids: list[str] = []  # in dataset order
        self._rows: list[Row | None] = []  # in dataset order (None: never read)
        self._index: Mapping[str, int] = {}  # id -> dataset row
        self._view_of: ViewOf | None = None
        self._sorted: list[int] = []  # every dataset row, in sort order
        self._order: list[int] = []  # shown row -> dataset row (the sorted rows the filter accepts)
        self._shown: list[int] = []  # dataset row -> shown row (-1: filtered out)
        self._by: SortBy = ID
        self._descending = False
        self._keys: list[Any] | None = None  # per dataset row: the sort key (None: not read yet)
        self._accepts: Accepts | None = None
        self._accepted: list[bool] | None = None  # per dataset row, under the filter (None: not read yet)
        self._underived = 0  # rows not derived yet
        self._next = 0  # every row before this one was derived once (the slices' cursor)
        self._changed: set[int] = set()  # dataset rows changed since the last `show_changed`
        self._waiting: list[Callable[[], object]] = []  # what waits for an order being prepared
        self._slicer = QTimer(self)
        self._slicer.setSingleShot(True)
        self._slicer.timeout.connect(self._prepare)

    # ---------------------------------------------------------------------------------------- columns
    @property
    def truth_column(self) -> int:
        return len(self.metric_columns) + 1

    @property
    def status_column(self) -> int:
        return self.truth_column + 1

    def metric_at(self, column: int) -> Metric | None:
        return self.metric_columns[column - 1] if 0 < column < self.truth_column else None

    def show_ranking(self, metric: Metric) -> int:
        """The column of `metric`: one of the table's own, or a column of its own before Truth (replacing the
        previous ranking's; a sort by that one ends, the rows keep their order)."""
        base = len(catalogue.BRIEF)
        if len(self.metric_columns) > base and self.metric_columns[base] != metric:
            self.beginRemoveColumns(QModelIndex(), base + 1, base + 1)
            if self._by == self.metric_columns[base]:
                self._by, self._keys = None, None
            del self.metric_columns[base:]
            self.endRemoveColumns()
        if metric not in self.metric_columns:
            self.beginInsertColumns(QModelIndex(), base + 1, base + 1)
            self.metric_columns.append(metric)
            self.endInsertColumns()
        return self.metric_columns.index(metric) + 1

    def _sort_by(self, column: int) -> SortBy:
        if column == 0:
            return ID
        metric = self.metric_at(column)
        if metric is not None:
            return metric
        return {self.truth_column: TRUTH, self.status_column: STATUS}.get(column)

    # ------------------------------------------------------------------------------------------- rows
    def set_items(self, item_ids: list[str], view_of: ViewOf | None = None,
                  positions: Mapping[str, int] | None = None) -> None:
        """The dataset's images (in its order), each row derived by `view_of` when first read; `positions`: each
        id's place in `item_ids`, when the caller has it (`Dataset.positions`, made on the listing's thread)."""
        self.beginResetModel()
        self._slicer.stop()
        self._ids = list(item_ids)
        self._rows = [None] * len(item_ids)
        self._index = positions if positions is not None else {item_id: n for n, item_id in enumerate(item_ids)}
        self._view_of = view_of
        self._underived = len(item_ids)
        self._sorted = list(range(len(item_ids)))
        self._keys = self._accepted = None
        self._order, self._shown, self._next, self._changed = list(self._sorted), list(self._sorted), 0, set()
        self.endResetModel()
        self._arrange()

    def row(self, item_id: str) -> Row:
        """The image's row (derived now if it was not yet)."""
        return self._derived(self._index[item_id])

    @property
    def rows(self) -> list[Row]:
        """The rows shown, in the order shown (each derived: for tests and small tables)."""
        return [self._derived(n) for n in self._order]

    def item_at(self, row: int) -> str:
        """The id of the image shown at `row`."""
        return self._ids[self._order[row]]

    def row_of(self, item_id: str) -> int:
        """Where the image is shown (-1: filtered out)."""
        return self._shown[self._index[item_id]]

    def shown_ids(self) -> list[str]:
        """Item ids in the order shown."""
        ids = self._ids
        return [ids[n] for n in self._order]

    @property
    def total(self) -> int:
        return len(self._ids)

    def _derived(self, n: int) -> Row:
        row = self._rows[n]
        if row is None:
            row = self._rows[n] = Row(self._ids[n])
        if not row.derived:
            view = self._view_of(row.item_id) if self._view_of is not None else None
            if view is not None:
                row.take(view)
                self._underived -= 1
        return row

    def changed(self, item_id: str) -> None:
        """What the image's row derives from changed: it is derived again when next read, and redrawn (moved,
        where the sort or the filter says so) by the next `show_changed`."""
        n = self._index.get(item_id)
        if n is None:
            return
        row = self._rows[n]
        if row is not None and row.derived:
            row.derived = False
            self._underived += 1
        self._changed.add(n)

    def show_changed(self) -> None:
        """Redraw the rows changed since the last call (one re-arrangement for all): derived again where the
        sort or the filter reads them, else when the view paints them (the rows on screen)."""
        changed, self._changed = sorted(self._changed), set()
        self._announce(changed)

    def show(self, *views: ItemView) -> None:
        """These images' rows as given (derived by the caller), redrawn at once."""
        changed = []
        for view in views:
            n = self._index.get(view.item_id)
            if n is not None:
                row = self._rows[n]
                if row is None:
                    row = self._rows[n] = Row(view.item_id)
                self._underived -= not row.derived
                row.take(view)
                changed.append(n)
        self._announce(changed)

    def _announce(self, changed: list[int]) -> None:
        """These dataset rows changed: moved if their keys or the filter's answers did, else redrawn."""
        if not changed:
            return
        moved = False
        if self._keys is not None:
            for n in changed:
                key = self._key(n)
                moved = moved or key != self._keys[n]
                self._keys[n] = key
        if self._accepted is not None and self._accepts is not None:
            for n in changed:
                accepted = self._accepts(self._derived(n))
                moved = moved or accepted != self._accepted[n]
                self._accepted[n] = accepted
        if moved and not self._slicer.isActive():
            self._rearrange()
        else:
            self._redraw(changed)

    def _redraw(self, changed: list[int]) -> None:
        """Say that these dataset rows changed, as few ranges of shown rows as they make (one spanning them all
        when they are scattered: the view redraws what it shows either way)."""
        shown = sorted(p for p in (self._shown[n] for n in changed) if p >= 0)
        if not shown:
            return
        runs: list[list[int]] = []
        for p in shown:
            if runs and p == runs[-1][1] + 1:
                runs[-1][1] = p
            else:
                runs.append([p, p])
        if len(runs) > MAX_RANGES:
            runs = [[shown[0], shown[-1]]]
        last = self.status_column
        for first, end in runs:
            self.dataChanged.emit(self.index(first, 0), self.index(end, last))

    def rowCount(self, parent: _Parent = QModelIndex()) -> int:  # noqa: B008, N802 - Qt's signature
        return 0 if parent.isValid() else len(self._order)

    def columnCount(self, parent: _Parent = QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else self.status_column + 1

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802
                   role: int = Qt.ItemDataRole.DisplayRole) -> object:
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

    def data(self, index: _Parent, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        if not index.isValid():
            return None
        column, n = index.column(), self._order[index.row()]
        if column == 0 and role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole):
            return self._ids[n]  # (the id needs no derived row: the first screen of a dataset is quick)
        row, metric = self._derived(n), self.metric_at(column)
        if role == Qt.ItemDataRole.DisplayRole:
            if metric is None:
                return row.truth_kind if column == self.truth_column else row.status
            return "" if row.metrics is None else metric.text(metric.of(row.metrics))
        if role == Qt.ItemDataRole.ToolTipRole:
            why = row.error or row.note  # (the status first: a status cut with "…" is whole on hover)
            return {self.truth_column: row.truth,
                    self.status_column: f"{row.status}: {why}" if why else row.status}.get(column, row.note or None)
        if role == Qt.ItemDataRole.ForegroundRole and metric is not None and row.note:
            return QColor("#9aa0a6")  # numbers that do not answer for the image (stale, being re-scored)
        if role == Qt.ItemDataRole.TextAlignmentRole and metric is not None:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    # ------------------------------------------------------------------------------------ sort, filter
    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        """Sort by `column` (a header click, Worst first); -1 keeps the order shown."""
        self._by = self._sort_by(column)
        self._descending = order == Qt.SortOrder.DescendingOrder
        self._keys = None
        self._arrange()

    def set_filter(self, accepts: Accepts | None) -> None:
        """Show only the rows `accepts` takes (None: every row)."""
        self._accepts = accepts
        self._accepted = None
        self._arrange()

    def when_arranged(self, then: Callable[[], object]) -> None:
        """Call `then` once the order asked for is shown (at once unless it is being prepared)."""
        if self._slicer.isActive():
            self._waiting.append(then)
        else:
            then()

    @property
    def arranging(self) -> bool:
        """Whether an order asked for is being prepared (the previous one is shown meanwhile)."""
        return self._slicer.isActive()

    def _reads_rows(self) -> bool:
        return self._accepts is not None or self._by not in (None, ID)

    def _arrange(self) -> None:
        """Show the order asked for: now when the rows it reads are derived (or few are not), else after
        deriving them a slice at a time."""
        if self._reads_rows() and self._underived > SLICE_ROWS:
            self._slicer.start(0)
        else:
            self._slicer.stop()
            self._prepare()

    def _prepare(self) -> None:
        """Derive the next slice of rows the order reads; once every one is, show the order."""
        if self._reads_rows():
            rows, n, left = self._rows, self._next, SLICE_ROWS
            while n < len(rows) and left:  # (a row changed since, behind the cursor, is derived by its redraw)
                row = rows[n]
                if row is None or not row.derived:
                    self._derived(n)
                    left -= 1
                n += 1
            self._next = n
            if n < len(rows):
                self._slicer.start(0)
                return
        self._rearrange()
        waiting, self._waiting = self._waiting, []
        for then in waiting:
            then()

    def _rearrange(self) -> None:
        self.layoutAboutToBeChanged.emit()
        before = self._order
        persistent = self.persistentIndexList()
        items = [before[i.row()] if 0 <= i.row() < len(before) else -1 for i in persistent]
        self._arrange_now()
        self.changePersistentIndexList(persistent, [
            self.index(self._shown[n], i.column()) if n >= 0 and self._shown[n] >= 0 else QModelIndex()
            for i, n in zip(persistent, items)])
        self.layoutChanged.emit()
        self.arranged.emit()

    def _arrange_now(self) -> None:
        """The order from the keys kept (read for the rows that have none yet): a plain stable sort of the dataset
        order, so equal keys keep it."""
        count = len(self._ids)
        if self._by is not None:
            if self._keys is None:
                self._keys = list(self._ids) if self._by == ID else [self._key(n) for n in range(count)]
            self._sorted = sorted(range(count), key=self._keys.__getitem__, reverse=self._descending)
        if self._accepts is None:
            self._order = list(self._sorted)
        else:
            if self._accepted is None:
                self._accepted = [self._accepts(self._derived(n)) for n in range(count)]
            accepted = self._accepted
            self._order = [n for n in self._sorted if accepted[n]]
        shown = [-1] * count
        for position, n in enumerate(self._order):
            shown[n] = position
        self._shown = shown

    def _key(self, n: int) -> Any:
        by = self._by
        if by == ID:
            return self._ids[n]
        row = self._derived(n)
        if isinstance(by, Metric):
            return by.worst_first_key(by.of(row.metrics))
        return row.truth_kind if by == TRUTH else row.status


class DatasetPanel(FolderDrop, QWidget):
    """`openRequested(Path)` when the user picks a folder; `currentChanged(str)` with the selected item id."""

    openRequested = Signal(Path)
    currentChanged = Signal(str)
    #: the name of the metric the user picked to rank by
    rankingChosen = Signal(str)
    worstFirstAsked = Signal()  # the Worst first button: the binding layer sorts by the session's ranking

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAcceptDrops(True)
        self.model = ImageTableModel(self)

        self.table = QTableView()
        self.table.setModel(self.model)
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
        self.model.layoutChanged.connect(lambda: self.table.scrollTo(self.table.currentIndex()))  # after a re-sort

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
        self.worst_button.clicked.connect(lambda: self.worstFirstAsked.emit())
        self.ranking_combo = shrinkable(QComboBox())
        self.ranking_combo.setToolTip("The metric that ranks the images: Worst first, the next/previous worst "
                                      "keys and the Metrics dock's histogram")
        self.ranking_combo.activated.connect(lambda _index: self.rankingChosen.emit(self.ranking_combo.currentData()))
        self.set_ranking_choices(catalogue.metrics(), catalogue.lookup(catalogue.DEFAULT_RANKING))
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

    def folder_dropped(self, folder: Path) -> None:
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

    def set_dataset(self, root: Path, item_ids: list[str], view_of: ViewOf | None = None,
                    positions: Mapping[str, int] | None = None) -> None:
        """Show the dataset's images, each row derived by `view_of` when first read (`ImageTableModel.set_items`)."""
        self.path_label.setText(str(root))
        self.path_label.setToolTip(str(root))
        self.model.set_items(item_ids, view_of, positions)
        self._ids = item_ids
        self._size_columns()

    def current_item(self) -> str | None:
        index = self.table.currentIndex()
        if not index.isValid():
            return None
        return self.model.item_at(index.row())

    def select_item(self, item_id: str) -> None:
        """Make `item_id` the current image: its row selected, or (filtered out) the image asked for all the same."""
        row = self.model.row_of(item_id)
        if row < 0:
            self.table.clearSelection()
            self.currentChanged.emit(item_id)
            return
        self._select(self.model.index(row, 0))

    def select_row(self, row: int) -> None:
        if 0 <= row < self.model.rowCount():
            self._select(self.model.index(row, 0))

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
        self.ranking_combo.setCurrentIndex(self.ranking_combo.findData(metric.name))
        self.worst_button.setToolTip(with_key(f"Sort by {metric.label}, worst first", "worst_first"))
        self.model.show_ranking(metric)
        self._size_columns()

    def sort_worst_first(self, ranking: Metric) -> None:
        """Sort by the ranking metric (the session's), worst first, and select the worst (once the order is shown:
        on a large dataset it may be prepared a slice at a time)."""
        self.table.sortByColumn(self.model.show_ranking(ranking), Qt.SortOrder.AscendingOrder)
        self.model.when_arranged(lambda: self.select_row(0))

    def visible_order(self) -> list[str]:
        """Item ids in the order the table shows them."""
        return self.model.shown_ids()

    def rows_on_screen(self) -> list[str]:
        """The ids of the rows the table shows now, top to bottom (what to score or restore first)."""
        view, rows = self.table.viewport(), self.model.rowCount()
        top = max(self.table.rowAt(0), 0)
        bottom = self.table.rowAt(view.height() - 1)
        bottom = rows - 1 if bottom < 0 else bottom
        return [self.model.item_at(row) for row in range(top, min(bottom + 1, rows))]

    def _on_current_row(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid():
            self.currentChanged.emit(self.model.item_at(current.row()))
