"""The docs name only commands, options, settings, files and endpoints that exist.

Scanned: README.md, docs/**/*.md, deploy/**/README.md, examples/**/*.md and
tests/fixtures/README.md. Failures read ``file:line: problem: text``, all of a file's at once.

Shell lines come from fenced blocks tagged sh, bash, shell, console (only its ``$ `` lines)
or untagged, a trailing ``\\`` joining the next line, and from every inline code span. A line
is cut at a ``#`` comment and split into commands at spaced ``&&``, ``||``, ``;``, ``&`` and
``|``; leading ``sudo``, ``env`` and ``VAR=value`` words and the program's directory go.

- ``cann-exporter ARGS`` and ``python -m exporter ARGS`` must parse with
  ``exporter.cli.build_parser()`` (``serve`` implied when ARGS start with an option, as in
  ``main()``). Synopsis notation: ``[...]`` is an optional group whose spaced ``|`` separates
  alternatives; each alternative is parsed on its own, with the words outside the groups, so
  exclusive options never meet. ``a|b`` within a word is a choice of values, each parsed. A
  group with no option and no placeholder is prose (``[same options]``): skipped. ``...`` and
  ``…`` are dropped. Placeholders (ALL-CAPS words such as FILE, URL, HOST:PORT, ``<export>``,
  ``$VAR``, anything holding an ellipsis) pass any type and choices; real values are checked.
  Inline code may name a command without its required arguments (``cann-exporter report``);
  fenced blocks are complete invocations.
- ``make TARGET``: a rule of the Makefile. ``python -m MODULE``: importable from the
  repository root. ``python SCRIPT.py``: exists there. ``cann-exporter[EXTRA]``: an extra of
  pyproject.toml.
- In inline code: dotted flags (``--web.config.file``) must be flags of ``serve``, settings
  keys (``npu_smi.timeout``: a word whose first part is a settings section) keys of
  ``OPTIONS``, ``CANN_*`` names settings variables or names the code or deploy files read,
  fixture names (``info__910B3__25.5.1__1``) files under tests/fixtures. ``NAME`` as the last
  part (``--collector.NAME``, ``CANN_EXPORTER_COLLECTOR_NAME``) and ``*`` match anything.

Paths are checked word by word in inline code, and in link targets:

- A word is a path when it is made only of word characters and ``. - / * < > ~ # +`` (so not
  a URL, ``host:port``, ``key=value``, PromQL or a selector), does not start with ``-``,
  ``~``, ``#`` or an ellipsis, and either holds ``/`` or is a bare ``*.py`` module name (other
  bare names, ``capacity.json``, ``config.yaml``, are mostly files users or tools write).
- Absolute paths under a system directory (``SYSTEM_DIRS``: /etc, /usr, /var, /dev, ...) are
  the host's: skipped. Any other absolute path is an endpoint: a route of the app ``serve``
  builds (with its method when one precedes it: ``POST /api/v1/steps``), unless it is another
  server's API (``FOREIGN_ENDPOINTS``). So is the path of a URL on the exporter's port 9435.
- A relative path is the repository's when its first part exists in the doc's directory, the
  repository root or the ``exporter/`` package (architecture.md names modules
  package-relative); it must then exist under one of them. Other relative paths (``Mb/s``,
  ``host/`` of a profiler export, upstream repositories' files) are not ours: skipped, as is
  ``UPSTREAM_PATHS``. A bare module name may be anywhere. ``<name>`` and ALL-CAPS parts are
  wildcards; globs must match at least one file; a ``...`` part ends the path; a trailing
  ``/`` must be a directory.
- Link targets (not URLs) resolve against the doc's directory and must exist; a ``#anchor``
  must be the GitHub slug of a heading of the target.

Not checked: prose outside code spans, YAML in fenced blocks, commands of other programs
(npu-smi, kubectl, docker, promtool) and paths inside fenced blocks other than scripts.
"""

from __future__ import annotations

