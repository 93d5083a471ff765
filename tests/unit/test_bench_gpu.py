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
def tiny_figures(random_kokoro, written):
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
        return gpu.run("cpu", tiny=True, model_dir=None)


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
