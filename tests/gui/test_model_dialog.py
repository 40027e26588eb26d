"""File > Open model...: the dialog shows the graph's facts, asks what it cannot tell, writes the same project
as `segscope card`, and the window opens the new pipeline."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import pytest
from PySide6.QtWidgets import QDialogButtonBox, QMenu

from segscope.core.model_card import load_model_card
from segscope.gui.model_dialog import ModelDialog

_spec = importlib.util.spec_from_file_location("segscope_tests_byo", Path(__file__).parents[1] / "byo_helpers.py")
byo = sys.modules.setdefault(_spec.name, importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(byo)

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


def test_file_menu_opens_the_new_pipeline(qtbot, window, tmp_path, monkeypatch):
    model = byo.Net(size=40).save(tmp_path / "crack.onnx")
    # (QAction.menu() wrappers die early on PySide6 6.10 / Python 3.9: find the menu among the bar's children)
    file_menu = next(m for m in window.menuBar().findChildren(QMenu) if m.title() == "&File")
    action = next(a for a in file_menu.actions() if a.text() == "Open &model…")

    def accept_with_a_project(dialog: ModelDialog) -> int:
        dialog.model_edit.setText(str(model))
        dialog.out_edit.setText(str(tmp_path / "proj"))
        dialog.scale_edit.setText("1/255")
        dialog.save()
        return dialog.result()

    monkeypatch.setattr(ModelDialog, "exec", accept_with_a_project)
    action.trigger()
    qtbot.waitUntil(lambda: window.capabilities is not None, timeout=20000)
    assert window.backend_choice.pipeline == tmp_path / "proj" / "pipelines" / "crack.pipeline"
    assert window.capabilities.input_size == (40, 40)
    assert window.capabilities.class_names == ("background", "foreground")
    assert json.loads((tmp_path / "proj" / "models" / "crack.json").read_text())["input"]["scale"] == 1 / 255
    results = []  # a run of the 1-channel model: two classes [1 - p, p] and its mask, shown like any other
    window.controller.evaluated.connect(results.append)
    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000):
        assert window.run_current()
    result = results[0].result
    assert result.probabilities.shape == (40, 40, 2) and result.argmax.shape == (40, 40)
    np.testing.assert_allclose(result.probabilities.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(result.argmax, result.probabilities[..., 1] > 0.5)
    assert window.session.result(results[0].item.id) is result