import argparse
import fnmatch
import functools
import glob
import importlib.util
import io
import os
import re
import shlex
import sys
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from exporter.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "exporter"

SYSTEM_DIRS = {
    "etc",
    "usr",
    "var",
    "dev",
    "proc",
    "sys",
    "opt",
    "tmp",
    "run",
    "home",
    "root",
    "data",
    "srv",
    "mnt",
    "nonexistent",
    "lib",
    "bin",
    "sbin",
}
# Other servers' APIs the docs name (Prometheus federation, remote-write backends).
FOREIGN_ENDPOINTS = ("/federate", "/api/v1/push", "/api/v1/receive", "/api/v1/write", "/insert/", "/api/v1/query", "/-/")
EXPORTER_PORT = "9435"
# Paths in other projects' repositories that the format docs point at.
UPSTREAM_PATHS = {"docs/en/user_guide/profile_data_file_references.md"}
SHELL_TAGS = {"", "sh", "bash", "shell", "console"}
ELLIPSES = ("...", "…")
PATH_WORD = re.compile(r"[\w.*/<>~#+-]+")
METHODS = {"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD"}
FILE_SUFFIXES = (".py", ".yml", ".yaml", ".json", ".md", ".toml", ".txt", ".csv", ".sh", ".service")
FIXTURE = re.compile(r"[\w.-]+__[\w.-]+__[\w.-]+__\d+(?:__(?:partial|mangled))?")  # tests/fixtures/README.md


def doc_files() -> list[Path]:
    patterns = ["README.md", "docs/**/*.md", "deploy/**/README.md", "examples/**/*.md", "tests/fixtures/README.md"]
    found = {Path(p) for pattern in patterns for p in glob.glob(pattern, root_dir=ROOT, recursive=True)}
    return sorted(found)


# --- markdown ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Snippet:
    line: int
    text: str


@dataclass
class Doc:
    shell: list[Snippet]  # shell lines of fenced blocks
    inline: list[Snippet]  # inline code spans
    links: list[Snippet]  # link targets


FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+-]*)")
INLINE = re.compile(r"(`+)(.+?)\1", re.DOTALL)
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
AUTOLINK = re.compile(r"<(https?://[^>\s]+)>")


def parse_markdown(text: str) -> Doc:
    doc = Doc([], [], [])
    prose = _take_fences(text.splitlines(), doc)
    # Blank lines end an inline span: a stray backtick must not swallow the next paragraph.
    for match in INLINE.finditer(prose):
        if "\n\n" not in match[2]:
            line = prose.count("\n", 0, match.start()) + 1
            doc.inline.append(Snippet(line, " ".join(match[2].replace("\\|", "|").split())))
    prose = INLINE.sub(lambda m: re.sub(r"[^\n]", " ", m[0]), prose)
    for pattern in (LINK, AUTOLINK):
        for match in pattern.finditer(prose):
            doc.links.append(Snippet(prose.count("\n", 0, match.start()) + 1, match[1]))
    return doc


def _take_fences(lines: list[str], doc: Doc) -> str:
    """Moves the shell lines of fenced blocks into ``doc``; the prose keeps its line numbers."""
    prose, fence, tag, pending = [], None, "", None
    for number, line in enumerate(lines, 1):
        opening = FENCE.match(line)
        if fence is None and opening:
            fence, tag = opening[1], opening[2].lower()
        elif fence is not None and line.strip().startswith(fence) and not line.strip().strip(fence[0]):
            fence = None
        elif fence is not None and tag in SHELL_TAGS:
            pending = _shell_line(doc, number, line, tag, pending)
        prose.append("" if fence is not None or opening else line)
    return "\n".join(prose)


def _shell_line(doc: Doc, number: int, line: str, tag: str, pending: Snippet | None) -> Snippet | None:
    """Adds one line of a shell block, joining ``\\`` continuations; returns the unfinished one."""
    if pending is not None:
        line, number = pending.text + " " + line.strip(), pending.line
    elif tag == "console":
        if not line.lstrip().startswith("$ "):
            return None
        line = line.lstrip()[2:]
    if line.rstrip().endswith("\\"):
        return Snippet(number, line.rstrip()[:-1])
    doc.shell.append(Snippet(number, line.strip()))
    return None


