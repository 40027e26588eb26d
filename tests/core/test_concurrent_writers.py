"""Issue 40: the viewer's files under other writers, killed writers and faults. Each test is one of the issue's
cases, on real files; where it matters the other writer is a real process (`_child`), killed with SIGKILL."""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from segscope.core.backends.base import Backend, Capabilities
from segscope.core.dataset.dataset import Dataset
from segscope.core.dataset.truth import (
    CORRECTED,
    ORIGINAL,
    REPLACED,
    Truth,
    corrected_mask_path,
    superseded_marker,
    truth_for,
)
from segscope.core.editing.autosave import AutoSave
from segscope.core.editing.files import SESSION, read_stamps, recovery_path, save_mask, write_recovery
from segscope.core.errors import SegScopeError
from segscope.core.files import fileio
from segscope.core.files.atomic_folder import StagedFolder
from segscope.core.files.folder_lock import FolderLock
from segscope.core.files.stamp import Stamp, WriteConflict, short_lock
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi
from segscope.core.session.answers import IMAGE_CHANGED
from segscope.core.session.backend_state import BackendState
from segscope.core.session.events import SaveConflict
from segscope.core.session.jobs import run_here
from segscope.core.session.running import Failed
from segscope.core.session.session import Session
from segscope.core.session.store import SessionStore
from segscope.core.session.views import item_view

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes and signals")


def _child(code: str, wait: bool = True) -> subprocess.Popen[bytes]:
    """Another SegScope process running `code` (another viewer, or a writer to kill)."""
    process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    if wait:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err.decode()
    return process


def _mask(value: int, shape: tuple[int, int] = (20, 30)) -> np.ndarray:
    mask = np.zeros(shape, np.uint8)
    mask[: value % shape[0] + 1, :5] = 255
    return mask


@pytest.fixture
def dataset_root(tmp_path: Path) -> Path:
    """Two images (001, 002) with masks, in the folder-per-image layout."""
    root = tmp_path / "data"
    for n, item in enumerate(("001", "002")):
        (root / item).mkdir(parents=True)
        cv2.imwrite(str(root / item / "image.png"), np.full((20, 30, 3), 40 * n, np.uint8))
        cv2.imwrite(str(root / item / "mask.png"), _mask(n))
    return root


def _result() -> InferenceResult:
    p1 = np.zeros((20, 30), np.float32)
    return InferenceResult(np.stack([1 - p1, p1], axis=-1), np.zeros((20, 30), np.uint8), Roi(0, 0, 30, 20), (30, 20))


def _read(path: Path) -> np.ndarray:
    return cv2.imread(str(path), cv2.IMREAD_UNCHANGED)


# --- two viewers, one mask ------------------------------------------------------------------------------

def test_two_viewers_one_mask_second_save_is_a_conflict_naming_the_first_writers_file(dataset_root: Path) -> None:
    mask_path = dataset_root / "001" / "mask.png"
    b_read = read_stamps(mask_path)  # viewer B reads the mask before A's save
    _child(f"""
        import numpy as np
        from segscope.core.editing.files import read_stamps, save_mask
        mask = np.zeros((20, 30), np.uint8); mask[5:9, 5:9] = 255  # viewer A's stroke
        save_mask(mask, {str(mask_path)!r}, "corrected", read_stamps({str(mask_path)!r}))
    """)
    a_saved = corrected_mask_path(mask_path).read_bytes()
    b_mask = np.zeros((20, 30), np.uint8)
    b_mask[12:15, 20:25] = 255
    with pytest.raises(WriteConflict) as conflict:
        save_mask(b_mask, mask_path, "corrected", b_read)
    assert conflict.value.path == corrected_mask_path(mask_path)
    assert str(conflict.value).startswith(f"{corrected_mask_path(mask_path)}: appeared by another viewer")
    assert "\n" not in str(conflict.value) and "keep yours as a copy, take theirs, or overwrite" in str(conflict.value)
    assert corrected_mask_path(mask_path).read_bytes() == a_saved  # A's stroke is kept
    assert _read(corrected_mask_path(mask_path))[6, 6] == 255


def test_another_program_replaces_the_mask_then_a_corrected_save_is_a_conflict(dataset_root: Path) -> None:
    mask_path = dataset_root / "001" / "mask.png"
    read = read_stamps(mask_path)
    theirs = np.full((20, 30), 255, np.uint8)
    _child(f"import cv2, numpy as np; cv2.imwrite({str(mask_path)!r}, np.full((20, 30), 255, np.uint8))")
    with pytest.raises(WriteConflict) as conflict:
        save_mask(_mask(3), mask_path, "corrected", read)
    assert conflict.value.path == mask_path and "was replaced" in str(conflict.value)
    assert not corrected_mask_path(mask_path).exists()  # no correction made from the old mask shadows theirs
    assert np.array_equal(_read(mask_path), theirs)


