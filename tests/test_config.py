"""``[tool.layoutcheck]``: finding the file, validating it, and errors that name key, value, file."""

from __future__ import annotations

from pathlib import Path

import pytest
from lint_test_rules import DEFAULT_TEST_RULES

from layoutcheck.config import Config
from layoutcheck.configfile import find_config_file, load_config, resolve_config
from layoutcheck.errors import ConfigError
from layoutcheck.lint.selection import resolve_selection


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults_without_any_file(tmp_path):
    loaded = resolve_config([str(tmp_path)], cwd=tmp_path)
    assert loaded.path is None and loaded.root == tmp_path
    assert loaded.config == Config()
    assert loaded.cache_dir == tmp_path / ".layoutcheck_cache"


def test_found_by_walking_up_from_the_common_parent(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.layoutcheck]\nselect = ["LC9"]\ncache-dir = "var/c"\n')
    write(tmp_path / "pkg" / "pyproject.toml", "[project]\nname = 'x'\n")  # no table: passed over
    a = write(tmp_path / "pkg" / "a" / "x.py", "")
    b = write(tmp_path / "pkg" / "b" / "y.py", "")
    loaded = resolve_config([str(a), str(b)])
    assert loaded.path == tmp_path / "pyproject.toml"
    assert loaded.config.select == ("LC9",)
    assert loaded.cache_dir == tmp_path / "var" / "c"
    assert loaded.describe("select") == f"tool.layoutcheck.select in {tmp_path / 'pyproject.toml'}"


def test_layoutcheck_toml_wins_over_pyproject_in_the_same_folder(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.layoutcheck]\nselect = ["LC1"]\n')
    write(tmp_path / "layoutcheck.toml", 'select = ["LC2"]\n')
    assert find_config_file(tmp_path) == tmp_path / "layoutcheck.toml"
    loaded = resolve_config([str(tmp_path)])
    assert loaded.config.select == ("LC2",) and loaded.describe("select").startswith("select in ")


def test_explicit_config_outside_the_tree_is_honoured(tmp_path):
    tree = tmp_path / "tree"
    write(tree / "pyproject.toml", '[tool.layoutcheck]\nselect = ["LC1"]\n')
    outside = write(tmp_path / "elsewhere" / "layoutcheck.toml", 'ignore = ["LC902"]\nexclude = ["gen"]\n')
    loaded = resolve_config([str(tree)], outside)
    assert loaded.path == outside and loaded.root == outside.parent
    assert loaded.config.ignore == ("LC902",) and loaded.config.select is None


def test_explicit_pyproject_without_table_is_an_error(tmp_path):
    file = write(tmp_path / "pyproject.toml", "[project]\nname = 'x'\n")
    with pytest.raises(ConfigError, match=r"has no \[tool.layoutcheck\] table"):
        load_config(file)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.toml")


def test_runtime_table_is_validated_into_runtime_settings(tmp_path):
    write(tmp_path / "pyproject.toml", """
[tool.layoutcheck]
sources = ["max_seq_lens"]
[tool.layoutcheck.runtime]
mode = "warn"
preset = "miles"
parallel-state = "trainer.parallel:get_parallel_state"
hooks = { batch-builder = ["trainer.data:get_batch", "trainer.fsdp:Builder.get_batch"] }
buckets = [1024, 2048]
""")
    settings = resolve_config([str(tmp_path)]).config.runtime.settings()
    assert settings.mode == "warn" and settings.buckets == (1024, 2048)
    specs = [str(s) for s in settings.hook_specs()]
    # the preset fills every role; an explicit role replaces the preset's
    assert specs == [
        "producer: miles.backends.training_utils.data:get_rollout_data",
        "batch-builder: trainer.data:get_batch",
        "batch-builder: trainer.fsdp:Builder.get_batch",
        "replay-filler: miles.backends.training_utils.replay_data:fill_replay_data",
        "offset-helper: miles.backends.training_utils.cp_utils:get_logits_and_tokens_offset_with_cp",
        # the tracer's roles (hooked only while it is on)
        "cp-slicer: miles.backends.training_utils.cp_utils:slice_with_cp",
        "response-slicer: miles.backends.training_utils.cp_utils:slice_log_prob_with_cp",
        "loss-function: miles.backends.training_utils.loss:loss_function",
    ]
    assert settings.parallel_state_target == "trainer.parallel:get_parallel_state"


