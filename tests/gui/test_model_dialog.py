"""File > Open model...: the dialog shows the graph's facts, asks what it cannot tell, writes the same project
as `segscope card`, and the window opens the new pipeline."""

from __future__ import annotations

import json
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import pytest
from PySide6.QtWidgets import QDialogButtonBox, QMenu, QMessageBox

from segscope.core.card.reader import load_model_card
from segscope.gui.dialogs.model_dialog import ModelDialog, open_model_path

import byo_helpers as byo
from .conftest import RunsSeen

pytestmark = pytest.mark.gui


def save_button(dialog: ModelDialog):
    return dialog.buttons.button(QDialogButtonBox.StandardButton.Save)


def test_the_dialog_writes_a_runnable_project(qtbot, tmp_path):
    model = byo.Net(size=40).save(tmp_path / "crack.onnx")
    dialog = ModelDialog(model=model)
    qtbot.addWidget(dialog)
    facts = dialog.facts.toPlainText()
    assert "found: input 'image' [1,3,40,40] float32" in facts
    assert "activation 'sigmoid'" in facts and "assumed: color RGB" in facts
    assert not save_button(dialog).isEnabled() and "project folder" in dialog.problem.text()
    dialog.out_edit.setText(str(tmp_path / "proj"))
    dialog.color_box.setCurrentText("RGB")
    dialog.scale_edit.setText("1/255")
    dialog.classes_edit.setText("crack")
    dialog.threshold_box.setChecked(True)
    dialog.threshold_value.setValue(0.35)
    assert save_button(dialog).isEnabled() and "assumed: color" not in dialog.facts.toPlainText()
    save_button(dialog).click()
    assert dialog.result() == ModelDialog.DialogCode.Accepted
    assert dialog.pipeline == tmp_path / "proj" / "pipelines" / "crack.pipeline" and dialog.pipeline.is_file()
    card = load_model_card(tmp_path / "proj" / "models" / "crack.json")
    assert card.preprocess.color == "RGB" and card.preprocess.scale == pytest.approx(1 / 255)
    assert card.outputs[0].activation == "sigmoid" and card.outputs[0].threshold == pytest.approx(0.35)
    assert card.class_names == ("background", "crack")


def test_bad_answers_are_shown_and_block_saving(qtbot, tmp_path):
    model = byo.Net(dynamic=True, out_channels=2).save(tmp_path / "dyn.onnx")
    dialog = ModelDialog(model=model)
    qtbot.addWidget(dialog)
    dialog.out_edit.setText(str(tmp_path / "proj"))
    assert "has a dynamic size" in dialog.problem.text() and not save_button(dialog).isEnabled()
    dialog.width_box.setValue(48)
    dialog.height_box.setValue(32)
    assert dialog.problem.text() == "" and save_button(dialog).isEnabled()
    dialog.scale_edit.setText("a lot")
    assert "'a lot': give a number" in dialog.problem.text() and not save_button(dialog).isEnabled()
    dialog.scale_edit.setText("")
    dialog.threshold_box.setChecked(True)  # a 2-channel softmax output takes no threshold: refused on save
    save_button(dialog).click()
    assert "outputs[0].threshold" in dialog.problem.text() and dialog.pipeline is None
    assert not (tmp_path / "proj" / "models" / "dyn.json").exists()


def file_action(window, text: str):
    # (QAction.menu() wrappers die early on PySide6 6.10 / Python 3.9: find the menu among the bar's children)
    file_menu = next(m for m in window.menuBar().findChildren(QMenu) if m.title() == "&File")
    return next(a for a in file_menu.actions() if a.text() == text)


