"""Subprocess entry: run one worker job inside a Blender binary.

    BLENDER --background --factory-startup --disable-autoexec --python-exit-code 1 \\
        --python worker/entry.py -- <job.json> <result.json>

Reads the job, calls ``worker.jobs.run_job`` and writes the result JSON atomically.
On an ``IslandError`` the result file is ``{"error": {"type", "message", "exit_code"}}`` and
the process exits with that code (``sys.exit`` inside ``--python`` ends Blender with the
given status; ``--python-exit-code 1`` only applies to an uncaught exception); a full disk
or read-only directory is a FilesystemError (exit 10), a result that cannot be encoded a
WorkerError (``island_tools.errors.error_dict`` / ``unsendable_reply``, as the warm worker
says). Any other exception: type ``"InternalError"``, message ``"ExcType: msg"`` (one
line), exit 1, the traceback on stderr.
"""
from __future__ import annotations

import json
import os
import sys
import traceback

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

from island_tools.errors import EXIT_USAGE, error_dict, unsendable_reply  # noqa: E402
from island_tools.files.atomic import write_bytes  # noqa: E402


def _args(argv: list[str]) -> list[str]:
    return argv[argv.index("--") + 1:] if "--" in argv else []


def _write(path: str, obj: dict) -> None:
    write_bytes(path, (json.dumps(obj, indent=2, allow_nan=False) + "\n").encode("utf-8"))


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def main(argv: list[str]) -> int:
    args = _args(argv)
    if len(args) != 2:
        sys.stderr.write("usage: blender ... --python worker/entry.py -- <job.json> "
                         "<result.json>\n")
        return EXIT_USAGE
    job_path, result_path = args
    try:
        try:
            with open(job_path, encoding="utf-8") as fh:
                job = json.load(fh)
        except (OSError, ValueError) as exc:
            from island_tools.errors import UsageError
            raise UsageError(f"cannot read worker job: {_one_line(exc)}",
                             file=job_path) from None
        from worker.jobs import run_job
        result = run_job(job)
    except Exception as exc:  # noqa: BLE001 - every failure is reported as one error
        err = error_dict(exc)
        if err["type"] == "InternalError":
            traceback.print_exc()
        sys.stderr.write(f"[worker] {err['type']}: {err['message']}\n")
        try:
            _write(result_path, {"error": err})
        except Exception:  # noqa: BLE001
            traceback.print_exc()
        return int(err["exit_code"])  # type: ignore[call-overload]
    try:
        _write(result_path, result)
    except ValueError as exc:   # not JSON-encodable: say what it is
        err = unsendable_reply(exc)
        sys.stderr.write(f"[worker] {err['type']}: {err['message']}\n")
        _write(result_path, {"error": err})
        return int(err["exit_code"])  # type: ignore[call-overload]
    return 0


if __name__ == "__main__":
    _code = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    if _code:
        sys.exit(_code)
