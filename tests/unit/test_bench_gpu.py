"""The device check (``bench/gpu.py``) at its tiny size on the CPU, and its section of docs/benchmarks.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import tts_node.random_checkpoint
from bench import gpu
from bench.report_gpu import gpu_section

# About ten forwards of a full-size random Kokoro on two cores: 15 s alone, several times that in the CI,
# where this runs at a low priority beside two other sessions (the unit timeout, 120 s, was passed there).
pytestmark = pytest.mark.timeout(400)


@pytest.fixture(scope="module")
def written() -> list[dict[str, Any]]:
    return []


@pytest.fixture(scope="module")
def saved() -> list[dict[str, Any]]:
    return []


@pytest.fixture(scope="module")
def tiny_figures(random_kokoro, written, saved):
    """The check as ``--tiny`` runs it, which writes a random checkpoint: here the session's is linked in its
    place (writing one is most of this check's time; tests/unit/conftest.py), and what it asked is kept."""

    def link_the_sessions(directory: Path, **asked: Any) -> Path:
        written.append(asked)
        directory.mkdir(parents=True)
        for part in random_kokoro.iterdir():
            (directory / part.name).symlink_to(part)
        return directory

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tts_node.random_checkpoint, "write_random_checkpoint", link_the_sessions)
        return gpu.run("cpu", tiny=True, model_dir=None, save=lambda f: saved.append(json.loads(json.dumps(f))))


def test_the_tiny_device_check_measures_every_part_on_the_cpu(tiny_figures, written):
    f = tiny_figures
    assert written == [{"voices": ("af_a", "am_b"), "frames_per_phoneme": 3.3}], "a checkpoint of speech's pace"
    assert f["weights"] == "random (3.3 frames a phoneme)"
    assert f["device"].startswith("cpu")
    assert [row["batch"] for row in f["sentences"]] == [1, 2]
    assert [row["batch"] for row in f["documents"]] == [2]
    for row in f["sentences"] + f["documents"]:
        assert row["audio_s_per_s"] > 0
        assert row["batches"] >= 2
        assert row["peak_mib"] is None  # no device memory on the CPU
    loop = f["loop"]
    assert loop["segments"] == 2 + 3  # one document job of two parts, three one-sentence requests
    assert loop["forwards"] >= loop["segments"] / loop["max_batch"]
    assert loop["interactive_first_ms_p50"] > 0
    assert loop["interactive_idle_ms_p50"] > 0
    assert "sentences_tf32" not in f  # TF32 is a CUDA setting
    sizing = f["sizing"]  # the worker's own start-up measurement (tts_node.batch_sizing), tiny
    assert [(p["ids"], p["batch"]) for p in sizing["points"]] == [(4, 1), (4, 2), (8, 1), (8, 2)]
    assert sizing["segments"] in (1, 2)
    assert sizing["free_mib"] is None
    assert not sizing["stopped"]
    decoders = f["decoders"]  # what VOXLOG_DECODER=auto measures; tiny: eager alone (inductor takes minutes here)
    assert [t["mode"] for t in decoders["trials"]] == ["eager"]
    assert decoders["trials"][0]["audio_s_per_s"] > 0
    assert decoders["chosen"] == "eager"
    assert "loop_decoder" not in f, "the loop runs again only with a decoder kept"


def test_the_figures_are_saved_after_each_part_so_a_run_cut_short_keeps_them(tiny_figures, saved):
    """A device session ends at its limit: the decoder's compilations, last, are what a cut run loses."""
    assert [sorted(set(f) - set(saved[0])) for f in saved[1:]] == [["loop", "sizing"], ["decoders", "loop", "sizing"]]
    assert {"sentences", "documents"} <= set(saved[0])
    assert saved[-1] == json.loads(json.dumps(tiny_figures))
    assert "did not measure the decoder's compiled ways" in "\n".join(gpu_section(saved[1])), "a cut run renders"


def test_the_section_renders_the_figures_and_judges_the_goals(tiny_figures):
    lines = gpu_section(tiny_figures)
    page = "\n".join(lines)
    assert lines[0] == "## GPU: one model, batched forwards"
    assert f"| 2 | {tiny_figures['sentences'][1]['audio_s_per_s']:.0f} |" in page
    assert f"it chose {tiny_figures['sizing']['segments']} segments a forward" in page
    # A CPU is nowhere near an H200's throughput goals; the interactive goal is judged on the figures.
    *throughput, interactive = [line for line in lines if line.startswith("| ") and line.endswith(" |")][-3:]
    assert all(row.endswith("| no |") for row in throughput), throughput
    loop = tiny_figures["loop"]
    met = loop["interactive_first_ms_p50"] / loop["interactive_idle_ms_p50"] <= 2.0
    assert interactive.endswith("| yes |" if met else "| no |"), interactive


def test_a_kept_decoder_is_shown_and_the_goals_count_what_a_worker_runs_with_it(tiny_figures):
    faster = {**tiny_figures["loop"], "audio_s_per_s": 900.0}
    figures = {
        **tiny_figures,
        "decoders": {
            "seconds": 95.0,
            "chosen": "graphs",
            "trials": [
                {"mode": "eager", "audio_s_per_s": 600.0, "seconds": 5.0, "max_difference": 0.0, "failure": ""},
                {"mode": "compile", "audio_s_per_s": 700.0, "seconds": 60.0, "max_difference": 2e-6, "failure": ""},
                {"mode": "graphs", "audio_s_per_s": 800.0, "seconds": 30.0, "max_difference": 2e-6, "failure": ""},
            ],
        },
        "loop_decoder": faster,
        "documents_decoder": [{**tiny_figures["documents"][0], "audio_s_per_s": 870.0}],
    }
    lines = gpu_section(figures)
    page = "\n".join(lines)
    assert "Kept: **graphs**" in page
    assert "| compile | 700.0 | 60 | 2e-06 |  |" in page
    assert "Document parts with it: batch 2: 870 audio s/s." in page
    assert any(line.startswith("| graphs | 900 |") for line in lines), "the loop again, with the kept decoder"
    loop_goal, documents_goal, _ = [line for line in lines if line.startswith("| ") and line.endswith(" |")][-3:]
    assert loop_goal.endswith("| 900 | yes |"), loop_goal
    assert documents_goal.endswith("| 870 | yes |"), documents_goal


def test_no_figures_no_section():
    assert gpu_section(None) == []


def test_a_run_made_before_the_worker_measured_its_sizes_renders_without_them(tiny_figures):
    older = {key: value for key, value in tiny_figures.items() if key != "sizing"}
    assert "measures its forward sizes" not in "\n".join(gpu_section(older))


def test_the_segments_file_is_what_the_corpus_cuts(tmp_path, monkeypatch):
    """``--write-segments`` is how the committed file was made: cutting the corpus again gives the same file."""
    target = tmp_path / "segments.json"
    gpu.write_segments(target)
    assert json.loads(target.read_text()) == json.loads(gpu.SEGMENTS_FILE.read_text())
