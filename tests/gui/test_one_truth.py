"""Issue 30's viewer repros: every view of an image (its row, the toolbar's headline, the Metrics dock) shows the
numbers of the result and the mask on screen, against the truth the row names, whatever brought them there (a
run, a whole-slide run, crash recovery, a saved correction). Expected numbers are a NumPy reference here."""

from __future__ import annotations

import json
import math

import cv2
import numpy as np
import pytest
from PySide6.QtWidgets import QApplication, QMessageBox

from segscope.core.editing.files import find_recovery
from segscope.core.files.fileio import read_mask
from segscope.core.roi import Roi

from .test_session_views import run_current, select
from helpers import run_cli

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


def eval_tiled(dataset, pipeline, item_id: str) -> dict:
    """The image's row of `segscope eval --tile --json` (tiles of the dataset's ROI size, as the viewer's Run whole
    slide takes them): the numbers the viewer must show for its whole-slide run."""
    code, out = run_cli("eval", "--dataset", dataset, "--pipeline", pipeline, "--tile", "--json")
    assert code == 0, out
    return next(row for row in json.loads(out)["images"] if row["id"] == item_id)


def test_a_whole_slide_run_shows_the_slides_numbers_whatever_the_roi(qtbot, window, answers, demo_dataset,
                                                                     tiny_model_project):
    """Issue 43: after Run whole slide the row, the headline and the Metrics dock show the slide's own numbers
    (those `eval --tile` gives), marked as the whole slide's, not those of the part under the ROI (n/a in an ROI
    without defects) nor those of an older run of the ROI."""
    run_current(qtbot, window)
    with qtbot.waitSignal(window.controller.batchFinished, timeout=120000):
        assert window.commands.run_whole_slide()
    qtbot.waitUntil(lambda: window.session.slide_run_of("001") is not None)
    expected = eval_tiled(demo_dataset, tiny_model_project.pipeline, "001")
    # on the ROI of the run before it too: the newer whole-slide run answers
    for moved in (window.slide.roi(), Roi(0, 0, 540, 540), Roi(600, 300, 1000, 700)):  # and other parts
        window.slide.set_roi(moved)
        window.slide.roiChanged.emit(moved)
        qtbot.waitUntil(lambda moved=moved: window.panels.result is not None and window.panels.result.roi == moved)
        settle(qtbot, window)
        assert_views_agree(window, "001", expected["foreground_dice"])
        row = window.dataset_panel.model.row("001")
        assert row.status == "whole slide"
        assert (row.metrics.soft_dice, row.metrics.foreground_iou) == pytest.approx(
            (expected["soft_dice"], expected["foreground_iou"]), abs=1e-6)
        assert window.main_actions.dice_label.text().endswith("(whole slide)")
        assert window.metrics_panel.scope.isVisible() and window.metrics_panel.scope.text().startswith("Whole slide")
        # the panels draw the part under the ROI, whose own Dice differs from the slide's here
        part = reference_dice(window.panels.result, window.mask)
        assert math.isnan(part) or abs(part - expected["foreground_dice"]) > 1e-3, part
    run_current(qtbot, window)  # a run of the ROI answers again: its numbers, not marked
    settle(qtbot, window)
    assert_views_agree(window, "001", reference_dice(window.panels.result, window.mask))
    assert not window.main_actions.dice_label.text().endswith("(whole slide)")
    assert not window.metrics_panel.scope.isVisible()


def test_a_whole_slide_run_alone_gives_its_row_a_status_and_numbers(qtbot, window, answers, demo_dataset,
                                                                     tiny_model_project):
    with qtbot.waitSignal(window.controller.batchFinished, timeout=120000):
        assert window.commands.run_whole_slide()
    qtbot.waitUntil(lambda: window.panels.result is not None)
    settle(qtbot, window)
    row = window.dataset_panel.model.row("001")
    assert row.status == "whole slide"
    assert_views_agree(window, "001", eval_tiled(demo_dataset, tiny_model_project.pipeline, "001")["foreground_dice"])


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
