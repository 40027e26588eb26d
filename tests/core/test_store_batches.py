"""The session store writes the results submitted together as one batch: one hold of its lock, each file whole,
another viewer's file replaced only with a note, an image submitted twice stored as its newest run."""

from __future__ import annotations

import contextlib
import errno
import os
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


def written(folder: Path, image_ids: set[str]) -> None:
    """Wait until the store's thread has written these images (without a flush)."""
    for _ in range(6000):
        if set(stored(SessionStore(folder))) >= image_ids:
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"{image_ids} not written")


@pytest.fixture
def running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SessionStore:
    """A store in the middle of a run: it wrote its first result ("w") at once, and writes the next ones as a batch
    `BATCH_SECONDS` (here an hour: until flushed) after it."""
    monkeypatch.setattr(session_store, "BATCH_SECONDS", 3600.0)
    store = SessionStore(tmp_path)
    store._last_batch = -3600.0  # (made before the bound was raised: nothing written for that long)
    store.submit("w", result(1.0))
    written(tmp_path, {"w"})
    return store


def test_a_result_after_a_quiet_moment_is_written_at_once_the_next_ones_together(
        tmp_path: Path, locks: list[str], running: SessionStore) -> None:
    """A store that wrote nothing for `BATCH_SECONDS` wrote "w" at once (one image's run); results that follow
    wait for the batch's time to come, and are written together under one hold of the lock (here when flushed)."""
    assert len(locks) == 1
    for n, image_id in enumerate(["a", "b", "c"]):
        running.submit(image_id, result(n / 4))
    assert stored(SessionStore(tmp_path)) == {"w": 1.0}  # waiting for the batch's time
    flushing = threading.Thread(target=running.flush)
    flushing.start()
    flushing.join(60)
    assert not flushing.is_alive() and running.take_errors() == [] and len(locks) == 2
    assert stored(SessionStore(tmp_path)) == {"w": 1.0, "a": 0.0, "b": 0.25, "c": 0.5}
    assert not [p for p in running.folder.iterdir() if p.name.endswith(".tmp")]  # no temporary file left


def test_an_image_submitted_twice_in_a_batch_is_stored_as_its_newest_run(tmp_path: Path,
                                                                          running: SessionStore) -> None:
    running.submit("a", result(0.25))
    running.submit("b", result(0.5))
    running.submit("a", result(0.75))
    running.flush()
    assert stored(SessionStore(tmp_path)) == {"w": 1.0, "a": 0.75, "b": 0.5}


def test_in_a_batch_only_the_file_another_viewer_replaced_is_said(tmp_path: Path) -> None:
    mine = SessionStore(tmp_path)
    mine.save_batch([("a", result(0.0)), ("b", result(0.0))])
    SessionStore(tmp_path).save("b", result(0.25))  # another viewer's newer run of b
    mine.save_batch([("a", result(0.5)), ("b", result(0.75))])
    (note,) = mine.take_notes()
    assert note.startswith("b: the run another viewer stored at ") and note.endswith("by this viewer's newer run")
    assert stored(SessionStore(tmp_path)) == {"a": 0.5, "b": 0.75}
    mine.save_batch([(image_id, result(0.5)) for image_id in "cdef"])
    SessionStore(tmp_path).save_batch([(image_id, result(0.125)) for image_id in "abcdx"])  # another viewer's runs
    mine.save_batch([(image_id, result(0.875)) for image_id in "abcdefx"])
    assert mine.take_notes() == [f"4 runs other viewers stored (a, b, c, …) are replaced in {mine.folder} by this "
                                 "viewer's newer runs"]  # (one line a batch; x was never read here: not said)


