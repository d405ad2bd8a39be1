"""Checks on the raw input that run BEFORE libsbml reads it.

libsbml is C++: some inputs crash the whole process (a segmentation fault, not an
exception) or make it read forever, so they must be refused before it sees them:

- a MODEL path that is not a regular file (a named pipe blocks, /dev/zero never
  ends) or is larger than MAX_MODEL_BYTES;
- XML nested deeper than MAX_XML_DEPTH (libsbml's recursive reader overflows the
  stack at ~20,000 levels), and MathML nested deeper than MAX_MATH_DEPTH (every
  later step, sympy included, walks expressions recursively; no real model comes
  near: the deepest of the SBML Test Suite is 6, of the shared real models 12);
- a rateOf csymbol applied to nothing (libsbml's consistency check dereferences
  the missing argument and crashes);
- an <apply> of more than MAX_MATH_OPERANDS operands (libsbml's inlining of
  function definitions slows down faster than quadratically with it).

The scan is expat's streaming parser (C, not recursive, no DTD or entity
expansion), so it costs a fraction of libsbml's own read. A document that is not
well-formed XML stops the scan and is left to libsbml, whose messages are better.
"""

from __future__ import annotations

import stat
import xml.parsers.expat
from pathlib import Path

from ..errors import SBMLImportError, SBMLProblem

MAX_MODEL_BYTES = 1 << 30  # 1 GiB: far above any published model (the largest are ~100 MB)
MAX_XML_DEPTH = 1000
MAX_MATH_DEPTH = 200
#: operands of one MathML <apply>: libsbml's function-definition inlining takes time
#: growing faster than the square of this (1,000: ~6 s; 3,000: minutes)
MAX_MATH_OPERANDS = 1000

_MATHML = "http://www.w3.org/1998/Math/MathML"
_RATE_OF = "http://www.sbml.org/sbml/symbols/rateOf"


def check_model_path(path: Path) -> None:
    """SBMLImportError unless `path` is a regular file of a sane size."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise SBMLImportError(str(path), "no such file") from None
    except OSError as exc:
        raise SBMLImportError(str(path), f"cannot read: {exc.strerror}") from None
    except ValueError as exc:  # a NUL byte in the name
        raise SBMLImportError(repr(str(path)), f"not a usable path: {exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise SBMLImportError(str(path), "is a directory, not an SBML file")
    if not stat.S_ISREG(info.st_mode):
        kind = ("a named pipe" if stat.S_ISFIFO(info.st_mode) else
                "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) else
                "a socket" if stat.S_ISSOCK(info.st_mode) else "not a regular file")
        raise SBMLImportError(str(path), f"is {kind}, not an SBML file: give the path of a "
                                         f"regular file (write a stream to a file first)")
    if info.st_size > MAX_MODEL_BYTES:
        raise SBMLImportError(str(path), f"is {info.st_size / 2**20:.0f} MiB; sbmlgpu reads "
                                         f"SBML files of at most {MAX_MODEL_BYTES // 2**20} MiB")


class _Scan:
    """Expat callbacks: element depth, MathML depth, and applies of rateOf."""

    def __init__(self, parser, name: str):
        self.parser = parser
        self.name = name
        self.depth = 0
        self.math_at: int | None = None  # element depth of the open <math>
        # per open <apply>: [its element depth, children seen, first child is rateOf]
        self.applies: list[list] = []

    def refuse(self, summary: str, message: str):
        line, column = self.parser.CurrentLineNumber, self.parser.CurrentColumnNumber + 1
        raise SBMLImportError(self.name, summary, (SBMLProblem("error", message, line, column),))

    def start(self, tag: str, attrs: dict) -> None:
        self.depth += 1
        local = tag.rsplit(" ", 1)[-1]
        if self.depth > MAX_XML_DEPTH:
            self.refuse(f"XML nested deeper than {MAX_XML_DEPTH} elements",
                        f"<{local}> is at depth {self.depth}; sbmlgpu refuses documents nested "
                        f"deeper than {MAX_XML_DEPTH} (libsbml cannot read them safely)")
        in_math = self.math_at is not None
        if not in_math and local == "math" and tag.startswith(_MATHML):
            self.math_at = self.depth
            return
        if not in_math:
            return
        if self.depth - self.math_at > MAX_MATH_DEPTH:
            self.refuse(f"MathML nested deeper than {MAX_MATH_DEPTH} levels",
                        f"<{local}> is {self.depth - self.math_at} levels inside its <math>; "
                        f"sbmlgpu accepts math nested at most {MAX_MATH_DEPTH} deep (write "
                        f"long expressions as sums or products of terms, or split them with "
                        f"assignment rules)")
        if self.applies and self.applies[-1][0] == self.depth - 1:
            parent = self.applies[-1]
            parent[1] += 1
            if parent[1] > MAX_MATH_OPERANDS + 1:  # + 1: the operator is a child too
                self.refuse(f"a MathML <apply> with more than {MAX_MATH_OPERANDS} operands",
                            f"an <apply> has more than {MAX_MATH_OPERANDS} operands; split "
                            f"the expression into partial sums with assignment rules")
            if parent[1] == 1 and local == "csymbol" and \
                    attrs.get("definitionURL", "").strip() == _RATE_OF:
                parent[2] = True
        if local == "apply":
            self.applies.append([self.depth, 0, False])

    def end(self, tag: str) -> None:
        if self.applies and self.applies[-1][0] == self.depth:
            _, children, rate_of = self.applies.pop()
            if rate_of and children < 2:
                self.refuse("rateOf without an argument",
                            "the rateOf csymbol is applied to nothing; SBML requires one "
                            "identifier: rateOf(x)")
        if self.math_at == self.depth:
            self.math_at = None
        self.depth -= 1


def _parser(name: str):
    parser = xml.parsers.expat.ParserCreate(namespace_separator=" ")
    scan = _Scan(parser, name)
    parser.StartElementHandler = scan.start
    parser.EndElementHandler = scan.end
    return parser


def scan_text(text: str | bytes, name: str) -> None:
    """SBMLImportError (naming the line) for the inputs above that libsbml cannot
    take; anything else, well-formed or not, is left to libsbml."""
    try:
        _parser(name).Parse(text, True)
    except xml.parsers.expat.ExpatError:
        pass  # not well-formed: libsbml reports it, with its own messages
    except LookupError as exc:  # refused unscanned: the scan is what makes libsbml safe
        raise SBMLImportError(name, f"the XML declaration names an unknown encoding ({exc})") from None


def scan_file(path: Path, name: str) -> None:
    """`scan_text` of a file, streamed (the file is never held in memory whole)."""
    try:
        with open(path, "rb") as f:
            _parser(name).ParseFile(f)
    except xml.parsers.expat.ExpatError:
        pass
    except LookupError as exc:
        raise SBMLImportError(name, f"the XML declaration names an unknown encoding ({exc})") from None
    except OSError as exc:
        raise SBMLImportError(name, f"cannot read: {exc.strerror}") from None
