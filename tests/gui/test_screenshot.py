"""The main window after a run, saved as a PNG: under Xvfb (real X11 rendering) when `xvfb-run` exists,
else with the offscreen platform. The picture must show the dark window with the slide and three panels."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

pytestmark = pytest.mark.gui

SCRIPT = Path(__file__).with_name("screenshot.py")
SIZE = (1400, 900)


def check_screenshot(path: Path) -> None:
    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    assert image is not None, f"{path} is not a readable PNG"
    assert image.shape[1] >= SIZE[0] * 0.9 and image.shape[0] >= SIZE[1] * 0.9
    assert np.median(image) < 90, "the dark theme is not applied"
    assert image.std() > 10, "the window is blank"
    # The bottom third holds the result panels: after a run they show colours (heatmap, masks), not just grey.
    bottom = image[2 * image.shape[0] // 3 :]
    saturation = cv2.cvtColor(bottom, cv2.COLOR_BGR2HSV)[..., 1]
    assert (saturation > 80).mean() > 0.01, "the result panels show no result"


@pytest.mark.skipif(shutil.which("xvfb-run") is None, reason="xvfb-run not installed (the offscreen test runs)")
def test_screenshot_under_xvfb(demo_dataset, tiny_model_project, tmp_path):
    out = tmp_path / "window.png"
    env = dict(os.environ, QT_QPA_PLATFORM="xcb")
    command = ["xvfb-run", "-a", "-s", "-screen 0 1920x1200x24", sys.executable, str(SCRIPT), str(demo_dataset),
               str(out), "--pipeline", str(tiny_model_project.pipeline), "--size", f"{SIZE[0]}x{SIZE[1]}",
               "--settings-dir", str(tmp_path / "settings")]
    done = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0 and out.is_file(), f"exit {done.returncode}: {done.stderr[-2000:]}"
    check_screenshot(out)


#: A laptop's screen and a desktop's, and the first window a 1280x800 screen gets: 92 % of its width and the
#: window's least height (a new user's measured 1177 x 773).
SIZES = [(1280, 800), (1920, 1080), (1177, 774)]


@pytest.mark.parametrize("size", SIZES)
def test_the_window_fits_the_screen_and_nothing_in_it_is_cut(qapp, demo_dataset, tiny_model_project, tmp_path, size):
    """On a laptop screen and a desktop one: the window fits, no widget is cut off by its parent, no text is
    cut off by its widget (a label, button, combo box, panel title, table column or cell, or status bar message:
    cut only with "…" and whole on hover), after a run, with unsaved edits (the row's "done · unsaved", shown
    whole) and after the ROI moved with the brush picked (the dimmed "ROI changed" result, the brush's note, a
    hover readout), and the result panels (the images, not their controls) keep 30 % of the height."""
    from .screenshot import capture

    seen: dict = {}
    capture(demo_dataset, tmp_path / "shot.png", tiny_model_project.pipeline, size=size, measure=seen)
    assert seen["minimum_width"] <= 1280 and seen["window_width"] <= size[0] and seen["window_height"] <= size[1]
    assert seen["clipped"] == []
    assert seen["roi_fields_shown"]  # x0 y0 x1 y1 in the bar, none behind its » button, in the 1177 px window too
    assert seen["clipped_texts"] == []
    assert "done · unsaved" in seen["statuses"] and "done · unsaved" not in seen["cut_cells"]
    assert seen["panels_height"] >= 0.30 * seen["window_height"], seen
    # Each tabbed dock raised in turn (Defects, Profile, Timing, ...): nothing cut there either (a column title
    # cut only with "…"), and every dock was looked at.
    assert {"Defects", "Profile", "Timing", "Reliability", "Metrics", "Error regions", "Messages"} <= set(seen["docks"])
    assert {title: texts for title, texts in seen["docks"].items() if texts} == {}


def test_screenshot_offscreen(qapp, demo_dataset, tiny_model_project, tmp_path):
    from .screenshot import capture

    out = capture(demo_dataset, tmp_path / "window.png", tiny_model_project.pipeline, size=SIZE)
    check_screenshot(out)