# --- shell lines ------------------------------------------------------------------------

SEPARATORS = {"&&", "||", ";", "&", "|", ";;"}


def split_words(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: words as written
        return line.split()


def _brackets(word: str) -> tuple[int, str, int]:
    """Leading ``[`` and trailing ``]`` of a synopsis word; ``pkg[extra]`` keeps its own."""
    core = word.lstrip("[")
    opens, closes = len(word) - len(core), 0
    while core.endswith("]") and core.count("]") > core.count("["):
        core, closes = core[:-1], closes + 1
    return opens, core, closes


def commands(line: str) -> list[list]:
    """The commands of a shell line: words, and ``[...]`` groups as lists of alternatives."""
    result: list[list] = [[]]
    current, stack = result[0], []  # stack: (enclosing list, group)
    for word in split_words(line):
        if word in SEPARATORS and (word != "|" or not stack):  # a pipe outside groups too
            result.append([])
            current, stack = result[-1], []
            continue
        if word == "|":  # inside a group: the next alternative
            current = []
            stack[-1][1].append(current)
            continue
        opens, core, closes = _brackets(word)
        for _ in range(opens):
            group = [[]]
            current.append(group)
            stack.append((current, group))
            current = group[0]
        core = core.removesuffix("...").removesuffix("…")
        if core and "|" in core:  # `json|markdown`: one of these values
            current.append(tuple(core.split("|")))
        elif core:
            current.append(core)
        for _ in range(min(closes, len(stack))):
            current = stack.pop()[0]
    return [command for command in result if command]


PLACEHOLDER = re.compile(r"[A-Z][A-Z0-9_]*(?:[:/=.,-][A-Z0-9_]+)*|<[^>]+>|\$\w+|.*(?:\.\.\.|…).*")


def is_placeholder(word: str) -> bool:
    return PLACEHOLDER.fullmatch(word) is not None


def variants(items: list) -> list[list[str]]:
    """The words outside the groups, and the same with each alternative of each group in turn.

    Words are str, ``a|b`` words tuples (one value required), ``[...]`` groups lists (optional).
    """
    result = [_required(items)]
    for index, item in enumerate(items):
        if isinstance(item, str) or isinstance(item, list) and _is_prose(item):
            continue
        before, after = _required(items[:index]), _required(items[index + 1 :])
        inners = (
            [[value] for value in item] if isinstance(item, tuple) else [inner for alternative in item for inner in variants(alternative)]
        )
        result += [before + inner + after for inner in inners]
    return result


def _required(items: list) -> list[str]:
    return [item if isinstance(item, str) else item[0] for item in items if not isinstance(item, list)]


def _is_prose(group: list) -> bool:
    words = [w for alternative in group for w in _flatten(alternative)]
    return not any(w.startswith("-") or is_placeholder(w) for w in words)


def _flatten(items: list) -> Iterator[str]:
    for item in items:
        if isinstance(item, str):
            yield item
        elif isinstance(item, tuple):
            yield from item
        else:
            for alternative in item:
                yield from _flatten(alternative)


def program(items: list) -> tuple[str, list]:
    """The program's name (without its directory) and its arguments; sudo and VAR=x dropped."""
    index = 0
    while (
        index < len(items)
        and isinstance(items[index], str)
        and (items[index] in ("sudo", "env", "exec") or re.fullmatch(r"\w+=\S*", items[index]))
    ):
        index += 1
    if index == len(items) or not isinstance(items[index], str):
        return "", []
    return items[index].rsplit("/", 1)[-1], items[index + 1 :]


# --- what the code has ------------------------------------------------------------------


@functools.cache
def lenient_parser() -> argparse.ArgumentParser:
    """The real parser, with placeholders accepted wherever a type or a choice applies."""
    parser = build_parser()
    for command in [parser, *_subcommands(parser).values()]:
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            if action.type is not None:
                action.type = _lenient_type(action.type)
            if action.choices is not None:
                action.choices = _Choices(action.choices)
    return parser


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _lenient_type(convert):
    @functools.wraps(convert)
    def wrapper(value: str):
        return value if is_placeholder(value) else convert(value)

    return wrapper


class _Choices(tuple):
    def __contains__(self, value: object) -> bool:
        return isinstance(value, str) and is_placeholder(value) or super().__contains__(value)


def cli_error(args: list[str]) -> str | None:
    """argparse's complaint about ``cann-exporter ARGS``, or None."""
    if not args or args[0].startswith("-") and args[0] not in ("-h", "--help", "--version"):
        args = ["serve", *args]  # as main() does
    stderr = io.StringIO()
    try:
        with redirect_stderr(stderr), redirect_stdout(io.StringIO()):
            lenient_parser().parse_args(args)
    except SystemExit as exc:
        if exc.code:
            return next(line for line in stderr.getvalue().splitlines() if ": error: " in line)
    return None


@functools.cache
def serve_flags() -> frozenset[str]:
    serve = _subcommands(lenient_parser())["serve"]
    return frozenset(flag for action in serve._actions for flag in action.option_strings)


def settings_keys() -> list[str]:
    from exporter.app.settings import OPTIONS

    return [option.key for option in OPTIONS]


@functools.cache
def settings_sections() -> frozenset[str]:
    return frozenset(key.split(".")[0] for key in settings_keys() if "." in key)


@functools.cache
def env_names() -> tuple[str, ...]:
    """The settings' variables and every ``CANN_*`` name the code and deploy files read."""
    from exporter.app.settings import OPTIONS

    names = {option.env_name for option in OPTIONS}
    for top in ("exporter", "deploy"):
        for folder, _, files in os.walk(ROOT / top):
            for file in files:
                if not file.endswith((".pyc", ".png")):
                    text = Path(folder, file).read_text(encoding="utf-8", errors="replace")
                    names.update(re.findall(r"CANN_[A-Z0-9_]+", text))
    return tuple(names)


@functools.cache
def make_targets() -> frozenset[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    rules = re.findall(r"^([\w.-]+(?:[ \t]+[\w.-]+)*)[ \t]*:(?!=)", text, re.MULTILINE)
    return frozenset(target for rule in rules for target in rule.split() if not target.startswith("."))


@functools.cache
def extras() -> frozenset[str] | None:
    """pyproject's extras; None on Python 3.10 (no tomllib): extras go unchecked there."""
    try:
        import tomllib
    except ImportError:
        return None
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return frozenset(project.get("optional-dependencies", {}))


def module_exists(name: str) -> bool:
    # The docs' commands run from the repository root: `benchmarks` is importable there.
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False


@functools.cache
def routes() -> frozenset[tuple[str, str]]:
    """(method, path) of every route the serve command's app has, the ingest API included."""
    from prometheus_client import CollectorRegistry

    from exporter.jobs import http as ingest_http
    from exporter.jobs.store import IngestStore
    from exporter.profiles.posted import PostedProfiles
    from exporter.web.app import create_app

    app = create_app(CollectorRegistry(), lambda: True, routes=ingest_http.routes(IngestStore(), None, PostedProfiles()))
    return frozenset((route.method, route.resource.canonical) for route in app.router.routes())


@functools.cache
def repo_names() -> frozenset[str]:
    """Every file and directory name in the repository (hidden, cache and build dirs left out)."""
    names = set()
    for _, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__" and not d.endswith(".egg-info")]
        names.update(dirs, files)
    return frozenset(names)


# --- checks -----------------------------------------------------------------------------


def check_shell(line: str, *, complete: bool = True) -> Iterator[str]:
    """Problems of one shell line; ``complete=False`` (inline code) allows missing arguments."""
    for command in commands(line):
        name, args = program(command)
        yield from _check_extras(command)
        if name == "cann-exporter":
            yield from _check_cli(args, complete)
        elif re.fullmatch(r"python[\d.]*", name):
            yield from _check_python(args, complete)
        elif name == "make":
            yield from _check_make(args)


def _check_cli(args: list, complete: bool) -> Iterator[str]:
    for argv in dict.fromkeys(map(tuple, variants(args))):  # ordered, without repeats
        error = cli_error(list(argv))
        if error is not None and (complete or "arguments are required" not in error):
            yield f"cann-exporter {' '.join(argv)}: {error}"


def _check_python(args: list, complete: bool) -> Iterator[str]:
    words = [w for w in args if isinstance(w, str)]
    if words[:1] == ["-m"] and len(words) > 1:
        if words[1] == "exporter":
            yield from _check_cli(args[2:], complete)
        elif not module_exists(words[1]):
            yield f"no module {words[1]}"
    elif words and words[0].endswith(".py") and not (ROOT / words[0]).is_file():
        yield f"no script {words[0]}"


def _check_make(args: list) -> Iterator[str]:
    for word in (w for w in args if isinstance(w, str)):
        if not word.startswith("-") and "=" not in word and word not in make_targets():
            yield f"no make target {word}"


def _check_extras(command: list) -> Iterator[str]:
    for word in _flatten(command):
        if (match := re.fullmatch(r"cann-exporter\[([\w,-]+)\]", word)) and extras() is not None:
            yield from (f"no extra {extra}" for extra in match[1].split(",") if extra not in extras())


def check_flags(text: str) -> Iterator[str]:
    """Dotted flags named on their own in prose (``--web.config.file``, ``--no-collector.NAME``)."""
    for flag in re.findall(r"(?<![\w-])--[\w-]+\.[\w.-]+", text):
        if not fnmatch.filter(serve_flags(), _wildcards(flag.rstrip("."))):
            yield f"no flag {flag}"


HEADING = re.compile(r"^(#{1,6})\s")
HEADING_COMMAND = re.compile(r"`cann-exporter ([a-z][\w-]*)")


def command_scopes(text: str) -> dict[int, str]:
    """Line -> the command whose section (a heading naming `cann-exporter COMMAND`, down to the
    next heading of its level or above) holds it."""
    scopes: dict[int, str] = {}
    scope: tuple[int, str] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if heading := HEADING.match(line):
            level, named = len(heading[1]), HEADING_COMMAND.search(line)
            if named and named[1] in _subcommands(lenient_parser()):
                scope = (level, named[1])
            elif scope and level <= scope[0]:
                scope = None
        if scope:
            scopes[number] = scope[1]
    return scopes


def check_scoped_flag(text: str, command: str | None) -> Iterator[str]:
    """A bare flag (``--step``, ``--range 1h``) in a command's section must be that command's."""
    if command is None or not (match := re.fullmatch(r"(--[\w-]+)(?:[ =].*)?", text)):
        return
    parser = _subcommands(lenient_parser())[command]
    if match[1] not in {flag for action in parser._actions for flag in action.option_strings}:
        yield f"cann-exporter {command} has no flag {match[1]}"


def check_names(text: str) -> Iterator[str]:
    """Settings keys (``npu_smi.timeout``), ``CANN_*`` variables and fixture names in prose."""
    for word in (w.strip(",;:()") for w in text.split()):
        if re.fullmatch(r"[a-z_]+\.[\w*]+", word) and word.split(".")[0] in settings_sections() and not word.endswith(FILE_SUFFIXES):
            if not fnmatch.filter(settings_keys(), _wildcards(word)):
                yield f"no setting {word}"
        elif re.fullmatch(r"CANN_[A-Z0-9_]+\*?", word) and not fnmatch.filter(env_names(), _wildcards(word)):
            yield f"no variable {word}"
        elif FIXTURE.fullmatch(word) and not any(n.startswith(word + ".") for n in repo_names()):
            yield f"no fixture {word}"


def _wildcards(word: str) -> str:
    """``collector.NAME``, ``CANN_EXPORTER_COLLECTOR_NAME``: NAME stands for any name."""
    return re.sub(r"(?<=[._])NAME$", "*", word)


def check_inline_paths(text: str, doc_dir: Path) -> Iterator[str]:
    words = [w.lstrip("(").rstrip(",;:)") for w in text.split()]
    for index, word in enumerate(words):
        method = words[index - 1] if index and words[index - 1] in METHODS else None
        if word.startswith("/") and PATH_WORD.fullmatch(word):
            yield from check_endpoint(word, method)
        elif is_repo_path(word, doc_dir):
            yield from check_path(word, doc_dir)
    yield from check_urls(text)


def is_repo_path(word: str, doc_dir: Path) -> bool:
    """Whether a word of inline code is a path of this repository (see the module docstring)."""
    if not PATH_WORD.fullmatch(word) or word.startswith(("-", "~", "#", *ELLIPSES)) or word in UPSTREAM_PATHS:
        return False
    if "/" not in word:
        return word.endswith(".py")
    first = word.split("/", 1)[0]
    return first in (".", "..") or any((base / first).exists() for base in (doc_dir, ROOT, PACKAGE))


def check_endpoint(path: str, method: str | None) -> Iterator[str]:
    path = path.split("#")[0].rstrip(".")
    if path.split("/")[1] in SYSTEM_DIRS or path.startswith(FOREIGN_ENDPOINTS):
        return
    known = {p for m, p in routes() if method is None or m == method}
    if path not in known:
        yield f"no route {method + ' ' if method else ''}{path}"


def check_urls(text: str) -> Iterator[str]:
    for path in re.findall(rf":{EXPORTER_PORT}(/[\w./-]*)", text):
        yield from check_endpoint(path, None)


def check_path(word: str, doc_dir: Path) -> Iterator[str]:
    pattern = _as_glob(word.split("#")[0])
    if not pattern:
        return
    if "/" not in pattern:  # a module name: anywhere in the repository
        if pattern in repo_names():
            return
    elif any(_matches(base, pattern) for base in (doc_dir, ROOT, PACKAGE)):
        return
    yield f"no file {word}"


def _as_glob(word: str) -> str:
    parts = []
    for part in word.split("/"):
        if part in ELLIPSES:
            return "/".join(parts) + "/"
        part = re.sub(r"<[^>]+>", "*", part)
        parts.append("*" if re.fullmatch(r"[A-Z][A-Z0-9_]*", part) else part)
    return "/".join(parts)


def _matches(base: Path, pattern: str) -> bool:
    hits = glob.glob(pattern.rstrip("/"), root_dir=base, recursive=True)
    return any((base / hit).is_dir() or not pattern.endswith("/") for hit in hits)


def check_link(target: str, doc: Path) -> Iterator[str]:
    if re.match(r"[a-z][\w+.-]*:", target):  # a URL
        yield from check_urls(target)
        return
    path, _, anchor = target.partition("#")
    file = (ROOT / doc).parent / path if path else ROOT / doc
    if not file.exists():
        yield f"no file {path}"
    elif anchor and file.suffix == ".md" and anchor not in heading_slugs(file):
        yield f"no heading #{anchor} in {file.relative_to(ROOT)}"


@functools.cache
def heading_slugs(file: Path) -> frozenset[str]:
    """GitHub's anchors: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(
        r"^#{1,6}\s+(.+?)\s*#*$", _take_fences(file.read_text(encoding="utf-8").splitlines(), Doc([], [], [])), re.MULTILINE
    )
    return frozenset(re.sub(r"[^\w\- ]", "", h.lower().replace("`", "")).replace(" ", "-") for h in headings)


def problems(text: str, doc: Path) -> list[str]:
    """Every problem of one markdown text, as ``doc:line: problem: snippet``."""
    parsed = parse_markdown(text)
    doc_dir = (ROOT / doc).parent
    found = []
    for snippet in parsed.shell:
        found += [(snippet, p) for p in check_shell(snippet.text)]
    scopes = command_scopes(text)
    for snippet in parsed.inline:
        found += [(snippet, p) for p in check_scoped_flag(snippet.text, scopes.get(snippet.line))]
        found += [(snippet, p) for p in check_shell(snippet.text, complete=False)]
        found += [(snippet, p) for p in check_flags(snippet.text)]
        found += [(snippet, p) for p in check_names(snippet.text)]
        found += [(snippet, p) for p in check_inline_paths(snippet.text, doc_dir)]
    for snippet in parsed.links:
        found += [(snippet, p) for p in check_link(snippet.text, doc)]
    return [f"{doc}:{s.line}: {p}: {s.text}" for s, p in sorted(found, key=lambda f: f[0].line)]


# --- tests ------------------------------------------------------------------------------


@pytest.mark.parametrize("doc", doc_files(), ids=str)
def test_doc_matches_the_code(doc: Path) -> None:
    found = problems((ROOT / doc).read_text(encoding="utf-8"), doc)
    assert not found, "\n" + "\n".join(found)


def test_docs_are_found() -> None:
    assert {Path("README.md"), Path("docs/install.md"), Path("tests/fixtures/README.md")} <= set(doc_files())


BROKEN = """\
# Broken

```sh
cann-exporter serve --no-such-flag
make no-such-target
python -m exporter.no_such_module
pip install 'cann-exporter[no-such-extra]' && python no_such_script.py
```

Run `cann-exporter diagnose --format yaml`, then read `exporter/no_such_file.py` and
[the missing doc](docs/missing.md), or scrape `/no-such-endpoint` and `GET /api/v1/steps`.
Set `npu_smi.no_such_key`, `CANN_EXPORTER_NO_SUCH` or `--no-such.flag`; see
[install](docs/install.md#no-such-heading), `info__no-chip__1.0__1` and `alerts/*.yaml`.

## `cann-exporter diagnose`

Narrow `--selector` or coarsen `--step`.
"""


def test_the_checks_catch_drift() -> None:
    found = "\n".join(problems(BROKEN, Path("README.md")))
    for expected in (
        "README.md:4: cann-exporter serve --no-such-flag",
        "README.md:5: no make target no-such-target",
        "README.md:6: no module exporter.no_such_module",
        "README.md:7: no extra no-such-extra",
        "README.md:7: no script no_such_script.py",
        "README.md:10: cann-exporter diagnose --format yaml",
        "README.md:10: no file exporter/no_such_file.py",
        "README.md:11: no file docs/missing.md",
        "README.md:11: no route /no-such-endpoint",
        "README.md:11: no route GET /api/v1/steps",
        "README.md:12: no setting npu_smi.no_such_key",
        "README.md:12: no variable CANN_EXPORTER_NO_SUCH",
        "README.md:12: no flag --no-such.flag",
        "README.md:13: no heading #no-such-heading",
        "README.md:13: no fixture info__no-chip__1.0__1",
        "README.md:13: no file alerts/*.yaml",
        "README.md:17: cann-exporter diagnose has no flag --step: --step",
    ):
        assert expected in found, found


def test_synopsis_notation_passes() -> None:
    text = """\
```sh
cann-exporter serve [--config FILE] [--listen HOST:PORT] [--simulate [SCENARIO]]   # comment
cann-exporter diagnose [--prometheus URL --range 1h | --metrics-url URL] [--format json|markdown]
cann-exporter once  [same options] | grep npu_up
$(BIN)/python -m exporter --log.format logfmt
```

`cann-exporter profile <export> --top 10`, `--collector.NAME`, `POST /api/v1/steps`, `alerts/*.yml`,
`collector.NAME`, `CANN_EXPORTER_INGEST_*`, `cann-exporter report`.
"""
    assert problems(text, Path("README.md")) == []
