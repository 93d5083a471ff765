"""What each campaign of the suite proved, one line a test, for ``infra/test.sh`` to print at the end of a run.

The script names a file in ``VOXLOG_TEST_REPORT`` for every session it starts; a campaign's test appends its
line once its assertions hold (so a line is a claim the run checked). Without the variable nothing is written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

REPORT_ENV: Final = "VOXLOG_TEST_REPORT"


def proved(campaign: str, line: str) -> None:
    """Append ``campaign: line`` to the run's report, when the run keeps one."""
    path = os.environ.get(REPORT_ENV)
    if path:
        with Path(path).open("a") as report:  # one short write: the sessions share the file
            report.write(f"{campaign}: {line}\n")
