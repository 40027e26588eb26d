"""The main window's dock layout: the docks' places, a first size that fits the screen, a protected share
for the results, View > Reset layout, and the layout remembered between runs.

The results dock keeps at least `MIN_RESULTS_SHARE` of the window's height, and the share the user gave it
by dragging the splitter follows the window when it is resized (Qt alone gives all new height to the slide).
"""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QEvent, QObject, QSize, Qt, QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QDockWidget, QMainWindow, QTabBar

from ...core.session.session import Session
from ..runtime import settings

#: The window's first size on a large screen, and the part of a smaller screen it takes at most.
PREFERRED_SIZE = QSize(1600, 1000)
SCREEN_SHARE = 0.92
#: The results' share of the window height: the default, and the least a resize leaves them.
DEFAULT_RESULTS_SHARE = 0.42
MIN_RESULTS_SHARE = 0.35  # the dock, so its images (without the controls above them) keep 30 %
#: Side docks' default widths as shares of the window width.
DATASET_SHARE, RIGHT_SHARE = 0.25, 0.27


def first_size() -> QSize:
    """PREFERRED_SIZE, shrunk to fit the primary screen's available area."""
    screen = QGuiApplication.primaryScreen()
    if screen is None:
        return PREFERRED_SIZE
    area = screen.availableGeometry()
    return QSize(min(PREFERRED_SIZE.width(), int(area.width() * SCREEN_SHARE)),
                 min(PREFERRED_SIZE.height(), int(area.height() * SCREEN_SHARE)))


def set_corners(window: QMainWindow) -> None:
    """Default layout: dataset left, results under the slide and the dataset, and the inspection column
    (metrics, review, messages, timing) on the right over the whole height, so its tables never squeeze
    the results."""
    window.setDockNestingEnabled(True)
    window.setCorner(Qt.Corner.BottomLeftCorner, Qt.DockWidgetArea.BottomDockWidgetArea)
    window.setCorner(Qt.Corner.BottomRightCorner, Qt.DockWidgetArea.RightDockWidgetArea)


def restore_layout(window: QMainWindow) -> bool:
    """The user's last window geometry and dock layout; False when there is none (a first start)."""
    s = settings.settings()
    geometry, state = s.value("window/geometry"), s.value("window/state")
    if geometry is not None:
        window.restoreGeometry(geometry)
    return state is not None and window.restoreState(state)


def save_layout(window: QMainWindow) -> None:
    s = settings.settings()
    s.setValue("window/geometry", window.saveGeometry())
    s.setValue("window/state", window.saveState())


def hide_stray_tab_bars(window: QMainWindow) -> None:
    """Hide dock tab bars Qt left behind after a relayout (seen as a second "Messages | Timing" bar drawn
    over the results, or "Timing ning"): a tab bar in use sits right under the shown dock of its group and
    holds that group's tabs, all of them."""
    docks = {dock.windowTitle(): dock for dock in window.findChildren(QDockWidget)}
    for bar in window.findChildren(QTabBar):
        if bar.parent() is not window or not bar.isVisible():
            continue
        names = {bar.tabText(i) for i in range(bar.count())}
        group = [docks[name] for name in names if name in docks]
        if not any(_above(dock, bar) and names == {dock.windowTitle(), *(d.windowTitle() for d in
                                                                         window.tabifiedDockWidgets(dock))}
                   for dock in group if dock.isVisible() and not dock.isFloating()):
            bar.hide()  # an old bar of a smaller group (Qt keeps it) lies under the one in use


def _above(dock: QDockWidget, bar: QTabBar) -> bool:
    d, b = dock.geometry(), bar.geometry()
    return abs(d.bottom() + 1 - b.top()) <= 3 and d.left() < b.right() and b.left() < d.right()


class DockLayout(QObject):
    """Keeps `results` at its share of `window`'s height; `reset()` restores the default arrangement, the `right`
    docks in front of the docks tabbed with them (on a first start too)."""

    def __init__(self, window: QMainWindow, results: QDockWidget, left: QDockWidget,
                 right: list[QDockWidget]) -> None:
        super().__init__(window)
        self.window, self.results, self.left, self.right = window, results, left, right
        self.share = DEFAULT_RESULTS_SHARE
        self._default_state = QByteArray()
        self._window_height = 0
        self._applying = False
        self.size_on_show = True  # the default sizes once the window is first shown (Qt ignores them before)
        self._timer = QTimer(self, singleShot=True, interval=0)
        self._timer.timeout.connect(self.apply)
        window.installEventFilter(self)
        results.installEventFilter(self)

    def remember_default(self) -> None:
        """Call once the docks are placed, before a saved layout is restored."""
        self._default_state = self.window.saveState()

    def reset(self, restore: bool = True) -> None:
        """The default arrangement (unless `restore` is False: the docks are still where they started) and
        the default sizes (View > Reset layout)."""
        if restore and not self._default_state.isEmpty():
            self.window.restoreState(self._default_state)
        for dock in (self.results, self.left, *self.right):
            dock.show()
        for dock in self.right:  # what a new user needs first (Metrics, Messages) in front of its tab group
            dock.raise_()
        self.share = DEFAULT_RESULTS_SHARE
        width = self.window.width()
        self.window.resizeDocks([self.left, self.right[0]], [int(width * DATASET_SHARE), int(width * RIGHT_SHARE)],
                                Qt.Orientation.Horizontal)
        self.apply()

    def apply(self) -> None:
        """Give the results their share of the height (when docked at the bottom and shown)."""
        window = self.window
        if (self.results.isFloating() or not self.results.isVisible()
                or window.dockWidgetArea(self.results) != Qt.DockWidgetArea.BottomDockWidgetArea):
            hide_stray_tab_bars(window)
            return
        self._applying = True
        try:
            window.resizeDocks([self.results], [int(window.height() * self.share)], Qt.Orientation.Vertical)
        finally:
            self._applying = False
        self._window_height = window.height()
        QTimer.singleShot(0, window, lambda: hide_stray_tab_bars(window))

    def results_share(self) -> float:
        """The results dock's current on-screen height as a share of the window's."""
        return self.results.height() / max(self.window.height(), 1)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Show and watched is self.window and self.size_on_show:
            self.size_on_show = False
            QTimer.singleShot(0, self, lambda: self.reset(restore=False))
        if event.type() == QEvent.Type.Resize:
            if watched is self.window:
                self._timer.start()  # after Qt has laid the docks out for the new size
            elif not self._applying and self.window.height() == self._window_height and self.results.isVisible():
                # the window kept its height: the user dragged the splitter; remember their share
                self.share = max(self.results_share(), MIN_RESULTS_SHARE)
        return False


def follow_title(window: QMainWindow, session: Session) -> None:
    """The window's title names the open dataset ("[*]": the mark of unsaved mask edits)."""
    session.events.dataset.connect(lambda dataset, _old: window.setWindowTitle(
        f"SegScope — {dataset.root}[*]" if dataset is not None else "SegScope[*]"))
