"""A folder replaced as a unit: whoever reads it sees its old version or its new one, never a mixture.

The writer locks the folder (a lock file beside it, `lock_path`), then makes the new version in a staging
folder beside it (`.<name>.segscope-new-<hex>`, same file system), starting from hard links to the current
version's files (copies where the file system has no hard links): files the writer does not touch cost
nothing, and the current version is never written to (a file replaced in the new version is unlinked there
first, `StagedFolder.create`). When the writer is done the new version takes the folder's place:

- Linux 3.15 and later: `renameat2(RENAME_EXCHANGE)` swaps the two names in one step; the old version, now
  at the staging name, is deleted. The folder holds one version or the other at every instant.
- elsewhere (or a file system without it): the folder is renamed aside (`.<name>.segscope-old-<hex>`), the
  new version renamed into place, the old one deleted. Between the two renames the folder does not exist:
  the one step that cannot be atomic.

A writer that fails or is interrupted removes its staging folder and leaves the folder as it was. A writer
killed outright (`kill -9`, power loss) leaves its staging or old folder beside the folder; the next writer
of that folder recognises it before anything else (`recover`): while the folder exists every leftover is
removed (an unfinished new version, or the old one already replaced), and when it does not (killed between
the two renames) the old version is renamed back. Each is reported (logged, and in `StagedFolder.notes`).

Nothing is lost to the swap: before the old version is deleted, each of its files is checked against what
was linked into the new one; a file another program added or changed in the folder meanwhile keeps the old
version as `<name>.segscope-kept-<time>` beside it, with a warning, instead of being deleted.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import secrets
import shutil
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Union

from ..errors import SegScopeError
from .fileio import TEMP_NAME, remove_stale_staging
from .folder_lock import FolderLock

log = logging.getLogger(__name__)

NEW, OLD, KEPT = ".segscope-new-", ".segscope-old-", ".segscope-kept-"
#: A file's identity when it was linked into the new version: (inode, modification time, size).
Identity = tuple[int, int, int]
#: What a file of the new version is made from: its bytes, or a function writing the file at a path.
Content = Union[bytes, Callable[[Path], None]]  # noqa: UP007 (a run-time alias: Python 3.9 has no X | Y)

#: Most folders a tree may hold to be replaced as a whole (a project has a few; a home folder thousands).
MAX_FOLDERS = 1000
_AT_FDCWD, _RENAME_EXCHANGE = -100, 2
#: What renameat2 answers where the kernel, the C library or the file system cannot exchange.
_NO_EXCHANGE = {errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP}
#: What `os.link` raises where the file system has no hard links (FAT, some network shares).
_NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EXDEV, errno.EMLINK}


def _renameat2() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2  # glibc 2.28+, musl 1.2.2+
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function  # type: ignore[no-any-return]


_RENAMEAT2 = _renameat2()


def exchange(a: Path, b: Path) -> bool:
    """Swap the names `a` and `b` in one step; False where this system cannot (nothing changed then)."""
    if _RENAMEAT2 is None:
        return False
    if _RENAMEAT2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in _NO_EXCHANGE:
        return False
    raise OSError(code, os.strerror(code), str(a))


def rename(source: Path, target: Path) -> None:
    """One rename of the swap (a function of its own, so tests can stop a writer at each)."""
    os.rename(source, target)


def is_debris(name: str) -> bool:
    """A file a killed writer of an earlier SegScope left in a folder: a temporary file (`fileio.write_temp`),
    the lock file or a journal of the file groups published before folders were replaced whole."""
    return (TEMP_NAME.match(name) is not None or name == ".segscope-export.lock"
            or name.startswith((".segscope-journal-", "..segscope-journal-")))


def copy_of(source: Path) -> Content:
    """Writes a copy of the file `source` (streamed: a model of gigabytes is never held in memory)."""
    def write(path: Path) -> None:
        shutil.copyfile(source, path)
    return write


def lock_path(folder: Path) -> Path:
    """The lock file of `folder`'s writers, beside it (inside, it would travel with the old version)."""
    folder = Path(folder)
    return folder.with_name(f".{folder.name}.segscope-lock")


