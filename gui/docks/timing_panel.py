"""Where time goes: a stacked-bar timeline of the current image's runs and the dataset's per-stage table.

The table is `core.session.runs.timing_table` over the newest run of each image (optionally of one backend), the
CSV export is `core.session.runs.write_timing_csv`. "render" is what the GUI adds after the backend's stages: the
time from the result's arrival until the panels hold it, measured for a single run only (see gui/shell/inspection.py).
Each stage says what it measures on hover (`STAGE_MEANINGS`).
"""

from __future__ import annotations

from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ...core.errors import SegScopeError
from ...core.session.runs import STAGE_ORDER, RunHistory, RunRecord, StageStats, timing_table, write_timing_csv
from ..widgets import colormaps
from ..widgets.compact import shrinkable

#: Runs of one image drawn in the timeline, newest at the top.
TIMELINE_RUNS = 4
#: What each stage measures, shown on hover in the table and the legend.
STAGE_MEANINGS = {
    "upload": "sending the image (or its ROI) to the remote host",
    "decode": "reading and decoding the image file, as the stream's image decoder does",
    "crop": "cutting the ROI out of the decoded image",
    "resize": "resizing the ROI to the model's input size",
    "preprocess": "making the model's input tensor: the card's AIPP or scale, mean and std",
    "infer": "the model itself (on an NPU: the API call around it)",
    "device": "the NPU's own time for the model, as ais_bench reports it",
    "postprocess": "turning the model's outputs into probabilities and classes",
    "download": "bringing the result back from the remote host",
    "render": "the viewer: from the result's arrival until the result panels showed it (a single Run only; "
              "during Run all a result waits behind the others, which says nothing about drawing)",
    "total": "the run's stages added up",
}


def stage_color(stage: str) -> tuple[int, int, int]:
    """A fixed colour per known stage (the same in every run), grey for others."""
    return colormaps.series_color(STAGE_ORDER.index(stage)) if stage in STAGE_ORDER else (120, 120, 120)


