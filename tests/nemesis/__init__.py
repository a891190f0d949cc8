"""The nemesis run (issue 50): random faults for minutes, every operation recorded,
exactly-once and linearizability checked from the history.

``run.py`` runs a 3-node cluster, the workload (``workload.py``) through fault proxies
and the nemesis (``schedule.py``), and writes the history (``history.py``);
``checker.py`` (with ``linear.py``, the KeyValue linearizability search) reads the
history only and says what is wrong; ``report.py`` prints the result. ``make nemesis``
(``python -m tests.nemesis``) runs it for ten minutes; ``test_nemesis.py`` runs a minute
of it with a fixed seed in ``make test``.
"""
