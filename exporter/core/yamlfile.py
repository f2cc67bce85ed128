"""One YAML loader for every file an operator writes: the configuration, the web config and the
threshold table.

PyYAML's ``safe_load`` is safe against code, not against size: a few hundred bytes of nested
aliases (a "billion laughs") compose into a graph that every later walk, ``str()`` or merge
expands exponentially, a 5,000-digit integer raises a bare ValueError from ``int()``, an
impossible date (``2024-13-45``) raises one from ``datetime``, and deep nesting exhausts the
recursion limit. :func:`parse_yaml` refuses all of these while composing, before anything
expands, and keeps odd scalars as the text they were written as, so that the option reading
them reports a range error naming its key:

- at most :data:`MAX_ALIASES` aliases, :data:`MAX_NODES` nodes with every alias expanded,
  :data:`MAX_DEPTH` levels of nesting, and no alias of an anchor inside itself;
- integers of more than :data:`MAX_INT_DIGITS` characters and timestamps stay strings
  (no option takes either);
- a NUL byte anywhere in the text is refused with its line.

:func:`read_yaml` adds the file checks of :mod:`exporter.core.inputfile`: a regular file of at
most :data:`MAX_FILE_BYTES`, UTF-8 (a UTF-16/32 byte-order mark is refused by name).
"""

from __future__ import annotations

import os
from typing import Any

import yaml

from exporter.core.errors import ReasonError
from exporter.core.inputfile import MiB, read_text_input

MAX_FILE_BYTES = 1 * MiB
MAX_ALIASES = 100
MAX_NODES = 100_000
MAX_DEPTH = 64
MAX_INT_DIGITS = 32


class YamlRefused(ReasonError):
    """A YAML text refused as a whole; ``message`` names the file and, where known, the line."""


class _Refusal(yaml.YAMLError):
    """Raised inside the loader; :func:`parse_yaml` turns it into :class:`YamlRefused`."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class BoundedLoader(yaml.SafeLoader):
    """SafeLoader counting aliases, expanded nodes and depth while composing."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._aliases = 0
        self._expanded = 0
        self._depth = 0
        self._sizes: dict[int, int] = {}  # id(node) -> nodes it stands for, aliases expanded

    def _count(self, nodes: int, mark: yaml.Mark | None) -> None:
        self._expanded += nodes
        if self._expanded > MAX_NODES:
            raise _Refusal("too_many_nodes", f"more than {MAX_NODES} values once aliases are expanded{_at(mark)}")

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        mark = self.peek_event().start_mark
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _Refusal("too_many_aliases", f"more than {MAX_ALIASES} aliases{_at(mark)}")
            node = super().compose_node(parent, index)
            size = self._sizes.get(id(node))
            if size is None:  # the anchor is still being composed: the alias is inside it
                raise _Refusal("recursive_alias", f"an alias inside its own anchor{_at(mark)}")
            self._count(size, mark)
            return node
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _Refusal("too_deep", f"nested more than {MAX_DEPTH} levels deep{_at(mark)}")
        before = self._expanded
        self._count(1, mark)
        node = super().compose_node(parent, index)
        self._depth -= 1
        self._sizes[id(node)] = self._expanded - before
        return node

    def construct_yaml_int(self, node: yaml.ScalarNode) -> Any:
        text = self.construct_scalar(node)
        if len(text) > MAX_INT_DIGITS:
            return text  # the option reading it says what range it takes
        return super().construct_yaml_int(node)

    def construct_yaml_timestamp(self, node: yaml.ScalarNode) -> Any:
        return self.construct_scalar(node)  # no option is a date; `2024-13-45` must not raise


BoundedLoader.add_constructor("tag:yaml.org,2002:int", BoundedLoader.construct_yaml_int)
BoundedLoader.add_constructor("tag:yaml.org,2002:timestamp", BoundedLoader.construct_yaml_timestamp)


def _at(mark: yaml.Mark | None) -> str:
    return f" (line {mark.line + 1})" if mark is not None else ""


def parse_yaml(text: str, origin: str) -> Any:
    """The document in ``text``; YamlRefused naming ``origin`` for anything refused or not YAML."""
    nul = text.find("\0")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise YamlRefused("nul_byte", f"{origin}: a NUL byte on line {line}; not a text file")
    loader = None
    try:
        loader = BoundedLoader(text)  # the reader checks the characters here already
        return loader.get_single_data()
    except _Refusal as exc:
        raise YamlRefused(exc.reason, f"{origin}: refused: {exc.message}") from None
    except yaml.YAMLError as exc:
        raise YamlRefused("bad_yaml", f"{origin}: not valid YAML: {exc}") from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:  # a constructor's own error
        raise YamlRefused("bad_yaml", f"{origin}: not valid YAML: {exc}") from None
    finally:
        if loader is not None:
            loader.dispose()


def read_yaml(path: str | os.PathLike[str], max_bytes: int = MAX_FILE_BYTES) -> Any:
    """The document in the file at ``path``; InputRefused or YamlRefused (both ReasonError) naming it."""
    return parse_yaml(read_text_input(path, max_bytes), os.fspath(path))
