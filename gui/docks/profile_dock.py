"""The Profile dock: where the model's time goes per operator, and where an Ascend port drifts.

Sources: "Profile model" runs `core.profiling.run.profile_pipeline` on the window's pipeline and dataset
(off the GUI thread); "Import…" reads msprof / ais_bench / Chrome-trace / ONNX Runtime profiles and msit
compare CSVs (`core.profiling`). Tabs: a sortable operator table (full names on hover), the timeline, the
roofline, and the drift table with its first failure. `profile_dock(...)` makes the dock.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ...core.errors import SegScopeError
from ...core.profiling.drift import DriftReport, Thresholds, load_drift_csv
from ...core.profiling.insight import matched_ops, where_to_look
from ...core.profiling.model import OpStat, Profile
from ...core.profiling.roofline import classify
from ...core.session.runs import RunComparison
from ..runtime.jobs import Jobs
from ..widgets.compact import shrinkable
from ..widgets.row_table import Column, RowModel, RowTable
from .profile_plots import RooflinePlot, TimelinePlot

COLUMNS = ("name", "type", "mean ms", "p95 ms", "share", "GFLOP", "GFLOP/s", "GB/s", "FLOP/B", "roof", "bound",
           "vs ms")
#: One operator: its stats and its value in each of `COLUMNS` (NaN where it has none).
OpRow = tuple[OpStat, tuple[object, ...]]


def op_rows(profile: Profile | None, versus: Profile | None = None) -> list[OpRow]:
    """The operators of `profile`; "vs ms" holds the same operator's mean in `versus` where the names match."""
    if profile is None:
        return []
    other = {a.name: b.mean_ms for _, a, b in matched_ops(profile, versus)} if versus else {}
    nan = math.nan
    rows: list[OpRow] = []
    for op in profile.ops:
        point = classify(op, profile.peak) if profile.peak is not None else None
        rows.append((op, (op.name, op.type, op.mean_ms, op.p95_ms, op.share * 100, op.flops / 1e9 if op.flops else nan,
                          point.gflops if point else nan, point.gbs if point else nan,
                          point.intensity if point else nan, point.efficiency * 100 if point else nan,
                          point.bound if point else "", other.get(op.name, nan))))
    return rows


def _op_column(index: int, name: str) -> Column[OpRow]:
    """Numbers sort numerically (no value last, descending), names show in full on hover."""
    def text(row: OpRow) -> str:
        value = row[1][index]
        if isinstance(value, float):
            return "" if math.isnan(value) else (f"{value:.0f}%" if name == "roof" else
                                                 f"{value:.1f}%" if name == "share" else f"{value:.4g}")
        return str(value)

    def key(row: OpRow) -> object:
        value = row[1][index]
        return -math.inf if isinstance(value, float) and math.isnan(value) else value

    def tip(row: OpRow) -> str:
        op = row[0]
        extra = "".join(f"\n{k}: {v}" for k, v in op.details.items() if v)
        return f"{op.name}\n{op.type}, {op.calls} call(s) per run{extra}"

    return Column(name, text, key=key, right=index >= 2, tip=tip, width=320 if index == 0 else 0)


OP_COLUMNS = tuple(_op_column(index, name) for index, name in enumerate(COLUMNS))


