"""``python -m tests.support.gated_api``: ``voxlog api`` whose document parsing waits at a gate.

The gate is a test's hook, not a setting of the API (issue 38, item 3): a Unix socket, named by
``VOXLOG_DOCUMENT_GATE`` in this process's environment, that each document's parsing connects to and waits
on until it is sent a byte, before it reads anything (``producers.document_parsing``). Only this entry point
reads that variable; ``voxlog api`` knows nothing of it. The rest is ``voxlog api`` as the CLI runs it.
"""

from __future__ import annotations

import asyncio
import os
import sys

from foundation.logging import configure_logging
from foundation.settings import ApiSettings
from voxlog.composition.api import run_api

GATE = "VOXLOG_DOCUMENT_GATE"


def main() -> int:
    gate = os.environ.get(GATE, "")
    if not gate:
        print(f"gated_api: {GATE} names no socket", file=sys.stderr)
        return 2
    configure_logging("INFO")
    asyncio.run(run_api(ApiSettings(), document_gate=gate))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
