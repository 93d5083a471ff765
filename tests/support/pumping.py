"""Adversarial inputs for a regex, derived from its parse tree, and the linear-work check they feed.

A backtracking engine goes super-linear where a repeated item can be matched in
more than one way, or where every start position of a search scans the same run
again. Both show on inputs of one shape: a *lead-in* that brings the match to a
repeat, a *seed* (a character the repeat takes and what follows it cannot, so the
repeat has begun), a long *run* of one character, and a *tail* that makes the
end fail (``\\x07``, which almost no class takes) or nothing. This module walks
the pattern (``re._parser``), makes every such input for every repeat and every
character the pattern names, and measures each at three lengths of the run with
:mod:`tests.support.regex_steps`.

Linear means the step count grows by the same amount for each equal growth of
the run: ``steps(3n) - 2*steps(2n) + steps(n)`` (the second difference) stays
within a small slack. A quadratic makes it ``2an^2``, anything worse more, and a
bounded repeat (``{1,9}``) leaves it at zero once ``n`` is past its bound, which
is why ``n`` starts there. Nothing here reads a clock.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from re import _parser  # type: ignore[attr-defined]
from re._constants import (  # type: ignore[attr-defined]
    ANY,
    ASSERT,
    ASSERT_NOT,
    ATOMIC_GROUP,
    BRANCH,
    GROUPREF_EXISTS,
    IN,
    LITERAL,
    MAX_REPEAT,
    MAXREPEAT,
    MIN_REPEAT,
    NOT_LITERAL,
    POSSESSIVE_REPEAT,
    SUBPATTERN,
)
from typing import Any, Literal

from tests.support.regex_steps import OverBudget, StepModel

Mode = Literal["finditer", "fullmatch", "match"]
REPEATS: frozenset[Any] = frozenset({MAX_REPEAT, MIN_REPEAT, POSSESSIVE_REPEAT})
_SINGLE: frozenset[Any] = frozenset({LITERAL, NOT_LITERAL, ANY, IN})
STRANGER = "\x07"
# What user text is made of at its worst: delimiters, blanks, combining marks, digits, %, dots, letters.
CANDIDATES = ".!?\u2026,;:-\u2013\u2014|#*_~`><[](){}\"'@+=/\\$%&^ \t\n\u0301\u00b0\u00d7\u3002" + "07aZxIVXmse"


@dataclass(frozen=True)
class Case:
    lead: str
    seed: str
    unit: str
    tail: str

    def text(self, n: int) -> str:
        return self.lead + self.seed + self.unit * n + self.tail


@dataclass(frozen=True)
class Growth:
    case: Case
    mode: Mode
    steps: tuple[int, int, int]  # at n, 2n and 3n
    n: int

    @property
    def excess(self) -> int:
        """How far the step count's growth accelerates: 0 for a linear count."""
        a, b, c = self.steps
        return c - 2 * b + a


