"""An edited mask's files: saving it without destroying the original, and the auto-saved copy a crash leaves
(`core.editing.annotation.MaskEditor` edits the mask; `core.editing.document` decides when these run)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import secrets
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from ..dataset.dataset import copy_mask_path
from ..dataset.truth import backup_mask_path, corrected_mask_path, superseded_marker
from ..errors import InputError, SegScopeError
from ..files.fileio import HOST, atomic_write_bytes, encode_image, gone, process_alive, read_bytes
from ..files.stamp import Stamp, check_unchanged, short_lock

RECOVERY_DIR_NAME = ".segscope-recovery"
#: Formats a mask can be replaced in without losing values (JPEG cannot).
LOSSLESS_SUFFIXES = (".png", ".tif", ".tiff", ".bmp")


# --- saving -----------------------------------------------------------------------------------------

SaveMode = Literal["corrected", "replace"]


def truth_files(mask_path: Path) -> tuple[Path, Path]:
    """The files an image's truth is read from: the original mask and its saved correction."""
    return Path(mask_path), corrected_mask_path(mask_path)


def read_stamps(mask_path: Path) -> dict[Path, Stamp]:
    """What the truth files of `mask_path` are now, for `save_mask`'s `expected` (take them when the mask is
    read: a save then refuses to overwrite what another writer put there meanwhile)."""
    return {path: Stamp.of(path) for path in truth_files(mask_path)}


@dataclass(frozen=True)
class SavedMask:
    """A finished save: the file written and the truth files as this save left them (the next save's
    `expected`)."""

    path: Path
    stamps: dict[Path, Stamp]


def save_mask(mask: np.ndarray, mask_path: Path, mode: SaveMode = "corrected",
              expected: Mapping[Path, Stamp] | None = None) -> SavedMask:
    """Save an edited mask without destroying the original at `mask_path`.

    "corrected" writes (or rewrites) `corrected_mask_path(mask_path)` beside it. "replace" first copies the
    original byte for byte to `backup_mask_path` (an existing backup is never overwritten: it holds the
    first original), then replaces the original and removes a corrected copy that would shadow it; a kill in
    between leaves a marker by which the older correction is known to be superseded (`truth.settle_superseded`).

    `expected` (`read_stamps` of when the mask was read): both truth files must still be as read, else
    `WriteConflict` names the one another writer changed and nothing is written (None: overwrite whatever is
    there, the user's choice). The check and the write hold the folder's short lock (`stamp.short_lock`).
    """
    mask_path = Path(mask_path)
    if mode not in ("corrected", "replace"):
        raise SegScopeError(f"save mode {mode!r}: choose 'corrected' or 'replace'")
    if mode == "replace" and mask_path.suffix.lower() not in LOSSLESS_SUFFIXES:
        raise SegScopeError(f"{mask_path}: cannot replace a {mask_path.suffix} mask without changing its values; "
                            "save it as a corrected PNG instead")
    original, corrected = truth_files(mask_path)
    target = corrected if mode == "corrected" else original
    data = encode_image(mask, target.suffix.lower())
    folder = _writable_folder(mask_path)
    try:
        return _save(data, mask_path, mode, expected, folder)
    except OSError as exc:  # (a file removed or made read-only midway): one line naming it, nothing half-done
        raise SegScopeError(f"{exc.filename or target}: cannot save the mask ({exc.strerror or exc}); the edits stay "
                            "unsaved in the viewer") from None


def _save(data: bytes, mask_path: Path, mode: SaveMode, expected: Mapping[Path, Stamp] | None,
          folder: Path) -> SavedMask:
    original, corrected = truth_files(mask_path)
    target = corrected if mode == "corrected" else original
    with short_lock(folder):
        if expected is not None:
            check_unchanged(expected, target)
        if mode == "corrected":
            written = atomic_write_bytes(corrected, data, overwrite=True)
        else:
            backup = backup_mask_path(mask_path)
            if original.exists() and not backup.exists():
                atomic_write_bytes(backup, read_bytes(original))
            marker = superseded_marker(corrected)
            if corrected.exists():
                atomic_write_bytes(marker, hashlib.sha256(data).hexdigest().encode(), overwrite=True)
            written = atomic_write_bytes(original, data, overwrite=True)
            corrected.unlink(missing_ok=True)
            marker.unlink(missing_ok=True)
        return SavedMask(written, read_stamps(mask_path))


def _writable_folder(mask_path: Path) -> Path:
    """The mask's folder, which must exist as it was (a dataset folder renamed or removed while its masks are
    being edited is not recreated under its old name)."""
    folder = Path(mask_path).parent
    error = gone(folder, "nothing was saved")
    if error is not None:
        raise error
    return folder


