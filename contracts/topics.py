"""Default topic names (each is configurable in the processes' settings)."""

from typing import Final

DEFAULT_JOBS_TOPIC: Final = "voxlog.jobs.v1"
DEFAULT_CONTROL_TOPIC: Final = "voxlog.control.v1"
DEFAULT_DLQ_TOPIC: Final = "voxlog.jobs.dlq"

# Headers on DLQ records, beside the original ones.
DLQ_HEADER_REASON: Final = "dlq.reason"
DLQ_HEADER_SOURCE_TOPIC: Final = "dlq.source.topic"
DLQ_HEADER_SOURCE_PARTITION: Final = "dlq.source.partition"
DLQ_HEADER_SOURCE_OFFSET: Final = "dlq.source.offset"
