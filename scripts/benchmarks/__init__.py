"""The sections of ``scripts/bench.py``: one module per section (``TITLE`` and
``run(args) -> dict``), plus the quality section's cases (``quality_cases``,
``quality_infeasible``). Internals, not commands: ``scripts/`` holds those."""
