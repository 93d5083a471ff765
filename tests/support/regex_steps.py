"""A step-counting model of Python's backtracking regex engine, for tests that a pattern's work is linear.

Python's ``re`` counts nothing, and CPU time is a clock that a loaded machine
stretches, so the linearity tests run a pattern's own parse tree (``re._parser``,
what the engine compiles) through this small backtracking matcher instead. It
tries alternatives, repeats and lookarounds in the order sre does, and counts a
step for every node it enters, every character a repeat takes and every
position a repeat gives back: the same work sre does, up to a constant factor,
with none of its shortcuts that could hide a quadratic. The count is a pure
function of the pattern and the input, so a bound on it is the same on any
machine under any load.

Single characters (literals, classes, ``.``) and zero-width assertions (``\\b``,
``^``, ``$``, ``\\Z``) are decided by the real engine, compiled from the same
subtree, so flags and Unicode categories mean what they mean to ``re``; and the
tests compare this model's matches with ``re``'s on every input they count, so
a model that drifted from the engine fails them rather than passing them.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from re import _compiler, _parser  # type: ignore[attr-defined]
from re._constants import (  # type: ignore[attr-defined]
    ANY,
    ASSERT,
    ASSERT_NOT,
    AT,
    ATOMIC_GROUP,
    BRANCH,
    GROUPREF,
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
from typing import Any

Cont = Callable[[int], bool]
Node = Callable[[int, Cont], bool]
_SINGLE: frozenset[Any] = frozenset({LITERAL, NOT_LITERAL, ANY, IN})


class OverBudget(Exception):
    """The match took more steps than the caller allowed (the pattern is super-linear on this input)."""


@dataclass
class Outcome:
    steps: int
    spans: list[tuple[int, int]]


class _Run:
    __slots__ = ("budget", "groups", "n", "s", "steps")

    def __init__(self, ngroups: int) -> None:
        self.s = ""
        self.n = 0
        self.steps = 0
        self.budget = 0
        self.groups: list[tuple[int, int] | None] = [None] * ngroups


class StepModel:
    """One compiled pattern, as a counting backtracking matcher."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        if not isinstance(pattern.pattern, str):
            raise TypeError("only str patterns are modelled")
        self.pattern = pattern
        tree = _parser.parse(pattern.pattern, pattern.flags)
        self._state = tree.state
        self._run = _Run(tree.state.groups)
        self._root = self._sequence(list(tree), pattern.flags)

    # -- drivers ----------------------------------------------------------------------------------------

    def finditer(self, text: str, budget: int, pos: int = 0, *, first: bool = False) -> Outcome:
        """Every match from ``pos`` as ``re.finditer`` finds them (what ``sub``, ``split`` and ``findall`` do);
        with ``first``, the first only (``search``)."""
        run = self._start(text, budget)
        spans: list[tuple[int, int]] = []
        must_advance = False
        while pos <= run.n:
            found = self._search(pos, must_advance)
            if found is None:
                break
            spans.append(found)
            if first:
                break
            must_advance = found[0] == found[1]
            pos = found[1]
        return Outcome(run.steps, spans)

    def fullmatch(self, text: str, budget: int, pos: int = 0) -> Outcome:
        """Whether ``text`` from ``pos`` to its end matches, as ``re.fullmatch`` decides."""
        run = self._start(text, budget)
        with _deep():
            ok = self._root(pos, lambda j: j == run.n)
        return Outcome(run.steps, [(pos, run.n)] if ok else [])

    def match(self, text: str, budget: int, pos: int = 0) -> Outcome:
        """The match at ``pos``, as ``re.match`` finds it (one attempt, its first success)."""
        run = self._start(text, budget)
        end: list[int] = []
        with _deep():
            ok = self._root(pos, lambda j: not end.append(j))
        return Outcome(run.steps, [(pos, end[0])] if ok else [])

    def _start(self, text: str, budget: int) -> _Run:
        run = self._run
        run.s, run.n, run.steps, run.budget = text, len(text), 0, budget
        run.groups[:] = [None] * len(run.groups)
        return run

    def _search(self, start: int, must_advance: bool) -> tuple[int, int] | None:
        run = self._run
        end: list[int] = []

        def done(j: int) -> bool:
            if must_advance and j == start:  # sre refuses an empty match where the last one ended
                return False
            end.append(j)
            return True

        with _deep():
            for pos in range(start, run.n + 1):
                self._tick()
                run.groups[:] = [None] * len(run.groups)
                if self._root(pos, done):
                    return pos, end[0]
        return None

    def _tick(self, count: int = 1) -> None:
        run = self._run
        run.steps += count
        if run.steps > run.budget:
            raise OverBudget(f"more than {run.budget} steps")

    # -- compilation --------------------------------------------------------------------------------------

    def _sequence(self, items: list[tuple[Any, Any]], flags: int) -> Node:
        nodes = [self._node(op, av, flags) for op, av in items]
        return _chain(nodes)

    def _real(self, items: list[tuple[Any, Any]], flags: int) -> re.Pattern[str]:
        return _compiler.compile(_parser.SubPattern(self._state, items), flags)  # type: ignore[no-any-return]

    def _char(self, op: Any, av: Any, flags: int) -> Callable[[str], bool]:
        real = self._real([(op, av)], flags)
        cache: dict[str, bool] = {}

        def accepts(ch: str) -> bool:
            known = cache.get(ch)
            if known is None:
                known = cache[ch] = real.fullmatch(ch) is not None
            return known

        return accepts

    def _node(self, op: Any, av: Any, flags: int) -> Node:  # noqa: C901 - one case per opcode (pyproject.toml)
        run, tick = self._run, self._tick
        if op in _SINGLE:
            accepts = self._char(op, av, flags)

            def char(i: int, k: Cont) -> bool:
                tick()
                return i < run.n and accepts(run.s[i]) and k(i + 1)

            return char
        if op is AT:
            real = self._real([(op, av)], flags)

            def at(i: int, k: Cont) -> bool:
                tick()
                return real.match(run.s, i) is not None and k(i)

            return at
        if op is SUBPATTERN:
            group, add, remove, body = av
            if remove:
                raise NotImplementedError("scoped flags removed inside a pattern")
            return self._group(group, self._sequence(list(body), flags | add))
        if op is BRANCH:
            alternatives = [self._sequence(list(alt), flags) for alt in av[1]]

            def branch(i: int, k: Cont) -> bool:
                tick()
                return any(alt(i, k) for alt in alternatives)

            return branch
        if op in (MAX_REPEAT, MIN_REPEAT, POSSESSIVE_REPEAT):
            return self._repeat(op, av, flags)
        if op is ATOMIC_GROUP:
            return self._atomic(self._sequence(list(av), flags))
        if op in (ASSERT, ASSERT_NOT):
            return self._lookaround(op is ASSERT, av[0], av[1], flags)
        if op is GROUPREF:
            return self._groupref(av)
        if op is GROUPREF_EXISTS:
            group, yes, no = av
            when_set = self._sequence(list(yes), flags)
            when_unset = self._sequence(list(no), flags) if no is not None else _chain([])

            def exists(i: int, k: Cont) -> bool:
                tick()
                return (when_set if run.groups[group] is not None else when_unset)(i, k)

            return exists
        raise NotImplementedError(f"opcode {op} is not modelled")

    def _group(self, group: int | None, body: Node) -> Node:
        if group is None:
            return body
        run, tick = self._run, self._tick

        def capture(i: int, k: Cont) -> bool:
            tick()
            before = run.groups[group]

            def close(j: int) -> bool:
                inner = run.groups[group]
                run.groups[group] = (i, j)
                if k(j):
                    return True
                run.groups[group] = inner
                return False

            if body(i, close):
                return True
            run.groups[group] = before
            return False

        return capture

    def _atomic(self, body: Node) -> Node:
        run, tick = self._run, self._tick

        def atomic(i: int, k: Cont) -> bool:
            tick()
            saved = list(run.groups)
            end: list[int] = []
            if body(i, lambda j: not end.append(j)) and k(end[0]):  # the body's first way, never another
                return True
            run.groups[:] = saved
            return False

        return atomic

    def _lookaround(self, positive: bool, direction: int, items: Any, flags: int) -> Node:
        body = self._sequence(list(items), flags)
        width = 0
        if direction < 0:
            low, high = items.getwidth()
            if low != high:
                raise NotImplementedError("variable-width lookbehind")
            width = low
        run, tick = self._run, self._tick

        def look(i: int, k: Cont) -> bool:
            tick()
            saved = list(run.groups)
            at = i - width
            found = at >= 0 and body(at, lambda j: True)
            if positive != bool(found):
                run.groups[:] = saved
                return False
            if not positive:
                run.groups[:] = saved
            if k(i):
                return True
            run.groups[:] = saved
            return False

        return look

    def _groupref(self, group: int) -> Node:
        run, tick = self._run, self._tick

        def ref(i: int, k: Cont) -> bool:
            tick()
            span = run.groups[group]
            if span is None:
                return False
            captured = run.s[span[0] : span[1]]
            tick(len(captured))
            return run.s.startswith(captured, i) and k(i + len(captured))

        return ref

    def _repeat(self, op: Any, av: Any, flags: int) -> Node:
        low, high, items = av
        high = sys.maxsize if high is MAXREPEAT else high
        items = list(items)
        if len(items) == 1 and items[0][0] in _SINGLE:
            return self._char_repeat(op, low, high, self._char(items[0][0], items[0][1], flags))
        body = self._sequence(items, flags)
        greedy = self._general_repeat(low, high, body, lazy=op is MIN_REPEAT)
        return self._atomic(greedy) if op is POSSESSIVE_REPEAT else greedy

    def _char_repeat(  # noqa: C901 - one case per opcode (pyproject.toml)
        self, op: Any, low: int, high: int, accepts: Callable[[str], bool]
    ) -> Node:
        """A repeated single character, as sre's REPEAT_ONE: take the run, then give it back one by one."""
        run, tick = self._run, self._tick

        def longest(i: int) -> int:
            j = i
            limit = min(run.n, i + high) if high < sys.maxsize else run.n
            while j < limit and accepts(run.s[j]):
                j += 1
            tick(j - i + 1)
            return j

        if op is POSSESSIVE_REPEAT:

            def possessive(i: int, k: Cont) -> bool:
                j = longest(i)
                return j - i >= low and k(j)

            return possessive
        if op is MIN_REPEAT:

            def lazy(i: int, k: Cont) -> bool:
                tick()
                j = i
                while j - i < low:
                    if j >= run.n or not accepts(run.s[j]):
                        return False
                    j += 1
                    tick()
                while True:
                    if k(j):
                        return True
                    if j - i >= high or j >= run.n or not accepts(run.s[j]):
                        return False
                    j += 1
                    tick()

            return lazy

        def greedy(i: int, k: Cont) -> bool:
            j = longest(i)
            while j - i >= low:
                tick()
                if k(j):
                    return True
                j -= 1
            return False

        return greedy

    def _general_repeat(self, low: int, high: int, body: Node, *, lazy: bool) -> Node:
        tick = self._tick

        def again(i: int, count: int, k: Cont) -> bool:
            tick()

            def after(j: int) -> bool:
                if j == i:  # an empty iteration ends the repeat (sre's check against looping in place)
                    return k(j)
                return again(j, count + 1, k)

            if lazy:
                if count >= low and k(i):
                    return True
                return count < high and body(i, after)
            if count < high and body(i, after):
                return True
            return count >= low and k(i)

        def repeat(i: int, k: Cont) -> bool:
            return again(i, 0, k)

        return repeat


def _chain(nodes: list[Node]) -> Node:
    if not nodes:
        return lambda i, k: k(i)
    first = nodes[0]
    if len(nodes) == 1:
        return first
    rest = _chain(nodes[1:])
    return lambda i, k: first(i, lambda j: rest(j, k))


@contextmanager
def _deep() -> Iterator[None]:
    """Room for a continuation per repeated item: a run of thousands nests that deep (Python frames only)."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 200_000))
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)