def keep_copy(mask: np.ndarray, mask_path: Path) -> Path:
    """The edits written beside the mask as a new file (`mask.mine-<time>.png`) that no dataset reads as a mask
    or image: "keep mine as a copy" when another writer changed the mask meanwhile."""
    mask_path = Path(mask_path)
    _writable_folder(mask_path)
    data, now = encode_image(mask, ".png"), time.time()
    for n in range(1, 1000):
        path = copy_mask_path(mask_path, now, n)
        try:
            return atomic_write_bytes(path, data)
        except SegScopeError:
            if not path.exists():
                raise
    raise SegScopeError(f"{mask_path.parent}: too many copies named {copy_mask_path(mask_path, now).name}; "
                        "remove some")


# --- crash recovery ---------------------------------------------------------------------------------

#: This viewer's name on its auto-saves (machine, process, a random part): two viewers' auto-saves of one image
#: are two files, and a dead viewer's are told from a live one's.
SESSION = f"{HOST}-{os.getpid()}-{secrets.token_hex(2)}"
_RECOVERY_NAME = re.compile(r"^(?P<name>.+)\.(?P<host>[0-9a-f]{6})-(?P<pid>\d+)-[0-9a-f]{4}\.npz$")


@dataclass(frozen=True)
class Recovery:
    """An auto-saved mask: reopen the source, then `editor.replace(recovery.mask)` to get the edits back."""

    path: Path
    source: Path  # the mask file the edits belong to (where it is now)
    saved_at: float  # time.time() of the auto-save
    mask: np.ndarray


def _recovery_folder(source: Path, recovery_dir: Path | None) -> Path:
    return Path(recovery_dir) if recovery_dir is not None else Path(source).parent / RECOVERY_DIR_NAME


def _recovery_stem(source: Path, recovery_dir: Path | None) -> str:
    """The mask's name relative to where its auto-saves sit: beside the mask, its file name (a dataset renamed
    or moved keeps its auto-saves); in a folder of the caller's, with its folder's name."""
    name = Path(source).name if recovery_dir is None else f"{Path(source).parent.name}-{Path(source).name}"
    return re.sub(r"[^\w.-]", "_", name)


def recovery_path(source: Path, recovery_dir: Path | None = None, session: str = SESSION) -> Path:
    """`recovery_dir` (default: a hidden folder beside the mask) / `<mask name>.<session>.npz`."""
    return _recovery_folder(source, recovery_dir) / f"{_recovery_stem(source, recovery_dir)}.{session}.npz"


def _checked_folder(folder: Path) -> Path:
    if folder.exists() and not folder.is_dir():
        raise SegScopeError(f"{folder}: a file is where SegScope keeps auto-saved mask edits, so edits cannot be "
                            "auto-saved; rename or remove it")
    return folder


def write_recovery(mask: np.ndarray, source: Path, recovery_dir: Path | None = None, session: str = SESSION) -> Path:
    """Auto-save an edited mask of `source`, atomically, as this viewer's (`session`) file.

    The mask is zlib-compressed at level 1 (tens of ms for 4000x3000); to keep the UI thread free, call this
    from a worker thread with `editor.snapshot()` (taken in that thread too). The mask's folder must exist (a
    renamed dataset is not recreated under its old name).
    """
    _writable_folder(Path(source))
    path = recovery_path(source, recovery_dir, session)
    _checked_folder(path.parent)
    buffer = io.BytesIO()
    np.savez(buffer, mask_zlib=np.frombuffer(zlib.compress(np.ascontiguousarray(mask).tobytes(), 1), np.uint8),
             shape=np.array(mask.shape), source=np.array(Path(source).name), saved_at=np.array(time.time()))
    return atomic_write_bytes(path, buffer.getvalue(), overwrite=True)


def load_recovery(path: Path, source: Path | None = None) -> Recovery:
    """A recovery file (of the mask `source`, where it is now); any damage is one line naming the file."""
    try:
        with np.load(io.BytesIO(read_bytes(path)), allow_pickle=False) as data:
            shape = tuple(int(v) for v in data["shape"])
            mask = np.frombuffer(zlib.decompress(data["mask_zlib"].tobytes()), np.uint8).reshape(shape).copy()
            stored, saved_at = Path(str(data["source"])), float(data["saved_at"])
    except Exception as exc:  # noqa: BLE001 - a damaged zip, array or field: the file is skipped, said once
        detail = exc.problem if isinstance(exc, InputError) else f"{type(exc).__name__}: {exc}"
        raise SegScopeError(f"{path}: not a SegScope recovery file ({detail}); delete it") from None
    if mask.ndim != 2:
        raise SegScopeError(f"{path}: recovery mask has shape {mask.shape}, not a 2-D mask; delete it")
    return Recovery(Path(path), Path(source) if source is not None else stored, saved_at, mask)


