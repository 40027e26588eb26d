"""Opt-in faster model execution for the embedded backend (`--precision`), each variant checked against fp32.

- int8: ONNX Runtime's static QDQ quantization (per-channel 7-bit int8 weights, uint8 activations, MinMax
  ranges), calibrated on a handful of the dataset's own ROIs made by the stream's own prepare step, so the
  ranges are those of exactly what the model sees. Weights keep 7 bits (`reduce_range`) because x86 CPUs
  without VNNI multiply uint8 x int8 with a saturating 16-bit sum (VPMADDUBSW): full-range weights moved the
  demo's foreground Dice by -0.78 on an AVX2 EPYC, 7-bit ones by at most 0.0009 (ONNX Runtime's quantization
  docs give the same advice). OpenVINO runs the QDQ model with int8 kernels when it is installed
  (measured 1.75-1.98x ONNX Runtime fp32 per image on a 2-core AVX-512 VNNI Xeon, bench/RESULTS.md); without
  it ONNX Runtime runs it (1.2-1.3x there).
- bf16: OpenVINO with bfloat16 inference precision; worth it on CPUs with AMX. On that Xeon (AVX-512 BF16, no
  AMX) it measured 0.7x fp32, slower, so it is there for other machines and says so in --help.

Neither is the default. The first images of a run also run in fp32 on the same tensors, and the run ends
with the foreground Dice of both on them (core.backends.precision_check).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TypeVar

import numpy as np
import onnxruntime as ort

from ..errors import SegScopeError, first_line
from ..files.fileio import atomic_write_bytes, publish, read_bytes, staging_folder
from .base import InferenceRequest
from .embedded import EmbeddedBackend, ModelSession, _Prepared

#: ROIs of the dataset the int8 ranges are calibrated on (spread evenly over the images of the run).
CALIBRATION_IMAGES = 4
ItemT = TypeVar("ItemT")
FAST_EXTRA = 'pip install "segscope[fast]"'
log = logging.getLogger(__name__)
#: What the int8 model is made with; part of the cache key, so changing it never reuses an old file.
QUANTIZATION = "QDQ per-channel 7-bit int8 weights (reduce_range), uint8 activations, MinMax"


#: OpenVINO's model converter, which `import openvino` loads when present (absl, TensorFlow's front end, and it sends
#: a telemetry event); OpenVINO takes its absence as a build without it. SegScope never converts a model.
_CONVERTER = "openvino.tools.ovc"


def import_openvino() -> ModuleType | None:
    """OpenVINO when installed (the optional `fast` extra), else None; its model converter is left out of the
    import (~140 ms less per run), and can still be imported afterwards."""
    blocked = _CONVERTER not in sys.modules
    if blocked:
        sys.modules[_CONVERTER] = None  # type: ignore[assignment]  # (import's own "not installed" marker)
    try:
        import openvino
    except ImportError:
        return None
    finally:
        if blocked and sys.modules.get(_CONVERTER, 0) is None:
            del sys.modules[_CONVERTER]
    return openvino


def cpu_capabilities(openvino: ModuleType) -> list[str]:
    """The precisions OpenVINO's CPU plugin runs natively on this machine (FP32, INT8, BF16 with AVX-512 BF16
    or AMX, ...)."""
    try:
        return [str(c) for c in openvino.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")]
    except Exception:  # OpenVINO's own RuntimeError subclasses: no CPU plugin
        return []


def _version(module: ModuleType) -> str:
    return str(module.__version__).split("-")[0]  # OpenVINO's carries its build: 2026.4.1-22982-...


def spread(items: Sequence[ItemT], count: int = CALIBRATION_IMAGES) -> list[ItemT]:
    """Up to `count` of `items` spread evenly over them (first and last included): what int8 calibrates on."""
    if len(items) <= count:
        return list(items)
    step = (len(items) - 1) / (count - 1)
    return [items[round(i * step)] for i in range(count)]


class OpenVinoSession:
    """An OpenVINO compiled model behind ONNX Runtime's `run(None, feeds)`: outputs in the model's order."""

    def __init__(self, openvino: ModuleType, model: Path, precision_hint: str, threads: int,
                 compiled_cache: Path | None = None):
        """`compiled_cache`: a folder where OpenVINO keeps the compiled model (its CACHE_DIR, checked by OpenVINO
        against the model and settings), so a later run loads it (~0.1 s) instead of compiling it (~0.8 s)."""
        cached = {"CACHE_DIR": str(compiled_cache)} if compiled_cache is not None else {}
        try:
            compiled = openvino.Core().compile_model(str(model), "CPU", {
                "INFERENCE_PRECISION_HINT": precision_hint, "PERFORMANCE_HINT": "LATENCY",
                "INFERENCE_NUM_THREADS": threads, **cached})
        except Exception as exc:  # OpenVINO raises RuntimeError subclasses of its own for unsupported models
            raise SegScopeError(f"{model}: OpenVINO cannot compile the model ({first_line(exc)}); "
                                "run with --precision fp32") from None
        self._request = compiled.create_infer_request()
        self._outputs = list(compiled.outputs)

    def run(self, output_names: None, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        results = self._request.infer(feeds)  # copies the outputs out of the request's buffers
        return [np.asarray(results[output]) for output in self._outputs]


@contextlib.contextmanager
def _quiet_root_logger() -> Iterator[None]:
    """ONNX Runtime's quantizer logs advice through the root logger (and so would install a handler on it)."""
    root = logging.getLogger()
    placeholder = logging.NullHandler()
    root.addHandler(placeholder)
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(previous)
        root.removeHandler(placeholder)


