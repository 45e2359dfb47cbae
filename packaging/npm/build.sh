#!/usr/bin/env bash
# Makes moniker's npm packages for one binary, as esbuild and biome ship theirs:
#   moniker-mcp-<platform>-<version>.tgz  the platform package: bin/moniker, with `os`
#                                         and `cpu` so npm installs it only there;
#   moniker-mcp-<version>.tgz             the main package: bin/moniker.js, which runs the platform
#                                         package's binary, and the four platform packages as
#                                         optionalDependencies at the same version.
# Both get crates/cli's version (from `cargo metadata`) and are packed with `npm pack` into OUTDIR.
#
#   packaging/npm/build.sh BINARY OUTDIR [PLATFORM]
#     BINARY    the moniker binary built for PLATFORM (e.g. target/release/moniker)
#     OUTDIR    where the two .tgz go (made if missing)
#     PLATFORM  linux-x64 | linux-arm64 | darwin-x64 | darwin-arm64
#               (default: this machine's, as node names it: process.platform-process.arch)
# Prints the paths of the two tarballs, the platform package's first.
# Environment: MONIKER_VERSION overrides the version (else cargo metadata's).
set -euo pipefail

die() {
    printf 'packaging/npm/build.sh: %s\n' "$*" >&2
    exit 1
}
(($# == 2 || $# == 3)) || die "usage: packaging/npm/build.sh BINARY OUTDIR [PLATFORM]"
binary=$1
outdir=$2
[[ -f $binary ]] || die "$binary: no such file"
command -v node >/dev/null 2>&1 || die "node is not on PATH"
command -v npm >/dev/null 2>&1 || die "npm is not on PATH"
platform=${3:-$(node -p 'process.platform + "-" + process.arch')}
case $platform in
    linux-x64 | linux-arm64 | darwin-x64 | darwin-arm64) ;;
    *) die "unsupported platform '$platform' (linux-x64, linux-arm64, darwin-x64, darwin-arm64: moniker is Unix-only)" ;;
esac
os=${platform%-*}
cpu=${platform#*-}
exe=moniker

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

version=${MONIKER_VERSION:-}
if [[ -z $version ]]; then
    version=$(cargo metadata --no-deps --format-version 1 --manifest-path "$root/Cargo.toml" </dev/null |
        node -e '
            let text = "";
            process.stdin.on("data", (chunk) => (text += chunk));
            process.stdin.on("end", () => {
                const cli = JSON.parse(text).packages.find((p) => p.name === "moniker-mcp");
                if (!cli) throw new Error("cargo metadata: no package moniker-mcp");
                process.stdout.write(cli.version);
            });
        ')
fi
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+ ]] || die "not a version: '$version'"

mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# The platform package.
platform_dir=$stage/moniker-mcp-$platform
mkdir -p "$platform_dir/bin"
cp "$binary" "$platform_dir/bin/$exe"
chmod 755 "$platform_dir/bin/$exe"
PKG_NAME=moniker-mcp-$platform PKG_VERSION=$version PKG_OS=$os PKG_CPU=$cpu PKG_EXE=$exe node -e '
    const { PKG_NAME, PKG_VERSION, PKG_OS, PKG_CPU, PKG_EXE } = process.env;
    const manifest = {
        name: PKG_NAME,
        version: PKG_VERSION,
        description: `The ${PKG_OS} ${PKG_CPU} binary of moniker, the MCP gateway (installed by moniker-mcp)`,
        homepage: "https://github.com/moniker-mcp/moniker",
        repository: { type: "git", url: "git+https://github.com/moniker-mcp/moniker.git" },
        license: "MIT OR Apache-2.0",
        os: [PKG_OS],
        cpu: [PKG_CPU],
        ...(PKG_OS === "linux" ? { libc: ["glibc"] } : {}),
        files: [`bin/${PKG_EXE}`],
        preferUnplugged: true,
        engines: { node: ">=18" },
    };
    process.stdout.write(JSON.stringify(manifest, null, 2) + "\n");
' >"$platform_dir/package.json"
cat >"$platform_dir/README.md" <<README
# moniker-mcp-$platform

The $os $cpu binary of [moniker](https://github.com/moniker-mcp/moniker), the MCP gateway.
Install [moniker-mcp](https://www.npmjs.com/package/moniker-mcp) instead: it picks the package
for your platform and runs its binary (\`npx -y moniker-mcp\`).
README

# The main package, at the same version, with its platforms' packages at it too (the model's,
# moniker-mcp-model, keeps its own version).
main_dir=$stage/moniker-mcp
mkdir -p "$main_dir/bin"
cp "$here/moniker-mcp/package.json" "$here/moniker-mcp/README.md" "$main_dir/"
cp "$here/moniker-mcp/bin/moniker.js" "$main_dir/bin/"
chmod 755 "$main_dir/bin/moniker.js"
PKG_VERSION=$version PKG_JSON=$main_dir/package.json node -e '
    const fs = require("fs");
    const { PKG_VERSION, PKG_JSON } = process.env;
    const manifest = JSON.parse(fs.readFileSync(PKG_JSON, "utf8"));
    manifest.version = PKG_VERSION;
    for (const dep of Object.keys(manifest.optionalDependencies)) {
        if (dep !== "moniker-mcp-model") manifest.optionalDependencies[dep] = PKG_VERSION;
    }
    fs.writeFileSync(PKG_JSON, JSON.stringify(manifest, null, 2) + "\n");
'

pack() {
    (cd "$1" && npm pack --silent --pack-destination "$outdir" </dev/null >/dev/null) || die "npm pack failed in $1"
}
pack "$platform_dir"
pack "$main_dir"
for tarball in "$outdir/moniker-mcp-$platform-$version.tgz" "$outdir/moniker-mcp-$version.tgz"; do
    [[ -f $tarball ]] || die "npm pack made no $tarball"
    echo "$tarball"
done
