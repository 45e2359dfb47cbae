#!/usr/bin/env bash
# Puts search's default model, as moniker's packages carry it, in OUTDIR: all-MiniLM-L6-v2's
# config and vocabulary, its weights at eight bits a value (crates/model's `moniker-eight-bit`,
# run with cargo from this checkout: 23 MB instead of 87), each checked by SHA-256, and its
# licence (Apache-2.0). The npm package of the model (packaging/npm/model.sh) and the release
# archives (a `model` folder beside the binary, where moniker looks for one: dist-workspace.toml
# includes it, .github/build-setup.yml makes it) are made from it.
#
#   packaging/model-folder.sh MODEL_DIR OUTDIR
#     MODEL_DIR  the model's folder as crates/surface/model/fetch.sh puts it there (fetched
#                there first when it is missing or not the model)
#     OUTDIR     made if missing; its four files are replaced
set -euo pipefail

die() {
    printf 'packaging/model-folder.sh: %s\n' "$*" >&2
    exit 1
}
(($# == 2)) || die "usage: packaging/model-folder.sh MODEL_DIR OUTDIR"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
model=$1
outdir=$2
sums=$root/crates/surface/model/all-MiniLM-L6-v2.sha256
if ! (cd "$model" 2>/dev/null && sha256sum -c --quiet --status) <"$sums"; then
    "$root/crates/surface/model/fetch.sh" "$model" || die "cannot fetch the model into $model"
fi
(cd "$model" && sha256sum -c --quiet) <"$sums" || die "$model is not all-MiniLM-L6-v2 as fetch.sh checks it"
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
cp "$model/config.json" "$model/tokenizer.json" "$outdir/"
(cd "$root" && cargo run --quiet -p moniker-model --bin moniker-eight-bit -- \
    "$(cd "$model" && pwd)/model.safetensors" "$outdir/model.safetensors" </dev/null) ||
    die "the weights could not be put at eight bits"
(cd "$outdir" && sha256sum -c --quiet) <"${sums%.sha256}.eight-bit.sha256" ||
    die "the weights at eight bits are not what all-MiniLM-L6-v2.eight-bit.sha256 says"
# The model's licence, whose text goes with every copy of it.
cp "$(dirname "$sums")/LICENSE-Apache-2.0" "$outdir/LICENSE"
