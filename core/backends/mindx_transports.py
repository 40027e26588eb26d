"""How `mindx.MindXBackend` sends an image into a MindX stream and reads its result back (`Transport`), one of:

- "protobuf" (the default): `SendData` + `GetProtobuf` on the tensorinfer key, raw tensor bytes read with
  `np.frombuffer` (dtype from `tensorDataType`). A `mxpi_dumpdata` right before the appsink is left out of the
  stream, because it replaces the buffer (and its metadata) with JSON.
- "json": `SendData` + `GetResult` on a stream that ends in `mxpi_dumpdata` (base64 JSON, slow).
- "unique_id": `SendDataWithUniqueId` + `GetResultWithUniqueId` on such a stream.

The first send fixes the SDK's mode, so one backend uses one transport for all its requests. A result without
a tensorinfer entry (no valid ROI box: the crop plugin passes the buffer on) is an error, never an empty result.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np

from ..errors import BackendError
from ..result import Placement
from ..roi import Roi
from ..stream.pipeline import Element, Stream
from .mindx_env import MindXSdk
from .mindx_sdk import LOG_HINT, SdkSession, check_code

TRANSPORTS = ("auto", "protobuf", "json", "unique_id")

#: `MxpiTensor.tensorDataType` -> numpy dtype (MxBase TensorDataType.h).
TENSOR_DTYPES = {0: "<f4", 1: "<f2", 2: "i1", 3: "<i4", 4: "u1", 6: "<i2", 7: "<u2", 8: "<u4", 9: "<i8",
                 10: "<u8", 11: "<f8", 12: "?"}


@dataclass
class Pending:
    """An image sent into the stream, waiting for its result."""

    ticket: int | None  # the unique id, or None for first-in first-out collection
    roi: Roi  # as requested
    box: Roi  # as cropped: x1/y1 clipped to the image
    image_size: tuple[int, int]
    source: str
    timings: dict[str, float] = field(default_factory=dict)
    placement: Placement | None = None  # the request's (a slide region): results map back to the slide
    stream: bytes = b""  # the stream (device) it was sent to
    sent: float = 0.0  # time.perf_counter() at the send


def _sink_feeder(stream: Stream) -> Element | None:
    """The element right before the stream's appsink, if there is exactly one."""
    feeders = [e for e in stream.elements.values() if stream.output_element.name in e.next]
    return feeders[0] if len(feeders) == 1 else None


def _without_element(config: dict[str, Any], stream: str, name: str) -> None:
    """Drop element `name` from a pipeline JSON, linking what fed it to what it fed."""
    elements = config[stream]
    removed = elements.pop(name)
    after = removed.get("next", [])
    for element in elements.values():
        if not isinstance(element, dict) or "next" not in element:
            continue
        links = [element["next"]] if isinstance(element["next"], str) else element["next"]
        if any(link.split(":")[0] == name for link in links):
            element["next"] = after


def _tensor(key: str, index: int, code: int, shape: list[int], data: bytes) -> np.ndarray:
    dtype = TENSOR_DTYPES.get(code)
    if dtype is None:
        raise BackendError(f"{key}: output {index} has tensorDataType {code}, not a MindX tensor type")
    expected = math.prod(shape) * np.dtype(dtype).itemsize
    if len(data) != expected:
        raise BackendError(f"{key}: output {index} holds {len(data)} bytes but shape {shape} of "
                           f"{np.dtype(dtype)} needs {expected} (mxpi_dumpdata with dumpMemoryData false "
                           f"sends no tensor data)")
    return np.frombuffer(data, dtype).reshape(shape)


