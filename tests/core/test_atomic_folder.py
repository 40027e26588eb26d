"""`core.files.atomic_folder`: a folder replaced as a unit, its leftovers recognised, nothing written through to
the version readers see, nothing another program wrote lost."""

from __future__ import annotations

import errno
import os
import sys

import pytest

from segscope.core.errors import SegScopeError
from segscope.core.files import atomic_folder
from segscope.core.files.atomic_folder import StagedFolder, exchange, lock_path, recover


def contents(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.exists() else None


def beside(folder):
    return sorted(p.name for p in folder.parent.iterdir() if p.name.startswith(f".{folder.name}."))


@pytest.fixture(params=["exchange", "renames"])
def swap(request, monkeypatch):
    """Both ways of swapping: renameat2's exchange where this system has it, else two renames."""
    if request.param == "renames":
        monkeypatch.setattr(atomic_folder, "exchange", lambda a, b: False)
    elif not exchange(*_probe(request.getfixturevalue("tmp_path"))):
        pytest.skip("renameat2(RENAME_EXCHANGE) is not available here")
    return request.param


def _probe(tmp_path):
    (tmp_path / "probe_a").mkdir()
    (tmp_path / "probe_b").mkdir()
    return tmp_path / "probe_a", tmp_path / "probe_b"


def test_a_new_folder_and_a_replaced_one(tmp_path, swap):
    target = tmp_path / "out"
    with StagedFolder(target) as staged:
        staged.create("a.txt", b"one", overwrite=False)
        assert not target.exists() and lock_path(target).exists()  # nothing visible until the block ends
    assert contents(target) == {"a.txt": b"one"} and beside(target) == []
    with open(target / "a.txt", "rb") as reader:  # a reader of the old version keeps its open file
        with StagedFolder(target) as staged:
            assert staged.exists("a.txt")  # the current version is carried over
            staged.create("a.txt", b"two", overwrite=True)
            staged.create("b.txt", lambda path: path.write_bytes(b"three"), overwrite=False)
            assert contents(target) == {"a.txt": b"one"}  # never written through the hard link
        assert reader.read() == b"one"
    assert contents(target) == {"a.txt": b"two", "b.txt": b"three"} and beside(target) == []


def test_a_failure_leaves_the_folder_as_it_was(tmp_path, swap):
    target = tmp_path / "out"
    target.mkdir()
    (target / "a.txt").write_bytes(b"one")
    with pytest.raises(RuntimeError), StagedFolder(target) as staged:
        staged.create("a.txt", b"two", overwrite=True)
        raise RuntimeError("the export failed")
    assert contents(target) == {"a.txt": b"one"} and beside(target) == [] and not lock_path(target).exists()
    with pytest.raises(SegScopeError, match=r"a.txt: already exists \(use --overwrite"), StagedFolder(target) as staged:
        staged.create("a.txt", b"two", overwrite=False)
    assert contents(target) == {"a.txt": b"one"} and beside(target) == []


def test_a_second_writer_is_refused_naming_the_folder(tmp_path):
    target = tmp_path / "out"
    with StagedFolder(target, "export"):
        with pytest.raises(SegScopeError, match=f"{target}: another export \\(process {os.getpid()}\\)"):
            StagedFolder(target, "export").__enter__()


def test_leftovers_of_a_killed_writer_are_recognised(tmp_path, caplog):
    target = tmp_path / "out"
    target.mkdir()
    (target / "a.txt").write_bytes(b"new")
    for leftover in (".out.segscope-new-0badc0de", ".out.segscope-old-0badc0de"):  # the folder exists: debris
        (tmp_path / leftover).mkdir()
        (tmp_path / leftover / "a.txt").write_bytes(b"debris")
    notes = recover(target)
    assert len(notes) == 2 and all("left beside it by an interrupted write" in n for n in notes)
    assert contents(target) == {"a.txt": b"new"} and beside(target) == []
    target.rename(tmp_path / ".out.segscope-old-12345678")  # killed between the two renames
    (tmp_path / ".out.segscope-new-87654321").mkdir()
    assert recover(target) == [f"{target}: put back the earlier version an interrupted write had moved aside",
                               f"{target}: removed .out.segscope-new-87654321, left beside it by an interrupted write"]
    assert contents(target) == {"a.txt": b"new"} and beside(target) == []
    assert sum("put back" in r.getMessage() for r in caplog.records) == 1
    target.rename(tmp_path / ".out.segscope-old-1")
    (tmp_path / ".out.segscope-old-2").mkdir()
    with pytest.raises(SegScopeError, match="missing, with 2 earlier versions beside it"):
        recover(target)  # which one? the user decides
    assert sorted(beside(target)) == [".out.segscope-old-1", ".out.segscope-old-2"]


def test_a_link_to_the_folder_stays_a_link(tmp_path, swap):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    with StagedFolder(tmp_path / "link") as staged:
        staged.create("a.txt", b"one", overwrite=False)
    assert (tmp_path / "link").is_symlink() and contents(real) == {"a.txt": b"one"}


def test_subfolders_links_and_files_without_hard_links(tmp_path, monkeypatch, swap):
    target = tmp_path / "project"
    (target / "models").mkdir(parents=True)
    (target / "models" / "m.onnx").write_bytes(b"weights")
    (target / "alias").symlink_to("models/m.onnx")

    def no_hard_links(*args, **kwargs):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_hard_links)  # FAT, some network shares: copies instead
    with StagedFolder(target, "segscope card") as staged:
        staged.create("models/m.json", b"{}", overwrite=False)
    assert contents(target / "models") == {"m.json": b"{}", "m.onnx": b"weights"}
    assert os.readlink(target / "alias") == "models/m.onnx"
    with pytest.raises(SegScopeError, match="a folder inside .* replaced as a whole"), StagedFolder(target, flat=True):
        pass
    monkeypatch.setattr(atomic_folder, "MAX_FOLDERS", 0)  # a home folder given by mistake is not copied
    with pytest.raises(SegScopeError, match="holds more than 0 folders"), StagedFolder(target, "segscope card"):
        pass
    assert beside(target) == [] and contents(target / "models") == {"m.json": b"{}", "m.onnx": b"weights"}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX only")
def test_a_pipe_in_the_folder_is_refused(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    os.mkfifo(target / "pipe")
    with pytest.raises(SegScopeError, match="pipe: not a file or folder"), StagedFolder(target):
        pass
    assert beside(target) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 is Linux's")
def test_exchange_swaps_two_folders_in_one_step(tmp_path):
    a, b = _probe(tmp_path)
    (a / "in_a").touch()
    if not exchange(a, b):
        pytest.skip("renameat2(RENAME_EXCHANGE) is not available here")
    assert os.listdir(a) == [] and os.listdir(b) == ["in_a"]
