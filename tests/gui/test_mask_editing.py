"""Mask editing on the ground-truth panel: every tool by real mouse events, undo/redo, save, recovery, prompts.

Expected pixels come from `core.editing.annotation.MaskEditor` applied to the same slide points the layer received
(recorded from its signals), plus independent checks: the recorded points are where the test clicked, and
a brush stroke paints exactly the pixels near the path (a distance test written here).
"""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

import cv2
import numpy as np
import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QMessageBox

from segscope.core.compat import pairwise
from segscope.core.dataset.dataset import Dataset
from segscope.core.editing.annotation import Clip, MaskEditor, allowed_map, prediction_labels, probability_at_roi
from segscope.core.editing.files import find_recovery, recovery_path
from segscope.core.files.fileio import read_mask
from segscope.core.metrics.scores import argmax_at_roi, image_metrics, mask_to_labels
from segscope.core.roi import Roi
from segscope.core.session.views import UNSAVED_MARK
from segscope.gui.editing.mask_tools import slide_point
from segscope.gui.shell import mask_editing

from .conftest import drag, open_and_wait, send_mouse

pytestmark = pytest.mark.gui

Button = QMessageBox.StandardButton


@pytest.fixture
def answers(monkeypatch):
    """Answers QMessageBox.question from a queue (default: Discard, or No when Discard is not offered) and
    records the questions asked."""
    queue: list[Button] = []
    asked: list[str] = []

    def question(_parent, title, text, buttons, _default=Button.NoButton):
        asked.append(f"{title}: {text}")
        if queue:
            return queue.pop(0)
        return Button.Discard if buttons & Button.Discard else Button.No

    monkeypatch.setattr(QMessageBox, "question", staticmethod(question))
    return queue, asked


@pytest.fixture
def editing(qtbot, window, answers):
    """The window with image 001 run and its result on the panels, the panels zoomed to the ROI."""
    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000):
        assert window.commands.run_current()
    qtbot.waitUntil(lambda: window.editing.shown_result() is not None)
    window.panels.fit()
    QApplication.processEvents()
    return window.editing


def panel_pos(win, x: float, y: float) -> QPoint:
    """Where slide position (x, y) is on the result panels' viewport (the ground-truth panel)."""
    return win.panels.graphics.mapFromScene(win.panels.truth.view.mapViewToScene(QPointF(x, y)))


def record(editing) -> list[QPointF]:
    """Every position the editing layer reports (press, moves, release, double-click)."""
    points: list[QPointF] = []
    for signal in (editing.layer.pressed, editing.layer.moved, editing.layer.released, editing.layer.doubleClicked):
        signal.connect(lambda p: points.append(QPointF(p)))
    return points


def drag_on_panel(win, slide_points: list[tuple[float, float]], steps: int = 4) -> None:
    viewport = win.panels.graphics.viewport()
    for a, b in pairwise(slide_points):
        drag_segments = [panel_pos(win, *a), panel_pos(win, *b)]
        if a == slide_points[0]:
            send_mouse(viewport, QEvent.Type.MouseButtonPress, drag_segments[0], Qt.MouseButton.LeftButton)
        for i in range(1, steps + 1):
            pos = drag_segments[0] + (drag_segments[1] - drag_segments[0]) * i / steps
            send_mouse(viewport, QEvent.Type.MouseMove, pos, Qt.MouseButton.LeftButton)
    send_mouse(viewport, QEvent.Type.MouseButtonRelease, panel_pos(win, *slide_points[-1]), Qt.MouseButton.NoButton)
    QApplication.processEvents()


def click_on_panel(win, x: float, y: float, double: bool = False) -> None:
    viewport = win.panels.graphics.viewport()
    pos = panel_pos(win, x, y)
    kinds = [QEvent.Type.MouseButtonPress, QEvent.Type.MouseButtonRelease]
    if double:
        kinds += [QEvent.Type.MouseButtonDblClick, QEvent.Type.MouseButtonRelease]
    for kind in kinds:
        buttons = Qt.MouseButton.NoButton if kind == QEvent.Type.MouseButtonRelease else Qt.MouseButton.LeftButton
        send_mouse(viewport, kind, pos, buttons)
    QApplication.processEvents()


