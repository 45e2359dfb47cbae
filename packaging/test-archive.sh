#!/usr/bin/env bash
# Builds this machine's release archive with dist (cargo-dist), as the GitHub release workflow
# (.github/workflows/release.yml) builds each target's, and checks it as a user would: its
# .sha256, unpacked in a fresh directory, search's model beside the binary (made first by
# packaging/model-folder.sh, from $MONIKER_TEST_MODEL when set), `moniker --version` (and, when
# target/debug/moniker-fixture is there, `moniker check` on the demo config and with search,
# which must load the model beside the binary). Run by hand: it is not part of
# scripts/test, since dist's install (~6 min) and its release build (LTO, ~6 min on 2 cores)
# would cost more than the whole packaging step there.
#
#   packaging/test-archive.sh            the `dist` profile (release + thin LTO), as released
#   QUICK=1 packaging/test-archive.sh    an unoptimised `dist` profile (checks the packaging, fast)
#
# Installs cargo-dist (the version dist-workspace.toml names) into <repo>/.tools when missing.
# Prints the archive's path and size. Exits non-zero on the first failed check.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

die() {
    printf 'packaging/test-archive.sh: %s\n' "$*" >&2
    exit 1
}

want=$(sed -n 's/^cargo-dist-version = "\(.*\)"/\1/p' dist-workspace.toml)
[[ -n $want ]] || die "no cargo-dist-version in dist-workspace.toml"
dist=.tools/bin/dist
if [[ $("$dist" --version 2>/dev/null) != "cargo-dist $want" ]]; then
    echo "== installing cargo-dist $want into .tools (cargo install, a few minutes) =="
    cargo install cargo-dist --version "$want" --locked --root .tools </dev/null
fi

if [[ -n ${QUICK:-} ]]; then
    # The same archive from an unoptimised build: checks what is packed, not the release binary.
    export CARGO_PROFILE_DIST_OPT_LEVEL=0 CARGO_PROFILE_DIST_LTO=false CARGO_PROFILE_DIST_CODEGEN_UNITS=256 \
        CARGO_PROFILE_DIST_INCREMENTAL=true CARGO_PROFILE_DIST_DEBUG=false
fi

target=$(rustc -vV | sed -n 's/^host: //p')
version=$(cargo metadata --no-deps --format-version 1 </dev/null |
    python3 -c 'import json, sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "moniker-mcp"))')
target_dir=${CARGO_TARGET_DIR:-target}
distrib=$target_dir/distrib
name=moniker-mcp-$target
archive=$distrib/$name.tar.xz

echo "== search's model for the archive (packaging/model-folder.sh) =="
packaging/model-folder.sh "${MONIKER_TEST_MODEL:-target/archive-model/fetched}" target/archive-model/model

echo "== dist build --artifacts=local --target $target =="
rm -f "$archive" "$archive.sha256"
start=$SECONDS
"$dist" build --artifacts=local --target "$target" </dev/null
echo "built in $((SECONDS - start))s"

[[ -f $archive ]] || die "$archive is missing"
[[ -f $archive.sha256 ]] || die "$archive.sha256 is missing"
echo "== checks =="
(cd "$distrib" && sha256sum --check --strict "$name.tar.xz.sha256") || die "the archive's checksum does not match"

unpacked=$(mktemp -d)
trap 'rm -rf "$unpacked"' EXIT
tar -xJf "$archive" -C "$unpacked"
binary=$unpacked/$name/moniker
[[ -x $binary ]] || die "the archive has no $name/moniker: $(tar -tJf "$archive" | tr '\n' ' ')"
[[ -f $unpacked/$name/README.md ]] || die "the archive has no $name/README.md"
for file in model.safetensors config.json tokenizer.json LICENSE; do
    [[ -f $unpacked/$name/model/$file ]] || die "the archive has no $name/model/$file"
done
(cd "$unpacked/$name/model" && sha256sum -c --quiet) <crates/surface/model/all-MiniLM-L6-v2.eight-bit.sha256 ||
    die "the archive's model is not the one at eight bits"
got=$("$binary" --version)
[[ $got =~ ^moniker\ $version\ \(commit\ [0-9a-f]{7,40}(-dirty)?\)$ ]] || die "--version: '$got', expected 'moniker $version (commit ...)'"
echo "$got"
if [[ -x $target_dir/debug/moniker-fixture ]]; then
    # A config that searches: the model beside the binary is the one moniker runs.
    searching=$(mktemp)
    printf 'discovery: { mode: search }\nservers:\n  one: { command: %s }\n' "$PWD/$target_dir/debug/moniker-fixture" >"$searching"
    said=$("$binary" check -c "$searching" --log debug 2>&1) || die "moniker check with search failed: $said"
    [[ $said == *"search model loaded"* && $said == *"$unpacked/$name/model"* ]] ||
        die "the archive's moniker did not load the model beside it: $said"
    rm -f "$searching"
    echo "search loads the model beside the binary"
    out=$("$binary" check -c examples/demo.yaml) || die "moniker check -c examples/demo.yaml failed: $out"
    [[ $out == *"70 tools and 2 prompts from 3 of 3 servers"* ]] || die "moniker check: $out"
    echo "$out"
fi
echo "OK: $archive ($(stat -c %s "$archive") bytes), sha256 $(cut -d' ' -f1 "$archive.sha256")"
