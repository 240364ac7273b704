"""Agent- and operator-facing CLIs. A package so console entry points can name them;
each script also runs as ``python scripts/<name>.py``."""
