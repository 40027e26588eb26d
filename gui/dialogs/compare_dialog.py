"""Compare two runs of one image from the session's history (e.g. the Ascend stream vs the embedded reference).

The numbers are `core.session.runs.compare_runs`' (the metrics are `core.metrics.scores.compare_tensors`, what
`segscope compare` prints, in the same format), plus the argmax disagreement rate and a heatmap of the
largest per-class probability difference at each model pixel.
"""

from __future__ import annotations

import time

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ...core.session.runs import RunComparison, RunHistory, RunRecord, compare_runs
from ..runtime.jobs import Jobs
from ..widgets import colormaps

DISAGREEMENT = "argmax_disagreement"


def describe_run(record: RunRecord) -> str:
    """e.g. "#3 remote · unet_hw960_bs1.om · ROI (0, 0)-(960, 960) · 14:02:11" (+ "· arrays dropped")."""
    parts = [f"#{record.id} {record.backend or 'unknown backend'}"]
    if record.model:
        parts.append(record.model.replace("\\", "/").rsplit("/", 1)[-1])
    parts += [f"ROI {record.roi}", time.strftime("%H:%M:%S", time.localtime(record.time))]
    if record.result is None:
        parts.append("arrays dropped")
    return " · ".join(parts)


def format_value(value: float) -> str:
    """A number as `segscope compare` prints it."""
    return f"{value:.9g}"


