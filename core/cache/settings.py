"""Where the cache lives and whether it is on, in one place for the CLI, the viewer and the library.

The folder is, first to last: what the command line configured (`configure`: `--cache-dir`, `--no-cache`,
`--cache-size`), `$SEGSCOPE_CACHE_DIR` (the test suite points it at a temporary folder), else the platform's
user cache folder (`platformdirs`: `~/.cache/segscope` on Linux, `~/Library/Caches/segscope` on macOS,
`%LOCALAPPDATA%\\segscope\\Cache` on Windows). `$SEGSCOPE_NO_CACHE=1` turns it off. Decoded inputs live in
its `decoded/` folder under a size cap, int8 models in `int8/`, OpenVINO's compiled models in `openvino/`.

A cache that cannot be opened (a read-only folder, a host without the cache's libraries: the remote worker)
is said once and left off: the run decodes as it would without one.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the store needs diskcache, which a remote host may lack: imported when it is opened
    from .store import EntryStore

ENV_DIR, ENV_OFF, ENV_SIZE = "SEGSCOPE_CACHE_DIR", "SEGSCOPE_NO_CACHE", "SEGSCOPE_CACHE_SIZE_GB"
#: The decoded inputs' size cap unless configured: about 400 demo ROIs (1800 x 1800 x 3 bytes each).
DEFAULT_SIZE_GB = 4.0
#: Its folders: decoded inputs (the size-capped store), int8 models, OpenVINO's compiled models (its CACHE_DIR).
DECODED, INT8, OPENVINO = "decoded", "int8", "openvino"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CacheSettings:
    root: Path | None  # None: the default (environment, then the platform's user cache folder)
    enabled: bool = True
    size_gb: float | None = None  # None: $SEGSCOPE_CACHE_SIZE_GB, else DEFAULT_SIZE_GB

    @property
    def folder(self) -> Path:
        if self.root is not None:
            return self.root
        if os.environ.get(ENV_DIR):
            return Path(os.environ[ENV_DIR]).expanduser()
        import platformdirs  # imported here: the remote worker imports this module on hosts without it

        return Path(platformdirs.user_cache_path("segscope", appauthor=False))

    @property
    def on(self) -> bool:
        return self.enabled and os.environ.get(ENV_OFF, "") in ("", "0")

    @property
    def size_bytes(self) -> int:
        size = self.size_gb if self.size_gb is not None else float(os.environ.get(ENV_SIZE) or DEFAULT_SIZE_GB)
        return int(size * (1 << 30))


_lock = threading.Lock()
_settings = CacheSettings(None)
#: The store opened for the settings in force (one at a time: a store of earlier settings is closed).
_opened: tuple[tuple[Path, int], EntryStore | None] | None = None


def configure(root: Path | None = None, enabled: bool = True, size_gb: float | None = None) -> CacheSettings:
    """This process's cache settings from now on (the command line's options); returns them."""
    global _settings
    with _lock:
        _settings = CacheSettings(Path(root).expanduser() if root is not None else None, enabled, size_gb)
        return _settings


def current() -> CacheSettings:
    return _settings


def kept_folder(name: str) -> Path | None:
    """The cache's folder `name` (INT8, OPENVINO), where models are kept between runs (None: the cache is off,
    they are made anew)."""
    settings = _settings
    return settings.folder / name if settings.on else None


def decoded_store() -> EntryStore | None:
    """The store of decoded inputs under the current settings, opened once per process (None: off, or it
    cannot be opened here, said once)."""
    settings = _settings
    if not settings.on:
        return None
    global _opened
    key = (settings.folder / DECODED, settings.size_bytes)
    with _lock:
        if _opened is None or _opened[0] != key:
            if _opened is not None and _opened[1] is not None:
                _opened[1].close()
            _opened = key, _open(*key)
        return _opened[1]


def _open(folder: Path, size: int) -> EntryStore | None:
    try:
        from .store import EntryStore
    except ImportError as exc:  # a host without diskcache/xxhash (the remote worker's): decode every time
        log.debug("decoded-input cache off: %s", exc)
        return None
    from .store import UNUSABLE

    try:
        return EntryStore(folder, size)
    except UNUSABLE as exc:
        log.warning("%s: cannot use the decoded-input cache folder (%s); decoding every image (choose another "
                    "with --cache-dir, or --no-cache; `segscope cache clear` empties a damaged one)", folder,
                    getattr(exc, "strerror", None) or exc)
        return None
