"""Search's model, from `moniker-mcp-model`, which `pip install moniker-mcp` installs with it.

`moniker-mcp-model` (packaging/pypi-model) holds all-MiniLM-L6-v2's three files, its weights at
eight bits. The launcher names their folder in `$MONIKER_MODEL`, and moniker runs the model
when the config searches and names no other (`discovery.model`). Nothing is downloaded when
moniker runs.
"""

from __future__ import annotations

import importlib.util
import os
import sys

PACKAGE = "moniker_mcp_model"
FILES = ("model.safetensors", "config.json", "tokenizer.json")


def model_dir() -> str | None:
    """The folder of moniker-mcp-model's model, or None when it is not installed."""
    spec = importlib.util.find_spec(PACKAGE)
    for directory in (spec.submodule_search_locations or []) if spec else []:
        missing = [name for name in FILES if not os.path.isfile(os.path.join(directory, name))]
        if not missing:
            return os.path.abspath(directory)
        sys.stderr.write(
            f"moniker-mcp: {PACKAGE} in {directory} lacks {', '.join(missing)}: "
            'reinstall it (pip install --force-reinstall moniker-mcp-model)\n'
        )
    return None


def export() -> None:
    """Names moniker-mcp-model's model in `$MONIKER_MODEL`, unless something names one already."""
    if not os.environ.get("MONIKER_MODEL"):
        found = model_dir()
        if found:
            os.environ["MONIKER_MODEL"] = found
