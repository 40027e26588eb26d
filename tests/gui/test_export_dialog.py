"""The Export dialog: it offers what the results really write (kinds of the result's kind, each with its files'
format, pixel size and estimated size), asks before a large export, and never replaces a file silently."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from pathlib import Path

import cv2
import numpy as np
import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QDialog, QMessageBox

from segscope.core.dataset.dataset import Dataset
from segscope.core.export.job import ROI_KINDS, Exportable, ExportChoices
from segscope.core.export.plan import TILED_KINDS, summary
from segscope.core.roi import Roi
from segscope.gui.dialogs.export_dialog import ExportDialog

from export_helpers import FakeSession, check_written, roi_result, shaped_run, slide_run, write_image

pytestmark = pytest.mark.gui


@pytest.fixture
def settings(tmp_path):
    return QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)


@pytest.fixture
def dataset(tmp_path):
    for item, size in (("001", (2600, 2400)), ("002", (300, 200)), ("003", (400, 300)), ("007", (90, 60))):
        write_image(tmp_path / "data" / item / "image.png", *size)
    mask = np.zeros((300, 400), np.uint8)
    assert cv2.imwrite(str(tmp_path / "data" / "003" / "mask.png"), mask)
    assert cv2.imwrite(str(tmp_path / "data" / "003" / "mask_corrected.png"), mask)
    return Dataset.open(tmp_path / "data")


def roi_session(dataset, current="003", results=("001", "003")):
    rois = {"001": (Roi(100, 200, 2402, 2301), (2600, 2400)), "003": (Roi(0, 0, 400, 300), (400, 300))}
    return FakeSession(dataset, {i: roi_result(*rois[i]) for i in results}, current=current)


def make_dialog(qtbot, settings, session):
    dialog = ExportDialog(Exportable(session), settings=settings)
    qtbot.addWidget(dialog)
    return dialog


def answering(asked):
    """Replaces `QMessageBox.question`: notes each question's text and gives `reply`."""
    def answer(reply):
        def question(parent, title, text, *args):
            asked.append(text)
            return reply
        return question
    return answer


def choose(dialog, folder: Path, kinds=("mask", "softmax"), metrics=True, scope="all", overwrite=False):
    for kind, box in dialog.kind_boxes.items():
        box.setChecked(kind in kinds)
    dialog.metrics_box.setChecked(metrics)
    dialog.folder_edit.setText(str(folder))
    dialog.scope_buttons[scope].setChecked(True)
    dialog.overwrite_box.setChecked(overwrite)


def test_choices_round_trip_and_are_remembered(qtbot, settings, dataset, tmp_path):
    out = tmp_path / "out"
    dialog = make_dialog(qtbot, settings, roi_session(dataset))
    assert list(dialog.kind_boxes) == list(ROI_KINDS)  # offers exactly the core's kinds
    choose(dialog, out, kinds=("mask", "heatmap"), scope="all")
    dialog.accept()
    assert dialog.result() == QDialog.DialogCode.Accepted
    choices = dialog.choices()
    assert choices == ExportChoices(kinds=("mask", "heatmap"), metrics=True, folder=out, scope="all",
                                    item_ids=("001", "003"), overwrite=False)
    assert dialog.exportable.plan(choices).targets() == [  # each image's provenance included
        out / "001_mask.png", out / "001_heatmap.png", out / "001_provenance.json", out / "003_mask.png",
        out / "003_heatmap.png", out / "003_provenance.json", out / "metrics.csv", out / "metrics.json"]

    again = make_dialog(qtbot, settings, roi_session(dataset))
    remembered = again.choices()
    assert remembered.folder == out and remembered.kinds == ("mask", "heatmap") and remembered.metrics
    assert remembered.scope == "all" and not remembered.overwrite  # overwriting is never remembered


