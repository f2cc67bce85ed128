"""Pure parts: device ids, resource names, response -> attributions, and the proto itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from exporter.pods.kubelet import (
    DEFAULT_RESOURCES,
    PodAttribution,
    attributions_from_response,
    parse_device_id,
    resource_kind,
)
from exporter.pods.podresources_pb import api_pb2 as pb
from tests.support.deploy import require_module
from tests.support.kubelet import container, pod
from tests.support.paths import ROOT


@pytest.mark.parametrize(
    ("resource", "kind"),
    [
        ("huawei.com/Ascend910", "chip"),
        ("huawei.com/Ascend310P", "chip"),
        ("huawei.com/Ascend310", "chip"),
        ("huawei.com/Ascend910-2c", "virtual"),
        ("huawei.com/Ascend910-16c", "virtual"),
        ("huawei.com/Ascend310P-4c.3cpu", "virtual"),
        ("huawei.com/Ascend310P-2c.0.5cpu", "virtual"),
        ("huawei.com/Ascend910-", None),
        ("huawei.com/Ascend9100", None),
        ("huawei.com/npu-core", None),
        ("nvidia.com/gpu", None),
        ("cpu", None),
    ],
)
def test_resource_kind(resource: str, kind: str | None) -> None:
    assert resource_kind(resource, DEFAULT_RESOURCES) == kind


def test_configurable_resource_names() -> None:
    assert resource_kind("example.com/npu", ("example.com/npu",)) == "chip"
    assert resource_kind("huawei.com/Ascend910", ("example.com/npu",)) is None


@pytest.mark.parametrize(
    ("device_id", "kind", "expected"),
    [
        ("Ascend910-0", "chip", (0, None)),
        ("Ascend910-7", "chip", (7, None)),
        ("Ascend910-15", "chip", (15, None)),
        ("Ascend310P-3", "chip", (3, None)),
        ("Ascend910-2c-100-0", "virtual", (0, 100)),
        ("Ascend910-8c-163-6", "virtual", (6, 163)),
        ("Ascend310P-4c.3cpu-101-2", "virtual", (2, 101)),
        ("Ascend310P-2c.0.5cpu-7-1", "virtual", (1, 7)),
        ("Ascend910-2c-x-1", "virtual", (1, None)),
        (" Ascend910-3 ", "chip", (3, None)),
        ("Ascend910", "chip", None),
        ("Ascend910-", "chip", None),
        ("Ascend910-a", "chip", None),
        ("3", "chip", None),
        ("", "chip", None),
        ("Ascend910-99999999", "chip", None),
        ("GPU-8f6d0e5c-aaaa", "chip", None),
    ],
)
def test_parse_device_id(device_id: str, kind: str, expected: tuple[int, int | None] | None) -> None:
    assert parse_device_id(device_id, kind) == expected


def test_attributions_from_a_mixed_answer() -> None:
    response = pb.ListPodResourcesResponse(
        pod_resources=[
            pod(
                "train",
                "llama-0",
                container("main", ("huawei.com/Ascend910", ["Ascend910-0", "Ascend910-1"]), ("cpu", ["1"])),
                container("sidecar"),
            ),
            pod("infer", "svc-1", container("app", ("huawei.com/Ascend910-2c", ["Ascend910-2c-100-3"]))),
            pod("gpu", "other", container("c", ("nvidia.com/gpu", ["GPU-1234"]))),
            pod("x", "core", container("c", ("huawei.com/npu-core", ["npu-core-0"]), ("huawei.com/Ascend910", ["bogus"]))),
        ]
    )
    parsed = attributions_from_response(response)
    assert parsed.attributions == (
        PodAttribution(0, "train", "llama-0", "main", "huawei.com/Ascend910", "Ascend910-0"),
        PodAttribution(1, "train", "llama-0", "main", "huawei.com/Ascend910", "Ascend910-1"),
        PodAttribution(3, "infer", "svc-1", "app", "huawei.com/Ascend910-2c", "Ascend910-2c-100-3", 100),
    )
    # nvidia.com is another vendor's business: ignored, not counted.
    assert parsed.skipped == (
        ("unknown_resource", "huawei.com/npu-core", "npu-core-0"),
        ("bad_device_id", "huawei.com/Ascend910", "bogus"),
    )


def test_empty_and_odd_answers() -> None:
    assert attributions_from_response(pb.ListPodResourcesResponse()).attributions == ()
    assert attributions_from_response(object()).attributions == ()


# --- the wire contract ------------------------------------------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2), encoded by hand."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def test_field_numbers_match_the_kubelet_proto() -> None:
    """Bytes laid out with the kubelet's v1 field numbers (not our generated code) decode right.

    ListPodResourcesResponse{pod_resources=1}; PodResources{name=1, namespace=2, containers=3};
    ContainerResources{name=1, devices=2, cpu_ids=3 (packed int64), dynamic_resources=5};
    ContainerDevices{resource_name=1, device_ids=2}; DynamicResource{claim_name=2}.
    """
    devices = _field(1, b"huawei.com/Ascend910") + _field(2, b"Ascend910-5") + _field(2, b"Ascend910-6")
    cpu_ids = _field(3, _varint(4) + _varint(5))
    dra = _field(5, _field(2, b"claim-a"))
    ctr = _field(1, b"worker") + _field(2, devices) + cpu_ids + dra
    pod_bytes = _field(1, b"job-7") + _field(2, b"team-a") + _field(3, ctr)
    message = pb.ListPodResourcesResponse.FromString(_field(1, pod_bytes))
    got = message.pod_resources[0]
    assert (got.name, got.namespace, got.containers[0].name) == ("job-7", "team-a", "worker")
    assert list(got.containers[0].devices[0].device_ids) == ["Ascend910-5", "Ascend910-6"]
    assert list(got.containers[0].cpu_ids) == [4, 5]
    assert got.containers[0].dynamic_resources[0].claim_name == "claim-a"
    assert [a.device for a in attributions_from_response(message).attributions] == [5, 6]


def test_descriptor_is_registered_under_a_unique_name() -> None:
    assert pb.DESCRIPTOR.name == "exporter/pods/podresources_pb/api.proto"
    assert pb.DESCRIPTOR.package == "v1"
    assert pb.DESCRIPTOR.services_by_name["PodResourcesLister"].methods_by_name["List"].full_name == "v1.PodResourcesLister.List"


def test_generated_code_matches_api_proto(tmp_path: Path) -> None:
    """The committed api_pb2.py describes exactly what api.proto says (needs grpcio-tools)."""
    require_module("grpc_tools", "pip install grpcio-tools; in the test extras")
    from google.protobuf import descriptor_pb2

    out = tmp_path / "set.pb"
    proc = subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT}", f"--descriptor_set_out={out}", "exporter/pods/podresources_pb/api.proto"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    fresh = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    for message in fresh.message_type:  # protoc fills json_name in descriptor sets only
        for field in message.field:
            field.ClearField("json_name")
    committed = descriptor_pb2.FileDescriptorProto()
    pb.DESCRIPTOR.CopyToProto(committed)
    assert committed == fresh
