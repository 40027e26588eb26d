"""The Export dialog: what to write (the kinds of `core.export.files`), where, for which images, and whether
existing files may be replaced. It only chooses; the caller writes with `core.export.files`.

Never overwrites without asking: if any target file exists, OK is refused with a note until the user ticks
"Replace existing files", and even then a confirmation names how many files will be replaced.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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

from ..core.export.files import EXPORT_KINDS, RUN_KINDS
from ..core.wholeslide.export import TILED_KINDS, planned_tiled_files
from .settings import settings as app_settings

#: Checkbox text of each `core.export.files` kind.
KIND_LABELS = {
    "mask": "Argmax mask PNG at ROI size",
    "canvas": "Full-slide canvas mask PNG",
    "softmax": "Softmax tensor .npy (model resolution, float32)",
    "heatmap": "8-bit heatmap PNG (foreground probability)",
    "geojson": "GeoJSON annotations for QuPath (one polygon per defect)",
    "coco": "COCO annotations, RLE (one file for all images)",
}
#: Written by `core.export.files.write_metrics`.
METRICS_FILES = ("metrics.csv", "metrics.json")

SCOPES = ("current", "all")


@dataclass(frozen=True)
class ExportChoices:
    kinds: tuple[str, ...]  # keys of core.export.files.EXPORT_KINDS, then RUN_KINDS, in that order
    metrics: bool  # metrics.csv + metrics.json
    folder: Path
    scope: str  # "current" or "all" (every image with a result)
    item_ids: tuple[str, ...]  # the images in scope
    overwrite: bool
    stitched: bool = False  # the images' whole-slide runs (stitched, at their output scale), not their ROI runs

    def targets(self) -> list[Path]:
        """Every file the export may write."""
        if self.stitched:
            names = [n for item in self.item_ids for n in planned_tiled_files(item, list(self.kinds), "auto")]
            paths = [self.folder / name for name in names]
        else:
            paths = [self.folder / EXPORT_KINDS[kind].format(id=item) for item in self.item_ids
                     for kind in self.kinds if kind in EXPORT_KINDS]
            paths += [self.folder / RUN_KINDS[kind] for kind in self.kinds if kind in RUN_KINDS]
        return paths + ([self.folder / name for name in METRICS_FILES] if self.metrics else [])


class ExportDialog(QDialog):
    """Choose kinds, folder, scope and overwrite policy; `choices()` after `exec()` returns Accepted."""

    def __init__(
        self,
        current_id: str | None,
        result_ids: Sequence[str],
        parent: QWidget | None = None,
        settings: QSettings | None = None,
        slide_ids: Sequence[str] = (),
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Export")
        self._current_id = current_id
        self._result_ids = tuple(result_ids)
        self._slide_ids = tuple(slide_ids)
        self._settings = settings if settings is not None else app_settings()

        runs = QGroupBox("Results")
        runs_layout = QVBoxLayout(runs)
        self.roi_runs_button = QRadioButton("Runs of the ROIs (model resolution; canvas at slide size)")
        self.slide_runs_button = QRadioButton("Whole-slide runs (stitched at their output scale; PNG, or tiled "
                                              "pyramidal OME-TIFF beyond 8192 px)")
        self.slide_runs_button.setToolTip("The same files as a tiled evaluation's export: mask, softmax and heatmap "
                                          "of the whole slide with their provenance (no slide-size canvas)")
        for button in (self.roi_runs_button, self.slide_runs_button):
            runs_layout.addWidget(button)
        self.roi_runs_button.setEnabled(bool(self._result_ids))
        self.slide_runs_button.setEnabled(bool(self._slide_ids))
        current_has_slide = current_id in self._slide_ids and current_id not in self._result_ids
        (self.slide_runs_button if current_has_slide or not self._result_ids else self.roi_runs_button).setChecked(True)
        runs.setVisible(bool(self._slide_ids))

        what = QGroupBox("What")
        what_layout = QVBoxLayout(what)
        self.kind_boxes: dict[str, QCheckBox] = {}
        remembered = self._settings.value("export/kinds", ["mask"])
        remembered = [remembered] if isinstance(remembered, str) else remembered if isinstance(remembered, list) else []
        for kind, pattern in {**EXPORT_KINDS, **RUN_KINDS}.items():
            box = QCheckBox(KIND_LABELS.get(kind, kind))
            box.setToolTip(f"File name: {pattern}")
            box.setChecked(kind in remembered)
            what_layout.addWidget(box)
            self.kind_boxes[kind] = box
        self.metrics_box = QCheckBox("Metrics table (CSV and JSON)")
        self.metrics_box.setToolTip(" + ".join(METRICS_FILES))
        self.metrics_box.setChecked(self._settings.value("export/metrics", "false") in (True, "true"))
        what_layout.addWidget(self.metrics_box)

        where = QGroupBox("Where")
        where_layout = QHBoxLayout(where)
        self.folder_edit = QLineEdit(str(self._settings.value("export/folder", "") or ""))
        self.folder_edit.setPlaceholderText("folder to write into")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        where_layout.addWidget(self.folder_edit, 1)
        where_layout.addWidget(browse)

        scope = QGroupBox("Images")
        scope_layout = QVBoxLayout(scope)
        self.scope_buttons = {"current": QRadioButton(), "all": QRadioButton()}
        group = QButtonGroup(self)
        for button in self.scope_buttons.values():
            group.addButton(button)
            scope_layout.addWidget(button)
        self._update_scope()
        wanted = self._settings.value("export/scope", "current")
        enabled = [s for s in SCOPES if self.scope_buttons[s].isEnabled()]
        if enabled:
            self.scope_buttons[wanted if wanted in enabled else enabled[0]].setChecked(True)
        self.slide_runs_button.toggled.connect(lambda _on: self._update_scope())

        self.overwrite_box = QCheckBox("Replace existing files")
        self.overwrite_box.setToolTip("Off: the export refuses to touch a file that already exists")
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

    def _in_scope(self) -> tuple[str, ...]:
        """The images the chosen kind of results exists for."""
        return self._slide_ids if self.slide_runs_button.isChecked() else self._result_ids

    def _update_scope(self) -> None:
        ids, current = self._in_scope(), self._current_id
        self.scope_buttons["current"].setText(f"Current image ({current})" if current in ids else
                                              "Current image (no such result)")
        self.scope_buttons["current"].setEnabled(current in ids)
        self.scope_buttons["all"].setText(f"All images with such results ({len(ids)})")
        self.scope_buttons["all"].setEnabled(bool(ids))
        if not self.scope_buttons["current"].isEnabled() and ids:
            self.scope_buttons["all"].setChecked(True)
        stitched = self.slide_runs_button.isChecked()
        for kind, box in self.kind_boxes.items():
            box.setEnabled(not stitched or kind in TILED_KINDS)

    def choices(self) -> ExportChoices:
        scope = next((s for s, b in self.scope_buttons.items() if b.isChecked()), "current")
        stitched = self.slide_runs_button.isChecked()
        if scope == "all":
            items = self._in_scope()
        else:
            items = (self._current_id,) if self._current_id in self._in_scope() else ()
        return ExportChoices(
            kinds=tuple(k for k, box in self.kind_boxes.items() if box.isChecked() and box.isEnabled()),
            metrics=self.metrics_box.isChecked(),
            folder=Path(self.folder_edit.text().strip()).expanduser(),
            scope=scope,
            item_ids=items,
            overwrite=self.overwrite_box.isChecked(),
            stitched=stitched,
        )

    def accept(self) -> None:
        choices = self.choices()
        problem = self._problem(choices)
        if problem:
            self.note.setText(problem)
            return
        existing = [p for p in choices.targets() if p.exists()]
        if existing and not choices.overwrite:
            self.note.setText(
                f"{len(existing)} of the files already exist in {choices.folder} (e.g. {existing[0].name}): "
                "choose another folder, or tick \u201cReplace existing files\u201d"
            )
            return
        if existing and not self._confirm_replace(existing, choices.folder):
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

    def _confirm_replace(self, existing: list[Path], folder: Path) -> bool:
        answer = QMessageBox.question(
            self,
            "Replace existing files?",
            f"{len(existing)} file(s) in {folder} will be replaced, e.g. {existing[0].name}. Replace them?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No,
        )
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
