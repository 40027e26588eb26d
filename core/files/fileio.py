"""Reading files SegScope did not write, images and masks, and writing files safely.

Every file read from outside (a card, a pipeline, an AIPP config, a profile, a CSV, a session entry, an
image) goes through `open_regular`/`read_bytes`: only a regular file is read (a FIFO would block the open,
a device never ends: both are refused, as is a folder), a file over the caller's size limit is refused
before it is read, and the caller picks the symbolic-link policy: followed (a path the user typed),
refused (`follow_symlinks=False`, for folders SegScope itself writes), or followed only while the target
stays inside a folder (`inside`, for a file another file names, such as a model's external weights). JSON
is parsed within bounds on depth and numbers (`core.files.untrusted_json`). Every refusal is one line naming the
file (`errors.InputError`).

Images are read the way the MindX opencv decoder reads them (`cv::imdecode(IMREAD_COLOR)`, 3-channel
BGR), through `np.fromfile` so non-ASCII paths work on every OS. The size a file's header declares is
checked before it is decoded, and what the image libraries print (OpenCV's log, libpng's errors) is kept
off the terminal: a refused file is reported in SegScope's one line.

Writes go to a temporary file beside the target and are moved into place, so a crash never leaves a
partial file. An existing file is only replaced when the caller says so (else the move is a no-clobber
hard link, so a file that appeared meanwhile is never overwritten either); a replaced file keeps its
mode, a new one gets the umask's default.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import functools
import hashlib
import io
import logging
import os
import re
import secrets
import shutil
import socket
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import cv2
import numpy as np

from ..dataset.masks import to_mask
from ..errors import InputError, SegScopeError
from ..roi import Roi
from . import png
from .folder_lock import FolderLock
from .imageheader import header_size, image_format
from .native_stderr import native_stderr_captured
from .untrusted_json import parse_json

#: Largest image (width x height) decoded by default; larger files are refused as a decompression guard.
DEFAULT_MAX_PIXELS = 400_000_000
#: Largest file read whole by default (images, tensors); text files have their own, smaller limit.
MAX_FILE_BYTES = 4 << 30
#: Largest text file read whole by default (a card, a pipeline, an AIPP config, a sidecar, a CSV).
MAX_TEXT_BYTES = 64 << 20
#: Staging folders (`staging_folder`): `.segscope-staging-<random>`, each holding its writer's lock file.
STAGING_PREFIX, STAGING_LOCK = ".segscope-staging-", ".lock"
#: Temporary files of `write_temp`: `.<target name>.<8 hex>.<pid>@<host>.tmp` (earlier versions: no `.<pid>@<host>`).
TEMP_NAME = re.compile(r"^\.(?P<target>.+)\.[0-9a-f]{8}(?:\.(?P<pid>\d+)@(?P<host>[0-9a-f]{6}))?\.tmp$")
#: A temporary file of another machine's writer (whose process cannot be asked), or of a SegScope that did not
#: name its process, is left alone until it is this old: no write takes that long.
TEMP_STALE_SECONDS = 24 * 3600
#: This machine, as temporary file names carry it.
HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:6]

#: What `os.link` raises where the file system has no hard links (FAT, some network shares).
_NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS}


def _silence_opencv() -> None:
    """OpenCV's own log off: a refused file is SegScope's one line (the API moved between 4.x and 5.x)."""
    logging_module = getattr(cv2.utils, "logging", None)
    if logging_module is not None:
        logging_module.setLogLevel(logging_module.LOG_LEVEL_SILENT)
    elif hasattr(cv2, "setLogLevel"):
        cv2.setLogLevel(0)  # 0: LOG_LEVEL_SILENT


_silence_opencv()
log = logging.getLogger(__name__)
#: tifffile warns about damaged directories through `logging`; SegScope's one line says what is wrong instead.
logging.getLogger("tifffile").setLevel(logging.CRITICAL)

def _article(noun: str) -> str:
    return "an" if noun[:1].lower() in "aeiou" else "a"


def open_regular(path: Path, what: str = "file", follow_symlinks: bool = True,
                 inside: Path | None = None) -> BinaryIO:
    """`path` opened for reading once it is known to be a regular file (see the module docstring: FIFOs,
    sockets and devices are refused, opening a FIFO never blocks; symbolic links as the caller says)."""
    path = Path(path)
    if inside is not None:
        try:
            path.resolve().relative_to(Path(inside).resolve())
        except (OSError, ValueError):
            raise InputError(path, f"the {what} lies outside {inside} (through a symbolic link or '..'); "
                                   f"only files inside it are read") from None
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InputError(path, f"{what} not found") from None
    except IsADirectoryError:
        raise InputError(path, f"is a folder, not {_article(what)} {what}") from None
    except ValueError:  # a NUL byte in the path
        raise InputError(path, f"the {what}'s path holds a NUL byte; no file can have that name") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:
            raise InputError(path, "is a symbolic link; SegScope reads only regular files here") from None
        raise InputError(path, f"cannot read ({exc.strerror or exc})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a folder" if stat.S_ISDIR(mode) else "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else \
            "a socket" if stat.S_ISSOCK(mode) else "a device"
        raise InputError(path, f"is {kind}, not {_article(what)} {what}")
    if hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_bytes(path: Path, what: str = "file", max_bytes: int = MAX_FILE_BYTES, follow_symlinks: bool = True,
               inside: Path | None = None) -> bytes:
    """A whole regular file of at most `max_bytes`; every refusal is one line naming the file."""
    with open_regular(path, what, follow_symlinks, inside) as f:
        try:
            size = os.fstat(f.fileno()).st_size
            data = f.read(size + 1) if size <= max_bytes else b""  # (a 4 GiB read buffer costs ~9 ms per call)
            if len(data) > size:  # it grew meanwhile
                data += f.read(max_bytes + 1 - len(data))
        except OSError as exc:
            raise InputError(path, f"cannot read ({exc.strerror or exc})") from None
    if size > max_bytes or len(data) > max_bytes:
        raise InputError(path, f"the {what} is {max(size, len(data)):,} bytes, over the limit of {max_bytes:,} "
                               f"bytes for {_article(what)} {what}: is it the right file?")
    return data


def decode_text(data: bytes, source: object, what: str = "file") -> str:
    """UTF-8 text (a leading byte-order mark dropped), or a one-line error naming the first bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(source, f"the {what} is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None


def read_text(path: Path, what: str = "file", max_bytes: int = MAX_TEXT_BYTES, follow_symlinks: bool = True,
              inside: Path | None = None) -> str:
    """A UTF-8 text file, with one-line errors for what is missing, unreadable, too large or not UTF-8."""
    return decode_text(read_bytes(path, what, max_bytes, follow_symlinks, inside), path, what)


def read_json(path: Path, what: str = "file", max_bytes: int = MAX_TEXT_BYTES, follow_symlinks: bool = True,
              inside: Path | None = None) -> object:
    """A JSON file read and parsed within bounds (`untrusted_json.parse_json`)."""
    return parse_json(read_text(path, what, max_bytes, follow_symlinks, inside), path)


def read_csv(path: Path, what: str = "CSV file", max_bytes: int = MAX_TEXT_BYTES) -> list[tuple[int, list[str]]]:
    """A CSV file's rows with their line numbers (bytes that are not UTF-8 replaced: tools write local
    encodings into names); a malformed row or an overlong cell is one line naming the file and line."""
    text = read_bytes(path, what, max_bytes).decode("utf-8-sig", errors="replace")
    reader = csv.reader(io.StringIO(text))
    rows = []
    while True:
        line = reader.line_num + 1
        try:
            rows.append((line, next(reader)))
        except StopIteration:
            return rows
        except csv.Error as exc:
            raise InputError(path, f"line {line}: not a CSV row ({exc}): is it the right file?") from None


def image_header_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from an image file's header without decoding, or None when it cannot be read."""
    return header_size(data)


def _check_pixels(width: int, height: int, source: str, max_pixels: int) -> None:
    if width * height > max_pixels:
        raise SegScopeError(
            f"{source}: image is {width}x{height} = {width * height:,} pixels, over the limit of "
            f"{max_pixels:,} (raise it with --max-pixels if the file is trusted)"
        )


#: What to do with an image file cut short or damaged.
DAMAGED_ADVICE = "replace it with an intact copy (a copy or download cut short, or a file still being written)"


def checked_size(data: bytes, source: str, max_pixels: int = DEFAULT_MAX_PIXELS) -> tuple[int, int]:
    """(width, height) from the header of an image SegScope decodes, within `max_pixels`; else the one-line
    error a decode would give."""
    kind = image_format(data)
    size = header_size(data) if kind else None
    if size is None:
        if kind:
            raise SegScopeError(f"{source}: not a readable image (its {kind} header is damaged or truncated); "
                                f"{DAMAGED_ADVICE}")
        raise SegScopeError(f"{source}: not a readable image (PNG, JPEG, TIFF, BMP, WebP, GIF or PNM)")
    _check_pixels(*size, source, max_pixels)
    return size


def _decode(data: bytes, source: str, flags: int, max_pixels: int, box: Roi | None = None) -> np.ndarray | None:
    """imdecode after the header's size passed the limit; formats whose header cannot be read are refused.
    `box` (inside the image by its header): only its pixels, the same as the whole decode's; a PNG is then
    decoded only down to its bottom row (`png.top_rows`), and plain PNGs by libpng through imagecodecs
    (`png.decode`). None where the decoder turned the image (an EXIF orientation): the box is not its pixels."""
    kind = image_format(data)
    size = checked_size(data, source, max_pixels)
    try:
        image = png.decode(data, flags, box.as_tuple() if box is not None else None) if kind == "PNG" else None
    except png.Damaged:
        image = None  # OpenCV's decode says what is wrong, as without the faster path
    if image is None:
        shortened = png.top_rows(data, box.y1) if box is not None else None
        with native_stderr_captured():  # (libpng warns of the image data a shortened PNG leaves unread)
            image = cv2.imdecode(np.frombuffer(shortened or data, np.uint8), flags)
        if image is not None and box is not None:
            if shortened is None and image.shape[1::-1] != size:
                return None
            image = np.ascontiguousarray(image[box.y0 : box.y1, box.x0 : box.x1])
    if image is None:
        raise SegScopeError(f"{source}: not a readable image ({kind} data is damaged or truncated); {DAMAGED_ADVICE}")
    if box is None:
        _check_pixels(image.shape[1], image.shape[0], source, max_pixels)
    return image


def _eight_bits(image: np.ndarray) -> np.ndarray:
    """16-bit PNG/TIFF pixels scaled to 8 bits, as the SDK's u8 pipeline expects them."""
    if image.dtype != np.uint8:
        return cv2.convertScaleAbs(image, alpha=255.0 / float(np.iinfo(image.dtype).max))  # type: ignore[type-var]
    return image


def decode_image(data: bytes, source: str = "<image>", flags: int = cv2.IMREAD_COLOR,
                 max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Decode encoded image bytes; IMREAD_COLOR gives H x W x 3 BGR uint8 as the MindX decoder does."""
    image = _decode(data, source, flags, max_pixels)
    assert image is not None  # (only a box can be turned)
    return _eight_bits(image)


def decode_box(data: bytes, source: str, box: Roi, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray | None:
    """`decode_image(data)[box]` for a `box` inside the image by its header, decoding what it needs (`_decode`);
    None where the decoder turns the image (an EXIF orientation), so the box is not where the header says."""
    image = _decode(data, source, cv2.IMREAD_COLOR, max_pixels, box)
    return None if image is None else _eight_bits(image)


def image_size(path: Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> tuple[int, int]:
    """(width, height) of an image file from its header (a TIFF's may need the whole file)."""
    try:
        with open(path, "rb") as f:
            head = f.read(65536)
    except OSError:
        head = read_bytes(path)  # raises the one-line error
    size = header_size(head) if image_format(head) != "TIFF" else _tiff_size(path)
    if size is None:
        data = read_bytes(path)
        size = header_size(data)
        if size is None:
            _decode(data, str(path), cv2.IMREAD_UNCHANGED, max_pixels)  # raises the one-line error
    assert size is not None
    _check_pixels(*size, str(path), max_pixels)
    return size


def _tiff_size(path: Path) -> tuple[int, int] | None:
    """A TIFF's first image size from its directories (tifffile reads only those), or None if it cannot."""
    try:  # imported here: the remote worker runs this module on hosts that may lack tifffile
        import tifffile

        with tifffile.TiffFile(path) as tif:
            page = tif.pages.first
            return int(page.imagewidth), int(page.imagelength)
    except Exception:  # tifffile's own error types on damaged files: the whole-file path reports them
        return None


def read_image(path: Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Read an image file as H x W x 3 BGR uint8 (1-channel files are expanded, as imdecode does)."""
    return decode_image(read_bytes(path), str(path), cv2.IMREAD_COLOR, max_pixels)


def read_mask(path: Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Read a mask as H x W uint8 values by `masks.to_mask` (16-bit 0/1 stays 0/1; a colour mask is refused)."""
    return decode_mask(read_bytes(path), str(path), max_pixels)


def decode_mask(data: bytes, source: str, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """A mask file's bytes as `read_mask` reads them."""
    mask = _decode(data, source, cv2.IMREAD_UNCHANGED, max_pixels)
    assert mask is not None  # (only a box can be turned)
    return to_mask(mask, source)


def _new_file_mode(replaced: Path) -> int | None:
    """The permission bits a write should end with: the replaced file's, or None for the umask default."""
    try:
        return replaced.stat().st_mode & 0o7777
    except OSError:
        return None


def write_temp(path: Path, data: bytes | Callable[[BinaryIO], object]) -> Path:
    """`data` in a new, fsynced temporary file beside `path` (see `TEMP_NAME`), with the mode `path` will
    have: the umask's default for a new file, the current one's when it replaces a file. `data`: the bytes, or
    what writes them into the open file (a large file is never held whole)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.{os.getpid()}@{HOST}.tmp")
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
                break
            except FileExistsError:
                continue
    except OSError as exc:
        raise SegScopeError(f"{path}: cannot write here ({exc.strerror}); choose another folder") from None
    with removed_on_failure(tmp, path), os.fdopen(fd, "wb") as f:
        mode = _new_file_mode(path)
        if mode is not None and hasattr(os, "fchmod"):
            os.fchmod(f.fileno(), mode)
        if isinstance(data, bytes):
            f.write(data)
        else:
            data(f)
        f.flush()
        os.fsync(f.fileno())
    return tmp


@contextlib.contextmanager
def removed_on_failure(tmp: Path, path: Path) -> Iterator[None]:
    """Delete the temporary file `tmp` (on its way to `path`) when the block fails; a failed write is one line
    naming `path`."""
    try:
        yield
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise SegScopeError(f"{path}: write failed ({exc.strerror or exc}); nothing was changed") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def publish(tmp: Path, path: Path, overwrite: bool = False) -> Path:
    """Move the temporary file `tmp` to `path`. Without `overwrite` the move never replaces a file (a hard
    link, which fails when `path` exists, even one created a moment ago); the temp file is gone either way."""
    with removed_on_failure(Path(tmp), path):  # (a move that succeeded took the temp file with it)
        if overwrite:
            os.replace(tmp, path)
            return path
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise SegScopeError(f"{path}: already exists (use --overwrite to replace it)") from None
        except OSError as exc:
            if exc.errno not in _NO_HARD_LINKS:
                raise
            if path.exists():  # a file system without hard links: check, then rename
                raise SegScopeError(f"{path}: already exists (use --overwrite to replace it)") from None
            os.rename(tmp, path)
            return path
        os.unlink(tmp)
    return path


def process_alive(pid: int) -> bool:
    """Whether process `pid` of this machine runs (one of another user counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, OverflowError):
        return True  # another user's process, or a number this system cannot ask about: assume alive
    return True


def stale_temp(path: Path) -> bool:
    """Whether a `write_temp` file was provably left by a dead writer: its process (named in the file name, on
    this machine) is gone; one of another machine or without a process id only once `TEMP_STALE_SECONDS` old.
    A live writer's file, even one whose process id a new process reuses, is never taken for stale."""
    found = TEMP_NAME.match(Path(path).name)
    if found is None:
        return False
    if found["pid"] is not None and found["host"] == HOST and not process_alive(int(found["pid"])):
        return True
    try:
        return time.time() - Path(path).lstat().st_mtime > TEMP_STALE_SECONDS
    except OSError:
        return False


def remove_stale_temps(folder: Path) -> list[Path]:
    """Remove the temporary files killed writers left in `folder` (`stale_temp`; a live writer's stay),
    returning those removed (each logged). Reading the folder is O(its entries): writers call it once per
    folder and process (`clean_once`)."""
    removed: list[Path] = []
    try:
        with os.scandir(folder) as entries:
            found = [Path(e.path) for e in entries if TEMP_NAME.match(e.name) and e.is_file(follow_symlinks=False)]
    except OSError:
        return removed
    for path in found:
        if stale_temp(path):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path)
                log.warning("%s: removed a temporary file an interrupted write left", path)
    return removed


_cleaned: set[str] = set()


def clean_once(folder: Path) -> None:
    """`remove_stale_temps(folder)` the first time this process writes there."""
    key = os.path.abspath(folder)
    if key not in _cleaned:
        _cleaned.add(key)
        remove_stale_temps(Path(folder))


#: A folder with less free space than this is said to be full (`why_unwritable`): a run's result or a mask is more.
MIN_FREE_BYTES = 64 << 20


def why_unwritable(folder: Path) -> str:
    """Why nothing can be kept in `folder` ("" when something can): read-only (its file system, or for this
    user) or full; asked once, when a dataset opens, so the user hears it before any work is done."""
    try:
        info = os.statvfs(folder)
    except (OSError, AttributeError):  # (no statvfs on Windows: the permission check alone)
        info = None
    if info is not None and info.f_flag & getattr(os, "ST_RDONLY", 1):
        return "it is on a read-only file system"
    if not os.access(folder, os.W_OK):
        return "the folder is read-only for this user"
    if info is not None and info.f_bavail * info.f_frsize < MIN_FREE_BYTES:
        return f"its disk is full ({info.f_bavail * info.f_frsize >> 20} MiB free)"
    return ""


def gone(folder: Path, what: str) -> SegScopeError | None:
    """The error for a write into `folder` when it no longer is there (renamed, moved or removed since it was
    opened): a writer must not recreate it under its old name. None while it is a folder."""
    if Path(folder).is_dir():
        return None
    return SegScopeError(f"{folder}: the folder is gone (renamed, moved or removed since it was opened); {what}: "
                         "reopen the dataset where it is now")


def _stale(folder: Path) -> bool:
    """A staging folder whose writer is gone: its lock is free (or it never got one and is an hour old)."""
    lock = folder / STAGING_LOCK
    if not lock.exists():
        try:
            return time.time() - folder.stat().st_mtime > 3600
        except OSError:
            return False
    try:
        FolderLock(lock, "staging").acquire().release()
    except SegScopeError:
        return False  # held: its writer is alive
    return True


def remove_stale_staging(parent: Path) -> None:
    """Remove the staging folders (`staging_folder`) that killed writers left in `parent`, each logged."""
    try:
        found = [p for p in Path(parent).iterdir() if p.name.startswith(STAGING_PREFIX) and p.is_dir()]
    except OSError:
        return
    for folder in found:
        if _stale(folder):
            shutil.rmtree(folder, ignore_errors=True)
            log.warning("%s: removed a staging folder left by an interrupted run", folder)


@contextlib.contextmanager
def staging_folder(parent: Path) -> Iterator[Path]:
    """A new hidden folder in `parent` where a writer makes files before publishing them (renames from it
    stay on one file system). It is locked while the writer lives and removed when the block ends; those
    that killed writers left in `parent` are removed first, so debris never outlives the next run."""
    parent = Path(parent)
    try:
        parent.mkdir(parents=True, exist_ok=True)
        remove_stale_staging(parent)
        folder = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=parent))
    except OSError as exc:
        raise SegScopeError(f"{parent}: cannot write here ({exc.strerror}); choose another folder") from None
    lock = FolderLock(folder / STAGING_LOCK, "staging").acquire()
    try:
        yield folder
    finally:
        lock.release()
        shutil.rmtree(folder, ignore_errors=True)


def refuse_folder(path: Path, option: str = "") -> None:
    """One line when `path`, to be written as a file, is a folder (`option` names the flag that gave it): said
    before any work, not as a failed rename at the end, and not as a file that `--overwrite` would replace."""
    if path.is_dir():
        raise SegScopeError(f"{option}{' ' if option else ''}{path}: is a folder; give the path of a file to write")


def atomic_write_bytes(path: Path, data: bytes | Callable[[BinaryIO], object], overwrite: bool = False) -> Path:
    """Write `data` (the bytes, or what writes them into the open file) to `path` via a temp file + move; refuse
    to replace an existing file unless asked. The first write into a folder removes the temporary files killed
    writers left there (`clean_once`)."""
    path = Path(path)
    refuse_folder(path)
    if path.exists() and not overwrite:
        raise SegScopeError(f"{path}: already exists (use --overwrite to replace it)")
    clean_once(path.parent)
    return publish(write_temp(path, data), path, overwrite)


def encode_image(image: np.ndarray, suffix: str = ".png") -> bytes:
    ok, buf = cv2.imencode(suffix, image)
    if not ok:
        raise SegScopeError(f"cannot encode a {image.shape} {image.dtype} array as {suffix}")
    return buf.tobytes()


def write_image(path: Path, image: np.ndarray, overwrite: bool = False) -> Path:
    """Encode by the file's suffix (.png, .tif, .jpg) and write atomically."""
    return atomic_write_bytes(path, encode_image(image, Path(path).suffix.lower() or ".png"), overwrite)


@functools.lru_cache(maxsize=32)
def _sha256_cached(path: Path, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file; remembered while the file's size and modification time stay the same."""
    path = Path(path).resolve()
    try:
        stat = path.stat()
    except OSError as exc:
        raise SegScopeError(f"{path}: cannot hash ({exc.strerror})") from None
    return _sha256_cached(path, stat.st_size, stat.st_mtime_ns)
