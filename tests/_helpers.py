"""Small helpers shared by the test modules."""
from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path


def snapshot(root: Path) -> dict[str, str]:
    """Every file's sha256 under ``root``; lock files and SQLite's -wal/-shm companions are
    bookkeeping, not content."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.endswith((".lock", "-wal", "-shm"))}


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def running_groups(scene: Path) -> tuple[dict, list[str]]:
    """``state.json`` as a run in progress has it (``{}`` before it is first written or while
    a write is being swapped in) and the groups it marks running."""
    try:
        state = load(scene / "state.json")
    except (FileNotFoundError, json.JSONDecodeError):
        state = {}
    return state, [g for g, s in state.get("groups", {}).items() if s["status"] == "running"]


def ledger_rows(scene: Path, table: str) -> list[dict]:
    conn = sqlite3.connect(scene / "ledger.sqlite")
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(f"SELECT * FROM {table} ORDER BY seq")]
    finally:
        conn.close()
