"""Readable text form of the IR (``k.ir()``, ``iron inspect --ir``). Deterministic: same IR, same bytes."""

from __future__ import annotations

from .core import Block, Kernel, Op, Value


class _Namer:
    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.used: set[str] = set()
        self.counter = 0
        # base name -> the suffix to try next: names are only ever added to `used`, so every smaller suffix is
        # taken and need not be probed again (an unrolled loop names thousands of values alike)
        self.suffix: dict[str, int] = {}

    def __call__(self, v: Value) -> str:
        name = self.names.get(v.uid)
        if name is None:
            if v.name:
                base = v.name
                k = self.suffix.get(base, 0)
                name = base if k == 0 else f"{base}.{k}"
                while name in self.used:
                    k += 1
                    name = f"{base}.{k}"
                self.suffix[base] = k + 1
            else:
                while str(self.counter) in self.used:
                    self.counter += 1
                name = str(self.counter)
                self.counter += 1
            self.used.add(name)
            self.names[v.uid] = name
        return "%" + name


def _fmt_const(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def format_op(op: Op, name: _Namer) -> str:
    """One op's line (without regions)."""
    a = op.attrs
    ops = [name(v) for v in op.operands]
    head = f"{name(op.result)} = " if op.result is not None else ""
    code = op.opcode
    if code == "const":
        body = f"const {_fmt_const(a['value'])}"
    elif code in ("load", "atomic_add", "atomic_max"):
        body = f"{code} {ops[0]}[{ops[1]}]" + (f", {ops[2]}" if len(ops) > 2 else "")
    elif code == "store":
        body = f"store {ops[0]}[{ops[1]}], {ops[2]}"
    elif code in ("shared", "local"):
        body = f"{code} {a['elem']} x {a['size'] if a.get('size') is not None else a['length']}"
    elif code == "vcopy":
        body = f"vcopy {ops[0]}[{ops[1]}], {ops[2]}[{ops[3]}] x {a['n']}"
    elif code == "for":
        iv = name(op.regions[0].args[0])
        kind = "static_range" if a.get("unroll") else "range"
        body = f"for {iv} in {kind}({', '.join(ops)})"
    else:
        extras = [str(a["axis"])] if "axis" in a else []
        body = " ".join([code, ", ".join(extras + ops)]).rstrip()
    if op.result is not None:
        body += f" : {op.result.type}"
    return head + body


def print_block(block: Block, name: _Namer, indent: int, out: list[str], locs: bool) -> None:
    pad = "  " * indent
    for op in block.ops:
        line = pad + format_op(op, name)
        if locs and op.loc is not None and not op.regions:
            line = f"{line:<60} # line {op.loc.line}"
        if op.opcode == "if":
            out.append(line + " {")
            print_block(op.regions[0], name, indent + 1, out, locs)
            if op.regions[1].ops:
                out.append(pad + "} else {")
                print_block(op.regions[1], name, indent + 1, out, locs)
            out.append(pad + "}")
        elif op.opcode == "for":
            out.append(line + " {")
            print_block(op.regions[0], name, indent + 1, out, locs)
            out.append(pad + "}")
        elif op.opcode == "while":
            out.append(pad + "while {")
            print_block(op.regions[0], name, indent + 1, out, locs)
            out.append(pad + "} do {")
            print_block(op.regions[1], name, indent + 1, out, locs)
            out.append(pad + "}")
        else:
            out.append(line)


def print_kernel(kernel: Kernel, locs: bool = True) -> str:
    """The kernel as text: a signature line, then one op per line, regions indented."""
    name = _Namer()
    params = []
    for p in kernel.params:
        s = f"{name(p.value)}: {p.type}"
        if p.kind == "buffer" and p.readonly:
            s += " readonly"
        params.append(s)
    spec = []
    if kernel.attrs.get("dtype") is not None:
        spec.append(f"T={kernel.attrs['dtype']}")
    for k, v in sorted(kernel.attrs.get("constexprs", {}).items()):
        spec.append(f"{k}={v!r}")
    head = f"kernel @{kernel.name}" + (f"[{', '.join(spec)}]" if spec else "")
    out = [f"{head}({', '.join(params)}) {{"]
    print_block(kernel.body, name, 1, out, locs)
    out.append("}")
    return "\n".join(out) + "\n"
