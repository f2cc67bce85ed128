"""Performance benchmarks of cann-exporter; `python -m benchmarks [names...]` runs them.

Every module ``benchmarks/<name>.py`` (name not starting with ``_``) that defines
``run() -> dict`` is a benchmark: the runner (``__main__.py``) imports and runs each one in
its own child process, bounded by a timeout, and writes ``benchmarks/RESULTS.md``. A module
that fails to import, has no ``run()``, raises or times out is skipped with a note.

``run()`` may return any JSON-serialisable dict. These keys get a nicer rendering (all
optional; anything else is shown as raw numbers):

``title``    one line naming what was measured
``summary``  a sentence or two
``figures``  a list of dicts, one per headline figure::

                 {"name": "/metrics p99 latency", "value": 1.9, "unit": "ms",
                  "baseline_name": "node_exporter p99", "baseline": 6.2,
                  "ratio": 0.31, "goal": "ratio <= 1", "meets_goal": True}

``raw``      a dict of the raw measurements
``notes``    a list of strings (method, caveats)
``command``  the command that reproduces this module alone

Each module is also runnable alone: ``python -m benchmarks.exporter_scrape``.
"""
