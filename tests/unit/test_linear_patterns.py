"""Every regex that sees user text does work linear in it, counted in steps on adversarial inputs.

Each pattern runs through :mod:`tests.support.regex_steps`, a model of the backtracking engine that counts
the steps it takes (Python's ``re`` counts none), on every input :mod:`tests.support.pumping` derives from
the pattern: runs of delimiters, blanks, combining marks, digits, ``%``, dots and of every character the
pattern names, after a lead-in to each of its repeats, with and without a failing tail, in the way the
code calls it (``finditer`` for ``sub``/``search``/``split``/``findall``, else ``match`` or ``fullmatch``).
The count's growth may not accelerate from a run of n to 2n to 3n characters, n past every bounded repeat:
a count linear there is linear at any length, the 10^5 of the issue's reproductions included. The model's
matches are compared with ``re``'s on every input, so a model that drifted would fail, not pass.

Why none of this can flake on a loaded two-core machine: the counts are a function of the pattern and the
input alone; no clock is read and nothing runs concurrently.
"""

from __future__ import annotations

import importlib
import re
from types import ModuleType

import pytest

from tests.support.pumping import Mode, worst

pytestmark = pytest.mark.unit

MODULES = (
    "producers.document_split",
    "producers.epub",
    "tts_node.segmenter",
    "tts_node.g2p",
    "contracts.voices",
    "contracts.fingerprint",
    "tts_node.normalization.addresses",
    "tts_node.normalization.dates",
    "tts_node.normalization.durations",
    "tts_node.normalization.measures",
    "tts_node.normalization.numbers",
    "tts_node.normalization.punctuation",
    "tts_node.normalization.quantities",
    "tts_node.normalization.words",
)

