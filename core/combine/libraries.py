"""libcombine and libsedml, imported only when an archive is run (the `combine` extra),
so that `import sbmlgpu` stays fast and a missing package is a typed error.

libsedml's extension module carries its own copy of libsbml's SWIG types (ASTNode,
XMLNode, XMLNamespaces) and SWIG shares one type table per process: whichever module
loads LAST wraps every object of those types in its own Python classes. Loaded after
libsbml, libsedml's classes take over the ASTNodes that libsbml returns (their
getType() then answers a pointer, not a number) and the SBML importer breaks.
Loaded first, libsbml's classes stay in charge. So `preload()` runs before libsbml
is first imported (core/sbml/__init__.py), and our code never calls a method on a
shared-type object that libsedml returns (it only hands them back to libsedml).
"""

from __future__ import annotations

import sys

from ..errors import OptionError

EXTRA = "pip install 'sbmlgpu[combine]'"


def preload() -> None:
    """Import libsedml now if it is installed and libsbml is not loaded yet."""
    if "libsedml" in sys.modules or "libsbml" in sys.modules:
        return
    try:
        import libsedml  # noqa: F401
    except ImportError:
        pass


def libsedml():
    if "libsedml" not in sys.modules and "libsbml" in sys.modules:
        raise OptionError("combine", "libsbml was imported before libsedml in this Python "
                                     "process, and libsedml loaded after it breaks libsbml's "
                                     "math objects (shared SWIG types); import sbmlgpu (or "
                                     "libsedml) before libsbml, or run `sbmlgpu omex` in a "
                                     "new process")
    try:
        import libsedml
    except ImportError:
        raise OptionError("combine", f"SED-ML needs python-libsedml: {EXTRA}") from None
    return libsedml


def libcombine():
    try:
        import libcombine
    except ImportError:
        raise OptionError("combine", f"COMBINE archives need python-libcombine: {EXTRA}") \
            from None
    return libcombine
