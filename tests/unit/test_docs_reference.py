"""The generated reference pages of the documentation site (docs/reference/configuration.md, cli.md,
errors.md) against the code: committed as docs/gen_reference.py writes them, and nothing the pages list
left without its description in the code (a Config field's `#:` comment, an error class's docstring,
a CLI flag's help)."""

from __future__ import annotations

import difflib
import importlib.util
from pathlib import Path

import pytest

# the format("eos") options are read through the data source, a PySpark 4.0+ module
pytest.importorskip("pyspark.sql.datasource")

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "docs" / "gen_reference.py"
REGENERATE = "run python docs/gen_reference.py (make docs does) and commit the pages it rewrites"


@pytest.fixture(scope="module")
def gen():
    spec = importlib.util.spec_from_file_location("gen_reference", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def pages(gen):
    return gen.pages()


@pytest.mark.parametrize("name", ["configuration.md", "cli.md", "errors.md", "java-settings.md"])
def test_the_committed_page_is_what_the_code_generates(pages, name):
    path = ROOT / "docs" / "reference" / name
    expected = next(text for page, text in pages.items() if page.name == name)
    committed = path.read_text(encoding="utf-8") if path.exists() else ""
    if committed != expected:
        diff = "".join(
            list(
                difflib.unified_diff(
                    committed.splitlines(keepends=True),
                    expected.splitlines(keepends=True),
                    f"docs/reference/{name} (committed)",
                    f"docs/reference/{name} (from the code)",
                )
            )[:60]
        )
        pytest.fail(f"docs/reference/{name} is stale: {REGENERATE}\n{diff}")


def test_every_config_field_has_a_description(gen):
    missing = [name for name, text in gen.config_descriptions().items() if not text]
    assert not missing, (
        "eos.Config fields without a description (a `#:` comment on the lines right above the field in"
        f" eos/config.py): {', '.join(missing)}; then {REGENERATE}"
    )


def test_every_error_class_has_a_docstring(gen):
    missing = [cls.__name__ for cls in gen.error_classes() if not cls.__doc__]
    assert not missing, (
        "eos.errors classes without a docstring of their own (when it is raised, what it means, what to"
        f" do): {', '.join(missing)}; then {REGENERATE}"
    )


def test_every_cli_command_and_flag_has_help(gen):
    missing = gen.cli_options_without_help()
    assert not missing, (
        f"eos CLI commands and flags without help=...: {', '.join(missing)}; then {REGENERATE}"
    )


# -- the generator reads the names from the code that maps them ----------------------------------------


def test_the_names_of_a_setting_are_those_the_code_accepts(gen):
    import eos
    from eos._spark._datasource import settings_of

    keys, variables, options = gen.dotted_keys(), gen.environment_variables(), gen.format_options()
    assert keys["app_id"] == ["app.id", "application.id"]
    assert keys["producer"] == ["producer.*"] and keys["kafka"] == ["any other key"]
    assert variables["commit_every"] == ["EOS_COMMIT_EVERY"] and variables["admin"] == ["EOS_ADMIN_*"]
    assert options["bootstrap_servers"][0] == "kafka.bootstrap.servers" and options["kafka"] == ["kafka.*"]
    # what the page names sets the field, through each constructor
    assert (
        eos.Config.from_properties({"bootstrap.servers": "b:1", "app.id": "a", "output.topic": "o"}).app_id
        == "a"
    )
    base = {"bootstrap_servers": "b:1", "app_id": "a", "output_topic": "o"}
    assert eos.Config.from_env({"EOS_COMMIT_EVERY": "5"}, **base).commit_every == 5
    settings = settings_of(
        {"kafka.bootstrap.servers": "b:1", "eos.app.id": "a", "topic": "o", "eos.commit.every": "5"}
    )
    assert settings.config.commit_every == 5
    # a field the data source refuses is shown with its reason; a mapping field without any name, as none
    assert isinstance(options["metrics_port"], str) and "Prometheus" in options["metrics_port"]
    assert keys["changelog_topic_config"] == [] and options["changelog_topic_config"] == []
