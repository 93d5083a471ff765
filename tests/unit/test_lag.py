"""Lag and group status from samples (foundation.lag_rules): the Burrow-style rules, rate and time to drain."""

from __future__ import annotations

import dataclasses

import pytest

from foundation.lag_rules import PartitionPosition, Sample, Status, as_json, evaluate
from voxlog.lag_cli import table


def sample(
    at_s: float, positions: list[tuple[int | None, int]], members: int | None = 1, oldest_s: float = 0
) -> Sample:
    rows = tuple(
        PartitionPosition(n, position, 0, end, int(oldest_s * 1000) if (position or 0) < end else None)
        for n, (position, end) in enumerate(positions)
    )
    return Sample(at_s, "g", "jobs", members, rows)


@pytest.mark.parametrize(
    ("window", "status", "reason"),
    [
        ([sample(0, [(10, 10)]), sample(10, [(20, 20)])], Status.OK, "no lag"),
        ([sample(0, [(0, 10)]), sample(10, [(5, 12)])], Status.OK, "lag holds or shrinks"),
        ([sample(0, [(0, 10)], members=0)], Status.STOP, "the group has no members"),
        ([sample(0, [(5, 6)]), sample(90, [(5, 9)])], Status.STALL, "partition(s) 0 have lag and did not move"),
        ([sample(0, [(5, 6)]), sample(30, [(5, 9)])], Status.WARN, "lag grew across the window on partition(s) 0"),
        (
            [sample(0, [(0, 10), (0, 0)]), sample(20, [(5, 20), (0, 0)]), sample(40, [(10, 30), (0, 0)])],
            Status.WARN,
            "lag grew across the window on partition(s) 0",
        ),
        ([sample(0, [(0, 10)]), sample(20, [(5, 30)]), sample(40, [(25, 30)])], Status.OK, "lag holds or shrinks"),
        ([sample(0, [(5, 9)])], Status.OK, "one sample"),
    ],
)
def test_the_status_follows_burrows_rules(window, status, reason):
    lag = evaluate(window, stall_after_s=60)
    assert lag.status is status
    assert lag.reason.startswith(reason)


def test_regression_a_partition_waiting_while_its_worker_serves_the_others_is_not_a_stall():
    """One healthy worker draining 30 queued jobs showed STALL: "partitions 5, 8, 18 have lag and did not move".

    A worker serves its partitions one job at a time; partitions 1 and 2 wait while it works through 0.
    """
    window = [sample(0, [(0, 10), (0, 10), (0, 10)]), sample(60, [(6, 10), (0, 10), (0, 10)])]
    window.append(sample(120, [(10, 10), (0, 10), (0, 10)]))
    lag = evaluate(window, stall_after_s=60)
    assert (lag.status, lag.reason) == (Status.OK, "lag holds or shrinks")


def test_a_group_none_of_whose_partitions_moves_is_a_stall():
    window = [sample(0, [(4, 10), (3, 3), (0, 10)]), sample(90, [(4, 10), (3, 3), (0, 10)])]
    lag = evaluate(window, stall_after_s=60)
    assert lag.status is Status.STALL
    assert lag.reason.startswith("partition(s) 0, 2 have lag and did not move across the window")


def test_regression_a_window_in_which_the_lag_touched_zero_is_ok():
    """The projector showed WARN for 3 records 13 ms behind: its lag went from 0 to 3 between two samples."""
    lag = evaluate([sample(0, [(7, 7)]), sample(5, [(7, 10)])], stall_after_s=60)
    assert (lag.status, lag.reason) == (Status.OK, "lag touched zero within the window")
    stalled_since_zero = evaluate([sample(0, [(7, 7)]), sample(90, [(7, 10)])], stall_after_s=60)
    assert stalled_since_zero.status is Status.OK, "Burrow's first rule comes first"


def test_a_waiting_partition_whose_lag_grows_while_the_group_drains_is_not_a_warning():
    window = [sample(0, [(0, 5), (0, 2)]), sample(10, [(2, 5), (0, 3)]), sample(20, [(4, 5), (0, 4)])]
    assert evaluate(window, stall_after_s=60).status is Status.OK, "the group's lag went 7, 6, 5"