def _calibration_key(model: Path, tensors: list[np.ndarray]) -> str:
    """The model's and the calibration tensors' contents (xxh3-128: the tensors are ~11 MB each) and how they are
    quantized."""
    from ..cache.store import content_digest

    parts = [content_digest(read_bytes(model, "model")), QUANTIZATION, f"onnxruntime {ort.__version__}"]
    parts += [f"{t.shape} {t.dtype.str} {content_digest(np.ascontiguousarray(t).data)}" for t in tensors]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _intact(entry: Path) -> bool:
    """Whether a kept int8 model's bytes are those it was named after (`<...>-<content hash>.onnx`)."""
    try:
        digest = hashlib.sha256(read_bytes(entry, "cached int8 model", follow_symlinks=False)).hexdigest()
    except SegScopeError:
        return False
    return entry.name.endswith(f"-{digest[:16]}.onnx")


def _cached(cache_dir: Path, prefix: str) -> Path | None:
    """The cache entry named `prefix` + its content's hash, checked by that hash; an entry whose bytes no
    longer match (replaced by another model, damaged) is removed, in one line, and None returned."""
    for entry in sorted(cache_dir.glob(f"{prefix}-*.onnx")):
        if _intact(entry):
            return entry
        with contextlib.suppress(OSError):
            entry.unlink()
        log.warning("%s: the cached int8 model does not match its hash (changed since it was made): removed; "
                    "making it again", entry)
    return None


def quantize_int8(backend: EmbeddedBackend, tensors: Sequence[np.ndarray], cache_dir: Path) -> Path:
    """The int8 QDQ model of `backend`'s network calibrated on `tensors` (network inputs `backend.prepare` made),
    made in a staging folder of `cache_dir` and published there as `<model>.int8-<key>-<content hash>.onnx`, or
    found there (and checked by its hash) from an earlier run on the same model and inputs (then the quantizer,
    ~1-2 s to import, is not imported)."""
    model = backend.stream.card.onnx
    assert model is not None  # the backend opened it
    name = backend.stream.card.input_name
    prefix = f"{model.stem}.int8-{_calibration_key(model, list(tensors))}"
    found = _cached(cache_dir, prefix) if cache_dir.is_dir() else None
    if found is not None:
        return found
    try:
        from onnxruntime.quantization import (
            CalibrationDataReader,
            CalibrationMethod,
            QuantFormat,
            QuantType,
            quantize_static,
        )
    except ImportError:
        raise SegScopeError(f"--precision int8 needs the onnx package for ONNX Runtime's quantizer: {FAST_EXTRA}") \
            from None

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.feeds = iter([{name: tensor} for tensor in tensors])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.feeds, None)

    with staging_folder(cache_dir) as staging:
        made = staging / "int8.onnx"
        try:
            with _quiet_root_logger():
                quantize_static(str(model), str(made), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                                activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                                calibrate_method=CalibrationMethod.MinMax, reduce_range=True)
        except OSError as exc:
            raise SegScopeError(f"{cache_dir}: cannot write the int8 model there ({exc.strerror or exc}); "
                                "choose another --precision-cache folder") from None
        except Exception as exc:  # the quantizer's own errors for graphs it cannot handle
            raise SegScopeError(f"{model}: ONNX Runtime cannot quantize the model to int8 ({first_line(exc)}); "
                                "run with --precision fp32") from None
        digest = hashlib.sha256(read_bytes(made, "int8 model")).hexdigest()
        target = cache_dir / f"{prefix}-{digest[:16]}.onnx"
        try:
            publish(made, target)
        except SegScopeError:  # another run made the same model meanwhile: the same bytes, by its name
            pass
    return target


def _guess_note(backend: EmbeddedBackend, requests: Sequence[InferenceRequest], cache_dir: Path | None) -> Path | None:
    """Where `fast_session` notes the int8 model it last took for these calibration files (by path, size and
    time) and this model, so that a repeat run compiles it while its inputs are read; None where nothing is kept or
    the inputs are not files. Only a guess: the inputs' content picks the model (`quantize_int8`)."""
    model = backend.stream.card.onnx
    paths = [r.image for r in requests if isinstance(r.image, Path)]
    if cache_dir is None or model is None or len(paths) != len(requests):
        return None
    try:
        files = [(str(path.resolve()), path.stat()) for path in (model, *paths)]
    except OSError:
        return None  # (the run says what is wrong with the file)
    named = "\n".join([f"{name} {info.st_size} {info.st_mtime_ns}" for name, info in files]
                      + [str(r.roi) for r in requests])
    return cache_dir / f"{model.stem}.int8-last-{hashlib.sha256(named.encode()).hexdigest()[:16]}.txt"


