"""The review queue in the viewer, driven by its keys: two label errors injected into truths that otherwise equal
the model's prediction (a defect deleted from one image's truth, a light patch added to another's); Ctrl+Shift+Q
lists exactly those two, A and D fix them (the second image loaded, the first's edits saved on the way), U undoes,
and the saved truths equal the originals; the review log holds every decision."""

from __future__ import annotations

import json
import threading

import cv2
import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, QRectF, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QMessageBox

from segscope.core.metrics.scores import argmax_at_roi
from segscope.core.review.log import LOG_NAME
from segscope.gui.shell import review_queue
from segscope.gui.widgets.shortcuts import SHORTCUTS

pytestmark = pytest.mark.gui


def _key(qtbot, window, key: Qt.Key, modifier: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier) -> None:
    window.activateWindow()
    window.slide.setFocus()
    QTest.keyClick(window.slide, key, modifier)


def _shown(qtbot, window, item_id: str) -> None:
    qtbot.waitUntil(lambda: window.current is not None and window.current.id == item_id
                    and window.editing.shown_result() is not None, timeout=30000)


def test_keys_fix_injected_label_errors(qtbot, window, demo_dataset, monkeypatch):
    from segscope.core.review.log import ReviewLog

    log_threads: list[str] = []  # where the review log is read and written: never the GUI thread
    for name in ("read", "append_all"):
        real = getattr(ReviewLog, name)

        def spied(self, *args, real=real):  # type: ignore[no-untyped-def]
            log_threads.append(threading.current_thread().name)
            return real(self, *args)
        monkeypatch.setattr(ReviewLog, name, spied)
    asked: list[str] = []  # no question may be asked: moving on saves the edits (an answer here: Discard)
    monkeypatch.setattr(QMessageBox, "question", lambda *args, **_kw: asked.append(args[2])
                        or QMessageBox.StandardButton.Discard)
    with qtbot.waitSignal(window.controller.batchFinished, timeout=90000):
        assert window.commands.run_all()
    session = window.session
    originals, injected = {}, {}
    for item in session.dataset.items:  # truth = the prediction under the ROI (the queue is empty on them)
        result = session.result(item.id)
        roi = result.roi
        truth = np.zeros(result.image_size[::-1], np.uint8)
        truth[roi.y0 : roi.y1, roi.x0 : roi.x1] = (argmax_at_roi(result) > 0) * 255
        originals[item.id] = truth
        injected[item.id] = truth.copy()
    first, second = (item.id for item in session.dataset.items[:2])
    roi = session.result(first).roi
    count, labels, stats, _ = cv2.connectedComponentsWithStats((originals[first] > 0).view(np.uint8), connectivity=8)
    biggest = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
    injected[first][labels == biggest] = 0  # a defect deleted from the truth: the prediction's false alarm
    light = cv2.imread(str(demo_dataset / second / "image.png"), cv2.IMREAD_GRAYSCALE)
    patch = (slice(roi.y0 + 5, roi.y0 + 25), slice(roi.x0 + 5, roi.x0 + 35))
    assert light[patch].min() > 150 and not originals[second][patch].any()  # light: the model sees nothing there
    injected[second][patch] = 255  # a spurious blob: the prediction's miss
    for item_id, truth in injected.items():
        cv2.imwrite(str(demo_dataset / item_id / "mask.png"), truth)
    assert window.commands.open_dataset(demo_dataset)  # the truths read again, the runs kept
    qtbot.waitUntil(lambda: window.slide_ready(), timeout=30000)

    tools = window.review_queue
    monkeypatch.setattr(review_queue, "IN_FLIGHT", 1)  # (3 images here: one at a time shows the bound)
    in_flight, most = [0], [0]  # the listing jobs on the runner at once: a few, however many images ran
    submit = window.jobs.submit

    def counted(key, work, done=None, failed=None, **kwargs):  # type: ignore[no-untyped-def]
        if not (key or "").startswith("review:"):
            return submit(key, work, done, failed, **kwargs)
        in_flight[0] += 1
        most[0] = max(most[0], in_flight[0])

        def ended(call):  # type: ignore[no-untyped-def]
            def answer(*args):  # type: ignore[no-untyped-def]
                in_flight[0] -= 1
                return call(*args)
            return answer
        return submit(key, work, ended(done), ended(failed), **kwargs)

    monkeypatch.setattr(window.jobs, "submit", counted)
    _key(qtbot, window, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: len(tools.queue) == 2 and tools.queue.current is not None, timeout=30000)
    assert most[0] == 1  # every image listed, one at a time
    kinds = {(e.image, e.kind) for e in tools.queue.entries()}
    assert kinds == {(first, "false_alarm"), (second, "missed")}
    keys = {"false_alarm": Qt.Key.Key_A, "missed": Qt.Key.Key_D}
    presses = 0
    entry = tools.queue.current
    _shown(qtbot, window, entry.image)
    other = next(e.image for e in tools.queue.entries() if e.image != entry.image)
    loading = window.commands.loading  # the other image's slide is opened while the reviewer decides
    qtbot.waitUntil(lambda: loading.ready is not None and loading.ready[0].id == other, timeout=30000)
    # U takes back a decision, though the queue moved on to the other image (whose load saved this one's edits):
    # back on its image, its pixels as before, the entry current again.
    _key(qtbot, window, keys[entry.kind])
    assert tools.queue.current != entry and tools.queue.decision(entry) is not None
    _key(qtbot, window, Qt.Key.Key_U)
    qtbot.waitUntil(lambda: tools.queue.decision(entry) is None, timeout=30000)
    assert tools.queue.current == entry and window.current.id == entry.image
    assert np.array_equal(session.document.mask > 127, injected[entry.image] > 127)
    while tools.queue.pending():
        entry = tools.queue.current
        _shown(qtbot, window, entry.image)
        _key(qtbot, window, keys[entry.kind])
        presses += 1
    assert presses == 2  # one key per injected error, the advance included
    last = session.document
    assert np.array_equal(last.mask > 127, originals[last.item.id] > 127)
    window.editing.save()
    qtbot.waitUntil(lambda: not last.dirty and not last.saving, timeout=30000)
    for item_id in (first, second):  # each saved as the image's corrected truth
        saved = cv2.imread(str(demo_dataset / item_id / "mask_corrected.png"), cv2.IMREAD_GRAYSCALE)
        assert np.array_equal(saved > 127, originals[item_id] > 127), item_id
    qtbot.waitUntil(lambda: len((demo_dataset / LOG_NAME).read_text(encoding="utf-8").splitlines()) == 4,
                    timeout=10000)  # (written on a worker)
    records = [json.loads(line) for line in (demo_dataset / LOG_NAME).read_text(encoding="utf-8").splitlines()]
    assert [r["decision"] for r in records] == [records[0]["decision"], "undo", *(r["decision"] for r in records[2:])]
    assert sorted((r["image"], r["decision"]) for r in records[2:]) == [(first, "accept"), (second, "remove")]
    # Re-scored on the fixed truths, the images have no disagreement left, and the dock says so.
    qtbot.waitUntil(lambda: len(tools.queue) == 0 and not tools.panel.model.rows, timeout=30000)
    assert tools.panel.summary.text().startswith("No disagreement")
    assert asked == []
    listed = {keys for keys, _text in SHORTCUTS}  # every review key is in Help > Shortcuts
    assert {"Ctrl+Shift+Q", "A", "D", "K", "U", "J", "Shift+J"} <= listed
    assert log_threads and all(name.startswith("segscope-autosave") for name in log_threads), log_threads


