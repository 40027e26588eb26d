"""Test double of the MindX SDK's `StreamManagerApi` module (VisionSDK `mxStream/src/python`).

It keeps what SegScope relies on from the real SWIG module (see docs/mindx-sdk-contract.md):

- the same classes (StreamManagerApi, MxDataInput, MxDataOutput, RoiBox, RoiBoxVector, StringVector,
  MxProtobufIn/Out, InProtobufVector, OutProtobufVector, ...), field names and method names;
- SWIG's strictness: positional arguments only, every string is `bytes` (the module is built with
  SWIG_PYTHON_STRICT_BYTE_CHAR, a `str` raises TypeError), overloads resolved by argument types;
- the return conventions and codes: -1 before InitManager, 6002 unknown stream, 1004 negative plugin id,
  6006 bad plugin id, 6008 when plain and unique-id sends are mixed, GetResult timeout = 1002 with
  b' (Code = 1002, Message = "Internal error") ', GetResultWithUniqueId timeout = 6010, plugin errors
  with their messages in `data`, GetProtobuf without a timeout and an empty vector for errors;
- the plugins' behaviour: the decoder moves `roiBoxs` to `ExternalObjects`; the crop truncates boxes,
  widens them by its expand ratios, clips x1/y1, skips bad boxes, fails with 2001 when all are bad and
  passes the buffer through (no metadata, no tensorinfer entry) when there are none; mxpi_dumpdata
  replaces the buffer by proto3 JSON (base64 bytes, uint64 as strings), so its output carries no
  metadata for GetProtobuf;
- process-wide state as in the SDK's C++ globals: streams cannot be created again after
  DestroyAllStreams. A fresh import of this module is a fresh process.

Each stream runs on its own thread with its own plain NumPy/OpenCV math, written from the contract and
independent of SegScope's emulation code (so a resize or AIPP bug in SegScope shows up against it):
opencv decode, crop, `cv2.resize` INTER_LINEAR (Resizer_Stretch, the only type the double knows), the
`.om`'s static AIPP from its model card's config, and ONNX Runtime on the card's ONNX export, so results
are real. Relative paths in the config resolve against the
current directory, as in the SDK. Assumptions where the contract says "unconfirmed": a plugin Init failure
returns 1013; several boxes give one tensor package each; `bufferData` is left empty.

Devices: the host has `FAKE_ASCEND_DEVICES` chips (environment, read at import; default 1). A stream's
`stream_config.deviceId` must name one of them (else its Init fails with 1013), and each stream runs on its
own thread as a stream per chip does; tensors come back on the host (outputDeviceId -1: deviceId 0).

Introspection for tests (not in the SDK): `CALLS` records every call, `LOG` the error log, `DEVICE_RUNS`
(device id, stream name) for each buffer a stream processed.
"""

from __future__ import annotations

import json
import os
import queue
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import cv2
import MxpiDataType_pb2
import MxpiDumpData_pb2
import numpy as np
import onnxruntime as ort
from google.protobuf import json_format

DELAY_TIME = 3000
APPSINK_QUEUE_SIZE = 256
OPENCV_CROP_LIMIT = 8192
FACTORIES = ("appsrc", "mxpi_imagedecoder", "mxpi_imagecrop", "mxpi_imageresize", "mxpi_tensorinfer",
             "mxpi_dumpdata", "appsink")

APP_PYTHON_INIT_ERROR = -1
APP_ERR_COMM_INNER = 1002
APP_ERR_COMM_INVALID_PARAM = 1004
APP_ERR_COMM_INIT_FAIL = 1013
APP_ERR_COMM_CROP_FAIL = 2001
APP_ERR_STREAM_EXIST = 6001
APP_ERR_STREAM_NOT_EXIST = 6002
APP_ERR_STREAM_CREATE_FAILED = 6004
APP_ERR_STREAM_INVALID_CONFIG = 6005
APP_ERR_STREAM_INVALID_LINK = 6006
APP_ERR_STREAM_MODE_MISMATCH = 6008
APP_ERR_STREAM_TIMEOUT = 6010
APP_ERR_ELEMENT_INVALID_FACTORY = 6014

