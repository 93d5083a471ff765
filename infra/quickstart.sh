#!/usr/bin/env bash
# Quickstart, command 1: install everything, bring voxlog up and run the main job.
# Starts Kafka, PostgreSQL, the projector, one worker (the real Kokoro int8 model on CPU)
# and the API; submits a demo text; waits for it; writes the WAV and prints its path.
# `voxlog dev status` shows every process, `voxlog dev down` stops them.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$VOXLOG_ROOT"
voxlog dev up
voxlog demo --out "${VOXLOG_DEMO_OUT:-$PWD/voxlog-demo.wav}"
echo "voxlog is running: API at http://127.0.0.1:8000 (docs at /schema). Stop it with: $VOXLOG_VENV/bin/voxlog dev down"
