"""``python -m bench`` (what ``voxlog bench`` runs): the benchmarks, with their own options."""

from __future__ import annotations

import sys

from bench.errors import BenchError
from bench.run import main
from foundation.errors import FoundationError
from foundation.logging import configure_logging
from infra.errors import InfraError
from projections.errors import ProjectionError
from voxlog.errors import VoxlogError

configure_logging("WARNING")
try:
    sys.exit(main())
except (BenchError, InfraError, FoundationError, ProjectionError, VoxlogError) as exc:
    print(f"voxlog bench: {exc}", file=sys.stderr)
    sys.exit(2)
