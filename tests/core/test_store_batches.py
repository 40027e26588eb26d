"""The session store writes the results submitted together as one batch: one hold of its lock, each file whole,
another viewer's file replaced only with a note, an image submitted twice stored as its newest run."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from segscope.core.result import InferenceResult
from segscope.core.roi import Roi
from segscope.core.session import store as session_store
from segscope.core.session.store import SessionStore

W, H = 8, 6


def result(value: float) -> InferenceResult:
    p1 = np.full((H, W), value, np.float32)
    return InferenceResult(np.stack([1 - p1, p1], axis=-1), (p1 > 0.5).astype(np.uint8), Roi(0, 0, W, H), (W, H))


@pytest.fixture
def locks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each hold of the store's lock, as the store takes it."""
    held: list[str] = []
    taken = session_store.short_lock

    @contextlib.contextmanager
    def counted(folder: Path, name: str, what: str) -> Iterator[None]:
        with taken(folder, name, what):
            held.append(name)
            yield

    monkeypatch.setattr(session_store, "short_lock", counted)
    return held


def stored(store: SessionStore) -> dict[str, float]:
    """Each stored image's probability of class 1 at its first pixel, as read back."""
    return {entry.image_id: float(entry.result.probabilities[0, 0, 1]) for entry in store.results()
            if not isinstance(entry, str)}


def test_results_submitted_together_are_written_under_one_hold_of_the_lock(tmp_path: Path, locks: list[str]) -> None:
    store = SessionStore(tmp_path)
    for n, image_id in enumerate(["a", "b", "c"]):
        store.submit(image_id, result(n / 4))
    store.flush()
    assert store.take_errors() == [] and len(locks) == 1
    assert stored(SessionStore(tmp_path)) == {"a": 0.0, "b": 0.25, "c": 0.5}
    assert not [p for p in store.folder.iterdir() if p.name.endswith(".tmp")]  # no temporary file left


def test_an_image_submitted_twice_in_a_batch_is_stored_as_its_newest_run(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    store.submit("a", result(0.25))
    store.submit("b", result(0.5))
    store.submit("a", result(0.75))
    store.flush()
    assert stored(SessionStore(tmp_path)) == {"a": 0.75, "b": 0.5}


def test_a_batch_waits_for_later_results_and_flush_writes_it_at_once(tmp_path: Path, locks: list[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a flush, a batch waits `BATCH_SECONDS` for more: results submitted meanwhile join it."""
    monkeypatch.setattr(session_store, "BATCH_SECONDS", 3600.0)
    store = SessionStore(tmp_path)
    store.submit("a", result(0.25))
    store.submit("b", result(0.5))
    assert stored(SessionStore(tmp_path)) == {}  # still waiting for more
    flushing = threading.Thread(target=store.flush)
    flushing.start()
    flushing.join(60)
    assert not flushing.is_alive() and len(locks) == 1
    assert stored(SessionStore(tmp_path)) == {"a": 0.25, "b": 0.5}


def test_in_a_batch_only_the_file_another_viewer_replaced_is_said(tmp_path: Path) -> None:
    mine = SessionStore(tmp_path)
    mine.save_batch([("a", result(0.0)), ("b", result(0.0))])
    SessionStore(tmp_path).save("b", result(0.25))  # another viewer's newer run of b
    mine.save_batch([("a", result(0.5)), ("b", result(0.75))])
    (note,) = mine.take_notes()
    assert note.startswith("b: the run another viewer stored at ") and note.endswith("by this viewer's newer run")
    assert stored(SessionStore(tmp_path)) == {"a": 0.5, "b": 0.75}


def test_a_batch_that_cannot_be_written_leaves_the_stored_files_whole(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The second file of a batch fails to write: nothing of the batch is moved into place, no temporary file is
    left, and the store says it in one line."""
    store = SessionStore(tmp_path)
    store.save_batch([("a", result(0.0)), ("b", result(0.0))])
    written = session_store.write_temp
    calls: list[Path] = []

    def failing(path: Path, data: object) -> Path:
        calls.append(path)
        if len(calls) == 2:
            raise session_store.SegScopeError(f"{path}: write failed (No space left on device); nothing was changed")
        return written(path, data)  # type: ignore[arg-type]

    monkeypatch.setattr(session_store, "write_temp", failing)
    store.submit("a", result(0.5))
    store.submit("b", result(0.5))
    store.flush()
    (error,) = store.take_errors()
    assert "No space left on device" in error
    assert stored(SessionStore(tmp_path)) == {"a": 0.0, "b": 0.0}
    assert not [p for p in store.folder.iterdir() if p.name.endswith(".tmp")]
