"""Docks built, placed, shown and hidden the same way everywhere (no window state: see
`shell.window_layout` for the main window's layout)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget, QFrame, QMainWindow, QScrollArea, QWidget


def make_dock(parent: QWidget, title: str, widget: QWidget, scroll: bool = False) -> QDockWidget:
    """A dock holding `widget`, named for saving the layout ("dock_<title>"), not placed yet. With `scroll`,
    the widget scrolls in the dock instead of holding the whole column (and so the window) to its height."""
    dock = QDockWidget(title, parent)
    dock.setObjectName(f"dock_{title.lower()}")
    if scroll:
        area = QScrollArea(dock)
        area.setWidgetResizable(True)
        area.setFrameShape(QFrame.Shape.NoFrame)
        area.setWidget(widget)
        widget = area
    dock.setWidget(widget)
    return dock


def add_dock(window: QMainWindow, title: str, widget: QWidget, area: Qt.DockWidgetArea,
             scroll: bool = False) -> QDockWidget:
    dock = make_dock(window, title, widget, scroll)
    window.addDockWidget(area, dock)
    return dock


def tab_dock(window: QMainWindow, dock: QDockWidget, tab_with: QDockWidget) -> None:
    """Place a dock added after the window was built: as the user left it last time, else tabbed with
    `tab_with` (which stays in front)."""
    if not window.restoreDockWidget(dock):
        window.addDockWidget(window.dockWidgetArea(tab_with), dock)
        window.tabifyDockWidget(tab_with, dock)
        tab_with.raise_()


def show_dock(dock: QDockWidget, visible: bool = True) -> None:
    """Show `dock` in front of the docks tabbed with it (or hide it)."""
    dock.setVisible(visible)
    if visible:
        dock.raise_()


def dock_seen(dock: QDockWidget) -> bool:
    """Whether `dock` is on screen: shown and not a tab behind another (Qt calls such a tab visible)."""
    return dock.isVisible() and not dock.visibleRegion().isEmpty()


def toggle_dock(dock: QDockWidget) -> None:
    """Hide `dock` where it is seen, else bring it to the front."""
    show_dock(dock, not dock_seen(dock))
