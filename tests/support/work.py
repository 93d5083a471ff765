"""The work a function does, counted, for regression tests that it stays linear in its input.

Work is the steps of every regex call the function makes through the modules under test (each of their
compiled patterns is swapped for a proxy that runs :mod:`tests.support.regex_steps` on the call, then lets
``re`` answer it) plus every line of Python run in those modules (``sys.settrace``). Both are counts, not
times: the same call gives the same work on any machine under any load.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType, ModuleType
from typing import Any

from tests.support.regex_steps import OverBudget, StepModel

__all__ = ["OverBudget", "Work", "counted", "growth", "linear"]


@dataclass
class Work:
    budget: int
    steps: int = 0  # of the regex model
    lines: int = 0  # of Python, in the modules under test

    @property
    def total(self) -> int:
        return self.steps + self.lines

    def spend(self, steps: int) -> None:
        self.steps += steps
        if self.total > self.budget:
            raise OverBudget(f"more than {self.budget} steps and lines")

    def left(self) -> int:
        return max(0, self.budget - self.total)


class _Counted:
    """A compiled pattern whose calls are counted by the step model, then answered by ``re``."""

    def __init__(self, real: re.Pattern[str], work: Work) -> None:
        self._real = real
        self._model = StepModel(real)
        self._work = work

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def _count(self, how: str, string: str, pos: int = 0, endpos: int = sys.maxsize) -> None:
        text = string[:endpos]
        budget = self._work.left() + 1
        if how == "search":
            outcome = self._model.finditer(text, budget, pos, first=True)
        else:
            outcome = getattr(self._model, how)(text, budget, pos)
        self._work.spend(outcome.steps)

    def finditer(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Iterator[re.Match[str]]:
        self._count("finditer", string, pos, endpos)
        return self._real.finditer(string, pos, endpos)

    def findall(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> list[Any]:
        self._count("finditer", string, pos, endpos)
        return self._real.findall(string, pos, endpos)

    def sub(self, repl: Any, string: str, count: int = 0) -> str:
        self._count("finditer", string)
        return self._real.sub(repl, string, count)

    def split(self, string: str, maxsplit: int = 0) -> list[str | Any]:
        self._count("finditer", string)
        return self._real.split(string, maxsplit)

    def search(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        self._count("search", string, pos, endpos)
        return self._real.search(string, pos, endpos)

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        self._count("match", string, pos, endpos)
        return self._real.match(string, pos, endpos)

    def fullmatch(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        self._count("fullmatch", string, pos, endpos)
        return self._real.fullmatch(string, pos, endpos)


def _swapped(value: Any, work: Work) -> Any:
    if isinstance(value, re.Pattern) and isinstance(value.pattern, str):
        return _Counted(value, work)
    if isinstance(value, tuple) and any(isinstance(v, re.Pattern) for v in value):
        return tuple(_swapped(v, work) for v in value)
    if isinstance(value, dict) and any(isinstance(v, re.Pattern) for v in value.values()):
        return {k: _swapped(v, work) for k, v in value.items()}
    return value


@contextmanager
def counted(*modules: ModuleType, budget: int = 10**9) -> Iterator[Work]:
    """Count the work done in ``modules`` while the block runs; past ``budget``, :class:`OverBudget`."""
    work = Work(budget)
    files = {module.__file__ for module in modules}
    saved = {(module, name): value for module in modules for name, value in vars(module).items()}
    for (module, name), value in saved.items():
        swapped = _swapped(value, work)
        if swapped is not value:
            setattr(module, name, swapped)

    def local(frame: FrameType, event: str, arg: object) -> Callable[..., object] | None:
        if event == "line":
            work.lines += 1
            if work.total > work.budget:
                raise OverBudget(f"more than {work.budget} steps and lines")
        return local

    def calls(frame: FrameType, event: str, arg: object) -> Callable[..., object] | None:
        return local if frame.f_code.co_filename in files else None

    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        yield work
    finally:
        sys.settrace(previous)
        for (module, name), value in saved.items():
            setattr(module, name, value)


def growth(run: Callable[[int], object], modules: tuple[ModuleType, ...], n: int) -> tuple[int, int, int]:
    """The work of ``run(n)``, ``run(2n)`` and ``run(3n)`` in ``modules``. A linear count can take no more
    than ``2*w(n) + n`` at 2n and ``2*w(2n) - w(n) + n`` at 3n; a run past that is stopped there, one over."""
    counts: list[int] = []
    for k in (1, 2, 3):
        limit = 10**9 if k == 1 else 2 * counts[0] + n if k == 2 else 2 * counts[1] - counts[0] + n
        with counted(*modules, budget=limit) as work:
            try:
                run(k * n)
            except OverBudget:
                if k == 1:
                    raise AssertionError(f"more than {limit} steps and lines at n = {n}") from None
                counts += [limit + 1] * (3 - len(counts))
                break
        counts.append(work.total)
    return counts[0], counts[1], counts[2]


def linear(counts: tuple[int, int, int], n: int) -> bool:
    """Whether the counts at n, 2n and 3n grow linearly, within a step per character."""
    first, second, third = counts
    return second <= 2 * first + n and third - 2 * second + first <= n
