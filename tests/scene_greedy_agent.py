#!/usr/bin/env python3
"""A stand-in external agent for the scene tests (policy ``command:``): reads the adapter's
JSON prompt on stdin, prints ``tests/greedy_agent.py``'s decision for that iteration,
fitted to the prompt's magnitude phase (enough members, within the per-axis cap).

``--noop`` prints an empty decision every time (a refiner that never moves anything), to
provoke the contract's iter_1 rule in the failure tests.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.greedy_agent import propose  # noqa: E402

PAD_M = 0.001


def decide(prompt: dict) -> dict:
    n = int(prompt["iter"])
    phase = prompt["phase"]
    geometry = json.loads(Path(prompt["files"]["geometry"]).read_text())
    decision = propose(geometry, n)
    members = decision["members"]
    cap = float(phase["max_abs_delta_xyz_m"])
    limit = phase.get("members_max")
    ranked = list(members)[: limit if limit else None]
    members = {k: {"delta_xyz": [max(-cap, min(cap, v)) for v in members[k]["delta_xyz"]],
                   "delta_yaw_deg": members[k]["delta_yaw_deg"]} for k in ranked}
    if members:
        for name in prompt["members"]:
            if len(members) >= int(phase["members_min"]):
                break
            members.setdefault(name, {"delta_xyz": [PAD_M, 0.0, 0.0], "delta_yaw_deg": 0.0})
    return {"members": members, "converged": decision["converged"] and not members,
            "reason_summary": decision["reason_summary"]}


def main() -> int:
    prompt = json.loads(sys.stdin.read())
    if "--noop" in sys.argv[1:]:
        print(json.dumps({"members": {}, "converged": False, "reason_summary": "no-op"}))
        return 0
    print(json.dumps(decide(prompt)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