#: The block planted in image q only (x0, y0, x1, y1), a mid-grey B calls a defect and A does not.
BLOCK = (40, 20, 60, 40)


def _planted(qtbot, window, tmp_path, write_png, tiny_model_project, monkeypatch):
    """Three images with a dark square both models call a defect, the grey `BLOCK` in q, empty truths, run by A (the
    tiny model); B (its defect logit raised 0.7) written beside it. Returns (the dataset folder, B's card)."""
    import helpers
    from helpers import tiny_card

    root = tmp_path / "planted"
    for name in ("p", "q", "r"):
        image = np.full((80, 120, 3), 210, np.uint8)
        image[10:24, 10:24] = 20  # a dark square both models call a defect
        if name == "q":
            x0, y0, x1, y1 = BLOCK
            image[y0:y1, x0:x1] = 140
        write_png(root / name / "image.png", image)
        write_png(root / name / "mask.png", np.zeros((80, 120), np.uint8))
    monkeypatch.setattr(helpers, "TINY_BIAS", np.array([0.0, 0.7], np.float32))
    models = tiny_model_project.root / "models"
    helpers.make_tiny_onnx(models / "seesmore.onnx")
    card = models / "seesmore.json"
    card.write_text(json.dumps({**tiny_card(), "onnx": "seesmore.onnx", "om": "seesmore.om"}), encoding="utf-8")
    assert window.commands.open_dataset(root)
    qtbot.waitUntil(lambda: window.current is not None and window.current.id == "p" and window.slide_ready(),
                    timeout=30000)
    with qtbot.waitSignal(window.controller.batchFinished, timeout=90000):
        assert window.commands.run_all()
    roi = window.session.result("q").roi
    assert roi.x0 <= 40 and roi.y0 <= 20 and roi.x1 >= 60 and roi.y1 >= 40  # the block lies inside the ROI
    return root, card


