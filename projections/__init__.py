"""Projections: Postgres read models of the event log, and their migrations."""