def assert_panel_shows(win, mask: np.ndarray) -> None:
    roi = win.panels.result.roi
    np.testing.assert_array_equal(win.panels.panel_arrays()["truth"],
                                  mask_to_labels(mask[roi.y0 : roi.y1, roi.x0 : roi.x1], 2))


def save(qtbot, editing, trigger=None) -> None:
    """Save (Ctrl+S by `trigger`, else `editing.save()`) and wait until the worker wrote the mask."""
    with qtbot.waitSignal(editing.saved, timeout=10000):
        if trigger is None:
            assert editing.save()
        else:
            trigger()


def key(win, k: Qt.Key, modifiers=Qt.KeyboardModifier.NoModifier) -> None:
    QTest.keyClick(win, k, modifiers)
    QApplication.processEvents()


CTRL = Qt.KeyboardModifier.ControlModifier
SHIFT = Qt.KeyboardModifier.ShiftModifier


def test_brush_drag_paints_the_path_and_undo_redo_restore_it_exactly(window, editing):
    original = window.mask.copy()
    roi = window.panels.result.roi
    key(window, Qt.Key.Key_B)
    assert editing.tool == "brush"
    editing.actions.radius_spin.setValue(6)
    path = [(roi.x0 + 40, roi.y0 + 60), (roi.x0 + 160, roi.y0 + 90), (roi.x0 + 220, roi.y0 + 200)]
    seen = record(editing)
    drag_on_panel(window, path)

    # The layer got the positions the test clicked (to the precision of a screen pixel).
    px = window.panels.truth.view.viewPixelSize()[0]
    for target in path:
        assert min(abs(p.x() - target[0]) + abs(p.y() - target[1]) for p in seen) <= 2 * px
    # Exactly the pixels core's editor paints for those points (one stroke per mouse move, clipped to the ROI).
    reference = MaskEditor(original)
    points = [slide_point(p) for p in seen]
    reference.begin_edit()
    for a, b in pairwise([points[0], *points]):
        reference.stroke([a, b], 6, 255, Clip(window.panels.result.roi))
    reference.end_edit()
    edited = editing.editor.mask
    np.testing.assert_array_equal(edited, reference.mask)
    assert window.mask is edited
    assert_panel_shows(window, edited)

    # Independently: painted pixels are those within the radius of the path through the pixels the mouse
    # was on (up to OpenCV's 0.7 px rim).
    ys, xs = np.mgrid[0 : edited.shape[0], 0 : edited.shape[1]]
    distance = np.full(edited.shape, np.inf)
    for (ax, ay), (bx, by) in pairwise(np.floor([(p.x(), p.y()) for p in seen]).tolist()):
        d = np.array([bx - ax, by - ay])
        t = np.clip(((xs - ax) * d[0] + (ys - ay) * d[1]) / max(d @ d, 1e-9), 0, 1)
        distance = np.minimum(distance, np.hypot(xs - ax - t * d[0], ys - ay - t * d[1]))
    changed = edited != original
    assert changed.any()
    assert distance[changed].max() <= 6.8
    assert (edited[distance <= 6] == 255).all()

    # One drag = one undo step; undo and redo restore the pixels exactly (Ctrl+Z, Ctrl+Shift+Z, Ctrl+Y).
    assert window.isWindowModified() and "[*]" in window.windowTitle()
    key(window, Qt.Key.Key_Z, CTRL)
    np.testing.assert_array_equal(editing.editor.mask, original)
    assert_panel_shows(window, original)
    assert not editing.editor.can_undo and not window.isWindowModified()
    key(window, Qt.Key.Key_Z, CTRL | SHIFT)
    np.testing.assert_array_equal(editing.editor.mask, reference.mask)
    assert_panel_shows(window, reference.mask)
    key(window, Qt.Key.Key_Z, CTRL)
    key(window, Qt.Key.Key_Y, CTRL)
    np.testing.assert_array_equal(editing.editor.mask, reference.mask)


