"""Test double of the MindX SDK's Python V2 API module `mindx.sdk.base` (Vision SDK mxBase/src/python: Base.i,
PyInit, PyModel, PyTensor and the base.patch wrapper; mxBase's MxOmModelDesc for what `infer` checks), written
from docs/mindx-model-api-contract.md. The `.om` runs on the fake host of tests/mindx/fake_host/ascend_om.py.

Kept from the SDK:

- `mx_init()` / `mx_deinit()` return codes (0 = OK); one `mx_init` per process (a second returns 1030, Repeat
  initialize: an assumption, the docs only forbid it); a Model made before `mx_init` fails to load.
- `Model(modelPath, deviceId)` positionally (the bindings take `*args`: a keyword raises TypeError here); every
  load failure (device id outside the host's chips, not a regular file, not `.om`/`.mindir`, a corrupt model,
  no device memory) raises RuntimeError with the same ' (Code = 1013, Message = "initialize failed") '.
- `input_shape(i)` with -1 for a dynamic dimension, `output_shape(i)` with the largest batch gear,
  `input_dtype`/`output_dtype` as `dtype` members, `model_gear()` as [[batch], ...] (or [] for a static model),
  `input_format` as a `visionDataFormat` member, `input_num`, `output_num`.
- `infer([tensor])` (or `infer(tensor, ...)`) runs MxOmModelDesc's checks and returns [] when one fails (too
  many or no inputs, another dtype, another rank or a fixed dimension that differs, a batch without a gear);
  outputs are Tensors on the model's device, a dynamic batch cut to the batch fed.
- `Tensor(array)` copies the array's memory as it lies (a transposed view keeps its untransposed bytes, as the
  SDK docs warn), dtype from the array's typestr (others raise RuntimeError); `to_device(id)` / `to_host()`
  (RuntimeError when the chip is full); `np.array(tensor)` reads host memory through `__array_interface__`, so
  on a device tensor it raises here (the SDK would read a device address).

Introspection for tests (not in the SDK): `CALLS`, and `VIOLATIONS` (uses the docs forbid, such as mx_deinit
while a Model or a device Tensor is alive).
"""

from __future__ import annotations

import sys
import weakref
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "fake_host"))  # tests/mindx/fake_host: the chips
import ascend_om as _host  # noqa: E402 - found through the line above

#: The SDK's names (float64 is "double"), numbered as ACL's aclDataType.
dtype = Enum("dtype", {"undefined": -1, **{"double" if name == "float64" else name: code
                                           for name, code in _host.ACL_TYPES.items()}})


class visionDataFormat(Enum):  # noqa: N801
    NCHW = 0
    NHWC = 1


undefined, float32, float16, int8, int32 = dtype.undefined, dtype.float32, dtype.float16, dtype.int8, dtype.int32
uint8, int16, uint16, uint32, int64 = dtype.uint8, dtype.int16, dtype.uint16, dtype.uint32, dtype.int64
uint64, double = dtype.uint64, dtype.double
NCHW, NHWC = visionDataFormat.NCHW, visionDataFormat.NHWC

_CODES = {"f4": dtype.float32, "f2": dtype.float16, "i1": dtype.int8, "i4": dtype.int32, "u1": dtype.uint8,
          "i2": dtype.int16, "u2": dtype.uint16, "u4": dtype.uint32, "i8": dtype.int64, "u8": dtype.uint64,
          "f8": dtype.double, "b1": dtype.bool}
_NUMPY = {member: np.dtype(code) for code, member in _CODES.items()}
_MESSAGES = {1004: "Invalid parameter", 1007: "memory allocation error", 1013: "initialize failed"}

CALLS: list[tuple[str, tuple[Any, ...]]] = []
VIOLATIONS: list[str] = []
_STATE = {"initialised": False}
_ALIVE: weakref.WeakSet[Any] = weakref.WeakSet()  # Models and device Tensors


def _info(code: int) -> str:
    """MxBase GetErrorInfo: codes below 1000 are ACL's, in hex."""
    if code < 1000:
        return f' (Code = 0x{code:X}, Message = "Himpi error, please refer to the document of CANN.") '
    return f' (Code = {code}, Message = "{_MESSAGES.get(code, "General Failed")}") '


def mx_init(*args: Any) -> int:
    CALLS.append(("mx_init", args))
    if _STATE["initialised"]:
        return 1030
    _STATE["initialised"] = True
    return 0


def mx_deinit() -> int:
    CALLS.append(("mx_deinit", ()))
    if len(_ALIVE):
        VIOLATIONS.append(f"mx_deinit with {len(_ALIVE)} Model or device Tensor object(s) alive")
    _STATE["initialised"] = False
    return 0


