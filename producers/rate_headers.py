"""The IETF ``RateLimit-Policy`` and ``RateLimit`` header fields (draft-ietf-httpapi-ratelimit-headers).

A policy is named and has a quota ``q`` over a window ``w`` (seconds) in a
unit ``qu``; ``RateLimit`` says what is left of it (``r``) and in how many
seconds it is whole again (``t``). A key's token bucket of ``burst`` tokens
refilled at ``rate`` per second is the policy ``q=burst;w=burst/rate``.
"""

from __future__ import annotations

import math


def limit_headers(
    name: str, quota: float, window_s: float, unit: str, remaining: float, reset_s: float
) -> dict[str, str]:
    return {
        "RateLimit-Policy": f'"{name}";q={math.floor(quota)};w={max(1, math.ceil(window_s))};qu="{unit}"',
        "RateLimit": f'"{name}";r={max(0, math.floor(remaining))};t={max(0, math.ceil(reset_s))}',
    }