def test_file_menu_builds_a_card_only_when_asked_and_opens_the_new_pipeline(qtbot, window, tmp_path, monkeypatch):
    model = byo.Net(size=40).save(tmp_path / "crack.onnx")
    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000):
        assert window.commands.run_current()  # a result of the first model, to see what a switch does to it
    qtbot.waitUntil(lambda: window.panels.result is not None)
    asked = []
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: asked.append(a[2]) or
                                                              QMessageBox.StandardButton.Yes))

    def accept_with_a_project(dialog: ModelDialog) -> int:
        dialog.out_edit.setText(str(tmp_path / "proj"))
        dialog.scale_edit.setText("1/255")
        dialog.save()
        return dialog.result()

    monkeypatch.setattr(ModelDialog, "exec", accept_with_a_project)
    # File > Open model… on a bare .onnx: a card is offered, built on Yes
    open_model_path(window, window.backend, window.messages.add, model)
    assert len(asked) == 1 and "no model card" in asked[0]
    qtbot.waitUntil(lambda: window.capabilities is not None, timeout=20000)
    assert window.backend.choice.pipeline == tmp_path / "proj" / "pipelines" / "crack.pipeline"
    assert window.capabilities.input_size == (40, 40)
    assert window.capabilities.class_names == ("background", "foreground")
    assert json.loads((tmp_path / "proj" / "models" / "crack.json").read_text())["input"]["scale"] == 1 / 255
    # the first model's result is dimmed and keeps its own class names; paint classes follow the new model
    qtbot.waitUntil(lambda: window.dataset_panel.model.row("001").status == "other model")
    assert window.panels.stale == "another model" and "another model: run again" in window.panels.heat.title.text
    assert "defect" in window.panels.heat.title.text  # (the tiny model's class, not the new "foreground")
    runs = RunsSeen(window)  # a run of the 1-channel model: two classes [1 - p, p] and its mask, shown like any other
    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000):
        assert window.commands.run_current()
    results = runs.evaluations()
    result = results[0].result
    assert result.probabilities.shape == (40, 40, 2) and result.argmax.shape == (40, 40)
    np.testing.assert_allclose(result.probabilities.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(result.argmax, result.probabilities[..., 1] > 0.5)
    assert window.session.result(results[0].item.id) is result
    qtbot.waitUntil(lambda: window.panels.result is result and window.panels.stale == "")
    # the card's sigmoid output: a probability map and its thresholded mask, not a softmax and an argmax
    assert window.panels.heat.title.text == "Probability: foreground"
    assert window.panels.argmax.title.text == "Mask (p > 0.5)"  # the card's rule: class 1 where p > t
    paint = window.editing.actions.class_combo
    assert [paint.itemText(i) for i in range(paint.count())] == ["background", "foreground"]

    asked.clear()  # the project exists now: Open model… on its card, its folder or the .onnx opens it
    for path in (tmp_path / "proj" / "models" / "crack.json", tmp_path / "proj"):
        with qtbot.waitSignal(window.controller.backendOpened, timeout=20000):
            open_model_path(window, window.backend, window.messages.add, path)
        assert window.backend.choice.pipeline == tmp_path / "proj" / "pipelines" / "crack.pipeline"
    assert asked == []


def test_a_card_outside_a_project_opens_and_a_bad_one_goes_back_to_the_open_backend(qtbot, window, tmp_path,
                                                                                     tiny_model_project):
    loose = tmp_path / "loose"
    loose.mkdir()
    for source in (tiny_model_project.card, tiny_model_project.onnx, tiny_model_project.root / "models" /
                   "aipp_unet_simple_opencv.cfg"):
        (loose / source.name).write_bytes(source.read_bytes())
    with qtbot.waitSignal(window.controller.backendOpened, timeout=20000):
        # no pipeline names it: the card runs as it is
        open_model_path(window, window.backend, window.messages.add, loose / "unet_hw960_bs1.json")
    made = window.backend.choice.pipeline
    assert made == loose / "unet_hw960_bs1.json"
    assert window.capabilities.details["card"] == str(loose / "unet_hw960_bs1.json")

    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "broken.json").write_text('{"input": {"name": "x"}}')  # neither a card nor a pipeline
    # refused before anything opens: the open backend stays
    open_model_path(window, window.backend, window.messages.add, bad / "broken.json")
    error = window.messages.errors()[-1].text
    assert "broken.json" in error and "neither a pipeline nor a model card" in error
    assert window.backend.choice.pipeline == made and window.capabilities is not None
    for name in ("unet_hw960_bs1.json", "aipp_unet_simple_opencv.cfg"):  # a card whose model is broken
        (bad / name).write_bytes((loose / name).read_bytes())
    (bad / "tiny.onnx").write_bytes(b"not onnx")
    with qtbot.waitSignal(window.controller.backendOpened, timeout=30000):  # the previous one, reopened
        open_model_path(window, window.backend, window.messages.add, bad / "unet_hw960_bs1.json")
    assert window.backend.choice.pipeline == made and window.capabilities is not None
    error = window.messages.errors()[-1].text
    assert error.startswith("Could not open embedded") and "tiny.onnx" in error and "back to embedded" in error
    assert window.main_actions.run_action.isEnabled()
    assert not any("--" in m.text for m in window.messages.messages)  # no CLI option names in the GUI


def test_open_model_says_a_damaged_onnx_is_none_before_offering_a_card(window, tmp_path, monkeypatch):
    """The cheap check first: a truncated .onnx is said to be no ONNX model; no card is offered for it."""
    whole = byo.Net(size=40).save(tmp_path / "crack.onnx").read_bytes()
    truncated = tmp_path / "cut.onnx"
    truncated.write_bytes(whole[:len(whole) // 2])
    asked = []
    monkeypatch.setattr(QMessageBox, "question", staticmethod(lambda *a, **k: asked.append(a[2]) or
                                                              QMessageBox.StandardButton.No))
    open_model_path(window, window.backend, window.messages.add, truncated)
    assert asked == [] and "cut.onnx: not an ONNX model" in window.messages.errors()[-1].text
    # a whole one without a card: offered one
    open_model_path(window, window.backend, window.messages.add, tmp_path / "crack.onnx")
    assert len(asked) == 1 and "no model card" in asked[0]
