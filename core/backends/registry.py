"""The one registry of backend kinds: each kind's label, how to open it, whether it can run here (and why not)
and how it opens one stream per device (`--devices`).

The CLI, the Backend dialog, the remote worker (`core.remote.server`), the Dask workers (`core.cluster.worker`)
and `core.backend_spec` (which composes a kind with where it runs) read it; no backend module imports it back.
A kind's module is imported when it is opened or asked whether it can run: the MindX SDK exists only on Ascend
hosts, and no module imports its API before it opens.

Adding a backend: write its module in `core/backends/` (a `base.Backend`) with these functions

    open_here(pipeline: Path, max_pixels: int, sdk_home: Path | None) -> Backend
    # optional: one stream per device (`--devices`, refused without it)
    open_on_devices(pipeline: Path, devices: Sequence[int], max_pixels: int, sdk_home: Path | None) -> Backend
    # optional: why it cannot run here, "" when it can, without importing its API
    unavailable(sdk_home: Path | None) -> str

then add one `BackendKind("name", "label", "module", ...)` line to `BACKENDS` below. The CLI's `--backend`
choices, the Backend dialog's radio buttons, `auto` (with `detected=True`) and the remote worker follow.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType

from ..errors import ApiUnavailable, SegScopeError
from ..files.fileio import DEFAULT_MAX_PIXELS
from ..files.kinds import card_source
from .base import Backend


@dataclass(frozen=True)
class BackendKind:
    """One way to run the stream on the machine SegScope (or its remote worker) runs on."""

    name: str
    label: str  # for choosers: what runs where
    module: str = ""  # its module in core.backends; "" for auto, which picks among the others
    api: str = ""  # the Ascend API it drives, for auto's notes and choosers ("" for embedded)
    detected: bool = False  # `auto` tries it (in registry order) before falling back to embedded
    runs_cards: bool = True  # runs a model card without a pipeline (--model)
    note: str = ""  # the remote worker's note when asked for it by name

    def _module(self) -> ModuleType:
        return importlib.import_module(f"{__package__}.{self.module}")

    def problem(self, sdk_home: Path | None = None) -> str:
        """Why it cannot run here ("" when it can), found without importing its API."""
        check = getattr(self._module(), "unavailable", None) if self.module else None
        return check(sdk_home) if check is not None else ""

    def available(self, sdk_home: Path | None = None) -> tuple[bool, str]:
        """(whether it can run here, why not)."""
        why = self.problem(sdk_home)
        return not why, why

    def open(self, pipeline: Path, max_pixels: int = DEFAULT_MAX_PIXELS,
             sdk_home: Path | None = None) -> tuple[Backend, str]:
        """The opened backend and a note (why "auto" passed each Ascend API over, say)."""
        if not self.module:
            return _open_auto(pipeline, max_pixels, sdk_home)
        self._refuse_card(pipeline)
        self._refuse_missing_api(sdk_home)
        return self._module().open_here(pipeline, max_pixels, sdk_home), self.note

    def open_on_devices(self, pipeline: Path, devices: Sequence[int], max_pixels: int = DEFAULT_MAX_PIXELS,
                        sdk_home: Path | None = None) -> Backend:
        """One stream per device here (`--devices`); "auto" takes the first detected kind whose API is found,
        else embedded."""
        if not self.module:
            found = [kind for kind in _detected(pipeline) if not kind.problem(sdk_home)]
            return (found[0] if found else BACKENDS["embedded"]).open_on_devices(pipeline, devices, max_pixels,
                                                                                  sdk_home)
        self._refuse_card(pipeline)
        self._refuse_missing_api(sdk_home)
        opener = getattr(self._module(), "open_on_devices", None)
        if opener is None:
            raise SegScopeError(f"--devices: --backend {self.name} runs one stream; drop --devices")
        return opener(pipeline, devices, max_pixels, sdk_home)

    def _refuse_missing_api(self, sdk_home: Path | None) -> None:
        """Asked for by name on a machine without its API: that is said first (an absent .om is the lesser news)."""
        why = self.problem(sdk_home)
        if why:
            raise ApiUnavailable(why)

    def _refuse_card(self, pipeline: Path) -> None:
        if not self.runs_cards and card_source(pipeline) is not None:
            others = " or ".join(kind.name for kind in BACKENDS.values() if kind.api and kind.runs_cards)
            raise SegScopeError(f"{pipeline}: a model card runs without a pipeline, but --backend {self.name} runs "
                                f"MindX pipelines: give its .om to --backend {others}, or give the pipeline")


#: Every backend by name. "auto" (the default) picks the first detected kind that opens (the MindX stream for a
#: pipeline, then the Model API, then ais_bench) and falls back to embedded, here or on a remote host.
BACKENDS: dict[str, BackendKind] = {kind.name: kind for kind in (
    BackendKind("auto", "MindX SDK when it imports, else its Model API, else ais_bench, else embedded"),
    BackendKind("embedded", "Embedded: ONNX Runtime + OpenCV on this machine", "embedded",
                note="embedded backend requested"),
    BackendKind("mindx", "MindX SDK on this Ascend host", "mindx", "MindX SDK", detected=True, runs_cards=False),
    BackendKind("mindx-model", "MindX Model API (mindx.sdk): the model's .om on this Ascend host", "mindx_model",
                "MindX Model API", detected=True),
    BackendKind("ais-bench", "ais_bench (msit benchmark): the model's .om on this Ascend host", "aisbench",
                "ais_bench", detected=True),
)}
BACKEND_KINDS = tuple(BACKENDS)
#: The kinds a user picks among in a chooser (the viewer's Backend dialog): all but "auto".
CHOSEN_KINDS = tuple(name for name in BACKENDS if name != "auto")


def backend_kind(name: str, what: str = "--backend") -> BackendKind:
    kind = BACKENDS.get(name)
    if kind is None:
        raise SegScopeError(f"{what}: unknown backend {name!r}; choose from {', '.join(BACKEND_KINDS)}")
    return kind


def open_kind(name: str, pipeline: Path, max_pixels: int | None = None,
              sdk_home: Path | None = None) -> tuple[Backend, str]:
    """The kind `name` opened on `pipeline` here (None: the default size limit), and its note (why "auto" passed
    each Ascend API over)."""
    return backend_kind(name).open(pipeline, max_pixels or DEFAULT_MAX_PIXELS, sdk_home)


def _detected(pipeline: Path) -> list[BackendKind]:
    """The kinds `auto` tries, in registry order: the MindX stream (pipelines only), the Model API, ais_bench."""
    card = card_source(pipeline) is not None
    return [kind for kind in BACKENDS.values() if kind.detected and (kind.runs_cards or not card)]


def _pick(pipeline: Path, max_pixels: int, sdk_home: Path | None) -> tuple[Backend, list[str], list[str], list[str]]:
    """The first detected kind that opens, else embedded; why each one before it was passed over (in full), the
    APIs not found here, and the reasons of those found but not importable."""
    passed: list[str] = []
    missing: list[str] = []
    broken: list[str] = []
    for kind in _detected(pipeline):
        why = kind.problem(sdk_home)
        if why:
            missing.append(kind.api)
        else:
            try:
                backend, _ = kind.open(pipeline, max_pixels, sdk_home)
                break
            except ApiUnavailable as exc:  # found but not importable here; any other failure is the user's to see
                why = str(exc)
                broken.append(why)
        passed.append(f"{kind.api} not usable here: {why}")
    else:
        backend, _ = BACKENDS["embedded"].open(pipeline, max_pixels, sdk_home)
    return backend, passed, missing, broken


def _open_auto(pipeline: Path, max_pixels: int, sdk_home: Path | None) -> tuple[Backend, str]:
    """`_pick`, the note its full reasons; its choice and short reasons also in the capabilities' "auto" detail
    (printed by the CLI), unless no Ascend API is here at all: embedded then, quietly, as auto has always meant."""
    backend, passed, missing, broken = _pick(pipeline, max_pixels, sdk_home)
    name = backend.capabilities.name
    if name != "embedded" or broken:
        short = "; ".join(([f"not found here: {', '.join(missing)}"] if missing else []) + broken)
        said = f"picked {name}" + (f" ({short})" if short else "")
        backend.capabilities = replace(backend.capabilities, details={**backend.capabilities.details, "auto": said})
    return backend, " | ".join(passed)
