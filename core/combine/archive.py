"""Opening a COMBINE archive: its manifest, its SED-ML files (the master first), and the
extracted files that model sources resolve against."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path

from ..errors import OptionError
from .libraries import libcombine

SEDML_FORMAT = "sed-ml"  # identifiers.org/combine.specifications/sed-ml[.level-1.version-N]


@dataclass(frozen=True)
class Archive:
    path: Path
    folder: Path  # where its files were extracted
    sedml: tuple[str, ...]  # SED-ML locations inside the archive, master first


def location(text: str) -> str:
    """A manifest location as a path inside the archive ('./a/b.sedml' -> 'a/b.sedml')."""
    return posixpath.normpath(text.strip().lstrip("/")).removeprefix("./")


def inside(folder: Path, relative: str, what: str) -> Path:
    """`relative` under `folder`, refused if it leads out of the archive."""
    path = (folder / relative).resolve()
    if folder.resolve() not in (path, *path.parents):
        raise OptionError("input", f"{what}: {relative!r} points outside the archive")
    return path


def open_archive(path: str | Path, folder: str | Path) -> Archive:
    """Extract `path` into `folder` and list its SED-ML files; OptionError naming the
    archive when it is not a readable COMBINE archive or holds no SED-ML."""
    path, folder = Path(path), Path(folder)
    if not path.is_file():
        raise OptionError("input", f"{path}: no such file")
    lc = libcombine()
    archive = lc.CombineArchive()
    try:
        if not archive.initializeFromArchive(str(path)):
            raise OptionError("input", f"{path}: not a COMBINE archive (not a zip file with "
                                       f"a manifest.xml that libcombine can read)")
        sedml = _sedml_locations(archive, path)
        folder.mkdir(parents=True, exist_ok=True)
        if not archive.extractTo(str(folder)):
            raise OptionError("input", f"{path}: its files could not be extracted")
    finally:
        archive.cleanUp()
    for loc in sedml:
        if not inside(folder, loc, str(path)).is_file():
            raise OptionError("input", f"{path}: the manifest lists {loc!r}, which the "
                                       f"archive does not contain")
    return Archive(path, folder, tuple(sedml))


def _sedml_locations(archive, path: Path) -> list[str]:
    manifest = archive.getManifest()
    entries = [manifest.getContent(i) for i in range(manifest.getNumContents())] \
        if manifest is not None else []
    sedml = [e for e in entries if SEDML_FORMAT in e.getFormat().lower()
             or e.getLocation().lower().endswith(".sedml")]
    if not sedml:
        raise OptionError("input", f"{path}: the manifest lists no SED-ML file (format "
                                   f"http://identifiers.org/combine.specifications/sed-ml)")
    # the master file first (the manifest's order otherwise), as BioSimulators runs them
    sedml.sort(key=lambda e: not (e.isSetMaster() and e.getMaster()))
    return [location(e.getLocation()) for e in sedml]
