"""The viewer reads truth masks by the same rule as `eval` (core/dataset/masks.py): a mask in no convention for the
model is refused as soon as the dataset and the model are open, in the line `eval` refuses it with, and is that
image's error while the viewer goes on with the other images; a card's declared truth values apply as in `eval`."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

from helpers import run_cli

pytestmark = pytest.mark.gui


@pytest.fixture
def misread(demo_dataset):
    """Image 002's truth rewritten as 0/1/2 (two foreground values) for the binary model."""
    path = demo_dataset / "002" / "mask.png"
    mask = (cv2.imread(str(path), cv2.IMREAD_GRAYSCALE) > 0).astype(np.uint8)
    mask[:4, :4] = 2
    cv2.imwrite(str(path), mask)
    return path


def test_a_refused_truth_is_the_images_error_and_the_viewer_goes_on(qtbot, misread, window):
    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000):
        assert window.commands.run_all()
    errors = [m.text for m in window.messages.errors()]
    assert any("values 0, 1, 2 are not a mask convention for this 2-class model" in e and "002" in e
               for e in errors), errors
    assert window.session.has_metrics("001") and window.session.has_metrics("003")
    assert not window.session.has_metrics("002") and window.isVisible()



def test_a_refused_truth_is_said_on_open_in_evals_own_line(qtbot, capsys, misread, window, tiny_model_project):
    code, _ = run_cli("eval", "--dataset", misread.parent.parent, "--pipeline", tiny_model_project.pipeline)
    cli_line = capsys.readouterr().err.strip().removeprefix("segscope: error: ")
    assert code == 2 and cli_line.startswith(f"{misread}: values 0, 1, 2 are not a mask convention")
    qtbot.waitUntil(lambda: bool(window.messages.errors()), timeout=20000)  # no run asked for
    assert [m.text for m in window.messages.errors()] == [cli_line]
    assert window.session.outcome("002").text == cli_line  # its row says why, before any run
    assert window.session.outcome("001") is None and window.session.outcome("003") is None


def test_a_cards_truth_values_are_read_as_eval_reads_them(qtbot, demo_dataset, tiny_model_project):
    """Every mask rewritten as 7 (background) / 200 (defect), the card declaring those values: eval and the viewer
    score the same Dice (the viewer once refused these masks, having no card rule of its own)."""
    for path in demo_dataset.glob("*/mask.png"):
        stored = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)
        cv2.imwrite(str(path), np.where(stored > 0, 200, 7).astype(np.uint8))
    card = json.loads(tiny_model_project.card.read_text())
    tiny_model_project.card.write_text(json.dumps({**card, "truth_values": {"7": 0, "200": 1}}))
    code, text = run_cli("eval", "--dataset", demo_dataset, "--pipeline", tiny_model_project.pipeline, "--json")
    assert code == 0
    expected = {row["id"]: row["foreground_dice"] for row in json.loads(text)["images"]}

    from segscope.core.backend_choice import BackendChoice
    from segscope.gui.shell.main_window import MainWindow

    win = MainWindow()
    qtbot.addWidget(win)
    win.show()
    win.commands.open_backend(BackendChoice(pipeline=tiny_model_project.pipeline))
    assert win.commands.open_dataset(demo_dataset)
    qtbot.waitUntil(lambda: win.capabilities is not None and win.slide_ready(), timeout=30000)
    with qtbot.waitSignal(win.controller.batchFinished, timeout=60000):
        assert win.commands.run_all()
    qtbot.waitUntil(lambda: not win.session.due(), timeout=20000)
    assert not win.messages.errors()
    got = {item_id: win.session.metrics(item_id).foreground_dice for item_id in expected}
    assert got == pytest.approx(expected, abs=1e-9)
    win.close()


def test_an_image_whose_truth_is_refused_still_shows(qtbot, misread, window):
    qtbot.waitUntil(lambda: bool(window.messages.errors()), timeout=20000)
    said = [m.text for m in window.messages.errors()]
    window.dataset_panel.select_item("002")
    qtbot.waitUntil(lambda: window.slide_ready() and window.session.current.id == "002", timeout=20000)
    assert window.session.mask is None  # nothing drawn as its truth: not an empty one either
    assert window.dataset_panel.model.row("002").status == "error"
    # The panels say why it failed and what to do, not "Not run yet" (and Run is there to press once fixed)
    hint = window.display.hint()
    assert hint.startswith(f"002 failed: {said[0]}") and "run it again" in hint and "Not run yet" not in hint
    qtbot.waitUntil(lambda: window.main_actions.run_action.isEnabled(), timeout=20000)
    assert [m.text for m in window.messages.errors()] == said  # said once, at open
    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000):
        assert window.commands.run_current()
    assert not window.session.has_metrics("002")  # never scored against an empty truth
    assert window.session.outcome("002").text.endswith(said[0])


def test_at_open_every_truth_problem_is_flagged_as_eval_names_it(qtbot, capsys, demo_dataset, tiny_model_project):
    """A text file named mask.png and a mask of another size were flagged only on click: now every refused truth
    is an error in Messages and its row as soon as the dataset and the model are open, in eval's own lines."""
    (demo_dataset / "001" / "mask.png").write_text("not an image")
    cv2.imwrite(str(demo_dataset / "003" / "mask.png"), np.zeros((40, 64), np.uint8))
    code, _ = run_cli("eval", "--dataset", demo_dataset, "--pipeline", tiny_model_project.pipeline)
    cli_lines = [line.removeprefix("segscope: error: ") for line in capsys.readouterr().err.splitlines()]
    assert code == 2 and len(cli_lines) == 3  # each refused mask, then the count

    from segscope.core.backend_choice import BackendChoice
    from segscope.gui.shell.main_window import MainWindow

    win = MainWindow()
    qtbot.addWidget(win)
    win.show()
    win.commands.open_backend(BackendChoice(pipeline=tiny_model_project.pipeline))
    assert win.commands.open_dataset(demo_dataset)
    qtbot.waitUntil(lambda: len(win.messages.errors()) >= 2, timeout=30000)  # no run, no click
    assert sorted(m.text for m in win.messages.errors()) == sorted(cli_lines[:2])
    assert win.session.outcome("001").text == cli_lines[0] and win.session.outcome("003").text == cli_lines[1]
    win.close()
