#!/usr/bin/env bash
# Quickstart, command 1: install everything and bring voxlog up.
# Today that is the real Kafka broker and PostgreSQL, with topics and tables;
# `voxlog dev status` shows them, `voxlog dev down` stops them.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$VOXLOG_ROOT"
voxlog dev up
voxlog dev status
echo "voxlog is ready. Stop it with: $VOXLOG_VENV/bin/voxlog dev down"
