"""The result panels' hover readout: what each panel draws under one slide position, as one line of text
(`describe`), shown under the panels with a crosshair on each (`HoverReadout`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QLabel, QWidget

from ...core.result import InferenceResult
from ..widgets import colormaps
from .result_panel import ResultPanel


def describe(result: InferenceResult, x: float, y: float, class_name: Callable[[int], str],
             truth: np.ndarray | None = None, prediction: Callable[[], np.ndarray] | None = None,
             positive: int = 1, b: np.ndarray | None = None) -> str:
    """Readout for slide position (x, y), e.g. "slide (2512, 1380) | model (426, 480) | P background 0.035,
    defect 0.965 | predicted defect | true defect | TP". `truth` (class ids at ROI resolution) adds the
    "true" part, scored against `prediction()` (the argmax at ROI resolution) for the class `positive`; `b` (run
    B's class ids at ROI resolution, while two runs are compared) adds "B crack" after the prediction."""
    roi = result.roi
    sx, sy = int(np.floor(x)), int(np.floor(y))
    text = f"slide ({sx}, {sy})"
    if not (roi.x0 <= x < roi.x1 and roi.y0 <= y < roi.y1):
        return f"{text}: outside the ROI"
    height, width = result.argmax.shape
    mx = min(int((x - roi.x0) * width / roi.width), width - 1)
    my = min(int((y - roi.y0) * height / roi.height), height - 1)
    probs = ", ".join(f"{class_name(c)} {p:.3f}" for c, p in enumerate(result.probabilities[my, mx].tolist()))
    predicted = int(result.argmax[my, mx])
    text += f" | model ({mx}, {my}) | P {probs} | predicted {class_name(predicted)}"
    rx, ry = sx - roi.x0, sy - roi.y0
    if b is not None:
        text += f" | B {class_name(int(b[ry, rx]))}"
    if truth is not None and prediction is not None:
        true_class = int(truth[ry, rx])
        scored = int(prediction()[ry, rx])  # may differ from `predicted` on a border
        if scored != predicted:
            text += f" (at ROI resolution: {class_name(scored)})"
        code = int(scored == positive) | int(true_class == positive) << 1
        text += f" | true {class_name(true_class)} | {colormaps.ERROR_NAMES[code]}"
    return text


class HoverReadout(QObject):
    """The crosshair on every panel and the readout line (`label`) at the slide position the mouse rests on
    (`place`); both go when the mouse leaves the panels' `viewport`."""

    def __init__(self, panels: Sequence[ResultPanel], viewport: QWidget, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.panels = tuple(panels)
        self.label = QLabel(" ")
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setMinimumWidth(1)  # a long readout is cut at the window's edge, never widens it
        self.label.setContentsMargins(8, 2, 8, 2)  # in line with the panels' controls, not flush at x = 0
        self.position: tuple[float, float] | None = None  # where the mouse rests (the readout is redone there)
        viewport.installEventFilter(self)

    def place(self, x: float, y: float, text: str) -> None:
        for panel in self.panels:
            panel.vline.setPos(x)
            panel.hline.setPos(y)
            panel.vline.show()
            panel.hline.show()
        self.position = (x, y)
        self.label.setText(text)

    def clear(self) -> None:
        for panel in self.panels:
            panel.vline.hide()
            panel.hline.hide()
        self.label.setText(" ")
        self.position = None

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        if event.type() == QEvent.Type.Leave:
            self.clear()
        return False