class CompareDialog(QDialog):
    """Pick an image, a reference run and a candidate run; see the comparison (computed on a worker: two
    slide-sized runs take seconds). `reload()` after new runs."""

    def __init__(self, history: RunHistory, jobs: Jobs, image_id: str | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Compare runs")
        self.history, self.jobs = history, jobs
        self.comparison: RunComparison | None = None

        self.image_combo = QComboBox()
        self.image_combo.setToolTip("Images run at least twice this session")
        self.reference_combo = QComboBox()
        self.reference_combo.setToolTip("The reference run, e.g. the embedded ONNX Runtime stream")
        self.candidate_combo = QComboBox()
        self.candidate_combo.setToolTip("The run checked against it, e.g. the Ascend (MindX or remote) stream")
        swap = QPushButton("Swap")
        swap.setToolTip("Exchange reference and candidate")
        swap.clicked.connect(self._swap)
        form = QFormLayout()
        form.addRow("Image", self.image_combo)
        form.addRow("Reference", self.reference_combo)
        candidate_row = QHBoxLayout()
        candidate_row.addWidget(self.candidate_combo, 1)
        candidate_row.addWidget(swap)
        form.addRow("Candidate", candidate_row)

        self.message = QLabel("")
        self.message.setWordWrap(True)
        self.table = QTableWidget(0, 2)
        self.table.setHorizontalHeaderLabels(["Metric", "Value"])
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setToolTip("The probabilities compared as `segscope compare reference.npy candidate.npy` "
                              "does, plus the share of pixels whose predicted class differs")

        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.ci.addLabel("max over classes of |p_reference − p_candidate|", row=0, col=0, colspan=2)
        self.view = self.graphics.ci.addViewBox(row=1, col=0, lockAspect=True, invertY=True)
        self.view.setMenuEnabled(False)
        self.heatmap = pg.ImageItem(axisOrder="row-major")
        self.view.addItem(self.heatmap)
        self.colorbar = pg.ColorBarItem(values=(0.0, 1.0), limits=(0.0, 1.0), width=15,
                                        colorMap=colormaps.heatmap_colormap(), colorMapMenu=False)
        self.colorbar.setImageItem(self.heatmap)
        self.graphics.ci.addItem(self.colorbar, row=1, col=1)

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.table)
        splitter.addWidget(self.graphics)
        splitter.setSizes([380, 520])

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.copy_button = buttons.addButton("Copy numbers", QDialogButtonBox.ButtonRole.ActionRole)
        self.copy_button.setToolTip("Copy the runs and the numbers as text")
        self.copy_button.clicked.connect(lambda: QApplication.clipboard().setText(self.as_text()))
        buttons.rejected.connect(self.reject)

        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.message)
        layout.addWidget(splitter, 1)
        layout.addWidget(buttons)
        self.resize(960, 560)

        self.image_combo.currentIndexChanged.connect(self._fill_runs)
        self.reference_combo.currentIndexChanged.connect(self._compare)
        self.candidate_combo.currentIndexChanged.connect(self._compare)
        self.reload(image_id)

    # ------------------------------------------------------------------------------------- public API
    def reload(self, image_id: str | None = None) -> None:
        """Refill the lists from the history, keeping the selection where it still exists."""
        image_id = image_id or self.image_combo.currentData()
        counts: dict[str, int] = {}
        for record in self.history:
            counts[record.image_id] = counts.get(record.image_id, 0) + 1
        ids = [i for i, n in counts.items() if n >= 2]
        self.image_combo.blockSignals(True)
        self.image_combo.clear()
        for item_id in ids:
            self.image_combo.addItem(f"{item_id} ({counts[item_id]} runs)", item_id)
        self.image_combo.setCurrentIndex(ids.index(image_id) if image_id in ids else len(ids) - 1)
        self.image_combo.blockSignals(False)
        self._fill_runs()

    def select(self, reference: RunRecord, candidate: RunRecord) -> None:
        """Choose two runs (of one image) by record."""
        self.reload(reference.image_id)
        self.reference_combo.setCurrentIndex(self.reference_combo.findData(reference.id))
        self.candidate_combo.setCurrentIndex(self.candidate_combo.findData(candidate.id))

    def displayed(self) -> dict[str, str]:
        """Metric name (as `segscope compare` prints it) -> the value shown (what the user reads)."""
        cells = [(self.table.item(r, 0), self.table.item(r, 1)) for r in range(self.table.rowCount())]
        return {str(name.data(Qt.ItemDataRole.UserRole)): value.text() for name, value in cells
                if name is not None and value is not None}

    def as_text(self) -> str:
        if self.comparison is None:
            return self.message.text()
        c = self.comparison
        lines = [f"reference: {describe_run(c.reference)}", f"candidate: {describe_run(c.candidate)}"]
        width = max(map(len, self.displayed()))
        lines += [f"{name:<{width}}  {value}" for name, value in self.displayed().items()]
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------------------------------- internals
    def _records(self) -> list[RunRecord]:
        image_id = self.image_combo.currentData()
        return self.history.for_image(image_id) if image_id is not None else []

    def _fill_runs(self) -> None:
        records = self._records()
        chosen = (self.reference_combo.currentData(), self.candidate_combo.currentData())
        default = _default_pair(records)
        for combo, previous, fallback in zip((self.reference_combo, self.candidate_combo), chosen, default):
            combo.blockSignals(True)
            combo.clear()
            for record in records:
                combo.addItem(describe_run(record), record.id)
            index = combo.findData(previous)
            combo.setCurrentIndex(index if index >= 0 else combo.findData(fallback))
            combo.blockSignals(False)
        self._compare()

    def _swap(self) -> None:
        reference, candidate = self.reference_combo.currentIndex(), self.candidate_combo.currentIndex()
        self.reference_combo.blockSignals(True)
        self.reference_combo.setCurrentIndex(candidate)
        self.reference_combo.blockSignals(False)
        self.candidate_combo.setCurrentIndex(reference)

    def _compare(self) -> None:
        by_id = {r.id: r for r in self._records()}
        reference = by_id.get(self.reference_combo.currentData())
        candidate = by_id.get(self.candidate_combo.currentData())
        if reference is None or candidate is None:
            self._show(None, "Run an image twice (e.g. on the embedded backend and on the Ascend stream) "
                             "to compare the runs")
            return
        note = "The same run on both sides" if reference is candidate else ""
        self._show(None, f"Comparing run {reference.id} with run {candidate.id}…")
        self.jobs.submit("compare", lambda: compare_runs(reference, candidate),
                         lambda comparison: self._show(comparison, note),
                         lambda text, _details: self._show(None, text))

    def _show(self, comparison: RunComparison | None, note: str) -> None:
        self.comparison = comparison
        self.message.setText(note)
        self.message.setVisible(bool(note))
        rows = {} if comparison is None else {**comparison.metrics, DISAGREEMENT: comparison.argmax_disagreement}
        self.table.setRowCount(len(rows))
        for row, (name, value) in enumerate(rows.items()):
            value_item = QTableWidgetItem(format_value(value))
            value_item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            name_item = QTableWidgetItem(name.replace("_", " ").capitalize())  # "Cosine similarity"
            name_item.setData(Qt.ItemDataRole.UserRole, name)
            name_item.setToolTip(f"{name} in the output of `segscope compare`")
            self.table.setItem(row, 0, name_item)
            self.table.setItem(row, 1, value_item)
        if comparison is None:
            self.heatmap.clear()
            return
        difference = comparison.difference
        high = float(difference.max(initial=0.0)) or 1.0  # all zero: keep a valid range
        self.colorbar.setLevels((0.0, high))
        self.heatmap.setImage(difference, autoLevels=False, levels=(0.0, high))
        self.view.autoRange(padding=0.02)


def _default_pair(records: list[RunRecord]) -> tuple[int | None, int | None]:
    """Candidate: the newest run; reference: the newest earlier run on its ROI, preferring another backend."""
    if not records:
        return None, None
    candidate = records[-1]
    earlier = [r for r in records[:-1] if r.roi == candidate.roi and r.result is not None]
    others = [r for r in earlier if r.backend != candidate.backend]
    reference = (others or earlier or records[-2:-1] or [candidate])[-1]
    return reference.id, candidate.id

