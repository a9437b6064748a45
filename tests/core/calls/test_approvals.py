"""Deciding each call of a turn (fail closed), pausing it for a human, and resuming it: every
decision branch checked on the event and on the ledger row, resumption from another process on
SQLite and PostgreSQL, re-evaluation on resume, and expiry of approvals nobody decided."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from support import turn_workers as workers
from support.responses import openai_response

import expediter
from expediter.core.host import Host
from expediter.core.instances.defaults import default_instance_id
from expediter.core.ledger.records import LedgerRow
from expediter.core.records.calls import CallEvent, ToolCall
from expediter.core.turns.toolset import Toolset
from expediter.errors import DecisionRefused, LedgerError
from expediter.hookspecs.tool import CallContext, Decision, ToolError

#: Calls the tools of this module made, as ``(action, argument)``.
RAN: list[tuple[str, Any]] = []


@pytest.fixture(autouse=True)
def _clean_journal() -> Iterator[None]:
    RAN.clear()
    yield
    RAN.clear()


# -- tools and policies ---------------------------------------------------------------------------


@expediter.tool
def lookup(order: str) -> dict[str, Any]:
    """Look an order up."""
    RAN.append(("lookup", order))
    return {"order": order, "state": "shipped"}


@expediter.tool(require_approval=True)
def refund(order: str, amount: int = 1) -> dict[str, Any]:
    """Refund an order."""
    RAN.append(("refund", order))
    return {"refunded": order, "amount": amount}


class Payments(expediter.Toolbox):
    """Move money; large payments need a human."""

    @expediter.action
    def pay(self, amount: int, to: str = "acme") -> dict[str, Any]:
        """Pay someone."""
        RAN.append(("pay", amount))
        return {"paid": amount, "to": to}

    def preview_decision(
        self, action: str, arguments: dict[str, Any], context: CallContext
    ) -> Decision | None:
        if arguments.get("amount", 0) > 100:
            return Decision.ask(f"paying {arguments['amount']} is over the limit of 100")
        return None


class Wipe(expediter.Toolbox):
    """Delete data; always asks, and no allowlist may skip the question."""

    @expediter.action
    def wipe(self, table: str) -> str:
        """Delete every row of a table."""
        RAN.append(("wipe", table))
        return f"wiped {table}"

    def preview_decision(
        self, action: str, arguments: dict[str, Any], context: CallContext
    ) -> Decision | None:
        return Decision.ask("wiping destroys data", forced=True)


class Flaky(expediter.Toolbox):
    """A tool whose live decision cannot be made."""

    @expediter.action
    def touch(self, path: str) -> str:
        """Touch a file."""
        RAN.append(("touch", path))
        return f"touched {path}"

    def preview_decision(
        self, action: str, arguments: dict[str, Any], context: CallContext
    ) -> Decision | None:
        raise RuntimeError("the rules service is down")


class Policy:
    """A host app's ``tool_call_policy``: answers whatever ``answer`` holds (or raises it)."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.asked: list[str] = []

    @expediter.hookimpl
    def tool_call_policy(self, call: ToolCall, action: Any, context: CallContext) -> Any:
        self.asked.append(call.name)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


PICK_DATE = {
    "type": "function",
    "function": {
        "name": "pick_date",
        "description": "Ask the user to pick a date in the app.",
        "parameters": {"type": "object", "properties": {"prompt": {"type": "string"}}},
    },
}


# -- helpers --------------------------------------------------------------------------------------


def turn(
    toolset: Toolset, *calls: tuple[str, str, Any], message_id: str = "m1"
) -> tuple[list[ToolCall], list[CallEvent]]:
    """Parse the calls from a provider response and run them: the calls and their events."""
    parsed = toolset.parse_calls("openai", openai_response(*calls))
    events = [e for e in toolset.run(parsed, message_id=message_id) if e.status != "pending"]
    assert [event.call_id for event in events] == [call.call_id for call in parsed]
    return parsed, events


def row(host: Host, key: str) -> LedgerRow:
    found = host.ledger.get(key)
    assert found is not None, f"no ledger row {key}"
    return found


def pending_keys(host: Host) -> list[str]:
    return [item.key for item in host.ledger.pending_approvals()]


# -- client-side tools ----------------------------------------------------------------------------


