"""The one registry of backend kinds: each kind's label, how to open it, whether it can run here (and why not)
and how it opens one stream per device (`--devices`).

The CLI, the Backend dialog, the remote worker (`core.remote.server`), the Dask workers (`core.cluster.worker`)
and `core.backend_spec` (which composes a kind with where it runs) read it; no backend module imports it back.
Backends are imported when opened: the MindX SDK exists only on Ascend hosts.

Adding a backend: write its module (a `base.Backend`), then add one `BackendKind(...)` line to `BACKENDS` below
with its opener (and, where it applies, its availability check, its per-device opener and what `auto` looks
for). The CLI's `--backend` choices, the dialog's radio buttons and the worker's `--backend` follow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import ApiUnavailable, SegScopeError
from ..fileio import DEFAULT_MAX_PIXELS
from ..pipeline import card_source
from .base import Backend


def _open_embedded(pipeline: Path, max_pixels: int, sdk_home: Path | None) -> tuple[Backend, str]:
    from .embedded import EmbeddedBackend

    return EmbeddedBackend(pipeline, max_pixels=max_pixels), "embedded backend requested"


def _refuse_card(pipeline: Path, kind: str) -> None:
    if card_source(pipeline) is not None:
        raise SegScopeError(f"{pipeline}: a model card runs without a pipeline, but --backend {kind} runs MindX "
                            "pipelines: give its .om to --backend mindx-model or ais-bench, or give the pipeline")


def _open_mindx(pipeline: Path, max_pixels: int, sdk_home: Path | None) -> tuple[Backend, str]:
    from .mindx import MindXBackend

    _refuse_card(pipeline, "mindx")
    return MindXBackend(pipeline, sdk_home, max_pixels=max_pixels), ""


def _mindx_devices(pipeline: Path, devices: Sequence[int], max_pixels: int, sdk_home: Path | None) -> Backend:
    from .mindx import MindXBackend

    _refuse_card(pipeline, "mindx")
    return MindXBackend(pipeline, sdk_home, max_pixels=max_pixels, devices=devices)


def _mindx_problem(sdk_home: Path | None) -> str:
    from .mindx_env import sdk_problem

    return sdk_problem(sdk_home)


def _embedded_devices(pipeline: Path, devices: Sequence[int], max_pixels: int, sdk_home: Path | None) -> Backend:
    from .pool import embedded_sessions

    return embedded_sessions(pipeline, devices, max_pixels)


def _model_api(pipeline: Path, max_pixels: int, sdk_home: Path | None) -> tuple[Backend, str]:
    from .mindx_model import ModelApiBackend

    return ModelApiBackend(pipeline, sdk_home=sdk_home, max_pixels=max_pixels), ""


def _model_api_devices(pipeline: Path, devices: Sequence[int], max_pixels: int, sdk_home: Path | None) -> Backend:
    from .mindx_model import ModelApiBackend

    return ModelApiBackend.on_devices(pipeline, devices, max_pixels, sdk_home)


def _model_api_problem(sdk_home: Path | None) -> str:
    from .mindx_model import model_api_problem

    return model_api_problem(sdk_home)


def _ais_bench(pipeline: Path, max_pixels: int, sdk_home: Path | None) -> tuple[Backend, str]:
    from .aisbench import AisBenchBackend

    return AisBenchBackend(pipeline, max_pixels=max_pixels), ""


def _ais_bench_devices(pipeline: Path, devices: Sequence[int], max_pixels: int, sdk_home: Path | None) -> Backend:
    from .aisbench import AisBenchBackend

    return AisBenchBackend.on_devices(pipeline, devices, max_pixels)


def _ais_bench_problem(sdk_home: Path | None) -> str:
    from .aisbench import ais_bench_problem

    return ais_bench_problem(sdk_home)


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


@dataclass(frozen=True)
class BackendKind:
    """One way to run the stream on the machine SegScope (or its remote worker) runs on."""

    name: str
    label: str  # for choosers: what runs where
    opener: Callable[[Path, int, Path | None], tuple[Backend, str]]
    problem: Callable[[Path | None], str] = lambda _sdk_home: ""
    #: One stream per device here (`--devices`): (pipeline, device ids, max pixels, SDK home) -> the backend.
    on_devices: Callable[[Path, Sequence[int], int, Path | None], Backend] | None = None
    api: str = ""  # what `auto` looks for, for its notes
    detected: bool = False  # `auto` tries it (in registry order) before falling back to embedded
    runs_cards: bool = True  # runs a model card without a pipeline (--model)

    def available(self, sdk_home: Path | None = None) -> tuple[bool, str]:
        """(whether it can run here, why not)."""
        why = self.problem(sdk_home)
        return not why, why

    def open(self, pipeline: Path, max_pixels: int = DEFAULT_MAX_PIXELS,
             sdk_home: Path | None = None) -> tuple[Backend, str]:
        """The opened backend and a note (why "auto" fell back, say)."""
        return self.opener(pipeline, max_pixels, sdk_home)


#: Every backend by name. "auto" (the default) picks the first detected kind that opens (the MindX stream for a
#: pipeline, then the Model API, then ais_bench) and falls back to embedded, here or on a remote host.
BACKENDS: dict[str, BackendKind] = {kind.name: kind for kind in (
    BackendKind("auto", "MindX SDK when it imports, else its Model API, else ais_bench, else embedded", _open_auto),
    BackendKind("embedded", "Embedded: ONNX Runtime + OpenCV on this machine", _open_embedded,
                on_devices=_embedded_devices),
    BackendKind("mindx", "MindX SDK on this Ascend host", _open_mindx, _mindx_problem, _mindx_devices,
                api="MindX SDK", detected=True, runs_cards=False),
    BackendKind("mindx-model", "MindX Model API (mindx.sdk): the model's .om on this Ascend host", _model_api,
                _model_api_problem, _model_api_devices, api="MindX Model API", detected=True),
    BackendKind("ais-bench", "ais_bench (msit benchmark): the model's .om on this Ascend host", _ais_bench,
                _ais_bench_problem, _ais_bench_devices, api="ais_bench", detected=True),
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


def open_on_devices(name: str, pipeline: Path, devices: Sequence[int], max_pixels: int = DEFAULT_MAX_PIXELS,
                    sdk_home: Path | None = None) -> Backend:
    """The kind `name` once per device; "auto" takes the first detected kind whose API is found, else embedded."""
    chosen = backend_kind(name)
    if chosen.name == "auto":
        found = [kind for kind in _detected(pipeline) if not kind.problem(sdk_home)]
        chosen = found[0] if found else BACKENDS["embedded"]
    assert chosen.on_devices is not None
    return chosen.on_devices(pipeline, devices, max_pixels, sdk_home)
