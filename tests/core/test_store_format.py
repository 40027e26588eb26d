"""A stored result's file is the zip `np.savez` writes (uncompressed .npy members), whoever reads it: NumPy and
zipfile read it back exactly, and a file the store wrote with `np.savez` before is read as it was."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from segscope.core.files.stamp import Stamp
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi
from segscope.core.session import store as session_store
from segscope.core.session.store import SessionStore, read_stored

W, H = 12, 10


def result() -> InferenceResult:
    """A 2-class result whose probabilities are a non-contiguous view (channels last of a channels-first array,
    as a model's output often is), made from random numbers."""
    p1 = np.random.default_rng(7).random((H, W), dtype=np.float32)
    probabilities = np.stack([1 - p1, p1]).transpose(1, 2, 0)
    assert not probabilities.flags.c_contiguous
    return InferenceResult(probabilities, (p1 > 0.5).astype(np.uint8), Roi(1, 2, W + 1, H + 2), (W + 3, H + 4),
                           {"inference": 0.25}, "onnxruntime", 0.5, image=Stamp(1234, 5678, 91011, "ab" * 32))


def test_a_stored_result_is_the_zip_numpy_writes_and_reads_back_exactly(tmp_path: Path) -> None:
    one = result()
    path = SessionStore(tmp_path).save("a/b.png", one)
    with zipfile.ZipFile(path) as archive:
        assert archive.testzip() is None  # every member's CRC-32 checked
        assert [(i.filename, i.compress_type) for i in archive.infolist()] == [
            ("probabilities.npy", zipfile.ZIP_STORED), ("argmax.npy", zipfile.ZIP_STORED),
            ("meta.npy", zipfile.ZIP_STORED)]
    with np.load(path) as loaded:
        assert loaded["probabilities"].dtype == np.float32 and loaded["argmax"].dtype == np.uint8
        assert np.array_equal(loaded["probabilities"], one.probabilities)
        assert np.array_equal(loaded["argmax"], one.argmax)
        meta = json.loads(bytes(loaded["meta"]))
    assert (meta["id"], meta["roi"], meta["image_size"], meta["timings"]) == ("a/b.png", [1, 2, W + 1, H + 2],
                                                                              [W + 3, H + 4], {"inference": 0.25})
    assert meta["image"] == {"size": 1234, "mtime_ns": 5678, "inode": 91011, "sha256": "ab" * 32}
    stored = read_stored(path)
    assert stored.image_id == "a/b.png" and np.array_equal(stored.result.probabilities, one.probabilities)
    assert (stored.result.roi, stored.result.image_size, stored.result.threshold) == (one.roi, one.image_size, 0.5)
    assert stored.result.image == Stamp(1234, 5678, 91011, "ab" * 32)


def test_a_result_the_store_wrote_with_numpy_before_is_read_as_it_was(tmp_path: Path) -> None:
    """The store's earlier writer: `np.savez` of the same three arrays (written here with NumPy alone)."""
    one = result()
    store = SessionStore(tmp_path)
    path = store.save("a/b.png", one)
    meta = {"id": "old", "roi": [1, 2, W + 1, H + 2], "image_size": [W + 3, H + 4], "timings": {"inference": 0.25},
            "backend": "onnxruntime", "threshold": 0.5, "roi_note": ""}
    older = path.with_name("older.npz")
    with older.open("wb") as file:
        np.savez(file, probabilities=one.probabilities, argmax=one.argmax,
                 meta=np.frombuffer(json.dumps(meta).encode(), np.uint8))
    now, before = read_stored(path).result, read_stored(older).result
    assert np.array_equal(before.probabilities, one.probabilities) and np.array_equal(before.argmax, one.argmax)
    assert (before.roi, before.image_size, before.timings, before.backend, before.threshold) == (
        now.roi, now.image_size, now.timings, now.backend, now.threshold)


def _local_extra_bytes(path: Path) -> int:
    """The length of the extra field of a zip's first local file header (where ZIP64 records go): bytes 28-29."""
    return int.from_bytes(path.read_bytes()[28:30], "little")


def test_a_result_too_large_for_a_zip_without_zip64_records_is_written_by_numpy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """(The bound lowered here: a real one is 4 GiB.) NumPy's writer gives each member a ZIP64 record."""
    one = result()
    monkeypatch.setattr(session_store, "_ZIP32_BYTES", one.probabilities.nbytes)
    path = SessionStore(tmp_path).save("a", one)
    with zipfile.ZipFile(path) as archive:
        assert archive.testzip() is None and _local_extra_bytes(path) > 0
    assert np.array_equal(read_stored(path).result.probabilities, one.probabilities)
    monkeypatch.undo()
    assert _local_extra_bytes(SessionStore(tmp_path).save("b", one)) == 0
