"""Read an SBML document with libsbml and turn every problem into SBMLImportError.

Accepts a path, an SBML string or a libsbml.SBMLDocument. Validation runs
libsbml's consistency checks except the units and modelling-practice ones (many
published models have unit warnings; they change no number). Line numbers in
messages refer to the file as the user wrote it.
"""

from __future__ import annotations

import os
from pathlib import Path

import libsbml

from ..errors import SBMLImportError, SBMLProblem
from .guard import check_model_path, scan_file, scan_text

_SEVERITY = {
    libsbml.LIBSBML_SEV_INFO: "info",
    libsbml.LIBSBML_SEV_WARNING: "warning",
    libsbml.LIBSBML_SEV_ERROR: "error",
    libsbml.LIBSBML_SEV_FATAL: "fatal",
}


def problems(log_owner, *, min_severity=libsbml.LIBSBML_SEV_ERROR) -> tuple[SBMLProblem, ...]:
    """libsbml's errors (of a document or an error log) as SBMLProblems."""
    log = log_owner if isinstance(log_owner, libsbml.SBMLErrorLog) else log_owner.getErrorLog()
    out = []
    for i in range(log.getNumErrors()):
        e = log.getError(i)
        if e.getSeverity() >= min_severity:
            out.append(SBMLProblem(
                severity=_SEVERITY.get(e.getSeverity(), "error"),
                message=" ".join(e.getMessage().split()),
                line=e.getLine(), column=e.getColumn(), code=e.getErrorId()))
    return tuple(out)


def _looks_like_xml(text: str) -> bool:
    return text.lstrip().startswith("<")


def _head(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(4096)


def read_document(source) -> tuple[libsbml.SBMLDocument, str, str | None]:
    """(document, a name for messages, the directory external files are relative to)."""
    if isinstance(source, libsbml.SBMLDocument):
        return source, "<SBMLDocument>", None
    if isinstance(source, bytes):
        source = source.decode("utf-8", errors="replace")
    if isinstance(source, os.PathLike) or (isinstance(source, str) and not _looks_like_xml(source)):
        path = Path(source)
        check_model_path(path)  # before anything reads it: a pipe or a device never ends
        try:
            head = _head(path)
        except OSError as exc:
            raise SBMLImportError(str(path), f"cannot read: {exc.strerror}") from None
        if not head.strip():
            raise SBMLImportError(str(path), "the file is empty")
        scan_file(path, str(path))
        reader = libsbml.SBMLReader()
        doc = reader.readSBMLFromFile(str(path))
        name, base = str(path), str(path.resolve().parent)
    elif isinstance(source, str):
        if not source.strip():
            raise SBMLImportError("<string>", "the SBML string is empty")
        scan_text(source, "<string>")
        doc = libsbml.readSBMLFromString(source)
        name, base = "<string>", None
    else:
        raise SBMLImportError(repr(type(source)), "expected a path, an SBML string or a libsbml.SBMLDocument")
    if doc is None:  # libsbml returns a document even for garbage; be safe
        raise SBMLImportError(name, "libsbml could not read it")
    return doc, name, base


def check_read(doc: libsbml.SBMLDocument, name: str) -> None:
    """Errors found while parsing: not XML, not SBML, schema violations."""
    found = problems(doc)
    if found:
        xml = any(p.code < 10000 for p in found)  # libsbml's XML-layer error codes
        summary = "not well-formed XML (or XML libsbml cannot accept)" if xml else "not valid SBML"
        raise SBMLImportError(name, summary, found)
    if doc.getModel() is None:
        raise SBMLImportError(name, "the document has no <model>")


# Errors about unit *declarations* (a units attribute naming an undefined unit,
# malformed unit definitions): units change no number we compute, and the SBML
# Test Suite has valid-by-intent cases with them, so they are kept as warnings.
UNIT_DECLARATION_ERRORS = {10313} | set(range(20401, 20422))


def check_consistency(doc: libsbml.SBMLDocument, name: str) -> tuple[SBMLProblem, ...]:
    """libsbml's consistency checks; errors raise, warnings are returned."""
    doc.setConsistencyChecks(libsbml.LIBSBML_CAT_UNITS_CONSISTENCY, False)
    doc.setConsistencyChecks(libsbml.LIBSBML_CAT_MODELING_PRACTICE, False)
    doc.checkConsistency()
    found = problems(doc, min_severity=libsbml.LIBSBML_SEV_WARNING)
    errors = tuple(p for p in found if p.severity in ("error", "fatal")
                   and p.code not in UNIT_DECLARATION_ERRORS)
    if errors:
        raise SBMLImportError(name, "the model is not consistent SBML", errors)
    return tuple(p for p in found if p not in errors)
