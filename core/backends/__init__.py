"""Inference backends behind one interface (`base.Backend`), opened by kind.

Backends are imported on demand: the MindX SDK exists only on Ascend hosts, paramiko only matters remotely.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import SegScopeError
from .base import Backend

BACKEND_KINDS = ("embedded", "mindx")


def open_backend(kind: str, pipeline: Path, remote: str | None = None, **options: object) -> Backend:
    """Open a backend on `pipeline`; `remote` ("user@host[:port]") runs it on that host over SSH."""
    max_pixels = options.get("max_pixels")
    if remote:
        raise SegScopeError("--remote: remote backend not available yet")
    if kind == "embedded":
        from .embedded import EmbeddedBackend

        return EmbeddedBackend(pipeline, **({"max_pixels": max_pixels} if max_pixels else {}))
    if kind == "mindx":
        from .mindx import MindXBackend

        return MindXBackend(pipeline)
    raise SegScopeError(f"--backend: unknown backend {kind!r}; choose from {', '.join(BACKEND_KINDS)}")
