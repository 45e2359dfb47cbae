"""moniker's packages, built from the working tree and installed as a user would install them.

- PyPI: the wheel of packaging/pypi (maturin, `bin` bindings; the dev profile, so that it reuses
  target/debug), installed with pip into a new venv, run with `uvx moniker-mcp` and
  `pipx run moniker-mcp` from a local index (the same commands as from PyPI), installed with
  `uv tool install`.
- npm: packaging/npm/build.sh's two tarballs (this platform's package and the main one, from a
  stripped copy of target/debug/moniker), installed with `npm install -g --prefix` offline from
  the files, run through `TMP/bin/moniker`, `npx`, and a first `tools/list` over stdio through
  the Node shim, whose signals and exit codes are the binary's.

- Search's model, a package of its own on each, installed with moniker-mcp by default: the wheel
  `moniker-mcp-model` (packaging/pypi-model/build.py), a dependency of moniker-mcp's, the npm
  tarball (packaging/npm/model.sh), an optional dependency; each launcher names it in
  $MONIKER_MODEL, and a search in search mode runs it.

The servers of examples/demo.yaml are target/debug/moniker-fixture (run from the repository
root): `cargo build --workspace` first (scripts/test does).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PYPI_DIR = REPO_ROOT / "packaging" / "pypi"
NPM_BUILD = REPO_ROOT / "packaging" / "npm" / "build.sh"
DEMO_CONFIG = "examples/demo.yaml"  # relative: its servers are target/debug/moniker-fixture
DEMO_TOOLS = 70  # what `moniker check` and tools/list find behind examples/demo.yaml
COMMAND_TIMEOUT = 120  # seconds for one install or run (not the wheel's build)
BUILD_TIMEOUT = 540  # seconds for the wheel's build

NODE_PLATFORM = {"linux": "linux", "darwin": "darwin", "win32": "win32"}.get(sys.platform, sys.platform)
NODE_ARCH = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
    os.uname().machine.lower() if hasattr(os, "uname") else "", "unknown"
)
PLATFORM = f"{NODE_PLATFORM}-{NODE_ARCH}"


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def describe(done: subprocess.CompletedProcess[str]) -> str:
    return (
        f"`{' '.join(map(str, done.args))}`: exit {done.returncode}\n"
        f"--- stdout ---\n{done.stdout[-3000:]}\n--- stderr ---\n{done.stderr[-3000:]}"
    )


def run(
    args: list[Any],
    *,
    timeout: float = COMMAND_TIMEOUT,
    check: bool = True,
    cwd: Path = REPO_ROOT,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(
            [str(a) for a in args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
            env={**os.environ, **(env or {})},
        )
    except subprocess.TimeoutExpired as expired:
        pytest.fail(f"`{' '.join(map(str, args))}` did not end within {timeout} s: {expired}", pytrace=False)
    except FileNotFoundError as error:
        pytest.fail(f"cannot run `{args[0]}`: {error}", pytrace=False)
    if check and done.returncode != 0:
        pytest.fail(describe(done), pytrace=False)
    return done


def tool(name: str, hint: str) -> Path:
    """An executable of the test's venv (maturin, uv, pipx), else from PATH."""
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return beside
    found = shutil.which(name)
    if not found:
        pytest.fail(f"`{name}` is missing: {hint}", pytrace=False)
    return Path(found)


def need(name: str) -> Path:
    found = shutil.which(name)
    if not found:
        pytest.fail(f"`{name}` is not on PATH", pytrace=False)
    return Path(found)


def assert_version(done: subprocess.CompletedProcess[str], expected: str) -> None:
    assert done.returncode == 0, describe(done)
    line = done.stdout.strip()
    assert line.startswith(expected), f"expected `{expected}...`, got {line!r}\n{describe(done)}"
    assert re.fullmatch(r"moniker \d+\.\d+\.\d+\S* \(commit [0-9a-f]{7,40}(-dirty)?\)", line), line


