"""The built-in clock tool."""

from __future__ import annotations

import datetime as dt

import pytest

from expediter.core.records.text import echo
from expediter.plugins import clock
from expediter.testing import ToolContract


class TestClockContract(ToolContract):
    tool = clock
    examples = {
        "now": {"timezone": "Europe/Paris"},
        "convert": {"time": "09:00", "from_timezone": "UTC", "to_timezone": "Asia/Tokyo"},
    }
    require_examples = True


def test_now_is_the_current_time_in_the_zone(call_tool) -> None:
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    event = call_tool(clock, "now", {"timezone": "America/New_York"})
    after = dt.datetime.now(dt.UTC)
    result = event.result
    moment = dt.datetime.fromisoformat(result["iso"])
    assert before <= moment <= after
    assert result["timezone"] == "America/New_York"
    assert result["utc_offset"] in ("-05:00", "-04:00")
    assert result["weekday"] == moment.strftime("%A")


def test_now_defaults_to_utc(call_tool) -> None:
    assert call_tool(clock, "now", {}).result["utc_offset"] == "+00:00"


@pytest.mark.parametrize(
    ("time", "source", "target", "expected"),
    [
        ("2026-07-01T09:00", "Europe/Paris", "UTC", "2026-07-01T07:00:00+00:00"),
        ("2026-01-15T09:00", "Europe/Paris", "UTC", "2026-01-15T08:00:00+00:00"),
        ("2026-03-29T00:30", "UTC", "Europe/London", "2026-03-29T00:30:00+00:00"),
        ("2026-03-29T01:30", "UTC", "Europe/London", "2026-03-29T02:30:00+01:00"),
        ("2026-05-05T23:00+02:00", "Asia/Tokyo", "UTC", "2026-05-05T21:00:00+00:00"),
    ],
)
def test_convert_handles_offsets_and_daylight_saving(
    call_tool, time: str, source: str, target: str, expected: str
) -> None:
    event = call_tool(
        clock, "convert", {"time": time, "from_timezone": source, "to_timezone": target}
    )
    assert event.result["to"]["iso"] == expected


def test_convert_accepts_a_bare_clock_time_for_today(call_tool) -> None:
    result = call_tool(
        clock,
        "convert",
        {"time": "18:45", "from_timezone": "Asia/Kolkata", "to_timezone": "UTC"},
    ).result
    assert result["from"]["time"] == "18:45:00"
    assert result["to"]["time"] == "13:15:00"


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({"timezone": "Mars/Olympus_Mons"}, "unknown time zone 'Mars/Olympus_Mons'"),
        ({"timezone": "../etc/passwd"}, "unknown time zone"),
    ],
)
def test_unknown_zones_are_tool_errors(call_tool, arguments, fragment) -> None:
    event = call_tool(clock, "now", arguments)
    assert (event.status, event.error_type) == ("error", "ToolError")
    assert fragment in (event.error or "")


def test_unreadable_times_are_tool_errors(call_tool) -> None:
    event = call_tool(
        clock, "convert", {"time": "teatime", "from_timezone": "UTC", "to_timezone": "UTC"}
    )
    assert event.error_type == "ToolError"
    assert "cannot read the time 'teatime'" in (event.error or "")


@pytest.mark.parametrize(
    "zone",
    [
        "America",  # a folder of zones: IsADirectoryError naming the install path
        "x" * 300,  # too long for a file name
        "../../etc/passwd",
        "UTC\x00",
        "",
        "zone.tab",  # a file beside the zones, not a zone
        "/usr/share/zoneinfo/UTC",
    ],
)
@pytest.mark.parametrize("action", ["now", "convert"])
def test_a_zone_that_is_not_one_is_an_unknown_zone_error_naming_no_path(
    call_tool, zone: str, action: str
) -> None:
    arguments = (
        {"timezone": zone}
        if action == "now"
        else {"time": "09:00", "from_timezone": "UTC", "to_timezone": zone}
    )
    event = call_tool(clock, action, arguments)
    assert (event.status, event.error_type) == ("error", "ToolError")
    error = event.error or ""
    # The zone quoted (cut short when long), an example: nothing else, no path, no errno.
    assert error == (
        f"unknown time zone {echo(zone, 64)}; use an IANA name such as 'Europe/Paris', "
        "'America/New_York' or 'UTC'"
    )
    assert len(error) < 300


def test_zone_names_of_every_shape_in_use_still_work(call_tool) -> None:
    for zone in ("UTC", "Etc/GMT+5", "America/Argentina/Buenos_Aires", " Asia/Tokyo "):
        assert call_tool(clock, "now", {"timezone": zone}).status == "completed", zone
