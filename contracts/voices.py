"""Voice specs: a single voice or a weighted mix of voices, and their canonical form.

Syntax: a voice name of ``a-z``, ``0-9`` and ``_`` (``jf_alpha``), or a mix
of names joined by ``+``, each with an optional positive weight in
parentheses (``jf_alpha(2)+jm_kumo(1)``); a missing weight means 1 and
whitespace around every token is allowed.

The canonical form is what the fingerprint hashes and what engines resolve,
so that spellings of one mix share one fingerprint *and* one sound: names
sorted, repeated names merged (weights summed), weights normalized to sum to
exactly 1 and written with four decimals (``jf_alpha(0.6667)+jm_kumo(0.3333)``);
a mix of one voice is just its name. Normalization runs on exact fractions
with largest-remainder rounding, so the written weights always sum to 1 and
canonicalizing a canonical spec returns it unchanged. Every voice must keep
at least 0.0001 of the mix: a smaller share would round away to nothing.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Final

from contracts.errors import InvalidRequest

WEIGHT_DECIMALS: Final = 4
_UNITS: Final = 10**WEIGHT_DECIMALS
WEIGHT_DIGITS: Final = 9
"""Most digits on either side of a weight's point: ``Fraction`` of thousands of digits was a 500 (Python refuses
to convert over 4,300), and no mix needs more than a few."""
_TERM: Final = re.compile(
    rf"\s*([a-z0-9_]+)\s*(?:\(\s*(\d{{1,{WEIGHT_DIGITS}}}(?:\.\d{{0,{WEIGHT_DIGITS}}})?|\.\d{{1,{WEIGHT_DIGITS}}})\s*\)\s*)?"
)
_SYNTAX: Final = (
    "expected a voice name like 'jf_alpha' or a weighted mix like 'jf_alpha(2)+jm_kumo(1)' "
    f"(names of a-z, 0-9 and _; weights are positive numbers of at most {WEIGHT_DIGITS} digits before and after"
    " the point, a missing weight means 1)"
)


def _terms(spec: str) -> list[tuple[str, Fraction]]:
    terms: list[tuple[str, Fraction]] = []
    for part in spec.split("+"):
        match = _TERM.fullmatch(part)
        # Fractions, not floats: "0.1" must mean exactly 1/10 for the rounding to be reproducible.
        weight = Fraction(match.group(2)) if match and match.group(2) is not None else Fraction(1)
        if match is None or weight <= 0:
            raise InvalidRequest(f"invalid voice {spec!r}: {_SYNTAX}")
        terms.append((match.group(1), weight))
    return terms


def parse_voice_spec(spec: str) -> tuple[tuple[str, float], ...]:
    """``(name, weight)`` pairs in written order, weights as written (1 when omitted)."""
    return tuple((name, float(weight)) for name, weight in _terms(spec))


def canonical_voice(spec: str) -> str:
    """The canonical spelling of ``spec`` (see the module docstring)."""
    merged: dict[str, Fraction] = {}
    for name, weight in _terms(spec):
        merged[name] = merged.get(name, Fraction(0)) + weight
    if len(merged) == 1:
        return next(iter(merged))
    total = sum(merged.values(), Fraction(0))
    shares = {name: weight * _UNITS / total for name, weight in merged.items()}
    too_small = sorted(name for name, share in shares.items() if share < 1)
    if too_small:
        raise InvalidRequest(
            f"invalid voice {spec!r}: {', '.join(too_small)} would get less than 1/{_UNITS} of the mix; "
            "raise its weight or leave it out"
        )
    units = {name: int(share) for name, share in shares.items()}
    # Largest remainder: hand the units lost to flooring to the largest fractions
    # (ties by name) so the written weights sum to exactly 1.
    by_remainder = sorted(shares, key=lambda name: (units[name] - shares[name], name))
    for name in by_remainder[: _UNITS - sum(units.values())]:
        units[name] += 1
    return "+".join(
        f"{name}({units[name] // _UNITS}.{units[name] % _UNITS:0{WEIGHT_DECIMALS}d})" for name in sorted(units)
    )
