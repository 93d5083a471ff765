"""Engine settings shared by end-to-end tests."""

from __future__ import annotations

# The bench engine fails every segment that contains "doomed", and one attempt is all a job gets.
FAILING_ENGINE = {
    "VOXLOG_ENGINE": "bench-sleep",
    "VOXLOG_DEFAULT_ENGINE": "bench-sleep",
    "VOXLOG_BENCH_SYNTH_MS": "5",
    "VOXLOG_BENCH_FAULT": "fail:doomed",
    "VOXLOG_MAX_ATTEMPTS": "1",
}
