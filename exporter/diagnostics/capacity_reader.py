"""The capacity report's history from Prometheus: range queries with a step sized to the window
(30d -> 1h), every gauge averaged over each step so coarse steps lose nothing.

Chip-hours count observed time only: a step between two steps with samples counts whole; the
step where a chip's samples begin counts from its first sample, the step where they stop (the
chip removed, a scrape gap, the end of the data) up to its last one, both read from sample
timestamps (a subquery over that step of the timestamps of each minute's samples: the last
sample exactly, the first to within a minute, never early). So day one, a chip added an hour ago and a gap longer than a
step add only the time between samples.

With the recording rules loaded and a step of whole hours (30 days and more), every query reads
the hourly per-chip records instead (capacity_queries.py), the per-chip ones in batches of
nodes; the seconds observed then come from the records (evaluations of the rollup group)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from exporter.core.values import format_duration
from exporter.diagnostics.capacity import (
    CapacityInput,
    ChipHistory,
    NodeHbm,
    NodeInventory,
    choose_step,
)
from exporter.diagnostics.capacity_queries import (
    RECORDED_STEP,
    ReportQueries,
    raw_queries,
    recorded_held,
    recorded_nodes,
    recorded_queries,
)
from exporter.diagnostics.model import CannotDiagnose
from exporter.diagnostics.promapi import (
    PrometheusClient,
    PrometheusError,
    Series,
    promql_duration,
    selector,
)
from exporter.jobs.metrics import JOB_INFO
from exporter.npusmi.metrics import (
    AICORE,
    DEVICES,
    EXPECTED_DEVICES,
    HBM_TOTAL,
    HBM_USED,
    HEALTH,
    PROCESS_MEMORY,
    UP,
)
from exporter.owners.metrics import OWNER_INFO
from exporter.pods.metrics import POD_INFO
from exporter.thresholds.records import REPORT_OWNER, REPORT_UTIL
from exporter.thresholds.table import Thresholds

ChipKey = tuple[str, str, str, str]
RESOLUTION = 60.0  # seconds between the evaluations that find a step's first and last sample
MAX_EDGE_STEPS = 48  # steps where some chip's samples begin or stop, read one by one; more: one coarser range query
Point = tuple[float, float]
# For the progress line: history held, utilization, edges (2), 3 in-use sources, namespaces, owners, health, HBM used and total.
QUERIES = 12
MAX_FITS = 4  # finer steps tried when the data covers less than the range asked for
MIN_RECORDED_SPAN = 86400.0  # records held for less (rules loaded lately): the raw series are read
NODE_SPAN = 86400.0  # seconds: the step of the query for the nodes with records (see _recorded_nodes)
BATCH_CHIPS = 1000  # chips per batch of per-chip record queries: 720 points each, about 14 MiB of JSON


def aligned_window(end: float, seconds: float, step: float) -> tuple[float, float]:
    """(first, last) step ends: enough points to cover ``seconds``, the last at ``end`` rounded
    down to the whole minute (to the step when it is shorter), so that no step ends on a scrape
    and the data of the last, partial hour or day is in the window."""
    grain = min(step, RESOLUTION)
    last = math.floor(end / grain) * grain
    count = max(1, math.ceil(seconds / step - 1e-9))
    return last - (count - 1) * step, last


@dataclass(frozen=True)
class Window:
    first: float  # end of the first step
    last: float  # end of the last step
    step: float
    requested: float | None = None  # seconds asked for, when the data began later and the window was cut to it
    recorded: bool = False  # read from the hourly records (capacity_queries.recorded_queries)
    nodes: tuple[tuple[str, int], ...] = ()  # recorded: each node's chips with records (the per-chip queries' batches)


def fit_window(
    client: PrometheusClient, end: float, seconds: float, step: float | None, matchers: str, progress: Callable[[str], None] | None = None
) -> Window:
    """``seconds`` ending at ``end``; when the chips' data begins later, the window starts at
    the step where it begins and, unless ``step`` is given, gets a step sized to the data that
    exists (30d asked, 7 minutes held: 1m steps over those minutes). One cheap query per try
    (one series: how many chips had samples in each step)."""
    if progress:
        progress("history held")
    what = selector(AICORE.name, matchers)
    current = step or choose_step(seconds)
    first, last = aligned_window(end, seconds, current)
    requested = None
    try:
        recorded = _fit_recorded(client, first, last, current, matchers)
        if recorded is not None:
            return recorded if recorded.first == first else replace(recorded, requested=seconds)
        for _ in range(MAX_FITS):
            held = client.range(f"count(count_over_time({what}[{promql_duration(current)}]))", first, last, current)
            if not held:
                where = f" matching {{{matchers}}}" if matchers else ""
                raise CannotDiagnose(
                    f"Prometheus at {client.url} has no {AICORE.name} series{where} between {_iso(first - current)} and "
                    f"{_iso(last)}: nothing to plan with. Check --selector and --range, and that Prometheus scrapes "
                    "cann-exporter"
                )
            begins = min(t for t, _ in held[0].points)
            if begins <= first:
                break
            requested = seconds
            span = last - begins + current  # the step where the data begins, to the end
            finer = step or choose_step(span)
            if finer == current:
                first = begins
                break
            current = finer
            first, last = aligned_window(end, span, current)
    except PrometheusError as exc:
        raise CannotDiagnose(str(exc)) from None
    return Window(first, last, current, requested)


def _fit_recorded(client: PrometheusClient, first: float, last: float, step: float, matchers: str) -> Window | None:
    """The window on the hourly records, cut to where they begin; None when the step is not
    whole hours or they hold less than MIN_RECORDED_SPAN of it (read the raw series then)."""
    if step % RECORDED_STEP:
        return None
    held = _recorded_nodes(client, matchers, first, last, step)
    if held is None:
        return None
    nodes, begins = held
    if begins > first and last - begins + step < MIN_RECORDED_SPAN:
        return None
    return Window(max(first, begins), last, step, recorded=True, nodes=tuple(sorted(nodes.items())))


def _recorded_nodes(client: PrometheusClient, matchers: str, first: float, last: float, step: float) -> tuple[dict[str, int], float] | None:
    """(each node's chips with records, the first step with records) of the window; None
    without records. Two small queries: per node and day (days on the window's grid of
    steps), then the steps of the first day with records."""
    span = step * math.ceil(NODE_SPAN / step)
    days = math.ceil((last - first + step) / span)
    held = client.range(recorded_nodes(matchers, span), last - (days - 1) * span, last, span)
    if not held:
        return None
    nodes = {s.labels.get("instance", ""): int(max(v for _, v in s.points)) for s in held}
    day = min(t for s in held for t, _ in s.points)
    found = client.range(recorded_held(matchers, step), max(first, day - span + step), day, step)
    return nodes, min((t for s in found for t, _ in s.points), default=day)


def _key(labels: dict[str, str]) -> ChipKey:
    return (labels.get("instance", ""), labels.get("npu", ""), labels.get("chip", ""), labels.get("device", ""))


def _held_by(found: list[Series], *labels: str) -> dict[ChipKey, set[tuple[Any, ...]]]:
    """Per chip, (step end, *label values) of each series holding it (a namespace's pod, an
    owner): a set, so the same chip's series from two scrape jobs count once."""
    out: dict[ChipKey, set[tuple[Any, ...]]] = {}
    for series in found:
        values = tuple(series.labels.get(label, "") for label in labels)
        out.setdefault(_key(series.labels), set()).update((t, *values) for t, _ in series.points)
    return out


def read_capacity(
    client: PrometheusClient,
    start: float,
    end: float,
    step: float,
    matchers: str,
    progress: Callable[[str], None] | None = None,
    requested: float | None = None,
    unhealthy_states: tuple[str, ...] = ("Alarm", "Critical"),
    recorded: bool = False,
    nodes: Mapping[str, int] | None = None,
) -> CapacityInput:
    """``nodes``: each node's chips with records (``Window.nodes``), else asked for when recorded."""

    where = f" matching {{{matchers}}}" if matchers else ""
    paging = selector(HEALTH.name, matchers, f'state=~"{"|".join(unhealthy_states)}"')
    try:
        batches = (node_batches(nodes) if nodes else _node_batches(client, matchers, start, end, step)) if recorded else [""]
        queries = [
            recorded_queries(matchers, step, extra) if recorded else raw_queries(matchers, step, unhealthy_states) for extra in batches
        ]
        per_node = recorded_queries(matchers, step) if recorded else queries[0]  # small: never batched
        figures: list[Callable[[ReportQueries], str]] = [lambda q: q.util]
        if recorded:
            figures.append(lambda q: q.observed or "")
        figures += [_in_use_source(index) for index in range(len(queries[0].in_use))]
        figures += [lambda q: q.namespaces, lambda q: q.owners, lambda q: q.unhealthy]
        plan = [pick(q) for pick in figures for q in queries] + [per_node.hbm_used, per_node.hbm_total]
        with client.ranges(plan, start, end, step) as answers:

            def each(what: str, count: int = len(queries)) -> list[Series]:
                """The next figure of the plan: its answers, all batches."""
                if progress:
                    progress(what)
                return [s for _ in range(count) for s in next(answers)]

            util = each("chip utilization")
            if not util:
                raise CannotDiagnose(
                    f"Prometheus at {client.url} has no {REPORT_UTIL if recorded else AICORE.name} series{where} between "
                    f"{_iso(start)} and {_iso(end)}: nothing to plan with. Check --selector and --range, and that "
                    "Prometheus scrapes cann-exporter"
                )
            if recorded:
                edges = _recorded_observed(each("seconds observed"), util, step)
            else:
                edges = _edges(client, selector(AICORE.name, matchers), util, start, end, step, progress)
            in_use: dict[tuple[str, str], set[float]] = {}
            found_in_use = False
            for what, _ in queries[0].in_use:
                for series in each(what):
                    found_in_use = True
                    slot = in_use.setdefault((series.labels.get("instance", ""), series.labels.get("device", "")), set())
                    slot.update(t for t, _ in series.points)
            pods, held = each("namespaces"), each("owners")
            namespaces, owners = _held_by(pods, "namespace"), _held_by(held, "runtime", "owner")
            unhealthy: dict[tuple[str, str], set[float]] = {}
            for series in each("health"):
                unhealthy.setdefault((series.labels.get("instance", ""), series.labels.get("device", "")), set()).update(
                    t for t, _ in series.points
                )
            # at the window's end: over the whole window from raw series, over its last step from records
            inventory = read_inventory(client, end, step if recorded else end - start + step, matchers, paging)
            used = _by_instance(each("HBM used", 1))
            total = _by_instance(each("HBM total", 1))
    except PrometheusError as exc:
        raise CannotDiagnose(str(exc)) from None
    name = node_names(util)
    chips = tuple(
        sorted(
            (
                replace(
                    _chip(series, in_use, namespaces, owners, edges),
                    instance=name(series.labels.get("instance", "")),
                    unhealthy=frozenset(unhealthy.get((series.labels.get("instance", ""), series.labels.get("device", "")), ())),
                )
                for series in util
            ),
            key=lambda c: (c.instance, _num(c.npu), _num(c.chip), _num(c.device)),
        )
    )
    hbm = tuple(NodeHbm(name(i), used[i], total[i]) for i in sorted(set(used) & set(total)))
    notes = []
    if not found_in_use:
        notes.append(
            f"no {PROCESS_MEMORY.name}, {POD_INFO.name} or {JOB_INFO.name} series: a chip counts as "
            "in use when its utilization is at least 1%"
        )
    if not pods:
        notes.append(f"no {POD_INFO.name} series (kubelet pod-resources): utilization per namespace not shown")
    if not held:
        notes.append(
            f"no {REPORT_OWNER if recorded else OWNER_INFO.name} series (the exporter's owner source, collector.owners): "
            "chip-hours per owner not shown"
        )
    if not hbm:
        notes.append(f"no {HBM_USED.name} / {HBM_TOTAL.name} series: HBM headroom not shown")
    else:
        without = sorted({c.instance for c in chips} - {n.instance for n in hbm})
        if without:
            notes.append(f"no {HBM_USED.name} / {HBM_TOTAL.name} series from {', '.join(without)}: not in the HBM headroom")
    source = f"Prometheus {client.url}" + (f" {{{matchers}}}" if matchers else "")
    if recorded:
        notes.append(f"read from the hourly recording rules ({REPORT_UTIL} and the records beside it), not the raw series")
    if requested is not None:
        notes.append(
            f"--range asked for {format_duration(requested)}; {AICORE.name} begins {_iso(start - step)} "
            f"(to within one {format_duration(step)} step): the report covers the "
            f"{format_duration(end - start + step)} that exist"
        )
    return CapacityInput(
        source,
        start,
        end,
        step,
        chips,
        hbm,
        found_in_use,
        bool(pods),
        tuple(notes),
        requested,
        {name(i): v for i, v in inventory.items()},
        bool(held),
    )


def _in_use_source(index: int) -> Callable[[ReportQueries], str]:
    return lambda q: q.in_use[index][1]


def unhealthy_states(table: Thresholds) -> tuple[str, ...]:
    """npu-smi Health states that page (NPUUnhealthy's params.states)."""
    spec = table.find("NPUUnhealthy")
    return tuple(spec.param("states", ("Alarm", "Critical"))) if spec else ("Alarm", "Critical")


def read_inventory(client: PrometheusClient, end: float, seconds: float, matchers: str, paging: str) -> dict[str, NodeInventory]:
    """Each node's chips at the window's end: installed (config, else PCI), listed, unhealthy, unread."""
    r = promql_duration(seconds)

    def per_node(query: str) -> dict[str, int]:
        return {s.labels.get("instance", ""): int(s.value) for s in client.instant(query, end)}

    config = selector(EXPECTED_DEVICES.name, matchers, 'source="config"')
    expected = per_node(
        f"max by (instance) (last_over_time({config}[{r}]))"
        f" or max by (instance) (last_over_time({selector(EXPECTED_DEVICES.name, matchers)}[{r}]))"
    )
    seen = per_node(f"max by (instance) (last_over_time({selector(DEVICES.name, matchers)}[{r}]))")
    sick = per_node(f"count by (instance) (last_over_time({paging}[{r}]) == 1)")
    unread = per_node(f"count by (instance) (last_over_time({selector(UP.name, matchers)}[{r}]) == 0)")
    return {
        i: NodeInventory(expected.get(i), seen.get(i), sick.get(i, 0), unread.get(i, 0))
        for i in set(expected) | set(seen) | set(sick) | set(unread)
    }


def _node_batches(client: PrometheusClient, matchers: str, start: float, end: float, step: float) -> list[str]:
    """node_batches of the nodes with records in the window."""
    held = _recorded_nodes(client, matchers, start, end, step)
    return node_batches(held[0] if held else {})


def node_batches(chips: Mapping[str, int]) -> list[str]:
    """Matchers splitting the nodes (node -> chips) into batches of at most BATCH_CHIPS chips
    (one batch, no matcher, when they fit)."""
    if sum(chips.values()) <= BATCH_CHIPS:
        return [""]
    batches: list[list[str]] = [[]]
    size = 0
    for instance in sorted(chips):
        if batches[-1] and size + chips[instance] > BATCH_CHIPS:
            batches.append([])
            size = 0
        batches[-1].append(instance)
        size += chips[instance]
    return [f'instance=~"{_promql_string("|".join(re.escape(i) for i in batch))}"' for batch in batches]


def _promql_string(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _recorded_observed(partial: list[Series], util: list[Series], step: float) -> dict[ChipKey, tuple[Point, ...]]:
    """Per chip, the seconds observed of each point: the whole step unless its record says less."""
    less = {_key(s.labels): dict(s.points) for s in partial}
    out = {}
    for s in util:
        key = _key(s.labels)
        seconds = less.get(key, {})
        out[key] = tuple((t, seconds.get(t, step)) for t, _ in s.points)
    return out


def _num(text: str) -> int:
    return int(text) if text.isdigit() else 1 << 30


def _edges(
    client: PrometheusClient, what: str, util: list[Series], start: float, end: float, step: float, progress: Callable[[str], None] | None
) -> dict[ChipKey, tuple[Point, ...]]:
    """Per chip, the observed seconds of each of its points (observed_seconds).

    Only the steps where a chip's samples begin or stop need sample times: one instant query
    for the steps just outside the window, then two per distinct edge step (a subquery over
    one step, every minute), or, past MAX_EDGE_STEPS of them, two range queries at a coarser
    resolution (a twelfth of the step)."""
    s = promql_duration(step)
    if progress:
        progress("chips before and after the window")
    outside: dict[ChipKey, set[float]] = {}
    for at in (start - step, end + step):
        for sample in client.instant(f"count_over_time({what}[{s}])", at):
            outside.setdefault(_key(sample.labels), set()).add(at)
    edges: dict[ChipKey, set[float]] = {}
    for series in util:
        key, times = _key(series.labels), {t for t, _ in series.points} | outside.get(_key(series.labels), set())
        edges[key] = {t for t, _ in series.points if t - step not in times or t + step not in times}
    if progress:
        progress("first and last samples")
    first: dict[ChipKey, dict[float, float]] = {}
    last: dict[ChipKey, dict[float, float]] = {}
    at_steps = sorted(set().union(*edges.values())) if edges else []

    def query(fn: str, resolution: float) -> str:
        return f"{fn}((timestamp({what}) > time() - {resolution:g})[{s}:{promql_duration(resolution)}])"

    if len(at_steps) <= MAX_EDGE_STEPS:
        for at in at_steps:
            for found, fn in ((first, "min_over_time"), (last, "max_over_time")):
                for sample in client.instant(query(fn, RESOLUTION), at):
                    found.setdefault(_key(sample.labels), {})[at] = sample.value
    else:
        resolution = max(RESOLUTION, step / 12)
        for found, fn in ((first, "min_over_time"), (last, "max_over_time")):
            for series in client.range(query(fn, resolution), start, end, step):
                found.setdefault(_key(series.labels), {}).update(series.points)
    return {
        key: observed_seconds(series.points, first.get(key, {}), last.get(key, {}), step, outside.get(key, set()))
        for series in util
        for key in (_key(series.labels),)
    }


def observed_seconds(
    util: tuple[Point, ...], first: dict[float, float], last: dict[float, float], step: float, outside: Iterable[float] = ()
) -> tuple[Point, ...]:
    """(step end, seconds observed) of each point: the whole step when the steps before and
    after have samples too (a point, or a step just outside the window in ``outside``), else
    from the step's first or up to its last sample."""
    times = {t for t, _ in util} | set(outside)
    out = []
    for t, _ in util:
        begin = t - step if t - step in times else max(t - step, first.get(t, t - step))
        stop = t if t + step in times else min(t, last.get(t, t))
        out.append((t, max(0.0, stop - begin)))
    return tuple(out)


def _chip(
    series: Series,
    in_use: dict[tuple[str, str], set[float]],
    namespaces: dict[ChipKey, set[tuple[Any, ...]]],
    owners: dict[ChipKey, set[tuple[Any, ...]]],
    edges: dict[ChipKey, tuple[Point, ...]],
) -> ChipHistory:
    key = _key(series.labels)
    observed = edges.get(key, ())
    return ChipHistory(
        key[0],
        key[1],
        key[2],
        key[3],
        series.points,
        frozenset(in_use.get((key[0], key[3]), ())),
        tuple(sorted(namespaces.get(key, ()))),
        observed,
        owners=tuple(sorted(owners.get(key, ()))),
    )


def node_names(series: Iterable[Series]) -> Callable[[str], str]:
    """Target -> its `node` label (as the Kubernetes relabeling and the shipped scrape configs
    give it), where every target of that node name is this one; else the target itself."""
    nodes: dict[str, set[str]] = {}
    for s in series:
        if s.labels.get("node"):
            nodes.setdefault(s.labels.get("instance", ""), set()).add(s.labels["node"])
    targets: dict[str, set[str]] = {}
    for instance, names in nodes.items():
        for node in names:
            targets.setdefault(node, set()).add(instance)
    unique = {i: next(iter(n)) for i, n in nodes.items() if len(n) == 1 and len(targets[next(iter(n))]) == 1}
    return lambda instance: unique.get(instance, instance)


def _by_instance(series: list[Series]) -> dict[str, tuple[tuple[float, float], ...]]:
    return {s.labels.get("instance", ""): s.points for s in series}


def _iso(t: float) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t))
