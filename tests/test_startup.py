"""What a one-file run pays for: settings without pydantic, validated tables kept, imports, exit.

Settings are plain dataclasses and pydantic only validates a table; a
validated table is kept in the cache folder. The one-file run pre-commit
makes must not import pydantic when there is no table to validate, nor when
an earlier run validated the same table; those checks need a fresh
interpreter, so they run ``layoutcheck check`` in a subprocess and look at
``sys.modules``. No test here times anything.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from lint_test_rules import DEFAULT_TEST_RULES

import layoutcheck.config
from layoutcheck.config import Config, validate_table
from layoutcheck.configfile import TABLE, resolve_config
from layoutcheck.errors import ConfigError
from layoutcheck.lint.runner import run
from layoutcheck.lint.settings import CheckSettings, LintSettings, kebab

# A padding idiom every rule set parses: the file really goes through the per-file phase.
PADDED = "max_seq_lens = [max(total_lengths)] * len(tokens)\n"


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


# ---------------------------------------------------------------- one definition of each key


def test_lint_settings_take_snake_case_overrides_and_keep_their_defaults():
    settings = LintSettings(owners={"thd": ("pkg.mod:pack",)}, bucket_quantum=64)
    assert settings.owners == {"thd": ("pkg.mod:pack",)} and settings.bucket_quantum == 64
    assert LintSettings().sources == () and LintSettings().bucket_quantum == 128
    with pytest.raises(TypeError):
        LintSettings(no_such_key=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.sources = ()  # type: ignore[misc]


def test_every_field_has_a_description_and_the_pydantic_model_is_built_from_them():
    fields = dataclasses.fields(CheckSettings)
    assert all(f.metadata.get("description") for f in fields)
    model = Config.model_fields
    assert list(model) == [f.name for f in fields] + ["runtime"]
    for f in fields:
        assert model[f.name].alias == kebab(f.name)
        assert model[f.name].description == f.metadata["description"]
        assert model[f.name].get_default(call_default_factory=True) == getattr(CheckSettings(), f.name)
    assert Config().settings() == CheckSettings()


def test_validated_values_round_trip_through_json():
    table = {"owners": {"thd": ["a.py:pack"]}, "cp-helpers": {"h": {"layout": 1}},
             "select": ["LC1"], "per-file-ignores": {"t/*": ["LC2"]}, "cache-dir": "c"}
    settings = validate_table(table, None).settings()
    assert settings.owners == {"thd": ("a.py:pack",)} and settings.select == ("LC1",)
    again = CheckSettings.from_json(json.loads(json.dumps(settings.to_json())))
    assert again == settings and isinstance(again.per_file_ignores["t/*"], tuple)
    with pytest.raises(ValueError):
        CheckSettings.from_json({**settings.to_json(), "extra": 1})
    with pytest.raises(ValueError):
        CheckSettings.from_json(["not", "a", "mapping"])  # type: ignore[arg-type]


# ---------------------------------------------------------------- validated tables in the cache


@pytest.fixture
def validations(monkeypatch):
    """Counts the tables `layoutcheck.config` validates (pydantic) during a test."""
    calls: list[object] = []
    real = layoutcheck.config.validate_table

    def counting(table, file, prefix=TABLE):
        calls.append(table)
        return real(table, file, prefix)

    monkeypatch.setattr(layoutcheck.config, "validate_table", counting)
    return calls


def go(root: Path, **kwargs):
    return run(["."], rules=DEFAULT_TEST_RULES, cwd=root, loaded=resolve_config(["."], cwd=root), **kwargs)


def test_no_table_or_an_empty_one_needs_no_validation(tmp_path, validations):
    write(tmp_path, "a.py", "x = pad_me\n")
    assert go(tmp_path).findings and go(tmp_path, use_cache=False).findings
    write(tmp_path, "layoutcheck.toml", "# nothing set\n")
    write(tmp_path, "a.py", "y = pad_me\n")
    assert go(tmp_path).findings
    assert validations == []


def test_a_table_is_validated_once_and_again_only_when_it_changes(tmp_path, validations):
    write(tmp_path, "layoutcheck.toml", 'ignore = ["global-max"]\n')
    write(tmp_path, "a.py", "x = max(pad_me)\n")
    first = go(tmp_path)
    assert len(validations) == 1 and {f.rule for f in first.findings} == {"pad-call"}
    entries = list((tmp_path / ".layoutcheck_cache" / "config").glob("*.json"))
    assert len(entries) == 1
    write(tmp_path, "a.py", "y = max(pad_me)\n")  # a result-cache miss: the settings are needed
    second = go(tmp_path)
    assert len(validations) == 1 and second.stats.linted == 1
    assert {f.rule for f in second.findings} == {"pad-call"}
    write(tmp_path, "layoutcheck.toml", 'ignore = ["pad-call"]\n')
    third = go(tmp_path)
    assert len(validations) == 2 and {f.rule for f in third.findings} == {"global-max"}


def test_no_cache_validates_every_time_and_writes_nothing(tmp_path, validations):
    write(tmp_path, "layoutcheck.toml", 'ignore = ["global-max"]\n')
    write(tmp_path, "a.py", "x = pad_me\n")
    go(tmp_path, use_cache=False)
    go(tmp_path, use_cache=False)
    assert len(validations) == 2 and not (tmp_path / ".layoutcheck_cache").exists()
    go(tmp_path)  # stores it
    go(tmp_path, use_cache=False)
    assert len(validations) == 4


def test_an_invalid_table_is_never_stored_and_fails_the_same_way(tmp_path, validations):
    file = write(tmp_path, "layoutcheck.toml", "bucket-quantum = -128\nselct = 1\n")
    write(tmp_path, "a.py", "x = pad_me\n")
    with pytest.raises(ConfigError) as direct:
        resolve_config(["."], cwd=tmp_path).config
    for _ in range(2):
        with pytest.raises(ConfigError) as info:
            go(tmp_path)
        assert str(info.value) == str(direct.value)
        assert str(info.value).startswith(f"2 errors in {file}:")
        assert "bucket-quantum\n    Input should be greater than 0 [value: -128, type: integer]" in str(info.value)
        assert "selct\n    Unknown key; did you mean `select`?" in str(info.value)
    assert not list((tmp_path / ".layoutcheck_cache").glob("config/*.json"))


@pytest.mark.parametrize("garbage", [b"{not json", b"\x00\xff", b'{"v": 1, "key": "other", "settings": {}}',
                                     b'{"v": 1}', b"[]"])
def test_a_corrupt_validated_entry_is_ignored_and_rewritten(tmp_path, validations, garbage):
    write(tmp_path, "layoutcheck.toml", 'ignore = ["global-max"]\n')
    write(tmp_path, "a.py", "x = max(pad_me)\n")
    go(tmp_path)
    [entry] = (tmp_path / ".layoutcheck_cache" / "config").glob("*.json")
    entry.write_bytes(garbage)
    assert go(tmp_path).stats.cached == 1 and len(validations) == 1  # all hits: no settings needed
    write(tmp_path, "a.py", "y = max(pad_me)\n")
    result = go(tmp_path)
    assert len(validations) == 2 and {f.rule for f in result.findings} == {"pad-call"}
    assert json.loads(entry.read_bytes())["settings"]["ignore"] == ["global-max"]


# ---------------------------------------------------------------- what a one-file run imports

_PROBE = """
import json, sys
from layoutcheck.cli import main
code = main(sys.argv[1:])
print(json.dumps({'code': code, 'pydantic': 'pydantic' in sys.modules, 'libcst': 'libcst' in sys.modules}),
      file=sys.stderr)
