"""One table for the viewer's region lists (the Defects dock, the Error regions dock, the Profile dock's
operators): rows are plain objects, each column is described by data (`Column`: header, text, sort key,
alignment, tooltip, colour, width), and `RowTable` is the view they all use.

Built for thousands of rows: a new list is one model reset (no widget item per cell), sections are sized once
from a sample text (`Interactive`: the user may drag them; never `ResizeToContents`, which measures every row),
and sorting reorders the model's own rows (a header click; `model.rows` is always the order on screen, so a
row number means the same to the view and to its owner). Owners whose rows take work (Defects, Error regions) make
them only while the dock is on screen (`docking.dock_seen`) and catch up when it is shown.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, Union

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, QPersistentModelIndex, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView, QWidget

R = TypeVar("R")
#: The role a column's sort key is read with (`Column.key`).
SORT_ROLE = Qt.ItemDataRole.UserRole
_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
_Parent = Union[QModelIndex, QPersistentModelIndex]  # noqa: UP007 (run-time alias, Python 3.9)


@dataclass(frozen=True)
class Column(Generic[R]):
    """One column: `text(row)` is shown; `key(row)` sorts (default: the text); `tip(row)` is the cell's
    tooltip; `color(row)` its text colour; `right` aligns numbers; `width` sizes the section once, as pixels or
    as a sample text ("" or 0: Qt's default; the last section stretches)."""

    header: str
    text: Callable[[R], str]
    key: Callable[[R], Any] | None = None
    right: bool = False
    tip: Callable[[R], str] | None = None
    color: Callable[[R], QColor] | None = None
    width: int | str = 0


class RowModel(QAbstractTableModel, Generic[R]):
    """Rows under `columns`; `set_rows` replaces them in one reset (keeping the sort the user chose)."""

    def __init__(self, columns: Sequence[Column[R]], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.columns = tuple(columns)
        self.rows: list[R] = []  # in the order shown
        self._given: list[R] = []  # in the owner's order
        self._order: list[int] = []  # row n shows self._given[self._order[n]]
        self._sort: tuple[int, Qt.SortOrder] = (-1, Qt.SortOrder.AscendingOrder)

    def set_rows(self, rows: Sequence[R]) -> None:
        self.beginResetModel()
        self._given = list(rows)
        self._arrange()
        self.endResetModel()

    def row(self, index: int) -> R:
        return self.rows[index]

    def rowCount(self, parent: _Parent = QModelIndex()) -> int:  # noqa: B008, N802 - Qt's signature
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: _Parent = QModelIndex()) -> int:  # noqa: B008, N802
        return 0 if parent.isValid() else len(self.columns)

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802
                   role: int = Qt.ItemDataRole.DisplayRole) -> object:
        if orientation == Qt.Orientation.Horizontal and role in (Qt.ItemDataRole.DisplayRole,
                                                                Qt.ItemDataRole.ToolTipRole):
            return self.columns[section].header  # (whole on hover where a narrow section cuts it with "…")
        return None

    def data(self, index: _Parent, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        if not index.isValid():
            return None
        row, column = self.rows[index.row()], self.columns[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            return column.text(row)
        if role == SORT_ROLE:
            return self._key(column, row)
        if role == Qt.ItemDataRole.ToolTipRole:  # the text whole (a narrow column cuts it with "…"), then the tip
            text = column.text(row)
            return f"{text}\n{column.tip(row)}" if column.tip is not None else text
        if role == Qt.ItemDataRole.ForegroundRole and column.color is not None:
            return column.color(row)
        if role == Qt.ItemDataRole.TextAlignmentRole and column.right:
            return _RIGHT
        return None

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        """Reorder the rows by `column`'s key (-1: the owner's order); selections follow their rows."""
        self._sort = (column, order)
        self.layoutAboutToBeChanged.emit()
        was = {given: n for n, given in enumerate(self._order)}
        self._arrange()
        now = {was[given]: n for n, given in enumerate(self._order)}  # old row -> new row
        persistent = self.persistentIndexList()
        self.changePersistentIndexList(persistent, [self.index(now[i.row()], i.column()) for i in persistent])
        self.layoutChanged.emit()

    def _arrange(self) -> None:
        column, order = self._sort
        self._order = list(range(len(self._given)))
        if 0 <= column < len(self.columns):
            spec, given = self.columns[column], self._given
            self._order.sort(key=lambda n: self._key(spec, given[n]), reverse=order == Qt.SortOrder.DescendingOrder)
        self.rows = [self._given[n] for n in self._order]

    @staticmethod
    def _key(column: Column[R], row: R) -> Any:
        return column.key(row) if column.key is not None else column.text(row)


class RowTable(QTableView):
    """The view of a `RowModel`: whole rows selected one at a time, read-only, sections sized once from the
    columns' widths; `sortable` lets a header click sort (the model's rows themselves)."""

    def __init__(self, model: RowModel[Any], sortable: bool = False, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setModel(model)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        metrics = self.fontMetrics()
        self.verticalHeader().hide()
        self.verticalHeader().setDefaultSectionSize(metrics.height() + 6)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)  # sized once, never per row
        header.setTextElideMode(Qt.TextElideMode.ElideRight)  # a title cut by a narrow section shows "…"
        for section, column in enumerate(model.columns):
            width = column.width
            if isinstance(width, str) and width:
                width = max(metrics.horizontalAdvance(width), metrics.horizontalAdvance(column.header)) + 24
            if width:
                header.resizeSection(section, int(width))
        header.setStretchLastSection(True)
        if sortable:
            header.setSortIndicator(-1, Qt.SortOrder.AscendingOrder)  # the owner's order until a click
            self.setSortingEnabled(True)
