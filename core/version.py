"""SegScope's version, in one place: `segscope --version`, the viewer's About box, export provenance and the
HTML report all say this."""

from __future__ import annotations

import functools
import platform


@functools.lru_cache(maxsize=1)
def segscope_version() -> str:
    """The installed package's version ("unknown" when SegScope runs without being installed); read once (0.5 ms
    of metadata parsing, which each exported image's provenance paid)."""
    from importlib import metadata  # ~25 ms (email, csv, zipfile...): only when a version is asked for

    try:
        return metadata.version("segscope")
    except metadata.PackageNotFoundError:
        return "unknown"


def version_line() -> str:
    """What `segscope --version` prints: the version and the Python running it."""
    return f"segscope {segscope_version()} (Python {platform.python_version()})"