def test_eraser_in_error_map_and_contour_mode_updates_the_panel_box(window, editing):
    original = window.mask.copy()
    roi = window.panels.result.roi
    truth = mask_to_labels(original[roi.y0 : roi.y1, roi.x0 : roi.x1], 2)
    ys, xs = np.nonzero(truth)
    assert len(xs), "the demo ROI holds a defect"
    centre = (roi.x0 + float(np.median(xs)) + 0.5, roi.y0 + float(np.median(ys)) + 0.5)
    window.panels.error_map_action.setChecked(True)
    key(window, Qt.Key.Key_X)
    editing.actions.radius_spin.setValue(12)
    seen = record(editing)
    drag_on_panel(window, [centre, (centre[0] + 50, centre[1] + 10)])
    reference = MaskEditor(original)
    points = [slide_point(p) for p in seen]
    reference.begin_edit()
    for a, b in pairwise([points[0], *points]):
        reference.stroke([a, b], 12, 0, Clip(window.panels.result.roi))
    reference.end_edit()
    np.testing.assert_array_equal(editing.editor.mask, reference.mask)
    assert (editing.editor.mask != original).any()
    # The error map redrawn by box equals one computed from scratch.
    from segscope.core.metrics.review import error_codes

    labels = mask_to_labels(reference.mask[roi.y0 : roi.y1, roi.x0 : roi.x1], 2)
    np.testing.assert_array_equal(window.panels.panel_arrays()["error"],
                                  error_codes(argmax_at_roi(window.panels.result), labels, 1))
    # Contours too: edit again in overlay + contour mode, compare with the full redraw.
    window.panels.error_map_action.setChecked(False)
    window.panels.overlay_action.setChecked(True)
    window.panels.contour_action.setChecked(True)
    drag_on_panel(window, [(centre[0] - 30, centre[1] - 30), (centre[0] + 30, centre[1] + 30)])
    drawn = window.panels.panel_arrays()["truth"].copy()
    window.panels.contour_action.setChecked(False)
    window.panels.contour_action.setChecked(True)  # redraws from scratch
    np.testing.assert_array_equal(drawn, window.panels.panel_arrays()["truth"])


def test_fill_stays_inside_the_roi_and_is_one_undo_step(window, editing):
    original = window.mask.copy()
    roi = window.panels.result.roi
    truth = mask_to_labels(original[roi.y0 : roi.y1, roi.x0 : roi.x1], 2)
    inner = np.zeros_like(truth, bool)
    inner[20:-20, 20:-20] = True
    ys, xs = np.nonzero((truth == 0) & inner)
    key(window, Qt.Key.Key_G)
    seen = record(editing)
    click_on_panel(window, roi.x0 + xs[0] + 0.5, roi.y0 + ys[0] + 0.5)  # a background pixel of the ROI
    seed = (int(seen[0].x()), int(seen[0].y()))
    assert abs(seed[0] - roi.x0 - xs[0]) <= 2 and abs(seed[1] - roi.y0 - ys[0]) <= 2
    edited = editing.editor.mask
    # Independent reference: OpenCV's flood fill of the ROI crop alone.
    crop = original[roi.y0 : roi.y1, roi.x0 : roi.x1].copy()
    cv2.floodFill(crop, None, (seed[0] - roi.x0, seed[1] - roi.y0), 255, 0, 0, 4)
    expected = original.copy()
    expected[roi.y0 : roi.y1, roi.x0 : roi.x1] = crop
    np.testing.assert_array_equal(edited, expected)
    assert_panel_shows(window, edited)
    key(window, Qt.Key.Key_Z, CTRL)
    np.testing.assert_array_equal(editing.editor.mask, original)


def test_lasso_drag_and_polygon_clicks_fill_the_polygon(window, editing):
    original = window.mask.copy()
    roi = window.panels.result.roi
    key(window, Qt.Key.Key_L)
    seen = record(editing)
    corners = [(roi.x0 + 30, roi.y0 + 30), (roi.x0 + 200, roi.y0 + 50), (roi.x0 + 90, roi.y0 + 220)]
    drag_on_panel(window, [*corners, corners[0]])
    reference = MaskEditor(original)
    reference.polygon([slide_point(p) for p in seen[:-1]], 255, Clip(window.panels.result.roi))
    np.testing.assert_array_equal(editing.editor.mask, reference.mask)
    assert (editing.editor.mask != original).sum() > 1000

    # Polygon by clicks; the double-click closes it. Class 0 (background) this time.
    editing.actions.class_combo.setCurrentIndex(0)
    seen.clear()
    clicked = [(roi.x0 + 300, roi.y0 + 300), (roi.x0 + 420, roi.y0 + 310), (roi.x0 + 380, roi.y0 + 450)]
    for i, corner in enumerate(clicked):
        click_on_panel(window, *corner, double=i == len(clicked) - 1)
    presses = [slide_point(p) for p in seen[0::2][:3]]
    reference.polygon(presses, 0, Clip(window.panels.result.roi))
    np.testing.assert_array_equal(editing.editor.mask, reference.mask)
    key(window, Qt.Key.Key_Z, CTRL)
    key(window, Qt.Key.Key_Z, CTRL)
    np.testing.assert_array_equal(editing.editor.mask, original)


