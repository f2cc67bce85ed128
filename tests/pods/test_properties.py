"""Property: whatever the kubelet answers - any bytes, any names and device ids - decoding
fails cleanly (the source maps it to `garbled`) or attribution returns without raising."""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from exporter.pods.kubelet import (
    DEFAULT_RESOURCES,
    ParsedResources,
    attributions_from_response,
    parse_device_id,
)
from exporter.pods.podresources_pb import api_pb2 as pb

_RESOURCES = st.one_of(
    st.sampled_from([*DEFAULT_RESOURCES, "huawei.com/Ascend910-2c", "huawei.com/other", "nvidia.com/gpu"]), st.text(max_size=25)
)
_IDS = st.one_of(st.sampled_from(["Ascend910-3", "Ascend910-2c-100-3", "-", "Ascend910-", "x-٣", "a-9999999"]), st.text(max_size=25))
_DEVICES = st.builds(lambda r, ids: pb.ContainerDevices(resource_name=r, device_ids=ids), _RESOURCES, st.lists(_IDS, max_size=3))
_CONTAINERS = st.builds(lambda n, d: pb.ContainerResources(name=n, devices=d), st.text(max_size=10), st.lists(_DEVICES, max_size=3))
_PODS = st.builds(
    lambda n, ns, c: pb.PodResources(name=n, namespace=ns, containers=c),
    st.text(max_size=10),
    st.text(max_size=10),
    st.lists(_CONTAINERS, max_size=2),
)
_RESPONSES = st.builds(lambda pods: pb.ListPodResourcesResponse(pod_resources=pods), st.lists(_PODS, max_size=3))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(response=_RESPONSES)
def test_any_response(response):
    parsed = attributions_from_response(pb.ListPodResourcesResponse.FromString(response.SerializeToString()))
    assert isinstance(parsed, ParsedResources)
    assert all(a.device >= 0 for a in parsed.attributions)


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=200))
@example(raw=b"\x0a\xff\xff\xff\xff\x0f")  # a length prefix far past the end
def test_any_bytes(raw):
    try:
        response = pb.ListPodResourcesResponse.FromString(raw)
    except Exception:  # noqa: BLE001 - the source turns any decode error into reason `garbled`
        return
    attributions_from_response(response)


@given(device_id=_IDS, kind=st.sampled_from(["chip", "virtual"]))
def test_device_ids(device_id, kind):
    parsed = parse_device_id(device_id, kind)
    assert parsed is None or (parsed[0] >= 0 and (parsed[1] is None or parsed[1] >= 0))
