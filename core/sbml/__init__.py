"""SBML import: read and validate with libsbml, convert, and build the IR."""