def test_probability_aware_brush_paints_only_above_the_threshold(window, editing):
    original = window.mask.copy()
    result = window.panels.result
    roi = result.roi
    key(window, Qt.Key.Key_B)
    key(window, Qt.Key.Key_P)
    assert editing.actions.limit_action.isChecked()
    # A threshold the ROI has pixels on both sides of: the stroke crosses both.
    probability = probability_at_roi(result, 1)
    editing.actions.threshold_slider.setValue(round(float(np.median(probability)) * 100))
    threshold = editing.actions.threshold()
    assert (probability >= threshold).mean() > 0.2 and (probability < threshold).mean() > 0.2
    editing.actions.radius_spin.setValue(40)
    seen = record(editing)
    drag_on_panel(window, [(roi.x0 + 60, roi.y0 + 60), (roi.x1 - 60, roi.y1 - 60)], steps=10)
    changed = editing.editor.mask != original
    clip = allowed_map(result, 1, threshold)
    allowed = np.zeros(original.shape, bool)
    allowed[roi.y0 : roi.y1, roi.x0 : roi.x1] = probability >= threshold
    assert changed.any() and not changed[~allowed].any()
    points = [slide_point(p) for p in seen]
    limited, unlimited = MaskEditor(original), MaskEditor(original)
    for a, b in pairwise([points[0], *points]):
        limited.stroke([a, b], 40, 255, clip)
        unlimited.stroke([a, b], 40, 255, Clip(roi))
    np.testing.assert_array_equal(editing.editor.mask, limited.mask)
    assert ((unlimited.mask != original) & ~allowed).sum() > 1000  # the limit held the brush back


def test_accept_prediction_from_argmax_or_threshold(window, editing):
    result = window.panels.result
    roi = result.roi
    key(window, Qt.Key.Key_A, CTRL | SHIFT)
    np.testing.assert_array_equal(editing.editor.mask[roi.y0 : roi.y1, roi.x0 : roi.x1],
                                  argmax_at_roi(result) * np.uint8(255))
    assert_panel_shows(window, editing.editor.mask)
    editing.actions.threshold_slider.setValue(80)
    key(window, Qt.Key.Key_T, CTRL | SHIFT)
    np.testing.assert_array_equal(editing.editor.mask[roi.y0 : roi.y1, roi.x0 : roi.x1],
                                  prediction_labels(result, 0.8, 1) * np.uint8(255))
    key(window, Qt.Key.Key_Z, CTRL)
    np.testing.assert_array_equal(editing.editor.mask[roi.y0 : roi.y1, roi.x0 : roi.x1],
                                  argmax_at_roi(result) * np.uint8(255))


def test_metrics_follow_the_edits(qtbot, window, editing):
    before = window.session.metrics("001")
    with qtbot.waitSignal(editing.maskEdited, timeout=3000):
        key(window, Qt.Key.Key_A, CTRL | SHIFT)  # the mask becomes the prediction: hard Dice 1
    expected = image_metrics(window.panels.result, editing.editor.mask)
    qtbot.waitUntil(lambda: window.session.known_metrics("001") == expected)  # re-scored on a worker
    assert window.session.is_fresh("001")
    assert expected.foreground_dice == 1.0 and before.foreground_dice < 1.0
    assert f"Dice {expected.foreground_dice:.4f}" in window.main_actions.dice_label.text()
    row = window.dataset_panel.model.row("001")
    assert row.metrics == expected and row.status == "done" + UNSAVED_MARK