class ProfilePanel(QWidget):
    """`show_profile(profile)`, `show_drift(report)`, `import_file(path)`; `message(level, text)` reports."""

    message = Signal(str, str)

    def __init__(self, jobs: Jobs, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.jobs = jobs
        self.profiles: list[Profile] = []
        self.drift: DriftReport | None = None
        #: () -> (pipeline, dataset folder) to profile with; the window sets it to its current ones.
        self.sources: Callable[[], tuple[Path | None, Path | None]] = lambda: (None, None)

        self.profile_button = QPushButton("Profile model")
        self.profile_button.setToolTip("Run ONNX Runtime's profiler on the first images of the dataset (this CPU)")
        self.profile_button.clicked.connect(self.profile_model)
        self.images = QSpinBox(minimum=1, maximum=100, value=4)
        self.images.setToolTip("Images to profile, after one warm-up run")
        self.import_button = QPushButton("Import…")
        self.import_button.setToolTip("msprof op_summary/op_statistic CSV or timeline JSON, ais_bench *_summary.json, "
                                      "an ONNX Runtime profile, or a msit/ait compare result CSV")
        self.import_button.clicked.connect(self.choose_file)
        self.source = shrinkable(QComboBox())
        self.source.setToolTip("Which loaded profile the tabs show")
        self.source.setPlaceholderText("shown: none loaded")  # labelled while empty, not a blank combo
        self.source.currentIndexChanged.connect(self._show_selected)
        self.versus = shrinkable(QComboBox())
        self.versus.setToolTip("Another loaded profile (e.g. msprof's on the chip): its time per operator, where "
                               "names match, goes into the table's last column")
        self.versus.addItem("vs: none")
        self.versus.currentIndexChanged.connect(lambda _i: self._show_selected(self.source.currentIndex()))
        top = QHBoxLayout()
        for widget in (self.profile_button, QLabel("images"), self.images, self.import_button):
            top.addWidget(widget)
        top.addStretch(1)
        shown = QHBoxLayout()  # a second row: the dock stays narrow
        shown.addWidget(self.source, 1)
        shown.addWidget(self.versus, 1)

        self.summary = QLabel("No profile yet: Profile model, or Import… an msprof / ais_bench file.")
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.model: RowModel[OpRow] = RowModel(OP_COLUMNS, self)
        self.table = RowTable(self.model, sortable=True)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # start and end of long names; hover for all
        self.look = QLabel("")
        self.look.setWordWrap(True)
        self.look.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.look.setToolTip("Where to look: the top operators by time, by distance from the roof, layout "
                             "conversions and unfused Conv+BN/ReLU chains")
        operators = QWidget()
        column = QVBoxLayout(operators)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.table, 1)
        column.addWidget(self.look)

        self.timeline = TimelinePlot()
        self.roofline = RooflinePlot()
        self.drift_label = QLabel("Import a msit/ait debug compare result_*.csv to rank where the port drifts.")
        self.drift_label.setWordWrap(True)
        self.drift_table = QTableWidget(0, 7)
        self.drift_table.setHorizontalHeaderLabels(["cosine", "rel. Euclidean", "KL", "max abs", "op type",
                                                    "NPU op", "ground truth"])
        self.drift_table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.runs_button = QPushButton("Last two runs: argmax disagreement")
        self.runs_button.setToolTip("Where the current image's two newest runs (e.g. Ascend and embedded) predict "
                                    "different classes, with the thresholds' pass/fail line")
        self.runs_label = QLabel("")
        self.runs_label.setWordWrap(True)
        self.disagreement = pg.PlotWidget()
        self.disagreement.setMenuEnabled(False)
        self.disagreement.setAspectLocked(True)
        self.disagreement.invertY(True)
        self.disagreement_image = pg.ImageItem()
        self.disagreement.addItem(self.disagreement_image)
        runs = QWidget()
        runs_column = QVBoxLayout(runs)
        runs_column.setContentsMargins(0, 0, 0, 0)
        runs_column.addWidget(self.runs_button)
        runs_column.addWidget(self.runs_label)
        runs_column.addWidget(self.disagreement, 1)
        split = QSplitter(Qt.Orientation.Vertical)  # one above the other: the dock stays narrow
        split.addWidget(self.drift_table)
        split.addWidget(runs)
        drift = QWidget()
        drift_column = QVBoxLayout(drift)
        drift_column.setContentsMargins(0, 0, 0, 0)
        drift_column.addWidget(self.drift_label)
        drift_column.addWidget(split, 1)

        self.tabs = QTabWidget()
        self.tabs.addTab(operators, "Operators")
        self.tabs.addTab(self.timeline, "Timeline")
        self.tabs.addTab(self.roofline, "Roofline")
        self.tabs.addTab(drift, "Drift")
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addLayout(shown)
        layout.addWidget(self.summary)
        layout.addWidget(self.tabs, 1)

    # ------------------------------------------------------------------------------------------ sources
    def profile_model(self) -> None:
        if self.jobs.busy("profile"):
            return
        pipeline, dataset = self.sources()
        if pipeline is None or dataset is None:
            self.message.emit("warning", "Open a dataset first: the profile runs the model on its images")
            return
        from ...core.profiling.run import profile_pipeline

        self.profile_button.setEnabled(False)
        self.profile_button.setText("Profiling…")
        self.jobs.submit("profile", partial(profile_pipeline, pipeline, dataset, self.images.value()),
                         self._on_profiled, self._on_profile_failed)

    def _on_profiled(self, profile: Profile) -> None:
        self._profiling_ended()
        self.show_profile(profile)
        self.message.emit("info", f"profiled {Path(profile.source).name}: {profile.model_ms:.1f} ms per run "
                                  f"over {profile.runs} image(s)")

    def _on_profile_failed(self, text: str, _details: str) -> None:
        self._profiling_ended()
        self.message.emit("error", text)

    def _profiling_ended(self) -> None:
        self.profile_button.setEnabled(True)
        self.profile_button.setText("Profile model")

    def choose_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import a profile or a compare result", "",
                                              "Profiles and compare results (*.csv *.json);;All files (*)")
        if path:
            self.import_file(Path(path))

    def import_file(self, path: Path) -> None:
        """Load a profile, or a msit compare CSV (recognised by its header) into the Drift tab."""
        from ...core.profiling.ascend import import_profile, is_drift_csv

        try:
            if is_drift_csv(path):
                self.show_drift(load_drift_csv(path))
            else:
                self.show_profile(import_profile(path))
        except SegScopeError as exc:
            self.message.emit("error", str(exc))

    # ------------------------------------------------------------------------------------------ showing
    def show_profile(self, profile: Profile) -> None:
        self.profiles.append(profile)
        label = f"{profile.kind}: {Path(profile.source).name}"
        self.versus.addItem(f"vs {label}")
        self.source.addItem(label)
        self.source.setCurrentIndex(self.source.count() - 1)  # shows it
        self.tabs.setCurrentIndex(0)

    def _show_selected(self, index: int) -> None:
        profile = self.profiles[index] if 0 <= index < len(self.profiles) else None
        versus = self.versus.currentIndex() - 1  # entry 0 is "none"
        self.model.set_rows(op_rows(profile, self.profiles[versus] if 0 <= versus < len(self.profiles) else None))
        self.table.sortByColumn(2, Qt.SortOrder.DescendingOrder)
        if profile is None:
            return
        self.timeline.set_events(profile.timeline)
        self.roofline.set_ops(profile.ops, profile.peak)
        roofs = (f"; roofs measured here {profile.peak.peak_gflops:.1f} GFLOP/s, {profile.peak.bandwidth_gbs:.1f} GB/s"
                 if profile.peak else "")
        extra = "".join(f"; {k} {v:.4g}" for k, v in profile.summary.items())
        runs = f" over {profile.runs} run(s)" if profile.runs else ""
        self.summary.setText(f"{profile.source} — {profile.device}: {profile.model_ms:.3f} ms per run{runs}, "
                             f"{len(profile.ops)} operators{roofs}{extra}")
        self.look.setText("\n".join(f"• {line}" for line in where_to_look(profile)))

    def show_drift(self, report: DriftReport) -> None:
        self.drift = report
        first = report.first_failure
        self.drift_label.setText(
            f"{report.source}: {len(report.rows)} tensors, worst first. " +
            (f"First drift (line {first.line}, in execution order): {first.op_type} {first.npu} vs {first.truth}: "
             f"{'; '.join(first.failures)}" if first else "None past the thresholds."))
        rows = report.ranked()
        self.drift_table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            m = row.metrics
            cells = [m["cosine"], m["relative_euclidean"], m["kl"], m["max_abs"], row.op_type, row.npu, row.truth]
            for c, value in enumerate(cells):
                text = "" if isinstance(value, float) and math.isnan(value) else \
                    f"{value:.6g}" if isinstance(value, float) else str(value)
                item = QTableWidgetItem(text)
                item.setToolTip("; ".join(row.failures) or row.reason or text)
                if row is first:
                    item.setBackground(QBrush(QColor(213, 94, 0, 90)))
                elif row.failures:
                    item.setBackground(QBrush(QColor(230, 159, 0, 50)))
                self.drift_table.setItem(r, c, item)
        self.tabs.setCurrentIndex(3)

    def show_disagreement(self, comparison: RunComparison) -> None:
        """The pixels where two runs of one image predict different classes (`compare_runs`, made on a
        worker), and the thresholds' verdict."""
        reference, candidate = comparison.reference, comparison.candidate
        a, b = reference.result, candidate.result
        assert a is not None and b is not None  # compare_runs checked
        self.disagreement_image.setImage((a.argmax != b.argmax).astype(np.uint8).T, levels=(0, 1))
        m = comparison.metrics
        verdict = Thresholds().verdict(m["cosine_similarity"], m["relative_euclidean_distance"], m["kl_divergence"])
        self.runs_label.setText(f"{reference.image_id}: run {reference.id} ({reference.backend}) vs run "
                                f"{candidate.id} ({candidate.backend}): {comparison.argmax_disagreement:.3%} of "
                                f"pixels differ (white); {verdict}")
        self.tabs.setCurrentIndex(3)
