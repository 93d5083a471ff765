"""The fault campaign: every fault of `voxlog chaos`, against real processes, a real broker and PostgreSQL.

Each fault runs on a fresh deployment under load and ends with `voxlog verify --settled` clean: no job
lost, none completed twice, every job terminal, the projection a fold of the log. The broker and the
cluster are this module's own (a fault kills and restarts them).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from infra.stack import DevStack
from tests.support.stack import PrivateStack
from voxlog.chaos.faults import FAULTS, Fault
from voxlog.chaos.run import QUICK

pytestmark = pytest.mark.slow


@pytest_asyncio.fixture(scope="module")
async def chaos_stack() -> AsyncIterator[DevStack]:
    private = PrivateStack()
    try:
        await private.up()
        yield private.stack
    finally:
        private.down()


@pytest.mark.parametrize("fault", FAULTS, ids=[fault.__name__ for fault in FAULTS])
async def test_a_fault_loses_no_job_completes_none_twice_and_verify_is_clean(chaos_stack, tmp_path, fault: Fault):
    result = await fault(chaos_stack, tmp_path, QUICK)
    assert result.jobs >= QUICK.jobs, result
    assert result.lost == 0, result
    assert result.completed_twice == 0, result
    assert result.violations == [], result
    assert result.completed + result.failed == result.jobs, "every job terminal"
