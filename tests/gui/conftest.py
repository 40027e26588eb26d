"""GUI test setup: Qt runs offscreen, QSettings go to a temporary folder, nothing a window froze outlives its test,
and shared window fixtures.

- `demo_dataset`: three small demo slides (1200 x 900, from `core.dataset.demo`) with a default ROI that fits,
  stored in the dataset's sidecar the way a user's picked ROIs are.
- `window`: the main window on that dataset with the embedded backend on the tiny real ONNX model of
  `tests/conftest.py` (fast, and independent of the trained demo model), ready to run.
- `jobs`: a job runner (gui/runtime/jobs.py) for a widget tested on its own.
- `drag(view, start, end)`: a mouse drag with real mouse events on a view's viewport.
- `open_and_wait(qtbot, window, folder)`: open a dataset folder and wait until its open (listed on a worker) ended.
"""

from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"  # before anything imports Qt

import gc
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, QSettings, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QWidget

from segscope.core.backends.base import Backend
from segscope.core.dataset.demo import defect_region, generate_demo_dataset
from segscope.core.evaluate import ImageEvaluation
from segscope.core.roi import Roi

SLIDE_SIZE = (1200, 900)
#: The default ROI the demo dataset gets: the demo's defect region scaled to the small slides.
DEFAULT_ROI: Roi = defect_region(SLIDE_SIZE)


@pytest.fixture(autouse=True)
def isolated_settings(tmp_path_factory: pytest.TempPathFactory):
    """Every test gets empty QSettings in its own folder (no recent list or layout from the user)."""
    folder = tmp_path_factory.mktemp("qsettings")
    for fmt in (QSettings.Format.NativeFormat, QSettings.Format.IniFormat):
        QSettings.setPath(fmt, QSettings.Scope.UserScope, str(folder))
    yield folder


@pytest.fixture(autouse=True)
def nothing_left_frozen():
    """What a window's freezes kept out of the garbage collector (gui/runtime/collector.py) is collected as usual
    once its test ends: the next test starts as a new process would."""
    yield
    gc.unfreeze()


@pytest.fixture(scope="session")
def demo_dataset_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo") / "dataset"
    generate_demo_dataset(root, count=3, size=SLIDE_SIZE)
    return root


@pytest.fixture
def demo_dataset(demo_dataset_template: Path, tmp_path: Path) -> Path:
    """A fresh copy per test (tests write ROIs into the sidecar)."""
    import shutil

    root = tmp_path / "dataset"
    shutil.copytree(demo_dataset_template, root)
    sidecar = {"version": 1, "default_roi": list(DEFAULT_ROI.as_tuple()), "rois": {}}
    (root / "segscope.json").write_text(json.dumps(sidecar), encoding="utf-8")
    return root


@pytest.fixture
def jobs(qapp):
    """A job runner for widgets tested without a window (a window makes its own); shut down after the test."""
    from segscope.gui.runtime.jobs import Jobs

    runner = Jobs()
    yield runner
    runner.shutdown()


@pytest.fixture
def window(qtbot, demo_dataset: Path, tiny_model_project):
    from segscope.core.backend_choice import BackendChoice
    from segscope.gui.shell.main_window import MainWindow

    win = MainWindow()
    qtbot.addWidget(win)
    win.resize(1400, 900)
    win.show()
    win.commands.open_backend(BackendChoice(pipeline=tiny_model_project.pipeline))
    assert win.commands.open_dataset(demo_dataset)
    qtbot.waitUntil(lambda: win.capabilities is not None and win.slide_ready(), timeout=30000)
    yield win
    win.close()


def send_mouse(widget: QWidget, kind: QEvent.Type, pos: QPoint, buttons: Qt.MouseButton) -> None:
    point = QPointF(pos)
    button = Qt.MouseButton.LeftButton if kind != QEvent.Type.MouseMove else Qt.MouseButton.NoButton
    event = QMouseEvent(kind, point, QPointF(widget.mapToGlobal(pos)), button, buttons,
                        Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, event)


def drag(viewport: QWidget, start: QPoint, end: QPoint, steps: int = 8) -> None:
    """Press at `start`, move in steps (pyqtgraph drops mouse moves closer than one frame), release at `end`."""
    send_mouse(viewport, QEvent.Type.MouseButtonPress, start, Qt.MouseButton.LeftButton)
    for i in range(1, steps + 1):
        QTest.qWait(20)
        send_mouse(viewport, QEvent.Type.MouseMove, start + (end - start) * i / steps, Qt.MouseButton.LeftButton)
    QTest.qWait(20)
    send_mouse(viewport, QEvent.Type.MouseButtonRelease, end, Qt.MouseButton.NoButton)
    QApplication.processEvents()


def open_and_wait(qtbot, win, folder: Path) -> None:
    """Open a dataset folder as the user does: the command returns at once (the folder is listed on a worker);
    wait until its open ended (the dataset shown, or the error said)."""
    from segscope.gui.shell.commands import OPENING

    assert win.commands.open_dataset(folder)
    qtbot.waitUntil(lambda: not win.jobs.busy(OPENING), timeout=30000)


def open_double(qtbot, win, backend: Callable[[], Backend]) -> None:
    """Open a test double as the window's backend (the choice made now: its spec opens the double instead, while
    this waits until it is open)."""
    from segscope.core.session import inference

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(inference, "open_backend", lambda _spec: backend())
        with qtbot.waitSignal(win.controller.backendOpened, timeout=10000):
            win.commands.open_backend(win.backend.choice)


class RunsSeen:
    """The runs a window's session takes from now on (restored ones aside), in order: `added` as announced
    (`ResultAdded`), `evaluations()` as the image, the run's result and the metrics the session holds for it."""

    def __init__(self, win) -> None:
        self.session = win.session
        self.added: list = []
        win.session.events.result_added.connect(lambda added: None if added.restored else self.added.append(added))

    def evaluations(self) -> list[ImageEvaluation]:
        session = self.session
        return [ImageEvaluation(session.dataset.item(a.item_id), a.record.result, session.known_metrics(a.item_id))
                for a in self.added]
