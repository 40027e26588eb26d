"""The Profile dock: sortable operator table, a batched 2000-op timeline with hover, roofline, drift, window hook."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import QApplication, QMenu

from segscope.core.profiling.drift import load_drift_csv
from segscope.core.profiling.machine import MachinePeak
from segscope.core.profiling.model import OpStat, Profile, TimelineEvent
from segscope.gui.docks.profile_dock import COLUMNS, ProfilePanel
from segscope.gui.docks.profile_plots import TimelineItem
from segscope.gui.widgets.row_table import SORT_ROLE

PEAK = MachinePeak("test CPU", 100.0, 10.0)
OPS = 2000
LONG = "/model/encoder.block_{i}/a_rather_long_scope_name_that_a_narrow_column_cannot_show/Conv_{i}"


def big_profile(ops: int = OPS) -> Profile:
    """`ops` operators one after another (0.01 ms gaps) in 3 runs; op i takes (i % 7 + 1) * 0.01 ms."""
    rng = np.random.default_rng(1)
    stats, timeline = [], []
    types = ["Conv", "Relu", "Transpose", "Add"]
    for lane in range(3):
        t = 0.0
        for i in range(ops):
            dur = (i % 7 + 1) * 0.01
            timeline.append(TimelineEvent(LONG.format(i=i), types[i % 4], t, dur, lane))
            t += dur + 0.01
    for i in range(ops):
        dur = (i % 7 + 1) * 0.01
        stats.append(OpStat(LONG.format(i=i), types[i % 4], dur, dur * 1.1, dur / 100,
                            flops=int(rng.integers(1, 10**7)) if i % 4 == 0 else 0, bytes=int(1e5)))
    return Profile("big.onnx", "onnxruntime", "test CPU", 100.0, 3, tuple(stats), tuple(timeline), PEAK)


@pytest.fixture
def panel(qtbot, jobs):
    widget = ProfilePanel(jobs)
    qtbot.addWidget(widget)
    widget.resize(1000, 600)
    widget.show()
    return widget


def test_an_empty_profile_choice_says_so(panel):
    assert panel.source.count() == 0 and panel.source.currentText() == ""
    assert panel.source.placeholderText() == "shown: none loaded"
    # drawn in the empty combo (its elided painting drew a blank field): the picture differs from the same
    # combo without a placeholder
    labelled = panel.source.grab().toImage()
    panel.source.setPlaceholderText("")
    assert panel.source.grab().toImage() != labelled


def test_table_sorts_numerically_and_shows_full_names_on_hover(panel):
    panel.show_profile(big_profile())
    model = panel.model
    assert model.rowCount() == OPS
    mean_col = COLUMNS.index("mean ms")
    first = [model.index(r, mean_col).data(SORT_ROLE) for r in range(5)]
    assert first == sorted(first, reverse=True) and first[0] == pytest.approx(0.07)
    panel.table.sortByColumn(mean_col, Qt.SortOrder.AscendingOrder)
    assert model.index(0, mean_col).data(SORT_ROLE) == pytest.approx(0.01)
    name = model.index(0, 0)
    assert name.data(Qt.ItemDataRole.ToolTipRole).startswith(name.data())  # the full name, never cut
    assert "a_rather_long_scope_name" in name.data(Qt.ItemDataRole.ToolTipRole)
    assert "most time:" in panel.look.text()
    assert "layout conversions: 500 nodes" in panel.look.text()


def test_timeline_is_one_batched_item_with_hover(panel, qtbot):
    panel.show_profile(big_profile())
    panel.tabs.setCurrentIndex(1)
    items = [i for i in panel.timeline.plotItem.items if isinstance(i, TimelineItem)]
    assert len(items) == 1 and len(items[0].events) == 3 * OPS  # not 6000 widgets
    item = items[0]
    event = item.events[OPS + 10]  # run 1, op 10
    mid = event.start_ms + event.dur_ms / 2
    assert item.event_at(mid, 1.0) is event
    assert item.event_at(mid, 1.45) is None  # between lanes
    gap = event.start_ms + event.dur_ms + 0.005  # in the 0.01 ms gap after it
    assert item.event_at(gap, 1.0) is None and item.event_at(gap, 1.0, slack=0.006) is not None
    # zooming in and out repaints the same single item (no error, image changes with the range)
    panel.timeline.setXRange(event.start_ms, event.start_ms + 1.0, padding=0)
    zoomed = panel.timeline.grab().toImage()
    panel.timeline.autoRange()
    whole = panel.timeline.grab().toImage()
    assert zoomed != whole
    # hovering the event shows its full name
    vb = panel.timeline.plotItem.vb
    panel.timeline.setXRange(event.start_ms - 0.05, event.start_ms + 0.15, padding=0)
    QApplication.processEvents()
    panel.timeline._hover(vb.mapViewToScene(QPointF(mid, 1.0)))  # what the scene's sigMouseMoved passes
    assert panel.timeline.hovered is event


def test_roofline_points_and_drift_tab(panel, tmp_path):
    profile = big_profile(40)
    panel.show_profile(profile)
    assert len(panel.roofline.points) == sum(1 for o in profile.ops if o.flops)  # data movement is off-axis
    roof = next(i for i in panel.roofline.plotItem.items if isinstance(i, pg.PlotDataItem))
    xs, ys = roof.getOriginalDataset()
    np.testing.assert_allclose(ys, np.minimum(xs * 10.0, 100.0))  # memory roof, then the compute roof
    assert 10.0 in xs  # the ridge: 100 GFLOP/s / 10 GB/s
    path = tmp_path / "result_1.csv"
    header = ("Index,OpType,NPUDump,DataType,Address,GroundTruth,DataType,TensorIndex,Shape,OverFlow,"
              "CosineSimilarity,MaxAbsoluteError,AccumulatedRelativeError,RelativeEuclideanDistance,"
              "KullbackLeiblerDivergence,StandardDeviation,MeanAbsoluteError,RootMeanSquareError,"
              "MaxRelativeError,MeanRelativeError,CompareFailReason")
    rows = [f"{i},Conv,npu_{i},float16,0,onnx_{i},float32,t:output:0,[1],NO,{c},0.1,0,{r},0.0001,,0,0,0,0,"
            for i, (c, r) in enumerate([(0.9999, 0.01), (0.995, 0.08), (0.93, 0.2)])]
    path.write_text("\n".join([header, *rows]) + "\n")
    panel.import_file(path)
    assert panel.tabs.currentIndex() == 3 and panel.drift_table.rowCount() == 3
    assert panel.drift_table.item(0, 5).text() == "npu_2"  # worst cosine first
    assert "First drift (line 3" in panel.drift_label.text() and "npu_1" in panel.drift_label.text()
    first_row = [r for r in range(3) if panel.drift_table.item(r, 5).text() == "npu_1"][0]
    assert panel.drift_table.item(first_row, 0).background().color().red() == 213  # marked
    assert load_drift_csv(path).first_failure.npu == "npu_1"


def test_versus_column_matches_operators_by_name(panel):
    here = big_profile(10)
    there = Profile("op_summary_0_1.csv", "msprof op_summary", "npu", 1.0, 1,
                    (OpStat(LONG.format(i=3), "Conv2D", 0.5, 0.5, 0.5),))
    panel.show_profile(here)
    panel.show_profile(there)
    panel.source.setCurrentIndex(0)
    panel.versus.setCurrentIndex(2)  # "vs" the msprof one
    versus = COLUMNS.index("vs ms")
    values = {panel.model.index(r, 0).data(): panel.model.index(r, versus).data() for r in range(10)}
    assert values[LONG.format(i=3)] == "0.5" and values[LONG.format(i=4)] == ""


def test_import_errors_go_to_the_message_area(panel, tmp_path, qtbot):
    bad = tmp_path / "op_summary_0.csv"
    bad.write_text("Op Name,Task Duration(us)\na,slow\n")
    with qtbot.waitSignal(panel.message) as signal:
        panel.import_file(bad)
    level, text = signal.args
    assert level == "error" and f"{bad}:2" in text and "'slow'" in text


def test_window_profiles_its_model(window, qtbot):
    dock = window.profile_dock
    assert dock.windowTitle() == "Profile"
    view = next(m for m in window.menuBar().findChildren(QMenu) if m.title() == "&View")
    assert dock.toggleViewAction() in view.actions()
    panel = dock.widget()
    panel.images.setValue(1)
    panel.profile_button.click()
    qtbot.waitUntil(lambda: len(panel.profiles) == 1, timeout=60000)
    profile = panel.profiles[0]
    assert profile.kind == "onnxruntime" and profile.runs == 1
    assert any(o.type == "Conv" and o.flops == 2 * 960 * 960 * 2 * 3 for o in profile.ops)
    assert panel.model.rowCount() == len(profile.ops) and panel.profile_button.isEnabled()


def test_argmax_disagreement_of_two_runs(panel):
    from segscope.core.backends.base import InferenceResult
    from segscope.core.roi import Roi
    from segscope.core.session.runs import RunHistory, compare_runs

    roi = Roi(0, 0, 8, 4)
    p = np.zeros((4, 8, 2), np.float32)
    p[..., 0] = 1.0
    q = p.copy()
    q[0, :2] = (0.0, 1.0)  # two pixels change class
    history = RunHistory()
    a = history.add("img", InferenceResult(p, p.argmax(-1).astype(np.uint8), roi, (8, 4), {}, "mindx"))
    b = history.add("img", InferenceResult(q, q.argmax(-1).astype(np.uint8), roi, (8, 4), {}, "embedded"))
    panel.show_disagreement(compare_runs(a, b))  # (the window compares on a worker)
    image = panel.disagreement_image.image
    assert image.shape == (8, 4) and int(image.sum()) == 2 and image[0, 0] == 1 and image[1, 0] == 1
    text = panel.runs_label.text()
    assert "6.250% of pixels differ" in text and "FAIL: cosine" in text and "(mindx)" in text
