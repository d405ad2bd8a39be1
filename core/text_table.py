"""Reading the user's delimited text tables (parameter tables, data files) the same way.

Each cell as text, in rows; the delimiter sniffed from the header line (a tab where
the header has tabs and no commas, as spreadsheets and PEtab write them, else a
comma); text that is not UTF-8 (a table saved as Latin-1 or UTF-16) or not a table
at all is an OptionError naming the file and the line, never a UnicodeDecodeError.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from .errors import OptionError

DELIMITERS = (",", "\t")


def sniff_delimiter(text: str) -> str:
    """`\\t` if the first non-blank line has tabs and no commas, else `,`."""
    header = next((line for line in text.splitlines() if line.strip()), "")
    return "\t" if "\t" in header and "," not in header else ","


def decode(path: Path, option: str) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise OptionError(option, f"{path}, line {line}: not UTF-8 text (byte "
                                  f"0x{data[exc.start]:02x}); save the table as UTF-8 "
                                  f"CSV") from None


def read_rows(path: str | Path, option: str, delimiter: str | None = None
              ) -> list[list[str]]:
    """The rows of the table at `path` (blank lines dropped), cells as text."""
    path = Path(path)
    if not path.is_file():
        raise OptionError(option, f"{path}: no such file")
    text = decode(path, option)
    delimiter = delimiter or sniff_delimiter(text)
    try:
        rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
    except csv.Error as exc:
        raise OptionError(option, f"{path}: not a delimited text table ({exc})") from None
    return [row for row in rows if row and any(c.strip() for c in row)]


def read_records(path: str | Path, option: str) -> tuple[list[str], list[dict[str, str]]]:
    """(header, one {column: text} per row) of the table at `path`; a short row's
    missing cells are ''."""
    rows = read_rows(path, option)
    if not rows:
        return [], []
    header = [h.strip() for h in rows[0]]
    return header, [dict(zip(header, row + [""] * (len(header) - len(row))))
                    for row in rows[1:]]
