"""The fake Ascend host behind the `mindx.sdk` and `ais_bench` test doubles: its chips, their memory, and `.om`
files that run (written from docs/mindx-model-api-contract.md and docs/ais-bench-contract.md, independently of
SegScope's code).

A real `.om` is ATC's compiled network; here one is a small JSON stand-in that records what ATC was told:

    {"fake_om": 1, "onnx": "net.onnx", "input_format": "NCHW", "aipp": "aipp_op { ... }" | null,
     "dynamic_batch": [1, 2, 4] | null, "input_fp16": false, "output_fp16": false}

(the ONNX file beside the stand-in, the AIPP config's text compiled in). Loading it opens its ONNX file in this
module's own ONNX Runtime session and describes the model as ACL does: with a static AIPP config the input becomes
uint8 N x H x W x 3 (the pixels, format NHWC) and the AIPP is done here in NumPy (`rbuv_swap_switch`, then (x -
mean_chn - min_chn) * var_reci_chn, in float64) before the network; `input_fp16`/`output_fp16` give float16 tensors
as ATC's `--input_fp16_nodes` / `--output_type=FP16` do; `dynamic_batch` (ATC `--dynamic_batch_size`) makes the
input batch -1 and the output batch the largest gear until one is set. Anything else is a model that fails to load.

The host has `FAKE_ASCEND_DEVICES` chips (default 1) of `FAKE_ASCEND_DEVICE_MEMORY` bytes each (default 8 GiB),
read when this module is first imported (a fresh import is a fresh process). A loaded model holds its ONNX
file's size plus its input and output buffers on its chip, a tensor moved to a chip its size; both are freed
when the object is collected. `EXEC_TIMES` records each run's compute time in ms, `LOG` the error log.
"""

from __future__ import annotations

import json
import os
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort

DEVICES = int(os.environ.get("FAKE_ASCEND_DEVICES", "1"))
DEVICE_MEMORY = int(os.environ.get("FAKE_ASCEND_DEVICE_MEMORY", str(8 << 30)))
USED = dict.fromkeys(range(DEVICES), 0)
LOG: list[str] = []
EXEC_TIMES: list[float] = []
#: ACL's aclDataType codes, by NumPy name (base.dtype and aclruntime.dtype number their members so).
ACL_TYPES = {"float32": 0, "float16": 1, "int8": 2, "int32": 3, "uint8": 4, "int16": 6, "uint16": 7, "uint32": 8,
             "int64": 9, "uint64": 10, "float64": 11, "bool": 12}
_ORT_TYPES = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(int32)": "int32",
              "tensor(int64)": "int64", "tensor(uint8)": "uint8", "tensor(int8)": "int8", "tensor(bool)": "bool"}


class DeviceError(Exception):
    """A failure the chip reports; `code` is the ACL/MxBase code the APIs turn into their own errors."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        LOG.append(message)


def check_device(device: int) -> None:
    if not 0 <= device < DEVICES:
        raise DeviceError(1013, f"Get wrong device Id({device}), which should be in range[0, {DEVICES - 1}].")


def reserve(owner: object, device: int, size: int) -> weakref.finalize:
    """Hold `size` bytes on `device` until `owner` is collected or the returned finalizer is called (ACL's
    aclrtMalloc fails with code 2 when the chip is full)."""
    check_device(device)
    if USED[device] + size > DEVICE_MEMORY:
        raise DeviceError(2, f"aclrtMalloc failed: {size} bytes on device {device} ({USED[device]} of "
                             f"{DEVICE_MEMORY} in use)")
    USED[device] += size
    return weakref.finalize(owner, _free, device, size)


def _free(device: int, size: int) -> None:
    USED[device] -= size


def _read_aipp(text: str) -> tuple[bool, np.ndarray, np.ndarray]:
    """(rbuv_swap_switch, mean_chn + min_chn, var_reci_chn) of a static `aipp_op { key : value }` block."""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.split("#")[0].partition(":")
        if sep:
            fields[key.strip()] = value.strip()

    def per_channel(name: str, default: float) -> np.ndarray:
        return np.array([float(fields.get(f"{name}_{c}", default)) for c in range(3)])

    return (fields.get("rbuv_swap_switch") == "true", per_channel("mean_chn", 0) + per_channel("min_chn", 0),
            per_channel("var_reci_chn", 1))


@dataclass(frozen=True)
class Desc:
    """An input or output as ACL describes it: name, dtype (NumPy name), format (0 NCHW, 1 NHWC), shape."""

    name: str
    dtype: str
    format: int
    shape: tuple[int, ...]

    def size(self, batch: int) -> int:
        return int(np.prod([batch if d < 0 else d for d in self.shape])) * np.dtype(self.dtype).itemsize


class OmModel:
    """A loaded `.om` stand-in on one chip."""

    def __init__(self, path: str, device: int):
        check_device(device)
        om = Path(path)
        try:
            spec = json.loads(om.read_text(encoding="utf-8"))
            assert spec.pop("fake_om") == 1
            network = om.parent / spec.pop("onnx")
            self.session = ort.InferenceSession(str(network), providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - a corrupt .om, whatever is wrong with it
            raise DeviceError(100000 + 7, f"aclmdlLoadFromFile failed for {path}: not an offline model ({exc})") \
                from None
        self.device = device
        self.nhwc = spec.pop("input_format", "NCHW") == "NHWC"
        aipp = spec.pop("aipp", None)
        self.aipp = _read_aipp(aipp) if aipp else None
        self.gears = tuple(spec.pop("dynamic_batch", None) or ())
        fp16_in, fp16_out = spec.pop("input_fp16", False), spec.pop("output_fp16", False)
        assert not spec, f"unknown stand-in fields {sorted(spec)}"
        onnx_input = self.session.get_inputs()[0]
        dims = list(onnx_input.shape)
        batch = -1 if self.gears else 1
        if self.aipp is not None:
            height, width = (dims[1], dims[2]) if self.nhwc else (dims[2], dims[3])
            self.input = Desc(onnx_input.name, "uint8", 1, (batch, height, width, 3))
        else:
            self.input = Desc(onnx_input.name, "float16" if fp16_in else "float32", int(self.nhwc),
                              (batch, *dims[1:]))
        top = max(self.gears) if self.gears else 1

        def output(meta: ort.NodeArg) -> Desc:
            dtype = _ORT_TYPES[meta.type]
            return Desc(meta.name, "float16" if fp16_out and dtype.startswith("float") else dtype, 1,
                        (top, *meta.shape[1:]))

        self.outputs = tuple(output(meta) for meta in self.session.get_outputs())
        reserve(self, device, network.stat().st_size + self.input.size(top) + sum(o.size(top) for o in self.outputs))

    def run(self, batch: np.ndarray) -> list[np.ndarray]:
        """The network on an input batch of the model's input type; outputs in the model's output types."""
        if batch.shape[0] != 1 and not self.gears:
            raise DeviceError(1004, "static batch 1 model")
        start = time.perf_counter()
        pixels = batch.astype(np.float64)
        if self.aipp is not None:
            swap, offset, scale = self.aipp
            pixels = ((pixels[..., ::-1] if swap else pixels) - offset) * scale
            pixels = pixels if self.nhwc else pixels.transpose(0, 3, 1, 2)
        outputs = self.session.run(None, {self.input.name: np.ascontiguousarray(pixels, np.float32)})
        EXEC_TIMES.append((time.perf_counter() - start) * 1000)
        return [np.ascontiguousarray(value, desc.dtype) for value, desc in zip(outputs, self.outputs)]