def test_each_kind_is_named_with_its_files_as_written(qtbot, settings, dataset, tmp_path):
    dialog = make_dialog(qtbot, settings, roi_session(dataset))
    choose(dialog, tmp_path / "out", kinds=("heatmap", "corrected"), metrics=False, scope="current")
    assert dialog.kind_boxes["heatmap"].text() == "Heatmap: class 1 probability in colours"
    assert dialog.kind_details["heatmap"].text().startswith("PNG 400×300×3 (ROI size), uint8, colour map — up to ")
    size = (dataset.root / "003" / "mask_corrected.png").stat().st_size
    assert dialog.kind_details["corrected"].text() == (f"PNG 400×300 (slide size), as saved for 1 of 1 images — "
                                                       f"{size} bytes")
    dialog.scope_buttons["all"].setChecked(True)  # the details follow the images chosen
    assert dialog.kind_details["heatmap"].text().startswith("PNG 400×300 to 2302×2101×3 (ROI size)")
    assert dialog.kind_details["corrected"].text().startswith("PNG 400×300 (slide size), as saved for 1 of 2 images")
    assert dialog.estimate.text().startswith("Estimated size: up to ")


def test_current_scope_exports_only_the_current_image(qtbot, settings, dataset, tmp_path):
    dialog = make_dialog(qtbot, settings, roi_session(dataset))
    choose(dialog, tmp_path, kinds=("canvas",), metrics=False, scope="current")
    assert dialog.choices().item_ids == ("003",)
    assert dialog.exportable.plan(dialog.choices()).targets() == [tmp_path / "003_mask_full.png",
                                                                 tmp_path / "003_provenance.json"]


def test_scopes_without_images_are_disabled(qtbot, settings, dataset):
    dialog = make_dialog(qtbot, settings, roi_session(dataset, current=None, results=()))
    assert not dialog.scope_buttons["current"].isEnabled() and not dialog.scope_buttons["all"].isEnabled()
    dialog = make_dialog(qtbot, settings, roi_session(dataset, current="007", results=()))  # current not run
    assert not dialog.scope_buttons["current"].isEnabled() and not dialog.scope_buttons["all"].isEnabled()
    dialog = make_dialog(qtbot, settings, roi_session(dataset, current="007", results=("001",)))
    assert not dialog.scope_buttons["current"].isEnabled() and dialog.scope_buttons["all"].isChecked()
    assert not dialog.slide_runs_button.isVisible() and not dialog.choices().stitched  # no whole-slide run


def test_whole_slide_runs_offer_their_stitched_files(qtbot, settings, dataset, tmp_path):
    session = roi_session(dataset, current="002", results=("001",))
    session._runs = {"002": slide_run(dataset, "002", 300, 200)}
    dialog = make_dialog(qtbot, settings, session)
    assert dialog.slide_runs_button.isChecked()  # the current image has only a whole-slide run
    choose(dialog, tmp_path, kinds=("mask", "canvas", "heatmap"), metrics=False, scope="current")
    assert not dialog.kind_boxes["canvas"].isEnabled()  # no slide-size canvas of a stitched run
    assert dialog.kind_details["canvas"].text() == "not written for whole-slide runs"
    assert [k for k, box in dialog.kind_boxes.items() if box.isEnabled()] == list(TILED_KINDS)
    assert dialog.kind_details["mask"].text().startswith("PNG 300×200 (output scale), uint8, 0/255")
    choices = dialog.choices()
    assert choices.stitched and choices.item_ids == ("002",) and choices.kinds == ("mask", "heatmap")
    assert dialog.exportable.plan(choices).targets() == [tmp_path / n for n in ("002_mask.png", "002_heatmap.png",
                                                                                "002_provenance.json")]
    dialog.roi_runs_button.setChecked(True)
    assert not dialog.scope_buttons["current"].isEnabled() and dialog.choices().item_ids == ("001",)
    assert dialog.kind_details["mask"].text().startswith("PNG 2302×2101 (ROI size)")


