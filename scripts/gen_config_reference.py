"""Write docs/configuration.md from the settings table (run after adding or changing a setting)."""

from __future__ import annotations

from pathlib import Path

from rmqrun.cli.settings import markdown

if __name__ == "__main__":
    out = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
    out.write_text(markdown())
    print(f"wrote {out}")
