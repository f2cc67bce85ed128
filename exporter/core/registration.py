"""How a source package registers itself: one :class:`Registration` in its ``registration.py``.

A registration holds everything the rest of the exporter needs to know of a source: its
snapshot key, how it is built from its options, its collectors under their ``collector.*``
switches (declared here, so the flags, YAML keys and ``--help`` follow), its config section,
one ``describe`` for the landing page, the start-up log and check-config, and the tools it runs
(check-config's missing-tool check). node/sources.py lists the registrations in order; nothing
else names a source.

Builders get a :class:`Build`: their own options, the node's shared facts (the commands
resolved before any builder runs, the health registry, the latest snapshot) and the objects
another registration makes (:class:`Shared`), made once on first use whatever the table's order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar

from exporter.core.health import HealthRegistry
from exporter.core.metric import Collector
from exporter.core.snapshot import PartKey, Snapshot
from exporter.core.source import Source

Opts = TypeVar("Opts")
T = TypeVar("T")


class Simulated(NamedTuple):
    """The built-in simulator's scenario and node model, when it stands in for the tools."""

    scenario: str
    model: str


@dataclass(frozen=True)
class Section(Generic[Opts]):
    """A package's options under their YAML key (``npu_smi``), read as ``settings[SECTION]``."""

    key: str
    options: type[Opts]
    serve_only: bool = False  # only `serve` offers its flags (`once` has no server)


@dataclass(frozen=True)
class Switch:
    """A ``collector.NAME`` switch: off, its collectors are not rendered and their source not built."""

    name: str
    help: str
    default: bool = True
    serve_only: bool = False


@dataclass(frozen=True)
class Collect:
    """A collector of the registration's part, rendered while its switch is on."""

    switch: str
    make: Callable[[], Collector[Any]]


@dataclass(frozen=True)
class Tool:
    """A program a source runs, for check-config: the option naming it and its path."""

    key: str  # e.g. npu_smi.path
    path: str
    hint: str = ""  # said after the problem (what would happen instead)


@dataclass(frozen=True, eq=False)
class Shared(Generic[T]):
    """A typed key of an object one registration makes (``provides``) and others use."""

    name: str
    type: type[T]


@dataclass(frozen=True)
class Switches:
    """Every ``collector.*`` switch's value, by name."""

    values: Mapping[str, bool] = field(default_factory=dict)

    def on(self, name: str) -> bool:
        if name not in self.values:
            raise KeyError(f"no collector switch {name!r} is registered (known: {', '.join(self.values)})")
        return self.values[name]


@dataclass
class Context:
    """What every builder shares: made once per node, before the first builder runs."""

    switches: Switches
    health: HealthRegistry
    latest: Callable[[], Snapshot]  # the latest published snapshot
    max_age: float
    sections: Callable[[Section[Any]], object]  # a section's options, from the settings
    commands: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # resolved tool argv, by tool name
    simulated: Simulated | None = None
    simulate: str | None = None  # the scenario asked for (None, auto or a name), for check-config's hints
    sysfs: str | None = None  # the simulated model's sysfs tree (its Ascend PCI functions); None: the host's
    procfs: str | None = None  # the simulated model's procfs tree (its processes' cgroups); None: the host's
    passwd: str | None = None  # the simulated Slurm jobs' users; None: the host's
    serving: bool = True  # False: `once` (no server, so no ingest)
    single_scan: bool = False  # `once`: every finished profile export on the first scan; no hccs-bw
    table: Sequence[Registration[Any]] = ()
    made: dict[Shared[Any], object] = field(default_factory=dict)

    def options(self, section: Section[Opts]) -> Opts:
        """``section``'s options (another package's, where a source reads them)."""
        found = self.sections(section)
        if not isinstance(found, section.options):
            raise TypeError(f"the {section.key!r} options are a {type(found).__name__}, not a {section.options.__name__}")
        return found

    def build(self, registration: Registration[Opts]) -> Build[Opts]:
        options: Any = self.options(registration.section) if registration.section is not None else None
        return Build(self, registration, options)

    def shared(self, key: Shared[T]) -> T | None:
        """The object under ``key``, made by the registration that provides it on first use."""
        if key not in self.made:
            providers = [(r, make) for r in self.table for k, make in r.provides if k is key]
            if len(providers) != 1:
                raise LookupError(f"{len(providers)} registrations provide {key.name!r}, expected one")
            registration, make = providers[0]
            self.made[key] = make(self.build(registration))
        found = self.made[key]
        if found is not None and not isinstance(found, key.type):
            raise TypeError(f"{key.name!r} is a {type(found).__name__}, not a {key.type.__name__}")
        return found


