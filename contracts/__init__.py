"""Event contracts of voxlog: the models, their encoding and the fingerprint.

This package imports no other package of the project, so every process (and
any external consumer of the log) can depend on it alone.
"""

from contracts.codec import (
    HEADER_SCHEMA_VERSION,
    HEADER_TRACEPARENT,
    HEADER_TYPE,
    decode_event,
    encode_event,
    event_headers,
    header_value,
    new_traceparent,
)
from contracts.errors import ContractError, DecodeError, InvalidRequest, UnsupportedSchemaVersion
from contracts.events import (
    EVENT_CLASSES,
    AudioRef,
    JobClaimed,
    JobClaimedPayload,
    JobCompleted,
    JobCompletedPayload,
    JobEvent,
    JobFailed,
    JobFailedPayload,
    JobQueued,
    JobQueuedPayload,
    JobReleased,
    JobReleasedPayload,
    Producer,
    SegmentProduced,
    SegmentProducedPayload,
    SynthesisRequest,
    TextSpan,
    derive_event_id,
    utc_now,
)
from contracts.fingerprint import fingerprint, normalize_text
from contracts.topics import DEFAULT_DLQ_TOPIC, DEFAULT_JOBS_TOPIC, DEFAULT_NODES_TOPIC

__all__ = [
    "DEFAULT_DLQ_TOPIC",
    "DEFAULT_JOBS_TOPIC",
    "DEFAULT_NODES_TOPIC",
    "EVENT_CLASSES",
    "HEADER_SCHEMA_VERSION",
    "HEADER_TRACEPARENT",
    "HEADER_TYPE",
    "AudioRef",
    "ContractError",
    "DecodeError",
    "InvalidRequest",
    "JobClaimed",
    "JobClaimedPayload",
    "JobCompleted",
    "JobCompletedPayload",
    "JobEvent",
    "JobFailed",
    "JobFailedPayload",
    "JobQueued",
    "JobQueuedPayload",
    "JobReleased",
    "JobReleasedPayload",
    "Producer",
    "SegmentProduced",
    "SegmentProducedPayload",
    "SynthesisRequest",
    "TextSpan",
    "UnsupportedSchemaVersion",
    "decode_event",
    "derive_event_id",
    "encode_event",
    "event_headers",
    "fingerprint",
    "header_value",
    "new_traceparent",
    "normalize_text",
    "utc_now",
]