@pytest.mark.parametrize(
    ("table", "key", "fragment"),
    [
        ('mdoe = "warn"', "tool.layoutcheck.runtime.mdoe", "Unknown key; did you mean `mode`?"),
        ('mode = "loud"', "tool.layoutcheck.runtime.mode", "Input should be 'raise', 'warn' or 'record'"),
        ('hooks = { getbatch = ["a.b:c"] }', "tool.layoutcheck.runtime.hooks.getbatch", "Invalid key"),
        ('hooks = { producer = ["a.b.c"] }', "tool.layoutcheck.runtime.hooks", "`producer[0]` = 'a.b.c' is not a hook"),
        ("buckets = [1024, 1000]", "tool.layoutcheck.runtime.buckets", "bucket #1 is 1000, not a multiple of 128"),
        ('preset = "slime2"', "tool.layoutcheck.runtime.preset", "Input should be 'miles'"),
    ],
)
def test_runtime_errors_name_the_key_and_the_file(tmp_path, table, key, fragment):
    file = write(tmp_path / "pyproject.toml", f"[tool.layoutcheck.runtime]\n{table}\n")
    with pytest.raises(ConfigError) as info:
        resolve_config([str(tmp_path)]).config
    message = str(info.value)
    assert message.startswith(f"1 error in {file}:"), message
    assert f"  {key}\n" in message and fragment in message, message


def test_errors_name_every_key_value_and_the_file(tmp_path):
    file = write(tmp_path / "pyproject.toml", """
[tool.layoutcheck]
selct = ["LC1"]
bucket-quantum = -128
per-file-ignores = { "tests/*" = ["LC1", 3] }
""")
    loaded = resolve_config([str(tmp_path)])  # reading does not validate yet: see configfile
    with pytest.raises(ConfigError) as info:
        loaded.config
    message = str(info.value)
    assert message.startswith(f"3 errors in {file}:")
    assert "tool.layoutcheck.selct\n    Unknown key; did you mean `select`?" in message
    valid = message.split("valid keys: ", 1)[1].splitlines()[0].split(", ")
    assert {"bucket-quantum", "cache-dir", "exclude", "per-file-ignores", "select", "runtime"} <= set(valid)
    assert valid == sorted(valid)
    assert "tool.layoutcheck.bucket-quantum\n    Input should be greater than 0 [value: -128, type: integer]" in message
    assert 'tool.layoutcheck.per-file-ignores."tests/*"[1]' in message and "[value: 3, type: integer]" in message
    assert info.value.source == str(file) and info.value.key == "tool.layoutcheck.bucket-quantum"



