"""What the viewer keeps out of the garbage collector's full walks (gui/runtime/collector.py): the session's objects
frozen as they pile up, the young garbage collected first, and a dataset let go freed without any collection."""

from __future__ import annotations

import gc
import shutil
import weakref

import pytest

from segscope.core.session.events import ItemChanged, SessionEvents
from segscope.core.session.store import STORE_DIR_NAME
from segscope.gui.runtime.collector import SETTLE_EVERY, Survivors

from .conftest import open_and_wait


class Node:
    """An object the collector tracks, which a weak reference can follow."""


def tracked(obj: object) -> bool:
    """Whether a collection would walk `obj` (frozen objects are in no generation)."""
    return any(other is obj for other in gc.get_objects())


@pytest.fixture
def collector_paused():
    """No automatic collection during the test: only the viewer's own calls collect (conftest's
    `nothing_left_frozen` unfreezes after it)."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_what_survived_is_frozen_once_every_settle_every_changes_and_young_garbage_is_collected_first(
        collector_paused):
    events = SessionEvents()
    survivors = Survivors(events)  # (held: the events follow it weakly)
    kept = Node()
    garbage = Node()
    garbage.itself = garbage  # a reference cycle: only the collector frees it
    gone = weakref.ref(garbage)
    del garbage
    for _ in range(SETTLE_EVERY - 1):
        events.item_changed.emit(ItemChanged("a"))
    assert tracked(kept) and gone() is not None  # not yet

    events.item_changed.emit(ItemChanged("a"))
    assert not tracked(kept)  # frozen, and still alive
    assert gone() is None  # collected, not frozen for good

    later = Node()
    for _ in range(SETTLE_EVERY - 1):
        events.item_changed.emit(ItemChanged("b"))
    assert tracked(later)  # counted again from zero
    events.item_changed.emit(ItemChanged("b"))
    assert not tracked(later)
    del survivors


def test_a_dataset_another_replaces_in_the_window_is_freed_without_a_collection(qtbot, window, demo_dataset,
                                                                               tmp_path, collector_paused):
    """Frozen objects are freed by reference counting only: the window's views, jobs and the image's mask document
    must hold no reference cycle through the dataset (10,000 items of one would stay for good)."""
    with qtbot.waitSignal(window.controller.batchFinished, timeout=60000):  # (a dataset opens once a run ends)
        assert window.commands.run_current()
    assert window.session.result(window.current.id) is not None
    before = weakref.ref(window.session.dataset)
    other = tmp_path / "other"
    shutil.copytree(demo_dataset, other, ignore=shutil.ignore_patterns(STORE_DIR_NAME))  # (its store: being written)
    open_and_wait(qtbot, window, other)
    qtbot.waitUntil(lambda: window.slide_ready() and not window.jobs.pending, timeout=30000)
    assert window.session.dataset.root == other
    assert before() is None
