"""What an extra of pyproject.toml installs: the distributions it pulls in, read from the installed metadata.

The closure of ``voxlog[extra]`` over ``importlib.metadata``'s Requires-Dist, markers evaluated for this
interpreter and platform (an image's: CPython 3.11 on Linux x86_64, as the test machines are), the project's
own requirements read from the checkout's pyproject.toml (a ``voxlog[other]`` inside an extra expands it).
It needs no network: the development virtualenv holds every extra the images use (infra/bootstrap.sh).
"""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def project_requirements(extras: set[str]) -> list[Requirement]:
    """The project's requirements with ``extras``, its self-references (``voxlog[g2p]``) expanded."""
    found = [Requirement(line) for line in PROJECT["dependencies"]]
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for line in PROJECT["optional-dependencies"][extra]:
            requirement = Requirement(line)
            if canonicalize_name(requirement.name) == canonicalize_name(PROJECT["name"]):
                todo.extend(requirement.extras)
            else:
                found.append(requirement)
    return found


def _applies(requirement: Requirement, extras: set[str]) -> bool:
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({"extra": extra}) for extra in extras | {""})


def closure(extras: set[str]) -> set[NormalizedName]:
    """Every distribution ``voxlog[extras]`` installs (the project itself left out)."""
    found: set[NormalizedName] = set()
    expanded: set[tuple[NormalizedName, frozenset[str]]] = set()
    todo = [(requirement, set(requirement.extras)) for requirement in project_requirements(extras)]
    while todo:
        requirement, wanted = todo.pop()
        name = canonicalize_name(requirement.name)
        if (name, frozenset(wanted)) in expanded:
            continue
        expanded.add((name, frozenset(wanted)))
        found.add(name)
        for line in importlib.metadata.requires(requirement.name) or []:
            nested = Requirement(line)
            if _applies(nested, wanted):
                todo.append((nested, set(nested.extras)))
    return found