class _Tree:
    """What the inputs are made from: the characters each node accepts, first sets, shortest strings."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.root = _parser.parse(pattern.pattern, pattern.flags)
        self._state = self.root.state
        self._flags = pattern.flags
        self._accepts: dict[int, frozenset[str]] = {}
        pool = dict.fromkeys(CANDIDATES + "".join(self._literals(self.root)))
        self.pool = "".join(pool)
        chosen: dict[str, None] = {}
        for op, av in self._singles(self.root):
            taken = [c for c in self.pool if c in self._accepted(op, av)]
            chosen.update(dict.fromkeys(taken[:3]))
        self.alphabet = "".join(chosen)

    def _literals(self, items: Any) -> Iterator[str]:
        for op, av in items:
            if op is LITERAL:
                yield chr(av)
            elif op is IN:
                for sub_op, sub_av in av:
                    if sub_op is LITERAL:
                        yield chr(sub_av)
                    elif sub_op is not IN and isinstance(sub_av, tuple) and len(sub_av) == 2:
                        yield chr(sub_av[0])
            else:
                for child in _children(op, av):
                    yield from self._literals(child)

    def _singles(self, items: Any) -> Iterator[tuple[Any, Any]]:
        for op, av in items:
            if op in _SINGLE:
                yield op, av
            for child in _children(op, av):
                yield from self._singles(child)

    def _accepted(self, op: Any, av: Any) -> frozenset[str]:
        key = id(av) if op is IN else hash((op, av))
        if key not in self._accepts:
            from re import _compiler  # type: ignore[attr-defined]

            real = _compiler.compile(_parser.SubPattern(self._state, [(op, av)]), self._flags)
            self._accepts[key] = frozenset(c for c in self.pool + STRANGER if real.fullmatch(c))
        return self._accepts[key]

    def first(self, items: Any) -> frozenset[str]:
        """The characters of the pool a match of the sequence ``items`` can start with."""
        found: set[str] = set()
        for op, av in items:
            found |= self._first_of(op, av)
            if not self._nullable(op, av):
                break
        return frozenset(found)

    def _first_of(self, op: Any, av: Any) -> frozenset[str]:
        if op in _SINGLE:
            return self._accepted(op, av)
        if op in REPEATS:
            return self.first(av[2])
        if op is SUBPATTERN:
            return self.first(av[3])
        if op is ATOMIC_GROUP:
            return self.first(av)
        if op is BRANCH:
            return frozenset().union(*(self.first(alt) for alt in av[1]))
        if op is GROUPREF_EXISTS:
            return self.first(av[1]) | (self.first(av[2]) if av[2] is not None else frozenset())
        return frozenset()

    def nullable(self, items: Any) -> bool:
        return all(self._nullable(op, av) for op, av in items)

    def _nullable(self, op: Any, av: Any) -> bool:
        if op in _SINGLE:
            return False
        if op in REPEATS:
            return av[0] == 0 or self.nullable(av[2])
        if op is SUBPATTERN:
            return self.nullable(av[3])
        if op is ATOMIC_GROUP:
            return self.nullable(av)
        if op is BRANCH:
            return any(self.nullable(alt) for alt in av[1])
        return True  # assertions, group references, conditionals: zero width, or taken as such

    def shortest(self, items: Any) -> str:
        return "".join(self._shortest_of(op, av) for op, av in items)

    def _shortest_of(self, op: Any, av: Any) -> str:
        if op in _SINGLE:
            accepted = self._accepted(op, av)
            return next((c for c in self.pool if c in accepted), STRANGER if STRANGER in accepted else "")
        if op in REPEATS:
            return self.shortest(av[2]) * av[0]
        if op is SUBPATTERN:
            return self.shortest(av[3])
        if op is ATOMIC_GROUP:
            return self.shortest(av)
        if op is BRANCH:
            return min((self.shortest(alt) for alt in av[1]), key=len)
        return ""

    def pump_points(self) -> Iterator[tuple[str, frozenset[str], frozenset[str]]]:
        """(lead-in, what the repeat takes first, what can follow it) for every repeat of the pattern."""
        yield from self._walk(list(self.root), "", frozenset())

    def _walk(self, items: list[Any], lead: str, follow: frozenset[str]) -> Iterator[Any]:
        for j, (op, av) in enumerate(items):
            before = lead + self.shortest(items[:j])
            rest = items[j + 1 :]
            after = self.first(rest) | (follow if self.nullable(rest) else frozenset())
            if op in REPEATS:
                body = list(av[2])
                yield before, self.first(body), after
                yield from self._walk(body, before, after | self.first(body))
            elif op is SUBPATTERN:
                yield from self._walk(list(av[3]), before, after)
            elif op is ATOMIC_GROUP:
                yield from self._walk(list(av), before, after)
            elif op is BRANCH:
                for alt in av[1]:
                    yield from self._walk(list(alt), before, after)
            elif op in (ASSERT, ASSERT_NOT) and av[0] > 0:
                yield from self._walk(list(av[1]), before, frozenset(self.pool))

    def widest_bound(self) -> int:
        """The longest stretch a bounded repeat can take (past it, its cost per character is constant)."""
        return max((high * max(1, width) for high, width in self._bounds(self.root)), default=0)

    def _bounds(self, items: Any) -> Iterator[tuple[int, int]]:
        for op, av in items:
            width = av[2].getwidth()[1] if op in REPEATS else 0
            if op in REPEATS and av[1] is not MAXREPEAT and width < MAXREPEAT:
                yield av[1], width
            for child in _children(op, av):
                yield from self._bounds(child)


def _children(op: Any, av: Any) -> Iterator[Any]:
    if op in REPEATS:
        yield av[2]
    elif op is SUBPATTERN:
        yield av[3]
    elif op is ATOMIC_GROUP:
        yield av
    elif op is BRANCH:
        yield from av[1]
    elif op in (ASSERT, ASSERT_NOT):
        yield av[1]
    elif op is GROUPREF_EXISTS:
        yield av[1]
        if av[2] is not None:
            yield av[2]


def cases(pattern: re.Pattern[str]) -> list[Case]:
    """Every adversarial input shape for ``pattern``: runs of each character it names or any delimiter,
    blank, mark or digit, and, for each repeat, the run behind its lead-in and seed; each with and
    without a failing tail."""
    tree = _Tree(pattern)
    found: dict[Case, None] = {}
    for unit in dict.fromkeys(tree.alphabet + CANDIDATES):
        for tail in ("", STRANGER):
            found[Case("", "", unit, tail)] = None
    for lead, takes, after in tree.pump_points():
        seeds = ["", *[c for c in tree.alphabet if c in takes and c not in after][:2]]
        for seed in seeds:
            for unit in tree.alphabet:
                for tail in ("", STRANGER):
                    found[Case(lead, seed, unit, tail)] = None
    return list(found)


def run_length(pattern: re.Pattern[str]) -> int:
    """A run long enough that every bounded repeat of ``pattern`` is saturated."""
    return max(12, _Tree(pattern).widest_bound() + 4)


def growth(model: StepModel, case: Case, mode: Mode, n: int) -> Growth:
    """The steps ``model`` takes on ``case`` at runs of ``n``, ``2n`` and ``3n``, its matches checked
    against ``re``'s. The third run is stopped one step past what a linear count allows, and a run past
    a few hundred steps per character is not finished either: such counts stand for unbounded work."""
    counts: list[int] = []
    for size in (n, 2 * n, 3 * n):
        text = case.text(size)
        linear = 2 * counts[1] - counts[0] + n if len(counts) == 2 else sys.maxsize
        budget = min(linear, 1600 * (len(text) + 10))
        try:
            outcome = getattr(model, mode)(text, budget)
        except OverBudget:
            if len(counts) < 2:  # past a few hundred steps per character before the fit: unbounded
                return Growth(case, mode, (0, 0, sys.maxsize // 4), n)
            counts.append(budget + 1)  # one past what a linear count allows
            break
        if mode == "finditer":
            expected = [m.span() for m in model.pattern.finditer(text)]
        else:
            found = getattr(model.pattern, mode)(text)
            expected = [found.span()] if found else []
        if outcome.spans != expected:
            raise AssertionError(f"the step model disagrees with re on {text!r}: {outcome.spans} != {expected}")
        counts.append(outcome.steps)
    return Growth(case, mode, (counts[0], counts[1], counts[2]), n)


def worst(pattern: re.Pattern[str], modes: tuple[Mode, ...]) -> Growth | None:
    """The input on which ``pattern``'s work accelerates most, if any accelerates past a step per character."""
    model = StepModel(pattern)
    n = run_length(pattern)
    bad: Growth | None = None
    for mode in modes:
        for case in cases(pattern):
            measured = growth(model, case, mode, n)
            if measured.excess > n and (bad is None or measured.excess > bad.excess):
                bad = measured
    return bad
