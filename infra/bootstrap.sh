#!/usr/bin/env bash
# Installs everything voxlog needs on a fresh Debian machine; safe to run again.
#   - Java, Maven and PostgreSQL from apt when missing (as root)
#   - one virtualenv OUTSIDE the checkout ($VOXLOG_VENV, default ~/.cache/voxlog/venv),
#     dependencies reinstalled only when pyproject.toml changes
#   - this checkout installed into it in editable mode (cheap; done every time so the
#     venv always runs the checkout that called this script)
# Source it to get the venv on PATH:  . infra/bootstrap.sh
set -euo pipefail

VOXLOG_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VOXLOG_VENV="${VOXLOG_VENV:-$HOME/.cache/voxlog/venv}"
export VOXLOG_ROOT VOXLOG_VENV PIP_DISABLE_PIP_VERSION_CHECK=1

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

missing=()
command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || missing+=(maven)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || [ -n "${VOXLOG_DATABASE_URL:-}" ] || missing+=(postgresql)
command -v python3 >/dev/null || missing+=(python3 python3-venv)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "missing system packages: ${missing[*]} (install them as root)" >&2
    exit 1
  fi
  say "apt-get install ${missing[*]}"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
fi

PYTHON="$(command -v python3.11 || command -v python3)"
pip_log="$VOXLOG_VENV/pip.log"
# pip's own output (setuptools' editable-install warnings among it) goes to a log that is shown
# only when pip fails; the terminal gets one line per package being fetched.
pip_install() {
  if ! "$VOXLOG_VENV/bin/pip" install --progress-bar off "$@" 2>&1 \
      | tee "$pip_log" | awk '/^Collecting /{ printf "    %s\n", $2; fflush() }'; then
    tail -n 40 "$pip_log" >&2
    echo "pip install failed; the whole log is $pip_log" >&2
    return 1
  fi
}
if [ ! -x "$VOXLOG_VENV/bin/python" ]; then
  say "creating the virtualenv at $VOXLOG_VENV"
  "$PYTHON" -m venv "$VOXLOG_VENV"
  pip_install --upgrade pip setuptools wheel
fi

deps_hash="$(sha256sum "$VOXLOG_ROOT/pyproject.toml" | cut -c1-16)"
stamp="$VOXLOG_VENV/.voxlog-deps-$deps_hash"
if [ ! -f "$stamp" ]; then
  say "installing dependencies (first run downloads torch: a few minutes)"
  pip_install -e "$VOXLOG_ROOT[dev,bench,otel,worker-cpu,worker-gpu]"
  rm -f "$VOXLOG_VENV"/.voxlog-deps-*
  touch "$stamp"
fi
pip_install --no-deps --no-build-isolation -e "$VOXLOG_ROOT"

export PATH="$VOXLOG_VENV/bin:$PATH"
