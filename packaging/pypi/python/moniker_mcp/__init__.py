"""moniker, the MCP gateway, as a Python package: the `moniker` binary and a way to find it."""

from __future__ import annotations

import os
import sys
import sysconfig

__all__ = ["find_moniker_bin"]


def find_moniker_bin() -> str:
    """The path of the `moniker` binary this package installed.

    The wheel puts it in the scripts directory of the scheme it was installed with (a venv's
    `bin`, the user scheme's, or `<target>/bin` with `pip install --target`).
    """
    exe = "moniker" + (sysconfig.get_config_var("EXE") or "")
    candidates = []
    # The directory of the script that started us (`moniker-mcp` is installed beside `moniker`).
    if sys.argv and sys.argv[0]:
        candidates.append(os.path.dirname(os.path.abspath(sys.argv[0])))
    candidates.append(sysconfig.get_path("scripts"))
    user_scheme = {"nt": "nt_user", "posix": "posix_user"}.get(os.name)
    if sys.platform == "darwin" and getattr(sys, "_framework", None):
        user_scheme = "osx_framework_user"
    if user_scheme:
        try:
            candidates.append(sysconfig.get_path("scripts", scheme=user_scheme))
        except KeyError:
            pass
    # `pip install --target DIR`: DIR/moniker_mcp/ and DIR/bin/.
    candidates.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bin"))
    for directory in candidates:
        path = os.path.join(directory, exe)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError(
        f"the moniker binary ({exe}) is not where moniker-mcp installed it; looked in: "
        + ", ".join(dict.fromkeys(candidates))
    )