class TimingPanel(QWidget):
    """`refresh(image_id)` redraws from the history; `message(level, text)` reports exports."""

    message = Signal(str, str)

    def __init__(self, history: RunHistory, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.history = history
        self.stats: list[StageStats] = []
        self.image_id: str | None = None

        self.plot = pg.PlotWidget()
        self.plot.setMenuEnabled(False)
        self.plot.setMouseEnabled(x=True, y=False)
        self.plot.setToolTip("Each run of the current image (newest at the top): its stages from the start, in ms")
        self.plot.setMinimumHeight(100)
        self.plot.showGrid(x=True, alpha=0.2)
        self.legend = QLabel("")
        self.legend.setMinimumWidth(1)  # never widens the dock: a long run's line wraps instead of being cut
        self.legend.setWordWrap(True)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setStyleSheet("font-size: 11px;")

        self.backend_combo = shrinkable(QComboBox())
        self.backend_combo.setToolTip("Which runs the table summarises: the newest run of each image")
        self.backend_combo.currentIndexChanged.connect(lambda _i: self._fill_table())
        self.export_button = QPushButton("Export CSV…")
        self.export_button.setToolTip("Save the table (stage, runs, mean_ms, p95_ms) as CSV")
        self.export_button.clicked.connect(self.choose_and_export)
        self.table_label = QLabel("")
        self.table = QTableWidget(0, 4)
        self.table.setHorizontalHeaderLabels(["Stage", "Runs", "Mean (ms)", "p95 (ms)"])
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.table.setToolTip("Per-stage mean and 95th percentile over the newest run of each image")

        controls = QHBoxLayout()
        controls.addWidget(QLabel("Dataset"))
        controls.addWidget(self.backend_combo, 1)
        controls.addWidget(self.table_label)
        controls.addWidget(self.export_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.plot, 2)
        layout.addWidget(self.legend)
        layout.addLayout(controls)
        layout.addWidget(self.table, 3)
        self.refresh(None)

    # ------------------------------------------------------------------------------------- public API
    def refresh(self, image_id: str | None) -> None:
        """Redraw the timeline of `image_id`'s runs and the dataset table (after new runs: it reads every image's)."""
        self._fill_backends()
        self.show_image(image_id)
        self._fill_table()

    def show_image(self, image_id: str | None) -> None:
        """Redraw the timeline of `image_id`'s runs only (another image is shown: the table stays as it is)."""
        self.image_id = image_id
        self._draw_timeline(self.history.for_image(image_id)[-TIMELINE_RUNS:] if image_id else [])

    def backend(self) -> str | None:
        """The backend the table is restricted to (None: all)."""
        return self.backend_combo.currentData()

    def export_csv(self, path: Path, overwrite: bool = False) -> Path:
        """Write the table shown; refuses to replace a file unless `overwrite` (SegScopeError)."""
        if not self.stats:
            raise SegScopeError("timing table: no runs yet; run some images first")
        return write_timing_csv(self.stats, Path(path), overwrite)

    def choose_and_export(self) -> None:
        name, _ = QFileDialog.getSaveFileName(self, "Export the timing table", "timings.csv", "CSV (*.csv)")
        if not name:
            return
        path = Path(name)
        try:  # the file dialog has asked before choosing an existing file
            self.export_csv(path, overwrite=path.exists())
        except SegScopeError as exc:
            self.message.emit("error", f"Timing export: {exc}")
            return
        self.message.emit("info", f"Timing table written to {path}")

    # ------------------------------------------------------------------------------------- internals
    def _fill_backends(self) -> None:
        backends = sorted({r.backend for r in self.history})
        current = self.backend_combo.currentData()
        if [self.backend_combo.itemData(i) for i in range(1, self.backend_combo.count())] == backends:
            return
        self.backend_combo.blockSignals(True)
        self.backend_combo.clear()
        self.backend_combo.addItem("all backends", None)
        for name in backends:
            self.backend_combo.addItem(name or "unknown", name)
        self.backend_combo.setCurrentIndex(max(self.backend_combo.findData(current), 0))
        self.backend_combo.blockSignals(False)

    def _fill_table(self) -> None:
        records = self.history.latest_per_image(self.backend())
        self.stats = timing_table(records)
        self.table_label.setText(f"{len(records)} images" if records else "no runs yet")
        self.table.setRowCount(len(self.stats))
        for row, s in enumerate(self.stats):
            for col, text in enumerate((s.stage, str(s.runs), f"{s.mean * 1000:.1f}", f"{s.p95 * 1000:.1f}")):
                item = QTableWidgetItem(text)
                item.setToolTip(f"{s.stage}: {meaning(s.stage)}")
                if col:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(row, col, item)
        self.export_button.setEnabled(bool(self.stats))

    def _draw_timeline(self, records: list[RunRecord]) -> None:
        self.plot.clear()
        rows = list(reversed(records))  # newest first, drawn at the top
        bars: dict[str, tuple[list[float], list[float], list[float]]] = {}
        for y, record in enumerate(rows):
            for stage, start, duration in record.timeline():
                x0, widths, ys = bars.setdefault(stage, ([], [], []))
                x0.append(start * 1000)
                widths.append(duration * 1000)
                ys.append(-y)
        for stage, (x0, widths, ys) in bars.items():
            self.plot.addItem(pg.BarGraphItem(x0=x0, width=widths, y=ys, height=0.6,
                                              brush=pg.mkBrush(stage_color(stage)), pen=pg.mkPen(None)))
        self.plot.getAxis("left").setTicks([[(-y, f"#{r.id} {r.backend}") for y, r in enumerate(rows)], []])
        if rows:
            self.plot.setYRange(-len(rows) + 0.5, 0.5, padding=0.05)
            self.plot.setXRange(0, max(r.total_time for r in rows) * 1000, padding=0.02)
        self.legend.setText("<br>".join(map(_legend, rows)) if rows else "No run of this image yet")
        stages = dict.fromkeys(stage for record in rows for stage, _start, _duration in record.timeline())
        self.legend.setToolTip("<br>".join(f"<b>{stage}</b>: {meaning(stage)}" for stage in stages)
                               + "<br><b>total</b>: the stages added up")


def meaning(stage: str) -> str:
    """What `stage` measures, in words."""
    return STAGE_MEANINGS.get(stage, "a stage the backend reported")


def _legend(record: RunRecord) -> str:
    """One run's stages as coloured keys with their times (ms): a line of the timeline's legend. Each key, its
    stage and its time are one unbreakable piece (a wrapped line breaks between stages only)."""
    parts = [f'<span style="white-space: nowrap"><span style="color: rgb{stage_color(stage)}">■</span>&nbsp;{stage}'
             f"&nbsp;{duration * 1000:.1f}</span>" for stage, _start, duration in record.timeline()]
    total = f'<b style="white-space: nowrap">total&nbsp;{record.total_time * 1000:.1f}</b>'
    return f"#{record.id} {record.backend} (ms): " + " · ".join([*parts, total])