@dataclass(frozen=True)
class Build(Generic[Opts]):
    """One registration's view of the node being built."""

    context: Context
    registration: Registration[Opts]
    options: Opts

    @property
    def max_age(self) -> float:
        return self.context.max_age

    @property
    def health(self) -> HealthRegistry:
        return self.context.health

    @property
    def simulated(self) -> Simulated | None:
        return self.context.simulated

    def on(self, switch: str) -> bool:
        return self.context.switches.on(switch)

    @property
    def rendered(self) -> bool:
        """Some collector of this registration is on."""
        return any(self.on(c.switch) for c in self.registration.collectors)

    @property
    def wanted(self) -> bool:
        """Some collector of this registration is on, or a registration that reads its part is."""
        name = self.registration.name
        return self.rendered or any(name in r.needs and self.context.build(r).rendered for r in self.context.table)

    def command(self, tool: str, path: str) -> tuple[str, ...]:
        """The argv prefix of ``tool``: the one resolved for the node (the simulator's stand-in,
        or npu-smi found on PATH), else ``path``."""
        return self.context.commands.get(tool, (path,))

    def shared(self, key: Shared[T]) -> T | None:
        return self.context.shared(key)


def nothing_to_say(b: Build[Any], source: Source | None) -> str:
    return ""


def no_tools(b: Build[Any]) -> tuple[Tool, ...]:
    return ()


@dataclass(frozen=True)
class Registration(Generic[Opts]):
    """One source: its part's key, its builder and collectors, its options and what it runs."""

    key: PartKey[Any]  # the part's snapshot key and type
    build: Callable[[Build[Opts]], Source | None]  # None: off (by its switch or its own options)
    collectors: tuple[Collect, ...] = ()
    section: Section[Opts] | None = None
    switches: tuple[Switch, ...] = ()  # the collector.* switches declared here
    # What runs for it (given its source) or why it is off (given None): one line.
    describe: Callable[[Build[Opts], Source | None], str] = nothing_to_say
    tools: Callable[[Build[Opts]], tuple[Tool, ...]] = no_tools
    needs: tuple[str, ...] = ()  # parts it reads that must be sampled while it is on (the chips)
    provides: tuple[tuple[Shared[Any], Callable[[Build[Opts]], object]], ...] = ()
    notes: tuple[str, ...] = ()  # what the metric reference says below its table

    @property
    def name(self) -> str:
        return self.key.name


def table_problems(table: Sequence[Registration[Any]]) -> list[str]:
    """What is inconsistent in a table: a name, switch or section declared twice, a collector
    under a switch nobody declares, a part read that no registration makes."""
    problems: list[str] = []

    def twice(kind: str, names: list[str]) -> None:
        problems.extend(f"{kind} {name!r} is declared twice" for name in sorted({n for n in names if names.count(n) > 1}))

    twice("part", [r.name for r in table])
    switches = [s.name for r in table for s in r.switches]
    twice("collector switch", switches)
    twice("section", [r.section.key for r in table if r.section is not None])
    twice("shared object", [key.name for r in table for key, _ in r.provides])
    names = {r.name for r in table}
    for r in table:
        problems += [
            f"{r.name}: collector.{c.switch} is not declared by any registration" for c in r.collectors if c.switch not in switches
        ]
        problems += [f"{r.name}: reads part {need!r}, which no registration makes" for need in r.needs if need not in names]
    return problems
