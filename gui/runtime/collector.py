"""The cyclic garbage collector's full walks kept off the window (`gc.freeze`).

CPython's full collection walks every object it tracks, holding the interpreter lock, in whichever thread
allocates when one is due: the window waits meanwhile. The viewer's start makes some 94,000 objects it keeps for
good, and a session keeps a few for each image it answers for (its run record, ROI, metrics, score key): after a
Run all over 10,000 images each full walk took 110 ms of a quiet machine's time, and a Run all set off three
(bench/RESULTS.md). Both are taken out of the walks: the start's objects once (`freeze_startup_objects`), the
session's as they pile up (`Survivors`).

Reference counting still frees a frozen object once nothing holds it (a dataset another one replaces, every run
record of it). What is lost is the collection of a reference cycle that was alive when frozen and becomes garbage
later: the session's objects hold none (tests/gui/test_collector.py); the viewer's graphics items of the images
shown hold a few (`bench/bench_viewer_scale.py` counts what the freezes kept of them).
"""

from __future__ import annotations

import gc

from ...core.session.events import ItemChanged, SessionEvents

#: Changes of the session's images (results, scores, truths) between two freezes of what has survived them. A Run
#: all keeps about 5 objects per image (46,886 tracked before one over 10,000 images, 97,917 after): ~5,000 between
#: two freezes, ~5 ms of a walk at the ~1 us per object measured there.
SETTLE_EVERY = 1_000


def freeze_startup_objects() -> None:
    """Everything the start made, collected once and taken out of the walks (each walked them for 40 ms)."""
    gc.collect()
    gc.freeze()


def freeze_survivors() -> None:
    """The young generations collected (their garbage frozen would never be), then every object alive frozen."""
    gc.collect(1)
    gc.freeze()


class Survivors:
    """Freezes what a session keeps once every `SETTLE_EVERY` changes of its images: the objects a Run all, a
    restore or a re-scoring leaves behind are walked a few times at most."""

    def __init__(self, events: SessionEvents) -> None:
        self._changes = 0
        events.item_changed.connect(self._changed)

    def _changed(self, _changed: ItemChanged) -> None:
        self._changes += 1
        if self._changes >= SETTLE_EVERY:
            self._changes = 0
            freeze_survivors()
