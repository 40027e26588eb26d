"""Issue 40's stale results in the window: an image replaced after its run is said by its row and the panels on
the next look (the window's focus), never shown as the new image's answer; a rerun answers again."""

from __future__ import annotations

import cv2
import pytest
from PySide6.QtCore import QEvent

from .test_session_views import run_current

pytestmark = pytest.mark.gui


def test_stale_results_image_replaced_after_its_run_row_and_panels_say_so(qtbot, window, demo_dataset, monkeypatch):
    run_current(qtbot, window)
    row = window.dataset_panel.model.row("001")
    assert row.status == "done" and not window.panels.stale
    image = demo_dataset / "001" / "image.png"
    cv2.imwrite(str(image), cv2.flip(cv2.imread(str(image), cv2.IMREAD_COLOR), 1))  # another program's image
    monkeypatch.setattr(window, "isActiveWindow", lambda: True)
    window.changeEvent(QEvent(QEvent.Type.ActivationChange))  # the window gets the focus back
    qtbot.waitUntil(lambda: window.panels.stale == "image changed")
    row = window.dataset_panel.model.row("001")
    assert row.status == "image changed"
    assert row.note == "the image file changed since this run: these numbers are of the old image — run again"
    run_current(qtbot, window)
    qtbot.waitUntil(lambda: window.dataset_panel.model.row("001").status == "done" and not window.panels.stale)