def test_save_writes_mask_corrected_and_keeps_the_original(qtbot, window, editing, demo_dataset):
    original_bytes = (demo_dataset / "001" / "mask.png").read_bytes()
    key(window, Qt.Key.Key_A, CTRL | SHIFT)
    editing.autosave()
    qtbot.waitUntil(lambda: editing.autosaver.job is None)
    source = demo_dataset / "001" / "mask.png"
    assert recovery_path(source).exists()
    save(qtbot, editing, lambda: key(window, Qt.Key.Key_S, CTRL))
    corrected = demo_dataset / "001" / "mask_corrected.png"
    np.testing.assert_array_equal(read_mask(corrected), editing.editor.mask)
    assert source.read_bytes() == original_bytes
    assert not recovery_path(source).exists()
    assert not window.isWindowModified() and not editing.dirty
    assert window.dataset_panel.model.row("001").status == "done"
    assert Dataset.open(demo_dataset).item("001").truth_path == corrected
    # Switching away does not ask: nothing is unsaved. Coming back shows the corrected mask.
    window.dataset_panel.select_item("002")
    qtbot.waitUntil(lambda: window.slide_ready() and window.current.id == "002")
    window.dataset_panel.select_item("001")
    qtbot.waitUntil(lambda: window.slide_ready() and window.current.id == "001")
    np.testing.assert_array_equal(window.mask, read_mask(corrected))


def test_replace_mode_keeps_a_backup(qtbot, window, editing, demo_dataset, monkeypatch):
    source = demo_dataset / "001" / "mask.png"
    original_bytes = source.read_bytes()
    # Another program writes a correction after the mask was read: the save asks (issue 40), "overwrite" goes on,
    # and a replace removes the shadowing copy.
    (demo_dataset / "001" / "mask_corrected.png").write_bytes(b"stale")
    asked = []
    monkeypatch.setattr(mask_editing, "ask_conflict", lambda _parent, conflict: asked.append(conflict) or "overwrite")
    editing.actions.set_save_mode("replace")
    key(window, Qt.Key.Key_A, CTRL | SHIFT)
    save(qtbot, editing)
    assert [(c.item_id, c.path.name) for c in asked] == [("001", "mask_corrected.png")]
    assert "appeared by another viewer or program" in asked[0].text
    np.testing.assert_array_equal(read_mask(source), editing.editor.mask)
    assert (demo_dataset / "001" / "mask.orig.png").read_bytes() == original_bytes
    assert not (demo_dataset / "001" / "mask_corrected.png").exists()
    assert "mask.orig.png" in window.messages.messages[-1].text
    assert editing.actions.save_mode() == "replace"  # remembered
    # issue 43: the Truth column says mask.png now holds the user's edits ("replaced"), not "original"
    qtbot.waitUntil(lambda: window.dataset_panel.model.row("001").truth_kind == "replaced", timeout=10000)


@contextlib.contextmanager
def auto_save_held(editing, monkeypatch):
    """An auto-save started and held at a gate while the block runs; yields the list that gets True when the
    gate had to be opened by the 10 s safety timer (the block waited for the write), and opens it after."""
    gate, released = threading.Event(), []
    write = editing.autosaver.service.write
    monkeypatch.setattr(editing.autosaver.service, "write", lambda *a: gate.wait(30) and write(*a))
    editing.autosave()
    assert editing.autosaver.job is not None  # writing (held at the gate)
    timer = threading.Timer(10, lambda: released.append(True) or gate.set())
    timer.start()
    try:
        yield released
    finally:
        timer.cancel()
        gate.set()


def test_taking_theirs_while_an_auto_save_writes_does_not_wait_for_it(qtbot, window, editing, demo_dataset,
                                                                      monkeypatch):
    """The answer to a save conflict runs after an auto-save still writing (which must not recreate the recovery
    file the answer removes) without the window waiting for that write."""
    source = demo_dataset / "001" / "mask.png"
    theirs = np.zeros_like(read_mask(source))
    theirs[:7, :9] = 255
    asked = []
    monkeypatch.setattr(mask_editing, "ask_conflict", lambda _parent, conflict: asked.append(conflict) or None)
    key(window, Qt.Key.Key_A, CTRL | SHIFT)
    cv2.imwrite(str(demo_dataset / "001" / "mask_corrected.png"), theirs)  # another program, after the read
    assert editing.save()
    qtbot.waitUntil(lambda: len(asked) == 1)  # (None: the edits stay unsaved)
    with auto_save_held(editing, monkeypatch) as released:
        monkeypatch.setattr(mask_editing, "ask_conflict", lambda _parent, conflict: "theirs")
        editing._ask_conflict(asked[0])
        assert not released  # answered without waiting for the auto-save
    qtbot.waitUntil(lambda: not editing.dirty and editing.autosaver.job is None, timeout=10000)
    np.testing.assert_array_equal(window.mask, theirs)  # (the mask as on disk)
    assert find_recovery(source) is None  # the auto-save's file, written first, went with the answer