def _fsync_folder(folder: Path) -> None:
    """Make a folder's entries durable (POSIX; elsewhere nothing to do)."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _leftovers(folder: Path) -> list[Path]:
    """What writers killed outright left beside `folder`: staging (new) and old versions."""
    prefixes = (f".{folder.name}{NEW}", f".{folder.name}{OLD}")
    try:
        return sorted(p for p in folder.parent.iterdir() if p.name.startswith(prefixes))
    except OSError:
        return []


def _remains(path: Path) -> str:
    """How much is left in `path`, in words: "3 file(s)"."""
    count = sum(len(files) for _, _, files in os.walk(path)) if os.path.isdir(path) else 1
    return f"{count} file(s)"


def recover(folder: Path) -> list[str]:
    """Put `folder` back as its last complete version after a writer was killed outright (call with its lock
    held); returns what was done, each also logged."""
    folder, notes = Path(folder), []
    leftovers = _leftovers(folder)
    old = [p for p in leftovers if p.name.startswith(f".{folder.name}{OLD}")]
    if not os.path.lexists(folder) and old:
        if len(old) > 1:
            raise SegScopeError(f"{folder}: missing, with {len(old)} earlier versions beside it ({old[0].name}, "
                                f"...): rename the one to keep to {folder.name}")
        rename(old[0], folder)
        leftovers.remove(old[0])
        notes.append(f"{folder}: put back the earlier version an interrupted write had moved aside")
    for path in leftovers:
        shutil.rmtree(path, ignore_errors=True)
        if os.path.lexists(path):
            notes.append(f"{folder}: could not remove {path.name}, left beside it by an interrupted write "
                         f"({_remains(path)}); delete it by hand")
        else:
            notes.append(f"{folder}: removed {path.name}, left beside it by an interrupted write")
    for note in notes:
        log.warning("%s", note)
    return notes


class StagedFolder:
    """`target` replaced as a unit (see the module docstring): use it as a context manager, make the new
    version in `path` (with `create` for each new or replaced file), and it takes `target`'s place when the
    block ends without an exception; otherwise `target` stays as it was.

    `what` names the writer in the refusal a second writer gets. `flat`: the folder may hold only files (an
    entry that is a folder is refused before anything is written). What writers of earlier SegScope versions
    left in the folder when killed (`is_debris`) is not carried into the new version.
    """

    def __init__(self, target: Path, what: str = "export", flat: bool = False):
        self.target, self.what, self._flat = Path(target), what, flat
        self.path = self.target  # the staging folder, once entered
        self.notes: list[str] = []  # what recovery did, and what was dropped, for the writer to report
        self._lock: FolderLock | None = None
        self._linked: dict[str, Identity] = {}  # relative path -> identity, of the current version's files
        self._aside: Path | None = None  # where the current version is while the new one is renamed into place
        self._new: int | None = None  # the new version's inode, once the swap begins
        self._dropped: set[str] = set()
        self._folders = 0  # carried into the new version so far

    # ------------------------------------------------------------------------------------------ enter
    def __enter__(self) -> StagedFolder:
        target = self._resolved()
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SegScopeError(f"{target.parent}: cannot write here ({exc.strerror}); choose another folder") \
                from None
        self._lock = FolderLock(lock_path(target), self.what, target).acquire()
        try:
            self.notes += recover(target)
            if target.is_dir():
                remove_stale_staging(target)  # scratch folders of killed writers (`fileio.staging_folder`)
            self.path = self._stage()
        except BaseException:
            self._lock.release()
            self._lock = None
            raise
        return self

    def _resolved(self) -> Path:
        """The real folder (a symbolic link to a folder: the folder it names is replaced, the link kept)."""
        target = Path(os.path.abspath(self.target))
        if target.is_symlink():
            target = target.resolve()
        if target.exists() and not target.is_dir():
            raise SegScopeError(f"{self.target}: cannot write here (a file of that name is in the way); "
                                "choose another folder")
        if target.exists() and os.path.ismount(target):
            raise SegScopeError(f"{self.target}: is a mount point, which cannot be replaced as a whole; write "
                                "into a folder inside it")
        self.target = target
        return target

    def _stage(self) -> Path:
        target = self.target
        staging = target.with_name(f".{target.name}{NEW}{secrets.token_hex(4)}")
        try:
            os.mkdir(staging, 0o777)
        except OSError as exc:
            raise SegScopeError(f"{target}: cannot stage a new version beside it ({exc.strerror}); choose "
                                "another folder") from None
        try:
            if target.is_dir():
                shutil.copymode(target, staging)
                self._link_tree(target, staging, "")
            if self._dropped:
                note = (f"{target}: left out {len(self._dropped)} leftover(s) of an interrupted write "
                        f"(e.g. {min(self._dropped)})")
                self.notes.append(note)
                log.warning("%s", note)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return staging

    def _link_tree(self, source: Path, staging: Path, prefix: str) -> None:
        """The current version's entries under `source` into `staging`: files as hard links (copies where
        impossible), symbolic links as links, folders made anew."""
        try:
            entries = sorted(os.scandir(source), key=lambda e: e.name)
        except OSError as exc:
            raise SegScopeError(f"{source}: cannot read the folder ({exc.strerror})") from None
        for entry in entries:
            relative = f"{prefix}{entry.name}"
            if not prefix and is_debris(entry.name):
                self._dropped.add(relative)
                continue
            made = staging / entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if self._flat:
                        raise SegScopeError(f"{entry.path}: a folder inside {self.target}, which is replaced as "
                                            "a whole when it is written; move it away or choose another folder")
                    self._folders += 1
                    if self._folders > MAX_FOLDERS:  # a home folder, a repository: not a folder of its own
                        raise SegScopeError(f"{self.target}: holds more than {MAX_FOLDERS:,} folders, and it is "
                                            "replaced as a whole when it is written; choose a folder of its own")
                    os.mkdir(made)
                    shutil.copymode(entry.path, made)
                    self._link_tree(Path(entry.path), made, f"{relative}/")
                elif entry.is_symlink():
                    os.symlink(os.readlink(entry.path), made)
                elif entry.is_file(follow_symlinks=False):
                    self._link_file(entry, made)
                    info = entry.stat(follow_symlinks=False)
                    self._linked[relative] = (info.st_ino, info.st_mtime_ns, info.st_size)
                else:
                    raise SegScopeError(f"{entry.path}: not a file or folder (a pipe, socket or device) in "
                                        f"{self.target}, which is replaced as a whole; move it away")
            except OSError as exc:
                raise SegScopeError(f"{entry.path}: cannot carry it into the new version of {self.target} "
                                    f"({exc.strerror or exc})") from None

    @staticmethod
    def _link_file(entry: os.DirEntry[str], made: Path) -> None:
        try:
            os.link(entry.path, made, follow_symlinks=False)
        except OSError as exc:
            if exc.errno not in _NO_HARD_LINKS:
                raise
            shutil.copy2(entry.path, made, follow_symlinks=False)

    # ------------------------------------------------------------------------------------------ write
    def exists(self, relative: str) -> bool:
        return os.path.lexists(self.path / relative)

    def create(self, relative: str, content: Content, overwrite: bool) -> Path:
        """File `relative` of the new version, written from `content` and fsynced; returns its staging path.
        An existing one is refused unless `overwrite` (then the new file keeps its mode); never written
        through: its link to the current version is removed first."""
        path, shown = self.path / relative, self.target / relative
        mode = None
        if os.path.lexists(path):
            if not overwrite:
                raise SegScopeError(f"{shown}: already exists (use --overwrite to replace)")
            if path.is_dir() and not path.is_symlink():
                raise SegScopeError(f"{shown}: is a folder where a file goes; move it away")
            mode = path.lstat().st_mode & 0o7777
            path.unlink()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
                with os.fdopen(fd, "wb") as f:
                    f.write(content)
            else:
                content(path)
            if mode is not None:
                os.chmod(path, mode)
            with open(path, "rb+") as f:
                os.fsync(f.fileno())
        except OSError as exc:
            raise SegScopeError(f"{shown}: write failed ({exc.strerror or exc}); {self.target} was not "
                                "changed") from None
        return path

    def remove(self, relative: str) -> None:
        """Leave file `relative` out of the new version."""
        (self.path / relative).unlink(missing_ok=True)

    # ------------------------------------------------------------------------------------------ swap
    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        try:
            if exc_type is None:
                self._commit()
            else:
                self._abandon()
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def _commit(self) -> None:
        target, staging = self.target, self.path
        for dirpath, _, _ in os.walk(staging):
            _fsync_folder(Path(dirpath))
        try:
            self._new = os.lstat(staging).st_ino
            if not os.path.lexists(target):
                rename(staging, target)
                old = None
            elif exchange(staging, target):
                old = staging  # the old version, now at the staging name
            else:
                old = self._aside = target.with_name(f".{target.name}{OLD}{secrets.token_hex(4)}")
                rename(target, old)
                rename(staging, target)
        except BaseException as exc:
            self._abandon()  # puts the old version back should it be aside
            if isinstance(exc, OSError):
                raise SegScopeError(f"{target}: could not put the new version in place ({exc.strerror or exc}); "
                                    "the folder is as it was") from None
            raise
        _fsync_folder(target.parent)
        if old is not None:
            self._discard_old(old)

    def _abandon(self) -> None:
        """After a failure (an interruption during the swap included): the current version is put back should
        the new one be in place or the old one aside already, and the staging folder goes."""
        target, staging, aside = self.target, self.path, self._aside
        if staging == target:
            return
        with contextlib.suppress(OSError):
            if self._new is not None and os.lstat(target).st_ino == self._new:  # swapped already: swap back
                if aside is None:
                    exchange(staging, target)
                else:
                    rename(target, staging)
        if aside is not None and not os.path.lexists(target) and os.path.lexists(aside):
            rename(aside, target)
        shutil.rmtree(staging, ignore_errors=True)

    def _discard_old(self, old: Path) -> None:
        """Delete the replaced version, unless it holds files another program added or changed meanwhile:
        then it is kept beside the folder, said in a warning. What cannot be deleted (a file immutable or held
        open elsewhere) stays where it is, said exactly in a note: the new version is in place either way."""
        try:
            self._discard(old)
        except OSError as exc:
            self._stuck(old, exc)

    def _stuck(self, old: Path, exc: OSError) -> None:
        if not os.path.lexists(old):
            return
        note = (f"{self.target}: the new version is in place, but the replaced one could not be removed "
                f"({exc.strerror or exc}: {exc.filename or old}); {_remains(old)} remain in {old}: delete it by hand")
        self.notes.append(note)
        log.warning("%s", note)

    def _discard(self, old: Path) -> None:
        foreign, failed = 0, None
        for dirpath, dirnames, filenames in os.walk(old, topdown=False):
            for name in [*filenames, *(d for d in dirnames if os.path.islink(os.path.join(dirpath, d)))]:
                path = os.path.join(dirpath, name)
                relative = os.path.relpath(path, old).replace(os.sep, "/")
                try:
                    info = os.lstat(path)
                except OSError:
                    continue
                if (relative.split("/")[0] in self._dropped or stat.S_ISLNK(info.st_mode)
                        or self._linked.get(relative) == (info.st_ino, info.st_mtime_ns, info.st_size)):
                    try:
                        os.unlink(path)
                    except OSError as exc:  # (the others are still deleted; `_discard_old` says what stays)
                        failed = failed or exc
                else:
                    foreign += 1
            with contextlib.suppress(OSError):
                if dirpath != str(old):
                    os.rmdir(dirpath)
        if failed is not None:
            raise failed
        if not foreign:
            shutil.rmtree(old)
            return
        kept = self.target.with_name(f"{self.target.name}{KEPT}{time.strftime('%Y%m%d-%H%M%S')}")
        rename(old, kept)
        note = (f"{self.target}: {foreign} file(s) another program added or changed there while it was being "
                f"written are kept in {kept.name} beside it")
        self.notes.append(note)
        log.warning("%s", note)
