"""``iron --help`` lists every command with a one-line summary; every command's help runs and every option has help."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from iron.cli.main import cli

COMMANDS = sorted(cli.commands)


def test_top_level_help_lists_every_command_on_one_line():
    result = CliRunner().invoke(cli, ["--help"], prog_name="iron")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    for name in COMMANDS:
        line = next((ln for ln in lines if ln.strip().startswith(name + " ")), None)
        assert line is not None, f"{name} missing from iron --help"
        summary = line.strip()[len(name):].strip()
        assert summary and not summary.endswith("..."), f"{name}: summary {summary!r} is empty or cut"
        following = ([*lines, ""])[lines.index(line) + 1]
        assert not following.startswith(" " * 6), f"{name}: summary wraps onto a second line"


def test_expected_commands():
    assert set(COMMANDS) >= {"inspect", "bench", "test", "snap", "diff", "device", "build", "update"}


@pytest.mark.parametrize("name", COMMANDS)
def test_command_help_is_complete(name):
    command = cli.commands[name]
    assert (command.help or "").strip(), f"{name} has no help text"
    result = CliRunner().invoke(cli, [name, "--help"], prog_name="iron")
    assert result.exit_code == 0, result.output
    assert f"Usage: iron {name}" in result.output
    for param in command.get_params(click.Context(command)):
        if isinstance(param, click.Option):
            assert (param.help or "").strip(), f"iron {name} {'/'.join(param.opts)} has no help"
            assert param.opts[-1] in result.output


def test_group_options_have_help():
    for param in cli.get_params(click.Context(cli)):
        if isinstance(param, click.Option):
            assert (param.help or "").strip(), f"iron {'/'.join(param.opts)} has no help"


@pytest.mark.parametrize("name", COMMANDS)
def test_docs_cover_every_command_and_flag(name):
    import pathlib

    docs = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    assert f"## `iron {name}" in docs, f"docs/cli.md has no section for iron {name}"
    for param in cli.commands[name].get_params(click.Context(cli.commands[name])):
        if isinstance(param, click.Option) and "--help" not in param.opts:
            assert any(f"`{opt}" in docs for opt in param.opts), f"docs/cli.md: iron {name} {param.opts} missing"
