"""The open backend, without Qt: `Inference` opens a `BackendSpec` (the CLI's value; the viewer's Backend dialog
makes one, `segscope.open` another) and runs the session's run jobs on it. Its methods run on the one thread that
owns the backend: the viewer's backend lane, a script's own thread. `cancel` of the backend aside, nothing else
touches it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Union

from ..backend_spec import BackendSpec, open_backend
from ..backends.base import Backend, Capabilities
from ..backends.pool import UsageLog
from .jobs import Progress, RunJob
from .running import RunStep


@dataclass(frozen=True)
class Usage:
    """Per device or cluster worker, after an image: `UsageLog.as_dicts()`, `UsageLog.lines()`."""

    devices: list[dict[str, object]]
    lines: list[str]


#: What a run yields on the backend's thread, in order: the job's steps, each followed by the devices' counts
#: where the backend keeps them.
Message = Union[RunStep, Usage]


class Inference:
    """The backend open now (None: none is)."""

    def __init__(self) -> None:
        self.backend: Backend | None = None

    def open(self, spec: BackendSpec) -> Capabilities:
        """Close the backend open now, then open `spec`'s; its capabilities."""
        self.close()
        self.backend = open_backend(spec)
        return self.backend.capabilities

    def close(self) -> None:
        backend, self.backend = self.backend, None
        if backend is not None:
            backend.close()

    def run(self, job: RunJob[RunStep], progress: Progress) -> Iterator[Message]:
        """The job's steps on the open backend (None: each image says no backend is open), each followed by the
        devices' counts where the backend keeps them."""
        for step in job.work(self.backend, job.cancel, progress):
            yield step
            usage = getattr(self.backend, "usage", None)
            if isinstance(usage, UsageLog):
                yield Usage(usage.as_dicts(), usage.lines())