_MESSAGES = {
    APP_PYTHON_INIT_ERROR: "The initialization is not performed", APP_ERR_COMM_INNER: "Internal error",
    APP_ERR_COMM_INVALID_PARAM: "Invalid parameter", APP_ERR_STREAM_NOT_EXIST: "Stream not exist",
}
_DTYPE_CODES = {np.dtype(d): c for d, c in (("<f4", 0), ("<f2", 1), ("i1", 2), ("<i4", 3), ("u1", 4),
                                              ("<i2", 6), ("<u2", 7), ("<u4", 8), ("<i8", 9), ("<u8", 10),
                                              ("<f8", 11), ("?", 12))}

CALLS: list[tuple[str, tuple[Any, ...]]] = []
LOG: list[str] = []
DEVICE_RUNS: list[tuple[int, str]] = []
DEVICES = int(os.environ.get("FAKE_ASCEND_DEVICES", "1"))
_PROCESS = {"inited": False, "destroyed": False}


def GetErrorInfo(code: int) -> bytes:
    return f' (Code = {code}, Message = "{_MESSAGES.get(code, "Error")}") '.encode()


# -- SWIG-style argument checking -------------------------------------------------------------------------

class _ArgError(Exception):
    """An argument SWIG would not convert (used to try the next overload)."""


def _convert(value: Any, kind: Any) -> Any:
    """Check `value` against a C++ parameter type the way SWIG's typemaps do."""
    if kind == "string":
        if not isinstance(value, bytes):
            raise _ArgError("std::string")
        return value
    if kind in ("int", "unsigned int", "unsigned long"):
        if not isinstance(value, int):
            raise _ArgError(kind)
        if kind != "int" and value < 0:
            raise _ArgError(kind)
        return value
    if kind == "float":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise _ArgError("float")
        return float(value)
    if isinstance(kind, type) and issubclass(kind, _Vector):
        if isinstance(value, kind):
            return value
        if isinstance(value, (list, tuple)):  # SWIG converts Python sequences to std::vector
            return kind(value)
        raise _ArgError(kind.__name__)
    if not isinstance(value, kind):
        raise _ArgError(kind.__name__)
    return value


def _args(method: str, args: tuple[Any, ...], *overloads: tuple[Any, ...]) -> tuple[int, list[Any]]:
    """(index of the matching overload, converted args) or SWIG's TypeError."""
    for index, kinds in enumerate(overloads):
        if len(args) != len(kinds):
            continue
        try:
            return index, [_convert(a, k) for a, k in zip(args, kinds)]
        except _ArgError as exc:
            if len(overloads) == 1:
                position = next(i for i, (a, k) in enumerate(zip(args, kinds)) if _fails(a, k))
                error = OverflowError if isinstance(args[position], int) else TypeError
                raise error(f"in method '{method}', argument {position + 2} of type '{exc}'") from None
    raise TypeError(f"Wrong number or type of arguments for overloaded function '{method}'.")


def _fails(value: Any, kind: Any) -> bool:
    try:
        _convert(value, kind)
    except _ArgError:
        return True
    return False


class _Struct:
    """A SWIG proxy of a C++ struct: typed fields, no new attributes."""

    _fields: tuple[tuple[str, Any], ...] = ()

    def __init__(self) -> None:
        for name, kind in self._fields:
            default = {"string": b"", "int": 0, "float": 0.0}.get(kind) if isinstance(kind, str) else kind()
            object.__setattr__(self, name, default)

    def __setattr__(self, name: str, value: Any) -> None:
        kind = dict(self._fields).get(name)
        if kind is None:
            raise AttributeError(f"You cannot add instance attributes to {type(self).__name__}")
        try:
            object.__setattr__(self, name, _convert(value, kind))
        except _ArgError as exc:
            raise TypeError(f"in method '{type(self).__name__}_{name}_set', argument 2 of type '{exc}'") from None