def test_regression_a_projector_a_few_records_behind_while_it_keeps_up_is_ok_not_warn():
    """The projector showed WARN ("lag grew across the window on partition(s) 7, 17") while a worker drained
    a backlog: it applies in batches, so its lag went 1, 2, 3 records across a window of a few seconds, never
    touching zero, while every record it had not applied was younger than the window."""
    window = [sample(100, [(7, 8)], oldest_s=99.9), sample(102, [(9, 11)], oldest_s=101.8)]
    window.append(sample(104, [(12, 15)], oldest_s=103.7))
    lag = evaluate(window, stall_after_s=3)
    assert (lag.status, lag.reason) == (Status.OK, "lag grew, but every record older than the window was consumed")
    slower = [*window[:2], sample(104, [(9, 15)], oldest_s=101.8)]
    assert evaluate(slower, stall_after_s=3).status is Status.OK, "still younger than the window: it moved"
    left_behind = [*window[:2], sample(104, [(8, 15)], oldest_s=99.95)]
    assert evaluate(left_behind, stall_after_s=3).status is Status.WARN


def owing(window: list[Sample], owed: list[int | None]) -> list[Sample]:
    return [dataclasses.replace(sample, owed=jobs) for sample, jobs in zip(window, owed, strict=True)]


GROWING = [sample(0, [(0, 10)]), sample(20, [(5, 20)]), sample(40, [(10, 30)])]


def test_regression_a_worker_holding_commits_for_the_backlog_it_read_ahead_is_ok_not_warn():
    """One healthy worker draining 30 queued jobs showed WARN ("lag grew across the window on partition(s) 0,
    2, 21"): it holds several claims and reads jobs ahead, so it commits only up to the first job it has not
    finished while its own claims, segments and completions append to the topic. The jobs it owes shrank."""
    lag = evaluate(owing(GROWING, [30, 24, 18]), stall_after_s=60)
    assert (lag.status, lag.reason) == (
        Status.OK,
        "lag grew by the group's own events: the jobs it owes went from 30 to 18",
    )


def test_a_lag_that_grows_with_the_jobs_owed_is_a_warning():
    assert evaluate(owing(GROWING, [30, 34, 40]), stall_after_s=60).status is Status.WARN


def test_without_the_jobs_owed_a_growing_lag_is_a_warning():
    """PostgreSQL down: the projection cannot say what the group owes, so the records decide, as before."""
    assert evaluate(owing(GROWING, [30, None, None]), stall_after_s=60).status is Status.WARN
    assert evaluate(owing(GROWING, [None, None, 18]), stall_after_s=60).status is Status.WARN


def test_the_jobs_owed_never_hide_a_stall():
    window = owing([sample(0, [(5, 6)]), sample(90, [(5, 9)])], [3, 1])
    assert evaluate(window, stall_after_s=60).status is Status.STALL


def test_records_seconds_rate_and_time_to_drain():
    window = [sample(100, [(0, 100), (None, 4)], oldest_s=40), sample(110, [(50, 100), (None, 4)], oldest_s=90)]
    lag = evaluate(window)
    first, second = lag.partitions
    assert (first.records, first.seconds, first.per_s, first.drain_s) == (50, 20.0, 5.0, 10.0)
    assert (second.position, second.records, second.per_s, second.drain_s) == (0, 4, 0.0, None), "never, at rate 0"
    assert (lag.records, lag.seconds, lag.per_s) == (54, 20.0, 5.0)
    assert lag.drain_s == pytest.approx(10.8)
    body = as_json(lag)
    assert (body["status"], body["records"], body["partitions"][0]["drain_s"]) == ("OK", 54, 10.0)


def test_a_position_below_the_logs_start_counts_from_the_start():
    deleted = Sample(0, "g", "jobs", 1, (PartitionPosition(0, 3, 10, 15, None),))
    assert evaluate([deleted]).partitions[0].records == 5


def test_the_table_lists_each_group_and_only_the_partitions_behind():
    window = [sample(0, [(0, 10), (3, 3)], oldest_s=0), sample(10, [(4, 10), (3, 3)], oldest_s=5)]
    lines = table([evaluate(window)]).splitlines()
    group_row = next(line for line in lines if line.startswith("g "))
    assert group_row.split()[:4] == ["g", "OK", "1", "6"]
    behind = [line.split() for line in lines if line.startswith("g ") and line is not group_row]
    assert behind == [["g", "0", "4", "10", "6", "5.0", "15.0"]], "partition 1 is caught up: not listed"


def test_a_stopped_group_never_drains_whatever_its_rate_was():
    lag = evaluate([sample(0, [(0, 10)]), sample(10, [(5, 10)], members=0)])
    assert (lag.status, lag.per_s, lag.drain_s, lag.partitions[0].drain_s) == (Status.STOP, 0.5, None, None)
