"""`--backend ais-bench`: a bare `.om` through ais_bench's Python API (the msit/ait benchmark tool's `aclruntime`
and `ais_bench` wheels), with the NPU's own time per inference.

It follows docs/ais-bench-contract.md (from msit's `docs/benchmark/API_GUIDE.md` and `ais_bench/infer/
interface.py`): `InferSession(device_id, model_path)` loads the model (RuntimeError when it cannot);
`get_inputs()` / `get_outputs()` describe it (name, datatype, format 0 = NCHW / 1 = NHWC, shape with -1 for a
dynamic dimension); `infer(feeds, mode=...)` runs one set of NumPy inputs ("static", or "dymbatch" for a
dynamic-batch `.om`, whose batch it takes from the array) and returns the outputs as NumPy arrays on the host;
`summary().exec_time_list` holds the NPU time of each inference in milliseconds, in order (the last is this
image's: the "device" stage), `reset_summaryinfo()` empties it; `free_resource()` releases the model at close.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ..errors import ApiUnavailable
from .npu_model import OmBackend, OmFacts, OmTensor, dtype_name

_INSTALL_HINT = ("install the aclruntime and ais_bench wheels of Ascend's msit benchmark tool into this Python "
                 "and source /usr/local/Ascend/ascend-toolkit/set_env.sh before starting segscope")
#: `tensor_desc.format` codes (aclFormat).
_FORMATS = {0: "NCHW", 1: "NHWC"}


def unavailable(sdk_home: Path | None = None) -> str:
    """"" when the ais_bench and aclruntime packages can be found (nothing is imported), else why not."""
    missing = [name for name in ("ais_bench", "aclruntime") if importlib.util.find_spec(name) is None]
    return f"ais_bench not found ({' and '.join(missing)} not installed): {_INSTALL_HINT}" if missing else ""


def import_ais_bench() -> tuple[ModuleType, str]:
    """`ais_bench.infer.interface` and the ais_bench version."""
    problem = unavailable()
    if problem:
        raise ApiUnavailable(problem)
    try:
        interface = importlib.import_module("ais_bench.infer.interface")
    except ImportError as exc:
        raise ApiUnavailable(f"ais_bench: cannot import ais_bench.infer.interface ({exc}): {_INSTALL_HINT}") from None
    from importlib import metadata  # ~25 ms: only once the API was found

    try:
        version = metadata.version("ais_bench")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return interface, version


def _facts(descriptions: Any) -> tuple[OmTensor, ...]:
    return tuple(OmTensor(str(d.name), dtype_name(d.datatype), tuple(int(v) for v in d.shape)) for d in descriptions)


class AisBenchBackend(OmBackend):
    """Run a model card's `.om` (or a pipeline's) through `ais_bench.infer.interface.InferSession` on one device."""

    kind = "ais-bench"
    api = "ais_bench"

    def _load(self, sdk_home: Path | None) -> tuple[OmFacts, str]:
        interface, version = import_ais_bench()
        try:
            session = interface.InferSession(self.device, str(self.om))
        except RuntimeError as exc:
            raise self.failure("loading the model", exc, "check the device id (npu-smi info lists this host's "
                                                         "chips), that the .om was converted for this chip and that "
                                                         "the device has free memory") from None
        inputs = session.get_inputs()
        facts = OmFacts(_facts(inputs), _facts(session.get_outputs()),
                        _FORMATS.get(int(inputs[0].format)) if inputs else None)
        self._session = session
        self._mode = "dymbatch" if inputs and list(inputs[0].shape)[:1] == [-1] else "static"
        return facts, version

    def _execute(self, tensor: np.ndarray) -> tuple[list[np.ndarray], float | None]:
        try:
            outputs = self._session.infer([tensor], mode=self._mode)
            device_ms = float(self._session.summary().exec_time_list[-1])
        except RuntimeError as exc:
            raise self.failure("inference", exc, "the device may be out of memory (npu-smi info); with debug logs "
                                                 "(ASCEND_GLOBAL_LOG_LEVEL=1) ACL says why") from None
        self._session.reset_summaryinfo()  # one time per image: the list would grow with every run
        return [np.asarray(output) for output in outputs], device_ms / 1000

    def _release(self) -> None:
        session, self._session = self._session, None
        session.free_resource()


#: The registry's openers (`core.backends.registry`).
open_here = AisBenchBackend.open_here
open_on_devices = AisBenchBackend.open_on_devices
