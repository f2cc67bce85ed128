"""Adding a source is one package and one line of the table in node/sources.py: every source
package has a registration and its line, every part key a registration, the table is
consistent, and no other module of node/ names a source."""

from __future__ import annotations

import ast
from importlib import import_module

from exporter.app.catalogue import REGISTRATIONS
from exporter.app.settings import build_settings
from exporter.core.registration import Collect, Registration, Switch, table_problems
from exporter.core.snapshot import PartKey, Snapshot
from exporter.node.sources import SOURCES
from tests.support.paths import ROOT

PACKAGE = ROOT / "exporter"
NODE = PACKAGE / "node"
# What a source package holds that only the table may name.
SOURCE_MODULES = ("source", "collector", "part", "metrics", "store", "posted")


def source_packages() -> set[str]:
    """The packages with a sampled source (a source.py), but core (the protocol)."""
    return {path.parent.name for path in PACKAGE.glob("*/source.py")} - {"core"}


def imported(path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}


def declared_part_keys_modules() -> set[str]:
    """The modules that declare a part key."""
    return {
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for path in PACKAGE.rglob("*.py")
        if "PartKey(" in path.read_text() and path.name != "snapshot.py"
    }


def declared_part_keys() -> set[str]:
    """Every ``PartKey("name", ...)`` in the package."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "PartKey"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                names.add(node.args[0].value)
    return names


def test_every_source_package_registers_itself_with_a_line_in_the_table():
    table = {registration.name for registration in SOURCES}
    missing = sorted(pkg for pkg in source_packages() if not (PACKAGE / pkg / "registration.py").exists())
    unlisted = sorted(pkg for pkg in source_packages() if import_module(f"exporter.{pkg}.registration").REGISTRATION.name not in table)
    assert not missing and not unlisted, (missing, unlisted)


def test_the_table_is_consistent():
    assert table_problems(REGISTRATIONS) == []
    broken = (
        *REGISTRATIONS,
        Registration(PartKey("extra", object), lambda b: None, (Collect("nobody", object),), switches=(Switch("self", "again"),)),
    )
    assert table_problems(broken) == [
        "collector switch 'self' is declared twice",
        "extra: collector.nobody is not declared by any registration",
    ]


def test_every_part_key_has_a_line_and_every_line_a_key():
    names = [registration.name for registration in REGISTRATIONS]  # the node's table, then the web server's parts
    assert len(names) == len(set(names))
    assert set(names) == declared_part_keys()


def test_no_other_node_module_names_a_source():
    packages = {name.split(".")[1] for name in declared_part_keys_modules()} - {"core"}
    wrong = sorted(
        f"{path.name} imports {module}"
        for path in NODE.glob("*.py")
        if path.name not in ("sources.py", "status.py")
        for module in imported(path)
        if module.startswith("exporter.") and module.split(".")[1] in packages and module.split(".")[-1] in SOURCE_MODULES
    )
    assert not wrong, wrong


def test_the_snapshot_has_no_field_per_source():
    assert [f for f in Snapshot.__dataclass_fields__] == ["ready", "parts"]


def test_a_snapshot_holds_one_part_per_source_on_by_name():
    from exporter.node.assembly import assemble

    node = assemble(build_settings(flags={"simulator.scenario": "healthy"}), ingest=False)
    node.sampler.publish()
    assert set(node.publisher.sampled.parts) <= set(node.sources) and "devices" in node.publisher.sampled.parts
