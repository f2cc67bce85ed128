"""Which pod holds which NPU: the kubelet pod-resources API (gRPC over a unix socket).

The kubelet serves ``v1.PodResourcesLister/List`` on
``/var/lib/kubelet/pod-resources/kubelet.sock``: every pod on the node, its containers and
the device-plugin devices each container was given. The Ascend device plugin registers
resources such as ``huawei.com/Ascend910`` and names each device after the chip:

- whole chips: ``Ascend910-3``, ``Ascend310P-1``, ``Ascend310-0``: ``<chip type>-<id>``;
- virtual NPU slices (resources ``huawei.com/Ascend910-2c``, ``huawei.com/Ascend310P-4c.3cpu``
  ...): ``Ascend910-2c-100-3``, i.e. ``<slice type>-<vNPU id>-<id>``.

In both the trailing number is the chip the device lives on. The public Ascend device plugin
(Ascend/ascend-device-plugin, ``pkg/device/ascendcommon.go``: ``assemblePhyDevices`` and
``assembleSpecVirtualDevice``) writes the chip's **physical** id there (``PhyID``, from DCMI),
not its logic id. npu-smi shows the physical id only on A3 (``Chip Phy-ID``); elsewhere the
exporter knows only the logic id, which equals the physical id on a bare-metal host where
every chip is visible (the usual DaemonSet case). How ids are matched to chips is part.py's business; this module only reports the number.

I/O apart from parsing: :func:`list_pod_resources` makes the call and returns the protobuf
message or raises :class:`PodResourcesError` with a reason; :func:`attributions_from_response`
is pure.
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from exporter.core.errors import ReasonError

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
# Resource names the Ascend device plugin registers for whole chips. Virtual slices are
# these names plus `-<template>` (huawei.com/Ascend910-2c, huawei.com/Ascend310P-4c.3cpu).
DEFAULT_RESOURCES = ("huawei.com/Ascend910", "huawei.com/Ascend310P", "huawei.com/Ascend310")
VENDOR_PREFIX = "huawei.com/"
LIST_METHOD = "/v1.PodResourcesLister/List"

# Why a device id listed by the kubelet is not attributed to a chip (label `reason` of
# cann_exporter_podresources_unmatched_devices). `no_chip` is decided when matching (part.py).
SKIP_UNKNOWN_RESOURCE = "unknown_resource"  # a huawei.com/ resource that is not an NPU resource we map
SKIP_BAD_DEVICE_ID = "bad_device_id"  # an NPU resource whose device id has no trailing chip number
SKIP_REASONS = (SKIP_UNKNOWN_RESOURCE, SKIP_BAD_DEVICE_ID)

_TRAILING_ID = re.compile(r"^(?P<prefix>.+?)-(?P<id>\d{1,6})$")


@dataclass(frozen=True)
class PodAttribution:
    """One NPU device of a container, as the kubelet reports it.

    ``device`` is the chip number at the end of the device id: the chip's physical id for the
    Huawei Ascend device plugin, equal to the logic id (the ``device`` label) on bare-metal
    hosts. ``virtual_id`` is the vNPU id of a virtual slice, else None.
    """

    device: int
    namespace: str
    pod: str
    container: str
    resource_name: str
    device_id: str = ""  # the kubelet's device id, verbatim (for logs)
    virtual_id: int | None = None


@dataclass(frozen=True)
class ParsedResources:
    attributions: tuple[PodAttribution, ...]
    skipped: tuple[tuple[str, str, str], ...]  # (reason, resource_name, device_id)


class PodResourcesError(ReasonError):
    """The kubelet could not be asked, or its answer could not be used."""


# --- pure parsing -------------------------------------------------------------------------


def resource_kind(resource_name: str, resources: Iterable[str]) -> str | None:
    """`chip` for a configured NPU resource, `virtual` for one of its slices, else None."""
    for name in resources:
        if resource_name == name:
            return "chip"
        if resource_name.startswith(name + "-") and len(resource_name) > len(name) + 1:
            return "virtual"
    return None


def parse_device_id(device_id: str, kind: str) -> tuple[int, int | None] | None:
    """(chip id, vNPU id or None) from `Ascend910-3` or `Ascend910-2c-100-3`; None if malformed."""
    match = _TRAILING_ID.match(device_id.strip())
    if not match:
        return None
    chip = int(match.group("id"))
    virtual = None
    if kind == "virtual":
        inner = _TRAILING_ID.match(match.group("prefix"))
        virtual = int(inner.group("id")) if inner else None
    return chip, virtual


def attributions_from_response(response: object, resources: Iterable[str] = DEFAULT_RESOURCES) -> ParsedResources:
    """Every NPU device of every container in a ListPodResourcesResponse, plus what was skipped.

    Resources of other vendors (cpu, nvidia.com/gpu, rdma/...) are ignored silently; a
    `huawei.com/` resource we do not map and an NPU device id without a chip number are
    reported as skipped. The same (chip, pod, container) given twice (two slices of one chip)
    appears once per device id; matching de-duplicates them.
    """
    resources = tuple(resources)
    found: list[PodAttribution] = []
    skipped: list[tuple[str, str, str]] = []
    for pod in getattr(response, "pod_resources", ()):
        for container in pod.containers:
            for devices in container.devices:
                kind = resource_kind(devices.resource_name, resources)
                if kind is None:
                    if devices.resource_name.startswith(VENDOR_PREFIX):
                        skipped += [(SKIP_UNKNOWN_RESOURCE, devices.resource_name, d) for d in devices.device_ids]
                    continue
                for device_id in devices.device_ids:
                    parsed = parse_device_id(device_id, kind)
                    if parsed is None:
                        skipped.append((SKIP_BAD_DEVICE_ID, devices.resource_name, device_id))
                        continue
                    found.append(
                        PodAttribution(
                            device=parsed[0],
                            namespace=pod.namespace,
                            pod=pod.name,
                            container=container.name,
                            resource_name=devices.resource_name,
                            device_id=device_id,
                            virtual_id=parsed[1],
                        )
                    )
    return ParsedResources(tuple(found), tuple(skipped))


# --- the call -------------------------------------------------------------------------------


def _check_socket(path: str) -> None:
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise PodResourcesError("not_found", f"kubelet pod-resources socket {path} does not exist") from None
    except PermissionError:
        raise PodResourcesError("permission_denied", f"no permission to reach {path}") from None
    except OSError as exc:
        raise PodResourcesError("not_found", f"{path}: {exc}") from None
    if not stat.S_ISSOCK(mode):
        raise PodResourcesError("not_socket", f"{path} is not a unix socket")


def _status_reason(code: object, details: str) -> str:
    import grpc

    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return "timeout"
    if code == grpc.StatusCode.UNAVAILABLE:
        return "permission_denied" if "ermission denied" in details else "unavailable"
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return "unimplemented"
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return "output_too_large"
    name = getattr(code, "name", str(code))
    return "grpc_" + str(name).lower()


async def list_pod_resources(socket: str, timeout: float, max_message_bytes: int = 16 << 20) -> object:
    """One ``List`` call over a fresh channel; the response message or PodResourcesError.

    A channel per call: when the kubelet restarts it recreates its socket, and a long-lived
    channel would sit in reconnect back-off; a unix connect costs microseconds (a whole call
    ~2 ms). ``timeout`` bounds the whole call, connection included.
    """
    import grpc
    import grpc.aio

    from exporter.pods.podresources_pb import api_pb2

    _check_socket(socket)
    target = "unix://" + os.path.abspath(socket)
    options = (
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.enable_http_proxy", 0),
        ("grpc.enable_retries", 0),
    )
    channel = grpc.aio.insecure_channel(target, options=options)
    try:
        # Raw bytes in, decoded here: a corrupt answer becomes our `garbled`, not a grpc log line.
        call = channel.unary_unary(LIST_METHOD, request_serializer=api_pb2.ListPodResourcesRequest.SerializeToString)
        try:
            # gRPC's deadline covers connecting too; the outer bound is only a safety net.
            raw = await asyncio.wait_for(call(api_pb2.ListPodResourcesRequest(), timeout=timeout), timeout + 1.0)
        except asyncio.TimeoutError:
            raise PodResourcesError("timeout", f"List: no answer within {timeout:g}s") from None
        except grpc.aio.AioRpcError as exc:
            details = exc.details() or ""
            raise PodResourcesError(_status_reason(exc.code(), details), f"List: {exc.code().name}: {details}") from None
    finally:
        await channel.close(grace=None)
    try:
        return api_pb2.ListPodResourcesResponse.FromString(raw)
    except Exception as exc:  # google.protobuf.message.DecodeError and friends
        raise PodResourcesError("garbled", f"List: undecodable answer ({len(raw)} bytes): {exc}") from None
