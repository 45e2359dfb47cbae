#!/usr/bin/env bash
# Makes moniker-mcp-model-<version>.tgz, search's model for npm users (as the wheel
# moniker-mcp-model is for PyPI's), which moniker-mcp depends on: all-MiniLM-L6-v2's three files
# (Apache-2.0), each checked by SHA-256, its weights at eight bits a value (23 MB instead of 87,
# checked by SHA-256 too: packaging/model-folder.sh makes the files), in a package of their
# own. The `moniker` shim of moniker-mcp finds it installed beside itself and names its folder
# in $MONIKER_MODEL:
#
#   npm install -g moniker-mcp        (moniker-mcp-model comes with it: an optional dependency,
#                                     installed unless --omit=optional, as the platforms' are)
#
#   packaging/npm/model.sh MODEL_DIR OUTDIR
#     MODEL_DIR  the model's folder, as crates/surface/model/fetch.sh puts it there
#     OUTDIR     where the .tgz goes (made if missing)
# Prints the tarball's path.
set -euo pipefail

die() {
    printf 'packaging/npm/model.sh: %s\n' "$*" >&2
    exit 1
}
(($# == 2)) || die "usage: packaging/npm/model.sh MODEL_DIR OUTDIR"
model=$1
outdir=$2
command -v npm >/dev/null 2>&1 || die "npm is not on PATH"
# The packaging of the model, not moniker's: it changes only when the files do.
version=2.0.0
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
"$(dirname "${BASH_SOURCE[0]}")/../model-folder.sh" "$model" "$stage" || die "the model's files could not be made"
cat >"$stage/package.json" <<JSON
{
  "name": "moniker-mcp-model",
  "version": "$version",
  "description": "all-MiniLM-L6-v2's files for moniker's search (the moniker-mcp shim names them in \$MONIKER_MODEL)",
  "homepage": "https://github.com/moniker-mcp/moniker",
  "repository": { "type": "git", "url": "git+https://github.com/moniker-mcp/moniker.git" },
  "license": "Apache-2.0",
  "files": ["model.safetensors", "config.json", "tokenizer.json", "LICENSE"]
}
JSON
cat >"$stage/README.md" <<'MD'
# moniker-mcp-model

The sentence-embedding model all-MiniLM-L6-v2
([sentence-transformers](https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2),
Apache-2.0) for [moniker](https://github.com/moniker-mcp/moniker)'s search: its weights (at
eight bits a value), config and vocabulary. `moniker-mcp` depends on it (`npm install -g
moniker-mcp` installs both); the `moniker` command names this folder in `$MONIKER_MODEL`, and
moniker runs the model in process when its config searches (`discovery: search`). Nothing is
downloaded when it runs.
MD
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
(cd "$stage" && npm pack --silent --pack-destination "$outdir" >/dev/null)
echo "$outdir/moniker-mcp-model-$version.tgz"
