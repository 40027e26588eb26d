"""The frames of SegScope's remote protocol: what a frame's header holds, which message types exist, how a
message is packed. Standard library only: the worker's supervisor (`core.remote.worker`) imports it on the
host before the host's own environment (`--set-env`) is sourced. Parsing and checking frames, and the
result arrays, are `core.remote.protocol`'s.

A frame is a 16-byte header, then the payload:

    magic b"SGSC" | version u8 | type u8 | reserved u16 | payload length u32 | crc32 u32   (big endian)

The CRC covers the first 12 header bytes and the payload. A payload is a JSON object (the message's
metadata) followed by binary blobs (image bytes, compressed arrays):

    json length u32 | json (UTF-8) | blob count u16 | blob length u64 * count | blob bytes...

Extending it: either end ignores metadata keys it does not know, so a new optional field needs nothing
else; a new message type, or a field whose meaning changes, bumps `PROTOCOL_VERSION` (both ends always come
from the same SegScope: the client uploads its own worker, so they never disagree in practice, and a
mismatch is refused in one line).
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass, field
from enum import IntEnum

from ..errors import BackendError

MAGIC = b"SGSC"
PROTOCOL_VERSION = 3
HEADER = struct.Struct(">4sBBHII")
#: Largest payload either end accepts (a 4000x3000 PNG is ~30 MB; this leaves room for big TIFFs).
MAX_PAYLOAD = 512 * 1024 * 1024
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_U64 = struct.Struct(">Q")


class ProtocolError(BackendError):
    """A frame that does not follow the protocol (corrupt, truncated, wrong version or type)."""


class MsgType(IntEnum):
    HELLO = 1  # worker -> client: backend, versions, model input size, class names
    INFER = 2  # client -> worker: one image (bytes, host path, or the content key of bytes the host may hold) + ROI
    RESULT = 3  # worker -> client: argmax + quantised probabilities, timings
    CANCEL = 4  # client -> worker: stop request `id`
    ERROR = 5  # worker -> client: a request failed, or the worker cannot go on
    HEARTBEAT = 6  # either way, every few seconds whatever else happens: "still here" (`heartbeat_interval`)
    NEED = 7  # worker -> client: request `id` came as a content key the host's input cache does not hold
    DATA = 8  # client -> worker: the bytes of request `id`, which the host asked for (NEED)


#: Which message types each end may receive.
TO_WORKER = frozenset({MsgType.INFER, MsgType.CANCEL, MsgType.HEARTBEAT, MsgType.DATA})
TO_CLIENT = frozenset({MsgType.HELLO, MsgType.RESULT, MsgType.ERROR, MsgType.HEARTBEAT, MsgType.NEED})

#: The worker's exit codes, and what the client says about each.
EXIT_CODES = {0: "exited normally", 2: "could not start", 3: "rejected a malformed frame",
              5: "could not source --set-env", 6: "killed or crashed (its serving process)",
              -1: "killed or crashed, no exit status"}
EXIT_OK, EXIT_STARTUP, EXIT_PROTOCOL, EXIT_ENVIRONMENT, EXIT_CRASHED = 0, 2, 3, 5, 6

#: Seconds either end waits in silence (no byte, not even a heartbeat) before it takes the other for gone.
DEFAULT_TIMEOUT = 60.0


def heartbeat_interval(timeout: float) -> float:
    """How often each end says it is alive when the other gives up after `timeout` seconds of silence: six
    heartbeats per timeout (a slow link may delay a few), at least every 10 s, at most 10 a second."""
    return min(10.0, max(0.1, timeout / 6))


@dataclass(frozen=True)
class Message:
    type: MsgType
    meta: dict = field(default_factory=dict)
    blobs: tuple[bytes, ...] = ()


def encode(message: Message) -> bytes:
    """One frame, ready to write."""
    meta = json.dumps(message.meta, separators=(",", ":")).encode("utf-8")
    parts = [_U32.pack(len(meta)), meta, _U16.pack(len(message.blobs))]
    parts += [_U64.pack(len(blob)) for blob in message.blobs]
    payload = b"".join(parts) + b"".join(message.blobs)
    if len(payload) > MAX_PAYLOAD:
        raise ProtocolError(f"message of {len(payload):,} bytes is over the protocol limit of {MAX_PAYLOAD:,}")
    head = HEADER.pack(MAGIC, PROTOCOL_VERSION, int(message.type), 0, len(payload), 0)[:12]
    return head + _U32.pack(zlib.crc32(payload, zlib.crc32(head))) + payload


def frame_length(header: bytes) -> int:
    """Header plus payload bytes of the frame `header` (its first `HEADER.size` bytes) starts, unchecked."""
    return HEADER.size + HEADER.unpack(header)[4]
