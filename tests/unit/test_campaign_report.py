"""The run's report of what each campaign proved (tests/support/campaign_report.py), which infra/test.sh prints."""

from __future__ import annotations

import pytest

from tests.support.campaign_report import REPORT_ENV, proved

pytestmark = pytest.mark.unit


def test_each_line_is_appended_to_the_file_the_run_names(tmp_path, monkeypatch):
    report = tmp_path / "report"
    monkeypatch.setenv(REPORT_ENV, str(report))
    proved("fault campaign", "worker_stop: 40 jobs, 0 lost")
    proved("fuzz campaign", "no 5xx")
    assert report.read_text().splitlines() == ["fault campaign: worker_stop: 40 jobs, 0 lost", "fuzz campaign: no 5xx"]


def test_a_run_without_a_report_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(REPORT_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    proved("fault campaign", "anything")
    assert list(tmp_path.iterdir()) == []