def test_compare_with_lists_the_planted_difference_and_steps_it(qtbot, window, tmp_path, write_png,
                                                                tiny_model_project, monkeypatch):
    """A (the tiny model, run) against B (its defect logit raised 0.7: a mid-grey block becomes a defect), picked by
    Compare with… (Ctrl+Shift+B): the block planted in one of three images (20 x 20 at (40, 20)) is the one place
    listed, the gate failed; J goes to it (its image loaded, the panels on it), A does nothing there, and
    Ctrl+Shift+Q goes back to the truth's queue."""
    root, card = _planted(qtbot, window, tmp_path, write_png, tiny_model_project, monkeypatch)
    offered = []
    monkeypatch.setattr(review_queue.QFileDialog, "getOpenFileName",
                        lambda _parent, _title, start, _filter: offered.append(start) or (str(card), ""))
    tools = window.review_queue
    _key(qtbot, window, Qt.Key.Key_B, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert offered == [str(tiny_model_project.pipeline)]  # the model on screen offered first
    parity = tools.parity
    qtbot.waitUntil(lambda: parity.active and not parity.running, timeout=60000)
    assert parity.error == ""
    assert [(e.image, e.kind, e.bbox, e.area) for e in parity.entries()] == [("q", "gained", (40, 20, 60, 40), 400)]
    assert parity.run.images == 3 and parity.run.failed == 1
    qtbot.waitUntil(lambda: tools.panel.summary.text().startswith("Gate FAILED"), timeout=10000)  # (drawn coalesced)
    assert len(tools.panel.parity_model.rows) == 1
    assert tools.panel.parity_table.isVisibleTo(tools.panel) and not tools.panel.table.isVisibleTo(tools.panel)
    assert tools.panel.summary.text().startswith("Gate FAILED: 1 of 3 images compared fail (0 lost, 1 gained, 0 "
                                                 "changed")
    assert tools.panel.summary.toolTip().startswith("The gate: no defect gained, lost or changed in class")
    assert not tools.panel.buttons[0].isVisibleTo(tools.panel)  # no accept on a flip
    assert not tools.cancel_compare_action.isEnabled()  # (nothing to cancel once it ended)
    _key(qtbot, window, Qt.Key.Key_J)
    assert parity.current == parity.entries()[0]
    _shown(qtbot, window, "q")
    outlined = window.inspection.highlights[0]  # the panels zoomed to the place, outlined
    qtbot.waitUntil(lambda: outlined.isVisible() and outlined.rect() == QRectF(40, 20, 20, 20), timeout=10000)
    (x0, x1), (y0, y1) = window.panels.views()[0].viewRange()
    assert x0 <= 40 and x1 >= 60 and y0 <= 20 and y1 >= 40 and x1 - x0 < 120
    # The dock shows the place in both runs: A's background (left), B's defect (right), 20 px scaled up.
    from segscope.gui.widgets.colormaps import BACKGROUND, class_color

    qtbot.waitUntil(lambda: tools.panel.preview.isVisibleTo(tools.panel), timeout=10000)
    shown = tools.panel.preview.pixmap().toImage()
    half = 20 * (64 // 20) + 2  # the place scaled up 3x, in a 1 px frame
    assert (shown.width(), shown.height()) == (half + 3 + half, half)  # (a white gap of a 16th between)
    left, right = shown.pixelColor(2, 2), shown.pixelColor(shown.width() - 3, shown.height() - 3)
    assert (left.red(), left.green(), left.blue()) == BACKGROUND
    assert (right.red(), right.green(), right.blue()) == tuple(class_color(1))
    frame = shown.pixelColor(0, 0)  # (a place all background stands out from the dock's own colour)
    assert (frame.red(), frame.green(), frame.blue()) == (160, 160, 160)
    assert window.review_queue.panel.compare_buttons[0].text() == "Compare with…"
    mask_before = window.session.document.mask.copy()
    _key(qtbot, window, Qt.Key.Key_A)  # nothing to decide: the truth stays
    assert np.array_equal(window.session.document.mask, mask_before)
    _key(qtbot, window, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert not parity.active and len(parity) == 0
    qtbot.waitUntil(lambda: tools.panel.table.isVisibleTo(tools.panel), timeout=10000)
    assert not tools.panel.preview.isVisibleTo(tools.panel)
    listed = {keys for keys, _text in SHORTCUTS}
    assert "Ctrl+Shift+B" in listed
    # The truth's queue again (the dark squares the empty truths lack): a decision still waiting when the window
    # closes (its lane held) is written at close.
    from segscope.gui.runtime.jobs import AUTOSAVE

    qtbot.waitUntil(lambda: tools.queue.current is not None, timeout=30000)
    entry = tools.queue.current
    _shown(qtbot, window, entry.image)
    release = threading.Event()
    try:
        window.jobs.submit(None, release.wait, lane=AUTOSAVE)  # the lane held: the decision's write waits behind
        _key(qtbot, window, Qt.Key.Key_K)
        assert tools.queue.decision(entry) == "keep" and tools.queue.writer.waiting == 1
    finally:
        threading.Timer(0.5, release.set).start()  # (the close waits for the running job, drops the queued ones)
    window.close()
    records = [json.loads(line) for line in (root / LOG_NAME).read_text(encoding="utf-8").splitlines()]
    assert [(r["entry"], r["decision"]) for r in records] == [(entry.key, "keep")]


def test_stepping_a_comparison_shows_b_in_the_truths_panel_which_no_tool_edits(qtbot, window, tmp_path, write_png,
                                                                             tiny_model_project, monkeypatch):
    """J onto the planted place: the third panel shows B's argmax, not the truth (titled so): class 1 exactly on the
    dark square and the planted block (B's defects, by hand), 0 elsewhere, where A's argmax has the square alone;
    the mask tools are off there (a brush stroke across the block changes neither the truth nor B's picture, the
    accept and undo actions are off). Ctrl+Shift+Q puts the truth back in its panel, and the same stroke paints it."""
    from .conftest import drag

    _planted(qtbot, window, tmp_path, write_png, tiny_model_project, monkeypatch)
    monkeypatch.setattr(QMessageBox, "question", lambda *_args, **_kw: QMessageBox.StandardButton.Discard)
    tools, panels, editing = window.review_queue, window.panels, window.editing
    assert tools.compare(tiny_model_project.root / "models" / "seesmore.json")
    qtbot.waitUntil(lambda: tools.parity.active and not tools.parity.running, timeout=60000)
    assert not panels.b_shown  # (no place stepped to yet: p and its truth on screen)
    _key(qtbot, window, Qt.Key.Key_J)
    _shown(qtbot, window, "q")
    qtbot.waitUntil(lambda: panels.b_shown, timeout=10000)
    roi = window.session.result("q").roi
    b_classes = np.zeros((80, 120), np.uint8)  # slide pixels: the dark square and the block
    b_classes[10:24, 10:24] = 1
    x0, y0, x1, y1 = BLOCK
    b_classes[y0:y1, x0:x1] = 1
    arrays = panels.panel_arrays()
    assert "truth" not in arrays and "error" not in arrays
    assert np.array_equal(arrays["b"], b_classes[roi.y0 : roi.y1, roi.x0 : roi.x1])
    a_classes = panels.predicted_at_roi()  # A: the square only, nothing in the block
    assert a_classes is not None and not a_classes[y0 - roi.y0 : y1 - roi.y0, x0 - roi.x0 : x1 - roi.x0].any()
    assert a_classes[10 - roi.y0 : 24 - roi.y0, 10 - roi.x0 : 24 - roi.x0].all()
    assert panels.truth.title.whole == "B, not the truth: Argmax of seesmore.json on embedded"
    assert panels.argmax.title.whole == "A: Argmax" and panels.heat.title.whole == "A: Softmax: defect"
    assert not panels.error_map_action.isEnabled()
    assert "| predicted background | B defect | true background |" in panels.readout_at(x0 + 10, y0 + 10)
    # The mask tools edit nothing here: a brush stroke over the block on the third panel.
    document = window.session.document
    mask_before, b_before = document.mask.copy(), arrays["b"].copy()
    editing.actions.set_tool("brush")
    viewport = panels.graphics.viewport()

    def at(x: float, y: float) -> QPoint:
        """Where slide pixel (x, y) is on the third panel, the ROI fitted to the panels."""
        panels.fit()
        QApplication.processEvents()
        return panels.graphics.mapFromScene(panels.truth.view.mapViewToScene(QPointF(x, y)))

    drag(viewport, at(x0 + 4, y0 + 4), at(x1 - 4, y1 - 4))
    assert np.array_equal(document.mask, mask_before) and not editing.dirty
    assert np.array_equal(panels.panel_arrays()["b"], b_before)
    tool_actions = editing.actions
    assert not any(action.isEnabled() for action in (tool_actions.accept_argmax_action,
                                                     tool_actions.accept_threshold_action,
                                                     tool_actions.undo_action, tool_actions.redo_action))
    # Back to the truth's queue: the truth in its panel again (empty), and the same stroke paints it.
    _key(qtbot, window, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: tools.queue.current is not None, timeout=30000)
    _shown(qtbot, window, tools.queue.current.image)
    qtbot.waitUntil(lambda: not panels.b_shown and "truth" in panels.panel_arrays(), timeout=10000)
    assert (panels.heat.title.whole, panels.argmax.title.whole, panels.truth.title.whole) == (
        "Softmax: defect", "Argmax", "Ground truth")
    assert not panels.panel_arrays()["truth"].any() and " B " not in panels.readout_at(x0 + 10, y0 + 10)
    document = window.session.document
    drag(viewport, at(x0 + 4, y0 + 4), at(x1 - 4, y1 - 4))
    assert editing.dirty and (document.mask[y0:y1, x0:x1] > 0).any()


def test_a_comparison_that_cannot_run_says_why(qtbot, window, tiny_model_project):
    """B's card names an ONNX file that is not there: the comparison stops short, the dock and the messages say why,
    and nothing is listed."""
    from helpers import tiny_card

    card = tiny_model_project.root / "models" / "gone.json"
    card.write_text(json.dumps({**tiny_card(), "onnx": "gone.onnx", "om": "gone.om"}), encoding="utf-8")
    with qtbot.waitSignal(window.controller.batchFinished, timeout=90000):
        assert window.commands.run_all()
    tools = window.review_queue
    said = []
    tools.message.connect(lambda level, text: said.append((level, text)))
    assert tools.compare(card)
    parity = tools.parity
    qtbot.waitUntil(lambda: not parity.running, timeout=60000)
    assert parity.error and len(parity) == 0 and "gone.onnx" in parity.error
    assert said and said[-1][0] == "error" and said[-1][1].startswith("Compare with: ")
    qtbot.waitUntil(lambda: tools.panel.summary.text().startswith("Gate stopped short ("), timeout=10000)


def test_run_waits_for_no_comparison(qtbot, window):
    """While model B is compared (on the thread that runs the model), Run and Run all are off, as during a run:
    pressed, they would wait behind the comparison without a word; they come back when it ends."""
    actions, parity = window.main_actions, window.session.review.parity
    qtbot.waitUntil(lambda: actions.run_action.isEnabled() and actions.run_all_action.isEnabled(), timeout=30000)
    parity.start("model B", 3, 0)
    qtbot.waitUntil(lambda: not actions.run_action.isEnabled() and not actions.run_all_action.isEnabled())
    parity.finish()
    qtbot.waitUntil(lambda: actions.run_action.isEnabled() and actions.run_all_action.isEnabled())
