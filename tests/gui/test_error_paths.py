"""The viewer's error paths: a bug inside a run is one message with its traceback (the path CI's Python 3.9 run
must reach: `traceback.format_exception` takes three arguments there), and a damaged session store never takes
the viewer down."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from segscope.core.backends.base import Backend, Capabilities
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi
from segscope.core.session.store import STORE_DIR_NAME, SessionStore

from .conftest import open_and_wait, open_double

pytestmark = pytest.mark.gui


class BuggyBackend(Backend):
    """A backend with a bug: a plain Python exception, not a SegScopeError."""

    capabilities = Capabilities("buggy", "nowhere", (960, 960), ("background", "defect"))

    def infer(self, image, roi=None):
        return {"probabilities": None}["roi"]  # KeyError: 'roi'

    def close(self) -> None:
        pass


def test_a_bug_in_a_run_is_one_message_with_its_traceback(qtbot, window):
    open_double(qtbot, window, BuggyBackend)
    with qtbot.waitSignal(window.controller.batchFinished, timeout=30000):
        assert window.commands.run_current()
    (error,) = window.messages.errors()
    assert error.text == "001: Internal error: KeyError: 'roi'"
    window.messages.list.setCurrentRow(window.messages.messages.index(error))
    details = window.messages.details.toPlainText()
    assert details.startswith("Traceback (most recent call last):") and "in infer" in details
    assert "KeyError: 'roi'" in details.splitlines()[-1]


def test_a_damaged_session_store_never_takes_the_viewer_down(qtbot, window, demo_dataset, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(demo_dataset, other)
    store = SessionStore(other)
    size = (1200, 900)
    roi = Roi(0, 0, 64, 48)
    p1 = np.zeros((48, 64), np.float32)
    store.save("001", InferenceResult(np.stack([1 - p1, p1], axis=-1), np.zeros((48, 64), np.uint8), roi, size))
    folder = other / STORE_DIR_NAME
    (folder / "truncated.npz").write_bytes((folder / next(iter(os.listdir(folder)))).read_bytes()[:100])
    (folder / "empty.npz").write_bytes(b"")
    os.mkfifo(folder / "fifo.npz")
    (folder / "link.npz").symlink_to(Path(os.devnull))
    open_and_wait(qtbot, window, other)  # listed on a worker: no entry blocks or raises
    qtbot.waitUntil(window.slide_ready, timeout=30000)  # (the jobs over the dataset start once it shows)
    qtbot.waitUntil(lambda: not window.jobs.busy("restore"), timeout=30000)  # restored on a worker
    warnings = [m.text for m in window.messages.messages if m.level == "warning"]
    assert len(warnings) == 4 and all("it is ignored" in text for text in warnings)
    assert window.session.metrics("001") is not None  # the good entry was restored
    # restored as run on its stored ROI, which is not the ROI the viewer now gives 001
    assert window.isVisible() and window.dataset_panel.model.row("001").status == "ROI changed"


def test_an_option_error_names_the_viewer_control_not_the_command_line_flag():
    from segscope.core.errors import SegScopeError
    from segscope.gui.runtime.jobs import describe_error

    error = SegScopeError("must be a positive number, got 0.0", option="--output-scale")
    assert describe_error(error) == ("Output scale: must be a positive number, got 0.0",
                                     "Output scale: must be a positive number, got 0.0\n"
                                     "(on the command line: --output-scale)")
