"""The viewer's scorer at dataset scale: when every image's numbers are due at once (another mask rule, another
model), a few jobs are on the runner at a time, the rows on screen are scored first, and every image ends fresh
with the numbers a scoring of its own gives."""

from __future__ import annotations

import numpy as np
import pytest

from segscope.core.dataset.dataset import Dataset
from segscope.core.evaluate import ImageEvaluation
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi
from segscope.core.session.jobs import run_here
from segscope.core.session.session import Session
from segscope.gui.shell.scoring import IN_FLIGHT, Scorer

W, H = 16, 12
IDS = [f"img{n:02d}" for n in range(12)]


def write_dataset(root, write_png) -> Dataset:
    """Twelve images; image n's mask has n + 1 rows of 4 foreground pixels."""
    for n, item_id in enumerate(IDS):
        mask = np.zeros((H, W), np.uint8)
        mask[: n + 1, :4] = 255
        write_png(root / f"{item_id}.png", np.full((H, W, 3), 128, np.uint8))
        write_png(root / f"{item_id}_mask.png", mask)
    return Dataset.open(root)


def test_everything_due_is_scored_a_few_at_a_time_the_rows_on_screen_first(qtbot, jobs, tmp_path, write_png):
    session = Session(persist=False)
    run_here(session.open_dataset(write_dataset(tmp_path / "d", write_png)))
    scorer = Scorer(session, jobs, first=lambda: ["img09", "img03"])
    submitted, in_flight, live = [], [], set()
    submit = jobs.submit

    def counting(key, work, done, failed):  # type: ignore[no-untyped-def]
        """Count the jobs given to the runner whose answer has not come back yet."""
        submitted.append(key.removeprefix("score:"))
        live.add(key)
        in_flight.append(len(live))

        def answered(handler, *answer):  # type: ignore[no-untyped-def]
            live.discard(key)
            handler(*answer)

        return submit(key, work, lambda value: answered(done, value), lambda *a: answered(failed, *a))

    jobs.submit = counting  # type: ignore[method-assign]
    p1 = np.zeros((H, W), np.float32)
    p1[:6, :4] = 1.0  # every prediction: 6 rows of 4
    result = InferenceResult(np.stack([1 - p1, p1], axis=-1), (p1 > 0.5).astype(np.uint8), Roi(0, 0, W, H), (W, H))
    for item_id in IDS:  # runs scored on no truth version (as while a mask had unsaved edits): all due
        session.add_evaluation(ImageEvaluation(session.dataset.item(item_id), result, None), None)
    assert session.due() == IDS
    scorer.score_due()  # (what its timer does)
    qtbot.waitUntil(lambda: not scorer.busy and not session.due(), timeout=20_000)
    assert submitted[:2] == ["img09", "img03"] and sorted(submitted) == IDS
    assert max(in_flight) <= IN_FLIGHT
    for n, item_id in enumerate(IDS):  # by hand: TP = 4 * min(n + 1, 6), truth 4(n + 1), prediction 24
        tp, truth = 4 * min(n + 1, 6), 4 * (n + 1)
        assert session.is_fresh(item_id)
        assert session.known_metrics(item_id).foreground_dice == pytest.approx(2 * tp / (truth + 24))


def test_the_window_scores_the_rows_on_screen_first(window) -> None:
    """The dataset table names the rows it shows, top to bottom, for the scorer."""
    panel = window.dataset_panel
    assert window.scorer.first == panel.rows_on_screen
    assert panel.rows_on_screen() == panel.visible_order()  # three images: all on screen, in the table's order
    panel.table.resize(panel.table.width(), panel.table.rowHeight(0) + panel.table.horizontalHeader().height() + 2)
    assert panel.rows_on_screen() == panel.visible_order()[:1]
