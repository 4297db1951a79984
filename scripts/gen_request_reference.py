"""Write the request-code table of docs/admin-protocol.md from the request specs (run after changing a spec).

The table sits between the markers of :data:`rmqrun.protocol.requests.TABLE_BEGIN` and ``TABLE_END``; the rest
of the page is written by hand and kept.
"""

from __future__ import annotations

from pathlib import Path

from rmqrun.protocol.requests import TABLE_BEGIN, TABLE_END, markdown_table

DOC = Path(__file__).resolve().parents[1] / "docs" / "admin-protocol.md"


def render(text: str) -> str:
    """``text`` (the page) with its table replaced by the specs' one."""
    start, end = text.index(TABLE_BEGIN), text.index(TABLE_END) + len(TABLE_END) + 1
    return text[:start] + markdown_table() + text[end:]


if __name__ == "__main__":
    DOC.write_text(render(DOC.read_text()))
    print(f"wrote {DOC}")
