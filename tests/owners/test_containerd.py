"""containerd names from a Containers/Get stand-in whose answers the protobuf library encodes
(the messages of containerd's containers.proto): nerdctl's and the kubelet's name labels, a
container with none, one in no namespace, a hang, no socket; and the hand-written decoder
against malformed bytes."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from exporter.owners.containerd import container_name, labels_of, messages, request_bytes
from exporter.owners.names import ContainerNames
from exporter.owners.parse import OwnerError
from tests.support.owners import FakeContainerd

NERDCTL, CRI, BARE, GONE = ("1" * 64, "2" * 64, "3" * 64, "4" * 64)
CONTAINERS = {
    "default": {NERDCTL: {"nerdctl/name": "llama-train", "nerdctl/platform": "linux/arm64"}, BARE: {}},
    "k8s.io": {CRI: {"io.kubernetes.container.name": "main", "io.kubernetes.pod.name": "bert-0"}},
}


def test_the_request_is_containerds_encoding() -> None:
    # GetContainerRequest{id = 1}: field 1, length-delimited (0x0a), 64 bytes (0x40), the id.
    assert request_bytes(NERDCTL) == b"\x0a\x40" + NERDCTL.encode()


def test_labels_of_a_real_encoding() -> None:
    _, response = messages()
    answer = response()
    answer.container.id = NERDCTL
    answer.container.labels.update({"nerdctl/name": "llama-train", "empty": "", "ünï": "☃"})
    encoded = answer.SerializeToString()
    assert encoded[:1] == b"\x0a"  # the container field, its length and its fields follow
    assert labels_of(encoded) == {"nerdctl/name": "llama-train", "empty": "", "ünï": "☃"}
    assert labels_of(encoded + b"\x12\xaf\x02\x1a\xac\x02" + b"x" * 300) == labels_of(encoded)  # unknown fields after it


@pytest.mark.parametrize("raw", [b"\x0a\x05ab", b"\x0a", b"\x0b", b"\x0a\x02\x12\xff", b"\xff" * 11, b"\x0d\x01"])
def test_malformed_answers_are_garbled(raw: bytes) -> None:
    with pytest.raises(OwnerError) as raised:
        labels_of(raw)
    assert raised.value.reason == "garbled"
    assert labels_of(b"") == {}  # an empty answer is a container without labels


def test_names_in_each_namespace(sock_dir: Path) -> None:
    socket = sock_dir / "containerd.sock"
    with FakeContainerd(socket, CONTAINERS) as fake:
        names = [asyncio.run(container_name(str(socket), container, 2.0)) for container in (NERDCTL, CRI, BARE)]
        with pytest.raises(OwnerError) as raised:
            asyncio.run(container_name(str(socket), GONE, 2.0))
    assert names == ["llama-train", "main", ""] and raised.value.reason == "not_found"
    assert fake.asked == [("default", NERDCTL), ("default", CRI), ("k8s.io", CRI), ("default", BARE), ("default", GONE), ("k8s.io", GONE)]


def test_a_hang_and_no_socket(sock_dir: Path) -> None:
    socket = sock_dir / "containerd.sock"
    with FakeContainerd(socket, CONTAINERS, delay=5.0):
        began = time.monotonic()
        with pytest.raises(OwnerError) as raised:
            asyncio.run(container_name(str(socket), NERDCTL, 0.3))
        assert raised.value.reason == "timeout" and time.monotonic() - began < 2.0
    with pytest.raises(OwnerError) as raised:
        asyncio.run(container_name(str(sock_dir / "absent.sock"), NERDCTL, 0.3))
    assert raised.value.reason == "unavailable"


def test_through_the_name_cache(sock_dir: Path) -> None:
    socket = sock_dir / "containerd.sock"
    names = ContainerNames({"containerd": str(socket)}, 2.0)
    with FakeContainerd(socket, CONTAINERS):
        assert asyncio.run(names.refresh([("containerd", NERDCTL), ("containerd", GONE)])) == []  # not_found: the container's
    assert names.name("containerd", NERDCTL) == "llama-train" and names.name("containerd", GONE) == ""
    assert ("containerd", "not_found", 1) in names.counts()