class _Vector:
    """A SWIG std::vector proxy: push_back, size, len, indexing, iteration."""

    item: Any = None

    def __init__(self, items: Sequence[Any] = ()) -> None:
        self._items: list[Any] = []
        for item in items:
            self.push_back(item)

    def push_back(self, item: Any) -> None:
        try:
            self._items.append(_convert(item, self.item))
        except _ArgError as exc:
            raise TypeError(f"in method '{type(self).__name__}_push_back', argument 2 of type '{exc}'") from None

    append = push_back

    def size(self) -> int:
        return len(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: int) -> Any:
        return self._items[index]

    def __iter__(self):
        return iter(self._items)


class RoiBox(_Struct):
    _fields = (("x0", "float"), ("y0", "float"), ("x1", "float"), ("y1", "float"))


class RoiBoxVector(_Vector):
    item = RoiBox


class StringVector(_Vector):
    item = "string"


class MxDataInput(_Struct):
    _fields = (("data", "string"), ("fragmentId", "int"), ("customParam", "string"), ("roiBoxs", RoiBoxVector))


class MxDataInputExt(_Struct):
    _fields = (("data", "string"), ("fragmentId", "int"), ("customParam", "string"), ("mxpiFrameInfo", "string"),
               ("mxpiVisionInfo", "string"), ("roiBoxs", RoiBoxVector))


class MxBufferInput(_Struct):
    _fields = (("data", "string"), ("mxpiFrameInfo", "string"), ("mxpiVisionInfo", "string"))


class MxDataOutput(_Struct):
    _fields = (("errorCode", "int"), ("data", "string"))


class MxBufferOutput(_Struct):
    _fields = (("errorCode", "int"), ("errorMsg", "string"), ("data", "string"))


class MxProtobufIn(_Struct):
    _fields = (("key", "string"), ("type", "string"), ("protobuf", "string"))


class MxProtobufOut(_Struct):
    _fields = (("errorCode", "int"), ("messageName", "string"), ("messageBuf", "string"))


class MxMetadataInput(_Struct):
    _fields = (("dataSource", "string"), ("dataType", "string"), ("serializedMetadata", "string"))


class MxMetadataOutput(_Struct):
    _fields = (("errorCode", "int"), ("errorMsg", "string"), ("dataType", "string"), ("serializedMetadata", "string"))


class InProtobufVector(_Vector):
    item = MxProtobufIn


class OutProtobufVector(_Vector):
    item = MxProtobufOut


class MetadataInputVector(_Vector):
    item = MxMetadataInput


class MetadataOutputVector(_Vector):
    item = MxMetadataOutput


class MxBufferAndMetadataOutput(_Struct):
    _fields = (("errorCode", "int"), ("errorMsg", "string"), ("bufferOutput", MxBufferOutput),
               ("metadataVec", MetadataOutputVector))


def _output(code: int, data: bytes) -> MxDataOutput:
    output = MxDataOutput()
    output.errorCode, output.data = code, data
    return output


# -- streams ------------------------------------------------------------------------------------------------