def test_a_large_export_is_confirmed_with_its_size(qtbot, settings, dataset, tmp_path, monkeypatch):
    session = roi_session(dataset, current="001", results=())
    session._runs = {"001": shaped_run(dataset, "001", 12800, 10667)}
    dialog = make_dialog(qtbot, settings, session)
    assert dialog.kind_details["softmax"].text() == ("NumPy .npy 12800×10667×2 (output scale), float32, "
                                                     "probabilities — 1.09 GB")
    assert dialog.kind_details["mask"].text().startswith("pyramidal OME-TIFF (zlib) 12800×10667 (output scale)")
    asked = []
    answer = answering(asked)
    choose(dialog, tmp_path / "out", kinds=("mask",), metrics=False, scope="current")
    monkeypatch.setattr(QMessageBox, "question", answer(QMessageBox.StandardButton.No))
    dialog.accept()  # the mask alone stays under 1 GB: no question
    assert dialog.result() == QDialog.DialogCode.Accepted and asked == []
    choose(dialog, tmp_path / "out", kinds=("mask", "softmax"), metrics=False, scope="current")
    dialog.setResult(0)
    dialog.accept()
    assert dialog.result() != QDialog.DialogCode.Accepted
    # 1.09 GB of softmax, exactly, and at most 0.19 GB of mask (all levels uncompressed): up to 1.28 GB
    assert asked and asked[-1].startswith("This export writes up to 1.28 GB + small files into ")
    assert f"{tmp_path / 'out'} (" in asked[-1] and "free there). Write it?" in asked[-1]
    monkeypatch.setattr(QMessageBox, "question", answer(QMessageBox.StandardButton.Yes))
    dialog.accept()
    assert dialog.result() == QDialog.DialogCode.Accepted


def test_incomplete_choices_are_refused_with_a_note(qtbot, settings, dataset, tmp_path):
    dialog = make_dialog(qtbot, settings, roi_session(dataset))
    choose(dialog, tmp_path, kinds=(), metrics=False)
    dialog.accept()
    assert dialog.result() != QDialog.DialogCode.Accepted and "at least one" in dialog.note.text()
    choose(dialog, Path(""), kinds=("mask",))
    dialog.folder_edit.setText("")
    dialog.accept()
    assert dialog.result() != QDialog.DialogCode.Accepted and "folder" in dialog.note.text()
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    choose(dialog, a_file)
    dialog.accept()
    assert dialog.result() != QDialog.DialogCode.Accepted and "not a folder" in dialog.note.text()


def test_existing_files_are_never_replaced_without_asking(qtbot, settings, dataset, tmp_path, monkeypatch):
    (tmp_path / "001_provenance.json").write_text('{"files": [{"name": "001_heatmap.png"}]}')
    (tmp_path / "001_heatmap.png").write_bytes(b"earlier work")
    asked = []
    answer = answering(asked)
    dialog = make_dialog(qtbot, settings, roi_session(dataset))
    choose(dialog, tmp_path, kinds=("mask",), overwrite=False)
    monkeypatch.setattr(QMessageBox, "question", answer(QMessageBox.StandardButton.Yes))
    dialog.accept()  # overwrite not ticked: refused with a note, no question (the provenance would clash)
    assert dialog.result() != QDialog.DialogCode.Accepted
    assert "1 of the files already exist" in dialog.note.text() and "001_provenance.json" in dialog.note.text()
    assert asked == []

    dialog.overwrite_box.setChecked(True)
    monkeypatch.setattr(QMessageBox, "question", answer(QMessageBox.StandardButton.No))
    dialog.accept()  # ticked, but the user says no in the confirmation, which names what goes
    assert dialog.result() != QDialog.DialogCode.Accepted and "1 file(s)" in asked[-1]
    assert "1 file(s) of it that this export does not write go with it, e.g. 001_heatmap.png" in asked[-1]

    monkeypatch.setattr(QMessageBox, "question", answer(QMessageBox.StandardButton.Yes))
    dialog.accept()
    assert dialog.result() == QDialog.DialogCode.Accepted and dialog.choices().overwrite
    assert (tmp_path / "001_heatmap.png").read_bytes() == b"earlier work"  # the dialog itself writes nothing


