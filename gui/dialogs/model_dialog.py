"""File > Open model…: open a model that has a card (a `.json` card, a project folder, an `.onnx` or `.om`
with its card beside it, or a `.pipeline`) on the current backend kind; a bare `.onnx` is offered a card.

File > Build model card…: `segscope card` as a dialog. Pick an .onnx, see what its graph says, answer what
it cannot tell (size when dynamic, color, normalisation or an AIPP config, activation, threshold, classes),
and save a runnable project; the window then opens the new pipeline. The CLI's option names in the core's
messages are shown as this dialog's field names.

The facts and the proposed card refresh as the answers change (`core.card.builder.propose`); Save writes
with `core.card.builder.write_project`, which checks the card against the graph before any file lands.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path
from typing import Any, Callable

from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ...core.card.builder import CardOptions, Proposal, propose, write_project
from ...core.card.reader import ACTIVATIONS
from ...core.card.values import parse_classes, parse_number, parse_numbers
from ...core.errors import SegScopeError
from ...core.session.backend_state import BackendState
from ...core.stream.preprocess import COLORS, LAYOUTS
from ...core.stream.source import resolve_source

FROM_GRAPH = "from the graph"  # a size spin box at 0
PROPOSED = "as proposed below"  # a choice left to the graph or the defaults
#: The `segscope card` options as this dialog names them.
FIELDS = {"size": "Input size", "layout": "Input layout", "color": "Color the net expects", "scale": "Scale",
          "mean": "Mean", "std": "Std", "aipp": "AIPP config", "activation": "Activation", "classes": "Classes",
          "out": "Project folder", "overwrite": "Replace existing project files"}


def in_dialog_words(text: str) -> str:
    """A core message with the CLI's option names as this dialog's fields ("give --layout NHWC" becomes
    "set “Input layout” to NHWC")."""
    text = re.sub(r"(?:give|pass|use) --([a-z]+)(?: ([^\s,;)]+))?",
                  lambda m: f"set “{FIELDS.get(m[1], m[1])}”" + (f" to {m[2]}" if m[2] else ""), text)
    return re.sub(r"--([a-z]+)", lambda m: f"“{FIELDS.get(m[1], m[1])}”", text)


def _choice(items: tuple[str, ...]) -> QComboBox:
    box = QComboBox()
    box.addItems([PROPOSED, *items])
    return box


def _picked(box: QComboBox) -> str | None:
    return None if box.currentIndex() == 0 else box.currentText()


class ModelDialog(QDialog):
    """Build a project from an ONNX model; after `exec()` is Accepted, `pipeline` is the written pipeline."""

    def __init__(self, parent: QWidget | None = None, model: Path | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Open model")
        self.pipeline: Path | None = None
        self.proposal: Proposal | None = None
        self.model_edit = QLineEdit()
        self.out_edit = QLineEdit()
        self.width_box, self.height_box = QSpinBox(), QSpinBox()
        for box in (self.width_box, self.height_box):
            box.setRange(0, 8192)
            box.setSpecialValueText(FROM_GRAPH)
        self.layout_box, self.color_box = _choice(LAYOUTS), _choice(COLORS)
        self.scale_edit, self.mean_edit, self.std_edit = QLineEdit(), QLineEdit(), QLineEdit()
        self.scale_edit.setPlaceholderText("1, or e.g. 1/255")
        self.mean_edit.setPlaceholderText("0, or per channel: 123.7,116.3,103.5")
        self.std_edit.setPlaceholderText("1, or per channel")
        self.aipp_edit = QLineEdit()
        self.aipp_edit.setPlaceholderText("an ATC AIPP config instead of scale/mean/std")
        self.activation_box = _choice(tuple(ACTIVATIONS))
        self.threshold_box = QCheckBox("threshold")
        self.threshold_value = QDoubleSpinBox()
        self.threshold_value.setRange(0.01, 0.99)
        self.threshold_value.setSingleStep(0.05)
        self.threshold_value.setValue(0.5)
        self.classes_edit = QLineEdit()
        self.classes_edit.setPlaceholderText("background,defect (one per output channel; 1 channel: the foreground)")
        self.overwrite_box = QCheckBox("Replace existing project files")
        self.facts = QPlainTextEdit()
        self.facts.setReadOnly(True)
        self.problem = QLabel()
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet("color: #c0392b")
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)
        self._lay_out()
        for edit in (self.model_edit, self.scale_edit, self.mean_edit, self.std_edit, self.aipp_edit,
                     self.classes_edit, self.out_edit):
            edit.textChanged.connect(self.refresh)
        for combo in (self.layout_box, self.color_box, self.activation_box):
            combo.currentIndexChanged.connect(self.refresh)
        for spin in (self.width_box, self.height_box, self.threshold_value):
            spin.valueChanged.connect(self.refresh)
        self.threshold_box.toggled.connect(self.refresh)
        if model is not None:
            self.model_edit.setText(str(model))
        self.refresh()

    def _lay_out(self) -> None:
        form = QFormLayout()
        form.addRow("ONNX model", self._with_browse(self.model_edit, self._browse_model))
        size = QHBoxLayout()
        size.addWidget(self.width_box)
        size.addWidget(QLabel("x"))
        size.addWidget(self.height_box)
        form.addRow("Input size (W x H)", size)
        form.addRow("Input layout", self.layout_box)
        form.addRow("Color the net expects", self.color_box)
        form.addRow("Scale", self.scale_edit)
        form.addRow("Mean", self.mean_edit)
        form.addRow("Std", self.std_edit)
        form.addRow("AIPP config", self._with_browse(self.aipp_edit, self._browse_aipp))
        form.addRow("Activation", self.activation_box)
        threshold = QHBoxLayout()
        threshold.addWidget(self.threshold_box)
        threshold.addWidget(self.threshold_value)
        form.addRow("1-channel output", threshold)
        form.addRow("Classes", self.classes_edit)
        form.addRow("Project folder", self._with_browse(self.out_edit, self._browse_out))
        form.addRow("", self.overwrite_box)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(QLabel("What the graph says, and what is assumed:"))
        layout.addWidget(self.facts, 1)
        layout.addWidget(self.problem)
        layout.addWidget(self.buttons)
        self.resize(640, 620)

    @staticmethod
    def _with_browse(edit: QLineEdit, slot: Callable[[], None]) -> QHBoxLayout:
        row = QHBoxLayout()
        row.addWidget(edit, 1)
        button = QPushButton("Browse…")
        button.clicked.connect(slot)
        row.addWidget(button)
        return row

    def _browse_model(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "ONNX model", self.model_edit.text(), "ONNX models (*.onnx)")
        if path:
            self.model_edit.setText(path)
            if not self.out_edit.text():
                self.out_edit.setText(str(Path(path).with_suffix("")) + "_project")

    def _browse_aipp(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "AIPP config", self.aipp_edit.text(), "AIPP configs (*.cfg)")
        if path:
            self.aipp_edit.setText(path)

    def _browse_out(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Project folder", self.out_edit.text())
        if path:
            self.out_edit.setText(path)

    def options(self) -> CardOptions:
        """The answers as `segscope card` options; ValueError/ArgumentTypeError name a bad entry."""
        def parsed(edit: QLineEdit, parse: Callable[[str], Any]) -> Any:
            return parse(edit.text().strip()) if edit.text().strip() else None

        width, height = self.width_box.value(), self.height_box.value()
        return CardOptions(
            size=(width, height) if width and height else None, layout=_picked(self.layout_box),
            color=_picked(self.color_box), scale=parsed(self.scale_edit, parse_number),
            mean=parsed(self.mean_edit, parse_numbers), std=parsed(self.std_edit, parse_numbers),
            aipp=Path(self.aipp_edit.text().strip()) if self.aipp_edit.text().strip() else None,
            activation=_picked(self.activation_box),
            threshold=self.threshold_value.value() if self.threshold_box.isChecked() else None,
            classes=parsed(self.classes_edit, parse_classes))

    def refresh(self) -> None:
        """Re-read the graph with the current answers; Save is enabled only for a card that can be written."""
        self.proposal = None
        text, problem = "", ""
        model = self.model_edit.text().strip()
        if not model:
            problem = "Pick an ONNX model."
        else:
            try:
                self.proposal = propose(Path(model), self.options())
                lines = [f"{kind}: {line}" for kind, items in (("found", self.proposal.found),
                                                               ("assumed", self.proposal.assumed),
                                                               ("note", self.proposal.notes)) for line in items]
                text = in_dialog_words("\n".join(lines))
            except (SegScopeError, ValueError, argparse.ArgumentTypeError) as exc:
                problem = in_dialog_words(str(exc))
            if self.proposal is not None and not self.out_edit.text().strip():
                problem = "Choose the project folder to write."
        self.facts.setPlainText(text)
        self.problem.setText(problem)
        self.buttons.button(QDialogButtonBox.StandardButton.Save).setEnabled(self.proposal is not None
                                                                              and not problem)

    def save(self) -> None:
        if self.proposal is None:
            return
        out = Path(self.out_edit.text().strip())
        existing = out / f"pipelines/{self.proposal.stem}.pipeline"
        if existing.is_file() and not self.overwrite_box.isChecked():
            answer = QMessageBox.question(
                self, "Project exists", f"{out} already holds a project for {self.proposal.stem}.\n\nOpen it as it "
                "is, or replace its files with this card?", QMessageBox.StandardButton.Open |
                QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel, QMessageBox.StandardButton.Open)
            if answer == QMessageBox.StandardButton.Open:
                self.pipeline = existing
                self.accept()
                return
            if answer != QMessageBox.StandardButton.Yes:
                return
            self.overwrite_box.setChecked(True)
        try:
            self.pipeline = write_project(Path(self.model_edit.text().strip()), out, self.proposal, self.options(),
                                          self.overwrite_box.isChecked())
        except SegScopeError as exc:
            self.problem.setText(in_dialog_words(str(exc)))
            return
        self.accept()


def project_pipeline(card: Path) -> Path:
    """What the viewer opens for a card: the project's pipeline beside its models/ folder (as Build model card
    writes it) where there is one, else the card (it runs the bare stream, `core.stream.loader.card_pipeline`)."""
    beside = card.parent.parent / "pipelines" / f"{card.stem}.pipeline"
    return beside if card.suffix == ".json" and card.parent.name == "models" and beside.is_file() else card


def build_card(parent: QWidget, backend: BackendState[Any], model: Path | None = None) -> None:
    """File > Build model card…: the dialog; the project it writes (or finds) opens on `backend`."""
    dialog = ModelDialog(parent, model)
    if dialog.exec() == QDialog.DialogCode.Accepted and dialog.pipeline is not None:
        backend.open(dataclasses.replace(backend.choice, pipeline=dialog.pipeline))


def open_model_path(parent: QWidget, backend: BackendState[Any], report: Callable[[str, str], object],
                    path: Path) -> None:
    """Open the model at `path` (`core.stream.source.resolve_source`, the CLI's rule) on the current backend kind
    (`BackendState.open` goes back to the open backend if it fails); an ONNX model without a card is offered
    one; a problem goes to `report(level, text)`."""
    try:
        resolved = resolve_source(path)
    except SegScopeError as exc:
        report("error", f"Open model: {exc}")
        return
    if resolved.note:
        report("info", f"Open model: {resolved.note}")
    if resolved.path is not None:
        backend.open(dataclasses.replace(backend.choice, pipeline=project_pipeline(resolved.path)))
    elif QMessageBox.question(parent, "No model card", f"{path.name} has no model card beside it. Build one now (the "
                              "graph is read and you answer what it cannot tell)?") == QMessageBox.StandardButton.Yes:
        build_card(parent, backend, path)


def add_open_model_action(parent: QWidget, menu: QMenu, backend: BackendState[Any],
                          report: Callable[[str, str], object]) -> QAction:
    """File > Open model…, Open model project folder… and Build model card…"""
    def open_model() -> None:
        path, _ = QFileDialog.getOpenFileName(parent, "Open model", "", "Models (*.json *.onnx *.om *.pipeline);;"
                                                                         "All files (*)")
        if path:
            open_model_path(parent, backend, report, Path(path))

    def open_project() -> None:
        folder = QFileDialog.getExistingDirectory(parent, "Open a model project folder")
        if folder:
            open_model_path(parent, backend, report, Path(folder))

    action = menu.addAction("Open &model…")
    action.setToolTip("Open a model that has a card: its .json card, an .onnx with its card beside it, or a "
                      ".pipeline")
    action.triggered.connect(open_model)
    menu.addAction("Open model &project folder…", open_project).setToolTip(
        "Open a project folder (models/ and pipelines/, as Build model card writes it)")
    menu.addAction("&Build model card…", lambda: build_card(parent, backend)).setToolTip(
        "Make a runnable project from a bare ONNX model: its graph is read, you answer what it cannot tell")
    return action
