"""Search's model from the `model` extra (`pip install "moniker-mcp[model]"`).

The extra installs `moniker-mcp-model` (packaging/pypi-model): all-MiniLM-L6-v2's three files,
too big for this wheel. The launcher names their folder in `$MONIKER_MODEL`, and moniker runs
the model when the config searches and names no other (`discovery.model`). Nothing is
downloaded when moniker runs.
"""

from __future__ import annotations

import importlib.util
import os
import sys

PACKAGE = "moniker_mcp_model"
FILES = ("model.safetensors", "config.json", "tokenizer.json")


def model_dir() -> str | None:
    """The folder of the extra's model, or None when the extra is not installed."""
    spec = importlib.util.find_spec(PACKAGE)
    for directory in (spec.submodule_search_locations or []) if spec else []:
        missing = [name for name in FILES if not os.path.isfile(os.path.join(directory, name))]
        if not missing:
            return os.path.abspath(directory)
        sys.stderr.write(
            f"moniker-mcp: {PACKAGE} in {directory} lacks {', '.join(missing)}: "
            'reinstall it (pip install --force-reinstall "moniker-mcp[model]")\n'
        )
    return None


def export() -> None:
    """Names the extra's model in `$MONIKER_MODEL`, unless something names one already."""
    if not os.environ.get("MONIKER_MODEL"):
        found = model_dir()
        if found:
            os.environ["MONIKER_MODEL"] = found
