"""C expressions as text plus precedence, so the printer adds exactly the parentheses a reader needs.

Levels follow C (lower binds tighter). Two deliberate extras for readability: a compound operand of a shift or a
bitwise operator is always parenthesised (``(a + b) << 2``, never ``a + b << 2``), and so is a comparison inside a
comparison.
"""

from __future__ import annotations

from dataclasses import dataclass

PRIMARY, UNARY, MUL, ADD, SHIFT, REL, EQ, BITAND, BITXOR, BITOR, LAND, LOR, COND = range(13)

BINARY_PREC = {"*": MUL, "/": MUL, "%": MUL, "+": ADD, "-": ADD, "<<": SHIFT, ">>": SHIFT, "<": REL, "<=": REL,
               ">": REL, ">=": REL, "==": EQ, "!=": EQ, "&": BITAND, "^": BITXOR, "|": BITOR, "&&": LAND, "||": LOR}
_STRICT = {SHIFT, BITAND, BITXOR, BITOR}


@dataclass(frozen=True)
class Expr:
    """``text`` is a C expression whose loosest-binding operator has precedence ``prec``.

    ``unsigned`` optionally holds the same i32 value computed as ``unsigned`` (before the final ``(int)`` cast of
    wrapping arithmetic), so chains like ``i * 4 + k`` convert once instead of at every step.
    """

    text: str
    prec: int = PRIMARY
    unsigned: Expr | None = None

    def __str__(self) -> str:
        return self.text


def paren(e: Expr) -> Expr:
    return Expr(f"({e.text})")


def _operand(e: Expr, level: int, right: bool) -> str:
    loose = e.prec > level or (right and e.prec == level)
    if level in _STRICT and e.prec >= MUL:
        loose = True
    if level in (REL, EQ) and e.prec in (REL, EQ):
        loose = True
    return f"({e.text})" if loose else e.text


def binary(op: str, a: Expr, b: Expr) -> Expr:
    level = BINARY_PREC[op]
    return Expr(f"{_operand(a, level, False)} {op} {_operand(b, level, True)}", level)


def unary(op: str, a: Expr) -> Expr:
    """Prefix ``-``, ``!`` or ``~``; a compound operand (even ``-1``) is parenthesised, so ``--`` never appears."""
    inner = a.text if a.prec == PRIMARY else f"({a.text})"
    return Expr(f"{op}{inner}", UNARY)


def cast(ctype: str, a: Expr) -> Expr:
    inner = a.text if a.prec == PRIMARY else f"({a.text})"
    return Expr(f"({ctype}){inner}", UNARY)


def call(fn: str, *args: Expr) -> Expr:
    return Expr(f"{fn}({', '.join(a.text for a in args)})")


def index(base: str, i: Expr) -> Expr:
    return Expr(f"{base}[{i.text}]")


def ternary(c: Expr, a: Expr, b: Expr) -> Expr:
    cond = c.text if c.prec <= UNARY else f"({c.text})"
    then = a.text if a.prec < COND else f"({a.text})"
    other = b.text if b.prec < COND else f"({b.text})"
    return Expr(f"{cond} ? {then} : {other}", COND)
