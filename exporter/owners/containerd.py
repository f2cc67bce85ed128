"""A containerd container's name from its labels: containerd's Containers service
(`containerd.services.containers.v1.Containers/Get`, gRPC on its unix socket, the namespace in
the `containerd-namespace` header), asked in the namespaces nerdctl and the CRI use. Only where
the socket is mounted and answers; otherwise the container is shown by id.

The messages are those of containerd's api/services/containers/v1/containers.proto, declared
here with the fields read (`GetContainerRequest.id`; `GetContainerResponse.container`, of which
`Container.labels`, a `map<string, string>`) and encoded and decoded by the protobuf library:
no hand-written decoder of what the socket sends, and no generated module for three fields.
"""

from __future__ import annotations

import asyncio
import os
from functools import cache
from typing import Any

from exporter.owners.parse import OwnerError

GET_METHOD = "/containerd.services.containers.v1.Containers/Get"
NAMESPACE_HEADER = "containerd-namespace"
NAMESPACES = ("default", "k8s.io")  # nerdctl's and ctr's default; the CRI's
# Labels that name a container, most specific first: nerdctl's, then the kubelet's (CRI).
NAME_LABELS = ("nerdctl/name", "io.kubernetes.container.name")
MAX_ANSWER = 1 << 20
PACKAGE = "containerd.services.containers.v1"


@cache
def messages() -> tuple[Any, Any]:
    """(GetContainerRequest, GetContainerResponse) classes, in a pool of their own (no clash with
    any other containers.proto a process may load). Imported here: only a node whose
    containerd socket is mounted ever asks."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="exporter/owners/containerd.proto", package=PACKAGE, syntax="proto3")
    container = file.message_type.add(name="Container")
    container.field.add(name="id", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    entry = container.nested_type.add(name="LabelsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    labels = f".{PACKAGE}.Container.LabelsEntry"
    container.field.add(name="labels", number=2, type=field.TYPE_MESSAGE, label=field.LABEL_REPEATED, type_name=labels)
    request = file.message_type.add(name="GetContainerRequest")
    request.field.add(name="id", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    response = file.message_type.add(name="GetContainerResponse")
    response.field.add(name="container", number=1, type=field.TYPE_MESSAGE, label=field.LABEL_OPTIONAL, type_name=f".{PACKAGE}.Container")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    get = message_factory.GetMessageClass
    return get(pool.FindMessageTypeByName(f"{PACKAGE}.GetContainerRequest")), get(
        pool.FindMessageTypeByName(f"{PACKAGE}.GetContainerResponse")
    )


def request_bytes(container_id: str) -> bytes:
    """GetContainerRequest{id}, encoded."""
    request, _ = messages()
    return bytes(request(id=container_id).SerializeToString())


def labels_of(answer: bytes) -> dict[str, str]:
    """The container's labels in an encoded GetContainerResponse; OwnerError (garbled) when it does not decode."""
    from google.protobuf.message import DecodeError

    _, response = messages()
    try:
        decoded = response.FromString(answer)
    except (DecodeError, ValueError) as exc:
        raise OwnerError("garbled", f"containerd answer: {exc}") from None
    return dict(decoded.container.labels)


def name_from_labels(labels: dict[str, str]) -> str:
    """The container's name from its labels ("" when none names it: `ctr run` sets none)."""
    return next((labels[key] for key in NAME_LABELS if labels.get(key)), "")


async def container_name(socket: str, container_id: str, timeout: float) -> str:
    """The container's name in the first namespace that knows it ("" when its labels name
    none); OwnerError: timeout, unavailable, not_found (in no namespace), refused, garbled."""
    import grpc
    import grpc.aio

    if not os.path.exists(socket):
        raise OwnerError("unavailable", f"{socket} does not exist")
    options = (("grpc.max_receive_message_length", MAX_ANSWER), ("grpc.enable_http_proxy", 0), ("grpc.enable_retries", 0))
    channel = grpc.aio.insecure_channel("unix://" + os.path.abspath(socket), options=options)
    try:
        call = channel.unary_unary(GET_METHOD)
        deadline = asyncio.get_running_loop().time() + timeout
        for namespace in NAMESPACES:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise OwnerError("timeout", f"{socket}: no answer within {timeout:g}s")
            try:
                answer = await asyncio.wait_for(
                    call(request_bytes(container_id), timeout=left, metadata=((NAMESPACE_HEADER, namespace),)), left + 0.5
                )
            except asyncio.TimeoutError:
                raise OwnerError("timeout", f"{socket}: no answer within {timeout:g}s") from None
            except grpc.aio.AioRpcError as exc:
                code = exc.code()
                if code == grpc.StatusCode.NOT_FOUND:
                    continue
                if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                    raise OwnerError("timeout", f"{socket}: no answer within {timeout:g}s") from None
                if code == grpc.StatusCode.UNAVAILABLE:
                    raise OwnerError("unavailable", f"{socket}: {exc.details()}") from None
                raise OwnerError("refused", f"{socket}: {code.name}: {exc.details()}") from None
            if not isinstance(answer, bytes):
                raise OwnerError("garbled", f"{socket}: an answer that is not bytes")
            return name_from_labels(labels_of(answer))
    finally:
        await channel.close(grace=None)
    raise OwnerError("not_found", f"{socket}: no container {container_id} in namespaces {', '.join(NAMESPACES)}")
