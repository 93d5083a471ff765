"""Engine settings shared by end-to-end tests.

End-to-end deployments run the bench engine unless a test names the real model (issue 38, item 6): the
orchestration a test proves does not depend on what speaks, and a real-model worker costs a model load and
seconds of CPU per job. The few real-model tests (speech and the OpenAI client in test_speech_api, captions,
the lexicon, the canary, and routing between engines) pass ``REAL_MODEL``.
"""

from __future__ import annotations

# What a deployment runs when its test names no engine: bench-sleep, untimed (bench.paced's default).
BENCH_ENGINE = {"VOXLOG_ENGINE": "bench-sleep", "VOXLOG_DEFAULT_ENGINE": "bench-sleep"}

# The real Kokoro model (kokoro-onnx int8 on CPU), for the tests that are about what it says.
REAL_MODEL = {"VOXLOG_ENGINE": "kokoro-onnx", "VOXLOG_DEFAULT_ENGINE": "kokoro-onnx"}

# The bench engine fails every segment that contains "doomed", and one attempt is all a job gets.
FAILING_ENGINE = {
    **BENCH_ENGINE,
    "VOXLOG_BENCH_SYNTH_MS": "5",
    "VOXLOG_BENCH_FAULT": "fail:doomed",
    "VOXLOG_MAX_ATTEMPTS": "1",
}
