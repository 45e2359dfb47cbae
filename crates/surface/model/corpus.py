"""Write the corpus the shipped table is fitted on (`distill.py --corpus`): a sentence a line.

- The docstrings of Python's standard library (modules, classes and functions; its tests
  left out), cut into sentences of 4 to 40 words that are mostly words (no code, no
  doctests). The shipped table's were Python 3.11.7's.
- With `--debian`: the one-line description of every package in the Debian archive this
  machine's apt knows (`apt-cache dumpavail`; the shipped table's: bookworm, November 2026).

Both describe what software does in plain words, as tools' descriptions do; neither holds a
request of moniker's benchmarks or a tool of their inventories.

    python corpus.py OUT [--debian]
"""

import argparse
import ast
import re
import subprocess
import sysconfig
from pathlib import Path

LEFT_OUT = {"test", "tests", "site-packages", "idle_test", "lib2to3"}


def docstring_sentences() -> list[str]:
    root = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for path in sorted(root.rglob("*.py")):
        if LEFT_OUT & set(path.relative_to(root).parts):
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for paragraph in re.split(r"\n\s*\n", ast.get_docstring(node) or ""):
                text = " ".join(paragraph.split())
                for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z])", text):
                    words = sum(c.isalpha() or c == " " for c in sentence)
                    if 4 <= len(sentence.split()) <= 40 and words >= 0.85 * len(sentence) and ">>>" not in sentence:
                        out.append(sentence)
    return out


def debian_descriptions() -> list[str]:
    dump = subprocess.run(["apt-cache", "dumpavail"], check=True, capture_output=True, text=True).stdout
    return sorted({line.removeprefix("Description: ") for line in dump.splitlines() if line.startswith("Description: ")})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--debian", action="store_true")
    args = parser.parse_args()
    sentences = docstring_sentences() + (debian_descriptions() if args.debian else [])
    unique = list(dict.fromkeys(sentences))
    args.out.write_text("\n".join(unique) + "\n", encoding="utf-8")
    print(f"{args.out}: {len(unique)} sentences")


if __name__ == "__main__":
    main()