def test_discarding_while_an_auto_save_writes_does_not_wait_and_leaves_no_recovery_file(qtbot, window, editing,
                                                                                        demo_dataset, monkeypatch):
    """Discard answers at once; the recovery file the running auto-save writes after it is removed after it."""
    source = demo_dataset / "001" / "mask.png"
    on_disk = read_mask(source)
    key(window, Qt.Key.Key_A, CTRL | SHIFT)
    with auto_save_held(editing, monkeypatch) as released:
        editing.discard()
        assert not released and not editing.dirty  # answered without waiting for the auto-save
    qtbot.waitUntil(lambda: editing.autosaver.job is None, timeout=10000)
    qtbot.waitUntil(lambda: find_recovery(source) is None, timeout=10000)
    np.testing.assert_array_equal(window.mask, on_disk)


def test_an_image_without_a_mask_gets_one(qtbot, window, answers, demo_dataset):
    (demo_dataset / "003" / "mask.png").unlink()
    open_and_wait(qtbot, window, demo_dataset)
    window.dataset_panel.select_item("003")
    qtbot.waitUntil(lambda: window.slide_ready() and window.current.id == "003")
    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000):
        assert window.commands.run_current()
    editing = window.editing
    qtbot.waitUntil(lambda: editing.shown_result() is not None)  # the panels' inputs come from a worker
    key(window, Qt.Key.Key_A, CTRL | SHIFT)
    qtbot.waitUntil(lambda: "truth" in window.panels.panel_arrays())  # (the panels' inputs: from a worker)
    result = window.panels.result
    roi = result.roi
    assert window.panels.panel_arrays()["truth"].shape == (roi.height, roi.width)
    np.testing.assert_array_equal(window.panels.panel_arrays()["truth"], argmax_at_roi(result))
    assert editing.editor.mask[: roi.y0].max(initial=0) == 0  # outside the ROI stays background
    save(qtbot, editing)
    item = Dataset.open(demo_dataset).item("003")
    assert item.truth_path == demo_dataset / "003" / "mask_corrected.png"
    np.testing.assert_array_equal(read_mask(item.truth_path), editing.editor.mask)


def test_recovery_round_trip_after_a_crash(qtbot, window, editing, answers, demo_dataset, tiny_model_project):
    from segscope.core.backend_choice import BackendChoice
    from segscope.gui.shell.main_window import MainWindow

    queue, asked = answers
    key(window, Qt.Key.Key_B)
    roi = window.panels.result.roi
    source = demo_dataset / "001" / "mask.png"
    editing.autosaver.timer.setInterval(100)  # the timer auto-saves while there are unsaved edits
    drag_on_panel(window, [(roi.x0 + 20, roi.y0 + 20), (roi.x0 + 120, roi.y0 + 140)])
    edited = editing.editor.mask.copy()
    qtbot.waitUntil(lambda: find_recovery(source) is not None, timeout=5000)
    qtbot.waitUntil(lambda: editing.autosaver.job is None)

    # A "crash": the first window never saves; a new window opens the same image.
    queue.append(Button.Yes)
    again = MainWindow()
    qtbot.addWidget(again)
    again.commands.open_backend(BackendChoice(pipeline=tiny_model_project.pipeline))
    assert again.commands.open_dataset(demo_dataset)
    qtbot.waitUntil(lambda: again.slide_ready() and again.editing.editor is not None, timeout=30000)
    qtbot.waitUntil(lambda: any("Restore" in q and "001" in q for q in asked))  # asked once, as the dataset opens
    np.testing.assert_array_equal(again.editing.editor.mask, edited)
    assert again.mask is again.editing.editor.mask and again.isWindowModified()
    assert again.dataset_panel.model.row("001").status.endswith(UNSAVED_MARK)
    again.editing.undo()  # the restore is one undo step back to the file's mask
    np.testing.assert_array_equal(again.editing.editor.mask, read_mask(source))
    again.editing.redo()
    save(qtbot, again.editing)
    assert find_recovery(source) is None
    np.testing.assert_array_equal(read_mask(demo_dataset / "001" / "mask_corrected.png"), edited)
    again.close()

    # Declining a restore deletes the recovery file.
    drag_on_panel(window, [(roi.x0 + 200, roi.y0 + 20), (roi.x0 + 220, roi.y0 + 140)])
    editing.autosave()
    qtbot.waitUntil(lambda: editing.autosaver.job is None)
    assert recovery_path(source).exists()
    queue.append(Button.No)
    asked.clear()
    third = MainWindow()
    qtbot.addWidget(third)
    assert third.commands.open_dataset(demo_dataset)
    qtbot.waitUntil(lambda: third.slide_ready() and any("Restore" in q for q in asked), timeout=30000)
    assert third.editing.editor is None and not recovery_path(source).exists()
    assert not third.dataset_panel.model.row("001").status.endswith(UNSAVED_MARK)
    third.close()


