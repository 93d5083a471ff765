"""The benchmarks' base exception."""

from __future__ import annotations


class BenchError(Exception):
    """A benchmark could not run, or the baseline's database refused an operation."""
