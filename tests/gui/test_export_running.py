"""File > Export never stays "running": a failing write and a cancelled export both end it (the Export action is
back, Cancel export gone), and the export folder is left as it was (old or new, never half)."""

from __future__ import annotations

import pytest

from segscope.gui.dialogs.export_dialog import ExportChoices

pytestmark = pytest.mark.gui

IDS = ("001", "002", "003")


def _choices(folder, overwrite=False):
    return ExportChoices(kinds=("mask", "heatmap"), metrics=True, folder=folder, scope="all", item_ids=IDS,
                         overwrite=overwrite)


def _contents(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() if p.is_file() else None for p in folder.rglob("*")}


def _export(qtbot, window, choices, cancel=False, meanwhile=lambda: None):
    with qtbot.waitSignal(window.exporter.finished, timeout=60000) as exported:
        assert window.commands.write_export(choices)
        meanwhile()
        assert window.session.exporting and window.main_actions.cancel_export_action.isEnabled()
        assert not window.main_actions.export_action.isEnabled()
        if cancel:
            window.main_actions.cancel_export_action.trigger()  # as the user does (File > Cancel export)
    return exported.args[0]


def _ended(window):
    assert not window.session.exporting
    assert window.main_actions.export_action.isEnabled()
    assert not window.main_actions.cancel_export_action.isEnabled()


@pytest.fixture
def ran(qtbot, window):
    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000):
        assert window.commands.run_all()
    return window


def test_a_failing_write_ends_the_export_and_leaves_the_folder(qtbot, ran, tmp_path):
    """003's saved correction is exported too, and deleted once the export started: copying it fails on the
    export's worker (or planning it there, should the worker be quicker)."""
    correction = ran.session.dataset.root / "003" / "mask_corrected.png"
    correction.write_bytes((ran.session.dataset.root / "003" / "mask.png").read_bytes())
    out = tmp_path / "export"
    out.mkdir()
    (out / "mine.txt").write_text("the user's")
    before = _contents(out)
    choices = ExportChoices(kinds=("mask", "corrected"), metrics=True, folder=out, scope="all", item_ids=IDS,
                            overwrite=True)
    assert _export(qtbot, ran, choices, meanwhile=correction.unlink) == []
    _ended(ran)
    assert _contents(out) == before
    errors = [m.text for m in ran.messages.errors()]
    assert len(errors) == 1 and errors[0].startswith("Export: ") and str(correction) in errors[0]
    assert errors[0].endswith(f"({out} was left as it was)")
    assert _export(qtbot, ran, _choices(tmp_path / "elsewhere"))  # the next export runs


def test_a_cancelled_export_publishes_nothing_and_keeps_the_earlier_export(qtbot, ran, tmp_path):
    out = tmp_path / "export"
    written = _export(qtbot, ran, _choices(out))
    assert {p.name for p in written} >= {"001_mask.png", "003_heatmap.png", "metrics.csv"}
    before = _contents(out)
    assert _export(qtbot, ran, _choices(out, overwrite=True), cancel=True) == []
    _ended(ran)
    assert _contents(out) == before
    assert any(m.text == f"Export cancelled: {out} was left as it was" for m in ran.messages.messages)
    assert not ran.messages.errors()
