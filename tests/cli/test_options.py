"""How the command line parses, as the nats CLI does: a verb's options anywhere among its
arguments, a usage error showing that verb's usage; and what a command imports (parsing
nothing of the client, the core commands nothing of JetStream)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from jetstream.cli import build_parser
from jetstream.cli._parser import BUILDERS, parser_for

from .conftest import RUN_TIMEOUT, Cli, base_env


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["pub", "demo.y", "--count", "3", "msg {{Count}}"],
            {"subject": "demo.y", "count": 3, "body": "msg {{Count}}"},
        ),
        (["pub", "x", "--js", "a"], {"subject": "x", "jetstream": True, "body": "a"}),
        (["pub", "--js", "x", "a"], {"subject": "x", "jetstream": True, "body": "a"}),
        (["stream", "get", "S", "--raw", "7"], {"stream": "S", "seq": 7, "raw": True}),
        (["stream", "--json", "ls"], {"json": True, "verb": "ls"}),
        (["kv", "put", "b", "--timeout", "2s", "k", "v"], {"key": "k", "value": "v", "timeout": 2}),
    ],
)
def test_options_go_anywhere(argv: list[str], expected: dict[str, object]) -> None:
    args = vars(build_parser().parse_args(argv))
    assert {k: args[k] for k in expected} == expected
    # the parser of the named command alone parses the same
    assert vars(parser_for(argv).parse_args(argv)) == args


@pytest.mark.parametrize(
    "argv",
    [
        ["--server", "pub", "stream", "ls"],
        ["--timeout", "2s", "kv", "ls"],
        ["--json", "--", "stream", "ls"],
        ["bogus"],
    ],
)
def test_the_command_is_found_past_option_values(argv: list[str]) -> None:
    """An option's value that happens to name a command is not taken for the command;
    an unknown command gets the whole parser (argparse then lists every command)."""
    actions = parser_for(argv)._subparsers._group_actions  # type: ignore[union-attr]
    names = set(actions[0].choices)
    if argv[-1] == "bogus" or "--" in argv:
        assert names == set(BUILDERS)
    else:
        assert argv[-2] in names and "pub" not in names and len(names) < len(BUILDERS)


def test_a_usage_error_shows_the_verbs_usage(cli: Cli) -> None:
    unknown = cli.spawn("pub", "x", "--bogus", "y")
    missing = cli.spawn("stream", "get")
    extra = cli.spawn("stream", "info", "S", "T")
    for running, verb, complaint in (
        (unknown, "pub", "unrecognized arguments: --bogus"),
        (missing, "stream get", "the following arguments are required: stream"),
        (extra, "stream info", "unrecognized arguments: T"),
    ):
        err = running.wait(2).stderr
        assert err.startswith(f"usage: python -m jetstream {verb} "), err
        assert f"python -m jetstream {verb}: error: {complaint}" in err


def _modules_of(*argv: str, url: str) -> set[str]:
    """The modules a command run in a fresh process had loaded when it ended."""
    code = (
        "import sys\nfrom jetstream.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sys.modules), file=sys.stderr)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "--server", url, "--plain", *argv],
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    return set(done.stderr.splitlines()[-1].split())


def test_a_command_imports_what_it_needs(cli: Cli) -> None:
    """``--help`` and a usage error import no client; ``pub`` the core client alone; a
    JetStream command the JetStream context. (How long each takes:
    ``benchmarks/import_time.py``.)"""
    assert cli.url is not None
    helped = _modules_of("pub", "--help", url=cli.url)
    assert not {m for m in helped if m.startswith(("jetstream.core", "asyncio", "msgspec"))}
    published = _modules_of("pub", "cli.opt.x", "y", url=cli.url)
    assert "jetstream.core.client" in published
    assert not {m for m in published if m.startswith(("jetstream.js", "jetstream.kv"))}
    assert not {m for m in published if m.startswith(("jetstream.service", "rich"))}
    listed = _modules_of("stream", "ls", url=cli.url)
    assert "jetstream.js" in listed and "jetstream.service" not in listed
    assert json.loads(cli("pub", "cli.opt.x", "--json", "y").stdout)["count"] == 1
