"""Route guards run on the event loop: Litestar sends a plain function guard to its thread pool."""

from __future__ import annotations

import inspect

from producers.app import ROUTES
from producers.auth import ADMIN, OPERATOR, READ, SUBMIT


def _guards(handler: object) -> list[object]:
    return list(getattr(handler, "guards", None) or [])


def test_regression_every_guard_is_a_coroutine_function_not_a_thread_hop_per_request() -> None:
    """The scope guards were plain functions: every keyed request hopped to a thread and back, about a fifth of
    the API's CPU under load (bench/profile_cpu.py), and the cause of bench (b)'s lower figure."""
    for guard in [*SUBMIT, *READ, *ADMIN, *OPERATOR]:
        assert inspect.iscoroutinefunction(guard), guard
    guarded = [handler for handler in ROUTES if _guards(handler)]
    assert guarded, "no route declares a guard: the test reads the wrong attribute"
    for handler in guarded:
        for declared in _guards(handler):
            assert inspect.iscoroutinefunction(declared), f"{handler}: {declared} runs in a thread"
