"""Worker processes for the approval tests: one process runs a turn and exits, another resumes it.

``run_worker`` runs this module as a script, ``python -m support.turn_workers COMMAND CONFIG_JSON``;
each command builds its own host on the shared ledger (``url``), prints one JSON line and exits.
``refund`` appends ``PID ORDER`` to the file named by ``EXPEDITER_TEST_LOG``, proof of which
process ran it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import expediter
from support.hosts import ledger_host
from support.scripts import script_command, script_environment

MODULE = "support.turn_workers"


@expediter.tool(require_approval=True)
def refund(order: str, amount: int = 1) -> dict[str, Any]:
    """Refund an order (needs a human's approval)."""
    with open(os.environ["EXPEDITER_TEST_LOG"], "a", encoding="utf-8") as log:
        log.write(f"{os.getpid()} {order}\n")
    return {"refunded": order, "amount": amount}


def _host(config: dict[str, Any]) -> Any:
    return ledger_host(config["url"], config["home"], refund)


def propose(config: dict[str, Any]) -> dict[str, Any]:
    """Run one turn of a saved OpenAI response (calls pause for approval), then exit."""
    host = _host(config)
    try:
        toolset = host.toolset(user_id=config["user"])
        calls = toolset.parse_calls("openai", config["response"])
        events = list(toolset.run(calls, message_id=config["message_id"]))
        return {"pid": os.getpid(), "events": [event.to_dict() for event in events]}
    finally:
        host.close()


def resume(config: dict[str, Any]) -> dict[str, Any]:
    """Approve or deny one waiting call by its key."""
    host = _host(config)
    try:
        event = host.resume(
            config["key"],
            config["approved"],
            approver=config["approver"],
            reason=config.get("reason"),
        )
        return {"pid": os.getpid(), "event": event.to_dict()}
    finally:
        host.close()


COMMANDS = {"propose": propose, "resume": resume}


def run_worker(command: str, *, log: Path, **config: Any) -> dict[str, Any]:
    """Run a command in a new Python process, wait for it to exit; its JSON report."""
    env = script_environment(EXPEDITER_TEST_LOG=str(log))
    done = subprocess.run(
        script_command(MODULE, command, json.dumps(config)),
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stderr[-3000:]}"
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


if __name__ == "__main__":
    print(json.dumps(COMMANDS[sys.argv[1]](json.loads(sys.argv[2]))), flush=True)
