"""The cluster's fault campaign (issue 28): every fault of `voxlog chaos --brokers 3` that only a replicated
cluster has, against real processes, three real Kafka brokers and PostgreSQL.

The broker that leads most jobs partitions SIGKILLed, or SIGSTOPped past its session timeout; one of two
projector replicas SIGKILLed; every process restarted one at a time (a rolling upgrade) while the client keeps
submitting. Each under load, each ending with no job lost, none completed twice, `verify --settled` and
`replay --verify` clean, and no submission that the client's documented retry did not absorb. The cluster is
this module's own (a fault kills and restarts its brokers).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from infra.stack import DevStack
from tests.support.campaign_report import proved
from tests.support.stack import PrivateStack
from voxlog.chaos.cluster_faults import CLUSTER_BROKERS, CLUSTER_FAULTS
from voxlog.chaos.faults import Fault
from voxlog.chaos.run import QUICK

# Marked cluster: `infra/test.sh` runs it in a pytest session of its own, beside the others (three brokers
# and eleven processes: in the front session it took the suite past 30 minutes on a 2-core machine).
pytestmark = [pytest.mark.slow, pytest.mark.cluster]


@pytest_asyncio.fixture(scope="module")
async def cluster() -> AsyncIterator[DevStack]:
    private = PrivateStack(brokers=CLUSTER_BROKERS)
    try:
        await private.up()
        yield private.stack
    finally:
        private.down()


@pytest.mark.parametrize("fault", CLUSTER_FAULTS, ids=[fault.__name__ for fault in CLUSTER_FAULTS])
async def test_a_cluster_fault_loses_no_job_completes_none_twice_and_the_retry_absorbs_every_error(
    cluster, tmp_path, fault: Fault
):
    result = await fault(cluster, tmp_path, QUICK)
    assert result.jobs >= QUICK.jobs, result
    assert result.lost == 0, result
    assert result.completed_twice == 0, result
    assert result.unabsorbed == 0, result
    assert result.violations == [], result
    assert result.completed + result.failed == result.jobs, "every job terminal"
    health = await cluster.cluster.health()
    assert health.under_replicated == (), health
    assert health.leaderless == (), health
    proved(
        "cluster campaign",
        f"{result.fault}: {result.jobs} jobs, 0 lost, 0 completed twice, every client error absorbed by its retry,"
        " verify clean, every partition replicated and led again",
    )
