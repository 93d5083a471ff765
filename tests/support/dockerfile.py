"""infra/Dockerfile read as its stages: what each copies from the build context, runs, and sets.

Only what the image tests need: ``FROM ... AS name``, ``COPY`` (from the context, not ``--from``), ``RUN`` (its
options stripped), ``ENV`` and ``CMD``; continuation lines joined, comments and parser directives dropped.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "infra" / "Dockerfile"
_PIP_INSTALL = re.compile(r"\bpip install\b")


@dataclass
class Stage:
    name: str
    base: str  # an image, or an earlier stage's name
    copies: list[list[str]] = field(default_factory=list)  # sources of each COPY, from the context
    runs: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cmd: list[str] = field(default_factory=list)


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined."""
    found: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.lstrip().startswith("#"):  # a comment inside a continued instruction
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, rest = (pending + line).strip().partition(" ")
        found.append((keyword.upper(), rest.strip()))
        pending = ""
    return found


def stages(path: Path = DOCKERFILE) -> dict[str, Stage]:
    """Each stage by its name, in order."""
    found: dict[str, Stage] = {}
    stage: Stage | None = None
    for keyword, rest in instructions(path.read_text()):
        if keyword == "FROM":
            image, _, name = rest.partition(" AS ")
            stage = found.setdefault(name.strip(), Stage(name.strip(), image.strip()))
            continue
        if stage is None:
            continue  # ARGs before the first FROM
        if keyword == "COPY" and "--from=" not in rest:
            *sources, _ = shlex.split(rest)
            stage.copies.append(sources)
        elif keyword == "RUN":
            stage.runs.append(re.sub(r"^(--\S+\s+)+", "", rest))
        elif keyword == "ENV":
            words = shlex.split(rest)
            stage.env.update(dict(word.split("=", 1) for word in words if "=" in word))
        elif keyword == "CMD":
            stage.cmd = json.loads(rest)
    return found


def targets(found: dict[str, Stage]) -> list[str]:
    """The stages no other stage builds on: the images."""
    bases = {stage.base for stage in found.values()}
    return [name for name in found if name not in bases]


def chain(found: dict[str, Stage], name: str) -> list[Stage]:
    """``name``'s stage and those it builds on, the first first."""
    stage = found[name]
    return [*(chain(found, stage.base) if stage.base in found else []), stage]


def pip_installs(found: dict[str, Stage], name: str) -> list[list[str]]:
    """The arguments of each ``pip install`` that builds target ``name``, through the stages it builds on."""
    return [
        shlex.split(_PIP_INSTALL.split(run, maxsplit=1)[1])
        for stage in chain(found, name)
        for run in stage.runs
        if _PIP_INSTALL.search(run)
    ]


def environment(found: dict[str, Stage], name: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for stage in chain(found, name):
        env.update(stage.env)
    return env
