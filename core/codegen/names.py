"""C-safe names for model symbols.

Every model symbol (an SBML id, or one of our own symbols such as `@time` or
`amount@S1`) becomes `s_` + its escaped text, and common-subexpression
temporaries are `cse_<n>`. Nothing else in generated code may start with these
two prefixes: templates and the printer's helpers use other names (the
`sbmlgpu_` prefix, `real_t`, `t`, `x`, `p`, ...). So a model symbol can never
collide with a C/C++ keyword, a CUDA built-in (`threadIdx`, `warpSize`), a math
function (`exp`, `e` is not one but `pi` could be a macro), a macro (`NAN`,
`M_PI`) or a template's variable: none of those start with `s_`.

Escaping makes the map injective (and reversible, see `demangle`): letters and
digits stay; `_` is the escape character and is written `__`; any other
character c is written `_<hex of ord(c), upper case>_`. Reading the body left to
right, `__` is an underscore and `_` followed by a hex digit starts a code that
ends at the next `_`, so every mangled name decodes to exactly one input.
Examples: `k1` -> `s_k1`, `a_b` -> `s_a__b`, `a__b` -> `s_a____b`,
`amount@S1` -> `s_amount_40_S1`.

C++ formally reserves identifiers that contain `__` for the implementation; in
practice compilers and the CUDA headers only use names that *begin* with `__`
or `_X`, and `tests/test_codegen_names.py` checks that no macro defined by the
headers our kernels include starts with our prefixes.
"""

from __future__ import annotations

import re
from functools import lru_cache

import sympy as sp

#: Prefix of every mangled model symbol.
SYMBOL_PREFIX = "s_"
#: Prefix of every common-subexpression temporary (see cse.py).
TEMP_PREFIX = "cse_"
#: Prefixes that templates and helper code must not use for their own names.
RESERVED_PREFIXES = (SYMBOL_PREFIX, TEMP_PREFIX)

_PLAIN = re.compile(r"[A-Za-z0-9]")
_HEX_CODE = re.compile(r"([0-9A-F]+)_")


@lru_cache(maxsize=65536)
def mangle(name: str) -> str:
    """The C identifier for a model symbol's name (an SBML id or `amount@S1`)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"cannot mangle {name!r}: need a non-empty string")
    out = [SYMBOL_PREFIX]
    for ch in name:
        if _PLAIN.fullmatch(ch):
            out.append(ch)
        elif ch == "_":
            out.append("__")
        else:
            out.append(f"_{ord(ch):X}_")
    return "".join(out)


def demangle(c_name: str) -> str:
    """The inverse of `mangle` (raises ValueError on a name mangle cannot produce)."""
    if not c_name.startswith(SYMBOL_PREFIX) or len(c_name) == len(SYMBOL_PREFIX):
        raise ValueError(f"{c_name!r} is not a mangled model name")
    body, out, i = c_name[len(SYMBOL_PREFIX):], [], 0
    while i < len(body):
        ch = body[i]
        if ch != "_":
            out.append(ch)
            i += 1
        elif body.startswith("__", i):
            out.append("_")
            i += 2
        else:
            m = _HEX_CODE.match(body, i + 1)
            if not m:
                raise ValueError(f"{c_name!r}: bad escape at position {i + len(SYMBOL_PREFIX)}")
            out.append(chr(int(m.group(1), 16)))
            i = m.end()
    return "".join(out)


def symbol_name(symbol: sp.Symbol | str) -> str:
    """`mangle` for a sympy symbol (or a plain name)."""
    return mangle(symbol if isinstance(symbol, str) else symbol.name)


def temp_name(index: int) -> str:
    """The C name of the index-th common-subexpression temporary."""
    return f"{TEMP_PREFIX}{int(index)}"


def is_reserved(identifier: str) -> bool:
    """True when `identifier` uses a prefix that generated names own; templates
    and helpers must not declare such names."""
    return identifier.startswith(RESERVED_PREFIXES)