def assert_demo_check(done: subprocess.CompletedProcess[str]) -> None:
    """`moniker check -c examples/demo.yaml`: success, and the tool count of its closing line."""
    assert done.returncode == 0, describe(done)
    found = re.search(r"^(\d+) tools and (\d+) prompts from (\d+) of (\d+) servers", done.stdout, re.M)
    assert found, f"no tool count line in `moniker check`\n{describe(done)}"
    assert int(found[1]) == DEMO_TOOLS, f"{found[0]!r}: expected {DEMO_TOOLS} tools\n{describe(done)}"
    assert found[3] == found[4] == "3", f"{found[0]!r}: expected 3 of 3 servers"


# --------------------------------------------------------------------------------------------
# Session fixtures: the version, the binaries, the packages
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def version() -> str:
    """crates/cli's version, as cargo reports it."""
    done = run([need("cargo"), "metadata", "--no-deps", "--format-version", "1", "--offline"])
    packages = {p["name"]: p for p in json.loads(done.stdout)["packages"]}
    assert "moniker-mcp" in packages, f"no package moniker-mcp in the workspace: {sorted(packages)}"
    return packages["moniker-mcp"]["version"]


@pytest.fixture(scope="session")
def expected_version(version: str) -> str:
    """What `moniker --version` starts with: the version, and the commit when this is a git tree."""
    expected = f"moniker {version} (commit "
    if shutil.which("git"):
        head = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        if head.returncode == 0 and head.stdout.strip():
            expected += head.stdout.strip()
    return expected


@pytest.fixture(scope="session")
def debug_binary() -> Path:
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO_ROOT / "target")
    if not target.is_absolute():
        target = REPO_ROOT / target
    for name in ("moniker", "moniker-fixture"):
        path = target / "debug" / name
        if not (path.is_file() and os.access(path, os.X_OK)):
            pytest.fail(f"{path} is missing: run `cargo build --workspace` first", pytrace=False)
    return target / "debug" / "moniker"


@pytest.fixture(scope="session")
def wheel_dir(tmp_path_factory: pytest.TempPathFactory, debug_binary: Path, model_wheels: Path) -> Path:
    """A directory with the wheel maturin built from the working tree and the model's wheel it
    depends on (a local index)."""
    maturin = tool("maturin", "pip install -r tests/packaging/requirements.txt")
    out = tmp_path_factory.mktemp("wheel")
    started = time.monotonic()
    run([maturin, "build", "--profile", "dev", "--out", out], cwd=PYPI_DIR, timeout=BUILD_TIMEOUT)
    print(f"maturin build --profile dev: {time.monotonic() - started:.1f} s")
    wheels = list(out.glob("*.whl"))
    assert len(wheels) == 1, f"maturin made {wheels} in {out}"
    for model in model_wheels.glob("*.whl"):
        shutil.copy2(model, out)
    return out


@pytest.fixture(scope="session")
def wheel(wheel_dir: Path) -> Path:
    return next(wheel_dir.glob("moniker_mcp-*.whl"))


@pytest.fixture(scope="session")
def npm_tarballs(tmp_path_factory: pytest.TempPathFactory, debug_binary: Path, version: str) -> dict[str, Path]:
    """packaging/npm/build.sh's tarballs: {"platform": ..., "main": ...}."""
    need("node")
    need("npm")
    work = tmp_path_factory.mktemp("npm-build")
    binary = work / "moniker"
    shutil.copy2(debug_binary, binary)
    # The debug binary is ~280 MB with its debug info; without it, ~40 MB to pack.
    if shutil.which("strip"):
        run(["strip", binary])
    done = run(["bash", NPM_BUILD, binary, work / "out"])
    paths = [Path(line) for line in done.stdout.split()]
    expected = [work / "out" / f"moniker-mcp-{PLATFORM}-{version}.tgz", work / "out" / f"moniker-mcp-{version}.tgz"]
    assert paths == expected, describe(done)
    for path in paths:
        assert path.is_file(), f"{path} is missing\n{describe(done)}"
    return {"platform": paths[0], "main": paths[1]}


