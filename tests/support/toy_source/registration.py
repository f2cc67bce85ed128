"""The toy source's registration: its builder, its switch, its section and its description."""

from __future__ import annotations

from exporter.core.registration import Build, Collect, Registration, Switch
from exporter.core.source import Sampled, Source
from exporter.toy.collector import ToyCollector
from exporter.toy.options import TOY_OPTIONS, ToyOptions
from exporter.toy.part import TOY
from exporter.toy.source import ToySource


def build(b: Build[ToyOptions]) -> Source | None:
    if not b.on("toy") or b.options.path is None:
        return None
    return Sampled(TOY.name, ToySource(b.options, b.health))


def describe(b: Build[ToyOptions], source: Source | None) -> str:
    return f"the number in {b.options.path}" if source is not None else "no toy.path"


REGISTRATION = Registration(
    TOY,
    build,
    (Collect("toy", ToyCollector),),
    TOY_OPTIONS,
    (Switch("toy", "a number read from toy.path"),),
    describe,
)
