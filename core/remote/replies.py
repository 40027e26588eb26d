"""Checks of every field of every frame the worker sends, before the client uses any of it.

A host may be broken or hostile: a reply with a field of the wrong type, out of range, too large or nested
too deeply is refused with `InvalidReply` naming the field, and the client stops that worker. What passes
here is safe to use as is (ints are ints, floats are finite: the frame's JSON refuses NaN, infinities and
numbers out of range before this sees it, `core.files.untrusted_json`; sizes are bounded).
"""

from __future__ import annotations

from . import protocol as p

#: Bounds of what a sane worker sends.
MAX_SIDE = 1 << 16  # pixels per image side
MAX_CLASSES = 256
MAX_TEXT = 1 << 16  # characters of a message or name
MAX_ITEMS = 1024  # entries of a list or mapping
MAX_DEPTH = 8  # nesting of JSON containers
#: A RESULT's `cache`: its input came from the host's input cache, was sent (not held) or sent though held; or
#: no key (None).
CACHE_STATES = (None, "hit", "miss", "sent")


class InvalidReply(p.ProtocolError):
    """A frame from the worker whose metadata is unusable; `.field` names what."""

    def __init__(self, field: str, label: str = ""):
        self.field = field
        super().__init__(f"{label + ': ' if label else ''}the host sent an invalid reply (field {field}); "
                         "the worker was stopped")


def depth(value: object) -> int:
    """Nesting depth of JSON containers (0 for a scalar), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level + 1)
            if deepest > MAX_DEPTH:
                return deepest
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _int(meta: dict, name: str, low: int, high: int, optional: bool = False) -> None:
    value = meta.get(name)
    if optional and value is None:
        return
    if type(value) is not int or not low <= value <= high:
        raise InvalidReply(name)


def _number(value: object, field: str) -> None:
    if not (type(value) in (int, float) and value >= 0):  # type: ignore[operator]  # finite: core.files.untrusted_json
        raise InvalidReply(field)


def _text(meta: dict, name: str, optional: bool = False) -> None:
    value = meta.get(name)
    if optional and value is None:
        return
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise InvalidReply(name)


def _ints(meta: dict, name: str, count: int, low: int, high: int) -> None:
    value = meta.get(name)
    if not (isinstance(value, list) and len(value) == count and all(type(v) is int and low <= v <= high
                                                                       for v in value)):
        raise InvalidReply(name)


def _mapping(meta: dict, name: str, numbers: bool = False) -> None:
    value = meta.get(name, {})
    if not isinstance(value, dict) or len(value) > MAX_ITEMS:
        raise InvalidReply(name)
    for key, item in value.items():
        if len(key) > MAX_TEXT:
            raise InvalidReply(name)
        if numbers:
            _number(item, f"{name}.{key}"[:80])
        elif not isinstance(item, (str, int, float, bool)) and item is not None:
            raise InvalidReply(f"{name}.{key}"[:80])


def check_hello(meta: dict) -> None:
    _int(meta, "protocol", p.PROTOCOL_VERSION, p.PROTOCOL_VERSION)
    _int(meta, "pid", 2, 1 << 31)
    _int(meta, "pgid", 2, 1 << 31)
    for name in ("backend", "device"):
        _text(meta, name)
    _text(meta, "fallback_reason", optional=True)
    _ints(meta, "input_size", 2, 1, MAX_SIDE)
    names = meta.get("class_names")
    if not (isinstance(names, list) and 1 <= len(names) <= MAX_CLASSES and
            all(isinstance(n, str) and len(n) <= MAX_TEXT for n in names)):
        raise InvalidReply("class_names")
    _mapping(meta, "details")
    _mapping(meta, "versions")


def check_result(meta: dict, blobs: tuple[bytes, ...]) -> None:
    _int(meta, "id", 0, 1 << 62)
    _ints(meta, "image_size", 2, 1, MAX_SIDE * 4)
    _ints(meta, "roi", 4, 0, MAX_SIDE * 4)
    x0, y0, x1, y1 = meta["roi"]
    width, height = meta["image_size"]
    if not (x0 < x1 <= width and y0 < y1 <= height):
        raise InvalidReply("roi")
    _ints(meta, "shape", 3, 1, MAX_SIDE)
    if meta["shape"][2] > MAX_CLASSES:
        raise InvalidReply("shape")
    if meta.get("probabilities") not in p.PROBABILITY_DTYPES:
        raise InvalidReply("probabilities")
    if meta.get("compression") != "zlib":
        raise InvalidReply("compression")
    for name in ("chunks", "raw"):  # their sense is `protocol.decode_arrays`' to check
        value = meta.get(name)
        if not (isinstance(value, list) and len(value) <= MAX_ITEMS and all(type(v) is int for v in value)):
            raise InvalidReply(name)
    if len(blobs) != 2:
        raise InvalidReply("blobs")
    _mapping(meta, "timings", numbers=True)
    _number(meta.get("worker_seconds"), "worker_seconds")
    _text(meta, "backend", optional=True)
    if meta.get("cache") not in CACHE_STATES:
        raise InvalidReply("cache")


def check_need(meta: dict) -> None:
    _int(meta, "id", 0, 1 << 62)


def check_error(meta: dict) -> None:
    _int(meta, "id", 0, 1 << 62, optional=True)
    _text(meta, "kind")
    _text(meta, "message")


def check(message: p.Message) -> None:
    """Raise `InvalidReply` unless every field `message` carries is usable."""
    if depth(message.meta) > MAX_DEPTH:
        raise InvalidReply("metadata nesting")
    if message.type == p.MsgType.HELLO:
        check_hello(message.meta)
    elif message.type == p.MsgType.RESULT:
        check_result(message.meta, message.blobs)
    elif message.type == p.MsgType.ERROR:
        check_error(message.meta)
    elif message.type == p.MsgType.NEED:
        check_need(message.meta)