def test_a_client_side_call_waits_for_the_application_and_takes_its_result(make_host) -> None:
    host = make_host(lookup, record_calls=True)
    toolset = host.toolset(user_id="ann", client_tools=[PICK_DATE])
    _, (event,) = turn(toolset, ("c1", "pick_date", {"prompt": "When?"}))

    assert (event.status, event.key, event.tool, event.action) == (
        "requires_client_execution",
        "m1:c1",
        "client",
        "pick_date",
    )
    waiting = row(host, "m1:c1")
    assert (waiting.status, waiting.decision, waiting.user_id) == (
        "awaiting_approval",
        "client_side",
        "ann",
    )
    assert pending_keys(host) == []  # the application answers it, not a human

    done = host.submit_client_result("m1:c1", {"date": "2025-03-01"})
    assert (done.status, done.key, done.result) == ("completed", "m1:c1", {"date": "2025-03-01"})
    recorded = row(host, "m1:c1")
    assert (recorded.status, recorded.result, recorded.error) == (
        "executed",
        {"date": "2025-03-01"},
        None,
    )


def test_a_client_side_error_result_is_an_error_event_and_a_failed_row(make_host) -> None:
    host = make_host(lookup, record_calls=True)
    turn(host.toolset(client_tools=[PICK_DATE]), ("c1", "pick_date", {}))
    event = host.submit_client_result("m1:c1", ToolError("the user closed the dialog"))
    assert (event.status, event.error_type, event.error) == (
        "error",
        "ToolError",
        "the user closed the dialog",
    )
    failed = row(host, "m1:c1")
    assert (failed.status, failed.error) == ("failed", "the user closed the dialog")


def test_client_side_calls_are_denied_in_headless_runs(make_host) -> None:
    host = make_host(lookup, record_calls=True)
    toolset = host.toolset(client_tools=[PICK_DATE], headless=True, allowlist=["client"])
    _, (event,) = turn(toolset, ("c1", "pick_date", {}))
    assert event.status == "denied"
    assert "headless" in (event.error or "")
    denied = row(host, "m1:c1")
    assert (denied.status, denied.decision) == ("denied", "headless_denied")
    assert "headless" in (denied.error or "")


# -- what asks for approval -----------------------------------------------------------------------


def test_the_actions_require_approval_flag_pauses_the_call(make_host) -> None:
    host = make_host(refund, record_calls=True)
    _, (event,) = turn(host.toolset(user_id="ann"), ("c1", "refund", {"order": "A7"}))

    assert (event.status, event.reason) == ("awaiting_approval", "the action requires approval")
    assert (event.arguments, event.result, event.error) == ({"order": "A7"}, None, None)
    waiting = row(host, "m1:c1")
    assert (waiting.status, waiting.decision, waiting.arguments) == (
        "awaiting_approval",
        "ask",
        {"order": "A7"},
    )
    assert waiting.request["arguments"] == {"order": "A7"}
    assert pending_keys(host) == ["m1:c1"]
    assert RAN == []


def test_a_live_preview_decision_pauses_only_the_calls_it_asks_about(make_host) -> None:
    host = make_host(Payments, record_calls=True)
    _, (small, large) = turn(
        host.toolset(), ("c1", "pay", {"amount": 5}), ("c2", "pay", {"amount": 500})
    )
    assert small.status == "completed"
    assert large.status == "awaiting_approval"
    assert large.reason == "paying 500 is over the limit of 100"
    assert row(host, "m1:c1").status == "executed"
    assert (row(host, "m1:c2").status, row(host, "m1:c2").decision) == ("awaiting_approval", "ask")
    assert RAN == [("pay", 5)]


@pytest.mark.parametrize(
    "answer", [Decision.ask("managers approve refunds"), "ask"], ids=["decision", "word"]
)
def test_a_policy_answering_ask_pauses_the_call(make_host, answer: Any) -> None:
    policy = Policy(answer)
    host = make_host(lookup, policy, record_calls=True)
    _, (event,) = turn(host.toolset(), ("c1", "lookup", {"order": "A1"}))
    assert event.status == "awaiting_approval"
    if isinstance(answer, Decision):
        assert event.reason == "managers approve refunds"
    assert (row(host, "m1:c1").status, row(host, "m1:c1").decision) == ("awaiting_approval", "ask")
    assert (policy.asked, RAN) == (["lookup"], [])


