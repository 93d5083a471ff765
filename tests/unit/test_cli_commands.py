"""The command line imports a command's module only when that command runs (``voxlog.cli._COMMAND_MODULES``):
every service process parses its command line, and the other commands' imports were 0.1 to 0.2 s of its
start's CPU."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from voxlog import cli

ROOT = Path(cli.__file__).resolve().parents[1]


def _subcommands(parser: argparse.ArgumentParser) -> set[str]:
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(commands.choices)


@pytest.mark.parametrize("name", sorted(cli._COMMAND_MODULES))
def test_each_command_module_adds_the_command_it_is_listed_for(name):
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command")
    importlib.import_module(cli._COMMAND_MODULES[name]).add_parser(commands)
    assert set(commands.choices) == {name}


def test_the_whole_parser_has_every_command_and_a_named_one_only_its_own_module():
    everything = _subcommands(cli.build_parser())
    assert set(cli._COMMAND_MODULES) <= everything
    for name in sorted(everything):
        narrowed = _subcommands(cli.build_parser(name))
        assert narrowed == everything - (set(cli._COMMAND_MODULES) - {name}), name


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["worker", "--device", "cpu"], "worker"),
        (["--log-level", "WARNING", "api"], "api"),
        (["--log-level=DEBUG", "keys", "list"], "keys"),
        (["speak", "b.txt", "--format", "mp3"], "speak"),
        (["--help"], None),
        ([], None),
        (["bogus"], None),
        (["--log-level"], None),
    ],
)
def test_the_command_is_read_from_the_arguments(argv, named):
    assert cli._command_named(argv) == named


def test_a_narrowed_parser_reads_a_command_as_the_whole_one_does():
    argv = ["--log-level", "DEBUG", "keys", "create", "--tenant", "acme", "--scopes", "read,submit"]
    assert vars(cli.build_parser("keys").parse_args(argv)) == vars(cli.build_parser().parse_args(argv))


def test_a_service_start_imports_no_other_commands_module():
    probe = (
        "import sys; from voxlog import cli; cli.build_parser(cli._command_named(['worker', '--device', 'cpu']))"
        ".parse_args(['worker', '--device', 'cpu']); print(sorted(m for m in sys.modules if m.endswith('_cli')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