class _PluginError(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


class _Result:
    """What reaches the appsink for one input: an error, or a buffer and its metadata."""

    def __init__(self, code: int, data: bytes, metadata: dict[str, Any] | None = None):
        self.code, self.data, self.metadata = code, data, metadata or {}


class _ConfigError(Exception):
    """The stream config is not one the double can create (CreateMultipleStreams returns 6005)."""


class _Element:
    def __init__(self, name: str, raw: Any):
        if not isinstance(raw, dict) or not isinstance(raw.get("factory"), str):
            raise _ConfigError(f"element {name}: no factory")
        props = raw.get("props", {})
        if not isinstance(props, dict) or not all(isinstance(v, str) for v in props.values()):
            raise _ConfigError(f"element {name}: props must be strings")
        nxt = raw.get("next", [])
        self.name, self.factory, self.props = name, raw["factory"], props
        self.next = [n.split(":")[0] for n in ([nxt] if isinstance(nxt, str) else nxt)]


def _order(elements: dict[str, _Element]) -> list[str]:
    """The chain from the stream's appsrc, following `next` (the double runs linear streams only)."""
    order = [next((n for n, e in elements.items() if e.factory == "appsrc"), "")]
    while order[-1] in elements and elements[order[-1]].next:
        order.append(elements[order[-1]].next[0])
    if any(n not in elements for n in order) or len(order) != len(set(order)):
        raise _ConfigError(f"bad links from {order[0]!r}")
    return order


def _read_aipp(path: Path) -> tuple[bool, np.ndarray, np.ndarray]:
    """(rbuv_swap_switch, offset = mean_chn + min_chn, var_reci_chn) of a static `aipp_op` block."""
    fields = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, sep, value = line.split("#")[0].partition(":")
        if sep:
            fields[key.strip()] = value.strip().strip('"')

    def channels(key: str, default: float) -> np.ndarray:
        return np.array([float(fields.get(f"{key}_{c}", default)) for c in range(3)], np.float64)

    return (fields.get("rbuv_swap_switch") == "true", channels("mean_chn", 0) + channels("min_chn", 0),
            channels("var_reci_chn", 1))


class _Model:
    """The `.om` stand-in: its model card's ONNX export, with the card's AIPP done in NumPy first."""

    def __init__(self, om: Path):
        card_path = om.with_suffix(".json")
        card = json.loads(card_path.read_text(encoding="utf-8"))
        self.input_name = card["input"]["name"]
        self.size = (int(card["input"]["width"]), int(card["input"]["height"]))
        self.nhwc = card["input"].get("layout", "NCHW") == "NHWC"
        self.aipp = _read_aipp(card_path.parent / card["aipp"]) if card.get("aipp") else None
        self.session = ort.InferenceSession(str(card_path.parent / card["onnx"]), providers=["CPUExecutionProvider"])

    def run(self, image: np.ndarray) -> list[np.ndarray]:
        pixels = image.astype(np.float64)
        if self.aipp is not None:
            swap, offset, scale = self.aipp
            pixels = ((pixels[..., ::-1] if swap else pixels) - offset) * scale
        tensor = pixels[None] if self.nhwc else pixels.transpose(2, 0, 1)[None]
        return self.session.run(None, {self.input_name: np.ascontiguousarray(tensor, np.float32)})


class _Stream:
    """One created stream: the elements in order, run on a worker thread per input buffer."""

    def __init__(self, name: str, config: Any):
        if not isinstance(config, dict):
            raise _ConfigError(f"stream {name} is not an object")
        self.elements = {k: _Element(k, v) for k, v in config.items() if k != "stream_config"}
        self.order = _order(self.elements)
        self.name = name
        device = str((config.get("stream_config") or {}).get("deviceId", "0"))
        if not device.isdigit() or int(device) >= DEVICES:
            raise _PluginError(APP_ERR_COMM_INIT_FAIL, f"stream {name}: deviceId {device!r} does not exist "
                                                       f"(this host has {DEVICES} devices)")
        self.device = int(device)
        unknown = [e for e in self.elements.values() if e.factory not in FACTORIES]
        if unknown:
            raise _PluginError(APP_ERR_ELEMENT_INVALID_FACTORY, f"unknown factory {unknown[0].factory!r}")
        infer = next((e for e in self.elements.values() if e.factory == "mxpi_tensorinfer"), None)
        if infer is None or not infer.props.get("modelPath"):
            raise _ConfigError("no mxpi_tensorinfer with a modelPath")
        model = Path(infer.props["modelPath"])  # relative paths: the working directory, as in the SDK
        if not model.is_file():  # the tensorinfer plugin reads the .om in Init
            raise _PluginError(APP_ERR_COMM_INIT_FAIL, f"{infer.name}: modelPath {model} does not exist")
        for element in self.elements.values():
            if element.factory == "mxpi_imageresize" and \
                    element.props.get("resizeType", "Resizer_Stretch") != "Resizer_Stretch":
                raise _PluginError(APP_ERR_COMM_INIT_FAIL, f"{element.name}: the double knows Resizer_Stretch only")
        try:
            self.model = _Model(model)
        except (OSError, KeyError, ValueError) as exc:
            raise _PluginError(APP_ERR_COMM_INIT_FAIL, f"{infer.name}: cannot load the model ({exc})") from None
        self.mode: str | None = None
        self.next_id = 0
        self.inputs: queue.Queue[tuple[int | None, bytes, list[tuple[float, ...]]] | None] = queue.Queue()
        self.appsink: queue.Queue[_Result] = queue.Queue(APPSINK_QUEUE_SIZE)
        self.by_id: dict[int, _Result] = {}
        self.dropped: set[int] = set()
        self.cond = threading.Condition()
        self.destroyed = threading.Event()
        self.worker = threading.Thread(target=self._run, name=f"double-stream-{name}", daemon=True)
        self.worker.start()

    def plugin_id(self, factory: str, value: int | bytes) -> str | None:
        """`appsrc0` for id 0 (or the name itself), None when no such element."""
        name = f"{factory}{value}" if isinstance(value, int) else value.decode()
        element = self.elements.get(name)
        return name if element is not None and element.factory == factory else None

    def send(self, unique_id: int | None, item: MxDataInput) -> None:
        boxes = [(b.x0, b.y0, b.x1, b.y1) for b in item.roiBoxs]
        self.inputs.put((unique_id, bytes(item.data), boxes))

    def destroy(self) -> None:
        self.destroyed.set()
        self.inputs.put(None)
        with self.cond:
            self.cond.notify_all()

    def _run(self) -> None:
        while (job := self.inputs.get()) is not None:
            unique_id, data, boxes = job
            DEVICE_RUNS.append((self.device, self.name))
            try:
                result = self._process(data, boxes)
            except _PluginError as exc:
                LOG.append(f"stream {self.name}: {exc}")
                result = _Result(exc.code, f"{exc}\n".encode())
            if unique_id is None:
                while not self.destroyed.is_set():
                    try:
                        self.appsink.put(result, timeout=0.1)  # a full appsink holds the stream back
                        break
                    except queue.Full:
                        continue
            else:
                with self.cond:
                    if unique_id in self.dropped:
                        self.dropped.discard(unique_id)
                    else:
                        self.by_id[unique_id] = result
                    self.cond.notify_all()

    def _process(self, data: bytes, boxes: list[tuple[float, ...]]) -> _Result:
        metadata: dict[str, Any] = {}
        buffer = data
        previous = ""
        for name in self.order:
            element = self.elements[name]
            source = element.props.get("dataSource", previous)
            if element.factory == "mxpi_imagedecoder":
                image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR) if data else None
                if image is None:
                    raise _PluginError(APP_ERR_COMM_INVALID_PARAM, f"{name}: opencv decode failed")
                if element.props.get("outputDataFormat", "BGR") == "RGB":
                    image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
                metadata[name] = [image]
                buffer = image.tobytes()
                if boxes:
                    objects = MxpiDataType_pb2.MxpiObjectList()
                    for x0, y0, x1, y1 in boxes:
                        objects.objectVec.add(x0=x0, y0=y0, x1=x1, y1=y1)
                    metadata["ExternalObjects"] = objects
            elif element.factory == "mxpi_imagecrop" and source in metadata:
                metadata[name] = self._crop(name, metadata)
            elif element.factory == "mxpi_imageresize" and source in metadata:
                size = (int(element.props.get("resizeWidth", "0")) or self.model.size[0],
                        int(element.props.get("resizeHeight", "0")) or self.model.size[1])
                metadata[name] = [cv2.resize(v, size, interpolation=cv2.INTER_LINEAR) for v in metadata[source]]
            elif element.factory == "mxpi_tensorinfer" and source in metadata:
                metadata[name] = self._infer(source, metadata[source])
            elif element.factory == "mxpi_dumpdata":
                buffer = self._dump(element.props, metadata)
                if not element.props.get("location"):
                    metadata = {}  # a new buffer replaces the old one and its metadata
            previous = name
        return _Result(0, buffer, metadata)

    def _crop(self, name: str, metadata: dict[str, Any]) -> list[np.ndarray]:
        image = metadata[next(n for n in self.order if self.elements[n].factory == "mxpi_imagedecoder")][0]
        height, width = image.shape[:2]
        ratio = {side: np.float32(self.elements[name].props.get(f"{side}ExpandRatio", "0"))
                 for side in ("left", "right", "up", "down")}
        crops = []
        for obj in metadata["ExternalObjects"].objectVec:
            if min(obj.x0, obj.y0, obj.x1, obj.y1) < 0:
                continue
            x0, y0, x1, y1 = int(obj.x0), int(obj.y0), int(obj.x1), int(obj.y1)
            # Widen by the expand ratios of the box's size (float), then clip x1/y1 to the image.
            w, h = np.float32(x1 - x0), np.float32(y1 - y0)
            x0, y0 = (int(x0 - w * ratio["left"]) if x0 > w * ratio["left"] else 0,
                      int(y0 - h * ratio["up"]) if y0 > h * ratio["up"] else 0)
            x1, y1 = min(int(x1 + w * ratio["right"]), width), min(int(y1 + h * ratio["down"]), height)
            w, h = x1 - x0, y1 - y0
            if 1 <= w <= OPENCV_CROP_LIMIT and 1 <= h <= OPENCV_CROP_LIMIT and x0 < width and y0 < height:
                crops.append(image[y0:y1, x0:x1])
        if not crops:
            raise _PluginError(APP_ERR_COMM_CROP_FAIL,
                               f"{name}: all {len(metadata['ExternalObjects'].objectVec)} ROI boxes are invalid "
                               f"for the {width}x{height} image")
        return crops

    def _infer(self, source: str, visions: list[np.ndarray]) -> Any:
        packages = MxpiDataType_pb2.MxpiTensorPackageList()
        for member, vision in enumerate(visions):
            outputs = self.model.run(vision)
            package = packages.tensorPackageVec.add()
            package.headerVec.add(dataSource=source, memberId=member)
            for array in outputs:
                array = np.ascontiguousarray(array)
                package.tensorVec.add(
                    tensorDataPtr=id(array), tensorDataSize=array.nbytes, deviceId=0,
                    memType=MxpiDataType_pb2.MXPI_MEMORY_HOST_MALLOC, tensorShape=list(array.shape),
                    dataStr=array.tobytes(), tensorDataType=_DTYPE_CODES[array.dtype])
        return packages

    def _dump(self, props: dict[str, str], metadata: dict[str, Any]) -> bytes:
        required = [k.strip() for k in props.get("requiredMetaDataKeys", "").split(",") if k.strip()]
        ignored = {k.strip() for k in props.get("filterMetaDataKeys", "").split(",") if k.strip()}
        dump = MxpiDumpData_pb2.MxpiDumpData()
        dump.buffer.SetInParent()
        for key in required or list(metadata):
            message = metadata.get(key)
            if key in ignored or not hasattr(message, "DESCRIPTOR"):
                continue
            content = json_format.MessageToJson(message, always_print_fields_with_no_presence=True, indent=None)
            dump.metaData.add(key=key, content=content, protoDataType=message.DESCRIPTOR.name)
        text = json_format.MessageToJson(dump, always_print_fields_with_no_presence=True, indent=None)
        return text.encode()


