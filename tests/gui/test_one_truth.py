"""Issue 30's viewer repros: every view of an image (its row, the toolbar's headline, the Metrics dock) shows the
numbers of the result and the mask on screen, against the truth the row names, whatever brought them there (a
run, a whole-slide run, crash recovery, a saved correction). Expected numbers are a NumPy reference here."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest
from PySide6.QtWidgets import QApplication, QMessageBox

from segscope.core.editing.files import find_recovery
from segscope.core.files.fileio import read_mask
from segscope.core.roi import Roi

from .test_session_views import run_current, select

pytestmark = pytest.mark.gui

Button = QMessageBox.StandardButton


@pytest.fixture
def answers(monkeypatch):
    """QMessageBox.question answered Yes/Save (the default), recording the questions asked."""
    asked: list[str] = []

    def question(_parent, title, text, buttons, _default=Button.NoButton):
        asked.append(f"{title}: {text}")
        return Button.Yes if buttons & Button.Yes else Button.Save

    monkeypatch.setattr(QMessageBox, "question", staticmethod(question))
    return asked


def reference_dice(result, mask: np.ndarray) -> float:
    """Foreground (class 1) hard Dice of a two-class result against a 0/255 mask, at ROI resolution: the
    probabilities resized (linear) to the ROI, the larger class taken, 2TP / (2TP + FP + FN)."""
    assert result.num_classes == 2 and result.threshold is None
    roi = result.roi
    p1 = cv2.resize(np.ascontiguousarray(result.probabilities[..., 1]), (roi.width, roi.height),
                    interpolation=cv2.INTER_LINEAR)
    p0 = cv2.resize(np.ascontiguousarray(result.probabilities[..., 0]), (roi.width, roi.height),
                    interpolation=cv2.INTER_LINEAR)
    pred = p1 > p0
    truth = mask[roi.y0 : roi.y1, roi.x0 : roi.x1] > 127
    tp, fp, fn = int(np.sum(pred & truth)), int(np.sum(pred & ~truth)), int(np.sum(~pred & truth))
    return math.nan if tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)


def shown(win, item_id: str) -> dict[str, float | None]:
    """The foreground Dice each view shows for `item_id` (the headline and the Metrics dock: the image on
    screen), parsed from their text (None: none shown)."""
    row = win.dataset_panel.model.row(item_id)

    def number(text: str) -> float | None:
        try:
            return float(text)
        except ValueError:
            return None

    headline = win.main_actions.dice_label.text()
    dice = next((part.split()[-1] for part in headline.split(" · ") if part.startswith("Dice ")), "")
    return {"row": None if row.metrics is None else row.metrics.foreground_dice,
            "headline": number(dice),
            "dock": number(win.metrics_panel.value_labels["foreground_dice"].text())}


def settle(qtbot, win) -> None:
    """Let every scoring and drawing finish: no image's numbers are stale, nothing is being drawn."""
    def settled() -> bool:
        win.scorer.score_due()  # (what the scorer's timer does)
        return not win.session.due() and not win.scorer.busy and not win.jobs.busy("panels")

    qtbot.waitUntil(settled, timeout=20000)
    for _ in range(5):
        QApplication.processEvents()
        qtbot.wait(50)


def assert_views_agree(win, item_id: str, expected: float) -> None:
    numbers = shown(win, item_id)
    assert numbers == pytest.approx({"row": expected, "headline": round(expected, 4), "dock": round(expected, 4)},
                                    abs=6e-5), numbers


@pytest.fixture
def reopen(qtbot, demo_dataset, tiny_model_project):
    """`reopen()`: a new window on the dataset (as after a restart), closed at the end of the test."""
    from segscope.core.backend_choice import BackendChoice
    from segscope.gui.shell.main_window import MainWindow

    opened = []

    def new_window():
        win = MainWindow()
        qtbot.addWidget(win)
        opened.append(win)
        win.resize(1400, 900)
        win.show()
        win.commands.open_backend(BackendChoice(pipeline=tiny_model_project.pipeline))
        assert win.commands.open_dataset(demo_dataset)
        qtbot.waitUntil(lambda: win.capabilities is not None and win.slide_ready(), timeout=30000)
        return win

    yield new_window
    for win in opened:
        win.close()


