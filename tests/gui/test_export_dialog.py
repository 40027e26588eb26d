import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from pathlib import Path

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QDialog, QMessageBox

from segscope.core.export.files import EXPORT_KINDS, RUN_KINDS
from segscope.gui.export_dialog import ExportChoices, ExportDialog

pytestmark = pytest.mark.gui


@pytest.fixture
def settings(tmp_path):
    return QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)


def make_dialog(qtbot, settings, current="003", results=("001", "003")):
    dialog = ExportDialog(current, list(results), settings=settings)
    qtbot.addWidget(dialog)
    return dialog


def choose(dialog, folder: Path, kinds=("mask", "softmax"), metrics=True, scope="all", overwrite=False):
    for kind, box in dialog.kind_boxes.items():
        box.setChecked(kind in kinds)
    dialog.metrics_box.setChecked(metrics)
    dialog.folder_edit.setText(str(folder))
    dialog.scope_buttons[scope].setChecked(True)
    dialog.overwrite_box.setChecked(overwrite)


def test_choices_round_trip_and_are_remembered(qtbot, settings, tmp_path):
    out = tmp_path / "out"
    dialog = make_dialog(qtbot, settings)
    assert set(dialog.kind_boxes) == {*EXPORT_KINDS, *RUN_KINDS}  # offers exactly the core's kinds
    choose(dialog, out, kinds=("mask", "heatmap"), scope="all")
    dialog.accept()
    assert dialog.result() == QDialog.DialogCode.Accepted
    choices = dialog.choices()
    assert choices == ExportChoices(kinds=("mask", "heatmap"), metrics=True, folder=out, scope="all",
                                    item_ids=("001", "003"), overwrite=False)
    assert choices.targets() == [out / "001_mask.png", out / "001_heatmap.png", out / "003_mask.png",
                                 out / "003_heatmap.png", out / "metrics.csv", out / "metrics.json"]

    again = make_dialog(qtbot, settings)
    remembered = again.choices()
    assert remembered.folder == out and remembered.kinds == ("mask", "heatmap") and remembered.metrics
    assert remembered.scope == "all" and not remembered.overwrite  # overwriting is never remembered


def test_current_scope_exports_only_the_current_image(qtbot, settings, tmp_path):
    dialog = make_dialog(qtbot, settings)
    choose(dialog, tmp_path, kinds=("canvas",), metrics=False, scope="current")
    assert dialog.choices().item_ids == ("003",)
    assert dialog.choices().targets() == [tmp_path / "003_mask_full.png"]


def test_scopes_without_images_are_disabled(qtbot, settings):
    dialog = make_dialog(qtbot, settings, current=None, results=())
    assert not dialog.scope_buttons["current"].isEnabled() and not dialog.scope_buttons["all"].isEnabled()
    dialog = make_dialog(qtbot, settings, current="007", results=())  # the current image was not run
    assert not dialog.scope_buttons["current"].isEnabled() and not dialog.scope_buttons["all"].isEnabled()
    dialog = make_dialog(qtbot, settings, current="007", results=("001",))
    assert not dialog.scope_buttons["current"].isEnabled() and dialog.scope_buttons["all"].isChecked()
    assert not dialog.slide_runs_button.isVisible() and not dialog.choices().stitched  # no whole-slide run


def test_whole_slide_runs_export_their_stitched_files(qtbot, settings, tmp_path):
    dialog = ExportDialog("002", ["001"], settings=settings, slide_ids=["002"])
    qtbot.addWidget(dialog)
    assert dialog.slide_runs_button.isChecked()  # the current image has only a whole-slide run
    choose(dialog, tmp_path, kinds=("mask", "canvas", "heatmap"), metrics=False, scope="current")
    assert not dialog.kind_boxes["canvas"].isEnabled()  # no slide-size canvas of a stitched run
    choices = dialog.choices()
    assert choices.stitched and choices.item_ids == ("002",) and choices.kinds == ("mask", "heatmap")
    assert choices.targets() == [tmp_path / n for n in ("002_mask.png", "002_mask.tif", "002_heatmap.png",
                                                        "002_heatmap.tif", "002_provenance.json")]
    dialog.roi_runs_button.setChecked(True)
    assert not dialog.scope_buttons["current"].isEnabled() and dialog.choices().item_ids == ("001",)


def test_incomplete_choices_are_refused_with_a_note(qtbot, settings, tmp_path):
    dialog = make_dialog(qtbot, settings)
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


def test_existing_files_are_never_replaced_without_asking(qtbot, settings, tmp_path, monkeypatch):
    (tmp_path / "001_mask.png").write_bytes(b"earlier work")
    asked = []

    def answer(reply):
        def question(parent, title, text, *args):
            asked.append(text)
            return reply
        return question

    dialog = make_dialog(qtbot, settings)
    choose(dialog, tmp_path, kinds=("mask",), overwrite=False)
    monkeypatch.setattr(QMessageBox, "question", answer(QMessageBox.StandardButton.Yes))
    dialog.accept()  # overwrite not ticked: refused with a note, no question
    assert dialog.result() != QDialog.DialogCode.Accepted
    assert "1 of the files already exist" in dialog.note.text() and asked == []

    dialog.overwrite_box.setChecked(True)
    monkeypatch.setattr(QMessageBox, "question", answer(QMessageBox.StandardButton.No))
    dialog.accept()  # ticked, but the user says no in the confirmation
    assert dialog.result() != QDialog.DialogCode.Accepted and "1 file(s)" in asked[-1]

    monkeypatch.setattr(QMessageBox, "question", answer(QMessageBox.StandardButton.Yes))
    dialog.accept()
    assert dialog.result() == QDialog.DialogCode.Accepted and dialog.choices().overwrite
    assert (tmp_path / "001_mask.png").read_bytes() == b"earlier work"  # the dialog itself writes nothing


def test_no_question_when_nothing_would_be_replaced(qtbot, settings, tmp_path, monkeypatch):
    monkeypatch.setattr(QMessageBox, "question", lambda *a: pytest.fail("asked without a reason"))
    dialog = make_dialog(qtbot, settings)
    choose(dialog, tmp_path / "new", overwrite=True)
    dialog.accept()
    assert dialog.result() == QDialog.DialogCode.Accepted


def test_geojson_and_coco_are_offered_with_their_files(qtbot, settings, tmp_path):
    dialog = make_dialog(qtbot, settings)
    choose(dialog, tmp_path, kinds=("geojson", "coco"), metrics=False, scope="all")
    assert dialog.choices().kinds == ("geojson", "coco")
    assert dialog.choices().targets() == [tmp_path / "001_mask.geojson", tmp_path / "003_mask.geojson",
                                          tmp_path / "annotations.coco.json"]