def test_a_mask_replaced_while_the_image_loads_is_a_conflict_not_the_document_it_was_read_into(
        dataset_root: Path) -> None:
    """The document holds the mask read on the worker: its stamps are those taken before that read, so a mask
    another program writes before the document is made (the answer's trip to the GUI thread) is a conflict at the
    save, never overwritten by a correction made from the old mask."""
    session = _run_session(dataset_root)
    mask_path = dataset_root / "001" / "mask.png"
    job = session.select("001")
    answer = job.work()  # (the worker: size, mask and stamps read)
    cv2.imwrite(str(mask_path), np.full((20, 30), 255, np.uint8))  # another program, before the answer is taken
    os.utime(mask_path, ns=(time.time_ns(), time.time_ns() + 10**9))  # (a coarse clock may give the same time)
    job.done(answer)
    document = session.document
    assert document is not None and not document.disk_mask.all()  # the mask read: the old one
    with pytest.raises(WriteConflict):
        save_mask(_mask(3), mask_path, "corrected", document.stamps)
    assert (_read(mask_path) == 255).all() and not corrected_mask_path(mask_path).exists()


def test_replace_after_an_earlier_replace_keeps_the_other_programs_mask(dataset_root: Path) -> None:
    mask_path = dataset_root / "001" / "mask.png"
    first = save_mask(_mask(4), mask_path, "replace", read_stamps(mask_path))  # backup: the first original
    cv2.imwrite(str(mask_path), np.full((20, 30), 255, np.uint8))  # another program's mask
    os.utime(mask_path, ns=(time.time_ns(), time.time_ns() + 10**9))  # (a coarse clock may give the same time)
    with pytest.raises(WriteConflict):
        save_mask(_mask(5), mask_path, "replace", first.stamps)
    assert (_read(mask_path) == 255).all()


def test_in_place_rewrite_keeping_size_and_time_is_caught_by_content() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "f.bin"
        path.write_bytes(b"aaaa")
        read = Stamp.of(path, content=True)
        info = path.stat()
        with open(path, "r+b") as f:
            f.write(b"bbbb")
        os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
        now = Stamp.of(path, content=True)
        assert (now.size, now.mtime_ns, now.inode) == (read.size, read.mtime_ns, read.inode)
        assert not read.same(now)


def test_overwrite_after_a_conflict_is_the_users_choice(dataset_root: Path) -> None:
    mask_path = dataset_root / "001" / "mask.png"
    read = read_stamps(mask_path)
    save_mask(_mask(6), mask_path, "corrected")  # the other writer
    with pytest.raises(WriteConflict):
        save_mask(_mask(7), mask_path, "corrected", read)
    saved = save_mask(_mask(7), mask_path, "corrected", None)
    assert np.array_equal(_read(saved.path), _mask(7)) and saved.stamps == read_stamps(mask_path)


# --- two viewers, one sidecar ---------------------------------------------------------------------------

def test_two_viewers_one_sidecar_keep_each_others_rois(dataset_root: Path) -> None:
    b = Dataset.open(dataset_root)  # viewer B opened earlier
    _child(f"""
        from segscope.core.dataset.dataset import Dataset
        from segscope.core.roi import Roi
        a = Dataset.open({str(dataset_root)!r})
        a.set_roi(a.item("001"), Roi(1, 2, 11, 12))
    """)
    b.set_roi(b.item("002"), Roi(3, 4, 13, 14))
    rois = json.loads((dataset_root / "segscope.json").read_text())["rois"]
    assert rois == {"001": [1, 2, 11, 12], "002": [3, 4, 13, 14]}
    b.reset_roi(b.item("002"))
    assert json.loads((dataset_root / "segscope.json").read_text())["rois"] == {"001": [1, 2, 11, 12]}


def test_two_viewers_move_one_images_roi_the_later_move_is_kept_and_said(dataset_root: Path) -> None:
    session, _ = _opened(dataset_root)
    messages: list[str] = []
    session.events.message.connect(lambda m: messages.append(m.text))
    _child(f"""
        from segscope.core.dataset.dataset import Dataset
        from segscope.core.roi import Roi
        a = Dataset.open({str(dataset_root)!r})
        a.set_roi(a.item("001"), Roi(1, 2, 11, 12))
    """)
    session.set_roi(Roi(3, 4, 13, 14), "001")
    assert json.loads((dataset_root / "segscope.json").read_text())["rois"] == {"001": [3, 4, 13, 14]}
    assert messages == [f"{dataset_root / 'segscope.json'}: the ROI of 001 was also moved by another viewer since "
                        "this one read it; this viewer's move is saved"]