@pytest.mark.parametrize("deny_first", [True, False], ids=["deny-first", "deny-last"])
def test_a_policy_deny_wins_over_other_plugins_allow_and_ask(make_host, deny_first: bool) -> None:
    policies = [Policy(Decision.allow("fine by me")), Policy(Decision.ask("let a human look"))]
    deny = Policy(Decision.denied("refunds are frozen"))
    policies = [deny, *policies] if deny_first else [*policies, deny]
    host = make_host(refund, *policies, record_calls=True)
    _, (event,) = turn(host.toolset(), ("c1", "refund", {"order": "A1"}))

    assert event.status == "denied"
    assert "refunds are frozen" in (event.error or "")
    assert "fine by me" not in (event.error or "")
    denied = row(host, "m1:c1")
    assert (denied.status, denied.decision) == ("denied", "deny")
    assert "refunds are frozen" in (denied.error or "")
    assert RAN == []
    assert pending_keys(host) == []


@pytest.mark.parametrize("where", ["policy", "preview"])
def test_a_decision_that_raises_requires_approval(make_host, caplog, where: str) -> None:
    tools = [lookup, Policy(RuntimeError("the rules service is down"))]
    if where == "preview":
        tools = [Flaky]
    host = make_host(*tools, record_calls=True)
    name, arguments = ("lookup", {"order": "A1"}) if where == "policy" else ("touch", {"path": "x"})
    with caplog.at_level(logging.ERROR, logger="expediter"):
        _, (event,) = turn(host.toolset(), ("c1", name, arguments))

    assert event.status == "awaiting_approval"
    assert "could not be made" in (event.reason or "")
    assert "RuntimeError: the rules service is down" in (event.reason or "")
    assert (row(host, "m1:c1").status, row(host, "m1:c1").decision) == ("awaiting_approval", "ask")
    assert RAN == []
    assert any("approval required" in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize("where", ["policy", "preview"])
def test_a_decision_that_raises_is_forced_so_an_allowlist_cannot_skip_it(
    make_host, where: str
) -> None:
    if where == "policy":
        host = make_host(lookup, Policy(RuntimeError("down")), record_calls=True)
        name, tool, arguments = "lookup", "lookup", {"order": "A1"}
    else:
        host = make_host(Flaky, record_calls=True)
        name, tool, arguments = "touch", "flaky", {"path": "x"}
    toolset = host.toolset(headless=True, allowlist=[tool])
    _, (event,) = turn(toolset, ("c1", name, arguments))

    assert event.status == "denied"
    assert "needs a human's approval" in (event.error or "")
    denied = row(host, "m1:c1")
    assert (denied.status, denied.decision) == ("denied", "headless_denied")
    assert RAN == []


# -- headless runs ----------------------------------------------------------------------------


@pytest.mark.parametrize("allowed", ["refund-eu", "refund"], ids=["instance-id", "tool-name"])
def test_headless_runs_an_allowlisted_call_without_asking(make_host, allowed: str) -> None:
    host = make_host(refund, record_calls=True)
    toolset = host.toolset(
        instances=[{"tool": "refund", "instance_id": "refund-eu", "name": "eu"}],
        headless=True,
        allowlist=[allowed],
    )
    name = toolset.name_map.name_for("refund-eu", "refund")
    assert name is not None
    _, (event,) = turn(toolset, ("c1", name, {"order": "A1"}))

    assert (event.status, event.instance_id, event.result) == (
        "completed",
        "refund-eu",
        {"refunded": "A1", "amount": 1},
    )
    executed = row(host, "m1:c1")
    assert (executed.status, executed.instance_id) == ("executed", "refund-eu")
    assert RAN == [("refund", "A1")]


def test_an_allowlisted_instance_id_does_not_allow_other_instances_of_the_tool(
    make_host,
) -> None:
    host = make_host(refund, record_calls=True)
    toolset = host.toolset(
        instances=[{"tool": "refund", "instance_id": "refund-eu", "name": "eu"}],
        headless=True,
        allowlist=["refund-eu"],
    )
    other = toolset.name_map.name_for(default_instance_id("refund"), "refund")
    assert other is not None
    _, (event,) = turn(toolset, ("c1", other, {"order": "A1"}))
    assert event.status == "denied"
    assert "not allowlisted" in (event.error or "")
    assert (row(host, "m1:c1").status, row(host, "m1:c1").decision) == (
        "denied",
        "headless_denied",
    )
    assert RAN == []


def test_headless_denies_a_forced_prompt_even_when_allowlisted(make_host) -> None:
    host = make_host(Wipe, record_calls=True)
    toolset = host.toolset(headless=True, allowlist=["wipe"])
    _, (event,) = turn(toolset, ("c1", "wipe", {"table": "users"}))

    assert event.status == "denied"
    assert "needs a human's approval" in (event.error or "")
    assert "wiping destroys data" in (event.error or "")
    denied = row(host, "m1:c1")
    assert (denied.status, denied.decision) == ("denied", "headless_denied")
    assert "wiping destroys data" in (denied.error or "")
    assert RAN == []


def test_headless_denies_a_call_needing_approval_that_is_not_allowlisted(make_host) -> None:
    host = make_host(refund, lookup, record_calls=True)
    toolset = host.toolset(headless=True, allowlist=["lookup"])
    _, (event,) = turn(toolset, ("c1", "refund", {"order": "A1"}))

    assert event.status == "denied"
    assert event.reason == event.error
    assert "not allowlisted" in (event.error or "")
    assert "the action requires approval" in (event.error or "")
    denied = row(host, "m1:c1")
    assert (denied.status, denied.decision) == ("denied", "headless_denied")
    assert RAN == []
    assert pending_keys(host) == []


def test_a_call_needing_no_approval_runs_headless_without_an_allowlist(make_host) -> None:
    host = make_host(lookup, record_calls=True)
    _, (event,) = turn(host.toolset(headless=True), ("c1", "lookup", {"order": "A1"}))
    assert (event.status, event.result) == ("completed", {"order": "A1", "state": "shipped"})
    assert row(host, "m1:c1").status == "executed"


# -- resuming -------------------------------------------------------------------------------------


def test_approving_runs_the_call_and_records_who_approved(make_host) -> None:
    seen: list[str] = []
    hosts: list[Host] = []

    @expediter.tool(require_approval=True)
    def close_account(account: str) -> str:
        """Close an account."""
        seen.append(row(hosts[0], "m1:c1").status)  # what the ledger says while it runs
        return f"closed {account}"

    host = make_host(close_account, record_calls=True)
    hosts.append(host)
    turn(host.toolset(user_id="ann"), ("c1", "close_account", {"account": "acct-9"}))
    assert row(host, "m1:c1").status == "awaiting_approval"

    event = host.resume("m1:c1", True, approver="bob")

    assert (event.status, event.key, event.result) == ("completed", "m1:c1", "closed acct-9")
    assert seen == ["approved"]
    executed = row(host, "m1:c1")
    assert (executed.status, executed.decision, executed.decided_by, executed.user_id) == (
        "executed",
        "approved",
        "bob",
        "ann",
    )
    assert executed.result == "closed acct-9"
    assert pending_keys(host) == []


def test_denying_tells_the_model_why_but_never_who(make_host) -> None:
    host = make_host(refund, record_calls=True)
    toolset = host.toolset()
    calls, _ = turn(toolset, ("c1", "refund", {"order": "A1"}))

    event = host.resume("m1:c1", False, approver="bob", reason="refunds need a ticket")

    assert (event.status, event.key) == ("denied", "m1:c1")
    assert "bob" not in (event.error or "")
    assert "refunds need a ticket" in (event.error or "")
    denied = row(host, "m1:c1")
    assert (denied.status, denied.decided_by) == ("denied", "bob")
    assert "refunds need a ticket" in (denied.error or "")
    (message,) = toolset.result_messages("openai", calls, [event])
    assert message["tool_call_id"] == "c1"
    assert "denied" in message["content"]
    assert "refunds need a ticket" in message["content"]
    assert "bob" not in message["content"]  # the approver's identity stays in the ledger
    assert RAN == []


def test_a_denial_on_resume_carries_its_reason_like_other_denials(make_host) -> None:
    host = make_host(refund, record_calls=True)
    turn(host.toolset(), ("c1", "refund", {"order": "A1"}))
    event = host.resume("m1:c1", False, approver="bob", reason="refunds need a ticket")
    assert "refunds need a ticket" in (event.reason or "")


def test_an_approvers_reason_is_recorded(make_host) -> None:
    host = make_host(refund, record_calls=True)
    turn(host.toolset(), ("c1", "refund", {"order": "A1"}))
    host.resume("m1:c1", True, approver="bob", reason="ticket 4711")
    recorded = row(host, "m1:c1")
    assert "ticket 4711" in json.dumps([recorded.to_dict(), recorded.request])


def test_a_policy_that_denies_now_wins_over_an_approval(make_host) -> None:
    policy = Policy(Decision.ask("a human should look"))
    host = make_host(refund, policy, record_calls=True)
    turn(host.toolset(), ("c1", "refund", {"order": "A1"}))
    assert row(host, "m1:c1").status == "awaiting_approval"

    policy.answer = Decision.denied("the customer's account was frozen meanwhile")
    event = host.resume("m1:c1", True, approver="bob")

    assert event.status == "denied"
    assert "account was frozen" in (event.error or "")
    denied = row(host, "m1:c1")
    assert denied.status == "denied"
    assert "account was frozen" in (denied.error or "")
    assert RAN == []
    assert policy.asked == ["refund", "refund"]


def test_resuming_a_decided_or_unknown_call_raises_ledger_error(make_host) -> None:
    host = make_host(refund, record_calls=True)
    turn(host.toolset(), ("c1", "refund", {"order": "A1"}), ("c2", "refund", {"order": "A2"}))
    assert host.resume("m1:c1", True, approver="bob").status == "completed"
    assert host.resume("m1:c2", False, approver="bob").status == "denied"

    for key, approved in (("m1:c1", True), ("m1:c1", False), ("m1:c2", True)):
        with pytest.raises(LedgerError, match="not waiting for a decision"):
            host.resume(key, approved, approver="eve")
    with pytest.raises(LedgerError, match="no call 'm1:c9'"):
        host.resume("m1:c9", True)
    assert RAN == [("refund", "A1")]
    assert row(host, "m1:c1").decided_by == "bob"


def test_client_results_and_approvals_do_not_mix(make_host) -> None:
    host = make_host(refund, record_calls=True)
    turn(
        host.toolset(client_tools=[PICK_DATE]),
        ("c1", "pick_date", {}),
        ("c2", "refund", {"order": "A1"}),
    )
    with pytest.raises(LedgerError, match="submit_client_result"):
        host.resume("m1:c1", True, approver="bob")
    with pytest.raises(LedgerError, match="not a client-side call"):
        host.submit_client_result("m1:c2", {"fake": "result"})
    host.submit_client_result("m1:c1", "2025-01-01")
    with pytest.raises(LedgerError, match="not waiting"):
        host.submit_client_result("m1:c1", "2025-01-02")
    assert row(host, "m1:c1").result == "2025-01-01"
    assert row(host, "m1:c2").status == "awaiting_approval"


def test_pending_approvals_expire_after_approval_seconds(make_host) -> None:
    host = make_host(refund, record_calls=True, approval_seconds=0.3)
    turn(host.toolset(), ("c1", "refund", {"order": "A1"}))
    assert host.ledger.sweep() == []
    assert pending_keys(host) == ["m1:c1"]

    time.sleep(0.4)
    assert host.ledger.sweep() == ["m1:c1"]

    expired = row(host, "m1:c1")
    assert expired.status == "abandoned"
    assert "approval expired" in (expired.error or "")
    assert pending_keys(host) == []
    with pytest.raises(LedgerError, match="abandoned"):
        host.resume("m1:c1", True, approver="bob")
    assert RAN == []


def test_a_denial_that_lost_the_race_to_an_approval_is_not_reported_as_denied(
    make_host, monkeypatch: pytest.MonkeyPatch
) -> None:
    approver_host = make_host(refund, record_calls=True)
    denier_host = make_host(refund, record_calls=True)
    turn(denier_host.toolset(), ("c1", "refund", {"order": "A1"}))
    ledger = denier_host.ledger
    read = ledger.get

    def read_then_lose_the_race(key: str) -> Any:
        found = read(key)  # the denying worker reads the paused row...
        approver_host.resume(key, True, approver="alice")  # ...another worker approves it
        return found

    monkeypatch.setattr(ledger, "get", read_then_lose_the_race)
    with pytest.raises(LedgerError, match="decided by someone else first"):
        denier_host.resume("m1:c1", False, approver="bob", reason="no")
    monkeypatch.setattr(ledger, "get", read)
    assert row(denier_host, "m1:c1").status == "executed"


class Shop(expediter.Toolbox):
    """A configured tool: each instance refunds in its own region."""

    @expediter.action(require_approval=True)
    def give_back(self, order: str) -> str:
        """Refund an order in this instance's region."""
        return f"refunded {order} in {self.config.get('region', 'NO REGION')}"


def test_a_configured_instance_is_resumed_with_its_configuration_by_another_worker(
    make_host,
) -> None:
    first = make_host(Shop, record_calls=True)
    toolset = first.toolset(
        instances=[{"tool": "shop", "instance_id": "shop-eu", "config": {"region": "eu"}}]
    )
    name = toolset.name_map.name_for("shop-eu", "give_back")
    assert name is not None
    turn(toolset, ("c1", name, {"order": "A1"}))

    other_worker = make_host(Shop, record_calls=True)  # a fresh registry, as in a new process
    event = other_worker.resume("m1:c1", True, approver="bob")
    assert event.result == "refunded A1 in eu"


class Vault(expediter.Toolbox):
    """A configured tool whose configuration holds a secret."""

    @expediter.action(require_approval=True)
    def read(self, name: str) -> str:
        """Read a secret's fingerprint."""
        return f"{name} via {self.config.get('api_key', 'NO KEY')[:2]}..."


VAULT = {"tool": "vault", "instance_id": "vault-ann", "config": {"api_key": "sk-12345"}}


def test_a_configuration_holding_secrets_is_not_written_to_the_ledger(make_host) -> None:
    host = make_host(Vault, record_calls=True)
    toolset = host.toolset(instances=[VAULT])
    name = toolset.name_map.name_for("vault-ann", "read")
    assert name is not None
    turn(toolset, ("c1", name, {"name": "db"}))
    paused = row(host, "m1:c1")
    assert "sk-12345" not in json.dumps([paused.to_dict(), paused.request])
    assert paused.request["config_withheld"] is True
    # In the process that built the toolset, the instance is still at hand.
    assert host.resume("m1:c1", True, approver="bob").result == "db via sk..."


def test_another_worker_resumes_a_secret_configured_instance_only_when_given_it(
    make_host,
) -> None:
    first = make_host(Vault, record_calls=True)
    toolset = first.toolset(instances=[VAULT])
    name = toolset.name_map.name_for("vault-ann", "read")
    turn(toolset, ("c1", name, {"name": "db"}), ("c2", name, {"name": "cache"}))

    other = make_host(Vault, record_calls=True)
    with pytest.raises(LedgerError, match=r"instances=\[ToolInstance\(tool='vault'"):
        other.resume("m1:c1", True, approver="bob")
    assert row(other, "m1:c1").status == "awaiting_approval"
    assert other.resume("m1:c1", True, approver="bob", instances=[VAULT]).result == "db via sk..."
    # Denying runs nothing, so it needs no configuration.
    assert other.resume("m1:c2", False, approver="bob").status == "denied"


def test_resuming_with_an_instance_of_another_tool_is_refused(make_host) -> None:
    host = make_host(Vault, Shop, record_calls=True)
    toolset = host.toolset(instances=[VAULT])
    turn(toolset, ("c1", toolset.name_map.name_for("vault-ann", "read"), {"name": "db"}))
    wrong = {"tool": "shop", "instance_id": "vault-ann", "config": {}}
    with pytest.raises(LedgerError, match="is a 'shop' tool"):
        make_host(Vault, Shop, record_calls=True).resume("m1:c1", True, instances=[wrong])


# -- resuming from another process ------------------------------------------------------------


def test_a_call_paused_in_one_process_is_resumed_by_another_after_the_first_exited(
    shared_url: str, tmp_path: Path, make_host: Callable[..., Host]
) -> None:
    log = tmp_path / "refunds.log"
    log.touch()
    common = {"url": shared_url, "home": str(tmp_path / "home"), "log": log}

    proposed = workers.run_worker(
        "propose",
        **common,
        user="ann",
        message_id="msg-1",
        response=openai_response(
            ("c1", "refund", {"order": "A1"}), ("c2", "refund", {"order": "B2"})
        ),
    )
    assert [(e["status"], e["key"]) for e in proposed["events"]] == [
        ("awaiting_approval", "msg-1:c1"),
        ("awaiting_approval", "msg-1:c2"),
    ]
    assert log.read_text() == ""  # nothing ran, and the first process is gone

    approved = workers.run_worker("resume", **common, key="msg-1:c1", approved=True, approver="bob")
    denied = workers.run_worker(
        "resume", **common, key="msg-1:c2", approved=False, approver="carol", reason="duplicate"
    )

    assert approved["event"]["status"] == "completed"
    assert approved["event"]["result"] == {"refunded": "A1", "amount": 1}
    assert approved["event"]["user_id"] == "ann"
    assert denied["event"]["status"] == "denied"
    assert "duplicate" in denied["event"]["error"]
    assert log.read_text() == f"{approved['pid']} A1\n"  # it ran in the resuming process
    assert approved["pid"] != proposed["pid"]

    reader = make_host(database_url=shared_url, record_calls=True)
    first, second = reader.ledger.get("msg-1:c1"), reader.ledger.get("msg-1:c2")
    assert first is not None
    assert second is not None
    assert (first.status, first.decided_by, first.user_id, first.message_id) == (
        "executed",
        "bob",
        "ann",
        "msg-1",
    )
    assert first.result == {"refunded": "A1", "amount": 1}
    assert (second.status, second.decided_by) == ("denied", "carol")
    assert reader.ledger.pending_approvals() == []


# -- who may decide ------------------------------------------------------------------------------


class OnlyAdmins:
    """A host plugin: only ``admin:*`` approvers may approve; anyone may deny."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str | None, bool]] = []

    @expediter.hookimpl
    def authorize_decision(
        self, key: str, call: ToolCall, approver: str | None, approved: bool
    ) -> bool | None:
        self.asked.append((key, approver, approved))
        assert call.action == "refund"
        if approved and not (approver or "").startswith("admin:"):
            return False
        return None


def test_authorize_decision_refuses_an_approver_and_the_call_keeps_waiting(make_host) -> None:
    rules = OnlyAdmins()
    host = make_host(refund, rules, record_calls=True)
    turn(host.toolset(), ("c1", "refund", {"order": "A1"}))

    with pytest.raises(DecisionRefused, match="mallory may not approve"):
        host.resume("m1:c1", True, approver="mallory")
    assert row(host, "m1:c1").status == "awaiting_approval"
    assert RAN == []

    event = host.resume("m1:c1", True, approver="admin:ann")
    assert event.status == "completed"
    assert row(host, "m1:c1").decided_by == "admin:ann"
    assert rules.asked == [("m1:c1", "mallory", True), ("m1:c1", "admin:ann", True)]


def test_an_authorize_decision_that_raises_refuses(make_host) -> None:
    class Broken:
        @expediter.hookimpl
        def authorize_decision(self, key: str, call: Any, approver: Any, approved: bool) -> Any:
            raise RuntimeError("directory down")

    host = make_host(refund, Broken(), record_calls=True)
    turn(host.toolset(), ("c1", "refund", {"order": "A1"}))
    with pytest.raises(DecisionRefused):
        host.resume("m1:c1", False, approver="ann")
    assert row(host, "m1:c1").status == "awaiting_approval"


# -- secrets of paused calls ----------------------------------------------------------------------


def test_a_paused_calls_secret_arguments_never_reach_the_ledger(make_host) -> None:
    @expediter.tool(require_approval=True)
    def login(user: str, password: str, pin: Annotated[str, expediter.Secret]) -> str:
        """Log in."""
        return f"{user} in with {len(password)}+{len(pin)}"

    host = make_host(login, record_calls=True)
    turn(host.toolset(), ("c1", "login", {"user": "ann", "password": "hunter2", "pin": "9731"}))

    paused = row(host, "m1:c1")
    stored = json.dumps([paused.request, paused.arguments])
    assert "hunter2" not in stored
    assert "9731" not in stored
    assert paused.request["withheld"] == ["password", "pin"]

    event = host.resume("m1:c1", True, approver="ann")  # this process holds them
    assert (event.status, event.result) == ("completed", "ann in with 7+4")
    done = row(host, "m1:c1")
    assert "hunter2" not in json.dumps([done.request, done.arguments, done.result])


def test_a_paused_call_with_secrets_cannot_be_approved_where_they_are_not_held(
    make_host,
) -> None:
    @expediter.tool(require_approval=True)
    def login(user: str, password: str) -> str:
        """Log in."""
        return "in"

    first = make_host(login, record_calls=True)
    turn(first.toolset(), ("c1", "login", {"user": "ann", "password": "hunter2"}))
    other = make_host(login, record_calls=True)  # another worker on the same ledger

    with pytest.raises(LedgerError, match="secret arguments"):
        other.resume("m1:c1", True, approver="ann")
    assert other.resume("m1:c1", False, approver="ann").status == "denied"
