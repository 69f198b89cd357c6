"""Reading the suite's data files (tolerances, expected failures): TOML, or JSON by suffix."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib


class DataFileError(ValueError):
    """A data file could not be read, or its content does not follow the documented schema."""


def load_data_file(path: str | Path) -> dict[str, Any]:
    """Parse ``path`` as JSON when it ends in ``.json``, as TOML otherwise."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise DataFileError(f"{p}: cannot read the file ({e.strerror or e})") from None
    try:
        data = json.loads(text) if p.suffix.lower() == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as e:
        raise DataFileError(f"{p}: not valid {'JSON' if p.suffix.lower() == '.json' else 'TOML'}: {e}") from None
    if not isinstance(data, dict):
        raise DataFileError(f"{p}: the top level must be a table (a JSON object)")
    return data