def _live_other(found: re.Match[str]) -> bool:
    """An auto-save of another viewer still running on this machine (its edits are its own, not a crash's)."""
    pid = int(found["pid"])
    return found["host"] == HOST and pid != os.getpid() and process_alive(pid)


def find_recoveries(source: Path, recovery_dir: Path | None = None) -> tuple[list[Recovery], list[str]]:
    """The auto-saves of `source`'s edits newer than its mask files, newest first: this viewer's and those of
    viewers that stopped (another running viewer's are its own), and one line for each that cannot be read
    (skipped, never ending the search)."""
    return next(find_each_recoveries([source], recovery_dir))


def find_each_recoveries(sources: Iterable[Path], recovery_dir: Path | None = None,
                         ) -> Iterator[tuple[list[Recovery], list[str]]]:
    """`find_recoveries` of each source, each folder of auto-saves listed once (a dataset of 100,000 masks in one
    folder, or with a `recovery_dir`: one listing, not one per mask), its names grouped by the mask they are of.
    A mask in a folder with no auto-saves costs a string operation: the restore of every dataset opened walks all
    its masks on a worker, beside a window drawing its first image (100,000 masks: 20 ms, not a second of Python
    holding the interpreter lock)."""
    listed: dict[str, dict[str, list[re.Match[str]]] | str] = {}
    for source in sources:
        key = os.path.dirname(source) if recovery_dir is None else ""
        found = listed.get(key)
        if found is None:
            found = listed[key] = _auto_saves(_recovery_folder(source, recovery_dir))
        if isinstance(found, str):
            yield [], [found]
        elif not found:
            yield [], []
        else:
            yield _recoveries_of(source, _recovery_folder(source, recovery_dir),
                                 found.get(_recovery_stem(source, recovery_dir), []))


def _auto_saves(folder: Path) -> dict[str, list[re.Match[str]]] | str:
    """The auto-saves in `folder` by the name of the mask they are of, or the line saying it cannot be read."""
    try:
        names = [entry.name for entry in os.scandir(folder)]
    except FileNotFoundError:
        return {}
    except OSError as exc:
        return f"{folder}: cannot read the auto-saved mask edits ({exc.strerror}); they are not restored"
    found: dict[str, list[re.Match[str]]] = {}
    for name in names:
        match = _RECOVERY_NAME.match(name)
        if match is not None:
            found.setdefault(match["name"], []).append(match)
    return found


def _recoveries_of(source: Path, folder: Path, saves: list[re.Match[str]]) -> tuple[list[Recovery], list[str]]:
    """`find_recoveries` of `source` from the auto-saves of it found in `folder`."""
    saves = [found for found in saves if not _live_other(found)]
    if not saves:
        return [], []
    saved = [Path(source), corrected_mask_path(source)]
    newest_save = max((p.stat().st_mtime for p in saved if p.exists()), default=0.0)
    recoveries, problems = [], []
    for found in saves:
        try:
            recovery = load_recovery(folder / found.string, source)
        except SegScopeError as exc:
            problems.append(f"{exc} (skipped)")
            continue
        if recovery.saved_at > newest_save:
            recoveries.append(recovery)
    return sorted(recoveries, key=lambda r: -r.saved_at), problems


def find_recovery(source: Path, recovery_dir: Path | None = None) -> Recovery | None:
    """The newest auto-save of `source`'s edits (`find_recoveries`), None when there is none."""
    found, _ = find_recoveries(source, recovery_dir)
    return found[0] if found else None


def claim_recovery(recovery: Recovery, recovery_dir: Path | None = None) -> Recovery:
    """A stopped viewer's auto-save taken as this viewer's edits: renamed to this viewer's file, so a save or
    discard removes it and this viewer's auto-saves replace it."""
    mine = recovery_path(recovery.source, recovery_dir)
    if recovery.path != mine:
        try:
            os.replace(recovery.path, mine)
        except OSError:
            return recovery  # (read-only: it stays where it is; a save says what cannot be written)
    return Recovery(mine, recovery.source, recovery.saved_at, recovery.mask)


def discard_recovery(source: Path, recovery_dir: Path | None = None) -> None:
    """Remove this viewer's auto-save of `source` (after a save, or when the user declines to recover), and the
    hidden recovery folder beside the mask with it when nothing else is left there: nothing stays that the user
    did not ask for. A recovery folder that is a file, or gone with its dataset, holds nothing to remove."""
    path = recovery_path(source, recovery_dir)
    with contextlib.suppress(OSError):  # (gone, under a file, read-only: an auto-save older than the mask's save
        path.unlink()                   # is never offered again, `find_recoveries`)
    if path.parent.name == RECOVERY_DIR_NAME:
        with contextlib.suppress(OSError):  # another mask's auto-save is there (not empty), or it is gone
            path.parent.rmdir()
