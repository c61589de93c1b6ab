"""docs/kernels.md keeps up with the registry: every registered ``std/...`` kernel is named on the page (in backticks,
so ``std/elementwise/add`` is not satisfied by ``std/elementwise/add_row``), and every name the page gives is still
registered. No kernel runs: importing the std modules only registers them."""

from __future__ import annotations

import re
from pathlib import Path

from iron.std import load_all

PAGE = Path(__file__).resolve().parents[2] / "docs" / "kernels.md"


def _page_names() -> set[str]:
    return set(re.findall(r"`(std/[A-Za-z0-9_/]+)`", PAGE.read_text(encoding="utf-8")))


def test_every_registered_kernel_is_on_the_page() -> None:
    registered = {e.name for e in load_all()}
    missing = sorted(registered - _page_names())
    assert not missing, f"docs/kernels.md does not name {len(missing)} registered kernel(s): {', '.join(missing)}"


def test_every_kernel_on_the_page_is_registered() -> None:
    registered = {e.name for e in load_all()}
    stale = sorted(_page_names() - registered)
    assert not stale, f"docs/kernels.md names kernel(s) no longer registered: {', '.join(stale)}"
