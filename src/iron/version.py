"""Iron's version (one place; ``iron.__version__`` and the ``iron build`` manifest read it)."""

from __future__ import annotations

__version__ = "0.1.0"
