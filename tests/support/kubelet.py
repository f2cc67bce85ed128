"""A real gRPC server implementing the kubelet's v1.PodResourcesLister on a unix socket.

Imported by name (not `conftest`) so it cannot collide with another directory's conftest.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc

from exporter.pods.podresources_pb import api_pb2 as pb

SERVICE = "v1.PodResourcesLister"


def pod(namespace: str, name: str, *containers: pb.ContainerResources) -> pb.PodResources:
    return pb.PodResources(name=name, namespace=namespace, containers=list(containers))


def container(name: str, *devices: tuple[str, list[str]]) -> pb.ContainerResources:
    return pb.ContainerResources(
        name=name,
        devices=[pb.ContainerDevices(resource_name=r, device_ids=ids) for r, ids in devices],
        cpu_ids=[2, 3],
    )


class FakeKubelet:
    """Answers List with ``response``; ``delay`` makes it slow, ``raw`` makes it send bytes."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket
        self.response = pb.ListPodResourcesResponse()
        self.delay = 0.0
        self.raw: bytes | None = None
        self.calls = 0
        self._release = threading.Event()
        self._server: grpc.Server | None = None

    def _list(self, request: pb.ListPodResourcesRequest, context: grpc.ServicerContext) -> object:
        self.calls += 1
        if self.delay:
            self._release.wait(self.delay)  # bounded; released at stop()
        return self.raw if self.raw is not None else self.response

    def _serialize(self, message: object) -> bytes:
        return message if isinstance(message, bytes) else message.SerializeToString()

    def start(self, *, with_service: bool = True) -> FakeKubelet:
        server = grpc.server(ThreadPoolExecutor(max_workers=4))
        if with_service:
            handler = grpc.method_handlers_generic_handler(
                SERVICE,
                {
                    "List": grpc.unary_unary_rpc_method_handler(
                        self._list,
                        request_deserializer=pb.ListPodResourcesRequest.FromString,
                        response_serializer=self._serialize,
                    )
                },
            )
            server.add_generic_rpc_handlers((handler,))
        server.add_insecure_port(f"unix:{self.socket}")
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        self._release.set()
        if self._server is not None:
            self._server.stop(grace=None).wait(5)
            self._server = None
