"""The Export dialog: what to write, where, for which images, and whether existing files may be replaced. It
only chooses; `core.export.job` plans and writes.

What it offers is derived from the results (`core.export.job.Exportable`): an ROI run's kinds or a
whole-slide run's, each named with its files as they will be written (format, pixel size, values) and their
estimated size, and the whole export's estimate below. Above `CONFIRM_BYTES` it asks before writing. It
never overwrites without asking: if any target file exists (each image's provenance included), OK is
refused with a note until the user ticks "Replace existing files", and even then a confirmation names how
many files will be replaced.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from ...core.errors import SegScopeError
from ...core.export.job import ROI_KINDS, Exportable, ExportChoices, ExportPlan
from ...core.export.names import METRICS_FILES
from ...core.export.plan import CONFIRM_BYTES, format_bytes
from ..runtime.settings import settings as app_settings

SCOPES = ("current", "all")


class ExportDialog(QDialog):
    """Choose kinds, folder, scope and overwrite policy; `choices()` after `exec()` returns Accepted."""

    def __init__(self, exportable: Exportable, parent: QWidget | None = None,
                 settings: QSettings | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Export")
        self.exportable = exportable
        self._current_id = exportable.current_id
        self._settings = settings if settings is not None else app_settings()
        roi_ids, slide_ids = exportable.ids(False), exportable.ids(True)

        runs = QGroupBox("Results")
        runs_layout = QVBoxLayout(runs)
        self.roi_runs_button = QRadioButton("Runs of the ROIs")
        self.slide_runs_button = QRadioButton("Whole-slide runs (stitched at their output scale)")
        self.slide_runs_button.setToolTip("The same files as a tiled evaluation's export: mask, softmax and heatmap "
                                          "of the whole slide with their provenance (no slide-size canvas)")
        for button in (self.roi_runs_button, self.slide_runs_button):
            runs_layout.addWidget(button)
        self.roi_runs_button.setEnabled(bool(roi_ids))
        self.slide_runs_button.setEnabled(bool(slide_ids))
        current_has_slide = self._current_id in slide_ids and self._current_id not in roi_ids
        (self.slide_runs_button if current_has_slide or not roi_ids else self.roi_runs_button).setChecked(True)
        runs.setVisible(bool(slide_ids))

        what = QGroupBox("What")
        what_layout = QVBoxLayout(what)
        self.kind_boxes: dict[str, QCheckBox] = {}
        self.kind_details: dict[str, QLabel] = {}
        remembered = self._settings.value("export/kinds", ["mask"])
        remembered = [remembered] if isinstance(remembered, str) else remembered if isinstance(remembered, list) else []
        for kind in ROI_KINDS:
            box, details = QCheckBox(), QLabel()
            box.setChecked(kind in remembered)
            box.toggled.connect(lambda _on: self._update_estimate())
            details.setIndent(24)  # one line, never wrapped: a wrapped label here is cut top and bottom (the
            # dialog takes its size before the texts; a line this short widens it instead)
            details.setStyleSheet("color: palette(mid)")
            what_layout.addWidget(box)
            what_layout.addWidget(details)
            self.kind_boxes[kind], self.kind_details[kind] = box, details
        self.metrics_box = QCheckBox("Metrics table (CSV and JSON)")
        self.metrics_box.setToolTip(" + ".join(METRICS_FILES))
        self.metrics_box.setChecked(self._settings.value("export/metrics", "false") in (True, "true"))
        self.metrics_box.toggled.connect(lambda _on: self._update_estimate())
        what_layout.addWidget(self.metrics_box)
        self.estimate = QLabel()
        what_layout.addWidget(self.estimate)

        where = QGroupBox("Where")
        where_layout = QHBoxLayout(where)
        self.folder_edit = QLineEdit(str(self._settings.value("export/folder", "") or ""))
        self.folder_edit.setPlaceholderText("folder to write into")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        where_layout.addWidget(self.folder_edit, 1)
        where_layout.addWidget(browse)

        self.overwrite_box = QCheckBox("Replace existing files")
        self.overwrite_box.setToolTip("Off: the export refuses to touch a file that already exists")

        scope = QGroupBox("Images")
        scope_layout = QVBoxLayout(scope)
        self.scope_buttons = {"current": QRadioButton(), "all": QRadioButton()}
        group = QButtonGroup(self)
        for button in self.scope_buttons.values():
            group.addButton(button)
            scope_layout.addWidget(button)
            button.toggled.connect(lambda _on: self._update_kinds())
        self._update_scope()
        wanted = self._settings.value("export/scope", "current")
        enabled = [s for s in SCOPES if self.scope_buttons[s].isEnabled()]
        if enabled:
            self.scope_buttons[wanted if wanted in enabled else enabled[0]].setChecked(True)
        self.slide_runs_button.toggled.connect(lambda _on: self._update_scope())

        self.note = QLabel("")
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: #E69F00")

        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Export")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)

        layout = QVBoxLayout(self)
        for widget in (runs, what, where, scope, self.overwrite_box, self.note, self.buttons):
            layout.addWidget(widget)
        self._update_kinds()

    def _stitched(self) -> bool:
        return self.slide_runs_button.isChecked()

    def _in_scope(self) -> tuple[str, ...]:
        """The images the chosen kind of results exists for."""
        return self.exportable.ids(self._stitched())

    def _update_scope(self) -> None:
        ids, current = self._in_scope(), self._current_id
        self.scope_buttons["current"].setText(f"Current image ({current})" if current in ids else
                                              "Current image (no such result)")
        self.scope_buttons["current"].setEnabled(current in ids)
        self.scope_buttons["all"].setText(f"All images with such results ({len(ids)})")
        self.scope_buttons["all"].setEnabled(bool(ids))
        if not self.scope_buttons["current"].isEnabled() and ids:
            self.scope_buttons["all"].setChecked(True)
        self._update_kinds()

    def _update_kinds(self) -> None:
        """Each kind named and sized for the chosen results and images; kinds these results lack disabled."""
        stitched, ids = self._stitched(), self._chosen_ids()
        offered = self.exportable.kinds(stitched)
        for kind, box in self.kind_boxes.items():
            available = kind in offered
            title = self.exportable.offer(kind, False, ())[0]
            try:
                details = self.exportable.offer(kind, stitched, ids)[1] if available else \
                    "not written for whole-slide runs"
            except SegScopeError as exc:  # a file it would copy cannot be read: said, and not offered
                details, available = str(exc), False
            box.setText(title)
            box.setEnabled(available)
            self.kind_details[kind].setText(details)
            self.kind_details[kind].setEnabled(available)
        self._update_estimate()

    def _update_estimate(self) -> None:
        try:
            plan = self.exportable.plan(self.choices())
        except SegScopeError as exc:
            self.estimate.setText(str(exc))
            return
        self.estimate.setText(f"Estimated size: {plan.estimate().text()}")

    def _chosen_ids(self) -> tuple[str, ...]:
        if self.scope_buttons["all"].isChecked():
            return self._in_scope()
        return (self._current_id,) if self._current_id in self._in_scope() else ()

    def choices(self) -> ExportChoices:
        return ExportChoices(
            kinds=tuple(k for k, box in self.kind_boxes.items() if box.isChecked() and box.isEnabled()),
            metrics=self.metrics_box.isChecked(),
            folder=Path(self.folder_edit.text().strip()).expanduser(),
            scope="all" if self.scope_buttons["all"].isChecked() else "current",
            item_ids=self._chosen_ids(),
            overwrite=self.overwrite_box.isChecked(),
            stitched=self._stitched(),
        )

    def accept(self) -> None:
        choices = self.choices()
        problem = self._problem(choices)
        if problem:
            self.note.setText(problem)
            return
        try:
            plan = self.exportable.plan(choices)
        except SegScopeError as exc:
            self.note.setText(str(exc))
            return
        existing = [p for p in plan.targets() if p.exists()]
        if existing and not choices.overwrite:
            self.note.setText(
                f"{len(existing)} of the files already exist in {choices.folder} (e.g. {existing[0].name}): "
                "choose another folder, or tick \u201cReplace existing files\u201d"
            )
            return
        if plan.estimate().bytes >= CONFIRM_BYTES and not self._confirm_size(plan):
            return
        if existing and not self._confirm_replace(existing, plan.removed(), choices.folder):
            return
        self._remember(choices)
        super().accept()

    @staticmethod
    def _problem(choices: ExportChoices) -> str:
        if not choices.kinds and not choices.metrics:
            return "Choose at least one thing to export."
        if not str(choices.folder) or str(choices.folder) == ".":
            return "Choose a folder to write into."
        if choices.folder.exists() and not choices.folder.is_dir():
            return f"{choices.folder} is a file, not a folder."
        if choices.kinds and not choices.item_ids:
            return "No image in scope: run the model first."
        return ""

    def _confirm_size(self, plan: ExportPlan) -> bool:
        folder = plan.choices.folder
        existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
        free = f" ({format_bytes(shutil.disk_usage(existing).free)} free there)" if existing is not None else ""
        return self._ask("Write a large export?",
                         f"This export writes {plan.estimate().text()} into {folder}{free}. Write it?")

    def _confirm_replace(self, existing: list[Path], removed: list[Path], folder: Path) -> bool:
        gone = (f" An image's earlier export is replaced as a whole: {len(removed)} file(s) of it that this "
                f"export does not write go with it, e.g. {removed[0].name}.") if removed else ""
        return self._ask("Replace existing files?", f"{len(existing)} file(s) in {folder} will be replaced, e.g. "
                                                    f"{existing[0].name}.{gone} Replace them?")

    def _ask(self, title: str, text: str) -> bool:
        """Yes or No (the default) to `text`."""
        answer = QMessageBox.question(self, title, text, QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                                      QMessageBox.StandardButton.No)
        return answer == QMessageBox.StandardButton.Yes

    def _remember(self, choices: ExportChoices) -> None:
        self._settings.setValue("export/folder", str(choices.folder))
        self._settings.setValue("export/kinds", list(choices.kinds))
        self._settings.setValue("export/metrics", choices.metrics)
        self._settings.setValue("export/scope", choices.scope)

    def _browse(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Export into folder", self.folder_edit.text())
        if folder:
            self.folder_edit.setText(folder)