# -- the API --------------------------------------------------------------------------------------------------

class StreamManagerApi:
    """One SDK handle; its streams are process-wide, as in the SDK."""

    _streams: ClassVar[dict[str, _Stream]] = {}

    def __init__(self) -> None:
        self._inited = False

    def _record(self, method: str, args: tuple[Any, ...]) -> None:
        CALLS.append((method, args))

    def _stream(self, name: bytes) -> _Stream | None:
        stream = self._streams.get(name.decode())
        if stream is None:
            LOG.append(f"Stream({name.decode()}) not exist.")
        return stream

    def InitManager(self, *args: Any) -> int:
        self._record("InitManager", args)
        _args("StreamManagerApi_InitManager", args, (), (StringVector,))
        _PROCESS["inited"] = True
        self._inited = True
        return 0

    def CreateMultipleStreams(self, *args: Any) -> int:
        self._record("CreateMultipleStreams", args)
        _, (config,) = _args("StreamManagerApi_CreateMultipleStreams", args, ("string",))
        if not self._inited:
            return APP_PYTHON_INIT_ERROR
        if _PROCESS["destroyed"]:
            LOG.append("streams cannot be created again after DestroyAllStreams in this process")
            return APP_ERR_STREAM_CREATE_FAILED
        try:
            streams = json.loads(config)
            if not isinstance(streams, dict) or not streams:
                raise ValueError("empty")
        except ValueError as exc:
            LOG.append(f"pipeline is not a valid json ({exc})")
            return APP_ERR_STREAM_INVALID_CONFIG
        for name in streams:
            if name in self._streams:
                LOG.append(f"Stream({name}) already exists.")
                return APP_ERR_STREAM_EXIST
            try:
                StreamManagerApi._streams[name] = _Stream(name, streams[name])
            except _ConfigError as exc:
                LOG.append(str(exc))
                return APP_ERR_STREAM_INVALID_CONFIG
            except _PluginError as exc:
                LOG.append(str(exc))
                return exc.code
        return 0

    def _send(self, method: str, args: tuple[Any, ...], unique: bool) -> int:
        self._record(method, args)
        _, (name, plugin, item) = _args(f"StreamManagerApi_{method}", args, ("string", "int", MxDataInput),
                                        ("string", "string", MxDataInput))
        failed = APP_PYTHON_INIT_ERROR
        if not self._inited:
            return APP_PYTHON_INIT_ERROR
        stream = self._stream(name)
        if stream is None:
            return failed if unique else APP_ERR_STREAM_NOT_EXIST
        if isinstance(plugin, int) and plugin < 0:
            return failed if unique else APP_ERR_COMM_INVALID_PARAM
        if stream.plugin_id("appsrc", plugin) is None:
            return failed if unique else APP_ERR_STREAM_INVALID_LINK
        mode = "unique" if unique else "plain"
        if stream.mode not in (None, mode):
            LOG.append(f"{method}: stream {stream.name} is in {stream.mode} mode")
            return failed if unique else APP_ERR_STREAM_MODE_MISMATCH
        stream.mode = mode
        unique_id = None
        if unique:
            unique_id, stream.next_id = stream.next_id, stream.next_id + 1
        stream.send(unique_id, item)
        return unique_id if unique else 0

    def SendData(self, *args: Any) -> int:
        if len(args) == 4:
            raise NotImplementedError("the test double does not emulate SendData with MxBufferInput")
        return self._send("SendData", args, unique=False)

    def SendDataWithUniqueId(self, *args: Any) -> int:
        return self._send("SendDataWithUniqueId", args, unique=True)

    def SendProtobuf(self, *args: Any) -> int:
        raise NotImplementedError("the test double does not emulate SendProtobuf")

    def GetResult(self, *args: Any) -> MxDataOutput:
        self._record("GetResult", args)
        if len(args) >= 3 and isinstance(args[1], bytes):
            raise NotImplementedError("the test double does not emulate GetResult with data sources")
        index, values = _args("StreamManagerApi_GetResult", args, ("string", "int", "unsigned int"),
                              ("string", "int"))
        name, plugin = values[0], values[1]
        timeout_ms = values[2] if index == 0 else DELAY_TIME
        if not self._inited:
            return _output(APP_PYTHON_INIT_ERROR, b"")
        stream = self._stream(name)
        if stream is None:
            return _output(APP_ERR_STREAM_NOT_EXIST, GetErrorInfo(APP_ERR_STREAM_NOT_EXIST))
        if plugin < 0:
            return _output(APP_ERR_COMM_INVALID_PARAM, GetErrorInfo(APP_ERR_COMM_INVALID_PARAM))
        if stream.plugin_id("appsink", plugin) is None:
            return _output(APP_ERR_STREAM_INVALID_LINK, GetErrorInfo(APP_ERR_STREAM_INVALID_LINK))
        if stream.mode == "unique":
            return _output(APP_ERR_STREAM_MODE_MISMATCH, GetErrorInfo(APP_ERR_STREAM_MODE_MISMATCH))
        try:
            result = stream.appsink.get(timeout=timeout_ms / 1000)
        except queue.Empty:
            return _output(APP_ERR_COMM_INNER, GetErrorInfo(APP_ERR_COMM_INNER))
        return _output(result.code, result.data or b"{}")

    def GetResultWithUniqueId(self, *args: Any) -> MxDataOutput:
        self._record("GetResultWithUniqueId", args)
        _, (name, unique_id, timeout_ms) = _args("StreamManagerApi_GetResultWithUniqueId", args,
                                                 ("string", "unsigned long", "unsigned int"))
        if not self._inited:
            return _output(APP_PYTHON_INIT_ERROR, b"")
        stream = self._stream(name)
        if stream is None:
            return _output(APP_ERR_STREAM_NOT_EXIST, GetErrorInfo(APP_ERR_STREAM_NOT_EXIST))
        if stream.mode == "plain":
            return _output(APP_ERR_STREAM_MODE_MISMATCH, GetErrorInfo(APP_ERR_STREAM_MODE_MISMATCH))
        with stream.cond:
            ready = stream.cond.wait_for(lambda: unique_id in stream.by_id or stream.destroyed.is_set(),
                                         timeout=timeout_ms / 1000)
            if not ready or unique_id not in stream.by_id:
                stream.dropped.add(unique_id)
                return _output(APP_ERR_STREAM_TIMEOUT, b"Time out, can not get result in time.")
            result = stream.by_id.pop(unique_id)
        return _output(result.code, result.data or b"{}")

    def GetProtobuf(self, *args: Any) -> OutProtobufVector:
        self._record("GetProtobuf", args)
        _, (name, plugin, keys) = _args("StreamManagerApi_GetProtobuf", args, ("string", "int", StringVector))
        outputs = OutProtobufVector()
        if not self._inited:
            output = MxProtobufOut()
            output.errorCode = APP_PYTHON_INIT_ERROR
            output.messageName = b"The initialization is not performed, Call the InitManager method first."
            outputs.push_back(output)
            return outputs
        stream = self._stream(name)
        # Errors come back from the C++ layer without a message, which the Python layer drops.
        if stream is None or plugin < 0 or not len(keys) or stream.plugin_id("appsink", plugin) is None \
                or stream.mode == "unique":
            return outputs
        while True:  # no timeout: blocks until a result arrives or the stream is destroyed
            try:
                result = stream.appsink.get(timeout=0.1)
                break
            except queue.Empty:
                if stream.destroyed.is_set():
                    return outputs
        for key in keys:
            message = result.metadata.get(key.decode()) if result.code == 0 else None
            if hasattr(message, "SerializeToString"):
                output = MxProtobufOut()
                output.messageName, output.messageBuf = key, message.SerializeToString()
                outputs.push_back(output)
        return outputs

    def StopStream(self, *args: Any) -> int:
        self._record("StopStream", args)
        _, (name,) = _args("StreamManagerApi_StopStream", args, ("string",))
        if not self._inited:
            return APP_PYTHON_INIT_ERROR
        stream = self._streams.pop(name.decode(), None)
        if stream is None:
            return APP_ERR_STREAM_NOT_EXIST
        stream.destroy()
        return 0

    def DestroyAllStreams(self, *args: Any) -> int:
        self._record("DestroyAllStreams", args)
        _args("StreamManagerApi_DestroyAllStreams", args, ())
        if not self._inited:
            return APP_PYTHON_INIT_ERROR
        for stream in self._streams.values():
            stream.destroy()
        StreamManagerApi._streams = {}
        _PROCESS["destroyed"] = True
        return 0
