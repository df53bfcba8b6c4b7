"""`onchip --help` groups the commands; the CLI reference page is generated from the parsers."""

from __future__ import annotations

import argparse
from pathlib import Path

from onchip.cli import GROUPS, build_parser, main, reference_markdown

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_help_lists_hardware_commands_first_then_the_seed_methods(capsys):
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    titles = [title for title, _ in GROUPS] + ["seed methods"]
    at = [text.index(f"\n{t}") for t in titles]
    assert at == sorted(at), titles
    seeds = text[at[-1]:]
    for _, names in GROUPS:
        for name in names:
            assert f"\n  {name} " in text[:at[-1]] and f"\n  {name} " not in seeds, name
    parser = build_parser()
    seed_names = set(parser.commands) - {n for _, names in GROUPS for n in names}
    assert len(seed_names) == 18
    assert all(f"\n  {name} " in seeds for name in seed_names)


def test_reference_has_every_flag_of_every_command():
    text = reference_markdown()
    parser = build_parser()
    for name, (purpose, sub) in parser.commands.items():
        assert f"### onchip {name}\n" in text, name
        for action in sub._actions:
            if action.help == argparse.SUPPRESS:  # a hidden alias
                continue
            for flag in action.option_strings:
                assert flag in text, (name, flag)


def test_the_docs_page_is_the_generated_reference():
    from support import load_script

    hooks = load_script("docs/hooks.py")
    page = (DOCS / "cli.md").read_text()
    assert hooks.CLI_MARKER in page
    rendered = hooks.on_page_markdown(page, None, None, None)
    assert hooks.CLI_MARKER not in rendered and "### onchip verify\n" in rendered and "--junit" in rendered


def test_every_flag_of_the_hardware_commands_has_a_help_text():
    """Every option of a learner, hardware or sweep command says what it is (pnr --board/--baud and
    hls --part/--clock-ns had none)."""
    parser = build_parser()
    missing = [(name, action.option_strings[0]) for _, names in GROUPS for name in names
               for action in parser.commands[name][1]._actions
               if action.option_strings and not action.help]
    assert missing == []
    text = parser.commands["pnr"][1].format_help() + parser.commands["hls"][1].format_help()
    for default in ("ulx3s-85f", "115200", "xcu250-figd2104-2L-e", "5.0"):
        assert f"(default: {default})" in " ".join(text.split()), default
