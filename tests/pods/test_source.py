"""PodResourcesSource against a real gRPC server on a unix socket: healthy, slow, dead, odd."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from exporter.core.health import HealthRegistry
from exporter.pods.kubelet import PodAttribution, PodResourcesError, list_pod_resources
from exporter.pods.options import PodsOptions
from exporter.pods.podresources_pb import api_pb2 as pb
from exporter.pods.source import PodResourcesSource, in_kubernetes
from tests.support.kubelet import FakeKubelet, container, pod

TRAIN = pb.ListPodResourcesResponse(
    pod_resources=[
        pod("train", "llama-0", container("main", ("huawei.com/Ascend910", ["Ascend910-0", "Ascend910-1"]))),
        pod("infer", "svc-1", container("app", ("huawei.com/Ascend910-2c", ["Ascend910-2c-100-3"]))),
        pod("kube-system", "coredns", container("coredns")),
    ]
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_source(socket: Path, clock: Clock | None = None, **overrides: object) -> tuple[PodResourcesSource, HealthRegistry]:
    health = HealthRegistry()
    options = PodsOptions(socket=str(socket), **{"timeout": 1.0, "ttl": 60.0, **overrides})
    source = PodResourcesSource(options, health, **({"clock": clock} if clock else {}))
    return source, health


def status(health: HealthRegistry):
    (only,) = health.statuses()
    return only


async def test_lists_npu_devices_per_container(kubelet: FakeKubelet) -> None:
    kubelet.response = TRAIN
    kubelet.start()
    source, health = make_source(kubelet.socket)
    await source.refresh()
    assert source.attributions() == (
        PodAttribution(0, "train", "llama-0", "main", "huawei.com/Ascend910", "Ascend910-0"),
        PodAttribution(1, "train", "llama-0", "main", "huawei.com/Ascend910", "Ascend910-1"),
        PodAttribution(3, "infer", "svc-1", "app", "huawei.com/Ascend910-2c", "Ascend910-2c-100-3", 100),
    )
    st = status(health)
    assert (st.name, st.success, st.runs, dict(st.errors)) == ("podresources", True, 1, {})
    assert 0 <= st.duration_seconds < 1.0
    assert dict(source.skipped()) == {"unknown_resource": 0, "bad_device_id": 0}
    assert kubelet.calls == 1


async def test_slow_kubelet_times_out_and_attribution_expires(kubelet: FakeKubelet) -> None:
    clock = Clock()
    kubelet.response = TRAIN
    kubelet.start()
    source, health = make_source(kubelet.socket, clock, timeout=0.3, ttl=30.0)
    await source.refresh()
    assert len(source.attributions()) == 3

    kubelet.delay = 5.0  # answers long after our timeout (released when the test ends)
    started = time.monotonic()
    await source.refresh()
    took = time.monotonic() - started
    assert took < 2.0, f"refresh took {took:.2f}s despite a 0.3s timeout"
    st = status(health)
    assert not st.success and dict(st.errors) == {"timeout": 1}
    # Within the TTL the last good answer is still served ...
    clock.now += 29
    assert len(source.attributions()) == 3
    # ... after it, attribution degrades to none instead of going stale.
    clock.now += 2
    assert source.attributions() == ()
    assert dict(source.skipped()) == {"unknown_resource": 0, "bad_device_id": 0}


async def test_socket_missing(sock_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    source, health = make_source(sock_dir / "absent.sock")
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            await source.refresh()
    st = status(health)
    assert (st.success, st.runs, dict(st.errors)) == (False, 3, {"not_found": 3})
    assert source.attributions() == ()
    # A failing source is logged once when it starts failing, not on every cycle.
    assert sum("source failing" in r.getMessage() for r in caplog.records) == 1


async def test_kubelet_stopped_then_back(kubelet: FakeKubelet, caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    kubelet.response = TRAIN
    kubelet.start()
    source, health = make_source(kubelet.socket, clock)
    await source.refresh()
    kubelet.stop()
    with caplog.at_level(logging.INFO):
        started = time.monotonic()
        await source.refresh()
        assert time.monotonic() - started < 2.0
        st = status(health)
        assert not st.success
        assert set(st.errors) <= {"not_found", "unavailable"} and sum(st.errors.values()) == 1
        clock.now += 61
        assert source.attributions() == ()

        # The kubelet restarts (new socket): the next refresh recovers on a fresh channel.
        kubelet.start()
        await source.refresh()
    assert status(health).success
    assert len(source.attributions()) == 3
    assert any("source recovered" in r.getMessage() for r in caplog.records)


async def test_path_that_is_not_a_socket(sock_dir: Path) -> None:
    path = sock_dir / "kubelet.sock"
    path.write_text("not a socket")
    source, health = make_source(path)
    await source.refresh()
    assert dict(status(health).errors) == {"not_socket": 1}


async def test_kubelet_without_the_service(kubelet: FakeKubelet) -> None:
    kubelet.start(with_service=False)
    source, health = make_source(kubelet.socket)
    await source.refresh()
    assert dict(status(health).errors) == {"unimplemented": 1}


async def test_garbled_answer(kubelet: FakeKubelet) -> None:
    kubelet.raw = b"\xff\xff\xff\xff not protobuf"
    kubelet.start()
    source, health = make_source(kubelet.socket)
    await source.refresh()
    assert dict(status(health).errors) == {"garbled": 1}
    assert source.attributions() == ()


async def test_oversized_answer_is_refused(kubelet: FakeKubelet) -> None:
    big = [pod("ns", f"pod-{i}", container("c", ("huawei.com/Ascend910", ["Ascend910-0"]))) for i in range(200)]
    kubelet.response = pb.ListPodResourcesResponse(pod_resources=big)
    kubelet.start()
    source, health = make_source(kubelet.socket, max_message_bytes=1024)
    await source.refresh()
    assert dict(status(health).errors) == {"output_too_large": 1}


async def test_unknown_resources_and_bad_ids_are_counted_and_logged_once(kubelet: FakeKubelet, caplog: pytest.LogCaptureFixture) -> None:
    kubelet.response = pb.ListPodResourcesResponse(
        pod_resources=[
            pod(
                "a",
                "p",
                container(
                    "c",
                    ("huawei.com/npu-core", ["npu-core-0", "npu-core-1"]),
                    ("huawei.com/Ascend910", ["Ascend910-2", "garbage"]),
                    ("nvidia.com/gpu", ["GPU-1"]),
                ),
            ),
        ]
    )
    kubelet.start()
    source, health = make_source(kubelet.socket)
    with caplog.at_level(logging.WARNING, logger="exporter.pods"):
        await source.refresh()
        await source.refresh()
    assert status(health).success  # odd content is not a failed call
    assert [a.device for a in source.attributions()] == [2]
    assert dict(source.skipped()) == {"unknown_resource": 2, "bad_device_id": 1}
    logged = [r for r in caplog.records if r.name == "exporter.pods"]
    assert sorted(r.device_id for r in logged) == ["garbage", "npu-core-0", "npu-core-1"]


async def test_configured_resource_names(kubelet: FakeKubelet) -> None:
    kubelet.response = pb.ListPodResourcesResponse(
        pod_resources=[pod("a", "p", container("c", ("example.com/npu", ["npu-4"]), ("huawei.com/Ascend910", ["Ascend910-1"])))]
    )
    kubelet.start()
    source, _ = make_source(kubelet.socket, resources=("example.com/npu",))
    await source.refresh()
    assert [(a.resource_name, a.device) for a in source.attributions()] == [("example.com/npu", 4)]
    assert source.skipped()["unknown_resource"] == 1


async def test_list_call_raises_a_reason(sock_dir: Path) -> None:
    with pytest.raises(PodResourcesError) as caught:
        await list_pod_resources(str(sock_dir / "nope.sock"), 1.0)
    assert caught.value.reason == "not_found"


def test_tasks_for_the_sampler(sock_dir: Path) -> None:
    source, _ = make_source(sock_dir / "k.sock", interval=20.0)
    (task,) = source.tasks()
    assert (task.name, task.interval, task.run) == ("podresources", 20.0, source.refresh)


def test_in_kubernetes() -> None:
    assert in_kubernetes({"KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    assert not in_kubernetes({})
    assert not in_kubernetes({"KUBERNETES_SERVICE_HOST": ""})


async def test_dead_kubelet_left_its_socket_behind(sock_dir: Path) -> None:
    """A crashed kubelet leaves the socket file; connecting is refused quickly."""
    import socket as socketlib

    path = sock_dir / "kubelet.sock"
    stale = socketlib.socket(socketlib.AF_UNIX)
    stale.bind(str(path))
    stale.close()
    source, health = make_source(path, timeout=2.0)
    started = time.monotonic()
    await source.refresh()
    assert time.monotonic() - started < 2.5
    assert dict(status(health).errors) == {"unavailable": 1}
    assert source.attributions() == ()


def test_non_root_cannot_reach_a_root_only_socket() -> None:
    """Why the DaemonSet runs as uid 0 (without capabilities): the kubelet's socket is root-only,
    and connect() on a unix socket needs write permission on it."""
    import os
    import shutil
    import subprocess
    import sys
    import tempfile

    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to switch to an unprivileged uid")
    directory = Path(tempfile.mkdtemp(prefix="klt", dir="/tmp"))
    kubelet = FakeKubelet(directory / "kubelet.sock")
    try:
        directory.chmod(0o755)  # searchable: the refusal must come from the socket itself
        kubelet.start()
        kubelet.socket.chmod(0o755)  # what the kubelet's umask gives its socket
        code = (
            "import asyncio\n"
            "from exporter.pods.kubelet import list_pod_resources, PodResourcesError\n"
            f"try: asyncio.run(list_pod_resources({str(kubelet.socket)!r}, 2.0))\n"
            "except PodResourcesError as e: print(e.reason, e)\n"
            "else: print('connected')\n"
        )
        root = Path(__file__).resolve().parents[2]
        proc = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=30,
            cwd="/",
            env={**os.environ, "PYTHONPATH": str(root)},
        )
        if not proc.stdout:
            pytest.skip(f"the unprivileged uid cannot run this Python here: {proc.stderr.strip()[-200:]}")
        assert proc.stdout.startswith("permission_denied List: UNAVAILABLE"), proc.stdout + proc.stderr
    finally:
        kubelet.stop()
        shutil.rmtree(directory, ignore_errors=True)


async def test_hung_kubelet_that_accepts_but_never_speaks(sock_dir: Path) -> None:
    """A socket that accepts connections and then says nothing (a wedged kubelet)."""
    import socket as socketlib
    import threading

    path = sock_dir / "kubelet.sock"
    server = socketlib.socket(socketlib.AF_UNIX)
    server.bind(str(path))
    server.listen(8)
    held: list[socketlib.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        source, health = make_source(path, timeout=0.5)
        started = time.monotonic()
        await source.refresh()
        assert time.monotonic() - started < 2.0
        assert dict(status(health).errors) == {"timeout": 1}
        assert source.attributions() == ()
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()