def test_unsaved_edits_are_asked_about_when_switching_images(qtbot, window, editing, answers, demo_dataset):
    queue, asked = answers
    key(window, Qt.Key.Key_A, CTRL | SHIFT)
    edited = editing.editor.mask.copy()
    queue.append(Button.Cancel)
    window.dataset_panel.select_item("002")
    assert len(asked) == 1 and "unsaved edits" in asked[0]
    assert window.current.id == "001" and window.dataset_panel.current_item() == "001"
    np.testing.assert_array_equal(editing.editor.mask, edited)
    assert editing.dirty

    queue.append(Button.Discard)
    window.dataset_panel.worst_button.click()  # (a sorted table: the row that moves is the one shown)
    window.dataset_panel.select_item("001")
    window.dataset_panel.select_item("002")
    qtbot.waitUntil(lambda: window.slide_ready() and window.current.id == "002")
    assert window.dataset_panel.current_item() == "002"  # the highlighted row is the image shown
    assert not window.isWindowModified() and window.dataset_panel.model.row("001").status == "done"
    assert not (demo_dataset / "001" / "mask_corrected.png").exists()
    window.dataset_panel.select_item("001")
    qtbot.waitUntil(lambda: window.slide_ready() and window.current.id == "001")
    np.testing.assert_array_equal(window.mask, read_mask(demo_dataset / "001" / "mask.png"))
    assert len(asked) == 2

    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000):
        assert window.commands.run_current()
    qtbot.waitUntil(lambda: editing.shown_result() is not None)
    key(window, Qt.Key.Key_A, CTRL | SHIFT)
    queue.append(Button.Save)
    window.dataset_panel.select_item("003")
    qtbot.waitUntil(lambda: window.slide_ready() and window.current.id == "003")
    np.testing.assert_array_equal(read_mask(demo_dataset / "001" / "mask_corrected.png"), edited)


def test_unsaved_edits_are_asked_about_on_close(qtbot, window, editing, answers):
    queue, asked = answers
    key(window, Qt.Key.Key_A, CTRL | SHIFT)
    queue.append(Button.Cancel)
    assert not window.close()
    assert window.isVisible() and editing.dirty
    queue.append(Button.Discard)
    assert window.close()
    assert len(asked) == 2


def test_brush_size_keys_tools_and_shortcuts(window, editing):
    from segscope.gui.widgets.shortcuts import SHORTCUTS

    key(window, Qt.Key.Key_B)
    editing.actions.radius_spin.setValue(10)
    key(window, Qt.Key.Key_BracketRight)
    assert editing.actions.radius() == 12
    key(window, Qt.Key.Key_BracketLeft)
    key(window, Qt.Key.Key_BracketLeft)
    assert editing.actions.radius() == 8
    assert editing.layer.boundingRect().width() > window.panels.result.roi.width  # room for the circle
    roi = window.panels.result.roi
    pos = panel_pos(window, roi.x0 + 100, roi.y0 + 100)
    send_mouse(window.panels.graphics.viewport(), QEvent.Type.MouseMove, pos, Qt.MouseButton.NoButton)
    QTest.qWait(50)
    assert editing.layer._cursor is not None  # the preview circle follows the mouse
    keys = [k for k, _ in SHORTCUTS]
    assert len(keys) == len(set(keys))
    actions = editing.actions
    for action in (*actions.tool_actions.values(), actions.undo_action, actions.redo_action, actions.save_action,
                   actions.accept_argmax_action, actions.accept_threshold_action, actions.limit_action):
        assert action.shortcut().toString() in keys
        assert action.toolTip().endswith(f"({action.shortcut().toString()})")
    assert [a.text() for a in window.menuBar().actions()][:2] == ["&File", "&Edit"]


