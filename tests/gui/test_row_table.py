"""The one row-table model of the Defects, Review and Profile-ops tables (gui/widgets/row_table.py): columns described
by data, sorting of the model's own rows (selection follows, a new list keeps the sort, -1 is the owner's order),
and sections sized once, never to their contents."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QHeaderView

from segscope.gui.widgets.row_table import SORT_ROLE, Column, RowModel, RowTable

pytestmark = pytest.mark.gui


@dataclass(frozen=True)
class Region:
    kind: str
    area: int


COLUMNS = (
    Column("Kind", lambda r: r.kind, color=lambda r: QColor("red"), width="Kind"),
    Column("Area", lambda r: f"{r.area:,}", key=lambda r: r.area, right=True, tip=lambda r: f"{r.area} px",
           width=90),
)
ROWS = [Region("FN", 1500), Region("FP", 20), Region("FN", 300), Region("FP", 4000)]


def test_cells_come_from_the_column_descriptions(qtbot):
    model = RowModel(COLUMNS)
    model.set_rows(ROWS)
    assert model.rowCount() == 4 and model.columnCount() == 2
    assert [model.headerData(c, Qt.Orientation.Horizontal) for c in range(2)] == ["Kind", "Area"]
    area = model.index(3, 1)
    assert area.data() == "4,000" and area.data(SORT_ROLE) == 4000
    assert area.data(Qt.ItemDataRole.ToolTipRole) == "4,000\n4000 px"  # the text whole, then the tip
    right = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
    assert area.data(Qt.ItemDataRole.TextAlignmentRole) == int(right)
    kind = model.index(0, 0)
    assert kind.data(SORT_ROLE) == "FN"  # the text, where the column has no key
    assert kind.data(Qt.ItemDataRole.ForegroundRole) == QColor("red")
    assert kind.data(Qt.ItemDataRole.TextAlignmentRole) is None and kind.data(Qt.ItemDataRole.ToolTipRole) == "FN"
    assert model.headerData(1, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole) == "Area"  # whole on hover
    assert RowTable(model).horizontalHeader().textElideMode() == Qt.TextElideMode.ElideRight  # cut with "…"


def test_sorting_reorders_the_rows_the_selection_follows_and_a_new_list_keeps_the_sort(qtbot):
    model = RowModel(COLUMNS)
    table = RowTable(model, sortable=True)
    qtbot.addWidget(table)
    model.set_rows(ROWS)
    assert model.rows == ROWS  # the owner's order until a header is clicked
    table.selectRow(1)  # Region("FP", 20)
    table.sortByColumn(1, Qt.SortOrder.DescendingOrder)  # by number, not by text ("4,000" < "300" as text)
    assert [r.area for r in model.rows] == [4000, 1500, 300, 20]
    assert model.rows[table.currentIndex().row()] == Region("FP", 20)
    table.sortByColumn(0, Qt.SortOrder.AscendingOrder)  # equal keys keep the owner's order
    assert model.rows == [ROWS[0], ROWS[2], ROWS[1], ROWS[3]]
    model.set_rows(list(reversed(ROWS)))
    assert model.rows == [ROWS[2], ROWS[0], ROWS[3], ROWS[1]]
    model.sort(-1)
    assert model.rows == list(reversed(ROWS))


def test_sections_are_sized_once_never_to_their_contents(qtbot):
    model = RowModel(COLUMNS)
    table = RowTable(model)
    qtbot.addWidget(table)
    model.set_rows([Region("FN", n) for n in range(1000)])
    header = table.horizontalHeader()
    assert all(header.sectionResizeMode(c) == QHeaderView.ResizeMode.Interactive for c in range(2))
    assert header.sectionSize(0) >= table.fontMetrics().horizontalAdvance("Kind") + 24
    assert header.stretchLastSection()  # the last one takes the rest of the dock
    assert not table.isSortingEnabled() and model.rowCount() == 1000
