"""``voxlog bench``'s arguments: what it refuses before a run of up to 40 minutes starts."""

from __future__ import annotations

import pytest

from bench import run


def test_regression_a_partial_run_asked_for_docs_is_refused_before_it_runs(monkeypatch, capsys, tmp_path):
    """``--only X --docs D`` ran the scenarios, then failed in ``write_docs`` (a partial run's results lack the
    page's other scenarios). It is refused at once now, saying what to do."""
    started = []
    monkeypatch.setattr(run, "run", lambda *args: started.append(args))
    with pytest.raises(SystemExit) as exited:
        run.main(["--only", "throughput", "--docs", str(tmp_path)])
    assert exited.value.code == 2
    assert "a partial run (--only) writes its results JSON, never the docs" in capsys.readouterr().err
    assert started == [], "nothing was measured"
    assert not any(tmp_path.iterdir())


def test_an_unknown_group_is_named(capsys):
    with pytest.raises(SystemExit):
        run.main(["--only", "throughput,speed"])
    assert "unknown scenario group(s): speed" in capsys.readouterr().err