def stroke_and_crash(qtbot, win, demo_dataset, item_id: str) -> np.ndarray:
    """Run `item_id`, paint a big square of class 1 into its ROI, let the auto-save write it, and "crash" (the
    window never saves); returns the edited mask."""
    select(qtbot, win, item_id)
    run_current(qtbot, win)
    document = win.editing.document_for_edit()
    result = win.panels.result
    roi = result.roi
    points = [(roi.x0 + 40.0, roi.y0 + 40.0), (roi.x0 + roi.width * 0.6, roi.y0 + roi.height * 0.6)]
    document.begin_stroke(result)
    document.stroke(result, points, 30, 1)
    win.editing.changed(document.end_stroke())
    win.editing.edit_finished()
    win.editing.autosave()
    source = demo_dataset / item_id / "mask.png"
    qtbot.waitUntil(lambda: find_recovery(source) is not None, timeout=10000)
    qtbot.waitUntil(lambda: win.editing.autosaver.job is None)
    return document.mask.copy()


def test_recovered_edits_are_scored_and_shown_from_the_first_moment(qtbot, window, answers, demo_dataset, reopen):
    edited = stroke_and_crash(qtbot, window, demo_dataset, "002")
    result = window.panels.result
    on_disk = reference_dice(result, read_mask(demo_dataset / "002" / "mask.png"))
    recovered = reference_dice(result, edited)
    assert abs(on_disk - recovered) > 0.05  # the stroke changes the numbers

    again = reopen()  # the kill: nothing was saved
    select(qtbot, again, "002")
    qtbot.waitUntil(lambda: again.panels.result is not None and again.editing.editor is not None, timeout=30000)
    settle(qtbot, again)
    np.testing.assert_array_equal(again.mask, edited)
    assert_views_agree(again, "002", recovered)


def test_recovered_edits_are_announced_when_the_dataset_opens(qtbot, window, answers, demo_dataset, reopen):
    stroke_and_crash(qtbot, window, demo_dataset, "002")
    again = reopen()  # on 001: 002 is not visited
    qtbot.waitUntil(lambda: any("002" in m.text and "edit" in m.text for m in again.messages.messages),
                    timeout=10000)
    assert "unsaved" in again.dataset_panel.model.row("002").status


def test_row_and_headline_agree_over_a_whole_slide_run(qtbot, window, answers):
    run_current(qtbot, window)
    with qtbot.waitSignal(window.controller.batchFinished, timeout=120000):
        assert window.commands.run_whole_slide()
    qtbot.waitUntil(lambda: window.session.slide_run_of("001") is not None)
    moved = Roi(0, 0, 540, 540)  # the slide's corner, away from most defects: other numbers
    window.slide.set_roi(moved)
    window.slide.roiChanged.emit(moved)
    qtbot.waitUntil(lambda: window.panels.result is not None and window.panels.result.roi == moved)
    settle(qtbot, window)
    expected = reference_dice(window.panels.result, window.mask)
    assert_views_agree(window, "001", expected)


def test_a_whole_slide_run_alone_gives_its_row_a_status_and_numbers(qtbot, window, answers):
    with qtbot.waitSignal(window.controller.batchFinished, timeout=120000):
        assert window.commands.run_whole_slide()
    qtbot.waitUntil(lambda: window.panels.result is not None)
    settle(qtbot, window)
    row = window.dataset_panel.model.row("001")
    assert row.status not in ("", "not run", "queued")
    assert_views_agree(window, "001", reference_dice(window.panels.result, window.mask))


def test_the_row_names_the_truth_it_is_scored_against(qtbot, window, answers, demo_dataset):
    run_current(qtbot, window)
    model = window.dataset_panel.model
    assert model.row("001").truth == "mask.png"
    window.editing.accept_prediction(None)
    assert window.editing.save()
    qtbot.waitUntil(lambda: (demo_dataset / "001" / "mask_corrected.png").exists(), timeout=10000)
    qtbot.waitUntil(lambda: model.row("001").truth == "mask_corrected.png", timeout=10000)
    settle(qtbot, window)
    assert_views_agree(window, "001", reference_dice(window.panels.result,
                                                     read_mask(demo_dataset / "001" / "mask_corrected.png")))