class Tensor:
    def __init__(self, *args: Any) -> None:
        if len(args) != 1:
            raise TypeError("Tensor(buffer: ndarray)")
        interface = getattr(args[0], "__array_interface__", None)
        if not isinstance(interface, dict):
            raise RuntimeError(_info(1004))
        code = interface["typestr"][1:]
        if code not in _CODES:
            _host.LOG.append("Data type should be one of int8, uint8, ... float32, double, bool.")
            raise RuntimeError(_info(1004))
        array = np.asarray(args[0])
        # The SDK copies nbytes from the buffer's address: the memory as it lies, whatever the strides.
        self._data = np.ravel(array, order="K").reshape(array.shape).copy()
        self._dtype = _CODES[code]
        self._device = -1
        self._held: weakref.finalize | None = None
        CALLS.append(("Tensor", (self._data.shape, self._dtype.name)))

    @property
    def device(self) -> int:
        return self._device

    @property
    def dtype(self) -> dtype:
        return self._dtype

    @property
    def shape(self) -> list[int]:
        return list(self._data.shape)

    def to_device(self, deviceId: int) -> None:  # noqa: N803 - the SDK's name
        CALLS.append(("to_device", (deviceId,)))
        if self._device == deviceId:
            return
        try:
            held = _host.reserve(self, deviceId, self._data.nbytes)
        except _host.DeviceError as exc:
            raise RuntimeError(_info(exc.code)) from None
        self._release()
        self._held, self._device = held, deviceId
        _ALIVE.add(self)

    def to_host(self) -> None:
        CALLS.append(("to_host", ()))
        self._release()
        self._device = -1
        _ALIVE.discard(self)

    def _release(self) -> None:
        if self._held is not None:
            self._held()
            self._held = None

    @property
    def __array_interface__(self) -> dict[str, Any]:
        if self._device != -1:
            raise RuntimeError(f"test double: np.array() of a tensor on device {self._device} reads a device address "
                               "(call to_host() first)")
        return {"version": 2, "typestr": "|" + self._data.dtype.str[1:], "shape": tuple(self._data.shape),
                "data": (self._data.__array_interface__["data"][0], 0)}

    @classmethod
    def _on_device(cls, data: np.ndarray, device: int) -> Tensor:
        tensor = cls(data)
        tensor.to_device(device)
        return tensor


class Model:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if kwargs:
            raise TypeError("Model() takes positional arguments only (the bindings' *args)")
        CALLS.append(("Model", args))
        if not args or not isinstance(args[0], str) or (len(args) > 1 and type(args[1]) is not int) or len(args) > 2:
            raise TypeError("Model(modelPath: str, deviceId: int = 0)")
        path, device = args[0], args[1] if len(args) > 1 else 0
        try:
            if not _STATE["initialised"]:
                raise _host.DeviceError(1013, "MxInit has not been called: call mx_init() first")
            _host.check_device(device)
            if not Path(path).is_file():
                raise _host.DeviceError(1016, "Failed to get model, the model path is invalidate.")
            if Path(path).suffix not in (".om", ".mindir"):
                raise _host.DeviceError(1001, "Model Type is unsupported.")
            self._om = _host.OmModel(path, device)
        except _host.DeviceError:
            raise RuntimeError(_info(1013)) from None
        self._device = device
        _ALIVE.add(self)

    @property
    def input_num(self) -> int:
        return 1

    @property
    def output_num(self) -> int:
        return len(self._om.outputs)

    @property
    def input_format(self) -> visionDataFormat:
        return visionDataFormat(self._om.input.format)

    def input_dtype(self, index: int) -> dtype:
        return _CODES[np.dtype(self._om.input.dtype).str[1:]] if index == 0 else dtype.undefined

    def output_dtype(self, index: int) -> dtype:
        outputs = self._om.outputs
        return _CODES[np.dtype(outputs[index].dtype).str[1:]] if index < len(outputs) else dtype.undefined

    def input_shape(self, index: int) -> list[int]:
        return list(self._om.input.shape) if index == 0 else []

    def output_shape(self, index: int) -> list[int]:
        outputs = self._om.outputs
        return list(outputs[index].shape) if index < len(outputs) else []

    def model_gear(self) -> list[list[int]]:
        return [[gear] for gear in self._om.gears]

    def infer(self, *args: Any) -> list[Tensor]:
        inputs = args[0] if args and isinstance(args[0], list) else list(args)
        CALLS.append(("infer", tuple(getattr(t, "shape", None) for t in inputs)))  # no references kept
        problem = self._check(inputs)
        if problem:
            _host.LOG.append(problem)
            return []
        try:
            outputs = self._om.run(inputs[0]._data)
            return [Tensor._on_device(output, self._device) for output in outputs]
        except _host.DeviceError as exc:
            _host.LOG.append(str(exc))
            return []

    def _check(self, inputs: list[Any]) -> str:
        """MxOmModelDesc::CheckInputTensors, CheckInputDType, CheckInputShape and the dynamic batch's gear."""
        if not inputs or len(inputs) > self.input_num or not all(isinstance(t, Tensor) for t in inputs):
            return "InputTensors is empty or its size is invalid. Please check inputTensors."
        tensor, desc = inputs[0], self._om.input
        if _NUMPY[tensor.dtype] != np.dtype(desc.dtype):
            return f"InputTensor Data Type mismatches: model {desc.dtype}, actual {tensor.dtype.name}"
        if len(tensor.shape) != len(desc.shape) or any(d not in (-1, s) for d, s in zip(desc.shape, tensor.shape)):
            return f"InputTensor Shape mismatches: model {list(desc.shape)}, actual {tensor.shape}"
        if self._om.gears and tensor.shape[0] not in self._om.gears:
            return f"Dynamic batch set failed, dynamicBatchSize = {tensor.shape[0]}"
        return ""


def model(modelPath: str, deviceId: int) -> Model:  # noqa: N803
    return Model(modelPath, deviceId)