def npm_env(tmp: Path) -> dict[str, str]:
    """npm with a cache of its own (nothing from the user's), quiet."""
    return {
        "npm_config_cache": str(tmp / "npm-cache"),
        "npm_config_update_notifier": "false",
        "npm_config_audit": "false",
        "npm_config_fund": "false",
        "npm_config_loglevel": "error",
    }


@pytest.fixture(scope="session")
def npm_prefix(tmp_path_factory: pytest.TempPathFactory, npm_tarballs: dict[str, Path]) -> Path:
    """A global prefix where both tarballs were installed, offline, from the files."""
    prefix = tmp_path_factory.mktemp("npm-prefix")
    # --offline: this platform's package comes from its tarball (it satisfies the main
    # package's optional dependency on it), and the four other platforms' packages, which
    # npm cannot fetch, are optional: npm leaves them out (as it does on a real install,
    # where their os/cpu do not match).
    run(
        [need("npm"), "install", "--global", "--offline", "--prefix", prefix, npm_tarballs["platform"], npm_tarballs["main"]],
        env=npm_env(prefix),
    )
    return prefix


# --------------------------------------------------------------------------------------------
# PyPI: the wheel
# --------------------------------------------------------------------------------------------


def test_wheel_has_the_binary_the_script_and_the_metadata(wheel: Path, version: str) -> None:
    assert re.fullmatch(rf"moniker_mcp-{re.escape(version)}-py3-none-[\w.]+\.whl", wheel.name), wheel.name
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        data = f"moniker_mcp-{version}.data/scripts"
        assert f"{data}/moniker" in names, sorted(names)
        binary = archive.getinfo(f"{data}/moniker")
        assert (binary.external_attr >> 16) & 0o111, "the binary is not executable in the wheel"
        assert binary.file_size < 100_000_000, f"{binary.file_size} bytes: not stripped?"
        script = archive.read(f"{data}/moniker-mcp").decode()
        assert script.startswith("#!python\n"), script
        assert "moniker_mcp/__init__.py" in names and "moniker_mcp/__main__.py" in names, sorted(names)
        metadata = archive.read(f"moniker_mcp-{version}.dist-info/METADATA").decode()
    fields = {}
    for line in metadata.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(": ")
        fields.setdefault(key, value)
    assert fields.get("Name") == "moniker-mcp", metadata[:800]
    assert fields.get("Version") == version, metadata[:800]
    assert fields.get("License-Expression") == "MIT OR Apache-2.0", metadata[:800]
    assert fields.get("Requires-Python") == ">=3.8", metadata[:800]
    assert "uvx moniker-mcp" in metadata, "the README (long description) is missing"


def test_pip_install_into_a_new_venv(wheel: Path, tmp_path: Path, expected_version: str) -> None:
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv])
    bin_dir = venv / "bin"
    run([bin_dir / "python", "-m", "pip", "install", "--quiet", "--no-index", "--disable-pip-version-check", "--find-links", wheel.parent, wheel])

    assert_version(run([bin_dir / "moniker", "--version"], check=False), expected_version)
    assert_version(run([bin_dir / "moniker-mcp", "--version"], check=False), expected_version)
    assert_version(run([bin_dir / "python", "-m", "moniker_mcp", "--version"], check=False), expected_version)
    assert_demo_check(run([bin_dir / "moniker", "check", "-c", DEMO_CONFIG], check=False))
    assert_demo_check(run([bin_dir / "moniker-mcp", "check", "-c", DEMO_CONFIG], check=False))

    # The script's exit code is the binary's (it execs it).
    direct = run([bin_dir / "moniker", "check", "-c", tmp_path / "missing.yaml"], check=False)
    through = run([bin_dir / "moniker-mcp", "check", "-c", tmp_path / "missing.yaml"], check=False)
    assert direct.returncode != 0, describe(direct)
    assert through.returncode == direct.returncode, describe(through)


