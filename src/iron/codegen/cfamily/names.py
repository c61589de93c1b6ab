"""C identifiers for IR values: sanitised from the front-end's name hints, unique within a kernel, never a keyword.

Names are handed out in program order, so the same IR always gets the same names (the output is reproducible byte
for byte), and a name the user wrote keeps its spelling unless it is not a C identifier or is already taken.
"""

from __future__ import annotations

import re

_INVALID = re.compile(r"[^A-Za-z0-9_]")

#: C and C++ keywords and alternative tokens (``and``, ``not``, ...), plus names with special meaning to the
#: compilers Iron targets; a value named like one of these gets a trailing underscore.
CXX_KEYWORDS = frozenset("""
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class compl
    concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype default delete
    do double dynamic_cast else enum explicit export extern false float for friend goto if inline int long mutable
    namespace new noexcept not not_eq nullptr operator or or_eq private protected public register reinterpret_cast
    requires restrict return short signed sizeof static static_assert static_cast struct switch template this
    thread_local throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t while xor
    xor_eq main NULL
    """.split())


def sanitize(hint: str) -> str:
    """A valid, non-reserved-looking C identifier spelled as close to ``hint`` as possible (``m.1`` -> ``m_1``).

    Leading underscores and double underscores are dropped because C++ reserves ``__x`` and ``_X`` everywhere.
    """
    name = _INVALID.sub("_", hint)
    name = re.sub("_{2,}", "_", name).lstrip("_")
    if not name or name[0].isdigit():
        name = "v" + ("_" + name if name else "")
    return name


class NameTable:
    """Hands out unique identifiers; ``reserved`` names (keywords, builtins, helper functions) are never given.

    Names follow C's block scopes: ``enter()`` opens one and ``leave()`` frees the names given inside it, so sibling
    loops can both call their index ``c`` while a name is never reused inside the scope that holds it (no shadowing).
    """

    def __init__(self, reserved: frozenset[str] | set[str]):
        self.reserved = frozenset(reserved)
        self.taken: set[str] = set()
        self.by_uid: dict[int, str] = {}
        self._temps = 0
        self._scopes: list[list[str]] = [[]]

    def enter(self) -> None:
        self._scopes.append([])

    def leave(self) -> None:
        self.taken.difference_update(self._scopes.pop())

    def claim(self, hint: str) -> str:
        """A fresh identifier based on ``hint`` (``x``, then ``x_1``, ``x_2``...)."""
        base = sanitize(hint)
        if base in self.reserved:
            base += "_"
        name, k = base, 1
        while name in self.taken or name in self.reserved:
            name = f"{base}_{k}"
            k += 1
        self.taken.add(name)
        self._scopes[-1].append(name)
        return name

    def bind(self, uid: int, hint: str | None) -> str:
        """Name the value ``uid``: from its hint, else the next temporary ``t0``, ``t1``..."""
        if hint:
            name = self.claim(hint)
        else:
            while f"t{self._temps}" in self.taken or f"t{self._temps}" in self.reserved:
                self._temps += 1
            name = self.claim(f"t{self._temps}")
        self.by_uid[uid] = name
        return name

    def get(self, uid: int) -> str | None:
        return self.by_uid.get(uid)
