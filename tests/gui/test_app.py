"""`segscope` with no subcommand: the demo dataset is generated once into the per-user folder and opened."""

from __future__ import annotations

import errno
import os
import signal
import threading
from functools import partial

import numpy as np
import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from segscope.core.dataset import demo
from segscope.core.dataset.demo import ensure_demo_dataset
from segscope.core.errors import SegScopeError
from segscope.gui import app as app_module
from segscope.gui.shell.main_window import MainWindow

pytestmark = pytest.mark.gui


def test_demo_dataset_is_generated_once(tmp_path):
    target = tmp_path / "data" / "demo"
    assert ensure_demo_dataset(target, count=1) == target
    image = target / "001" / "image.png"
    assert image.is_file() and (target / "001" / "mask.png").is_file()
    assert [p.name for p in target.parent.iterdir()] == ["demo"]  # no staging folder left behind
    stamp = image.stat().st_mtime_ns
    ensure_demo_dataset(target, count=1)
    assert image.stat().st_mtime_ns == stamp


def test_a_demo_folder_that_cannot_be_written_is_said_in_one_line(tmp_path, monkeypatch):
    (tmp_path / "data").write_text("a file where the data folder should be")
    with pytest.raises(SegScopeError, match=r"data: cannot write here"):
        ensure_demo_dataset(tmp_path / "data" / "demo", count=1)

    def full_disk(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(demo, "generate_demo_dataset", full_disk)
    with pytest.raises(SegScopeError, match=r"demo: cannot write the demo dataset here .*open a dataset folder"):
        ensure_demo_dataset(tmp_path / "demo", count=1)
    assert list(tmp_path.iterdir()) == [tmp_path / "data"]  # no half-made folder left


def test_main_opens_the_demo_dataset(qapp, tmp_path, monkeypatch):
    monkeypatch.setattr(app_module, "ensure_demo_dataset", partial(ensure_demo_dataset, count=1))
    monkeypatch.setattr(app_module, "demo_dir", lambda: tmp_path / "demo")
    seen = {}

    def check() -> None:
        windows = [w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow) and w.isVisible()]
        if windows and windows[0].dataset is not None and windows[0].slide_ready():
            seen["root"] = windows[0].dataset.root
            seen["style"] = qapp.style().name()
            windows[0].close()
        else:
            QTimer.singleShot(50, check)

    QTimer.singleShot(0, check)
    assert app_module.main([]) == 0
    assert seen["root"] == (tmp_path / "demo").resolve()
    assert seen["style"].lower() == "fusion"


def test_ctrl_c_in_the_terminal_closes_the_window(qapp, tmp_path, monkeypatch, write_png):
    """SIGINT sent while Qt's loop waits (as a terminal's Ctrl+C): the window closes, main returns 130, and the
    handler before it is back; the KeyboardInterrupt came out of a slot as a traceback before, the window open."""
    write_png(tmp_path / "d" / "a" / "image.png", np.full((40, 60, 3), 200, np.uint8))
    before = signal.getsignal(signal.SIGINT)
    seen = {}

    def ready() -> None:
        windows = [w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow) and w.isVisible()]
        if windows and windows[0].dataset is not None:
            seen["window"] = windows[0]
            threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT)).start()  # (from outside Qt's loop)
            QTimer.singleShot(10_000, windows[0].close)  # (not closed by then: the test fails, it does not hang)
        else:
            QTimer.singleShot(50, ready)

    QTimer.singleShot(0, ready)
    assert app_module.main([str(tmp_path / "d")]) == 130
    assert not seen["window"].isVisible()
    assert signal.getsignal(signal.SIGINT) is before
