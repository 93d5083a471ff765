"""Benchmarks: voxlog against a Postgres SKIP LOCKED job queue, on the same Kafka, Postgres and engines.

``voxlog bench`` (or ``python -m bench``) runs the scenarios and writes
``bench/results/*.json``, ``docs/benchmarks.md`` and its plots.
"""