def test_pan_tool_leaves_the_mask_alone(window, editing):
    key(window, Qt.Key.Key_V)
    view = window.panels.truth.view
    before = view.viewRect()
    roi = window.panels.result.roi
    drag(window.panels.graphics.viewport(), panel_pos(window, roi.x0 + 100, roi.y0 + 100),
         panel_pos(window, roi.x0 + 200, roi.y0 + 150))
    assert editing.editor is None
    assert view.viewRect() != before


def test_editing_needs_a_result_of_this_image(window, answers):
    key(window, Qt.Key.Key_B)
    assert not window.editing._can_edit()
    window.editing.accept_prediction(None)
    assert window.editing.editor is None



def _enabled(editing) -> dict[str, bool]:
    tools = editing.actions
    return {name: getattr(tools, f"{name}_action").isEnabled()
            for name in ("undo", "redo", "save", "accept_argmax", "accept_threshold")}


def _expect(undo=False, redo=False, save=False, accept=False) -> dict[str, bool]:
    return {"undo": undo, "redo": redo, "save": save, "accept_argmax": accept, "accept_threshold": accept}


def test_the_mask_tools_follow_the_session_whoever_changes_it(qtbot, window, answers):
    """The tools' enabled state follows the session's state, also when something other than the tools changes it
    (the session's own commands, called here as the window's other parts call them)."""
    editing = window.editing
    assert _enabled(editing) == _expect()  # not run: nothing to accept, nothing to undo
    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000):
        assert window.commands.run_current()
    qtbot.waitUntil(lambda: _enabled(editing) == _expect(accept=True) and editing.shown_result() is not None)
    key(window, Qt.Key.Key_A, CTRL | SHIFT)  # accept argmax (of the result drawn): one edit
    assert _enabled(editing) == _expect(undo=True, save=True, accept=True)
    key(window, Qt.Key.Key_Z, CTRL)
    assert _enabled(editing) == _expect(redo=True, accept=True)  # back to the file: nothing to save
    key(window, Qt.Key.Key_Z, CTRL | SHIFT)
    assert _enabled(editing) == _expect(undo=True, save=True, accept=True)
    window.session.discard()  # the session's command, not the tools'
    assert _enabled(editing) == _expect(accept=True)
    key(window, Qt.Key.Key_A, CTRL | SHIFT)
    with qtbot.waitSignal(editing.saved, timeout=10000):
        assert editing.save()
        assert _enabled(editing) == _expect()  # while it is written: no edits
    assert _enabled(editing) == _expect(undo=True, accept=True)  # saved: nothing unsaved, the edit undoable
    window.session.set_roi(Roi(0, 0, 300, 300))  # the run is of the old ROI (shown dimmed, still its own)
    assert _enabled(editing) == _expect(undo=True, accept=True)
    with qtbot.waitSignal(window.controller.batchFinished, timeout=120000):
        assert window.commands.run_whole_slide()
    qtbot.waitUntil(lambda: window.session.slide_run_of("001") is not None)
    assert _enabled(editing) == _expect(undo=True)  # a whole-slide part answers there: no prediction to accept
    window.session.undo_roi()  # back on the run's ROI: the whole-slide run, newer, still answers
    assert _enabled(editing) == _expect(undo=True)
    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000):
        assert window.commands.run_current()  # a newer run of the ROI answers: its prediction can be accepted
    qtbot.waitUntil(lambda: _enabled(editing) == _expect(undo=True, accept=True))


def test_a_conflict_said_as_the_window_closes_is_never_asked(qtbot, monkeypatch):
    """The question waits for the event loop (after the save's answer); a window closed and deleted meanwhile is
    not asked, and nothing is raised in the event loop."""
    from segscope.core.session.events import SaveConflict
    from segscope.gui.shell.main_window import MainWindow

    asked = []
    monkeypatch.setattr(mask_editing, "ask_conflict", lambda _parent, conflict: asked.append(conflict))
    closing = MainWindow()  # (its own: the `window` fixture closes its window after the test)
    closing.show()
    closing.session.events.save_conflict.emit(SaveConflict("001", "corrected", Path("mask.png"), "changed"))
    closing.close()
    closing.deleteLater()
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    qtbot.wait(50)
    assert asked == []
