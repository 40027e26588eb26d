"""The viewer at dataset scale (issue 39), as behaviour: views that read many images draw at a bounded rate and
end on the final numbers (`gui/runtime/coalesce.py`), and the dataset table (gui/docks/dataset_panel.py) sorts,
filters and derives its rows itself: the order it shows is always what a plain Python sort and filter of the rows give,
rows are derived when first read, and a sort over many rows never read is prepared a slice at a time."""

from __future__ import annotations

import math
import random
from collections import Counter
from pathlib import Path

import cv2
import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from PySide6.QtCore import Qt

from segscope.core.evaluate import ImageEvaluation
from segscope.core.metrics import catalogue
from segscope.core.metrics.scores import ImageMetrics
from segscope.core.result import InferenceResult
from segscope.core.session.views import ItemView
from segscope.gui.docks.dataset_panel import SLICE_ROWS, DatasetPanel, ImageTableModel
from segscope.gui.docks.metrics_panel import BINS
from segscope.gui.runtime.coalesce import Coalescer

pytestmark = pytest.mark.gui

DICE_COLUMN = 2  # Image, Soft Dice, Dice (the default ranking: foreground Dice), IoU, Truth, Status


def metrics(dice: float) -> ImageMetrics:
    """Metrics whose foreground Dice is `dice` (NaN: no foreground anywhere, n/a)."""
    return ImageMetrics(0.5 + dice / 4 if dice == dice else 0.5, 0.4, (1.0, dice), (1.0, dice), dice, dice / 2,
                        1.0, 1.0)


def view(item_id: str, dice: float | None, status: str = "done") -> ItemView:
    """The row of an image: run with foreground Dice `dice`, or not run (None)."""
    if dice is None:
        return ItemView(item_id, "", None, True, "", "mask.png", "original")
    return ItemView(item_id, status, metrics(dice), True, "", "mask.png", "original")


def worst_key(dice: float | None) -> float:
    """Worst first by Dice, by hand: lowest first, n/a (NaN) and not run (None) last."""
    return math.inf if dice is None or math.isnan(dice) else dice


def test_a_burst_of_requests_draws_once_after_it_and_a_flush_draws_at_once(qtbot):
    draws: list[int] = []
    refresh = Coalescer(lambda: draws.append(1))
    for _ in range(1000):
        refresh.request()
    assert draws == [] and refresh.pending  # never inside the requesting call
    qtbot.waitUntil(lambda: not refresh.pending)
    assert draws == [1]
    for _ in range(100):  # right after a draw: the next one waits for the interval's end, one for all of them
        refresh.request()
    qtbot.waitUntil(lambda: not refresh.pending)
    assert draws == [1, 1]
    refresh.request()
    refresh.flush()
    assert draws == [1, 1, 1] and not refresh.pending


def test_worst_first_over_many_rows_is_a_plain_python_sort(qtbot):
    rng = random.Random(0)
    ids = [f"img{n:05d}" for n in range(5000)]
    dice: dict[str, float | None] = {}
    for item_id in ids:
        pick = rng.random()
        dice[item_id] = None if pick < 0.1 else math.nan if pick < 0.15 else round(rng.random(), 2)  # ties too
    panel = DatasetPanel()
    qtbot.addWidget(panel)
    panel.set_dataset(Path("/data"), ids)
    panel.model.show(*(view(i, d) for i, d in dice.items() if d is not None))
    panel.sort_worst_first(catalogue.lookup("foreground_dice"))
    assert panel.visible_order() == sorted(ids, key=lambda i: worst_key(dice[i]))
    assert panel.current_item() == panel.visible_order()[0]

    for item_id in rng.sample(ids, 500):  # results arriving while the table is sorted: it follows them
        dice[item_id] = round(rng.random(), 2)
    panel.model.show(*(view(i, d) for i, d in dice.items() if d is not None))
    order = sorted(ids, key=lambda i: worst_key(dice[i]))
    assert panel.visible_order() == order
    assert all(panel.model.row_of(item_id) == row for row, item_id in enumerate(order))

    panel.table.sortByColumn(DICE_COLUMN, Qt.SortOrder.DescendingOrder)  # a header click: best first
    assert panel.visible_order() == sorted(ids, key=lambda i: worst_key(dice[i]), reverse=True)
    panel.table.sortByColumn(0, Qt.SortOrder.AscendingOrder)
    assert panel.visible_order() == sorted(ids)


