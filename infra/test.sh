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
# Test-only system packages: Debian's Prometheus (promtool, and a server the monitoring test runs) and
# Chromium (the dashboard's browser test).
need=()
command -v promtool >/dev/null || need+=(prometheus)
command -v chromium >/dev/null || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then echo "the tests need ${need[*]}: install them as root" >&2; exit 1; fi
  say "apt-get install ${need[*]}"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
say "pytest"; pytest -p no:cacheprovider "$@"