@pytest.mark.parametrize(
    ("table", "key", "fragment"),
    [
        ('lint-tests = "yes"', "lint-tests", 'Expected a boolean, got a string [value: "yes", type: string]'),
        ("lint-tests = 1", "lint-tests", "Expected a boolean, got an integer [value: 1, type: integer]"),
        ('bucket-quantum = "128"', "bucket-quantum",
         'Expected a positive integer, got a string [value: "128", type: string]'),
        ("pad-multiple-quantum = 16.0", "pad-multiple-quantum",
         "Expected a positive integer, got a float [value: 16.0, type: float]"),
        ('exclude = "build"', "exclude", 'Expected an array of strings, got a string [value: "build", type: string]'),
        ('respect-gitignore = "no"', "respect-gitignore",
         'Expected a boolean, got a string [value: "no", type: string]'),
        ('select = ["LC1", 101]', "select[1]", "`select` is an array of strings: this entry is an integer"),
        ('owners = { bshd = "get_rollout_data" }', "owners.bshd",
         "`owners` is a table (one of `bshd`, `thd` → array of strings): this entry is a string"),
        ('cp-helpers = { f = { qkv_format = "2" } }', "cp-helpers.f.qkv_format",
         "`cp-helpers` is a table (string → table (string → non-negative integer)): this entry is a string"),
        ('runtime = { summary = "off" }', "runtime.summary", 'Expected a boolean, got a string [value: "off"'),
        ('runtime = { cross-rank-every = "2" }', "runtime.cross-rank-every", "Expected a positive integer, got a"),
        ("runtime = { buckets = [1024, 2048.0] }", "runtime.buckets[1]",
         "`runtime.buckets` is an array of positive integers: this entry is a float"),
    ],
)
def test_types_are_strict_and_errors_name_the_toml_type_expected(tmp_path, table, key, fragment):
    # TOML has types: a string where a boolean or an integer belongs is a mistake to report, never to coerce.
    file = write(tmp_path / "pyproject.toml", f"[tool.layoutcheck]\n{table}\n")
    with pytest.raises(ConfigError) as info:
        resolve_config([str(tmp_path)]).config
    message = str(info.value)
    assert message.startswith(f"1 error in {file}:\n  tool.layoutcheck.{key}\n    "), message
    assert fragment in message and "Input should be" not in message, message
    assert info.value.key == f"tool.layoutcheck.{key}" and info.value.source == str(file)


def test_a_whole_number_is_a_number_and_types_are_strict_only_for_toml(tmp_path):
    write(tmp_path / "layoutcheck.toml", "[runtime]\ncross-rank-timeout = 30\n")  # an integer where a float goes
    assert resolve_config([str(tmp_path)]).config.runtime.cross_rank_timeout == 30.0
    # Python callers that build the model directly keep pydantic's usual conversions (lists for arrays).
    assert Config(exclude=["gen"], owners={"thd": ["get_batch"]}).exclude == ("gen",)


def test_owners_keys_must_be_layouts(tmp_path):
    file = write(tmp_path / "pyproject.toml", '[tool.layoutcheck]\nowners = { bsdh = ["data.py:get_rollout_data"] }\n')
    with pytest.raises(ConfigError) as info:
        resolve_config([str(tmp_path)]).config
    message = str(info.value)
    assert message.startswith(f"1 error in {file}:")
    assert ("tool.layoutcheck.owners.bsdh\n    Invalid key: input should be 'bshd' or 'thd' [value: \"bsdh\", "
            "type: string]") in message
    assert info.value.key == "tool.layoutcheck.owners.bsdh"
    write(tmp_path / "pyproject.toml", '[tool.layoutcheck]\nowners = { thd = ["get_batch"] }\n')
    assert resolve_config([str(tmp_path)]).config.owners == {"thd": ("get_batch",)}

def test_long_values_are_truncated(tmp_path):
    write(tmp_path / "layoutcheck.toml", f'bucket-quantum = "{"x" * 300}"\n')
    with pytest.raises(ConfigError) as info:
        resolve_config([str(tmp_path)]).config
    assert "bucket-quantum\n" in str(info.value) and "..." in str(info.value)
    assert len(str(info.value)) < 400


def test_invalid_toml_names_file_and_line(tmp_path):
    file = write(tmp_path / "pyproject.toml", '[tool.layoutcheck]\nselect = ["LC1"\nignore = []\n')
    with pytest.raises(ConfigError) as info:
        resolve_config([str(tmp_path)])
    assert str(file) in str(info.value) and "line 3" in str(info.value)
    write(tmp_path / "pyproject.toml", "[tool.layoutcheck]\nselect = [\n")
    with pytest.raises(ConfigError, match=r"at end of document\) \(line 3\)"):
        resolve_config([str(tmp_path)])