@pytest.fixture(scope="session")
def model_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the wheel of search's model, built by packaging/pypi-model/build.py from
    the model scripts/test fetched (`$MONIKER_TEST_MODEL`)."""
    model = os.environ.get("MONIKER_TEST_MODEL")
    if not model:
        assert not os.environ.get("CI"), "CI builds the model's wheel: set MONIKER_TEST_MODEL (scripts/test does)"
        pytest.skip("MONIKER_TEST_MODEL is not set")
    out = tmp_path_factory.mktemp("model-wheel")
    run([sys.executable, REPO_ROOT / "packaging" / "pypi-model" / "build.py", model, out], timeout=300)
    return out


def search_over_stdio(command: list[Any], config: Path, env: dict[str, str], query: str) -> tuple[list[str], str]:
    """`COMMAND serve -c CONFIG --log debug` over stdio: the names `search_tools` finds for
    `query`, and what moniker wrote on stderr."""
    process = subprocess.Popen(
        [str(c) for c in [*command, "serve", "--standalone", "-c", config, "--log", "debug"]],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        env={**{k: v for k, v in os.environ.items() if k != "MONIKER_MODEL"}, **env},
    )
    assert process.stdin and process.stdout and process.stderr
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "packaging-test", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search_tools", "arguments": {"query": query}}},
    ]
    try:
        for message in messages:
            process.stdin.write(json.dumps(message) + "\n")
            process.stdin.flush()
        answer: dict[str, Any] = {}
        deadline = time.monotonic() + COMMAND_TIMEOUT
        while answer.get("id") != 2 and time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            answer = json.loads(line)
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
    stderr = process.stderr.read()
    assert answer.get("id") == 2, f"no answer to search_tools\n{stderr[-3000:]}"
    text = answer["result"]["content"][0]["text"]
    # A compact line each: `- name(parameters) [server]: what it does`.
    return [line[2:].split("(")[0] for line in text.splitlines() if line.startswith("- ")], stderr


def searching_config(tmp_path: Path, debug_binary: Path) -> Path:
    """A config in search mode over one fixture server (ctxsys's 30 tools)."""
    config = tmp_path / "moniker.yaml"
    fixture = debug_binary.parent / "moniker-fixture"
    config.write_text(
        "servers:\n"
        f"  fs:\n    command: {fixture}\n    args: [{REPO_ROOT / 'fixtures' / 'ctxsys.json'}]\n"
        "discovery: search\n"
    )
    return config


def test_the_model_wheel_is_made_the_same_each_time(model_wheels: Path, tmp_path: Path) -> None:
    built = next(model_wheels.glob("*.whl"))
    again = run([sys.executable, REPO_ROOT / "packaging" / "pypi-model" / "build.py", os.environ["MONIKER_TEST_MODEL"], tmp_path], timeout=300)
    assert Path(again.stdout.strip()).read_bytes() == built.read_bytes()
    with zipfile.ZipFile(built) as wheel:
        names = sorted(wheel.namelist())
    expected = ["LICENSE", "__init__.py", "config.json", "model.safetensors", "tokenizer.json"]
    info = ["LICENSE", "METADATA", "RECORD", "WHEEL"]
    assert names == sorted([f"moniker_mcp_model/{n}" for n in expected] + [f"moniker_mcp_model-2.0.0.dist-info/{n}" for n in info])
    # The weights at eight bits: the wheel is a quarter of the model's floats.
    assert built.stat().st_size < 25_000_000, built.stat().st_size


def test_the_wheel_searches_with_its_model_out_of_the_box(wheel: Path, model_wheels: Path, tmp_path: Path, debug_binary: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(archive.read(n).decode() for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
    assert "Requires-Dist: moniker-mcp-model>=2,<3" in metadata, metadata[:1500]
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv])
    bin_dir = venv / "bin"
    pip = [bin_dir / "python", "-m", "pip", "install", "--quiet", "--no-index", "--disable-pip-version-check"]
    # `pip install moniker-mcp`: its model comes with it.
    run([*pip, "--find-links", model_wheels, wheel], timeout=300)
    installed = next((venv / "lib").glob("python3*/site-packages/moniker_mcp_model"))
    config = searching_config(tmp_path, debug_binary)
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    query = "remember this for later"

    # Through the launcher, either way it is run: the extra's model is named, loaded and run.
    found, stderr = search_over_stdio([bin_dir / "moniker-mcp"], config, env, query)
    assert "search model loaded" in stderr and str(installed.resolve()) in stderr, stderr[-3000:]
    assert found, stderr[-3000:]
    again, stderr = search_over_stdio([bin_dir / "python", "-m", "moniker_mcp"], config, env, query)
    assert again == found and "search model loaded" in stderr, stderr[-3000:]
    # What the user names wins over the extra's.
    _, stderr = search_over_stdio([bin_dir / "moniker-mcp"], config, {**env, "MONIKER_MODEL": str(tmp_path / "none")}, query)
    assert "$MONIKER_MODEL" in stderr and str(tmp_path / "none") in stderr and "search model loaded" not in stderr, stderr[-3000:]

    # The binary alone is not the launcher: it names no model (no $MONIKER_MODEL is set), and
    # the table serves.
    _, stderr = search_over_stdio([bin_dir / "moniker"], config, env, query)
    assert "search model loaded" not in stderr, stderr[-3000:]

    # A file of the model that is not the model's: moniker says so and searches with its table.
    (installed / "model.safetensors").write_bytes(b"not a model")
    table, stderr = search_over_stdio([bin_dir / "moniker-mcp"], config, env, query)
    assert "$MONIKER_MODEL" in stderr and "search uses the table moniker ships" in stderr, stderr[-3000:]
    assert table, stderr[-3000:]


def uv_env(tmp: Path) -> dict[str, str]:
    """uv on its own cache and tool dirs, from the local wheel only, never downloading Python."""
    return {
        "UV_CACHE_DIR": str(tmp / "uv-cache"),
        "UV_TOOL_DIR": str(tmp / "uv-tools"),
        "UV_TOOL_BIN_DIR": str(tmp / "uv-bin"),
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_NO_CONFIG": "1",
        "UV_OFFLINE": "1",
        "UV_NO_INDEX": "1",
        "UV_PYTHON": sys.executable,
    }


def test_uvx_runs_the_package_by_its_name(wheel_dir: Path, tmp_path: Path, expected_version: str) -> None:
    uv = tool("uv", "pip install -r tests/packaging/requirements.txt")
    env = uv_env(tmp_path)
    # `uvx moniker-mcp` as from PyPI, with the working tree's wheel as the only index.
    uvx = [uv, "tool", "run", "--find-links", wheel_dir, "moniker-mcp"]
    assert_version(run([*uvx, "--version"], env=env, check=False), expected_version)
    assert_demo_check(run([*uvx, "check", "-c", DEMO_CONFIG], env=env, check=False))
    # `uvx --from moniker-mcp moniker`: the binary itself.
    assert_version(
        run([uv, "tool", "run", "--find-links", wheel_dir, "--from", "moniker-mcp", "moniker", "--version"], env=env, check=False),
        expected_version,
    )
    # `uv tool install moniker-mcp`: both commands on the tool bin dir.
    run([uv, "tool", "install", "--find-links", wheel_dir, "moniker-mcp"], env=env)
    for command in ("moniker", "moniker-mcp"):
        assert_version(run([tmp_path / "uv-bin" / command, "--version"], check=False), expected_version)


def test_pipx_runs_and_installs_the_package(wheel_dir: Path, tmp_path: Path, expected_version: str) -> None:
    pipx = tool("pipx", "pip install -r tests/packaging/requirements.txt")
    env = {
        **uv_env(tmp_path),  # pipx uses uv (installed beside it) as its backend
        "PIPX_HOME": str(tmp_path / "pipx-home"),
        "PIPX_BIN_DIR": str(tmp_path / "pipx-bin"),
        "PIPX_MAN_DIR": str(tmp_path / "pipx-man"),
    }
    pip_args = f"--pip-args=--find-links {wheel_dir}"
    assert_version(run([pipx, "run", pip_args, "moniker-mcp", "--version"], env=env, check=False), expected_version)
    run([pipx, "install", pip_args, "moniker-mcp"], env=env)
    for command in ("moniker", "moniker-mcp"):
        assert_version(run([tmp_path / "pipx-bin" / command, "--version"], check=False), expected_version)


# --------------------------------------------------------------------------------------------
# npm: the main package, its shim, this platform's package
# --------------------------------------------------------------------------------------------


def tarball_files(path: Path) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(path) as archive:
        return {member.name: member for member in archive.getmembers()}


def tarball_manifest(path: Path) -> dict[str, Any]:
    with tarfile.open(path) as archive:
        member = archive.extractfile("package/package.json")
        assert member is not None
        return json.load(member)


def test_npm_packages_are_the_esbuild_pattern(npm_tarballs: dict[str, Path], version: str) -> None:
    platform_os, platform_cpu = PLATFORM.split("-")
    manifest = tarball_manifest(npm_tarballs["platform"])
    assert manifest["name"] == f"moniker-mcp-{PLATFORM}"
    assert manifest["version"] == version
    assert manifest["os"] == [platform_os] and manifest["cpu"] == [platform_cpu], manifest
    assert "bin" not in manifest, "the platform package must not link commands of its own"
    files = tarball_files(npm_tarballs["platform"])
    binary = files.get("package/bin/moniker")
    assert binary is not None, sorted(files)
    assert binary.mode & 0o111 == 0o111, f"package/bin/moniker is {oct(binary.mode)}, not executable"

    main = tarball_manifest(npm_tarballs["main"])
    assert main["name"] == "moniker-mcp" and main["version"] == version, main
    assert main["bin"] == {"moniker": "bin/moniker.js", "moniker-mcp": "bin/moniker.js"}, main["bin"]
    assert main["engines"] == {"node": ">=18"}, main
    expected_platforms = ["darwin-arm64", "darwin-x64", "linux-arm64", "linux-x64"]
    # Each platform's binary at this version, and search's model (installed unless
    # --omit=optional, as the binary is).
    assert main["optionalDependencies"] == {
        **{f"moniker-mcp-{p}": version for p in expected_platforms},
        "moniker-mcp-model": "^2.0.0",
    }, main
    assert sorted(tarball_files(npm_tarballs["main"])) == [
        "package/README.md",
        "package/bin/moniker.js",
        "package/package.json",
    ]


def test_npm_global_install_and_npx(
    npm_prefix: Path, npm_tarballs: dict[str, Path], tmp_path: Path, expected_version: str
) -> None:
    npm = need("npm")
    npx = need("npx")
    installed = sorted(p.name for p in (npm_prefix / "lib" / "node_modules").iterdir())
    assert installed == ["moniker-mcp", f"moniker-mcp-{PLATFORM}"], installed
    for command in ("moniker", "moniker-mcp"):
        assert_version(run([npm_prefix / "bin" / command, "--version"], check=False), expected_version)
    assert_demo_check(run([npm_prefix / "bin" / "moniker", "check", "-c", DEMO_CONFIG], check=False))

    env = npm_env(tmp_path)
    # npx finds a global install (npm_config_prefix sets the global prefix alone; --prefix
    # would set the local one too, where npx finds no global packages).
    assert_version(
        run([npx, "--offline", "moniker-mcp", "--version"], env={**env, "npm_config_prefix": str(npm_prefix)}, cwd=tmp_path, check=False),
        expected_version,
    )
    # `npx --prefix DIR` finds a local install in DIR.
    local = tmp_path / "local"
    run([npm, "install", "--offline", "--prefix", local, npm_tarballs["platform"], npm_tarballs["main"]], env=env)
    assert_version(run([npx, "--offline", "--prefix", local, "moniker-mcp", "--version"], env=env, check=False), expected_version)
    # `npx -y moniker-mcp` as from the registry: installed into npx's own cache, here from the
    # two tarballs (a new cache: nothing there before).
    assert_version(
        run(
            [npx, "--offline", "--yes", "-p", npm_tarballs["platform"], "-p", npm_tarballs["main"], "moniker-mcp", "--version"],
            env={**env, "npm_config_cache": str(tmp_path / "npx-cache")},
            cwd=tmp_path,
            check=False,
        ),
        expected_version,
    )


def test_npm_install_searches_with_its_model_out_of_the_box(
    npm_tarballs: dict[str, Path], tmp_path: Path, debug_binary: Path
) -> None:
    model = os.environ.get("MONIKER_TEST_MODEL")
    if not model:
        assert not os.environ.get("CI"), "CI builds the model's package: set MONIKER_TEST_MODEL (scripts/test does)"
        pytest.skip("MONIKER_TEST_MODEL is not set")
    done = run(["bash", REPO_ROOT / "packaging" / "npm" / "model.sh", model, tmp_path / "out"], timeout=300)
    tarball = Path(done.stdout.strip())
    assert tarball.name == "moniker-mcp-model-2.0.0.tgz" and tarball.is_file(), describe(done)
    assert tarball.stat().st_size < 25_000_000, tarball.stat().st_size
    with tarfile.open(tarball) as packed:
        assert sorted(packed.getnames()) == [
            f"package/{name}" for name in ("LICENSE", "README.md", "config.json", "model.safetensors", "package.json", "tokenizer.json")
        ]
    prefix = tmp_path / "prefix"
    tarballs = [npm_tarballs["platform"], npm_tarballs["main"], tarball]
    run([need("npm"), "install", "--global", "--offline", "--prefix", prefix, *tarballs], env=npm_env(prefix), timeout=300)
    config = searching_config(tmp_path, debug_binary)
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    query = "remember this for later"
    found, stderr = search_over_stdio([prefix / "bin" / "moniker"], config, env, query)
    installed = prefix / "lib" / "node_modules" / "moniker-mcp-model"
    assert "search model loaded" in stderr and str(installed) in stderr, stderr[-3000:]
    assert found, stderr[-3000:]
    # What the user names wins.
    _, stderr = search_over_stdio([prefix / "bin" / "moniker"], config, {**env, "MONIKER_MODEL": str(tmp_path / "none")}, query)
    assert str(tmp_path / "none") in stderr and "search model loaded" not in stderr, stderr[-3000:]


def test_npm_shim_passes_exit_codes_and_says_what_is_missing(npm_prefix: Path, npm_tarballs: dict[str, Path], tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    binary = npm_prefix / "lib" / "node_modules" / f"moniker-mcp-{PLATFORM}" / "bin" / "moniker"
    direct = run([binary, "check", "-c", missing], check=False)
    through = run([npm_prefix / "bin" / "moniker", "check", "-c", missing], check=False)
    assert direct.returncode != 0, describe(direct)
    assert through.returncode == direct.returncode, describe(through)
    assert through.stderr == direct.stderr, describe(through)

    # Without the platform package (--omit=optional): a clear error naming it.
    bare = tmp_path / "bare"
    run(
        [need("npm"), "install", "--global", "--offline", "--omit=optional", "--prefix", bare, npm_tarballs["main"]],
        env=npm_env(bare),
    )
    done = run([bare / "bin" / "moniker", "--version"], check=False)
    assert done.returncode == 1, describe(done)
    assert f"moniker-mcp-{PLATFORM}" in done.stderr and "is not installed" in done.stderr, describe(done)
    assert done.stdout == "", describe(done)


class StdioClient:
    """A line-delimited JSON-RPC client of a process's stdin/stdout, every read bounded."""

    def __init__(self, argv: list[Any], cwd: Path) -> None:
        self.process = subprocess.Popen(
            [str(a) for a in argv],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._stderr_tail = b""

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps(message) + "\n").encode())
        self.process.stdin.flush()

    def receive(self, request_id: int, timeout: float = 30) -> dict[str, Any]:
        """The response to `request_id` (notifications and other messages before it are skipped)."""
        import selectors

        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    pytest.fail(f"no answer to request {request_id} within {timeout} s\n{self.stderr()}", pytrace=False)
                line = self.process.stdout.readline()
                if not line:
                    pytest.fail(f"stdout closed before the answer to {request_id}\n{self.stderr()}", pytrace=False)
                message = json.loads(line)
                if message.get("id") == request_id:
                    return message

    def stderr(self) -> str:
        if self.process.poll() is None:
            return "(still running)"
        assert self.process.stderr is not None
        return self.process.stderr.read().decode(errors="replace")[-3000:]

    def child_pids(self) -> list[int]:
        path = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        return [int(pid) for pid in path.read_text().split()] if path.exists() else []

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def mcp_tools_list(client: StdioClient) -> list[dict[str, Any]]:
    client.send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "moniker-packaging-test", "version": "0"},
            },
        }
    )
    initialized = client.receive(1)
    assert "result" in initialized and "protocolVersion" in initialized["result"], initialized
    client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    client.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    listed = client.receive(2)
    assert "result" in listed, listed
    return listed["result"]["tools"]


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def wait_gone(pids: list[int], timeout: float = 10) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [pid for pid in pids if alive(pid)]
        if not left:
            return []
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads child processes from /proc (Linux)")
def test_npm_shim_speaks_mcp_over_stdio_and_forwards_signals(npm_prefix: Path) -> None:
    shim = npm_prefix / "bin" / "moniker"
    # A gateway of the binary's own (not the shared one): its servers are its children.
    client = StdioClient([shim, "serve", "--standalone", "-c", DEMO_CONFIG], cwd=REPO_ROOT)
    try:
        tools = mcp_tools_list(client)
        names = {t["name"] for t in tools}
        assert len(tools) == DEMO_TOOLS, sorted(names)
        assert {"discover_sub_goals", "get_pr_info", "web_search"} <= names, sorted(names)

        # The shim's one child is the binary; the binary's children are the demo's servers.
        children = client.child_pids()
        assert len(children) == 1, children
        binary_pid = children[0]
        assert Path(f"/proc/{binary_pid}/exe").resolve().name == "moniker"
        servers = [int(p) for p in Path(f"/proc/{binary_pid}/task/{binary_pid}/children").read_text().split()]
        assert len(servers) == 3, servers

        # SIGTERM to the shim reaches the binary, which stops its servers and exits.
        client.process.send_signal(signal.SIGTERM)
        try:
            code = client.process.wait(15)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the shim did not end within 15 s of SIGTERM\n{client.stderr()}", pytrace=False)
        assert wait_gone([binary_pid, *servers]) == [], "the binary or its servers outlived the shim"
        # moniker ends cleanly on SIGTERM (0); had it died of the signal, so would the shim.
        assert code in (0, -signal.SIGTERM), f"exit {code}\n{client.stderr()}"
    finally:
        client.close()

    # A binary killed by a signal: the shim dies of the same signal.
    client = StdioClient([shim, "serve", "--standalone", "-c", DEMO_CONFIG], cwd=REPO_ROOT)
    try:
        mcp_tools_list(client)
        (binary_pid,) = client.child_pids()
        os.kill(binary_pid, signal.SIGKILL)
        try:
            code = client.process.wait(15)
        except subprocess.TimeoutExpired:
            pytest.fail("the shim did not end within 15 s of its binary's death", pytrace=False)
        assert code == -signal.SIGKILL, f"the shim exited {code}, not killed by SIGKILL like its binary"
    finally:
        client.close()