class Transport:
    """One transport (`name`, not "auto") reading the tensors of infer element `key`, waiting `timeout_s`."""

    def __init__(self, name: str, key: str, timeout_s: float):
        self.name, self.key, self.timeout_s = name, key, timeout_s

    def shape(self, config: dict[str, Any], stream: Stream, where: str) -> None:
        """Shape the pipeline JSON for this transport: protobuf leaves the appsink's mxpi_dumpdata out; the
        others need one that keeps `key`."""
        feeder = _sink_feeder(stream)
        dump = feeder if feeder is not None and feeder.factory == "mxpi_dumpdata" \
            and not feeder.props.get("location") else None
        if self.name == "protobuf":
            if dump is not None:
                _without_element(config, stream.name, dump.name)
            return
        if dump is None:
            raise BackendError(f"{where}: transport {self.name!r} reads mxpi_dumpdata's JSON, but no "
                               f"mxpi_dumpdata (without 'location') feeds the appsink: "
                               f"use transport 'protobuf'")

        def keys(prop: str) -> list[str]:
            return [k.strip() for k in dump.props.get(prop, "").split(",") if k.strip()]

        if (keys("requiredMetaDataKeys") and self.key not in keys("requiredMetaDataKeys")) \
                or self.key in keys("filterMetaDataKeys"):
            raise BackendError(f"{where}, element {dump.name!r}: its metadata keys leave out {self.key!r}: "
                               f"set requiredMetaDataKeys to {self.key!r}")

    def send(self, session: SdkSession, stream: bytes, appsrc: int | bytes, item: Any) -> int | None:
        """Send `item` into `stream`; its unique id (None where results come first-in first-out)."""
        if self.name == "unique_id":
            ticket: int = session.call(session.api.SendDataWithUniqueId, stream, appsrc, item)
            if ticket < 0:
                check_code("SendDataWithUniqueId", ticket)
            return ticket
        check_code("SendData", session.call(session.api.SendData, stream, appsrc, item))
        return None

    def receive_call(self, session: SdkSession, sdk: MindXSdk,
                     pending: Pending) -> tuple[Callable[..., Any], tuple[Any, ...], str]:
        """The SDK call that reads `pending`'s result: (function, arguments, its name)."""
        api, timeout_ms = session.api, int(self.timeout_s * 1000)
        if self.name == "protobuf":
            keys = sdk.api.StringVector()
            keys.push_back(self.key.encode())
            return api.GetProtobuf, (pending.stream, 0, keys), "GetProtobuf"
        if self.name == "json":
            return api.GetResult, (pending.stream, 0, timeout_ms), "GetResult"
        return api.GetResultWithUniqueId, (pending.stream, pending.ticket, timeout_ms), "GetResultWithUniqueId"

    def tensors(self, sdk: MindXSdk, call: str, output: Any, pending: Pending,
                fail: Callable[[str], NoReturn]) -> list[np.ndarray]:
        """The infer element's output tensors in `call`'s answer; `fail` ends the stream when results are out of
        step for good."""
        if call == "GetProtobuf":
            return self._parse_protobuf(sdk, output, pending)
        return self._parse_json(call, output, pending, fail)

    def _no_result(self, pending: Pending) -> BackendError:
        width, height = pending.image_size
        return BackendError(f"MindX stream {pending.stream.decode()!r} returned no {self.key} result for "
                            f"ROI {pending.roi} of the {width}x{height} image {pending.source}: the crop "
                            f"plugin found no valid box (keep it inside the image, 1..8192 px per side) or a "
                            f"plugin failed ({LOG_HINT})")

    def _parse_protobuf(self, sdk: MindXSdk, outputs: Any, pending: Pending) -> list[np.ndarray]:
        package_list = None
        for output in outputs:
            check_code("GetProtobuf", output.errorCode, output.messageName)
            if output.messageName == self.key.encode():
                package_list = sdk.proto.MxpiTensorPackageList()
                package_list.ParseFromString(output.messageBuf)
        if package_list is None or not package_list.tensorPackageVec:
            raise self._no_result(pending)
        return [_tensor(self.key, i, t.tensorDataType, list(t.tensorShape), t.dataStr)
                for i, t in enumerate(package_list.tensorPackageVec[0].tensorVec)]

    def _parse_json(self, call: str, output: Any, pending: Pending,
                    fail: Callable[[str], NoReturn]) -> list[np.ndarray]:
        if output.errorCode != 0:
            hint = ""
            if output.errorCode == 2001:
                hint = f" (ROI {pending.roi} of the {pending.image_size[0]}x{pending.image_size[1]} image " \
                       f"{pending.source}: keep it inside the image, 1..8192 px per side)"
            if output.errorCode == 1002 and self.name == "json":
                # The late result would be read as the next image's: results are out of step for good.
                fail(f"MindX GetResult timed out after {self.timeout_s:g} s for {pending.source}")
            check_code(call, output.errorCode, output.data, hint)
        try:
            document = json.loads(output.data)
            entry = next((m for m in document.get("metaData", []) if m.get("key") == self.key), None)
            if entry is None:
                raise self._no_result(pending)
            packages = json.loads(entry["content"]).get("tensorPackageVec") or []
            if not packages:
                raise self._no_result(pending)
            tensors = packages[0].get("tensorVec", [])
            return [_tensor(self.key, i, int(t.get("tensorDataType", 0)), [int(d) for d in t["tensorShape"]],
                            base64.b64decode(t.get("dataStr", "")))
                    for i, t in enumerate(tensors)]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise BackendError(f"MindX {call}: the result is not mxpi_dumpdata JSON of {self.key} "
                               f"({exc})") from None
