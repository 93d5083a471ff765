#!/usr/bin/env bash
# Quickstart, command 2: the whole test suite, against a real Kafka broker and PostgreSQL.
# Lint, format, types and generated docs first; then pytest (unit, integration, e2e).
# Extra arguments go to pytest, e.g. `infra/test.sh tests/unit`.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$VOXLOG_ROOT"
say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
say "ruff";   ruff check . && ruff format --check .
say "mypy";   mypy
say "docs";   voxlog docs --check
say "pytest"; pytest -p no:cacheprovider "$@"
