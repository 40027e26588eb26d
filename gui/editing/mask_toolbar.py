"""The mask-editing actions, their toolbar and the Edit menu, and the tool settings they hold (tool, brush
radius, paint class, probability threshold, save mode). What the actions do is `MaskCommands`' (the editing)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QComboBox, QLabel, QMenu, QSlider, QSpinBox, QToolBar, QToolButton, QWidget

from ...core.editing.files import SaveMode
from ..runtime import settings
from ..widgets.shortcuts import check_box_for, key, shortcut_action

TOOLS = ("pan", "brush", "eraser", "fill", "lasso")
MAX_RADIUS = 500
SAVE_MODE_KEY = "editing/save_mode"


class MaskCommands(Protocol):
    def accept_prediction(self, threshold: float | None) -> None: ...
    def undo(self) -> None: ...
    def redo(self) -> None: ...
    def save(self) -> bool: ...


class MaskEditActions(QObject):
    """The editing actions (shortcuts live on `host`), `toolbar`, `menu` and the tool settings."""

    #: the chosen tool (also when chosen again)
    toolChanged = Signal(str)

    def __init__(self, host: QWidget, commands: MaskCommands) -> None:
        super().__init__(host)
        self.host = host
        self._build_actions(commands)
        self._build_toolbar()
        self._build_menu()

    def _action(self, text: str, action_id: str, tip: str, slot: Callable, checkable: bool = False) -> QAction:
        return shortcut_action(self.host, text, action_id, tip, slot, checkable)

    def _build_actions(self, commands: MaskCommands) -> None:
        a = self._action
        c = commands
        tips = {
            "pan": "Pan and zoom the panels (no editing); the middle button and the wheel always navigate",
            "brush": "Paint the chosen class on the Ground truth panel; [ and ] change the size",
            "eraser": "Erase to background on the Ground truth panel; [ and ] change the size",
            "fill": "Flood-fill the clicked region (inside the ROI) with the chosen class",
            "lasso": "Drag a lasso, or click corners and double-click, to fill a polygon with the chosen class",
        }
        self.tool_group = QActionGroup(self)
        self.tool_actions: dict[str, QAction] = {}
        for tool in TOOLS:
            action = a(tool.capitalize(), f"tool_{tool}", tips[tool], lambda _=False, t=tool: self.set_tool(t), True)
            self.tool_group.addAction(action)
            self.tool_actions[tool] = action
        self.smaller_action = a("Smaller brush", "brush_smaller", "Smaller brush", lambda: self.step_radius(-1))
        self.bigger_action = a("Bigger brush", "brush_bigger", "Bigger brush", lambda: self.step_radius(1))
        self.limit_action = a("P ≥ t only", "probability_limit",
                              "Brush, fill and lasso paint only where the chosen class's probability is at least "
                              "the threshold", lambda: None, True)
        self.accept_argmax_action = a("Accept argmax", "accept_argmax",
                                      "Replace the ROI's mask with the prediction (argmax): a starting point",
                                      lambda: c.accept_prediction(None))
        self.accept_threshold_action = a("Accept P ≥ t", "accept_threshold",
                                         "Replace the ROI's mask with the chosen class where its probability is "
                                         "at least the threshold", lambda: c.accept_prediction(self.threshold()))
        self.undo_action = a("Undo", "undo", "Undo the last mask edit", c.undo)
        self.redo_action = a("Redo", "redo", "Redo the mask edit", c.redo)
        self.redo_action.setShortcuts([QKeySequence(key("redo")), QKeySequence(key("redo_alt"))])
        self.save_action = a("Save mask", "save_mask", "Save the edited mask (written in the background)",
                             lambda: c.save())
        self.save_mode_group = QActionGroup(self)
        self.save_mode_actions: dict[str, QAction] = {}
        for mode, text in (("corrected", "Save beside the original (mask_corrected.png)"),
                           ("replace", "Replace the original (keeps a backup, mask.orig.png)")):
            action = QAction(text, self, checkable=True)
            action.setToolTip(text)
            action.triggered.connect(lambda _=False, m=mode: self.set_save_mode(m))
            self.save_mode_group.addAction(action)
            self.save_mode_actions[mode] = action
        self.save_mode_actions[self.save_mode()].setChecked(True)

    def _build_toolbar(self) -> None:
        bar = QToolBar("Mask editing")
        bar.setObjectName("toolbar_mask_editing")
        bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        for action in self.tool_actions.values():
            bar.addAction(action)
        self.radius_spin = QSpinBox()
        self.radius_spin.setRange(1, MAX_RADIUS)
        self.radius_spin.setValue(8)
        self.radius_spin.setPrefix("r ")
        self.radius_spin.setSuffix(" px")
        self.radius_spin.setToolTip(f"Brush and eraser radius in slide pixels ({key('brush_smaller')} / "
                                    f"{key('brush_bigger')})")
        bar.addWidget(self.radius_spin)
        bar.addSeparator()
        self.class_combo = QComboBox()
        self.class_combo.setToolTip("Class the brush, fill and lasso paint, and whose probability the "
                                    "threshold tools use")
        self.class_combo.setMinimumContentsLength(8)
        bar.addWidget(QLabel(" Paint class "))
        bar.addWidget(self.class_combo)
        bar.addWidget(check_box_for(self.limit_action))
        self.threshold_slider = QSlider(Qt.Orientation.Horizontal)
        self.threshold_slider.setRange(0, 100)
        self.threshold_slider.setValue(50)
        self.threshold_slider.setMaximumWidth(120)
        self.threshold_slider.setToolTip("Probability threshold t of the chosen class, for 'P ≥ t only' and "
                                         "'Accept P ≥ t'")
        self.threshold_label = QLabel()
        self.threshold_label.setMinimumWidth(48)
        self.threshold_slider.valueChanged.connect(lambda v: self.threshold_label.setText(f"t {v / 100:.2f}"))
        self.threshold_label.setText(f"t {self.threshold():.2f}")
        bar.addWidget(self.threshold_slider)
        bar.addWidget(self.threshold_label)
        bar.addSeparator()
        for entry in (self.accept_argmax_action, self.accept_threshold_action, None, self.undo_action,
                      self.redo_action):
            if entry is None:
                bar.addSeparator()
            else:
                bar.addAction(entry)
        save_button = QToolButton()
        save_button.setDefaultAction(self.save_action)
        save_button.setPopupMode(QToolButton.ToolButtonPopupMode.MenuButtonPopup)
        save_menu = QMenu(save_button)
        save_menu.setToolTipsVisible(True)
        save_menu.addActions(list(self.save_mode_actions.values()))
        save_button.setMenu(save_menu)
        bar.addWidget(save_button)
        self.toolbar = bar

    def _build_menu(self) -> None:
        menu = QMenu("&Edit", self.host)
        for action in (self.undo_action, self.redo_action, None, *self.tool_actions.values(), self.smaller_action,
                       self.bigger_action, self.limit_action, None, self.accept_argmax_action,
                       self.accept_threshold_action, None, self.save_action):
            menu.addAction(action) if action else menu.addSeparator()
        mode_menu = menu.addMenu("Save mode")
        mode_menu.addActions(list(self.save_mode_actions.values()))
        self.menu = menu

    # ------------------------------------------------------------------------------------ tool settings
    @property
    def tool(self) -> str:
        return next(t for t, a in self.tool_actions.items() if a.isChecked())

    def set_tool(self, tool: str) -> None:
        self.tool_actions[tool].setChecked(True)
        self.toolChanged.emit(tool)

    def radius(self) -> int:
        return self.radius_spin.value()

    def step_radius(self, direction: int) -> None:
        """`[` / `]`: about 20% smaller / bigger, at least 1 px."""
        r = self.radius()
        self.radius_spin.setValue(max(r + 1, round(r * 1.2)) if direction > 0 else min(r - 1, round(r / 1.2)))

    def threshold(self) -> float:
        return self.threshold_slider.value() / 100

    def class_index(self) -> int:
        return max(self.class_combo.currentIndex(), 0)

    def save_mode(self) -> SaveMode:
        mode = settings.settings().value(SAVE_MODE_KEY, "corrected")
        return "replace" if mode == "replace" else "corrected"

    def set_save_mode(self, mode: SaveMode) -> None:
        settings.settings().setValue(SAVE_MODE_KEY, mode)
        self.save_mode_actions[mode].setChecked(True)

    def brush_radius(self) -> float:
        """The brush preview's radius (0: no preview, the tool is not a brush)."""
        return self.radius() + 0.5 if self.tool in ("brush", "eraser") else 0

    def set_class_names(self, names: list[str]) -> None:
        """The paint classes (of the shown result); keeps the chosen one when it still exists."""
        if [self.class_combo.itemText(i) for i in range(self.class_combo.count())] != names:
            previous = self.class_index()
            self.class_combo.clear()
            self.class_combo.addItems(names)
            self.class_combo.setCurrentIndex(previous if 0 < previous < len(names) else min(1, len(names) - 1))
