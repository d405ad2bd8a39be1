"""A seeded generator of broken and hostile SBML: mutations of SBML Test Suite models.

`mutants(cases, seed, n)` yields `Mutant`s, each a suite model with one mutation:

- truncate:  the text cut at a random point (XML that ends early);
- delete:    one element removed (a compartment, a species, a rule, a math child...);
- swap:      the values of two attributes exchanged (ids, compartments, numbers);
- number:    a number in an attribute or a <cn> made NaN, INF, -INF, 1e400, -0, huge,
             tiny, or not a number at all;
- deep:      a <math> replaced by math nested 50 to 20,000 deep, or a sum of hundreds
             of terms;
- keyword:   an id renamed (everywhere it is used) to a C, CUDA or Python keyword or a
             name the generated code or the result tables use themselves;
- csymbol:   a csymbol (rateOf, delay) applied to too few arguments.

The same (cases, seed, n) gives the same mutants: the generator draws from one
random.Random(seed) and the cases are sorted.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path

MATHML = "http://www.w3.org/1998/Math/MathML"

BAD_NUMBERS = ("NaN", "INF", "-INF", "1e400", "-1e400", "-0", "0", "1e308", "-1e308",
               "1e-320", "1e300", "123456789012345678901234567890", "-1", "abc", "")

# C/C++/CUDA/Python keywords and builtins, names our generated code and tables use
KEYWORDS = ("int", "double", "float", "return", "if", "else", "for", "while", "class",
            "struct", "static", "const", "void", "auto", "register", "sizeof", "switch",
            "case", "goto", "inline", "restrict", "volatile", "__global__", "__device__",
            "threadIdx", "blockIdx", "blockDim", "printf", "main", "NULL", "nullptr",
            "lambda", "def", "None", "True", "False", "import", "yield", "pass", "np",
            "math", "exp", "log", "pow", "sqrt", "abs", "min", "max", "pi", "e", "inf",
            "nan", "NaN", "INFINITY", "time", "t", "member", "x", "p", "dx", "y", "k",
            "status", "self", "_", "__", "x0", "S_mean", "time_mean")

_NUMERIC_ATTRIBUTES = ("value", "size", "initialAmount", "initialConcentration",
                       "stoichiometry", "spatialDimensions")


@dataclass(frozen=True)
class Mutant:
    case: str  # the suite case it comes from, e.g. "00042"
    kind: str  # the mutation (see the module docstring)
    detail: str  # what exactly was changed, for the failure message
    text: str  # the mutated SBML

    @property
    def label(self) -> str:
        return f"{self.case}:{self.kind}:{self.detail}"


def suite_models(semantic: Path) -> list[tuple[str, Path]]:
    """(case, SBML file) of each semantic case, preferring L3V2, sorted by case."""
    out = []
    for case in sorted(p for p in semantic.iterdir() if p.is_dir() and p.name.isdigit()):
        files = sorted(case.glob(f"{case.name}-sbml-l*v*.xml"))
        if not files:
            continue
        preferred = [f for f in files if f.name.endswith("l3v2.xml")]
        out.append((case.name, (preferred or files)[-1]))
    return out


# -- mutations: each takes (rng, text) and returns (detail, new text) or None -----------
def truncate(rng: random.Random, text: str):
    cut = rng.randrange(1, max(2, len(text)))
    return f"cut at {cut}/{len(text)}", text[:cut]


_ELEMENT = re.compile(r"<(?P<tag>[A-Za-z][\w:]*)\b[^<>]*?(?:/>|>)")


def _element_spans(text: str) -> list[tuple[str, int, int]]:
    """(tag, start, end) of elements whose extent a regular expression can find: an
    empty element, or one whose end tag is the first of its name after it."""
    spans = []
    for m in _ELEMENT.finditer(text):
        tag = m.group("tag")
        if m.group(0).endswith("/>"):
            spans.append((tag, m.start(), m.end()))
            continue
        close = text.find(f"</{tag}>", m.end())
        nested = text.find(f"<{tag}", m.end())
        if close != -1 and (nested == -1 or nested > close):
            spans.append((tag, m.start(), close + len(tag) + 3))
    return spans


def delete(rng: random.Random, text: str):
    spans = [s for s in _element_spans(text) if s[0] not in ("sbml", "model")]
    if not spans:
        return None
    tag, a, b = rng.choice(spans)
    return f"<{tag}> at {a}", text[:a] + text[b:]


_ATTRIBUTE = re.compile(r'\s([A-Za-z][\w:]*)="([^"]*)"')


def swap(rng: random.Random, text: str):
    attrs = [m for m in _ATTRIBUTE.finditer(text)
             if not m.group(1).startswith("xmlns") and m.group(1) not in ("level", "version")]
    if len(attrs) < 2:
        return None
    a, b = sorted(rng.sample(attrs, 2), key=lambda m: m.start())
    va, vb = a.group(2), b.group(2)
    out = (text[:a.start(2)] + vb + text[a.end(2):b.start(2)] + va + text[b.end(2):])
    return f"{a.group(1)}={va!r} <-> {b.group(1)}={vb!r}", out


def number(rng: random.Random, text: str):
    places = [(m.start(2), m.end(2), m.group(1))
              for m in _ATTRIBUTE.finditer(text) if m.group(1) in _NUMERIC_ATTRIBUTES]
    places += [(m.start(1), m.end(1), "cn") for m in re.finditer(r"<cn[^>]*>\s*([^<\s]+)\s*</cn>", text)]
    if not places:
        return None
    a, b, what = rng.choice(places)
    bad = rng.choice(BAD_NUMBERS)
    return f"{what} {text[a:b]!r} -> {bad!r}", text[:a] + bad + text[b:]


_TIME = ('<csymbol encoding="text" definitionURL="http://www.sbml.org/sbml/symbols/time">'
         ' t </csymbol>')


def _deep_math(rng: random.Random, depth: int) -> str:
    ops = ("minus", "sin", "exp", "abs", "floor")
    inner = _TIME if rng.random() < 0.5 else "<cn> 1 </cn>"  # time: nothing folds
    if rng.random() < 0.5:
        op = rng.choice(ops)
        return f"<apply><{op}/>" * depth + inner + "</apply>" * depth
    body = inner
    for i in range(depth):  # alternating sums and products, nothing folds
        body = f"<apply><{'plus' if i % 2 else 'times'}/><cn> 2 </cn>{body}</apply>"
    return body


_MATH = re.compile(rf'(<math xmlns="{re.escape(MATHML)}"[^>]*>)(.*?)(</math>)', re.S)


def deep(rng: random.Random, text: str):
    maths = list(_MATH.finditer(text))
    if not maths:
        return None
    m = rng.choice(maths)
    if rng.random() < 0.3:
        n = rng.choice((100, 340, 1000, 3000))
        body = "<apply><plus/>" + "<cn> 1 </cn>" * n + "</apply>"
        detail = f"flat sum of {n}"
    else:
        n = rng.choice((50, 99, 101, 250, 600, 2000, 20000))
        body = _deep_math(rng, n)
        detail = f"nested {n} deep"
    return detail, text[:m.end(1)] + body + text[m.start(3):]


def keyword(rng: random.Random, text: str):
    ids = sorted(set(re.findall(r'\sid="([A-Za-z_]\w*)"', text)))
    if not ids:
        return None
    old, new = rng.choice(ids), rng.choice(KEYWORDS)
    if old == new or re.search(rf'"{re.escape(new)}"|>\s*{re.escape(new)}\s*<', text):
        return None  # the new name is taken already
    pattern = re.compile(rf'(?<=")({re.escape(old)})(?=")|(?<=>)(\s*){re.escape(old)}(\s*)(?=<)')

    def rename(m):
        if m.group(1) is not None:
            return new
        return f"{m.group(2)}{new}{m.group(3)}"
    return f"{old} -> {new}", pattern.sub(rename, text)


_CSYMBOLS = ("rateOf", "delay")


def csymbol(rng: random.Random, text: str):
    maths = list(_MATH.finditer(text))
    if not maths:
        return None
    m = rng.choice(maths)
    name = rng.choice(_CSYMBOLS)
    args = "<cn> 1 </cn>" * rng.randrange(0, 2)  # rateOf needs 1 identifier, delay 2 args
    body = (f'<apply><csymbol encoding="text" definitionURL="http://www.sbml.org/sbml/'
            f'symbols/{name}"> {name} </csymbol>{args}</apply>')
    return f"{name} with {args.count('<cn>')} argument(s)", text[:m.end(1)] + body + text[m.start(3):]


MUTATIONS = {"truncate": truncate, "delete": delete, "swap": swap, "number": number,
             "deep": deep, "keyword": keyword, "csymbol": csymbol}
WEIGHTS = {"truncate": 2, "delete": 3, "swap": 3, "number": 4, "deep": 2, "keyword": 3,
           "csymbol": 1}


def mutants(cases: list[tuple[str, Path]], seed: int, n: int):
    """`n` mutants (fewer only if no mutation applies anywhere), drawn with `seed`."""
    rng = random.Random(seed)
    kinds = list(WEIGHTS)
    weights = [WEIGHTS[k] for k in kinds]
    made = tries = 0
    while made < n and tries < 20 * n:
        tries += 1
        case, path = rng.choice(cases)
        kind = rng.choices(kinds, weights)[0]
        text = path.read_text(encoding="utf-8")
        result = MUTATIONS[kind](rng, text)
        if result is None:
            continue
        detail, mutated = result
        made += 1
        yield Mutant(case, kind, detail, mutated)
