"""A containerd container's name from its labels: containerd's Containers service
(`containerd.services.containers.v1.Containers/Get`, gRPC on its unix socket, the namespace in
the `containerd-namespace` header), asked in the namespaces nerdctl and the CRI use. Only where
the socket is mounted and answers; otherwise the container is shown by id.

The two messages are small enough to write and read by hand (containerd's
api/services/containers/v1/containers.proto): `GetContainerRequest { string id = 1; }` and
`GetContainerResponse { Container container = 1; }`, of which `Container.labels = 2` (a
`map<string, string>`: entries of `key = 1`, `value = 2`) is read; no generated code is needed.
:func:`request_bytes` and :func:`labels_of` are pure; :func:`container_name` makes the calls.
"""

from __future__ import annotations

import asyncio
import os

from exporter.owners.parse import OwnerError

GET_METHOD = "/containerd.services.containers.v1.Containers/Get"
NAMESPACE_HEADER = "containerd-namespace"
NAMESPACES = ("default", "k8s.io")  # nerdctl's and ctr's default; the CRI's
# Labels that name a container, most specific first: nerdctl's, then the kubelet's (CRI).
NAME_LABELS = ("nerdctl/name", "io.kubernetes.container.name")
MAX_ANSWER = 1 << 20


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def request_bytes(container_id: str) -> bytes:
    """GetContainerRequest{id}."""
    data = container_id.encode()
    return b"\x0a" + _varint(len(data)) + data


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise OwnerError("garbled", "containerd answer: a truncated number")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return value, at


def fields(data: bytes) -> list[tuple[int, bytes | int]]:
    """(field number, value) of a protobuf message: bytes for length-delimited fields, the
    number for the others; OwnerError (garbled) for anything malformed."""
    out: list[tuple[int, bytes | int]] = []
    at = 0
    while at < len(data):
        key, at = _read_varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _read_varint(data, at)
            out.append((number, value))
        elif wire == 2:
            size, at = _read_varint(data, at)
            if at + size > len(data):
                raise OwnerError("garbled", "containerd answer: a field past its end")
            out.append((number, data[at : at + size]))
            at += size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if at + width > len(data):
                raise OwnerError("garbled", "containerd answer: a field past its end")
            out.append((number, int.from_bytes(data[at : at + width], "little")))
            at += width
        else:
            raise OwnerError("garbled", f"containerd answer: wire type {wire}")
    return out


def _text(value: bytes | int) -> str:
    if not isinstance(value, bytes):
        raise OwnerError("garbled", "containerd answer: a number where text was expected")
    return value.decode("utf-8", errors="replace")


def labels_of(answer: bytes) -> dict[str, str]:
    """The container's labels in a GetContainerResponse."""
    labels: dict[str, str] = {}
    for number, container in fields(answer):
        if number != 1 or not isinstance(container, bytes):
            continue
        for field, entry in fields(container):
            if field == 2 and isinstance(entry, bytes):
                pairs = dict(fields(entry))
                labels[_text(pairs.get(1, b""))] = _text(pairs.get(2, b""))
    return labels


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
