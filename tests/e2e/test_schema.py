"""`moniker schema` is the config's JSON Schema: every example config moniker accepts is valid
under it, a config moniker refuses for a misspelt key is not, and the config reference in the
guide is the one generated from it."""

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
# moniker's own configs: a client's file (claude_desktop_config.json) keeps the client's keys,
# which moniker reads past, and is not a `moniker.yaml`.
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


@pytest.fixture(scope="module")
def schema(moniker_bin: Path) -> dict:
    out = subprocess.run([str(moniker_bin), "schema"], capture_output=True, text=True, check=True)
    schema = json.loads(out.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    return schema


def accepted(moniker_bin: Path, config: Path) -> bool:
    """Whether `moniker check --offline` accepts the file's keys (exit 0, or 1 for a naming
    problem the schema cannot see; 78 is a config error)."""
    run = subprocess.run(
        [str(moniker_bin), "check", "--offline", "-c", str(config)], capture_output=True, text=True
    )
    return run.returncode != 78


@pytest.mark.parametrize("config", EXAMPLES, ids=lambda p: p.name)
def test_the_schema_agrees_with_moniker_on_every_example(schema: dict, moniker_bin: Path, config: Path) -> None:
    document = yaml.safe_load(config.read_text())
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(document))
    if accepted(moniker_bin, config):
        assert not errors, f"{config.name}: moniker accepts it, the schema does not: {[e.message for e in errors]}"


def test_a_misspelt_key_is_refused_by_both(schema: dict, moniker_bin: Path, tmp_path: Path) -> None:
    config = tmp_path / "moniker.yaml"
    config.write_text("servers:\n  fx: { command: echo }\ngateway:\n  call_timout: 5s\n")
    assert not accepted(moniker_bin, config)
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(yaml.safe_load(config.read_text())))
    assert errors, "the schema let a misspelt key through"


def test_the_guides_config_reference_is_generated_from_the_schema() -> None:
    run = subprocess.run(
        [sys.executable, str(REPO / "docs" / "reference.py"), "--check"], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr
