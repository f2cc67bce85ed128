"""The shape of the house (docs/architecture.md), checked: imports point down only, no cycle,
small modules, every package importable, tests that import helpers from tests/support only, and
a project that stands alone."""

from __future__ import annotations

import ast
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PACKAGE = ROOT / "exporter"
# A module's size in characters of code (whitespace left out), not lines: ruff format spreads a
# call over as many lines as it has arguments. 27,000 is about what 500 dense lines held.
MAX_CODE_CHARS = 27_000
MAX_LINES = 500

# Parts whose functions stay short enough to read at once (a dashboard is rows of panels, a rule
# group one builder per alert), in lines from `def` to the function's last line.
SHORT_FUNCTIONS = {"generate", "thresholds"}
MAX_FUNCTION_LINES = 80

# The source packages: each registers itself (registration.py). One may import core, and what
# SOURCE_READS names; every layer above a source may import every source.
SOURCES = {path.parent.name for path in PACKAGE.glob("*/registration.py")}
SOURCE_READS: dict[str, set[str]] = {
    "hccn": {"npusmi"},  # asks about the chips npu-smi lists
    "pods": {"npusmi"},  # matches kubelet devices to npu-smi's chips
    "owners": {"npusmi", "pods"},  # reads the cgroups of npu-smi's processes; joins the kubelet's pod names
    # The ingest API is a route of the web app: it reads the user the auth middleware verified
    # (web.auth's app key). Posted profiles are profiles; a job's MFU divides by its chip's peak.
    "jobs": {"web", "profiles", "npusmi"},
}

# What each top-level part of ``exporter`` may import (besides itself and ``exporter.__init__``).
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "hooks": set(),  # runs inside training loops: the standard library only
    "simulator": set(),  # a stand-alone npu-smi / hccn_tool
    "web": {"core"},
    **{source: {"core"} | SOURCE_READS.get(source, set()) for source in SOURCES},
    # The threshold table and what its alerts mean: read by the generators and the diagnostics alike.
    "thresholds": {"core"},
    "generate": {"core", "hccn", "thresholds"},
    # The node knows nothing of the web layer: it publishes (snapshot, bodies) pairs that the web
    # layer reads through core.exposed.
    "node": {"core"} | SOURCES,
    # The node and the web server put together: every package's settings, the web's own parts;
    # the hooks' CANN_EXPORTER_* names, which are not typos.
    "app": {"core", "web", "node", "hooks"} | SOURCES,
    "diagnostics": {"core", "thresholds", "node", "app", "simulator"} | SOURCES,
    # The commands: what the diagnostics may import, the tools themselves and the web server.
    "commands": {"core", "thresholds", "node", "app", "simulator", "web", "generate", "diagnostics"} | SOURCES,
    "cli": {"core", "node", "app", "commands"},
    "__main__": {"cli"},
}


def test_the_source_packages_are_the_registered_ones():
    assert {"npusmi", "hccn", "pods", "profiles", "jobs", "resources"} <= SOURCES


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imports(path: Path, name: str) -> Iterator[str]:
    """Every ``exporter`` module ``path`` imports, at any depth of the code."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.split(".")[0] == "exporter")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            if base.split(".")[0] != "exporter":
                continue
            for alias in node.names:  # `from exporter.x import y`: y may be a module itself
                yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base


MODULES = modules()
GRAPH = {name: {target for target in imports(path, name) if target in MODULES} for name, path in MODULES.items()}


def part(module: str) -> str:
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else ""


def test_every_part_of_the_package_has_a_rule():
    assert {part(m) for m in MODULES} - {""} == set(ALLOWED)


def test_imports_point_down_only():
    wrong = sorted(
        f"{source} imports {target}"
        for source, targets in GRAPH.items()
        for target in targets
        if part(source) and part(target) and part(target) != part(source) and part(target) not in ALLOWED[part(source)]
    )
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle():
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in GRAPH[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for name in GRAPH:
        if name not in index:
            visit(name)
    # A package __init__ that re-exports its own modules is not a cycle of the design.
    cycles = [c for c in cycles if not all(m == c[0] or m.startswith(c[0] + ".") for m in c)]
    assert not cycles, cycles


def test_modules_stay_small():
    sizes = {
        str(path.relative_to(ROOT)): (len(re.sub(r"\s", "", text)), text.count("\n"))
        for path in MODULES.values()
        if not path.name.endswith("_pb2.py") and (text := path.read_text())
    }
    big = {name: size for name, size in sizes.items() if size[0] > MAX_CODE_CHARS or size[1] > MAX_LINES}
    assert not big, big


# A `# type: ignore` is a place the type checker cannot see; each says why, and they stay few.
IGNORE = re.compile(r"#\s*type:\s*ignore(\[[^\]]*\])?(.*)$")
MAX_TYPE_IGNORES = 5


def test_few_type_ignores_each_with_its_reason():
    found = [
        (str(path.relative_to(ROOT)), number, match.group(2))
        for path in MODULES.values()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if (match := IGNORE.search(line))
    ]
    assert len(found) <= MAX_TYPE_IGNORES, found
    assert all(reason.strip().startswith("#") for _, _, reason in found), found


def test_functions_stay_short():
    long = {
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}": lines
        for name, path in MODULES.items()
        if part(name) in SHORT_FUNCTIONS
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and (lines := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES
    }
    assert not long, long


def test_every_package_directory_is_a_package():
    missing = [
        str(d.relative_to(ROOT))
        for d in PACKAGE.rglob("*")
        if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py")) and not (d / "__init__.py").exists()
    ]
    assert not missing, missing


def test_tests_import_helpers_from_support_only():
    tests = ROOT / "tests"
    bad = []
    for path in sorted(tests.rglob("*.py")):
        if "fixtures" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("tests")):
                module = node.module or ""
                if node.level or not (module == "tests.support" or module.startswith("tests.support.")):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {'.' * node.level}{module}")
    missing = [
        str(d.relative_to(ROOT))
        for d in [tests, *tests.rglob("*")]
        if d.is_dir()
        and "fixtures" not in d.parts
        and d.name != "__pycache__"
        and any(d.glob("test_*.py"))
        and not (d / "__init__.py").exists()
    ]
    assert not bad and not missing, bad + missing


def tracked_files() -> list[Path]:
    try:
        listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.fail("git ls-files failed: the checks of tracked files need a git checkout")
    return [ROOT / f for f in listed.splitlines() if (ROOT / f).is_file()]


def tracked_text_files() -> list[Path]:
    """Our own sources and documents; the fixtures are upstream outputs and stay as captured."""
    suffixes = {".py", ".md", ".yaml", ".yml", ".toml", ".json", ".txt", ".service", ".cfg", ".ini", ".proto"}
    return [
        path
        for path in tracked_files()
        if not path.relative_to(ROOT).as_posix().startswith("tests/fixtures/")
        and (path.suffix in suffixes or path.name in ("Makefile", "Dockerfile"))
    ]


# A relative path (``../x``) and a Markdown document named without a directory, in any tracked
# text file: the first must stay inside the checkout, the second must be one of ours.
CLIMBING = re.compile(r"(?<![\w./-])(?:\.\./)+[\w./-]*")
BARE_DOCUMENT = re.compile(r"(?<![\w./-])[\w-]+\.md\b")


def outside_references(path: Path, text: str, documents: set[str]) -> list[str]:
    """What ``text`` (of ``path``) names outside the repository: relative paths that climb out
    of the checkout, and bare document names that are not a document of the repository."""
    root = ROOT.resolve()
    found = [ref for ref in CLIMBING.findall(text) if not (path.parent / ref).resolve().is_relative_to(root)]
    return found + [name for name in BARE_DOCUMENT.findall(text) if name not in documents]


def test_the_project_stands_alone():
    """No file refers to documents outside the repository: what a reader needs is written here."""
    documents = {path.name for path in tracked_files() if path.suffix == ".md"}
    found = [
        f"{path.relative_to(ROOT)}: {ref}"
        for path in tracked_text_files()
        if path != Path(__file__)  # its examples
        for ref in outside_references(path, path.read_text(errors="replace"), documents)
    ]
    assert not found, found


def test_references_outside_the_repository_are_caught():
    here = ROOT / "docs" / "x.md"
    text = "See ../../elsewhere/notes.txt and PLAN.md; ../README.md, metrics.md and docs/upstream/guide.md are fine."
    assert outside_references(here, text, {"README.md", "metrics.md"}) == ["../../elsewhere/notes.txt", "PLAN.md"]


def machine_paths() -> re.Pattern[str]:
    """This checkout's absolute path and the user's home, as whole path components, taken now."""
    roots = {str(ROOT), str(ROOT.resolve()), str(Path.home()), str(Path.home().resolve())}
    roots = {root.rstrip("/") for root in roots if root.strip("/")}
    alternatives = "|".join(re.escape(root) for root in sorted(roots, key=len, reverse=True))
    return re.compile(rf"(?<![\w.~/-])(?:{alternatives})(?![\w-])(?!\.\w)")


def test_the_match_is_on_whole_path_components():
    pattern = machine_paths()
    assert pattern.search(f"ran {ROOT}/.venv/bin/python") and pattern.search(f"home {Path.home()}.")
    assert not pattern.search(f"x{ROOT}") and not pattern.search(f"{ROOT}-old/x")


def test_no_file_names_the_build_machine():
    """Reports, docs, provenance and generated files hold on any machine: none names a local path."""
    pattern = machine_paths()
    found = []
    for path in tracked_files():
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary
        found += [
            f"{path.relative_to(ROOT)}:{number}: {match.group(0)}"
            for number, line in enumerate(data.decode(errors="replace").splitlines(), 1)
            for match in pattern.finditer(line)
        ]
    assert not found, found
