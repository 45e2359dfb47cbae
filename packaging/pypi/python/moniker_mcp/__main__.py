"""`moniker-mcp ARGS` and `python -m moniker_mcp ARGS`: run the `moniker` binary with ARGS."""

from __future__ import annotations

import os
import sys

from moniker_mcp import find_moniker_bin, model


def main() -> None:
    try:
        moniker = find_moniker_bin()
    except FileNotFoundError as error:
        sys.stderr.write(f"moniker-mcp: {error}\n")
        sys.exit(1)
    model.export()
    args = [moniker, *sys.argv[1:]]
    if sys.platform == "win32":
        # No exec on Windows: run it and pass its exit code on (stdio is inherited).
        import subprocess

        try:
            sys.exit(subprocess.call(args))
        except KeyboardInterrupt:
            sys.exit(130)
    # Elsewhere the binary replaces this process: same pid, stdio and signals as the client gave.
    os.execv(moniker, args)


if __name__ == "__main__":
    main()
