"""The Review queue dock: the dataset's disagreements between prediction and truth, best first (`core.review`),
each with its image, kind, class, area, score and decision; the entry on screen selected. It draws what the
session's queue holds and asks for an entry by `entryActivated`; the keys and what they do are
`gui/shell/review_queue.py`'s."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QVBoxLayout, QWidget

from ...core.review.queue import ReviewEntry
from ..widgets.row_table import Column, RowModel, RowTable

#: A row: its rank, the entry, its class's name and its standing decision ("" not reviewed).
Row = tuple[int, ReviewEntry, str, str]

COLUMNS: tuple[Column[Row], ...] = (
    Column("#", lambda r: str(r[0]), key=lambda r: r[0], right=True, width="0000"),
    Column("Image", lambda r: r[1].image, width="image000"),
    Column("Kind", lambda r: r[1].kind.replace("_", " "), width="false alarm"),
    Column("Class", lambda r: r[2], width="defect"),
    Column("Area (px)", lambda r: f"{r[1].area:,}", key=lambda r: r[1].area, right=True, width="Area (px)"),
    Column("Score", lambda r: f"{r[1].score:.3f}", key=lambda r: r[1].score, right=True, width="0.000"),
    Column("Decision", lambda r: r[3], width="accept"),
)


class ReviewQueuePanel(QWidget):
    """The list, a summary, and the decision buttons (their actions are the window's)."""

    entryActivated = Signal(object)  # ReviewEntry

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model: RowModel[Row] = RowModel(COLUMNS, self)
        self.summary = QLabel("Run the images that have masks: their disagreements are listed here")
        self.summary.setWordWrap(True)
        self.buttons = [QToolButton() for _ in range(5)]  # accept, remove, keep, undo, next
        self.table = RowTable(self.model)
        self.table.clicked.connect(lambda index: self._activate(index.row()))
        self.table.activated.connect(lambda index: self._activate(index.row()))
        top = QHBoxLayout()
        for button in self.buttons:
            top.addWidget(button)
        top.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.summary)
        layout.addWidget(self.table, 1)

    def show_entries(self, rows: Sequence[Row], current: ReviewEntry | None, summary: str) -> None:
        self.model.set_rows(list(rows))
        self.summary.setText(summary)
        for index, row in enumerate(self.model.rows):
            if current is not None and row[1].key == current.key:
                self.table.selectRow(index)
                break
        else:
            self.table.clearSelection()

    def _activate(self, row: int) -> None:
        if 0 <= row < len(self.model.rows):
            self.entryActivated.emit(self.model.rows[row][1])
