"""Inference backends behind one interface (`base.Backend`), opened by kind.

Backends are imported on demand: the MindX SDK exists only on Ascend hosts, paramiko only matters remotely.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import SegScopeError
from ..fileio import DEFAULT_MAX_PIXELS
from .base import Backend

#: Where the stream runs. "auto" (the default) is embedded locally, and MindX-if-importable on a remote host.
BACKEND_KINDS = ("auto", "embedded", "mindx")


def open_backend(kind: str, pipeline: Path, *, max_pixels: int = DEFAULT_MAX_PIXELS, sdk_home: Path | None = None,
                 remote: str | None = None, accept_new_host_key: bool | str = False,
                 set_env: str | None = None, probabilities: str = "uint8", python: str = "python3",
                 remote_cache: str | None = None) -> Backend:
    """Open a backend on `pipeline`; with `remote` ("[user@]host[:port]") the stream runs on that host over SSH,
    sourcing `set_env` there first when given and running the worker with the host's `python`;
    `probabilities` sets how they travel back (uint8, float16 or float32: smallest to exact) and `remote_cache`
    the host folder for the uploaded worker and model (default ~/.cache/segscope)."""
    if kind not in BACKEND_KINDS:
        raise SegScopeError(f"--backend: unknown backend {kind!r}; choose from {', '.join(BACKEND_KINDS)}")
    if remote:
        from ..remote.deploy import DEFAULT_CACHE_DIR
        from .remote import open_remote_backend

        return open_remote_backend(remote, pipeline, accept_new_host_key=accept_new_host_key, worker_backend=kind,
                                   max_pixels=max_pixels, set_env=set_env, probabilities=probabilities, python=python,
                                   cache_dir=remote_cache or DEFAULT_CACHE_DIR)
    if kind == "mindx":
        from .mindx import MindXBackend

        return MindXBackend(pipeline, sdk_home, max_pixels=max_pixels)
    from .embedded import EmbeddedBackend

    return EmbeddedBackend(pipeline, max_pixels=max_pixels)
