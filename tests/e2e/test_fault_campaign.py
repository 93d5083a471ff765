"""The fault campaign: every fault of `voxlog chaos`, against real processes, a real broker and PostgreSQL.

Each fault runs on a fresh deployment under load and ends with `voxlog verify --settled` clean: no job
lost, none completed twice, every job terminal, the projection a fold of the log. Each deployment runs the
delivery process too (two copies of `voxlog deliver`) with a webhook endpoint on loopback registered before
the jobs: every terminal job's outcome reaches it at least once, signed with its secret (duplicates counted,
not refused), and webhook_deliveries shows it delivered; deliver_kills SIGKILLs the delivery process itself
(issue 39, item 2). The faults that spare the broker and PostgreSQL run on the suite's shared stack (each
deployment on topics and a schema of its own, dropped after it); those that kill and restart them, on a stack
of this module's own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from infra.stack import DevStack
from tests.support.campaign_report import proved
from tests.support.stack import PrivateStack
from voxlog.chaos.faults import FAULTS, Fault
from voxlog.chaos.run import QUICK

pytestmark = pytest.mark.slow


@pytest_asyncio.fixture(scope="module")
async def private_stack() -> AsyncIterator[DevStack]:
    private = PrivateStack()
    try:
        await private.up()
        yield private.stack
    finally:
        private.down()


# The faults that kill or stop the broker or PostgreSQL: not on the stack every other test uses. A private
# stack is a second broker and database for the module's whole run (their start and about 0.1 CPU-s a second
# idle, on a CI whose two cores are busy from start to end).
STACK_FAULTS = {"broker_kill", "postgres_restart"}


@pytest.fixture
def chaos_stack(request: pytest.FixtureRequest, fault: Fault) -> DevStack:
    stack: DevStack = request.getfixturevalue("private_stack" if fault.__name__ in STACK_FAULTS else "stack")
    return stack


# In the suite, the faults that no other test injects: a broker killed under load and PostgreSQL restarted
# under load are tests/e2e/test_outages.py's, and worker_kill_holding_claims SIGKILLs a worker as worker_kills
# does (while it holds several claims). `voxlog chaos` injects every fault; `infra/test.sh --cluster` these too.
IN_SUITE = tuple(f for f in FAULTS if f.__name__ not in {*STACK_FAULTS, "worker_kills"})


@pytest.mark.parametrize(
    "fault",
    [pytest.param(f, marks=[] if f in IN_SUITE else [pytest.mark.cluster]) for f in FAULTS],
    ids=[fault.__name__ for fault in FAULTS],
)
async def test_a_fault_loses_no_job_completes_none_twice_and_verify_is_clean(chaos_stack, tmp_path, fault: Fault):
    result = await fault(chaos_stack, tmp_path, QUICK)
    assert result.jobs >= QUICK.jobs, result
    assert result.lost == 0, result
    assert result.completed_twice == 0, result
    assert result.violations == [], result
    assert result.completed + result.failed == result.jobs, "every job terminal"
    assert result.webhooks_due == result.jobs, result
    assert result.webhooks_delivered == result.webhooks_due, "every outcome delivered at least once"
    proved(
        "fault campaign",
        f"{result.fault}: {result.jobs} jobs, 0 lost, 0 completed twice, every job terminal, verify clean, every"
        f" outcome delivered by webhook ({result.webhook_duplicates} received again, {result.webhook_lag_s} s lag)",
    )
