"""Test double of `aclruntime`, the native module under ais_bench's Python API (msit benchmark), written from
docs/ais-bench-contract.md; the `.om` runs on the fake host of tests/mindx/fake_host/ascend_om.py.

Kept from the real module: `InferenceSession(model_path, device_id, options)` (RuntimeError when the model
cannot be loaded: device id, file, memory), `get_inputs()`/`get_outputs()` as `tensor_desc` (name, datatype as
a `dtype` member, format 0 = NCHW / 1 = NHWC, shape with -1 for a dynamic dimension, size, realsize),
`set_staticbatch()`, `set_dynamic_batchsize(b)` (RuntimeError for a batch without a gear), `run(names,
inputs)` on `BaseTensor(address, nbytes)`: the bytes are taken as they lie in memory and read as the model's
input type, with no type check, but a byte count other than the input's realsize is a RuntimeError;
outputs are device `Tensor`s (`to_host()`, then NumPy reads them through `__array_interface__`);
`sumary().exec_time_list` (ms per run, in order), `reset_sumaryinfo()`, `free_resource()`.
"""

from __future__ import annotations

import ctypes
import sys
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fake_host"))  # tests/mindx/fake_host: the chips
import ascend_om as _host  # noqa: E402 - found through the line above

dtype = Enum("dtype", _host.ACL_TYPES)  # the module's enum, numbered as ACL's aclDataType


class tensor_desc:  # noqa: N801
    def __init__(self, desc: Any, batch: int) -> None:
        self.name, self.format, self.shape = desc.name, desc.format, list(desc.shape)
        self.datatype = dtype[desc.dtype]
        self.size = desc.size(max(batch, 1))
        self.realsize = desc.size(batch)


class session_options:  # noqa: N801
    def __init__(self) -> None:
        self.acl_json_path, self.log_level, self.loop = "", 2, 1


class sumary:  # noqa: N801
    def __init__(self, times: list[float]) -> None:
        self.exec_time_list = list(times)


class BaseTensor:
    def __init__(self, address: int, size: int) -> None:
        self.data = ctypes.string_at(address, size)  # the bytes at that address, as the C++ side copies them


class Tensor:
    """An output on the device."""

    def __init__(self, data: np.ndarray, device: int) -> None:
        self._data, self._device = data, device

    def to_host(self) -> None:
        self._device = -1

    @property
    def shape(self) -> list[int]:
        return list(self._data.shape)

    @property
    def __array_interface__(self) -> dict[str, Any]:
        if self._device != -1:
            raise RuntimeError("test double: a device tensor cannot be read on the host (call to_host() first)")
        return self._data.__array_interface__


class InferenceSession:
    def __init__(self, model_path: str, device_id: int, options: session_options) -> None:
        try:
            self._om = _host.OmModel(model_path, device_id)
        except _host.DeviceError as exc:
            raise RuntimeError(f"[ERROR] load model from file failed: {exc}") from None
        self._device = device_id
        self._batch = 1 if not self._om.gears else max(self._om.gears)
        self._times: list[float] = []
        self.freed = False

    def get_inputs(self) -> list[tensor_desc]:
        return [tensor_desc(self._om.input, self._batch)]

    def get_outputs(self) -> list[tensor_desc]:
        return [tensor_desc(desc, self._batch) for desc in self._om.outputs]

    def set_staticbatch(self) -> None:
        self._batch = 1

    def set_dynamic_batchsize(self, batch: int) -> None:
        if batch not in self._om.gears:
            raise RuntimeError(f"[ERROR] set dynamic batch size {batch} failed: the model's gears are "
                               f"{list(self._om.gears)}")
        self._batch = batch

    def get_max_dym_batchsize(self) -> int:
        return max(self._om.gears) if self._om.gears else 0

    def run(self, output_names: list[str], inputs: list[Any]) -> list[Tensor]:
        if self.freed:
            raise RuntimeError("[ERROR] the session's resources were freed")
        if len(inputs) != 1:
            raise RuntimeError(f"[ERROR] input number {len(inputs)} is not the model's 1")
        desc = self.get_inputs()[0]
        data = inputs[0].data if isinstance(inputs[0], BaseTensor) else np.ascontiguousarray(inputs[0]).tobytes()
        if len(data) != desc.realsize:
            raise RuntimeError(f"[ERROR] create tensor failed: input size {len(data)} but the model needs "
                               f"{desc.realsize}")
        shape = tuple(self._batch if d < 0 else d for d in desc.shape)
        batch = np.frombuffer(data, self._om.input.dtype).reshape(shape)
        try:
            outputs = self._om.run(batch)
        except _host.DeviceError as exc:
            raise RuntimeError(f"[ERROR] model execute failed: {exc}") from None
        self._times.append(_host.EXEC_TIMES[-1])
        return [Tensor(output, self._device) for output in outputs]

    def sumary(self) -> sumary:
        return sumary(self._times)

    def reset_sumaryinfo(self) -> None:
        self._times.clear()

    def free_resource(self) -> None:
        self.freed = True
        self._om = None

    def options(self) -> session_options:
        return session_options()