"""


def _probe(args: list[str], cwd: Path) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    done = subprocess.run([sys.executable, "-c", _PROBE, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    return json.loads(lines[-1]), "\n".join(lines[:-1])


def test_one_file_without_a_table_never_imports_pydantic(tmp_path):
    write(tmp_path, "pyproject.toml", "[project]\nname = 'x'\n")  # a pyproject without the table
    write(tmp_path, "pkg/one.py", PADDED)
    seen, _ = _probe(["check", "pkg/one.py", "--no-cache", "--exit-zero"], tmp_path)
    assert seen == {"code": 0, "pydantic": False, "libcst": False}


def test_one_file_with_an_unchanged_table_imports_pydantic_only_the_first_time(tmp_path):
    config = write(tmp_path, "pyproject.toml", '[tool.layoutcheck]\nexclude = ["gen"]\n')
    one = write(tmp_path, "pkg/one.py", PADDED)
    args = ["check", "pkg/one.py", "--exit-zero", "--output-format", "concise"]
    first, _ = _probe(args, tmp_path)
    assert first == {"code": 0, "pydantic": True, "libcst": False}
    one.write_text(PADDED + "x = 1\n")  # as pre-commit sees it: the staged file changed
    second, _ = _probe(args, tmp_path)
    assert second == {"code": 0, "pydantic": False, "libcst": False}
    no_cache, _ = _probe([*args, "--no-cache"], tmp_path)  # --no-cache always validates
    assert no_cache == {"code": 0, "pydantic": True, "libcst": False}
    config.write_text('[tool.layoutcheck]\nexclude = ["gen"]\nbucket-quantum = 0\n')
    changed, err = _probe(args, tmp_path)
    assert changed == {"code": 2, "pydantic": True, "libcst": False}
    assert err == (f"layoutcheck: error: 1 error in {config}:\n  tool.layoutcheck.bucket-quantum\n"
                   "    Input should be greater than 0 [value: 0, type: integer]")


def test_the_console_run_ends_itself_with_its_output_complete(tmp_path):
    # `python -m layoutcheck check` ends with os._exit (no teardown): what it printed
    # must still arrive whole through a pipe, after a process pool, with the right status.
    for i in range(300):
        write(tmp_path, f"bad/m{i:03d}.py", "def f(:\n")
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    done = subprocess.run([sys.executable, "-m", "layoutcheck", "check", "bad", "--no-cache", "--jobs", "2",
                           "--output-format", "json"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, done.stderr
    items = json.loads(done.stdout)
    assert len(items) == 300 and all(item["code"] is None for item in items)
    assert done.stderr.endswith("300 paths could not be checked (errors above).\n")
