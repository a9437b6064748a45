"""Clock: the current time in any IANA time zone, and converting a time between zones."""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated
from zoneinfo import ZoneInfo

import expediter
from expediter.core.records.text import echo

#: What an IANA zone name looks like ("UTC", "America/New_York", "Etc/GMT+5"): no dots, so
#: no file beside the zones ("zone.tab") and no way out of the zone database ("../").
_ZONE_NAME = re.compile(r"[A-Za-z0-9_+\-]+(?:/[A-Za-z0-9_+\-]+)*")
#: Longer than any zone name ("America/Argentina/ComodRivadavia" has 32 characters).
_ZONE_CHARS = 64


def _zone(name: str) -> ZoneInfo:
    key = name.strip()
    if len(key) <= _ZONE_CHARS and _ZONE_NAME.fullmatch(key):
        try:
            return ZoneInfo(key)
        except Exception:
            # Not found, a folder of zones ("America"), a file that is no zone, a name too
            # long for the file system: each error names the zone database's path, which
            # the model must not see. All mean the same to it.
            pass
    raise expediter.ToolError(
        f"unknown time zone {echo(name, _ZONE_CHARS)}; use an IANA name such as "
        "'Europe/Paris', 'America/New_York' or 'UTC'"
    ) from None


def _describe(moment: dt.datetime) -> dict[str, str]:
    offset = moment.strftime("%z")
    return {
        "timezone": str(moment.tzinfo),
        "iso": moment.isoformat(timespec="seconds"),
        "date": moment.date().isoformat(),
        "time": moment.strftime("%H:%M:%S"),
        "weekday": moment.strftime("%A"),
        "utc_offset": f"{offset[:3]}:{offset[3:]}" if offset else "+00:00",
    }


def _parse(text: str, zone: ZoneInfo, today: dt.date) -> dt.datetime:
    value = text.strip()
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        try:
            clock = dt.time.fromisoformat(value)
        except ValueError:
            raise expediter.ToolError(
                f"cannot read the time {text!r}; give 'HH:MM' or an ISO 8601 date and time "
                "such as '2026-03-01T14:30'"
            ) from None
        moment = dt.datetime.combine(today, clock)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    return moment


class Clock(expediter.Toolbox):
    """Tell the current date and time, and convert times between time zones."""

    @expediter.action
    def now(
        self, timezone: Annotated[str, "An IANA time zone, e.g. 'Asia/Tokyo'."] = "UTC"
    ) -> dict[str, str]:
        """Return the current date and time in a time zone.

        Args:
            timezone: The IANA time zone name; UTC when omitted.
        """
        return _describe(dt.datetime.now(_zone(timezone)))

    @expediter.action
    def convert(self, time: str, from_timezone: str, to_timezone: str) -> dict[str, dict[str, str]]:
        """Convert a time from one time zone to another.

        Args:
            time: 'HH:MM' (today in the source zone) or an ISO 8601 date and time.
            from_timezone: The IANA zone the time is given in (ignored if the time has an offset).
            to_timezone: The IANA zone to convert to.
        """
        source = _zone(from_timezone)
        target = _zone(to_timezone)
        moment = _parse(time, source, dt.datetime.now(source).date())
        return {"from": _describe(moment), "to": _describe(moment.astimezone(target))}