def test_rows_are_derived_when_read_and_a_sort_over_many_prepares_them_in_slices(qtbot):
    rng = random.Random(1)
    ids = [f"img{n:05d}" for n in range(2 * SLICE_ROWS + 123)]
    dice = {item_id: rng.random() for item_id in ids}
    calls: list[str] = []

    def view_of(item_id: str) -> ItemView:
        calls.append(item_id)
        return view(item_id, dice[item_id])

    model = ImageTableModel()
    model.set_items(ids, view_of)
    assert calls == []  # nothing derived on open
    assert model.index(0, 0).data() == ids[0] and calls == []  # the id needs no row
    assert model.index(5, DICE_COLUMN).data() == f"{dice[ids[5]]:.4f}" and calls == [ids[5]]

    model.sort(DICE_COLUMN, Qt.SortOrder.AscendingOrder)
    assert model.arranging and model.shown_ids() == ids  # prepared between events, the dataset order meanwhile
    arranged: list[list[str]] = []
    model.when_arranged(lambda: arranged.append(model.shown_ids()))
    qtbot.waitUntil(lambda: not model.arranging)
    expected = sorted(ids, key=dice.__getitem__)
    assert arranged == [expected] and model.shown_ids() == expected
    assert Counter(calls) == Counter(ids)  # every row derived once

    # A change is read at once by whoever asks (the row is derived again), and moves the row at the redraw.
    worst = expected[-1]
    dice[worst] = -1.0
    model.changed(worst)
    assert model.row(worst).metrics.foreground_dice == -1.0
    assert model.shown_ids() == expected  # not moved before the redraw
    model.show_changed()
    assert model.shown_ids() == [worst, *expected[:-1]]
    assert Counter(calls)[worst] == 2  # derived again once, not per read


class TableMachine(RuleBasedStateMachine):
    """Random results, sorts and filters on a small table: after every redraw the table shows what a plain Python
    sort and filter of its rows give; between a change and its redraw every row read is already the new one."""

    IDS = [f"i{n:02d}" for n in range(30)]

    @initialize()
    def start(self) -> None:
        self.dice: dict[str, float | None] = dict.fromkeys(self.IDS)
        self.status: dict[str, str] = dict.fromkeys(self.IDS, "")
        self.model = ImageTableModel()
        self.model.set_items(self.IDS, lambda i: view(i, self.dice[i], self.status[i] or "done"))
        self.sort = (0, False)
        self.below: float | None = None
        self.pending = False

    @rule(item=st.sampled_from(IDS), dice=st.sampled_from([None, math.nan, 0.0, 0.25, 0.5, 0.5, 1.0]),
          status=st.sampled_from(["done", "ROI changed", "error"]))
    def result(self, item: str, dice: float | None, status: str) -> None:
        self.dice[item], self.status[item] = dice, status if dice is not None else ""
        self.model.changed(item)
        self.pending = True

    @rule()
    def redraw(self) -> None:
        self.model.show_changed()
        self.pending = False

    @rule(column=st.sampled_from(["id", "dice", "status"]), descending=st.booleans())
    def sort_by(self, column: str, descending: bool) -> None:
        index = {"id": 0, "dice": DICE_COLUMN, "status": self.model.status_column}[column]
        self.model.sort(index, Qt.SortOrder.DescendingOrder if descending else Qt.SortOrder.AscendingOrder)
        self.sort = (index, descending)

    @rule(below=st.sampled_from([None, 0.3, 0.6]))
    def filter_below(self, below: float | None) -> None:
        self.below = below
        self.model.set_filter(None if below is None else lambda row: row.metrics is not None
                              and row.metrics.foreground_dice < below)

    @invariant()
    def rows_read_are_current(self) -> None:
        for item in self.IDS:
            row, dice = self.model.row(item), self.dice[item]
            shown = row.metrics.foreground_dice if row.metrics is not None else None
            assert shown == dice or (shown is not None and dice is not None and math.isnan(shown) and math.isnan(dice))
            assert row.status == self.status[item]

    @invariant()
    def the_order_is_a_plain_sort_and_filter(self) -> None:
        if self.pending:  # (changes not redrawn yet move at the next redraw)
            return
        column, descending = self.sort
        key = {0: lambda i: i, DICE_COLUMN: lambda i: worst_key(self.dice[i]),
               self.model.status_column: self.status.__getitem__}[column]
        below = self.below
        shown = [i for i in sorted(self.IDS, key=key, reverse=descending)
                 if below is None or (self.dice[i] is not None and self.dice[i] < below)]  # (NaN < x is False)
        assert self.model.shown_ids() == shown
        assert self.model.rowCount() == len(shown)
        assert [self.model.row_of(i) for i in shown] == list(range(len(shown)))


