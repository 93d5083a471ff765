"""The step model the linearity tests count with (tests.support.regex_steps, tests.support.pumping).

A model that matched differently from ``re``, or counted a quadratic as linear, would make those tests
worthless: these pin both. Counts only, no clock: nothing here can flake on a loaded machine.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.pumping import worst
from tests.support.regex_steps import OverBudget, StepModel

pytestmark = pytest.mark.unit

CONSTRUCTS = [
    r"a+b", r"a*?b", r"(?:ab|a)+c", r"a{2,4}", r"(a)(?(1)b|c)", r"(a|b)\1", r"(?=ab)a", r"(?!a)b", r"(?<=a)b",
    r"(?<!a)b", r"\ba\b", r"^a|b$", r"(?>a+)b", r"a++b", r"a?+a", r"[^a]+", r".", r"(?:a|)+", r"x*",
    r"(?i:A)b", r"\w+@\d", r"\s*", r"(?:a*)*b",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(pattern=st.sampled_from(CONSTRUCTS), text=st.text(alphabet="ab@1 x\nA", max_size=12))
def test_the_model_finds_what_re_finds(pattern: str, text: str) -> None:
    compiled = re.compile(pattern)
    model = StepModel(compiled)
    assert model.finditer(text, 10**6).spans == [m.span() for m in compiled.finditer(text)]
    full = compiled.fullmatch(text)
    assert model.fullmatch(text, 10**6).spans == ([full.span()] if full else [])
    first = compiled.match(text)
    assert model.match(text, 10**6).spans == ([first.span()] if first else [])


@pytest.mark.parametrize(
    ("pattern", "mode"),
    [
        (r"[.]+(?= )", "finditer"),  # every start of a run scans the rest of it
        (r"(a|a)*b", "fullmatch"),  # exponential
        (r"\s*x\s*y", "finditer"),
        (r"a*a*b", "fullmatch"),
        (r"title:[ \t]*(.*?)[ \t]*", "fullmatch"),
    ],
)
def test_a_super_linear_pattern_is_caught(pattern: str, mode: str) -> None:
    assert worst(re.compile(pattern), (mode,)) is not None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pattern", "mode"),
    [
        (r"(?<![.])[.]++(?= )", "finditer"),
        (r"(?>a+)b", "fullmatch"),
        (r"[a-z]{1,9}\.", "finditer"),  # bounded: constant work per character once past the bound
        (r"\S+", "finditer"),
        (r"title:[ \t]*+(.*+)", "fullmatch"),
    ],
)
def test_a_linear_pattern_passes(pattern: str, mode: str) -> None:
    assert worst(re.compile(pattern), (mode,)) is None  # type: ignore[arg-type]


def test_the_budget_stops_a_match() -> None:
    with pytest.raises(OverBudget):
        StepModel(re.compile(r"(a|a)*b")).fullmatch("a" * 30, 10_000)
