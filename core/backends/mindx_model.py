"""`--backend mindx-model`: a bare `.om` through the MindX SDK's Python V2 API (`mindx.sdk`, MindX SDK 3.0+).

It follows docs/mindx-model-api-contract.md (from Vision SDK's `docs/zh/api/api_Python.md` and the
`mxBase/src/python` bindings):

- `base.mx_init()` once per process before any other call (it returns a code; 0 = OK), and `base.mx_deinit()`
  once, after every Model and Tensor is gone: the SDK initialises once per process, while the viewer opens and
  closes backends several times a session, so each backend drops its objects at `close` and the process
  deinitialises at exit.
- `base.Model(path, deviceId)`, positional (the bindings take `*args`); a failed load raises RuntimeError with
  the same "initialize failed" code whatever the cause (device id, file, memory), so the message lists them.
- The input as `base.Tensor(array)` (which copies the array's memory as it lies: SegScope hands it contiguous
  arrays), `.to_device(deviceId)`, then `model.infer([tensor])`, which raises RuntimeError or, when the SDK's
  own input checks fail, returns an empty list; each output `.to_host()`, then `np.array(output)`.
- One class instance per thread at a time (the SDK's rule): each backend serialises its calls (`OmBackend`).
"""

from __future__ import annotations

import atexit
import importlib
import sys
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ApiUnavailable, BackendError
from .mindx_env import SETUP_HINT, locate, sdk_version
from .mindx_sdk import error_meaning
from .npu_model import OmBackend, OmFacts, OmTensor, dtype_name

_PACKAGE, _PACKAGE_FILE = "mindx", "mindx/sdk/__init__.py"
_LOG_HINT = "the MindX log says why (~/log/mindxsdk/logs)"


def _not_found(tried: list[str]) -> str:
    return f"MindX Model API (mindx.sdk) not found: tried {'; '.join(tried)}: {SETUP_HINT}"


def unavailable(sdk_home: Path | None = None) -> str:
    """"" when `mindx.sdk` can be found (nothing is imported), else why not."""
    if "mindx.sdk" in sys.modules:
        return ""
    found, _home, tried = locate(sdk_home, _PACKAGE, _PACKAGE_FILE)
    return "" if found else _not_found(tried)


def import_model_api(sdk_home: Path | None = None) -> tuple[ModuleType, str]:
    """`mindx.sdk.base` from `sdk_home`, `$MX_SDK_HOME/python` or the installed `mindx` wheel, and its version."""
    found, home, tried = locate(sdk_home, _PACKAGE, _PACKAGE_FILE)
    if not found and "mindx.sdk" not in sys.modules:
        raise ApiUnavailable(_not_found(tried))
    if home is not None and str(home / "python") not in sys.path:
        sys.path.insert(0, str(home / "python"))
    try:
        sdk = importlib.import_module("mindx.sdk")
    except ImportError as exc:
        raise ApiUnavailable(f"MindX Model API (mindx.sdk) in {home / 'python' if home else 'PYTHONPATH'}: cannot "
                             f"import it ({exc}); its libraries are not loadable from this process: {SETUP_HINT}") \
            from None
    from importlib import metadata  # ~25 ms: only once the API was found

    try:
        version = metadata.version(_PACKAGE)  # Vision SDK installs mindx as a wheel
    except metadata.PackageNotFoundError:  # MindX SDK 3.0/5.0: "MindX SDK mxVision:5.0.0" in version.info
        version = sdk_version(home).rsplit(":", 1)[-1].strip()
    return sdk.base, version


@dataclass
class _ProcessState:
    """What the SDK allows once per process: the initialised `base` module, and the backends holding models."""

    base: Any = None
    backends: weakref.WeakSet[ModelApiBackend] = field(default_factory=weakref.WeakSet)


_PROCESS = _ProcessState()


def _initialise(base: Any) -> None:
    if _PROCESS.base is None:
        code = base.mx_init()
        if code != 0:
            raise BackendError(f"MindX Model API: mx_init failed with code {code} ({error_meaning(code)}): check that "
                               f"the Ascend driver sees its devices (npu-smi info); {_LOG_HINT}")
        _PROCESS.base = base


def deinitialise() -> None:
    """`mx_deinit` once, after closing every backend still open (their Models must go first); at exit."""
    base = _PROCESS.base
    if base is None:
        return
    for backend in list(_PROCESS.backends):
        backend.close()
    _PROCESS.base = None
    base.mx_deinit()


atexit.register(deinitialise)


class ModelApiBackend(OmBackend):
    """Run a model card's `.om` (or a pipeline's) through `mindx.sdk.base.Model` on one device."""

    kind = "mindx-model"
    api = "MindX Model API"

    def _load(self, sdk_home: Path | None) -> tuple[OmFacts, str]:
        base, version = import_model_api(sdk_home)
        _initialise(base)
        try:
            model = base.Model(str(self.om), self.device)
        except RuntimeError as exc:
            raise self.failure("loading the model", exc, "check the device id (npu-smi info lists this host's "
                                                         "chips), that the .om was converted for this chip (atc "
                                                         f"--soc_version) and that the device has free memory; "
                                                         f"{_LOG_HINT}") from None
        facts = OmFacts(
            tuple(OmTensor(f"input{i}", dtype_name(model.input_dtype(i)), tuple(model.input_shape(i)))
                  for i in range(model.input_num)),
            tuple(OmTensor(f"output{i}", dtype_name(model.output_dtype(i)), tuple(model.output_shape(i)))
                  for i in range(model.output_num)),
            getattr(model.input_format, "name", None),
            tuple(tuple(int(v) for v in gear) for gear in model.model_gear()))
        self._base, self._model = base, model
        _PROCESS.backends.add(self)
        return facts, version

    def _execute(self, tensor: np.ndarray) -> tuple[list[np.ndarray], float | None]:
        try:
            sent = self._base.Tensor(tensor)
            sent.to_device(self.device)
        except RuntimeError as exc:
            raise self.failure("copying the input to the device", exc, "the device may be out of memory (npu-smi "
                                                                       f"info shows its use); {_LOG_HINT}") from None
        try:
            outputs = self._model.infer([sent])
        except RuntimeError as exc:
            raise self.failure("inference", exc, _LOG_HINT) from None
        if not outputs:
            raise self.failure("inference", "Model.infer returned no outputs",
                               f"the SDK refused the input or the model failed; {_LOG_HINT}")
        arrays = []
        try:
            for output in outputs:
                output.to_host()
                arrays.append(np.array(output))
        except RuntimeError as exc:
            raise self.failure("copying the outputs to the host", exc, _LOG_HINT) from None
        return arrays, None

    def _release(self) -> None:
        self._model = None
        _PROCESS.backends.discard(self)


#: The registry's openers (`core.backends.registry`).
open_here = ModelApiBackend.open_here
open_on_devices = ModelApiBackend.open_on_devices
