"""C identifiers for IR values: sanitised from the front-end's name hints, unique within a kernel, never a keyword.

Names are handed out in program order, so the same IR always gets the same names (the output is reproducible byte
for byte), and a name the user wrote keeps its spelling unless it is not a C identifier or is already taken.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

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

#: what the C++ headers every C-family target sees declare as namespaces, types or lowercase macros (a function, a
#: parameter or a local of that name would not compile, or would change meaning): Debian's libc through the msl-cpu
#: model's headers, NVRTC's and hipRTC's built-in headers. Issue 17: ``std`` as a kernel's name broke all three.
CXX_LIBRARY_NAMES = frozenset("""
    std size_t ssize_t ptrdiff_t nullptr_t max_align_t intmax_t uintmax_t intptr_t uintptr_t off_t time_t clock_t
    int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t int_least8_t int_least16_t int_least32_t
    int_least64_t uint_least8_t uint_least16_t uint_least32_t uint_least64_t int_fast8_t int_fast16_t int_fast32_t
    int_fast64_t uint_fast8_t uint_fast16_t uint_fast32_t uint_fast64_t va_list FILE fpos_t locale_t div_t ldiv_t
    lldiv_t pthread_t pthread_attr_t pthread_mutex_t pthread_mutexattr_t pthread_cond_t pthread_condattr_t
    pthread_key_t pthread_once_t pthread_barrier_t pthread_barrierattr_t pthread_rwlock_t pthread_rwlockattr_t
    pthread_spinlock_t clockid_t timer_t pid_t cpu_set_t sigset_t sig_atomic_t
    stdin stdout stderr errno assert offsetof alloca setjmp va_start va_arg va_end va_copy
    printf malloc free memcpy memset memmove memcmp
    """.split())

#: the vector types of CUDA, HIP and Metal (``float4``, ``uint3``, ``half2``, ...): HIP and the msl-cpu model
#: declare them as typedefs, so a kernel named ``float4`` would not compile there
VECTOR_TYPE_NAMES = frozenset(f"{base}{n}" for base in ("char", "uchar", "short", "ushort", "int", "uint", "long",
                                                         "ulong", "longlong", "ulonglong", "float", "double", "half",
                                                         "bfloat", "bool")
                              for n in range(1, 5))

#: CUDA's and HIP's other built-in types and namespaces (HIP's headers declare ``half``)
GPU_TYPE_NAMES = frozenset("""
    dim3 half nv_bfloat16 nv_bfloat162 hip_bfloat16 bfloat16 cuda nvcuda cooperative_groups hip uint ushort uchar
    ulong clock clock64 wall_clock64 cudaError_t hipError_t
    """.split())

#: functions with C linkage that CUDA's and HIP's headers declare (the C library and its math): an ``extern "C"``
#: entry point of that name would clash with them. Only the kernel's own name avoids these; a parameter or local
#: may shadow a function (``y0``, ``round`` stay as written).
C_FUNCTIONS = frozenset([f"{base}{suffix}" for base in """
    acos acosh asin asinh atan atan2 atanh cbrt ceil copysign cos cosh cospi cyl_bessel_i0 cyl_bessel_i1 erf erfc
    erfcinv erfcx erfinv exp exp10 exp2 expm1 fabs fdim floor fma fmax fmin fmod frexp hypot ilogb isfinite isinf
    isnan j0 j1 jn ldexp lgamma llrint llround log log10 log1p log2 logb lrint lround modf nan nearbyint nextafter
    norm norm3d norm4d normcdf normcdfinv pow rcbrt remainder remquo rhypot rint rnorm rnorm3d rnorm4d round rsqrt
    scalbln scalbn signbit sin sincos sincospi sinh sinpi sqrt tan tanh tgamma trunc y0 y1 yn
    """.split() for suffix in ("", "f", "l")] + """
    abs labs llabs min max umin umax llmin llmax ullmin ullmax brev brevll clz clzll ffs ffsll popc popcll mul24
    umul24 mulhi umulhi sad usad abort exit atexit calloc realloc strlen strcmp strcpy strncpy strcat memchr sprintf
    snprintf fprintf puts putchar fputs fflush qsort bsearch rand srand atoi atof strtol strtod getenv system
    """.split())


@cache
def generated_names() -> tuple[frozenset[str], tuple[str, ...]]:
    """(names, prefixes) of every ``iron_*``/``IRON_*`` identifier the C-family emitters and the msl-cpu model's
    headers may write, read from their own text, so a helper added later is covered too: a user's ``iron_n0``,
    ``iron_local_linear`` or ``iron_model`` never meets the generated one. A prefix is a name spelled with a
    suffix (``iron_frag_a_load_{dtype}``); user names starting with one are mangled as well."""
    here = Path(__file__).parent
    texts = [path.read_text() for path in sorted(here.glob("*.py"))]
    model = here.parent / "msl_model" / "include"
    texts += [path.read_text() for path in sorted(model.iterdir()) if path.is_file()]
    names: set[str] = set()
    prefixes: set[str] = set()
    for text in texts:
        for name, brace in re.findall(r"\b((?:iron|IRON)_\w+)(\{?)", text):
            (prefixes if brace or name.endswith("_") else names).add(name)
    return frozenset(names), tuple(sorted(prefixes))


def entry_hint(name: str) -> str:
    """The kernel's name as the hint of its entry point: with a trailing underscore when it is a C library function
    the target's headers declare (a kernel named ``printf`` becomes ``printf_``; ``KernelSource.entry`` says so)."""
    return name + "_" if sanitize(name) in C_FUNCTIONS else name


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
        generated, self._prefixes = generated_names()
        self.reserved = frozenset(reserved) | generated | CXX_LIBRARY_NAMES | VECTOR_TYPE_NAMES
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
        if base in self.reserved or base.startswith(self._prefixes):
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