def _guessed(note: Path | None) -> Path | None:
    """The int8 model `note` names, where it is still there as it was made (a model replaced or damaged since
    is made again under the same name: the guess must not be compiled from the old bytes)."""
    try:
        name = note.read_text(encoding="utf-8").strip() if note is not None else ""
    except (OSError, UnicodeDecodeError):
        return None
    found = note.parent / name if note is not None and name and "/" not in name and "\\" not in name else None
    return found if found is not None and _intact(found) else None


@dataclass
class FastSession:
    """A faster variant of a backend's network: the session that runs it, what runs it, notes to print, and the
    run's own requests its int8 model was calibrated on, as prepared (the run reuses them)."""

    session: ModelSession
    runs_on: str
    notes: list[str] = field(default_factory=list)
    prepared: list[tuple[InferenceRequest, _Prepared]] = field(default_factory=list)


def fast_session(backend: EmbeddedBackend, precision: str, requests: Sequence[InferenceRequest],
                 cache_dir: Path | None = None, compiled: Path | None = None) -> FastSession:
    """`backend`'s network at `precision`.

    int8 is calibrated on `requests` (a few of the run's, see `spread`), prepared on threads while OpenVINO is
    imported and the model a run on the same files took last is compiled (`_guess_note`); the model is kept in
    `cache_dir` when given, else made in a staging folder of the temporary folder that is removed once the session
    holds it. `compiled`: where OpenVINO keeps the models it compiled (`OpenVinoSession`)."""
    if precision not in ("int8", "bf16"):
        raise SegScopeError(f"--precision: no faster variant named {precision!r}; choose int8 or bf16")
    threads = backend.session.get_session_options().intra_op_num_threads if backend.session else 1
    guess = _guess_note(backend, requests, cache_dir) if precision == "int8" else None
    early: tuple[Path, OpenVinoSession] | None = None
    with ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="segscope-calibrate") as pool:
        # OpenCV decodes without the GIL, so the calibration inputs are read while OpenVINO's modules load and
        # the int8 model last made from these files is compiled (OpenVinoSession: a guess the inputs decide)
        pending = [pool.submit(backend.prepare, r.image, r.roi) for r in requests] if precision == "int8" else []
        openvino = import_openvino()
        guessed = _guessed(guess)
        if openvino is not None and guessed is not None:
            with contextlib.suppress(SegScopeError):  # (a model that does not compile is no guess)
                early = guessed, OpenVinoSession(openvino, guessed, "f32", threads, compiled)
        prepared = [(request, future.result()) for request, future in zip(requests, pending)]
    if precision == "bf16":
        if openvino is None:
            raise SegScopeError(f"--precision bf16 runs on OpenVINO, which is not installed: {FAST_EXTRA}")
        capabilities = cpu_capabilities(openvino)
        if "BF16" not in capabilities:  # OpenVINO would quietly run fp32 and the run would claim bf16
            raise SegScopeError(f"--precision bf16: this CPU has no bfloat16 support (OpenVINO lists "
                                f"{', '.join(capabilities) or 'nothing'}), so the model would run in fp32: "
                                "use --precision int8 or fp32")
        model = backend.stream.card.onnx
        assert model is not None
        return FastSession(OpenVinoSession(openvino, model, "bf16", threads, compiled),
                           f"OpenVINO {_version(openvino)} bfloat16")
    with contextlib.ExitStack() as stack:
        folder = cache_dir or stack.enter_context(staging_folder(Path(tempfile.gettempdir())))
        model = quantize_int8(backend, [p.tensor for _, p in prepared], folder)
        if guess is not None and guessed != model:
            with contextlib.suppress(SegScopeError):  # (the next run guesses nothing)
                atomic_write_bytes(guess, model.name.encode(), overwrite=True)
        how = f"calibrated on {len(requests)} ROIs"
        if openvino is not None:
            session = early[1] if early is not None and early[0] == model else \
                OpenVinoSession(openvino, model, "f32", threads, compiled)
            return FastSession(session, f"OpenVINO {_version(openvino)} on ONNX Runtime's int8 QDQ model, {how}", [],
                               prepared)
        options = backend.session.get_session_options() if backend.session else ort.SessionOptions()
        try:
            session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # ORT's own exception types
            raise SegScopeError(f"{model}: ONNX Runtime cannot load the int8 model ({first_line(exc)})") from None
        return FastSession(session, f"ONNX Runtime {ort.__version__} int8 QDQ, {how}",
                           [f"OpenVINO is not installed, so ONNX Runtime runs the int8 model (slower): {FAST_EXTRA}"],
                           prepared)
