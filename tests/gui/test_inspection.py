"""Inspection tools on the real window: error review and zoom, worst-image keys, the dataset filter, the
run comparison dialog (against `core.session.runs` and `segscope compare`) and the timing table with its CSV."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from segscope.core.cli import main as cli_main
from segscope.core.errors import SegScopeError
from segscope.core.files.fileio import read_mask
from segscope.core.metrics import catalogue
from segscope.core.metrics.filter import MetricFilter
from segscope.core.metrics.review import error_regions, result_error_map, worst_first
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi
from segscope.core.session.runs import compare_runs, timing_table
from segscope.gui.dialogs.compare_dialog import DISAGREEMENT
from segscope.gui.docks.review_panel import MAX_LISTED
from segscope.gui.shell.inspection import zoom_rect
from segscope.gui.widgets.docking import show_dock

from .conftest import open_and_wait

pytestmark = pytest.mark.gui


@pytest.fixture
def inspection(window):
    tools = window.inspection
    tools.review_dock.raise_()
    return tools


def run_and_wait(qtbot, window, action) -> None:
    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000):
        assert action()
    qtbot.waitUntil(lambda: not window.jobs.pending)


def contains(outer, inner, tolerance: float = 1e-6) -> bool:
    return (outer.left() <= inner.left() + tolerance and outer.top() <= inner.top() + tolerance
            and outer.right() >= inner.right() - tolerance and outer.bottom() >= inner.bottom() - tolerance)


def test_regions_match_core_review_and_a_click_zooms_every_view(qtbot, window, inspection, demo_dataset):
    run_and_wait(qtbot, window, window.commands.run_current)
    review = inspection.review
    qtbot.waitUntil(lambda: review.errors is not None, timeout=10000)
    result = window.session.result("001")
    expected = result_error_map(result, read_mask(demo_dataset / "001" / "mask.png"), positive=1)
    regions = error_regions(expected)
    assert len(regions) >= 2  # the tiny model misses parts of the defect and adds noise: something to review
    np.testing.assert_array_equal(review.errors.labels, expected.labels)
    shown_counts = {review.counts_table.verticalHeaderItem(r).text(): review.counts_table.item(r, 0).text()
                    for r in range(review.counts_table.rowCount())}
    assert shown_counts == {name: f"{count:,}" for name, count in expected.counts().items()}
    # The same pixels as the error map drawn in the third panel.
    window.panels.error_map_action.setChecked(True)
    drawn = np.bincount(window.panels.panel_arrays()["error"].ravel(), minlength=4)
    assert [int(n) for n in drawn] == [expected.counts()[k] for k in ("TN", "FP", "FN", "TP")]

    table, model = review.regions_table, review.region_model
    assert model.rowCount() == min(len(regions), MAX_LISTED)
    rows = [tuple(model.index(r, c).data() for c in range(3)) for r in range(model.rowCount())]
    assert rows == [(g.name, f"{g.area:,}", ", ".join(map(str, g.box.as_tuple()))) for g in regions[:MAX_LISTED]]

    row = max(range(model.rowCount()), key=lambda r: (regions[r].area < 50, -r))  # a small region
    region = regions[row]
    rect = table.visualRect(model.index(row, 1))
    QTest.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    wanted = zoom_rect(region.box)
    heat, argmax, truth = window.panels.views()
    for view in (heat, argmax, truth, window.slide.vb):
        shown = view.viewRect()
        assert contains(shown, wanted), (view, shown, wanted)
        assert shown.center().x() == pytest.approx(wanted.center().x(), abs=1)
        assert shown.center().y() == pytest.approx(wanted.center().y(), abs=1)
    assert heat.viewRect().width() < result.roi.width  # zoomed in on the region, not the whole ROI
    for item in inspection.highlights:
        assert item.isVisible()
        assert item.rect().getRect() == (region.box.x0, region.box.y0, region.box.width, region.box.height)

    window.panels.class_combo.setCurrentIndex(0)  # score the background instead: FP and FN swap
    assert window.session.shown_class == 0  # the panels' choice is the session's, which the review maps
    qtbot.waitUntil(lambda: review.errors is not None and review.errors.positive == 0)
    background = result_error_map(result, read_mask(demo_dataset / "001" / "mask.png"), positive=0)
    assert review.errors.counts() == background.counts()
    assert (background.counts()["FP"], background.counts()["FN"]) == (expected.counts()["FN"], expected.counts()["FP"])
    assert review.regions == error_regions(background)
    assert not any(item.isVisible() for item in inspection.highlights)


def test_review_without_a_result_or_a_mask_says_so(qtbot, window, inspection, demo_dataset):
    review = inspection.review
    qtbot.waitUntil(lambda: "Run an image" in review.summary.text())
    assert review.errors is None and review.region_model.rowCount() == 0
    run_and_wait(qtbot, window, window.commands.run_current)
    qtbot.waitUntil(lambda: review.errors is not None and review.region_model.rowCount() > 0)
    window.dataset_panel.select_item("002")  # not run: the review empties
    qtbot.waitUntil(lambda: review.errors is None and review.region_model.rowCount() == 0)

    (demo_dataset / "003" / "mask.png").unlink()
    open_and_wait(qtbot, window, demo_dataset)
    window.dataset_panel.select_item("003")
    qtbot.waitUntil(lambda: window.slide_ready() and window.current.id == "003")
    run_and_wait(qtbot, window, window.commands.run_current)
    qtbot.waitUntil(lambda: "003 has no ground-truth mask" in review.summary.text())
    assert review.errors is None


def test_worst_keys_step_in_metric_order_and_respect_the_filter(qtbot, window, inspection):
    run_and_wait(qtbot, window, window.commands.run_all)
    dice = {i: window.session.metrics(i).foreground_dice for i in ("001", "002", "003")}
    order = worst_first(dice, window.session.ranking)  # the default ranking: the foreground Dice
    assert order == sorted(dice, key=dice.get)
    assert len(set(dice.values())) == 3
    window.activateWindow()
    for _ in range(3):
        QTest.keyClick(window, Qt.Key.Key_Comma)
    assert window.current.id == order[0]
    visited = [window.current.id]
    for _ in range(3):  # the last press stays on the best image
        QTest.keyClick(window, Qt.Key.Key_Period)
        visited.append(window.current.id)
    assert visited == [order[0], order[1], order[2], order[2]]
    QTest.keyClick(window, Qt.Key.Key_Comma)
    assert window.current.id == order[1]

    # Filter out the best image: it disappears from the table and from the stepping.
    threshold = (dice[order[1]] + dice[order[2]]) / 2
    edit = inspection.filter_bar.edit
    edit.setFocus()
    QTest.keyClicks(edit, f"dice < {threshold}")  # typed: the "." key types a dot here, no stepping
    QTest.keyClick(edit, Qt.Key.Key_Return)
    assert edit.text() == f"dice < {threshold}" and window.current.id == order[1]
    assert sorted(window.dataset_panel.visible_order()) == sorted(order[:2])
    assert inspection.filter_bar.count.text() == "2 of 3"
    QTest.keyClick(window, Qt.Key.Key_Period)
    QTest.keyClick(window, Qt.Key.Key_Period)
    assert window.current.id == order[1]
    inspection.filter_bar.edit.setText("soft_dice <")  # invalid: said, and the filter stays
    inspection.filter_bar.apply()
    assert inspection.filter_bar.error.isVisibleTo(inspection.filter_bar)
    assert "is not '<metric> <op> <number>'" in inspection.filter_bar.error.text()
    assert len(window.dataset_panel.visible_order()) == 2
    inspection.filter_bar.edit.clear()
    assert sorted(window.dataset_panel.visible_order()) == ["001", "002", "003"]


def test_the_ranking_picked_in_the_dataset_panel_sorts_steps_and_bins(qtbot, window, inspection):
    run_and_wait(qtbot, window, window.commands.run_all)
    panel, session = window.dataset_panel, window.session
    combo = panel.ranking_combo
    assert combo.currentData() == "foreground_dice"
    offered = [combo.itemData(i) for i in range(combo.count())]
    assert [name for name in offered if not catalogue.lookup(name).optional][-4:] == ["dice_0", "dice_1", "iou_0",
                                                                                    "iou_1"]
    assert "hd95" in offered and "hd95_class_1" in offered and "hd95_class_0" not in offered  # QA: foreground
    soft = {i: session.metrics(i).soft_dice for i in ("001", "002", "003")}
    combo.setCurrentIndex(combo.findData("soft_dice"))
    combo.activated.emit(combo.currentIndex())  # as a click on the entry does
    assert session.ranking.name == "soft_dice"
    window.main_actions.worst_action.trigger()
    assert panel.visible_order() == sorted(soft, key=soft.get)
    show_dock(window.metrics_dock)  # (the fixture put the Error regions dock in front: the histogram draws when seen)
    title = lambda: window.metrics_panel.plot.getPlotItem().titleLabel.text  # noqa: E731
    qtbot.waitUntil(lambda: "Soft Dice" in title())
    assert f"3 images, mean Soft Dice {np.mean(list(soft.values())):.4f}" in title()
    counts, _ = window.metrics_panel.histogram()
    assert counts.sum() == 3
    window.activateWindow()
    QTest.keyClick(window, Qt.Key.Key_Period)  # from the worst, the next worst by soft Dice
    assert window.current.id == sorted(soft, key=soft.get)[1]

    # A per-class metric gets a column of its own (named after the model's class) and ranks the table.
    background = {i: session.metrics(i).dice[0] for i in ("001", "002", "003")}
    combo.setCurrentIndex(combo.findData("dice_0"))
    combo.activated.emit(combo.currentIndex())
    model = panel.model
    headers = [model.headerData(c, Qt.Orientation.Horizontal) for c in range(model.columnCount())]
    assert headers == ["Image", "Soft Dice", "Dice", "IoU", "Dice: background", "Truth", "Status"]
    window.main_actions.worst_action.trigger()
    assert panel.visible_order() == sorted(background, key=background.get)
    combo.setCurrentIndex(combo.findData("foreground_iou"))
    combo.activated.emit(combo.currentIndex())
    assert model.columnCount() == 6  # back to the table's own columns


def test_images_without_a_foreground_rank_last_as_n_a(qtbot):
    from segscope.core.metrics import catalogue
    from segscope.core.metrics.scores import ImageMetrics
    from segscope.core.session.views import ItemView
    from segscope.gui.docks.dataset_panel import DatasetPanel

    panel = DatasetPanel()
    qtbot.addWidget(panel)
    panel.set_dataset(Path("/data"), ["a", "b", "c", "d"])
    dice = {"a": 0.7, "b": float("nan"), "c": 0.2, "d": None}  # b: no foreground anywhere; d: not run
    for item_id, value in dice.items():
        if value is not None:
            metrics = ImageMetrics(0.9, 0.8, (1.0, value), (1.0, value), value, value, 1.0, 1.0)
            panel.model.show(ItemView(item_id, "done", metrics, True, "", "mask.png", "original"))
    foreground_dice = catalogue.lookup("foreground_dice")
    panel.sort_worst_first(foreground_dice)
    assert panel.visible_order()[:2] == ["c", "a"] and set(panel.visible_order()[2:]) == {"b", "d"}
    column = panel.model.metric_columns.index(foreground_dice) + 1
    shown = {panel.model.rows[r].item_id: panel.model.index(r, column).data() for r in range(4)}
    assert shown == {"a": "0.7000", "b": "n/a", "c": "0.2000", "d": ""}


def test_metric_filter_parsing():
    from segscope.core.metrics.scores import ImageMetrics

    m = ImageMetrics(0.8, 0.67, (0.9, 0.7), (0.8, 0.5), 0.7, 0.5, 0.6, 0.95)
    assert MetricFilter.parse("  ") is None
    assert MetricFilter.parse("soft_dice < 0.9").matches(m)
    assert not MetricFilter.parse("soft_dice >= 0.9").matches(m)
    assert MetricFilter.parse("Dice <= .7 and recall > 9e-1").matches(m)  # table names, any case
    assert not MetricFilter.parse("dice < 0.7 and recall > 0.9").matches(m)
    assert not MetricFilter.parse("soft_dice < 1").matches(None)  # not run yet: hidden
    with pytest.raises(SegScopeError, match="unknown metric 'accuracy'"):
        MetricFilter.parse("accuracy > 0.5")
    with pytest.raises(SegScopeError, match="'soft_dice 0.5' is not"):
        MetricFilter.parse("soft_dice 0.5")


def perturbed(result: InferenceResult, seed: int = 3) -> InferenceResult:
    """`result` as another backend might return it: probabilities slightly off, some argmax flipped."""
    rng = np.random.default_rng(seed)
    p = np.clip(result.probabilities + rng.normal(0, 0.05, result.probabilities.shape), 1e-4, None)
    p = (p / p.sum(-1, keepdims=True)).astype(np.float32)
    return InferenceResult(p, p.argmax(-1).astype(np.uint8), result.roi, result.image_size,
                           {"upload": 0.01, "infer": 0.02, "download": 0.01}, "remote")


def test_compare_dialog_shows_exactly_compare_runs_and_segscope_compare(qtbot, window, inspection, tmp_path):
    run_and_wait(qtbot, window, window.commands.run_current)
    embedded = inspection.history.records[-1]
    assert (embedded.image_id, embedded.backend, embedded.roi) == ("001", "embedded", window.session.result("001").roi)
    remote = inspection.history.add("001", perturbed(window.session.result("001")))
    window.slide.set_roi(Roi(100, 50, 500, 450))
    window.slide.roiChanged.emit(window.slide.roi())
    run_and_wait(qtbot, window, window.commands.run_current)
    other_roi = inspection.history.records[-1]
    assert other_roi.roi == Roi(100, 50, 500, 450)

    dialog = inspection.open_compare()
    qtbot.addWidget(dialog)
    assert dialog.image_combo.currentData() == "001"
    assert dialog.candidate_combo.currentData() == other_roi.id  # the newest run, whose ROI no other run has
    qtbot.waitUntil(lambda: "differ in image or ROI" in dialog.message.text())  # compared on a worker
    assert dialog.comparison is None and dialog.table.rowCount() == 0

    dialog.select(embedded, remote)
    expected = compare_runs(embedded, remote)
    assert 0 < expected.argmax_disagreement < 0.5
    qtbot.waitUntil(lambda: dialog.comparison is not None)
    shown = dialog.displayed()
    assert shown == {**{k: f"{v:.9g}" for k, v in expected.metrics.items()},
                     DISAGREEMENT: f"{expected.argmax_disagreement:.9g}"}
    np.testing.assert_array_equal(dialog.heatmap.image, expected.difference)
    assert dialog.colorbar.levels() == pytest.approx((0.0, float(expected.difference.max())))

    np.save(tmp_path / "a.npy", embedded.result.probabilities)
    np.save(tmp_path / "b.npy", remote.result.probabilities)
    out = io.StringIO()
    code = cli_main(["compare", str(tmp_path / "a.npy"), str(tmp_path / "b.npy")], out=out)
    *lines, verdict = out.getvalue().splitlines()
    assert code == (0 if verdict.startswith("PASS") else 3)  # FAIL exits 3 (compare.EXIT_FAIL)
    cli = dict(line.split() for line in lines)
    assert cli == {k: v for k, v in shown.items() if k != DISAGREEMENT}

    dialog.candidate_combo.setCurrentIndex(dialog.candidate_combo.findData(embedded.id))
    qtbot.waitUntil(lambda: dialog.displayed().get(DISAGREEMENT) == "0")
    assert "same run" in dialog.message.text()


def test_timing_table_shows_core_runs_numbers_and_exports_them(qtbot, window, inspection, tmp_path):
    inspection.timing_dock.raise_()  # a dock behind another tab is not refreshed until it is shown
    run_and_wait(qtbot, window, window.commands.run_all)
    history = inspection.history
    assert [r.image_id for r in history] == ["001", "002", "003"]
    first = history.records[0]
    # During Run all a result waits behind the others before it is drawn: that is not timed as "render"
    assert not any("render" in record.timings for record in history)
    assert {"decode", "crop", "resize", "infer"} <= set(first.timings)
    run_and_wait(qtbot, window, window.commands.run_current)  # a single run of the shown image is
    qtbot.waitUntil(lambda: "render" in history.records[-1].timings)  # once the panels drew it
    assert history.records[-1].image_id == "001" and history.records[-1].timings["render"] > 0
    expected = timing_table(history.latest_per_image())
    qtbot.waitUntil(lambda: inspection.timing.stats == expected)  # the table follows (a deferred refresh)
    table = inspection.timing.table
    shown = [tuple(table.item(r, c).text() for c in range(4)) for r in range(table.rowCount())]
    assert shown == [(s.stage, str(s.runs), f"{s.mean * 1000:.1f}", f"{s.p95 * 1000:.1f}") for s in expected]
    assert shown[-1][0] == "total"
    assert "render" in [row[0] for row in shown]
    render = next(r for r in range(table.rowCount()) if table.item(r, 0).text() == "render")
    assert "until the result panels showed it" in table.item(render, 0).toolTip()
    # Only what means something to the user: a local run moves no data (no upload, download or "transfer"), and
    # every row says what it measures.
    assert not {"upload", "download", "transfer"} & {row[0] for row in shown}
    assert all("a stage the backend reported" not in table.item(r, 0).toolTip() for r in range(table.rowCount()))

    # The timeline of the current image: one bar per stage of its run, in stream order.
    assert inspection.timing.image_id == "001"
    assert "render" in inspection.timing.legend.text() and "total" in inspection.timing.legend.text()
    # each colour key is bound to its stage (a non-breaking space, in a piece that does not wrap): a narrow dock
    # wraps between stages, never between a square and its label
    assert '■</span>&nbsp;render&nbsp;' in inspection.timing.legend.text()
    legend = inspection.timing.legend.text()
    assert legend.count("white-space: nowrap") == legend.count("■") + legend.count("<br>") + 1  # + each total
    assert "<b>infer</b>: the model itself" in inspection.timing.legend.toolTip()

    path = tmp_path / "out" / "timings.csv"
    inspection.timing.export_csv(path)
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["stage"] for r in rows] == [s.stage for s in expected]
    for row, s in zip(rows, expected):
        assert int(row["runs"]) == s.runs
        assert float(row["mean_ms"]) == pytest.approx(s.mean * 1000, abs=1e-3)
        assert float(row["p95_ms"]) == pytest.approx(s.p95 * 1000, abs=1e-3)
    before = path.read_bytes()
    with pytest.raises(SegScopeError, match="already exists"):
        inspection.timing.export_csv(path)
    assert path.read_bytes() == before

    # Restricting the table to one backend: a remote run of 002 joins the history.
    history.add("002", perturbed(window.session.result("002")))
    inspection.refresh_timing()
    inspection.timing.backend_combo.setCurrentIndex(inspection.timing.backend_combo.findData("remote"))
    assert inspection.timing.stats == timing_table(history.latest_per_image("remote"))
    assert inspection.timing.stats[0].runs == 1


def test_shortcuts_stay_unique_and_listed_with_the_inspection_keys(window, inspection):
    from segscope.gui.widgets.shortcuts import SHORTCUTS

    keys = [k for k, _ in SHORTCUTS]
    assert len(keys) == len(set(keys))
    bound = [a.shortcut().toString() for a in window.actions() if not a.shortcut().isEmpty()]
    assert len(bound) == len(set(bound)) and set(bound) <= set(keys)
    assert {".", ",", "Ctrl+Shift+C"} <= set(bound)
    assert [a.text() for a in inspection.menu.actions() if a.text()][:3] == [
        "Previous worst", "Next worst", "&Compare runs…"]


def test_another_dataset_starts_a_new_history_and_an_unfiltered_table(qtbot, window, inspection, demo_dataset,
                                                                      tmp_path):
    import shutil

    run_and_wait(qtbot, window, window.commands.run_current)
    inspection.filter_bar.edit.setText("soft_dice > 2")
    inspection.filter_bar.apply()
    assert window.dataset_panel.visible_order() == []
    open_and_wait(qtbot, window, demo_dataset)  # the same folder again: its runs stay
    assert len(inspection.history) == 1
    assert inspection.filter_bar.filter is None and len(window.dataset_panel.visible_order()) == 3
    other = tmp_path / "other"
    # another folder with the same ids (its stored session left out: a copy with it would restore those runs)
    shutil.copytree(demo_dataset, other, ignore=shutil.ignore_patterns(".segscope-session"))
    open_and_wait(qtbot, window, other)
    assert len(inspection.history) == 0
    qtbot.waitUntil(lambda: inspection.timing.stats == [] and inspection.timing.table.rowCount() == 0)