def test_no_question_when_nothing_would_be_replaced(qtbot, settings, dataset, tmp_path, monkeypatch):
    monkeypatch.setattr(QMessageBox, "question", lambda *a: pytest.fail("asked without a reason"))
    dialog = make_dialog(qtbot, settings, roi_session(dataset))
    choose(dialog, tmp_path / "new", overwrite=True)
    dialog.accept()
    assert dialog.result() == QDialog.DialogCode.Accepted


def test_geojson_and_coco_are_offered_with_their_files(qtbot, settings, dataset, tmp_path):
    dialog = make_dialog(qtbot, settings, roi_session(dataset))
    choose(dialog, tmp_path, kinds=("geojson", "coco"), metrics=False, scope="all")
    assert dialog.choices().kinds == ("geojson", "coco")
    assert dialog.exportable.plan(dialog.choices()).targets() == [
        tmp_path / "001_mask.geojson", tmp_path / "001_provenance.json", tmp_path / "003_mask.geojson",
        tmp_path / "003_provenance.json", tmp_path / "annotations.coco.json",
        tmp_path / "truth.coco.json", tmp_path / "predictions.coco.json"]  # 003 has a truth: COCO both ways
    without_truth = make_dialog(qtbot, settings, roi_session(dataset, results=("001",)))
    choose(without_truth, tmp_path, kinds=("geojson", "coco"), metrics=False, scope="all")
    assert without_truth.exportable.plan(without_truth.choices()).targets()[-1] == tmp_path / "annotations.coco.json"


@pytest.mark.parametrize("stitched", [False, True], ids=["roi-runs", "whole-slide-runs"])
def test_what_the_dialog_offers_is_what_is_written(qtbot, settings, dataset, tmp_path, stitched):
    session = roi_session(dataset, current="003")
    session._runs = {"003": slide_run(dataset, "003", 400, 300), "002": slide_run(dataset, "002", 9000, 40)}
    dialog = make_dialog(qtbot, settings, session)
    dialog.slide_runs_button.setChecked(stitched)
    dialog.roi_runs_button.setChecked(not stitched)
    offered = [k for k, box in dialog.kind_boxes.items() if box.isEnabled()]
    choose(dialog, tmp_path / "out", kinds=offered, metrics=True, scope="all")
    dialog.accept()
    assert dialog.result() == QDialog.DialogCode.Accepted
    choices = dialog.choices()
    plan = dialog.exportable.plan(choices)
    *_, last = dialog.exportable.steps(choices)()
    assert sorted(last.written) == sorted(plan.targets()) == sorted((tmp_path / "out").iterdir())
    for kind in {f.kind for f in plan.files()} & set(offered) - {"coco"}:  # as the dialog described them
        files = [f for f in plan.files() if f.kind == kind]
        assert dialog.kind_details[kind].text().startswith(f"{summary(files)} "), kind
    for planned in plan.files():
        check_written(tmp_path / "out", planned)


def test_every_line_of_the_dialog_is_whole_and_it_fits_a_laptop_screen(qtbot, settings, dataset, tmp_path):
    """Each kind's second line (format, size, estimate) was cut top and bottom (at 1280x800 and 1920x1080 alike:
    the dialog takes its own size): now no text of the dialog is cut, for each scope and result kind, with every
    kind ticked, and the dialog fits a 1280x800 screen."""
    from .screenshot import clipped_texts, clipped_widgets

    session = roi_session(dataset)
    session._runs = {"002": slide_run(dataset, "002", 300, 200)}
    dialog = make_dialog(qtbot, settings, session)
    dialog.show()
    for runs in (dialog.roi_runs_button, dialog.slide_runs_button):
        runs.setChecked(True)
        for scope in (s for s, button in dialog.scope_buttons.items() if button.isEnabled()):
            choose(dialog, tmp_path, kinds=tuple(dialog.kind_boxes), scope=scope)
            qtbot.waitUntil(lambda: clipped_texts(dialog) == [], timeout=3000)  # once the dialog has grown to them
            assert clipped_widgets(dialog) == [], (runs.text(), scope)
            assert all(label.height() >= label.fontMetrics().height() for label in dialog.kind_details.values())
            assert dialog.width() <= 1280 and dialog.height() <= 800
