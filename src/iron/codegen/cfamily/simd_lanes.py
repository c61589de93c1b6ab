"""C-family helpers of the SIMD-group ops of issue 15: shuffle up/down, ballot/any/all and prefix sums.

Shuffles up and down are ``iron_simd_shuffle`` at lane ``own - delta`` / ``own + delta``, so they inherit its rule:
a source lane outside the SIMD group (or past the end of a partial one) gives the caller's own value. CUDA and HIP
build the votes on a ballot of the lanes in the op's mask and the prefix sums on shuffles: a Hillis-Steele scan for a
full SIMD group, else the active lanes read one by one in lane order (as the reductions do). MSL calls Metal's own
``simd_ballot``/``simd_any``/``simd_all``/``simd_prefix_*_sum``. A ballot is a u32 of lanes 0..31: on a 64-lane
wavefront lanes 32..63 are not in it (Iron has no 64-bit integers yet).
"""

from __future__ import annotations

from .dialect import Snippet

#: (C type, a + b with Iron's wrapping, zero) of the prefix sums, per IR type
_SUM = {"f32": ("float", "{a} + {b}", "0.0f"), "i32": ("int", "(int)((unsigned){a} + (unsigned){b})", "0"),
        "u32": ("unsigned", "{a} + {b}", "0u")}


def relative_shuffles(qualifier: str, ctypes: dict[str, str], mask_ctype: str, lane: str) -> dict[str, Snippet]:
    """CUDA/HIP ``iron_simd_shuffle_up/down`` for every type ``iron_simd_shuffle`` takes; ``lane`` is the C
    expression of the caller's lane."""
    out = {}
    for kind, sign in (("up", "-"), ("down", "+")):
        for irtype, ctype in ctypes.items():
            out[f"iron_simd_shuffle_{kind}:{irtype}"] = Snippet(f"""\
{qualifier} {ctype} iron_simd_shuffle_{kind}({ctype} v, int delta, {mask_ctype} mask) {{
    return iron_simd_shuffle(v, {lane} {sign} delta, mask);
}}""", needs=(f"iron_simd_shuffle:{irtype}", "local_linear"))
    return out


def msl_relative_shuffles(ctypes: dict[str, str]) -> dict[str, Snippet]:
    """MSL ``iron_simd_shuffle_up/down``: through a macro that passes the caller's lane (a kernel attribute)."""
    out = {"shuffle_rel_macro": Snippet("""\
// simd_shuffle_up/down read lane (own - delta) / (own + delta) through iron_simd_shuffle (a lane outside the
// SIMD-group gives the caller's own value); the caller's lane is a kernel attribute parameter, hence the macros.
#define iron_simd_shuffle_up(v, delta) iron_simd_shuffle_rel(v, -(delta), simd_lane_id)
#define iron_simd_shuffle_down(v, delta) iron_simd_shuffle_rel(v, (delta), simd_lane_id)""")}
    for irtype, ctype in ctypes.items():
        body = Snippet(f"""\
static inline {ctype} iron_simd_shuffle_rel({ctype} v, int delta, uint own) {{
    return iron_simd_shuffle(v, (int)own + delta);
}}""", needs=(f"iron_simd_shuffle:{irtype}", "shuffle_rel_macro"))
        out[f"iron_simd_shuffle_rel:{irtype}"] = body
        for kind in ("up", "down"):
            out[f"iron_simd_shuffle_{kind}:{irtype}"] = Snippet("", needs=(f"iron_simd_shuffle_rel:{irtype}",))
    return out


def votes(qualifier: str, mask_ctype: str, ballot: str, needs: tuple[str, ...] = ()) -> dict[str, Snippet]:
    """CUDA/HIP ``iron_simd_ballot/any/all``; ``ballot`` formats ``{p}`` (a predicate) into the mask of the lanes
    in ``mask`` where it holds; ``needs``: snippets its spelling calls."""
    yes, no = ballot.format(p="c"), ballot.format(p="!c")
    return {
        "iron_simd_ballot:bool": Snippet(f"""\
// simd_ballot: bit k where lane k is in the op's lanes and c holds (lanes 0..31: Iron's ballot is a u32).
{qualifier} unsigned iron_simd_ballot(bool c, {mask_ctype} mask) {{
    return (unsigned)({yes});
}}""", needs=needs),
        "iron_simd_any:bool": Snippet(f"""\
{qualifier} bool iron_simd_any(bool c, {mask_ctype} mask) {{
    return ({yes}) != 0;
}}""", needs=needs),
        "iron_simd_all:bool": Snippet(f"""\
{qualifier} bool iron_simd_all(bool c, {mask_ctype} mask) {{
    return ({no}) == 0;
}}""", needs=needs),
    }


