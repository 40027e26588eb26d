"""The line above the result panels: which class the heatmap shows and the error map scores, the overlay,
contour and error-map switches, the overlay's opacity, Fit, and a banner saying what is going on while a result
is shown. The panels (`gui/canvas/result_panels.py`) read and follow these controls; the menus add the switches."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QSlider, QWidget

from ..widgets.shortcuts import check_box_for


class PanelControls(QWidget):
    """The result panels' controls; `fit()` is what the Fit button does."""

    def __init__(self, fit: Callable[[], object], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.class_combo = QComboBox()
        self.class_combo.setToolTip("Class whose probability the heatmap shows and the error map scores")
        self.overlay_action = QAction("Overlay", self, checkable=True)
        self.overlay_action.setToolTip("Draw the panels over the ROI image")
        self.contour_action = QAction("Contours", self, checkable=True)
        self.contour_action.setToolTip("Masks as contours instead of filled regions (overlay mode)")
        self.error_map_action = QAction("Error map", self, checkable=True)
        self.error_map_action.setToolTip(
            "Third panel: TP (green) / FP (orange) / FN (blue) of the chosen class instead of the ground truth"
        )
        self.opacity_slider = QSlider(Qt.Orientation.Horizontal)
        self.opacity_slider.setRange(0, 100)
        self.opacity_slider.setValue(50)
        self.opacity_slider.setMaximumWidth(140)
        self.opacity_slider.setToolTip("Opacity of the masks and heatmap over the ROI image")
        fit_button = QPushButton("Fit")
        fit_button.setToolTip("Zoom the panels to the whole ROI")
        fit_button.clicked.connect(fit)
        self.banner = QLabel("")  # what is going on while a result is shown ("Running 001…"), beside Fit
        self.banner.setStyleSheet("color: #e6b450; padding: 0 6px;")

        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("Show class"))
        row.addWidget(self.class_combo)
        for action in (self.overlay_action, self.contour_action, self.error_map_action):
            row.addWidget(check_box_for(action))
        row.addWidget(QLabel("Opacity"))
        row.addWidget(self.opacity_slider)
        row.addStretch(1)
        row.addWidget(self.banner)
        row.addWidget(fit_button)
