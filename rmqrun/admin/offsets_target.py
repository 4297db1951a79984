"""Where ``rmqrun offsets reset`` moves a group to: one option per kind of target, never a guess.

The old single ``--to`` read an integer below 10^12 as a queue offset, so an
epoch in seconds (``--to 1714564800``) was clamped to the end of every queue.
Kafka's ``kafka-consumer-groups --reset-offsets`` gives each kind its own
option, and so does this command: ``--to-earliest``, ``--to-latest``,
``--to-datetime`` (ISO 8601), ``--to-timestamp-ms``, ``--to-offset`` and
``--shift-by``. ``--to`` stays for what cannot be misread (``earliest``,
``latest``, an ISO date-time); a bare number there is refused with the three
things it could have meant spelled out as options.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from rmqrun.errors import ConfigError
from rmqrun.time_text import iso_ms

#: the last millisecond a date can name (9999-12-31T23:59:59.999Z), as ``rmqrun read`` bounds its times
MAX_EPOCH_MS = 253402300799999
#: the timestamp INVOKE_BROKER_TO_RESET_OFFSET reads as "the max offset"
LATEST_TIMESTAMP = -1
#: the target options, in the order the help lists them
TARGET_OPTIONS = ("--to-earliest", "--to-latest", "--to-datetime", "--to-timestamp-ms", "--to-offset", "--shift-by",
                  "--to")


@dataclass(frozen=True)
class Target:
    """Where to reset to. ``kind`` is earliest, latest, time (``value`` epoch ms), offset or shift (``value``
    added to each queue's stored offset)."""

    kind: str
    value: int = 0
    text: str = ""

    @property
    def timestamp(self) -> int | None:
        """The timestamp the broker is sent on the online path; None for an explicit offset or a shift."""
        return {"earliest": 0, "latest": LATEST_TIMESTAMP, "time": self.value}.get(self.kind)

    def describe(self) -> str:
        if self.kind == "time" and self.text.endswith(" ms"):
            return f"{self.text} ({iso_ms(self.value)})"
        if self.kind == "time":
            return f"{self.text} ({iso_ms(self.value)}, {self.value} ms)"
        return self.text


def parse_datetime(value: str, option: str = "--to-datetime") -> Target:
    """An ISO 8601 date or date-time (``2024-05-01T12:00:00Z``, ``...+02:00``; no zone: local time)."""
    text = value.strip()
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise ConfigError(f"{option} {value!r} is invalid: give an ISO 8601 time, e.g. 2024-05-01T12:00:00Z "
                          "(no zone: local time)") from None
    return Target("time", int(moment.timestamp() * 1000), text)


def parse_to(value: str) -> Target:
    """The old ``--to``, for what it cannot misread: ``earliest``, ``latest`` or an ISO date-time."""
    text = value.strip()
    low = text.lower()
    if low in ("earliest", "latest"):
        return Target(low, text=low)
    if text.lstrip("-").isdigit():
        raise ConfigError(
            f"--to {value!r} is ambiguous: a number may be a queue offset, epoch milliseconds or epoch seconds; "
            f"give --to-offset {text}, --to-timestamp-ms {text} or --to-datetime (an ISO time)")
    try:
        return parse_datetime(text, "--to")
    except ConfigError:
        raise ConfigError(f"--to {value!r} is invalid: one of earliest, latest or an ISO time "
                          "(2024-05-01T12:00:00+00:00); see also --to-offset, --to-timestamp-ms, --shift-by") from None


def choose_target(*, to: str | None = None, to_datetime: str | None = None, to_timestamp_ms: int | None = None,
                  to_offset: int | None = None, shift_by: int | None = None, to_earliest: bool = False,
                  to_latest: bool = False) -> Target:
    """The one target the options name; a ConfigError when none or several are given."""
    given = {"--to-earliest": to_earliest or None, "--to-latest": to_latest or None, "--to-datetime": to_datetime,
             "--to-timestamp-ms": to_timestamp_ms, "--to-offset": to_offset, "--shift-by": shift_by, "--to": to}
    named = [name for name in TARGET_OPTIONS if given[name] is not None]
    if not named:
        raise ConfigError(f"missing the target: give one of {', '.join(TARGET_OPTIONS)}")
    if len(named) > 1:
        raise ConfigError(f"give one target, not {' and '.join(named)}")
    if to_earliest:
        return Target("earliest", text="earliest")
    if to_latest:
        return Target("latest", text="latest")
    if to_datetime is not None:
        return parse_datetime(to_datetime)
    if to_timestamp_ms is not None:
        if to_timestamp_ms > MAX_EPOCH_MS:
            raise ConfigError(f"--to-timestamp-ms {to_timestamp_ms} is after the year 9999: give epoch "
                              "milliseconds (e.g. 1714564800000), or --to-offset for a queue offset")
        return Target("time", to_timestamp_ms, f"{to_timestamp_ms} ms")
    if to_offset is not None:
        return Target("offset", to_offset, f"offset {to_offset}")
    if shift_by is not None:
        return Target("shift", shift_by, f"the stored offset {shift_by:+d}")
    assert to is not None
    return parse_to(to)