def test_a_run_written_again_after_its_file_was_removed_replaces_nobody_s_and_is_not_said(tmp_path: Path) -> None:
    """A store that read the stored runs (a reopen's restore) and then trimmed them away writing a Run all's newer
    ones, or whose file another viewer removed, writes those images again without a note: no other viewer's run is
    replaced (a note per image flooded a Run all over 10,000 images with 3,459 lines)."""
    (tmp_path / "sizing").mkdir()
    one = SessionStore(tmp_path / "sizing").save("x", result(0.0)).stat().st_size
    SessionStore(tmp_path).save_batch([("a", result(0.0)), ("b", result(0.0))])  # an earlier session's runs
    mine = SessionStore(tmp_path, max_bytes=int(one * 2.5))
    assert set(stored(mine)) == {"a", "b"}  # read (restored): known to this store
    mine.save_batch([("c", result(0.25)), ("d", result(0.25))])  # over the bound: a and b are trimmed
    assert set(stored(SessionStore(tmp_path))) == {"c", "d"}
    (mine.folder / next(p.name for p in mine.folder.glob("c-*.npz"))).unlink()  # another viewer removes c
    mine.save_batch([("a", result(0.5)), ("c", result(0.75))])
    assert mine.take_notes() == []
    assert stored(SessionStore(tmp_path))["a"] == 0.5


def test_a_batch_that_cannot_be_written_leaves_the_stored_files_whole(tmp_path: Path, running: SessionStore,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The second file of a batch fails to write: nothing of the batch is moved into place, no temporary file is
    left, and the store says it in one line."""
    running.save_batch([("a", result(0.0)), ("b", result(0.0))])
    write_temp = session_store.write_temp
    calls: list[Path] = []

    def failing(path: Path, data: object) -> Path:
        calls.append(path)
        if len(calls) == 2:
            raise session_store.SegScopeError(f"{path}: write failed (No space left on device); nothing was changed")
        return write_temp(path, data)  # type: ignore[arg-type]

    monkeypatch.setattr(session_store, "write_temp", failing)
    running.submit("a", result(0.5))
    running.submit("b", result(0.5))
    running.flush()
    (error,) = running.take_errors()
    assert "No space left on device" in error and len(calls) == 2
    assert stored(SessionStore(tmp_path)) == {"w": 1.0, "a": 0.0, "b": 0.0}
    assert not [p for p in running.folder.iterdir() if p.name.endswith(".tmp")]


def test_a_batch_whose_move_into_place_fails_keeps_the_files_moved_before_and_leaves_no_temporary_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rename of the batch's second file fails: the first is the new run, the second still the old one, no
    temporary file is left, and the failure is one line naming the file."""
    store = SessionStore(tmp_path)
    store.save_batch([("a", result(0.0)), ("b", result(0.0))])
    replace, moved = os.replace, []

    def failing(source: str, target: str) -> None:
        moved.append(target)
        if len(moved) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        replace(source, target)

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(session_store.SegScopeError, match="write failed .No space left on device.") as failed:
        store.save_batch([("a", result(0.5)), ("b", result(0.5))])
    monkeypatch.undo()
    assert str(moved[1]) in str(failed.value) and "\n" not in str(failed.value)
    assert stored(SessionStore(tmp_path)) == {"a": 0.5, "b": 0.0}
    assert not [p for p in store.folder.iterdir() if p.name.endswith(".tmp")]


def test_batches_keep_the_folder_within_its_bound_dropping_the_oldest_files(tmp_path: Path) -> None:
    """The folder's bytes, as the file system counts them, stay within the bound after every batch, a batch's own
    files are all kept, and no file dropped was written in a later batch than one kept (files of one batch may
    share a modification time)."""
    (tmp_path / "sizing").mkdir()
    one = SessionStore(tmp_path / "sizing").save("x", result(0.0)).stat().st_size  # (every file here: one size)
    store = SessionStore(tmp_path / "sizing", max_bytes=int(one * 3.5))
    batches = [["a", "b"], ["c", "d"], ["e"], ["f", "g", "h"]]
    written = {image_id: n for n, batch in enumerate(batches) for image_id in batch}
    for n, batch in enumerate(batches):
        store.save_batch([(image_id, result(0.25)) for image_id in batch])
        assert sum(p.stat().st_size for p in store.folder.glob("*.npz")) <= one * 3.5
        kept = set(stored(SessionStore(tmp_path / "sizing"))) - {"x"}
        dropped = {image_id for image_id in written if written[image_id] <= n} - kept
        assert set(batch) <= kept and max((written[d] for d in dropped), default=0) <= min(written[k] for k in kept)
