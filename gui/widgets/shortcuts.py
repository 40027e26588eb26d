"""Every keyboard shortcut of the viewer in one table, and the Help > Shortcuts dialog that lists it.

Widgets look their keys up here (`key("run_current")`) so the dialog can never disagree with the app.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

#: action id -> (key sequence in QKeySequence portable text, what it does)
_TABLE: dict[str, tuple[str, str]] = {
    "open": ("Ctrl+O", "Open a dataset folder"),
    "run_current": ("Ctrl+R", "Run the current image"),
    "run_all": ("Ctrl+Shift+R", "Run all images of the dataset"),
    "run_slide": ("Ctrl+Alt+R", "Run the current image's whole slide in tiles (stitched heatmap over the slide)"),
    "cancel": ("Esc", "Cancel the running inference"),
    "export": ("Ctrl+E", "Export masks, heatmaps and metrics"),
    "cancel_export": ("Ctrl+Shift+E", "Cancel the running export (its folder is left as it was)"),
    "backend": ("Ctrl+B", "Choose the inference backend (embedded, MindX, remote SSH)"),
    "next_image": ("PgDown", "Next image in the list"),
    "prev_image": ("PgUp", "Previous image in the list"),
    "worst_first": ("W", "Sort the image list worst first by the ranking metric"),
    "fit": ("F", "Fit the whole slide in the view"),
    "one_to_one": ("1", "Zoom the slide to 1:1 (one image pixel per screen pixel)"),
    "roi_square": ("S", "Lock the ROI to a square (the model input is square)"),
    "roi_reset": ("Ctrl+D", "Reset the ROI of this image to the dataset default"),
    "roi_undo": ("Ctrl+Alt+Z", "Undo the last ROI move (any image)"),
    "roi_redo": ("Ctrl+Alt+Shift+Z", "Redo the ROI move"),
    "overlay": ("O", "Results: draw the masks and heatmap over the ROI image"),
    "contours": ("C", "Results: masks as contours (overlay mode)"),
    "error_map": ("E", "Results: error map (TP / FP / FN) instead of the ground truth"),
    "slide_heatmap": ("H", "Show the whole-slide run's heatmap over the slide"),
    "slide_seams": ("Shift+H", "Show where overlapping tiles of the whole-slide run disagree (seams)"),
    "nudge": ("Arrows", "Move the ROI by 1 px (slide view focused)"),
    "nudge_big": ("Shift+Arrows", "Move the ROI by 10 px (slide view focused)"),
    "prev_worst": (",", "Previous image in worst-first order (by the ranking metric)"),
    "next_worst": (".", "Next image in worst-first order (by the ranking metric)"),
    "next_miss": ("N", "Zoom to the current image's next missed defect (Defects dock)"),
    "prev_miss": ("Shift+N", "Zoom to the current image's previous missed defect"),
    "review_queue": ("Ctrl+Shift+Q", "Review queue: show the dataset's disagreements, likely label errors first, "
                     "and go to the first not reviewed"),
    "review_accept": ("A", "Review queue: accept the prediction's component into the truth, then the next entry"),
    "review_remove": ("D", "Review queue: remove the truth's component, then the next entry"),
    "review_keep": ("K", "Review queue: keep the truth as it is (marked reviewed), then the next entry"),
    "review_undo": ("U", "Review queue: undo the last decision on this image (its mask edit too)"),
    "review_next": ("J", "Review queue: next entry not reviewed, without deciding (two runs compared: the next "
                         "place they differ)"),
    "review_prev": ("Shift+J", "Review queue: previous entry not reviewed (two runs compared: the previous place)"),
    "review_compare": ("Ctrl+Shift+B", "Review queue: compare the model on screen (A) with another model or backend "
                                       "(B) over the images run: where they differ, most first, and the gate; "
                                       "stepping them shows B's argmax in the truth's panel (mask tools off; "
                                       "Ctrl+Shift+Q goes back to the truth's queue and panel)"),
    "quality_metrics": ("Ctrl+Shift+M", "Choose the QA metrics computed beside Dice (HD95, NSD, clDice, defect F1, "
                        "ECE)"),
    "compare_runs": ("Ctrl+Shift+C", "Compare two runs of the current image (e.g. Ascend vs embedded)"),
    "tool_pan": ("V", "Mask editing: pan and zoom (no editing tool)"),
    "tool_brush": ("B", "Mask editing: brush (paint the chosen class on the ground-truth panel)"),
    "tool_eraser": ("X", "Mask editing: eraser (paint background)"),
    "tool_fill": ("G", "Mask editing: flood fill with the chosen class"),
    "tool_lasso": ("L", "Mask editing: lasso (drag) or polygon (clicks, double-click closes) fill"),
    "brush_smaller": ("[", "Mask editing: smaller brush"),
    "brush_bigger": ("]", "Mask editing: bigger brush"),
    "probability_limit": ("P", "Mask editing: paint only where the class's probability >= threshold"),
    "accept_argmax": ("Ctrl+Shift+A", "Mask editing: accept the prediction (argmax) as the ROI's mask"),
    "accept_threshold": ("Ctrl+Shift+T", "Mask editing: accept probability >= threshold as the ROI's mask"),
    "undo": ("Ctrl+Z", "Undo the last mask edit"),
    "redo": ("Ctrl+Shift+Z", "Redo the mask edit"),
    "redo_alt": ("Ctrl+Y", "Redo the mask edit"),
    "save_mask": ("Ctrl+S", "Save the edited mask (mask_corrected.png, or replace with a backup)"),
    "messages": ("Ctrl+M", "Show or hide the message area"),
    "reset_layout": ("Ctrl+Shift+L", "Put every dock back to the default layout"),
    "shortcuts": ("F1", "This list of shortcuts"),
    "quit": ("Ctrl+Q", "Quit"),
}

#: (key sequence, description) in display order: what the Help > Shortcuts dialog shows.
SHORTCUTS: list[tuple[str, str]] = list(_TABLE.values())


def key(action: str) -> str:
    """The key sequence of an action id, e.g. `key("run_current") == "Ctrl+R"`."""
    return _TABLE[action][0]


def with_key(tooltip: str, action: str) -> str:
    """A tooltip that ends with the action's shortcut, e.g. "Run the current image (Ctrl+R)"."""
    return f"{tooltip} ({key(action)})"


