"""The Kubernetes chart (infra/helm/voxlog) checked offline with real tools, each built from its Go module.

- Helm itself (helm.sh/helm/v3, built as its Makefile builds it) lints the chart (``helm lint --strict``) and
  renders it (``helm template``) for each values file of the chart's ci/ folder.
- infra/k8s-validate (Go, k8s.io/client-go's types) decodes every rendered object strictly into its Kubernetes
  type and checks KEDA's ScaledObject and TriggerAuthentication against the OpenAPI schema of KEDA's own
  CustomResourceDefinitions (from the kedacore/keda Go module), then the references between the objects.

Both binaries are built once into ~/.cache/voxlog/bin (the Go modules and build cache under
~/.cache/voxlog/go), named for their version or source, so a second run builds nothing. Building needs Go
(``go`` on PATH, or /usr/local/go/bin/go) and, the first time, the Go module proxy.

``python -m infra.chart_check`` lints, renders and validates every values file and prints what it did.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "infra" / "helm" / "voxlog"
VALUES_SETS = CHART / "ci"
VALIDATOR_SRC = ROOT / "infra" / "k8s-validate"
CACHE = Path(os.environ.get("VOXLOG_TOOLS_CACHE", Path.home() / ".cache" / "voxlog"))
BIN = CACHE / "bin"

HELM_VERSION = "v3.22.0"
HELM_MODULE = f"helm.sh/helm/v3/cmd/helm@{HELM_VERSION}"
KUBERNETES_MINOR = "37"  # of the k8s.io modules Helm and the validator build with (v0.37.x)
KEDA_VERSION = "v2.21.0"
KEDA_MODULE = f"github.com/kedacore/keda/v2@{KEDA_VERSION}"
_STAMPED = ("lint/rules", "chartutil")  # the packages whose default Kubernetes version Helm's Makefile sets
KEDA_CRDS = ("keda.sh_scaledobjects.yaml", "keda.sh_triggerauthentications.yaml")


class ChartCheckError(RuntimeError):
    """A tool could not be built or fetched (not a verdict on the chart)."""


def go_binary() -> str:
    found = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if found is None:
        raise ChartCheckError("the chart's checks build Helm and infra/k8s-validate with Go: install Go 1.25 or later")
    return found


def go_env() -> dict[str, str]:
    """Everything Go keeps goes under the cache, never into the checkout or ~/go."""
    go = CACHE / "go"
    return {
        **os.environ,
        "GOPATH": str(go),
        "GOMODCACHE": str(go / "mod"),
        "GOCACHE": str(go / "cache"),
        "GOFLAGS": "-buildvcs=false -trimpath",
        "CGO_ENABLED": "0",
        "GOTOOLCHAIN": "local",
    }


def _go(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run([go_binary(), *args], cwd=cwd, env=go_env(), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ChartCheckError(f"go {' '.join(args)} failed:\n{done.stderr[-4000:]}")
    return done.stdout


def helm() -> Path:
    """Helm, built from its module with the version and Kubernetes version its Makefile stamps."""
    path = BIN / f"helm-{HELM_VERSION}"
    if not path.exists():
        BIN.mkdir(parents=True, exist_ok=True)
        stamps = [
            f"-X helm.sh/helm/v3/internal/version.version={HELM_VERSION}",
            *(f"-X helm.sh/helm/v3/pkg/{pkg}.k8sVersionMajor=1" for pkg in _STAMPED),
            *(f"-X helm.sh/helm/v3/pkg/{pkg}.k8sVersionMinor={KUBERNETES_MINOR}" for pkg in _STAMPED),
        ]
        with tempfile.TemporaryDirectory(dir=BIN) as staging:
            env_bin = {"GOBIN": staging}
            done = subprocess.run(
                [
                    go_binary(),
                    "install",
                    "-ldflags",
                    " ".join(["-s", "-w", *stamps]),
                    HELM_MODULE,
                ],
                env={**go_env(), **env_bin},
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                raise ChartCheckError(f"building Helm {HELM_VERSION} failed:\n{done.stderr[-4000:]}")
            Path(staging, "helm").replace(path)
    return path


def validator() -> Path:
    """infra/k8s-validate, built again whenever its source or its modules change."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "main.go"):
        digest.update((VALIDATOR_SRC / name).read_bytes())
    path = BIN / f"k8s-validate-{digest.hexdigest()[:12]}"
    if not path.exists():
        BIN.mkdir(parents=True, exist_ok=True)
        staging = path.with_suffix(".building")
        _go("build", "-ldflags", "-s -w", "-o", str(staging), ".", cwd=VALIDATOR_SRC)
        staging.replace(path)
    return path


def keda_crds() -> list[Path]:
    """KEDA's CustomResourceDefinitions, from its Go module (downloaded into the module cache once)."""
    bases = (
        CACHE / "go" / "mod" / "github.com" / "kedacore" / "keda" / f"v2@{KEDA_VERSION}" / "config" / "crd" / "bases"
    )
    if not all((bases / name).exists() for name in KEDA_CRDS):
        with tempfile.TemporaryDirectory() as outside_any_module:
            info = json.loads(
                _go(
                    "mod",
                    "download",
                    "-json",
                    KEDA_MODULE,
                    cwd=Path(outside_any_module),
                )
            )
        bases = Path(info["Dir"]) / "config" / "crd" / "bases"
    return [bases / name for name in KEDA_CRDS]


@dataclass(frozen=True)
class Tools:
    helm: Path
    validator: Path
    crds: list[Path]

    def run(self, *args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(a) for a in args], input=stdin, capture_output=True, text=True, check=False)

    def lint(self, values: Path | None = None) -> subprocess.CompletedProcess[str]:
        given: list[str | Path] = ["-f", values] if values else []
        return self.run(self.helm, "lint", "--strict", CHART, *given)

    def template(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return self.run(self.helm, "template", "voxlog", CHART, *args)

    def validate(self, manifests: str) -> subprocess.CompletedProcess[str]:
        crds: list[str | Path] = [a for crd in self.crds for a in ("-crd", crd)]
        return self.run(self.validator, *crds, stdin=manifests)


def tools() -> Tools:
    return Tools(helm(), validator(), keda_crds())


def values_sets() -> list[Path]:
    return sorted(VALUES_SETS.glob("*-values.yaml"))


def main() -> int:
    started = time.monotonic()
    try:
        found = tools()
    except ChartCheckError as exc:
        print(f"chart check: {exc}", file=sys.stderr)
        return 2
    print(f"tools ready in {time.monotonic() - started:.1f} s: {found.helm.name}, {found.validator.name}")
    failed = False
    for values in values_sets():
        lint, rendered = found.lint(values), found.template("-f", values)
        verdict = found.validate(rendered.stdout) if rendered.returncode == 0 else None
        ok = lint.returncode == 0 and verdict is not None and verdict.returncode == 0
        failed |= not ok
        print(f"{'ok' if ok else 'FAILED'}  {values.name}: " + (verdict.stdout.strip() if verdict else rendered.stderr))
        if lint.returncode != 0:
            print(lint.stdout + lint.stderr)
        if verdict is not None and verdict.returncode != 0:
            print(verdict.stdout)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
