"""Command line: ``python -m jetstream <command>`` (also the ``jetstream`` script).

Commands:
    server   run one nats-server (JetStream on) in the foreground until Ctrl-C or SIGTERM
    demo     start an embedded server and run the confirmed-ack example on it
    pub, sub, req, reply, stream, consumer, kv, obj, bench
             nats-CLI-like verbs against a server (see ``--help`` of each)

The parsing and the verbs live in ``jetstream.cli``; this module is the entry point.
"""

from __future__ import annotations

import sys

from jetstream.cli import main, run_demo, run_server

__all__ = ["main", "run_demo", "run_server"]


if __name__ == "__main__":
    sys.exit(main())
