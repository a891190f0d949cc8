"""Server-op parser throughput: jetstream's ``Parser.feed`` against nats-py's parser.

Both parsers get the very same bytes, pre-cut into chunks (32 KiB by default,
like socket reads), in the same process run, taking turns (best of N each).
Each side does the same minimal work per message: ours iterates the ops that
``feed`` returns and counts them; nats-py's parser awaits a stub client whose
``_process_msg`` counts them. The nats-py coroutine never suspends, so it is
driven with ``send(None)`` and no event loop is timed on either side.

Run: ``python -m benchmarks.bench_parser [--json] [--repeat N] [--ops N]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from nats.protocol.parser import Parser as NatsPyParser  # nats-py: a dev dependency

from benchmarks._report import Measurement, arg_parser, race, report
from jetstream.protocol.parser import Parser


def msg_stream(count: int, size: int, *, headers: bool, subjects: int = 100) -> bytes:
    """``count`` MSG (or HMSG) ops with ``size``-byte payloads, as a server sends them,
    on ``subjects`` different subjects (a wildcard subscription) or on one."""
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    hdr = b"NATS/1.0\r\nNats-Msg-Id: 1234\r\n\r\n"
    out = bytearray()
    for i in range(count):
        subject = b"orders.eu.%d" % (i % subjects)
        if headers:
            out += b"HMSG %s 7 _INBOX.abc.%d %d %d\r\n%s%s\r\n" % (
                subject,
                i % 1000,
                len(hdr),
                len(hdr) + size,
                hdr,
                payload,
            )
        else:
            out += b"MSG %s 7 %d\r\n%s\r\n" % (subject, size, payload)
    return bytes(out)


def chunked(stream: bytes, chunk: int) -> list[bytes]:
    return [stream[i : i + chunk] for i in range(0, len(stream), chunk)]


def run_ours(chunks: Sequence[bytes]) -> int:
    parser = Parser()
    feed = parser.feed
    count = 0
    for data in chunks:
        for _op in feed(data):
            count += 1
    return count


class _StubClient:
    """The methods nats-py's parser awaits on its client, doing as little as ours does."""

    def __init__(self) -> None:
        self.count = 0

    async def _process_msg(
        self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None
    ) -> None:
        self.count += 1

    async def _process_ping(self) -> None:
        self.count += 1

    async def _process_pong(self) -> None:
        self.count += 1

    async def _process_info(self, info: dict[str, Any]) -> None:
        self.count += 1

    async def _process_err(self, err: str) -> None:
        self.count += 1


def run_natspy(chunks: Sequence[bytes]) -> int:
    client = _StubClient()
    parser = NatsPyParser(client)
    for data in chunks:
        coro = parser.parse(data)
        try:
            coro.send(None)
        except StopIteration:
            pass
        else:  # pragma: no cover - it never awaits anything that suspends
            coro.close()
            raise RuntimeError("nats-py parser suspended")
    return client.count


def main(argv: Sequence[str] | None = None) -> None:
    ap = arg_parser(__doc__.splitlines()[0] if __doc__ else "parser benchmark")
    ap.add_argument("--ops", type=int, default=200_000, help="ops per small-message workload")
    ap.add_argument("--chunk", type=int, default=32 * 1024, help="bytes per feed")
    args = ap.parse_args(argv)

    big = 64 * 1024 * 1024
    workloads: list[tuple[str, int, list[bytes]]] = []
    for size, label in ((16, "16 B"), (1024, "1 KiB")):
        stream = msg_stream(args.ops, size, headers=False, subjects=1)
        workloads.append((f"MSG {label}, one subject", args.ops, chunked(stream, args.chunk)))
        for headers, op in ((False, "MSG"), (True, "HMSG")):
            stream = msg_stream(args.ops, size, headers=headers)
            workloads.append((f"{op} {label}, 100 subjects", args.ops, chunked(stream, args.chunk)))
    # One 64 MiB message fed in 64 KiB pieces: linear time, one copy.
    piece = bytes(64 * 1024)
    big_chunks = [b"MSG big 1 %d\r\n" % big, *([piece] * (big // len(piece))), b"\r\n"]
    workloads.append(("MSG 64 MiB in 64 KiB feeds", 1, big_chunks))

    impls: list[tuple[str, Callable[[Sequence[bytes]], int]]] = [
        ("jetstream", run_ours),
        ("nats-py", run_natspy),
    ]

    results: list[Measurement] = []
    for name, count, chunks in workloads:
        nbytes = sum(map(len, chunks))
        runs: dict[str, Callable[[], object]] = {}
        for impl, run in impls:
            got = run(chunks)  # warm-up, and a check that both see every message
            if got != count:
                raise RuntimeError(f"{impl} parsed {got} ops of {name!r}, expected {count}")
            runs[impl] = partial(run, chunks)
        for impl, seconds in race(runs, repeat=args.repeat).items():
            results.append(Measurement(name, impl, seconds, ops=count, nbytes=nbytes))
    report(results, title=f"parser: feed() in {args.chunk}-byte chunks", json_output=args.json)


if __name__ == "__main__":
    main()
