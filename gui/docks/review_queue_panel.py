"""The Review queue dock: the dataset's disagreements between prediction and truth, best first (`core.review`),
each with its image, kind, class, area, score and decision; or, once the model is compared with another
("Compare with…", `core.review.compare`), the places where the two runs differ, the most different image first,
with the gate's verdict. The entry on screen is selected. It draws what the session's queues hold and asks for an
entry by `entryActivated` (a `ReviewEntry` or a `ParityEntry`); the keys and what they do are
`gui/shell/review_queue.py`'s."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from PySide6.QtCore import Signal
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QToolButton, QVBoxLayout, QWidget

from ...core.backends.registry import CHOSEN_KINDS
from ...core.review.compare import LOW_DICE, ParityEntry, Preview
from ...core.review.queue import ReviewEntry
from ..widgets.colormaps import label_lut
from ..widgets.row_table import Column, RowModel, RowTable

#: A row: its rank, the entry, its class's name and its standing decision ("" not reviewed).
Row = tuple[int, ReviewEntry, str, str]
#: A row of two runs compared: its rank, the entry, its class as said ("crack", "crack → pore").
ParityRow = tuple[int, ParityEntry, str]
#: The backend choice meaning B runs on the backend A runs on.
SAME_BACKEND = "same backend"
#: The preview's height on screen (pixels): the place scaled up by a whole factor to about this.
PREVIEW_HEIGHT = 64
#: The frame around each run's half of the preview (RGBA, light grey).
FRAME = (160, 160, 160, 255)

COLUMNS: tuple[Column[Row], ...] = (
    Column("#", lambda r: str(r[0]), key=lambda r: r[0], right=True, width="0000"),
    Column("Image", lambda r: r[1].image, width="image000"),
    Column("Kind", lambda r: r[1].kind.replace("_", " "), width="false alarm"),
    Column("Class", lambda r: r[2], width="defect",
           tip=lambda r: "true class → predicted class: A repaints it, D clears it" if r[1].kind == "wrong_class"
           else "the class of the disagreeing components"),
    Column("Area (px)", lambda r: f"{r[1].area:,}", key=lambda r: r[1].area, right=True, width="Area (px)"),
    Column("Score", lambda r: f"{r[1].score:.3f}", key=lambda r: r[1].score, right=True, width="0.000"),
    Column("Decision", lambda r: r[3], width="accept"),
)


def _dice(entry: ParityEntry) -> str:
    return "n/a" if math.isnan(entry.dice) else f"{entry.dice:.4f}"


PARITY_COLUMNS: tuple[Column[ParityRow], ...] = (
    Column("#", lambda r: str(r[0]), key=lambda r: r[0], right=True, width="0000"),
    Column("Image", lambda r: r[1].image, width="image000"),
    Column("Kind", lambda r: "low Dice" if r[1].kind == LOW_DICE else r[1].kind, width="changed",
           tip=lambda r: {"lost": "A has a defect here, B none", "gained": "B has a defect here, A none",
                          "changed": "both have a defect here, of another class in B"}.get(
               r[1].kind, "no defect flips, but the image's Dice between the runs is under the gate's")),
    Column("Class (A → B)", lambda r: r[2], width="defect → defect"),
    Column("Area (px)", lambda r: f"{r[1].area:,}", key=lambda r: r[1].area, right=True, width="Area (px)"),
    Column("Image Dice", lambda r: _dice(r[1]), key=lambda r: -1.0 if math.isnan(r[1].dice) else r[1].dice,
           right=True, width="0.0000"),
)


class ReviewQueuePanel(QWidget):
    """The list (the truth's queue, or two runs compared), a summary, the decision buttons and the comparison's
    controls (their actions are the window's); `backend_kind()` is B's backend as chosen here."""

    entryActivated = Signal(object)  # ReviewEntry or ParityEntry

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model: RowModel[Row] = RowModel(COLUMNS, self)
        self.parity_model: RowModel[ParityRow] = RowModel(PARITY_COLUMNS, self)
        self.summary = QLabel("Run the images that have masks: their disagreements are listed here")
        self.summary.setWordWrap(True)
        self.buttons = [QToolButton() for _ in range(5)]  # accept, remove, keep, undo, next
        self.compare_buttons = [QToolButton() for _ in range(3)]  # compare with…, cancel, back to the truth's
        self.kind_combo = QComboBox()
        self.kind_combo.addItems([SAME_BACKEND, *CHOSEN_KINDS])
        self.kind_combo.setToolTip("B's backend when comparing: the backend the model on screen runs on, or another "
                                   "(e.g. embedded against mindx-model for one model's two ports)")
        self.table = RowTable(self.model)
        self.parity_table = RowTable(self.parity_model)
        self.parity_table.hide()
        self.preview = QLabel()  # the place on screen in both runs: A | B
        self.preview.setToolTip("The place in both runs, coloured by class as the panels colour them: A (the results "
                                "on screen) left, B right")
        self.preview_caption = QLabel("The place in\nA (left) | B (right)")
        self.preview_caption.setToolTip(self.preview.toolTip())
        self.preview.hide()
        self.preview_caption.hide()
        for table, model in ((self.table, self.model), (self.parity_table, self.parity_model)):
            table.clicked.connect(lambda index, m=model: self._activate(m, index.row()))
            table.activated.connect(lambda index, m=model: self._activate(m, index.row()))
        top = QHBoxLayout()
        for button in self.buttons:
            top.addWidget(button)
        top.addStretch(1)
        compare = QHBoxLayout()
        compare.addWidget(self.compare_buttons[0])
        compare.addWidget(QLabel("on"))
        compare.addWidget(self.kind_combo)
        for button in self.compare_buttons[1:]:
            compare.addWidget(button)
        compare.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addLayout(compare)
        layout.addWidget(self.summary)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.parity_table, 1)
        shown = QHBoxLayout()
        shown.addWidget(self.preview_caption)
        shown.addWidget(self.preview)
        shown.addStretch(1)
        layout.addLayout(shown)

    def backend_kind(self) -> str | None:
        """B's backend kind as chosen (None: the one the model on screen runs on)."""
        text = self.kind_combo.currentText()
        return None if text == SAME_BACKEND else text

    def show_entries(self, rows: Sequence[Row], current: ReviewEntry | None, summary: str) -> None:
        """The truth's queue."""
        self._showing(parity=False)
        self.model.set_rows(list(rows))
        self.summary.setText(summary)
        self.summary.setToolTip("")
        self._select(self.table, [row[1].key for row in self.model.rows], current.key if current else None)

    def show_parity(self, rows: Sequence[ParityRow], current: ParityEntry | None, summary: str, tip: str) -> None:
        """Two runs compared (`tip`: the gate's rule and the keys, on hover over the summary)."""
        self._showing(parity=True)
        self.parity_model.set_rows(list(rows))
        self.summary.setText(summary)
        self.summary.setToolTip(tip)
        self._select(self.parity_table, [row[1].key for row in self.parity_model.rows],
                     current.key if current else None)
        self._show_preview(current.preview if current is not None else None)

    def _show_preview(self, preview: Preview | None) -> None:
        """A's and B's classes in the place side by side (a white gap between), scaled up by a whole factor."""
        self.preview_caption.setVisible(preview is not None)
        if preview is None:
            self.preview.hide()
            return
        ours, theirs = preview
        lut = label_lut()
        scale = max(1, PREVIEW_HEIGHT // max(ours.shape[0], 1))
        # each run framed (a place all background is the dock's own colour), a white gap between
        ours_rgba, theirs_rgba = (_framed(lut[labels].repeat(scale, 0).repeat(scale, 1)) for labels in (ours, theirs))
        gap = np.full((ours_rgba.shape[0], max(2, ours_rgba.shape[1] // 16), 4), 255, np.uint8)
        rgba = np.ascontiguousarray(np.concatenate([ours_rgba, gap, theirs_rgba], axis=1))
        height, width = rgba.shape[:2]
        image = QImage(rgba.data, width, height, 4 * width, QImage.Format.Format_RGBA8888).copy()
        self.preview.setPixmap(QPixmap.fromImage(image))
        self.preview.show()

    def _showing(self, parity: bool) -> None:
        if not parity:
            self.preview.hide()
            self.preview_caption.hide()
        self.table.setVisible(not parity)
        self.parity_table.setVisible(parity)
        for button in self.buttons[:4]:  # (a flip between two runs changes no truth: nothing to decide)
            button.setVisible(not parity)
        self.compare_buttons[1].setVisible(parity)
        self.compare_buttons[2].setVisible(parity)

    @staticmethod
    def _select(table: RowTable, keys: list[str], current: str | None) -> None:
        if current is not None and current in keys:
            table.selectRow(keys.index(current))
        else:
            table.clearSelection()

    def _activate(self, model: RowModel, row: int) -> None:  # type: ignore[type-arg]
        if 0 <= row < len(model.rows):
            self.entryActivated.emit(model.rows[row][1])


def _framed(rgba: np.ndarray) -> np.ndarray:
    """`rgba` inside a one-pixel `FRAME`."""
    framed = np.empty((rgba.shape[0] + 2, rgba.shape[1] + 2, 4), np.uint8)
    framed[:] = FRAME
    framed[1:-1, 1:-1] = rgba
    return framed