def shortcut_action(window: QWidget, text: str, action_id: str, tip: str, slot: Callable,
                    checkable: bool = False) -> QAction:
    """An action with the table's key and a tooltip naming it, added to `window` so the shortcut works
    whatever has the focus."""
    action = QAction(text, window, checkable=checkable)
    action.setShortcut(QKeySequence(key(action_id)))
    action.setToolTip(with_key(tip, action_id))
    action.setStatusTip(tip)
    action.triggered.connect(slot)
    window.addAction(action)
    return action


def check_box_for(action: QAction) -> QCheckBox:
    """A check box that mirrors the checkable `action` (checked and enabled state), e.g. on a toolbar."""
    box = QCheckBox(action.text())
    box.setToolTip(action.toolTip())
    box.setChecked(action.isChecked())
    box.toggled.connect(action.setChecked)
    action.toggled.connect(box.setChecked)
    action.changed.connect(lambda: box.setEnabled(action.isEnabled()))
    return box


class ShortcutsDialog(QDialog):
    """A read-only two-column table of `SHORTCUTS`."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        table = QTableWidget(len(SHORTCUTS), 2, self)
        table.setHorizontalHeaderLabels(["Keys", "Action"])
        table.verticalHeader().hide()
        table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        table.setSelectionMode(QTableWidget.SelectionMode.NoSelection)
        for row, (keys, text) in enumerate(SHORTCUTS):
            table.setItem(row, 0, QTableWidgetItem(keys))
            table.setItem(row, 1, QTableWidgetItem(text))
        table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        table.horizontalHeader().setStretchLastSection(True)
        self.table = table
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(table)
        layout.addWidget(buttons)
        self.resize(600, 720)