def test_raw_paths_are_read_without_validation_but_bad_types_still_fail(tmp_path):
    write(tmp_path / "layoutcheck.toml", 'exclude = ["gen"]\ncache-dir = "/abs/cache"\n')
    loaded = resolve_config([str(tmp_path)])
    assert loaded.exclude == ("gen",) and loaded.cache_dir == Path("/abs/cache")
    assert loaded._config is None  # no pydantic needed for these
    write(tmp_path / "layoutcheck.toml", "exclude = 3\n")
    with pytest.raises(ConfigError, match=r"exclude\n    Expected an array of strings, got an integer \[value: 3, type: integer\]"):
        resolve_config([str(tmp_path)]).exclude


def test_respect_gitignore_is_read_without_validation_but_a_bad_type_still_fails(tmp_path):
    assert resolve_config([str(tmp_path)]).respect_gitignore is True  # on by default, as in ruff
    write(tmp_path / "layoutcheck.toml", "respect-gitignore = false\n")
    loaded = resolve_config([str(tmp_path)])
    assert loaded.respect_gitignore is False and loaded._config is None
    assert loaded.config.settings().respect_gitignore is False
    write(tmp_path / "layoutcheck.toml", 'respect-gitignore = "off"\n')
    with pytest.raises(ConfigError, match=r"respect-gitignore\n    Expected a boolean, got a string"):
        resolve_config([str(tmp_path)]).respect_gitignore


def test_table_that_is_not_a_table(tmp_path):
    write(tmp_path / "pyproject.toml", "[tool]\nlayoutcheck = 3\n")
    with pytest.raises(ConfigError, match=r"tool.layoutcheck in .* must be a table, got 3 \(int\)"):
        resolve_config([str(tmp_path)])


def test_unknown_rule_in_select_names_key_file_and_valid_names(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.layoutcheck]\nselect = ["pad-cal"]\n')
    loaded = resolve_config([str(tmp_path)])
    with pytest.raises(ConfigError) as info:
        resolve_selection(DEFAULT_TEST_RULES, select=loaded.config.select, describe=loaded.describe)
    message = str(info.value)
    assert "unknown rule 'pad-cal' in tool.layoutcheck.select in" in message
    assert str(tmp_path / "pyproject.toml") in message
    assert "LC901 pad-call, LC902 global-max, LC951 noisy-thing" in message


def test_the_reference_describes_every_key_in_words_with_a_description():
    # `layoutcheck config --reference` (and the README) are generated from the
    # settings fields: each needs a description and a type the reference can word.
    import dataclasses

    from layoutcheck.lint.configdocs import RUNTIME_KEY, keys
    from layoutcheck.lint.settings import CheckSettings, kebab
    from layoutcheck.runtime.hooks.settings import RuntimeSettings

    entries = keys()
    runtime = {f"{RUNTIME_KEY}.{kebab(f.name)}" for f in dataclasses.fields(RuntimeSettings)}
    assert {k.name for k in entries[-len(runtime):]} == runtime  # the runtime table's keys come last
    assert {k.name for k in entries} == {kebab(f.name) for f in dataclasses.fields(CheckSettings)} | runtime
    for key in entries:
        assert key.description, key.name
        assert not key.type.startswith("`"), f"{key.name}: no words for the annotation {key.type}"
    by_name = {k.name: k for k in entries}
    assert by_name["sources"].type == "array of strings"
    assert by_name["select"].type == "array of strings" and by_name["select"].default is None
    assert by_name["owners"].type == "table (one of `bshd`, `thd` → array of strings)"
    assert by_name["cp-helpers"].type == "table (string → table (string → non-negative integer))"
    assert by_name["bucket-quantum"].type == "positive integer"


def test_toml_values_are_inline_toml():
    import tomllib

    from layoutcheck.lint.configdocs import toml_value, type_words

    value = {"a b": ["x", 'q"uote', "ü"], "n": 3, "t": True, "empty": {}, "nested": {"k": []}}
    assert tomllib.loads(f"v = {toml_value(value)}")["v"] == value
    assert toml_value(None) == "not set"
    assert type_words("frozenset[str]") == "`frozenset[str]`"  # unknown: shown as written
