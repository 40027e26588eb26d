"""The Defects dock: every predicted and true defect (connected component) of the current image, with its
area, its IoU with its match and whether it was found (TP), is a false alarm (FP) or was missed (FN).

A click (or Enter) on a row asks to zoom to it (`defectActivated`, the box in slide pixels); `step_miss`
walks the misses in the list's order (a header click sorts it). The rows come from `core.quality.defects` via
the image's QA metrics; `QualityTools` (gui/shell/quality_tools.py) decides what is shown and where a zoom goes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSizePolicy, QToolButton, QVBoxLayout, QWidget

from ...core.quality.defects import Defect
from ...core.quality.spec import ImageQuality
from ...core.roi import Roi
from ...core.wording import class_name, plural
from ..widgets.row_table import Column, RowModel, RowTable

#: The list's order: misses first, then false alarms, then what was found; larger first within each.
OUTCOME_ORDER = {"FN": 0, "merged": 1, "FP": 2, "split": 3, "TP": 4}  # see core.quality.defects
MISSES = ("FN", "merged")
SHOWS = {"All defects": tuple(OUTCOME_ORDER), "Misses (FN)": MISSES, "False alarms (FP)": ("FP",),
         "Fragments (split)": ("split",), "Found (TP)": ("TP",)}


@dataclass(frozen=True)
class DefectRow:
    class_name: str
    defect: Defect
    box: Roi  # slide pixels


def defect_rows(quality: ImageQuality | None, roi: Roi, class_names: Sequence[str]) -> list[DefectRow]:
    """The rows of an image's defects (none without defect metrics), in `OUTCOME_ORDER`, larger first."""
    rows = []
    for index, match in (quality.defects.items() if quality is not None else ()):
        name = class_name(class_names, index)
        for defect in match.defects:
            x0, y0, x1, y1 = defect.box
            rows.append(DefectRow(name, defect, Roi(roi.x0 + x0, roi.y0 + y0, roi.x0 + x1, roi.y0 + y1)))
    return sorted(rows, key=lambda r: (OUTCOME_ORDER[r.defect.outcome], -r.defect.area, r.box.y0, r.box.x0))


def _tip(row: DefectRow) -> str:
    defect = row.defect
    partner = "its match" if defect.matched else "its best overlap (below 0.5: no match)"
    return f"{defect.source} defect of {defect.area:,} px; IoU with {partner}: {defect.iou:.3f}"


COLUMNS: tuple[Column[DefectRow], ...] = (
    Column("Kind", lambda r: r.defect.outcome, key=lambda r: OUTCOME_ORDER[r.defect.outcome], tip=_tip,
           width="Kind"),
    Column("Class", lambda r: r.class_name, tip=_tip, width="defect"),
    Column("In", lambda r: r.defect.source, tip=_tip, width="prediction"),
    Column("Area (px)", lambda r: f"{r.defect.area:,}", key=lambda r: r.defect.area, right=True, tip=_tip,
           width="Area (px)"),
    Column("IoU", lambda r: f"{r.defect.iou:.2f}", key=lambda r: r.defect.iou, right=True, tip=_tip, width="0.00"),
    Column("Box (slide px)", lambda r: f"{r.box.x0},{r.box.y0} {r.box.width}x{r.box.height}",
           key=lambda r: (r.box.y0, r.box.x0), tip=_tip),
)


class DefectsPanel(QWidget):
    """The table, a filter by kind, and previous/next miss buttons (their actions are the window's)."""

    defectActivated = Signal(object)  # Roi in slide pixels

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model: RowModel[DefectRow] = RowModel(COLUMNS, self)
        self._all: list[DefectRow] = []
        self.show_combo = QComboBox()
        self.show_combo.addItems(list(SHOWS))
        self.show_combo.setToolTip("Which defects the list shows")
        self.show_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.show_combo.setMinimumContentsLength(8)
        self.show_combo.currentIndexChanged.connect(lambda _i: self._apply())
        self.prev_button, self.next_button = QToolButton(), QToolButton()
        self.summary = QLabel("")
        self.summary.setWordWrap(True)
        # never squeezed below its wrapped lines (the table gives the height up instead: it scrolls)
        self.summary.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        self.table = RowTable(self.model, sortable=True)
        self.table.clicked.connect(lambda index: self.activate(index.row()))
        self.table.activated.connect(lambda index: self.activate(index.row()))
        top = QHBoxLayout()
        top.addWidget(self.show_combo, 1)
        top.addWidget(self.prev_button)
        top.addWidget(self.next_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(top)
        layout.addWidget(self.summary)
        layout.addWidget(self.table, 1)

    def show_defects(self, rows: list[DefectRow], note: str = "") -> None:
        """The current image's defects (`defect_rows`); `note` says why there are none to show."""
        self._all = rows
        counts = {kind: sum(1 for r in rows if r.defect.outcome == kind) for kind in OUTCOME_ORDER}
        self.summary.setText(note or f"{counts['TP']} found, {counts['FN'] + counts['merged']} missed ("
                                     f"{counts['merged']} merged), {plural(counts['FP'], 'false alarm')}, "
                                     f"{plural(counts['split'], 'fragment')} (click one to zoom, N / Shift+N: next "
                                     "/ previous miss)")
        self._apply()

    def _apply(self) -> None:
        kinds = SHOWS[self.show_combo.currentText()]
        self.model.set_rows([r for r in self._all if r.defect.outcome in kinds])

    def activate(self, row: int) -> None:
        if 0 <= row < len(self.model.rows):
            self.table.selectRow(row)
            self.defectActivated.emit(self.model.rows[row].box)

    def step_miss(self, offset: int) -> DefectRow | None:
        """Select and zoom to the miss `offset` places from the selected row (wrapping); None without misses."""
        if not set(MISSES) <= set(SHOWS[self.show_combo.currentText()]):
            self.show_combo.setCurrentText("All defects")
        rows = self.model.rows
        misses = [i for i, r in enumerate(rows) if r.defect.outcome in MISSES]
        if not misses:
            return None
        current = self.table.currentIndex().row()
        after = [i for i in misses if (i > current if offset > 0 else i < current)]
        target = (after[0] if offset > 0 else after[-1]) if after else (misses[0] if offset > 0 else misses[-1])
        self.activate(target)
        return rows[target]