def test_the_table_shows_a_plain_sort_and_filter_after_any_sequence(qapp):
    machine = settings(max_examples=60, stateful_step_count=30, deadline=None, database=None, derandomize=True,
                       suppress_health_check=[HealthCheck.too_slow])(TableMachine)
    machine.TestCase().runTest()


def test_many_results_arriving_end_on_the_final_numbers(qtbot, tmp_path, monkeypatch):
    """A burst of results (as a Run all hands them over, faster than any redraw): nothing is drawn during it, the
    means and histogram once after it, and they are those of every result, as a fresh summary gives them."""
    window, ids, feed = window_fed_by_hand(qtbot, tmp_path, 120)
    qtbot.waitUntil(lambda: idle(window))
    drawn = histogram_draws(window, monkeypatch)
    rng = np.random.default_rng(2)
    fed = {item_id: metrics(math.nan if n % 17 == 0 else float(rng.random())) for n, item_id in enumerate(ids)}
    feed(fed)
    assert drawn == []  # the whole burst in one go: no redraw inside it
    qtbot.waitUntil(lambda: not window.redraws_due() and not window.jobs.pending)
    assert drawn == [len(ids)]  # one redraw after it, of every image

    fresh = catalogue.means(list(fed.values()))
    assert window.status_labels.means_label.text() == f"mean {catalogue.brief_means(fresh)}"
    dice = np.array([m.foreground_dice for m in fed.values()])
    finite = dice[np.isfinite(dice)]
    counts, edges = window.metrics_panel.histogram()
    expected_counts, expected_edges = np.histogram(finite, bins=BINS, range=(0.0, 1.0))
    np.testing.assert_array_equal(counts, expected_counts)
    np.testing.assert_allclose(edges, expected_edges)
    assert counts.sum() == len(ids) - np.isnan(dice).sum()

    model = window.dataset_panel.model
    assert {item_id: model.row(item_id).metrics for item_id in ids} == fed
    assert all(model.row(item_id).status == "done" for item_id in ids)
    window.main_actions.worst_action.trigger()
    assert window.dataset_panel.visible_order() == sorted(ids, key=lambda i: worst_key(fed[i].foreground_dice))


def window_fed_by_hand(qtbot, tmp_path: Path, count: int):
    """A window on `count` small images (`imgNN`), and `feed(values)`: each image's result with the foreground
    Dice given ({id: dice}, or its metrics whole), handed to the session as a run hands them."""
    from segscope.gui.shell.main_window import MainWindow

    from .conftest import open_and_wait

    folder = tmp_path / "data"
    folder.mkdir()
    rng = np.random.default_rng(3)
    ids = [f"img{n:02d}" for n in range(count)]
    for item_id in ids:
        cv2.imwrite(str(folder / f"{item_id}.png"), rng.integers(0, 255, (24, 32, 3), dtype=np.uint8))
        cv2.imwrite(str(folder / f"{item_id}_mask.png"), np.where(rng.random((24, 32)) > 0.5, 255, 0).astype(np.uint8))
    window = MainWindow()
    qtbot.addWidget(window)
    window.show()
    open_and_wait(qtbot, window, folder)
    session = window.session

    def feed(values: dict[str, float | ImageMetrics]) -> None:
        for item_id, dice in values.items():
            result = InferenceResult(np.full((4, 4, 2), 0.5, np.float32), np.zeros((4, 4), np.uint8),
                                     session.roi_for(item_id), (32, 24))
            session.add_evaluation(ImageEvaluation(session.dataset.item(item_id), result,
                                                   dice if isinstance(dice, ImageMetrics) else metrics(dice)),
                                   session.truth_versions()(item_id), session.quality)
    return window, ids, feed


def histogram_draws(window, monkeypatch) -> list[int]:
    """How many values each draw of the Metrics histogram from now on was given (one entry per draw)."""
    drawn: list[int] = []
    histogram = window.metrics_panel.set_dataset_values
    monkeypatch.setattr(window.metrics_panel, "set_dataset_values",
                        lambda metric, values, summary: (drawn.append(len(values)), histogram(metric, values, summary)))
    return drawn


