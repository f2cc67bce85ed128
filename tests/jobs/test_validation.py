"""parse_batch: every class of bad input gets a 4xx, a reason and a message naming the field."""

from __future__ import annotations

import json

import pytest

from exporter.jobs.metrics import INGEST_REJECT_REASONS
from exporter.jobs.phases import STAGES, VOCABULARY
from exporter.jobs.validate import IngestError, IngestLimits, parse_batch

NOW = 1_750_000_000.0
LIMITS = IngestLimits()


def body(**overrides) -> dict:
    doc = {
        "job_name": "bert-large",
        "rank": 1,
        "world_size": 8,
        "device": "3",
        "framework": "pytorch",
        "pid": 4242,
        "dropped": 0,
        "steps": [{"end": NOW - 1, "duration": 0.25, "samples": 32, "phases": {"h2d": 0.02, "compute": 0.2}}],
    }
    doc.update(overrides)
    return doc


def parse(doc, limits: IngestLimits = LIMITS):
    raw = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    return parse_batch(raw, limits, NOW)


def rejected(doc, limits: IngestLimits = LIMITS) -> IngestError:
    with pytest.raises(IngestError) as info:
        parse(doc, limits)
    assert 400 <= info.value.status < 500
    assert info.value.reason in INGEST_REJECT_REASONS
    assert info.value.message
    return info.value


def step(**fields) -> dict:
    return body(steps=[{"duration": 0.1, **fields}])


def test_a_good_batch():
    batch = parse(body())
    assert (batch.job_name, batch.rank, batch.world_size, batch.device, batch.framework, batch.pid) == (
        "bert-large",
        1,
        8,
        "3",
        "pytorch",
        "4242",
    )
    (only,) = batch.steps
    assert only.duration == 0.25 and only.samples == 32 and only.end == NOW - 1
    assert dict(only.phases) == {"h2d": 0.02, "compute": 0.2}
    assert not batch.final


def test_minimal_batch_and_defaults():
    batch = parse({"job_name": "j", "rank": 0, "steps": [{"duration": 0}]})
    assert (batch.world_size, batch.device, batch.framework, batch.pid, batch.dropped) == (1, "", "unknown", "", 0)
    assert batch.steps[0].end is None and batch.steps[0].samples is None and batch.steps[0].phases == ()


def test_empty_steps_is_a_heartbeat():
    assert parse(body(steps=[], final=True)).final


def test_integer_device_is_normalised():
    assert parse(body(device=5)).device == "5"


def test_every_stage_and_word_of_the_vocabulary_is_accepted_under_its_own_name():
    assert set(STAGES) <= set(VOCABULARY)
    batch = parse(step(duration=1.0, phases={name: 0.001 for name in VOCABULARY}))
    assert {name for name, _ in batch.steps[0].phases} == set(VOCABULARY)
    assert batch.unknown_phases == () and batch.unknown_phase_entries == 0


def test_the_names_people_write_are_folded_onto_the_vocabulary():
    phases = {"Forward": 0.1, "backward": 0.2, "optimizer": 0.05, "all-reduce": 0.03, "Data Loading": 0.04, "D2H": 0.01}
    batch = parse(step(duration=0.5, phases=phases))
    assert dict(batch.steps[0].phases) == {
        "forward": 0.1,
        "backward": 0.2,
        "optimizer": 0.05,
        "all_reduce": 0.03,
        "data_loading": 0.04,
        "d2h": 0.01,
    }


def test_an_unknown_phase_name_is_served_as_other_and_reported_back():
    doc = body(steps=[{"duration": 1.0, "phases": {"h2d": 0.1, "fwd2": 0.2, "other": 0.1}}] * 3)
    batch = parse(doc)
    assert dict(batch.steps[0].phases) == {"h2d": 0.1, "other": pytest.approx(0.3)}
    assert batch.unknown_phases == (("fwd2", 3),) and batch.unknown_phase_entries == 3


def test_unknown_phase_names_reported_back_are_bounded():
    names = {f"layer{i}" + "x" * 100: 0.001 for i in range(40)}
    batch = parse(step(duration=1.0, phases=names))
    assert len(batch.unknown_phases) == 16 and all(len(name) == 64 for name, _ in batch.unknown_phases)
    assert batch.unknown_phase_entries == 40


def test_phases_adding_up_to_more_than_the_step_are_rejected():
    """Inclusive times of nested phases (150% of the step) are a client bug, named as such."""
    error = rejected(step(duration=0.2, phases={"compute": 0.2, "communication": 0.1}))
    assert error.reason == "out_of_range" and "exclusive" in error.message
    assert parse(step(duration=0.2, phases={"compute": 0.15, "communication": 0.05}))  # exactly the step: fine


@pytest.mark.parametrize(
    "raw", [b"{", b"not json", b"", b'{"job_name": "a",}', b"\xff\xfe{}", b'{"a": NaN}', b'{"a": Infinity}', b"[" * 100_000]
)
def test_malformed_json(raw):
    assert rejected(raw).reason == "malformed_json"