def test_a_move_reads_the_sidecar_again_only_after_another_writer_replaced_it(dataset_root: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A viewer nudging an ROI does not parse the sidecar it wrote itself again; one another viewer replaced since
    is read, and its ROIs kept."""
    from segscope.core.dataset import dataset as dataset_module

    dataset = Dataset.open(dataset_root)
    reads: list[Path] = []
    read_json = dataset_module.read_json
    monkeypatch.setattr(dataset_module, "read_json", lambda path, what: reads.append(path) or read_json(path, what))
    dataset.set_roi(dataset.item("001"), Roi(0, 0, 5, 5))
    dataset.set_roi(dataset.item("001"), Roi(0, 0, 6, 5))
    dataset.set_roi(dataset.item("001"), Roi(0, 0, 7, 5))
    assert reads == []  # (no sidecar at first: nothing to read; then its own)
    _child(f"""
        from segscope.core.dataset.dataset import Dataset
        from segscope.core.roi import Roi
        other = Dataset.open({str(dataset_root)!r})
        other.set_roi(other.item("002"), Roi(1, 1, 9, 9))
    """)
    dataset.set_roi(dataset.item("001"), Roi(0, 0, 8, 5))
    assert reads == [dataset_root / "segscope.json"]
    assert json.loads((dataset_root / "segscope.json").read_text())["rois"] == {"001": [0, 0, 8, 5],
                                                                                 "002": [1, 1, 9, 9]}


def test_two_processes_writing_the_sidecar_at_once_lose_no_roi(dataset_root: Path) -> None:
    for n in range(40):
        (dataset_root / f"{n:03d}x").mkdir()
        cv2.imwrite(str(dataset_root / f"{n:03d}x" / "image.png"), np.zeros((20, 30, 3), np.uint8))
    code = """
        import sys
        from segscope.core.dataset.dataset import Dataset
        from segscope.core.roi import Roi
        d = Dataset.open({root!r})
        for n in range({start}, 40, 2):
            d.set_roi(d.item(f"{{n:03d}}x"), Roi(0, 0, n + 1, 5))
    """
    children = [_child(code.format(root=str(dataset_root), start=start), wait=False) for start in (0, 1)]
    for child in children:
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err.decode()
    rois = json.loads((dataset_root / "segscope.json").read_text())["rois"]
    assert rois == {f"{n:03d}x": [0, 0, n + 1, 5] for n in range(40)}


def test_a_damaged_sidecar_is_never_overwritten(dataset_root: Path) -> None:
    dataset = Dataset.open(dataset_root)
    (dataset_root / "segscope.json").write_text("{not json")
    with pytest.raises(SegScopeError, match="segscope.json.*kept for this session only"):
        dataset.set_roi(dataset.item("001"), Roi(0, 0, 5, 5))
    assert (dataset_root / "segscope.json").read_text() == "{not json"
    assert dataset.roi_for(dataset.item("001")) == Roi(0, 0, 5, 5)


# --- killed writers -------------------------------------------------------------------------------------

def _killed_at(step: str, code: str) -> None:
    """Run `code` in a child that SIGKILLs itself when it reaches `step` (`publish` of a temporary file, or the
    `unlink` of a file named `step`)."""
    prelude = f"""
        import os, signal, pathlib
        from segscope.core.files import fileio
        step = {step!r}
        if step == "publish":
            fileio.publish = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
        else:
            unlink = pathlib.Path.unlink
            def killing(self, *a, **k):
                if self.name == step:
                    os.kill(os.getpid(), signal.SIGKILL)
                return unlink(self, *a, **k)
            pathlib.Path.unlink = killing
    """
    child = _child(textwrap.dedent(prelude) + textwrap.dedent(code), wait=False)
    _, err = child.communicate(timeout=120)
    assert child.returncode == -signal.SIGKILL, err.decode()


def test_kill_between_replacing_the_mask_and_deleting_the_older_correction(dataset_root: Path) -> None:
    mask_path = dataset_root / "001" / "mask.png"
    save_mask(_mask(8), mask_path, "corrected")  # an older correction
    _killed_at("mask_corrected.png", f"""
        import numpy as np
        from segscope.core.editing.files import save_mask
        save_mask(np.full((20, 30), 255, np.uint8), pathlib.Path({str(mask_path)!r}), "replace")
    """)
    assert corrected_mask_path(mask_path).exists() and superseded_marker(corrected_mask_path(mask_path)).exists()
    dataset = Dataset.open(dataset_root)
    truth = truth_for(dataset.item("001"))
    # (a Replace save: mask.png holds it, its original kept as backup, so the truth is "replaced")
    assert truth is not None and truth.kind == REPLACED and (_read(truth.path) == 255).all()  # the last save
    assert not corrected_mask_path(mask_path).exists()
    assert not superseded_marker(corrected_mask_path(mask_path)).exists()


def test_kill_before_the_mask_was_replaced_keeps_the_correction(dataset_root: Path) -> None:
    mask_path = dataset_root / "001" / "mask.png"
    save_mask(_mask(8), mask_path, "corrected")
    marker = superseded_marker(corrected_mask_path(mask_path))
    marker.write_text("0" * 64)  # a "replace" killed after its marker, before the mask was replaced
    truth = truth_for(Dataset.open(dataset_root).item("001"))
    assert truth is not None and truth.kind == CORRECTED and not marker.exists()


def test_a_reader_waits_for_a_replace_save_in_flight_before_settling_its_marker(dataset_root: Path) -> None:
    """A replace save midway (its marker written, the original not yet replaced, the folder's lock held) is
    not taken for one killed before the replace: the reader waits, and when the save is then killed after the
    replace, the older correction no longer shadows the new original."""
    mask_path = dataset_root / "001" / "mask.png"
    save_mask(_mask(8), mask_path, "corrected")  # an older correction
    new = fileio.encode_image(np.full((20, 30), 255, np.uint8), ".png")
    corrected = corrected_mask_path(mask_path)
    answers: list[object] = []
    with short_lock(mask_path.parent):  # the saver: marker written, original not yet replaced
        superseded_marker(corrected).write_text(hashlib.sha256(new).hexdigest())
        reader = threading.Thread(target=lambda: answers.append(truth_for(Dataset.open(dataset_root).item("001"))))
        reader.start()
        time.sleep(0.3)  # (the reader is at the marker by now; without the lock it had already judged)
        mask_path.write_bytes(new)  # the replace ... and the saver is killed before deleting anything
    reader.join(timeout=30)
    (truth,) = answers
    assert isinstance(truth, Truth) and truth.kind == ORIGINAL  # (this test's saver kept no backup)
    assert (_read(truth.path) == 255).all() and not corrected.exists()
    assert not superseded_marker(corrected).exists()


def test_kill_mid_save_leaves_a_temporary_file_the_next_writer_removes(dataset_root: Path) -> None:
    mask_path = dataset_root / "001" / "mask.png"
    _killed_at("publish", f"""
        import numpy as np
        from segscope.core.editing.files import save_mask
        save_mask(np.full((20, 30), 255, np.uint8), {str(mask_path)!r}, "corrected")
    """)
    (left,) = [p for p in mask_path.parent.iterdir() if fileio.TEMP_NAME.match(p.name)]
    assert fileio.stale_temp(left)
    save_mask(_mask(9), mask_path, "corrected")
    assert not left.exists() and not [p for p in mask_path.parent.iterdir() if fileio.TEMP_NAME.match(p.name)]


def test_a_viewer_opening_the_dataset_leaves_another_viewers_write_in_flight(dataset_root: Path) -> None:
    store = SessionStore(dataset_root)
    store.folder.mkdir()
    writer = _child(f"""
        import sys, time
        from segscope.core.files.fileio import write_temp
        print(write_temp(__import__("pathlib").Path({str(store.folder / 'a.npz')!r}), b"half"), flush=True)
        time.sleep(120)
    """, wait=False)
    try:
        assert writer.stdout is not None
        in_flight = Path(writer.stdout.readline().decode().strip())
        assert in_flight.exists() and not fileio.stale_temp(in_flight)
        assert list(SessionStore(dataset_root).results()) == []  # another viewer opens the dataset
        assert in_flight.exists()
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.communicate(timeout=60)
    assert list(SessionStore(dataset_root).results()) == [] and not in_flight.exists()  # now provably stale


# --- faults ---------------------------------------------------------------------------------------------

def test_dataset_folder_renamed_while_editing_is_not_recreated(dataset_root: Path) -> None:
    mask_path = dataset_root / "001" / "mask.png"
    read = read_stamps(mask_path)
    dataset_root.rename(dataset_root.with_name("moved"))
    with pytest.raises(SegScopeError, match="folder is gone .*reopen the dataset where it is now"):
        save_mask(_mask(1), mask_path, "corrected", read)
    assert not dataset_root.exists()


def test_export_lock_write_on_a_full_disk_keeps_no_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    lock_file = tmp_path / ".out.segscope-lock"
    with monkeypatch.context() as patch:
        patch.setattr(os, "write", full)
        lock = FolderLock(lock_file, "export", tmp_path / "out").acquire()
    lock.release()
    FolderLock(lock_file, "export", tmp_path / "out").acquire().release()  # a later export is not refused


# --- the session asks; each answer keeps what it says ---------------------------------------------------

def _session_with_edits(root: Path) -> tuple[Session, list[SaveConflict], list[str]]:
    session = Session()
    run_here(session.open_dataset(Dataset.open(root)))
    run_here(session.select("001"))
    conflicts: list[SaveConflict] = []
    messages: list[str] = []
    session.events.save_conflict.connect(conflicts.append)
    session.events.message.connect(lambda m: messages.append(m.text))
    editor = session.document.ensure_editor(2)
    editor.replace(np.full((4, 4), 255, np.uint8), Roi(20, 10, 24, 14))  # this viewer's stroke
    session.document.edited()
    return session, conflicts, messages


@pytest.mark.parametrize("choice", ["copy", "theirs", "overwrite"])
def test_two_viewers_one_mask_the_viewer_asks_and_keeps_what_the_user_chose(dataset_root: Path, choice: str) -> None:
    session, conflicts, messages = _session_with_edits(dataset_root)
    mine = session.document.mask.copy()
    mask_path = dataset_root / "001" / "mask.png"
    theirs = np.zeros((20, 30), np.uint8)
    theirs[0:3, 0:3] = 255
    _child(f"""
        import numpy as np
        from segscope.core.editing.files import save_mask
        theirs = np.zeros((20, 30), np.uint8); theirs[0:3, 0:3] = 255
        save_mask(theirs, {str(mask_path)!r}, "corrected")
    """)
    run_here(session.save_job("corrected"))
    (conflict,) = conflicts
    assert conflict.item_id == "001" and conflict.path == corrected_mask_path(mask_path)
    assert [m for m in messages if m.startswith("Not saved: ")] == [f"Not saved: {conflict.text}"]
    assert session.document.dirty and np.array_equal(_read(corrected_mask_path(mask_path)), theirs)
    run_here(session.resolve_conflict(conflict, choice))
    on_disk = _read(corrected_mask_path(mask_path))
    if choice == "overwrite":
        assert np.array_equal(on_disk, mine) and not session.document.dirty
    else:
        assert np.array_equal(on_disk, theirs) and not session.document.dirty
        assert np.array_equal(session.document.mask, theirs)
        copies = sorted(p.name for p in mask_path.parent.glob("mask.mine-*.png"))
        assert len(copies) == (choice == "copy")
        if copies:
            assert np.array_equal(_read(mask_path.parent / copies[0]), mine)
            assert [item.id for item in Dataset.open(dataset_root).items] == ["001", "002"]  # not an image
    assert len(conflicts) == 1


# --- recovery -------------------------------------------------------------------------------------------

_AUTOSAVE = """
    import os, sys, numpy as np
    from segscope.core.editing.files import write_recovery
    mask = np.zeros((20, 30), np.uint8); mask[:, :{cols}] = 255
    print(write_recovery(mask, {source!r}), flush=True)
    {after}
"""


def _opened(root: Path) -> tuple[Session, list[str]]:
    session = Session()
    messages: list[str] = []
    session.events.message.connect(lambda m: messages.append(f"{m.level}: {m.text}"))
    run_here(session.open_dataset(Dataset.open(root)))
    return session, messages


def test_two_viewers_autosaves_of_one_image_are_two_files_and_both_come_back(dataset_root: Path) -> None:
    source = dataset_root / "001" / "mask.png"
    for cols in (3, 7):  # viewer A, then viewer B, both stopped since
        _child(_AUTOSAVE.format(cols=cols, source=str(source), after=""))
    kept = sorted((dataset_root / "001" / ".segscope-recovery").iterdir())
    assert len(kept) == 2
    session, messages = _opened(dataset_root)
    truth = session.truth("001")
    assert truth.edits and truth.recovered is not None
    assert (truth.recovered.mask[:, :7] == 255).all() and not truth.recovered.mask[:, 7:].any()  # the newest: B's
    (other,) = [m for m in messages if "older unsaved edits of another viewer" in m]
    older = next(p for p in kept if p != truth.recovered.path and p.exists())
    assert other.startswith("warning: 001: ") and str(older) in other and "auto-saved at " in other
    assert truth.recovered.path.name.endswith(f".{SESSION}.npz")  # now this viewer's, removed by its save


def test_a_live_viewers_autosave_is_not_offered_as_a_crashs(dataset_root: Path) -> None:
    source = dataset_root / "001" / "mask.png"
    live = _child(_AUTOSAVE.format(cols=3, source=str(source), after="import time; time.sleep(120)"), wait=False)
    try:
        assert live.stdout is not None and Path(live.stdout.readline().decode().strip()).exists()
        session, _ = _opened(dataset_root)
        assert not session.truth("001").edits
    finally:
        os.kill(live.pid, signal.SIGKILL)
        live.communicate(timeout=60)
    session, _ = _opened(dataset_root)  # its viewer is gone: its edits are offered
    assert session.truth("001").edits


def test_one_damaged_recovery_file_is_skipped_with_one_line_and_the_rest_restored(dataset_root: Path) -> None:
    write_recovery(_mask(11), dataset_root / "002" / "mask.png")
    SessionStore(dataset_root).save("002", _result())
    damaged = recovery_path(dataset_root / "001" / "mask.png", session="abcdef-1-0000")
    damaged.parent.mkdir()
    damaged.write_bytes(b"PK\x03\x04 not a zip")
    session, messages = _opened(dataset_root)
    (line,) = [m for m in messages if str(damaged) in m]
    assert line.startswith(f"warning: 001: {damaged}: not a SegScope recovery file (BadZipFile")
    assert "Internal error" not in " ".join(messages)
    assert session.truth("002").edits and np.array_equal(session.truth("002").recovered.mask, _mask(11))
    assert session.result("002") is not None  # the stored run is restored too


def test_a_renamed_dataset_keeps_its_recovery(dataset_root: Path) -> None:
    write_recovery(_mask(12), dataset_root / "001" / "mask.png")
    moved = dataset_root.rename(dataset_root.with_name("renamed"))
    session, _ = _opened(moved)
    recovered = session.truth("001").recovered
    assert recovered is not None and np.array_equal(recovered.mask, _mask(12))


def test_a_recovery_folder_that_is_a_file_is_said_and_saves_still_work(dataset_root: Path) -> None:
    source = dataset_root / "001" / "mask.png"
    (source.parent / ".segscope-recovery").write_text("in the way")
    with pytest.raises(SegScopeError, match=r"\.segscope-recovery: a file is where SegScope keeps auto-saved"):
        write_recovery(_mask(1), source)
    session, conflicts, messages = _session_with_edits(dataset_root)
    run_here(session.save_job("corrected"))
    assert not session.document.dirty and corrected_mask_path(source).exists()
    assert [m for m in messages if m.startswith("Saved the mask of 001")]


# --- faults said once -----------------------------------------------------------------------------------

@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_dataset_autosave_failure_is_said_once_in_words(dataset_root: Path) -> None:
    source = dataset_root / "001" / "mask.png"
    autosave = AutoSave()
    os.chmod(source.parent, 0o555)
    try:
        warnings = [autosave.finished(n, AutoSave.write(_mask(n), source, None)) for n in (1, 2, 3)]
    finally:
        os.chmod(source.parent, 0o755)
    assert warnings[0].startswith("Unsaved mask edits cannot be kept here") and str(source.parent) in warnings[0]
    assert warnings[1:] == ["", ""] and autosave.saved_version == 0
    assert autosave.finished(4, AutoSave.write(_mask(4), source, None)) == "" and autosave.saved_version == 4


def test_a_full_disk_autosave_failure_is_said_once_and_again_after_a_success(
        dataset_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = dataset_root / "001" / "mask.png"
    autosave = AutoSave()

    def full(*_args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", full)
        first = [autosave.finished(n, AutoSave.write(_mask(n), source, None)) for n in (1, 2)]
    assert "No space left on device" in first[0] and "\n" not in first[0] and first[1] == ""
    assert not [p for p in (source.parent / ".segscope-recovery").iterdir() if fileio.TEMP_NAME.match(p.name)]
    assert autosave.finished(3, AutoSave.write(_mask(3), source, None)) == ""
    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", full)
        assert "No space left" in autosave.finished(4, AutoSave.write(_mask(4), source, None))  # a new failure


# --- export clean-up ------------------------------------------------------------------------------------

def test_old_export_that_cannot_be_deleted_is_said_exactly_and_never_claimed_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "a_mask.png").write_bytes(b"old")
    (out / "stuck.bin").write_bytes(b"immutable")
    real_unlink = os.unlink

    def immutable(path: object, *args: object, **kwargs: object) -> None:
        if os.path.basename(os.fsdecode(path)) == "stuck.bin":  # type: ignore[arg-type]
            raise PermissionError(errno.EPERM, "Operation not permitted", os.fsdecode(path))  # type: ignore[arg-type]
        real_unlink(path, *args, **kwargs)  # type: ignore[arg-type]

    with monkeypatch.context() as patch:
        patch.setattr(os, "unlink", immutable)
        with StagedFolder(out) as staged:
            staged.create("a_mask.png", b"new", overwrite=True)
        (old,) = [p for p in tmp_path.iterdir() if p.name.startswith(".out.segscope-")]
        (note,) = staged.notes
        assert note == (f"{out}: the new version is in place, but the replaced one could not be removed (Operation "
                        f"not permitted: {old / 'stuck.bin'}); 1 file(s) remain in {old}: delete it by hand")
        assert (out / "a_mask.png").read_bytes() == b"new" and (old / "stuck.bin").exists()
        with StagedFolder(out) as again:  # the next export: still stuck, and says so
            pass
        assert [n for n in again.notes if old.name in n] == [
            f"{out}: could not remove {old.name}, left beside it by an interrupted write (1 file(s)); delete it by "
            "hand"]
    with StagedFolder(out) as last:
        pass
    assert f"{out}: removed {old.name}, left beside it by an interrupted write" in last.notes and not old.exists()


class _StatVfs:
    def __init__(self, flag: int, free_blocks: int) -> None:
        self.f_flag, self.f_bavail, self.f_frsize = flag, free_blocks, 4096


@pytest.mark.parametrize(("flag", "free", "why"), [
    (os.ST_RDONLY, 10**6, "it is on a read-only file system"),
    (0, 100, "its disk is full (0 MiB free)"),
])
def test_a_read_only_or_full_dataset_is_said_once_when_it_opens(
        dataset_root: Path, monkeypatch: pytest.MonkeyPatch, flag: int, free: int, why: str) -> None:
    monkeypatch.setattr(os, "statvfs", lambda _path: _StatVfs(flag, free))
    session, messages = _opened(dataset_root)
    assert [m for m in messages if "cannot be kept" in m] == [
        f"warning: {dataset_root}: runs and edits cannot be kept here: {why}"]


def test_a_writable_dataset_opens_without_a_warning(dataset_root: Path) -> None:
    _, messages = _opened(dataset_root)
    assert not [m for m in messages if m.startswith("warning")]


def test_dataset_folder_renamed_while_editing_no_writer_recreates_it(dataset_root: Path) -> None:
    session, conflicts, messages = _session_with_edits(dataset_root)
    dataset_root.rename(dataset_root.with_name("moved"))
    with pytest.raises(SegScopeError, match="folder is gone.*the ROI is kept for this session only"):
        session.set_roi(Roi(0, 0, 5, 5), "001")
    assert "the folder is gone" in AutoSave.write(_mask(1), dataset_root / "001" / "mask.png", None)
    run_here(session.save_job("corrected"))
    assert [m for m in messages if m.startswith("Saving the mask of 001: ")]
    session.store.submit("001", _result())
    session.store.flush()
    assert ["the folder is gone" in e for e in session.store.take_errors()] == [True]
    assert not dataset_root.exists() and session.document.dirty


# --- stale inputs ---------------------------------------------------------------------------------------

class _GreyBackend(Backend):
    """Class 1 where the image's grey level is over 100 (so a brighter image answers differently)."""

    capabilities = Capabilities("fake", "test", (30, 20), ("background", "defect"), {"model": "grey"})

    def infer(self, image, roi=None) -> InferenceResult:  # type: ignore[no-untyped-def]
        pixels = cv2.imread(str(image), cv2.IMREAD_COLOR) if isinstance(image, Path) else image
        roi = roi or Roi.whole(pixels.shape[1], pixels.shape[0])
        p1 = np.where(pixels[roi.y0 : roi.y1, roi.x0 : roi.x1, 0] > 100, 0.9, 0.1).astype(np.float32)
        return InferenceResult(np.stack([1 - p1, p1], axis=-1), (p1 > 0.5).astype(np.uint8), roi,
                               (pixels.shape[1], pixels.shape[0]), backend="fake")

    def close(self) -> None:
        pass


def _run_session(root: Path) -> Session:
    return _run_session_with(Dataset.open(root))


def _run_session_with(dataset: Dataset) -> Session:
    state = BackendState("fake")
    state.opened(_GreyBackend.capabilities)
    session = Session(backend=state)
    run_here(session.open_dataset(dataset))
    return session


def _run(session: Session, item_id: str) -> None:
    session.dataset.set_roi(session.dataset.item(item_id), Roi(0, 0, 30, 20))
    job = session.run([item_id])
    for step in job.work(_GreyBackend(), threading.Event(), lambda *_: None):
        job.each(step)
    job.finished(False)


def _image_replaced(root: Path, item_id: str = "001") -> None:
    """Another program replaces the image: bright where the mask (`_mask(0)`: the top row, left 5 columns) is."""
    _child(f"""
        import cv2, numpy as np
        image = np.zeros((20, 30, 3), np.uint8); image[:1, :5] = 255
        cv2.imwrite({str(root / item_id / 'image.png')!r}, image)
    """)


def test_stale_results_image_replaced_after_its_run_is_said_on_the_next_look(dataset_root: Path) -> None:
    session = _run_session(dataset_root)
    _run(session, "001")
    before = item_view(session, "001")
    assert before.status == "done" and before.metrics is not None and before.metrics.foreground_dice == 0.0
    _image_replaced(dataset_root)
    session.look_at_images(["001"])  # (the next look: select, the window's focus)
    stale = item_view(session, "001")
    assert stale.status == "image changed" and session.answer("001").stale == IMAGE_CHANGED
    assert stale.note == "the image file changed since this run: these numbers are of the old image — run again"
    _run(session, "001")  # a rerun answers for the new image: one foreground pixel row of 5, all found
    after = item_view(session, "001")
    assert after.status == "done" and after.note == "" and after.metrics.foreground_dice == pytest.approx(1.0)


def test_stale_results_image_replaced_between_sessions_is_said_on_restore(dataset_root: Path) -> None:
    session = _run_session(dataset_root)
    _run(session, "001")
    _run(session, "002")
    session.flush()
    for item in ("001", "002"):  # a copy of the dataset (new times) keeps its runs answering for it
        os.utime(dataset_root / item / "image.png", ns=(time.time_ns(), time.time_ns() + 5 * 10**9))
    again = _run_session(dataset_root)
    assert [item_view(again, i).status for i in ("001", "002")] == ["done", "done"]
    _image_replaced(dataset_root)
    third = _run_session(dataset_root)
    assert [item_view(third, i).status for i in ("001", "002")] == ["image changed", "done"]
    assert third.answer("001").stale == IMAGE_CHANGED


def test_a_mask_another_program_replaced_is_read_again_on_the_next_look_and_scored_against(dataset_root: Path) -> None:
    """No edits open: the numbers of 001 are of its mask (the top row's first 5 pixels, none predicted: Dice 0).
    Another program empties mask.png; the next look reads it again and the score follows (no foreground in either
    mask: Dice n/a), never the old number shown as the new mask's."""
    session = _run_session(dataset_root)
    _run(session, "001")
    version = session.truth("001").version
    assert item_view(session, "001").metrics.foreground_dice == 0.0
    assert session.look_at_images(["001", "002"]) == []  # nothing changed: nothing read again
    _child(f"""
        import cv2, numpy as np
        cv2.imwrite({str(dataset_root / '001' / 'mask.png')!r}, np.zeros((20, 30), np.uint8))
    """)
    due: list[str] = []
    session.events.score_due.connect(lambda event: due.append(event.item_id))
    assert session.look_at_images(["001"]) == ["001"]
    assert session.truth("001").version != version and due == ["001"] and not session.is_fresh("001")
    job = session.score_job("001")
    assert job is not None and session.adopt_score(job, job.run())
    assert math.isnan(item_view(session, "001").metrics.foreground_dice)
    assert session.look_at_images(["001"]) == []  # read once per change


# --- damaged datasets -----------------------------------------------------------------------------------

def test_an_unreadable_image_folder_is_one_row_with_its_reason_and_the_rest_opens(
        dataset_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (dataset_root / "003").mkdir()
    real_exists = Path.exists

    def unsearchable(path: Path, *args: object, **kwargs: object) -> bool:
        if path.parent.name == "003":  # (what a folder without search permission answers; root ignores modes)
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_exists(path, *args, **kwargs)  # type: ignore[arg-type]

    real_scandir = os.scandir

    def unlistable(path: object = ".") -> object:
        if Path(os.fsdecode(path)).name == "003":  # type: ignore[arg-type]
            raise PermissionError(errno.EACCES, "Permission denied", os.fsdecode(path))  # type: ignore[arg-type]
        return real_scandir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "exists", unsearchable)
    monkeypatch.setattr(os, "scandir", unlistable)
    with pytest.raises(SegScopeError, match="cannot read the dataset folder"):
        Dataset.open(dataset_root)  # `eval` still refuses it whole
    session = _run_session_with(Dataset.open(dataset_root, partial=True))
    assert [item.id for item in session.dataset.items] == ["001", "002", "003"]
    view = item_view(session, "003")
    assert view.status == "unreadable" and view.error == (
        f"{dataset_root / '003'}: cannot read the image's folder (Permission denied); the rest of the dataset opens")
    assert item_view(session, "001").status == ""
    job = session.run(["003", "001"])
    failed = [step for step in job.work(_GreyBackend(), threading.Event(), lambda *_: None) if isinstance(step, Failed)]
    assert [(f.item_id, f.text) for f in failed] == [("003", view.error)]


def test_a_file_that_cannot_be_removed_midway_is_one_message_naming_it(
        dataset_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mask_path = dataset_root / "001" / "mask.png"
    save_mask(_mask(8), mask_path, "corrected")
    session, _, messages = _session_with_edits(dataset_root)
    real_unlink = Path.unlink

    def immutable(path: Path, *args: object, **kwargs: object) -> None:
        if path.name == "mask_corrected.png":
            raise PermissionError(errno.EPERM, "Operation not permitted", str(path))
        real_unlink(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "unlink", immutable)
    run_here(session.save_job("replace", overwrite=True))
    (line,) = [m for m in messages if m.startswith("Saving the mask of 001: ")]
    assert line == (f"Saving the mask of 001: {corrected_mask_path(mask_path)}: cannot save the mask (Operation not "
                    "permitted); the edits stay unsaved in the viewer")
    assert session.document.dirty


# --- two viewers, one session store ---------------------------------------------------------------------

def test_two_viewers_one_store_a_replaced_run_of_another_viewer_is_said(dataset_root: Path) -> None:
    mine = SessionStore(dataset_root)
    mine.save("001", _result())
    assert mine.take_notes() == []
    _child(f"""
        import numpy as np
        from segscope.core.result import InferenceResult
        from segscope.core.roi import Roi
        from segscope.core.session.store import SessionStore
        p1 = np.full((20, 30), 0.25, np.float32)
        result = InferenceResult(np.stack([1 - p1, p1], axis=-1), np.zeros((20, 30), np.uint8), Roi(0, 0, 30, 20),
                                 (30, 20))
        SessionStore(__import__("pathlib").Path({str(dataset_root)!r})).save("001", result)
    """)
    path = mine.save("001", _result())
    (note,) = mine.take_notes()
    assert note.startswith("001: the run another viewer stored at ") and note.endswith(
        f"is replaced in {path.parent} by this viewer's newer run")
    mine.save("001", _result())  # its own file: nothing to say
    assert mine.take_notes() == []
    reader = SessionStore(dataset_root)
    assert [s.image_id for s in reader.results()] == ["001"]  # what it read is known: replacing it is no news
    reader.save("001", _result())
    assert reader.take_notes() == []
    later = SessionStore(dataset_root)  # a later session saving before its restore read the file: its own, no news
    later.save("001", _result())
    assert later.take_notes() == []


def test_eval_export_whose_old_export_cannot_be_deleted_says_what_remains_and_the_next_run_claims_nothing(
        tiny_model_project, small_dataset, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out_dir = tmp_path / "out"
    args = ["eval", "--dataset", str(small_dataset), "--pipeline", str(tiny_model_project.pipeline),
            "--export", str(out_dir), "--export-kinds", "mask"]

    def run(*extra: str, stuck: bool) -> subprocess.CompletedProcess[str]:
        prelude = textwrap.dedent("""
            import os, sys
            real = os.unlink
            def immutable(path, *a, **k):
                if os.path.basename(os.fsdecode(path)) == "stuck.bin":
                    raise PermissionError(1, "Operation not permitted", os.fsdecode(path))
                return real(path, *a, **k)
            os.unlink = immutable
        """) if stuck else "import sys\n"
        code = prelude + f"from segscope.core.cli import run\nsys.argv = ['segscope', *{[*args, *extra]!r}]\nrun()\n"
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)

    assert run(stuck=False).returncode == 0
    (out_dir / "stuck.bin").write_bytes(b"immutable, or open elsewhere")
    swapped = run("--overwrite", stuck=True)
    assert swapped.returncode == 0, swapped.stderr
    assert "internal error" not in swapped.stderr.lower()
    (old,) = [p for p in tmp_path.iterdir() if p.name.startswith(".out.segscope-")]
    assert (f"segscope: warning: {out_dir}: the new version is in place, but the replaced one could not be removed "
            f"(Operation not permitted: {old / 'stuck.bin'}); 1 file(s) remain in {old}: delete it by hand"
            ) in swapped.stderr
    still = run("--overwrite", stuck=True)
    assert still.returncode == 0 and f"could not remove {old.name}" in still.stderr and "removed" not in \
        still.stderr.replace("could not be removed", "").replace("could not remove", "")
    assert old.exists()
