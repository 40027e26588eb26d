"""The views on the session model, as a user meets them: metrics after Discard/Save, dragging the ROI
during a run, undoing ROI moves, panning inside a zoomed-in ROI, and the first-window size."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QPointF
from PySide6.QtWidgets import QApplication, QMessageBox

from segscope.core.dataset.dataset import Dataset
from segscope.core.files.fileio import read_mask
from segscope.core.metrics.scores import image_metrics
from segscope.core.roi import Roi

from .conftest import drag

pytestmark = pytest.mark.gui

Button = QMessageBox.StandardButton


@pytest.fixture
def answer(monkeypatch):
    """Every QMessageBox.question is answered with `answer[0]`."""
    chosen = [Button.Discard]
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *_args, **_kw: chosen[0]))
    return chosen


def run_current(qtbot, win) -> None:
    with qtbot.waitSignal(win.controller.batchFinished, timeout=60000):
        assert win.commands.run_current()
    qtbot.waitUntil(lambda: win.panels.result is not None)


def select(qtbot, win, item_id: str) -> None:
    win.dataset_panel.select_item(item_id)
    qtbot.waitUntil(lambda: win.slide_ready() and win.current.id == item_id)


def paint_away_the_roi(qtbot, win) -> None:
    """Accept "class 1 everywhere" as the ROI's mask: a big, certain change of the metrics (re-scored on a
    worker)."""
    editing = win.editing
    editing.actions.threshold_slider.setValue(0)
    editing.accept_prediction(0.0)
    win.scorer.score_due()  # what the rate-limit timer does
    qtbot.waitUntil(lambda: not win.scorer.busy)


def test_discard_puts_back_the_metrics_of_the_mask_on_disk(qtbot, window, answer, demo_dataset):
    run_current(qtbot, window)
    result = window.panels.result
    on_disk = image_metrics(result, read_mask(demo_dataset / "001" / "mask.png"))
    paint_away_the_roi(qtbot, window)
    assert window.dataset_panel.model.row("001").metrics.foreground_dice != pytest.approx(on_disk.foreground_dice)
    answer[0] = Button.Discard
    select(qtbot, window, "002")  # asks; the answer is Discard
    row = window.dataset_panel.model.row("001")
    qtbot.waitUntil(lambda: row.metrics.foreground_dice == pytest.approx(on_disk.foreground_dice))
    assert row.status == "done"
    assert window.session.metrics("001").foreground_dice == pytest.approx(on_disk.foreground_dice)


def test_saved_mask_metrics_agree_with_the_app_and_the_export(qtbot, window, answer, demo_dataset, tmp_path):
    run_current(qtbot, window)
    result = window.panels.result
    paint_away_the_roi(qtbot, window)
    answer[0] = Button.Save
    select(qtbot, window, "002")  # asks; the answer is Save: written on a worker, then 002 opens
    saved = image_metrics(result, read_mask(demo_dataset / "001" / "mask_corrected.png"))
    qtbot.waitUntil(lambda: window.dataset_panel.model.row("001").metrics.foreground_dice
                    == pytest.approx(saved.foreground_dice))
    rows, _means = window.session.metrics_table(["001"])
    assert rows[0]["foreground_dice"] == pytest.approx(saved.foreground_dice)


def test_dragging_the_roi_during_a_run_keeps_the_drag(qtbot, window):
    planned = window.slide.roi()
    moved = Roi(100, 100, 500, 500)
    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000):
        assert window.commands.run_current()
        window.slide.set_roi(moved)
        window.slide.roiChanged.emit(moved)  # as a finished drag does
    qtbot.waitUntil(lambda: window.panels.result is not None)
    assert window.slide.roi() == moved  # the result did not snap the view back
    assert window.panels.result.roi == planned  # the run used the ROI it was started with
    assert Dataset.open(window.dataset.root).stored_roi(window.dataset.item("001")) == moved
    assert window.panels.stale and window.dataset_panel.model.row("001").status == "ROI changed"
    marked = window.metrics_panel.note  # every metric display says its numbers are of the old ROI
    assert "ROI changed" in marked.text() and marked.isVisibleTo(window.metrics_panel)
    assert not window.metrics_panel.value_labels["soft_dice"].isEnabled()
    assert not window.main_actions.dice_label.isEnabled() and "ROI changed" in window.main_actions.dice_label.toolTip()
    window.main_actions.undo_roi_action.trigger()  # back to the ROI of the result: no longer stale
    assert window.slide.roi() == planned and not window.panels.stale
    assert window.dataset_panel.model.row("001").status == "done"
    assert not marked.isVisibleTo(window.metrics_panel) and window.main_actions.dice_label.isEnabled()
    window.main_actions.redo_roi_action.trigger()
    assert window.slide.roi() == moved and window.panels.stale


def test_a_drag_inside_a_zoomed_in_roi_pans(qtbot, window):
    roi = window.slide.roi()
    inner = (roi.x0 + roi.width // 4, roi.y0 + roi.height // 4, roi.width // 2, roi.height // 2)
    window.slide.vb.setRange(xRange=(inner[0], inner[0] + inner[2]), yRange=(inner[1], inner[1] + inner[3]),
                             padding=0)
    QApplication.processEvents()
    before = window.slide.vb.viewRect()
    centre = window.slide.vb.mapViewToScene(QPointF(roi.x0 + roi.width / 2, roi.y0 + roi.height / 2))
    start = window.slide.view.mapFromScene(centre)
    drag(window.slide.view.viewport(), start, start + QPoint(-80, -50))
    assert window.slide.roi() == roi  # the ROI did not move ...
    after = window.slide.vb.viewRect()
    assert after.x() > before.x() and after.y() > before.y()  # ... the view panned (content follows the mouse)


def test_first_window_fits_the_screen(qtbot):
    from segscope.gui.shell.main_window import MainWindow

    win = MainWindow()
    qtbot.addWidget(win)
    screen = QApplication.primaryScreen().availableGeometry()
    smallest = win.minimumSizeHint()  # a screen narrower than the docks' minimum cannot be honoured
    assert win.width() <= max(screen.width(), smallest.width())
    assert win.height() <= max(screen.height(), smallest.height())
    assert (win.width(), win.height()) != (1600, 1000)  # the old fixed first size
    win.close()


def test_reset_layout_brings_back_hidden_docks(qtbot, window):
    window.results_dock.hide()
    window.dataset_dock.hide()
    window.main_actions.reset_layout_action.trigger()
    QApplication.processEvents()
    assert window.results_dock.isVisible() and window.dataset_dock.isVisible()
    assert window.results_dock.height() >= 0.25 * window.height()


def test_a_new_window_on_the_dataset_restores_its_runs(qtbot, window, demo_dataset, tiny_model_project):
    from segscope.core.backend_choice import BackendChoice
    from segscope.gui.shell.main_window import MainWindow

    run_current(qtbot, window)
    expected = window.session.metrics("001")
    window.close()
    again = MainWindow()
    qtbot.addWidget(again)
    again.commands.open_backend(BackendChoice(pipeline=tiny_model_project.pipeline))
    assert again.commands.open_dataset(demo_dataset)
    qtbot.waitUntil(lambda: again.slide_ready() and again.panels.result is not None)  # restored on a worker
    assert again.dataset_panel.model.row("001").status == "done"
    assert again.session.metrics("001").soft_dice == pytest.approx(expected.soft_dice)
    qtbot.waitUntil(lambda: any("Restored 1 earlier run" in m.text for m in again.messages.messages))
    again.close()


def test_hover_readouts_go_when_the_mouse_leaves(qtbot, window):
    from PySide6.QtCore import QEvent

    window.slide.hovered.emit("slide x=1 y=2  RGB 0 0 0")
    assert window.statusBar().currentMessage().startswith("slide x=1")
    QApplication.sendEvent(window.slide.view.viewport(), QEvent(QEvent.Type.Leave))
    assert window.statusBar().currentMessage() == ""
    run_current(qtbot, window)
    roi = window.panels.result.roi
    window.panels.readout_at(roi.x0 + 1.5, roi.y0 + 1.5)
    assert window.panels.readout.text().startswith("slide (")
    QApplication.sendEvent(window.panels.graphics.viewport(), QEvent(QEvent.Type.Leave))
    assert window.panels.readout.text() == " " and not window.panels.heat.vline.isVisible()