@pytest.mark.parametrize(
    "raw,key",
    [
        (json.dumps(body()).replace('"rank": 1', '"job_name": "other", "rank": 1').encode(), "job_name"),
        (json.dumps(body()).replace('"duration": 0.25', '"duration": 0.25, "duration": 9.0', 1).encode(), "duration"),
    ],
)
def test_a_key_given_twice_is_refused_not_half_read(raw, key):
    """Issue 45: a step batch with job_name twice was accepted, the last one winning; a key
    given twice anywhere in the body (here in a step too) is refused by name."""
    assert raw.count(f'"{key}"'.encode()) >= 2
    error = rejected(raw)
    assert error.reason == "malformed_json" and f'"{key}" is given twice' in error.message


@pytest.mark.parametrize(
    "doc,where",
    [
        ([], "body"),
        ("text", "body"),
        (body(rank="1"), "rank"),
        (body(rank=True), "rank"),
        (body(rank=1.0), "rank"),
        (body(world_size="8"), "world_size"),
        (body(job_name=7), "job_name"),
        (body(framework=["x"]), "framework"),
        (body(device=3.5), "device"),
        (body(pid="12"), "pid"),
        (body(final="yes"), "final"),
        (body(steps={}), "steps"),
        (body(steps=[1]), "steps[0]"),
        (body(steps=[{"duration": "0.1"}]), "steps[0].duration"),
        (body(steps=[{"duration": None}]), "steps[0].duration"),
        (body(steps=[{"samples": 3}]), "steps[0]"),
        (step(samples=2.5), "steps[0].samples"),
        (step(end="yesterday"), "steps[0].end"),
        (step(phases=[0.1]), "steps[0].phases"),
        (step(phases={"h2d": "fast"}), "steps[0].phases.h2d"),
        (step(extra=1), "steps[0]"),
        (body(memory=5), "memory"),
        (body(memory={"allocated_bytes": "1"}), "memory.allocated_bytes"),
        (body(memory={"reserved": 1}), "memory"),
        (body(color="red"), "body"),
    ],
)
def test_wrong_types_and_fields(doc, where):
    error = rejected(doc)
    assert error.reason == "invalid" and error.status == 400
    assert where in error.message


@pytest.mark.parametrize("key", ["job_name", "rank", "steps"])
def test_missing_required_fields(key):
    doc = body()
    del doc[key]
    error = rejected(doc)
    assert error.reason == "invalid" and key in error.message


@pytest.mark.parametrize(
    "doc,where",
    [
        (step(duration=-0.001), "duration"),
        (b'{"job_name": "j", "rank": 0, "steps": [{"duration": 1e400}]}', "duration"),  # json reads 1e400 as inf
        (step(duration=86_400.5), "duration"),  # longer than a day: absurd
        (body(steps=[{"duration": 0.1, "phases": {"h2d": -1}}]), "h2d"),
        (body(steps=[{"duration": 0.1, "phases": {"compute": 1e9}}]), "compute"),
        (step(samples=-1), "samples"),
        (step(samples=10**12), "samples"),
        (step(end=NOW + 3600), "end"),
        (step(end=NOW - 3 * 86_400), "end"),
        (step(end=0), "end"),
        (body(rank=-1), "rank"),
        (body(rank=8, world_size=8), "rank"),  # rank must be below world_size
        (body(world_size=0), "world_size"),
        (body(pid=0), "pid"),
        (body(dropped=-5), "dropped"),
        (body(memory={"allocated_bytes": -1}), "allocated_bytes"),
    ],
)
def test_out_of_range(doc, where):
    error = rejected(doc)
    assert error.reason == "out_of_range" and where in error.message


@pytest.mark.parametrize(
    "field,value",
    [
        ("job_name", "my job"),
        ("job_name", 'x"}\nnpu_up 1'),
        ("job_name", "ünïcode"),
        ("job_name", ""),
        ("job_name", "-leading-dash"),
        ("job_name", "a" * 129),
        ("job_name", "a" * 100_000),
        ("framework", "py torch"),
        ("framework", "f" * 200),
        ("device", "npu0"),
        ("device", "123456"),
        ("device", "-1"),
    ],
)
def test_bad_label_values(field, value):
    error = rejected(body(**{field: value}))
    assert error.reason == "bad_label" and field in error.message
    assert len(error.message) < 400  # an extreme value is not echoed back whole


def test_label_characters_that_are_allowed():
    batch = parse(body(job_name="team-a/llama_70b:sft@v2.1+exp", framework="torch-2.13"))
    assert batch.job_name == "team-a/llama_70b:sft@v2.1+exp"


def test_too_many_steps_in_one_batch():
    limits = IngestLimits(max_steps=3)
    assert parse(body(steps=[{"duration": 0.1}] * 3), limits)
    error = rejected(body(steps=[{"duration": 0.1}] * 4), limits)
    assert error.reason == "invalid" and "at most 3" in error.message


def test_oversized_body_is_413():
    limits = IngestLimits(max_body_bytes=100)
    error = rejected(body(), limits)
    assert (error.status, error.reason) == (413, "too_large")


def test_session_and_profiling_seconds_are_bounded():
    ok = parse(body(session="9f1c2a7e5b3d4c60", profiling_seconds=0.25))
    assert (ok.session, ok.profiling_seconds) == ("9f1c2a7e5b3d4c60", 0.25)
    assert parse(body()).session == "" and parse(body()).profiling_seconds is None
    assert rejected(body(session="not hex!")).reason == "bad_label"
    assert rejected(body(session="a" * 64)).reason == "bad_label"
    assert rejected(body(profiling_seconds=-1)).reason == "out_of_range"