# How the code calls each pattern: a new one must be listed here, or the completeness test fails.
USES: dict[str, Mode] = {
    "producers.document_split._SENTENCE_END": "finditer",
    "producers.document_split._CLAUSE_END": "finditer",
    "producers.document_split._INITIALS": "fullmatch",
    "producers.document_split._ABBREVIATION": "fullmatch",
    "producers.document_split._CHAPTER_MARKER": "fullmatch",
    "producers.document_split._FENCE": "match",
    "producers.document_split._ATX": "fullmatch",
    "producers.document_split._SETEXT": "fullmatch",
    "producers.document_split._RULE": "fullmatch",
    "producers.document_split._LIST_ITEM": "fullmatch",
    "producers.document_split._QUOTES": "finditer",
    "producers.document_split._REF_DEF": "fullmatch",
    "producers.document_split._SEPARATOR_CELL": "fullmatch",
    "producers.document_split._CELL_SEP": "finditer",
    "producers.document_split._FRONT_TITLE": "fullmatch",
    "producers.document_split._BACKTICKS": "finditer",
    "producers.document_split._ESCAPED": "finditer",
    "producers.document_split._HIDDEN_START": "finditer",
    "producers.document_split._HIDDEN_END[]": "finditer",
    "producers.document_split._HIDDEN_END[script]": "finditer",
    "producers.document_split._HIDDEN_END[style]": "finditer",
    "producers.document_split._AUTOLINK": "finditer",
    "producers.document_split._IMAGE": "finditer",
    "producers.document_split._LINK": "finditer",
    "producers.document_split._FOOTNOTE_REF": "finditer",
    "producers.document_split._SHORTCUT_LINK": "finditer",
    "producers.document_split._BREAK_TAG": "finditer",
    "producers.document_split._TAG": "finditer",
    **{f"producers.document_split._EMPHASIS[{i}]": "finditer" for i in range(5)},
    "producers.document_split._KEPT": "finditer",
    "tts_node.segmenter._LINE_BREAK": "fullmatch",
    "tts_node.segmenter._SENTENCE_END": "finditer",
    "tts_node.segmenter._NEXT_CHAR": "match",
    "tts_node.segmenter._CLAUSE_END": "finditer",
    "tts_node.segmenter._WORD": "finditer",
    "tts_node.g2p._EMOJI": "finditer",
    "contracts.voices._TERM": "fullmatch",
    "contracts.fingerprint._WHITESPACE_RUN": "finditer",
    "tts_node.normalization.addresses._PIECE": "finditer",
    "tts_node.normalization.addresses._SCHEME": "finditer",
    "tts_node.normalization.addresses._DIGIT_GROUP": "finditer",
    "tts_node.normalization.addresses._LOCAL_RUN": "finditer",
    "tts_node.normalization.addresses._DOMAIN": "match",
    "tts_node.normalization.addresses._URL": "finditer",
    "tts_node.normalization.addresses._PHONE": "finditer",
    "tts_node.normalization.dates._ISO": "finditer",
    "tts_node.normalization.dates._NUMERIC": "finditer",
    "tts_node.normalization.dates._MONTH_FIRST": "finditer",
    "tts_node.normalization.dates._DAY_FIRST": "finditer",
    "tts_node.normalization.dates._MONTH_YEAR": "finditer",
    "tts_node.normalization.dates._CLOCK": "finditer",
    "tts_node.normalization.dates._HOUR": "finditer",
    "tts_node.normalization.numbers._LAST_WORD": "finditer",
    "tts_node.normalization.punctuation._SENTENCE_END": "match",
    "tts_node.normalization.punctuation._TEXT_END": "match",
    "tts_node.normalization.quantities._RANGE": "finditer",
    "tts_node.normalization.quantities._BETWEEN": "finditer",
    **{f"tts_node.normalization.quantities._MONEY[{i}]": "finditer" for i in range(3)},
    "tts_node.normalization.quantities._PERCENT": "finditer",
    "tts_node.normalization.durations._DURATION": "finditer",
    "tts_node.normalization.measures._MEASURE": "finditer",
    "tts_node.normalization.measures._ARTICLE_BEFORE": "finditer",
    "tts_node.normalization.measures._NOUN_AFTER": "match",
    "tts_node.normalization.measures._FEET_INCHES": "finditer",
    "tts_node.normalization.measures._MULTIPLIER": "finditer",
    "tts_node.normalization.quantities._DECADE": "finditer",
    "tts_node.normalization.quantities._SHORT_DECADE": "finditer",
    "tts_node.normalization.quantities._ORDINAL": "finditer",
    "tts_node.normalization.quantities._DOTTED": "finditer",
    "tts_node.normalization.quantities._VERSION_WORD": "finditer",
    "tts_node.normalization.quantities._DECIMAL": "finditer",
    "tts_node.normalization.quantities._FRACTION": "finditer",
    "tts_node.normalization.quantities._DIMENSIONS": "finditer",
    "tts_node.normalization.quantities._NAMED": "finditer",
    "tts_node.normalization.quantities._ALPHANUMERIC": "finditer",
    "tts_node.normalization.quantities._DIGIT_GROUP": "finditer",
    "tts_node.normalization.quantities._LETTERS_OR_DIGITS": "finditer",
    "tts_node.normalization.quantities._YEAR": "finditer",
    "tts_node.normalization.quantities._COUNTED_BEFORE": "finditer",
    "tts_node.normalization.quantities._INTEGER": "finditer",
    "tts_node.normalization.words._ABBREVIATION": "finditer",
    "tts_node.normalization.words._NAME_AFTER": "match",
    "tts_node.normalization.words._NAME_WORD": "fullmatch",
    "tts_node.normalization.words._INITIALISM": "finditer",
    "tts_node.normalization.words._ROMAN": "fullmatch",
    "tts_node.normalization.words._NUMBERED": "finditer",
    "tts_node.normalization.words._HEADING": "finditer",
    "tts_node.normalization.words._WORD_AFTER": "match",
    "tts_node.normalization.words._SYMBOLS": "finditer",
}
# Bytes patterns, which the model does not run, and why their work is bounded anyway.
BOUNDED: dict[str, str] = {
    "producers.epub._XML_ENCODING": "matched once per document, on its first 1,024 bytes only",
}


def patterns_of(module: ModuleType) -> dict[str, re.Pattern[str]]:
    """The module's compiled patterns, named as :data:`USES` names them (a tuple's or dict's by key)."""
    found: dict[str, re.Pattern[str]] = {}
    for name, value in vars(module).items():
        entries: list[tuple[str, object]] = [(name, value)]
        if isinstance(value, tuple):
            entries = [(f"{name}[{i}]", v) for i, v in enumerate(value)]
        elif isinstance(value, dict):
            entries = [(f"{name}[{k}]", v) for k, v in value.items()]
        for label, candidate in entries:
            if isinstance(candidate, re.Pattern):
                found[f"{module.__name__}.{label}"] = candidate
    return found


ALL = {name: p for module in MODULES for name, p in patterns_of(importlib.import_module(module)).items()}


def test_every_pattern_that_sees_user_text_is_listed_with_how_it_is_called():
    assert set(ALL) == set(USES) | set(BOUNDED)
    assert all(isinstance(ALL[name].pattern, bytes) for name in BOUNDED)


@pytest.mark.parametrize("name", sorted(USES))
def test_a_pattern_does_linear_work_on_adversarial_runs(name: str):
    """Linear in steps on every derived input (see the module docstring); the input the count accelerates
    most on is named when one does. Steps of a model, not time: it cannot flake on a loaded machine."""
    bad = worst(ALL[name], (USES[name],))
    assert bad is None, (
        f"{name} ({USES[name]}) does super-linear work on {bad.case.text(bad.n)!r} at runs of n, 2n, 3n:"
        f" {bad.steps} steps"
    )