#: HIP's votes ballot this instead of the predicate: AMD's LLVM folds ``__ballot`` of a float comparison into its
#: ``amdgcn.fcmp`` intrinsic, and for an unordered one (``isnan``) of a value chosen by a branch its instruction
#: selection then fails ("LLVM ERROR: Cannot select ... setuo"), which aborts the whole process inside hipRTC
#: (gfx90a and gfx1030, with the hipRTC CI installs, version 9.0; source fuzz seed 217 of s36). An empty asm that
#: owns the value as a VGPR hides the comparison from that fold (one v_cndmask); NVIDIA's compile of the HIP source
#: does not need it.
VOTE_PRED = Snippet("""\
// the vote's predicate as an opaque int (hipRTC's fold of __ballot(float compare) can crash its back end)
__device__ __forceinline__ int iron_vote_pred(bool c) {
    int v = c;
#if defined(__AMDGCN__)
    __asm__ volatile("" : "+v"(v));
#endif
    return v;
}""")


def scans(qualifier: str, width: int, mask_ctype: str, full: str, shfl: str, ffs: str) -> dict[str, Snippet]:
    """CUDA/HIP prefix sums over the lanes of the op's mask; ``shfl`` formats ``{v}``, ``{lane}``, ``{mask}``."""
    out = {}
    one = "1ull" if "long" in mask_ctype else "1u"
    for kind, incl in (("prefix_sum", True), ("prefix_exclusive_sum", False)):
        for irtype, (ctype, add, zero) in _SUM.items():
            fn = f"iron_simd_{kind}"
            up = shfl.format(v="v", lane=f"(own - d) & {width - 1}", mask="active")
            prev = shfl.format(v="v", lane=f"(own - 1) & {width - 1}", mask="active")
            gather = shfl.format(v="v", lane="src", mask="active")
            doc = (f"// simd_{kind}: {'inclusive' if incl else 'exclusive'} sum over the active lanes in lane order. "
                   "A full SIMD group scans in\n// log steps; otherwise the active lanes are read one by one.\n"
                   if irtype == "f32" else "")
            full_end = "return v;" if incl else f"const {ctype} e = {prev};\n        return own == 0 ? {zero} : e;"
            out[f"{fn}:{irtype}"] = Snippet(f"""\
{doc}{qualifier} {ctype} {fn}({ctype} v, {mask_ctype} active) {{
    const int own = iron_local_linear() & {width - 1};
    if (active == {full}) {{
        for (int d = 1; d < {width}; d <<= 1) {{
            const {ctype} t = {up};
            if (own >= d) {{
                v = {add.format(a="v", b="t")};
            }}
        }}
        {full_end}
    }}
    {ctype} r = {zero};
    for ({mask_ctype} rest = active; rest != 0; rest &= rest - {one}) {{
        const int src = {ffs}(rest) - 1;
        const {ctype} t = {gather};
        if (src {'<=' if incl else '<'} own) {{
            r = {add.format(a="r", b="t")};
        }}
    }}
    return r;
}}""", needs=("local_linear",) + (("wave_shfl",) if "iron_wave" in shfl else ()))
    return out


def msl_lanes(bf16_ctype: str) -> dict[str, Snippet]:
    """MSL ballot/any/all and prefix sums: Metal's functions over the active threads of the SIMD-group."""
    out = {
        "iron_simd_ballot:bool": Snippet("""\
// simd_ballot: bit k where lane k is active and c holds (Iron's ballot is a u32 of lanes 0..31).
static inline uint iron_simd_ballot(bool c) {
    return (uint)(static_cast<simd_vote::vote_t>(simd_ballot(c)) & 0xffffffffull);
}"""),
        "iron_simd_any:bool": Snippet("static inline bool iron_simd_any(bool c) {\n    return simd_any(c);\n}"),
        "iron_simd_all:bool": Snippet("static inline bool iron_simd_all(bool c) {\n    return simd_all(c);\n}"),
    }
    for kind, metal in (("prefix_sum", "simd_prefix_inclusive_sum"),
                        ("prefix_exclusive_sum", "simd_prefix_exclusive_sum")):
        for irtype, ctype in (("f32", "float"), ("i32", "int"), ("u32", "uint")):
            out[f"iron_simd_{kind}:{irtype}"] = Snippet(
                f"static inline {ctype} iron_simd_{kind}({ctype} v) {{\n    return {metal}(v);\n}}")
    return out


#: the ``simd`` table entries of the ops above (every C-family dialect)
SIMD_FUNCTIONS = {code: f"iron_{code}" for code in (
    "simd_shuffle_up", "simd_shuffle_down", "simd_ballot", "simd_any", "simd_all", "simd_prefix_sum",
    "simd_prefix_exclusive_sum")}