def idle(window) -> bool:
    return window.slide_ready() and not window.jobs.pending and not window.redraws_due()


def test_the_histogram_follows_changes_while_its_dock_is_on_screen_and_catches_up_when_shown(qtbot, tmp_path,
                                                                                         monkeypatch):
    """The histogram reads every image's value: it redraws when the values changed (not on events that change
    none, such as loading an image), not while the Metrics dock is hidden, and shows every value once the dock
    is back."""
    from segscope.gui.widgets.docking import show_dock

    window, ids, feed = window_fed_by_hand(qtbot, tmp_path, 12)
    qtbot.waitUntil(lambda: idle(window))
    drawn = histogram_draws(window, monkeypatch)
    dice = [0.1, 0.35, 0.6, 0.85, 0.2, 0.95, 0.4, 0.45, 0.05, 0.7, 0.75, 0.55]

    def bars() -> list[int]:
        return window.metrics_panel.histogram()[0].tolist()

    def expected(count: int) -> list[int]:  # by hand: BINS bins over [0, 1]
        return np.histogram(dice[:count], bins=BINS, range=(0.0, 1.0))[0].tolist()

    feed(dict(zip(ids[:6], dice[:6])))
    qtbot.waitUntil(lambda: idle(window))
    assert drawn == [6] and bars() == expected(6)
    window.dataset_panel.select_item(ids[7])  # loading an image announces it, and changes no value
    qtbot.waitUntil(lambda: window.current.id == ids[7] and idle(window))
    assert drawn == [6]
    window.metrics_dock.hide()
    feed(dict(zip(ids[6:], dice[6:])))
    qtbot.waitUntil(lambda: idle(window))
    assert drawn == [6] and bars() == expected(6)  # hidden: not drawn
    show_dock(window.metrics_dock)  # in front of the Error regions dock tabbed with it, as View > Metrics does
    qtbot.waitUntil(lambda: bars() == expected(12))
    assert drawn == [6, 12]


def test_stepping_worst_first_follows_new_values_and_the_rows_shown(qtbot, tmp_path):
    """Next worst (`.`) steps in the order of the values now: after a new result it follows the new value, after a
    filter only the rows shown, however many presses came before."""
    window, ids, feed = window_fed_by_hand(qtbot, tmp_path, 6)
    feed({"img00": 0.5, "img01": 0.2, "img02": 0.9, "img03": 0.4})  # by hand: img01, img03, img00, img02
    qtbot.waitUntil(lambda: idle(window))
    inspection = window.inspection

    def walk() -> list[str | None]:
        first = inspection.step_worst(-len(ids))  # (clamped: the worst)
        return [first] + [inspection.step_worst(1) for _ in range(3)]

    assert walk() == ["img01", "img03", "img00", "img02"]
    feed({"img02": 0.1})  # run again: now the worst
    qtbot.waitUntil(lambda: idle(window))
    assert walk() == ["img02", "img01", "img03", "img00"]
    inspection.filter_bar.edit.setText("dice_1 > 0.3")
    inspection.filter_bar.apply()
    qtbot.waitUntil(lambda: window.dataset_panel.visible_order() == ["img00", "img03"])  # (not run: no Dice)
    assert walk()[:2] == ["img03", "img00"] and inspection.step_worst(1) == "img00"  # (the last: stays)


def test_an_image_whose_row_is_filtered_out_is_still_opened_when_asked_for(qtbot, tmp_path):
    """The review queue, the ROI undo and the like ask for an image by id: a filter hiding its row must not make the
    request vanish (the image was never loaded and the queue waited for it)."""
    window, ids, _feed = window_fed_by_hand(qtbot, tmp_path, 4)
    qtbot.waitUntil(lambda: idle(window))
    panel = window.dataset_panel
    panel.model.set_filter(lambda row: row.item_id != "img02")
    qtbot.waitUntil(lambda: "img02" not in panel.visible_order())
    panel.select_item("img02")
    qtbot.waitUntil(lambda: window.session.current is not None and window.session.current.id == "img02")
    panel.select_item("img01")  # a row shown: selected as before
    qtbot.waitUntil(lambda: window.session.current.id == "img01" and panel.current_item() == "img01")
