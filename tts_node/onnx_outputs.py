"""Kokoro's int8 ONNX graph with its phoneme durations as a second output, edited in memory.

The exported graph computes the duration predictor's frames per phoneme id (``pred_dur``: Round, Clip,
then this Cast to int64, which feeds the alignment's CumSum) but outputs only the audio. Naming that
tensor among the graph's outputs exposes it; the file on disk, and so its checksum, stay as they are.

The edit is a protobuf merge: a serialized message read twice merges, an embedded message field
appearing again merges into the first and a repeated field appends. So the model's bytes followed by
``graph { output { name } }`` (ModelProto field 7, GraphProto field 12, ValueInfoProto field 1) is
the same model with one more output, with no protobuf library needed (the ``onnx`` package is not a
dependency). The audio of the edited graph is bit-identical to the original's (a unit test runs both).
"""

from __future__ import annotations

from typing import Final

DURATIONS: Final = "/encoder/Cast_output_0"
"""The int64 [1, ids + 2] frames per padded phoneme id in kokoro-onnx's Kokoro-82M v1.0 export."""

_MODEL_GRAPH: Final = 7
_GRAPH_OUTPUT: Final = 12
_VALUE_INFO_NAME: Final = 1


def with_output(model: bytes, tensor: str = DURATIONS) -> bytes:
    """``model`` (a serialized ONNX ModelProto) with ``tensor`` appended to its graph's outputs."""
    value_info = _field(_VALUE_INFO_NAME, tensor.encode("utf-8"))
    return model + _field(_MODEL_GRAPH, _field(_GRAPH_OUTPUT, value_info))


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
