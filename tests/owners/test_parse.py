"""The cgroup, stat, status, passwd and mapping parsers on real outputs: every
/proc/PID/cgroup of tests/fixtures/cgroup-procs, with the owner its .src says, read by hand."""

from __future__ import annotations

import pytest

from exporter.owners.parse import (
    CgroupOwner,
    OwnerError,
    classify_path,
    mapping_device,
    parse_cgroup,
    parse_job_ids,
    parse_passwd,
    parse_start_time,
    parse_uid,
)
from tests.support.owners import CGROUP_FIXTURES, cgroup_text

K8S, DOCKER, CONTAINERD, PODMAN = "kubernetes", "docker", "containerd", "podman"

EXPECTED = {
    # Kubernetes: pod uid (dashes), container id, the engine the container's cgroup names.
    "v1-kubernetes-cgroupfs-containerd__containerd-1.2.13__1": CgroupOwner(
        K8S, "5dd96d5394ca930a854a390ea46f7515a8bc930123eb3251ba20f2708a38fc61", "a36d0c1d-0b26-4451-8d80-9c195e004afa"
    ),
    "v1-kubernetes-cgroupfs-subcgroup__unknown__1": CgroupOwner(
        K8S, "c04e0a88a1de067f25bece337d4dbb897396e0b623c2a65330850fc9823f1903", "f8a694f2-7c08-11e9-98da-000c29077430"
    ),
    "v1-kubernetes-systemd-crio__crio-1.19.0__1": CgroupOwner(
        K8S, "d6d725b909f37c3e232aadfbafa950a58bfe7baa579ba8c47a12be88bb921607", "8ca306fa-3c03-47fa-97dd-19979c345572", "crio"
    ),
    "v1-kubernetes-systemd-crio__crio-1.17.4__1": CgroupOwner(
        K8S, "7a1fd6fe8cdfbd44dc78c4cc85dad7031eaab4365801684cad0aabdeaf863f9e", "487a0dc6dccaeefbcfedba7a7ce1ca18", "crio"
    ),
    "hybrid-kubernetes-systemd-containerd__bottlerocket__1": CgroupOwner(
        K8S, "f45298cd514d1930c4fe3afc4412e59547f7e3148fddd22ca33cefce046eb830", "dd1bf9d1-241d-47f5-8e25-12de83135812", CONTAINERD
    ),
    "v1-kubernetes-systemd-containerd-colon__containerd-1.4.4__1": CgroupOwner(
        K8S, "d3d8ccf5cca91931c6285c1d7472c413dd5a7700fddc0aa9f89a9ac7008b003e", "2105e389-7471-476e-a50f-6074cef29bbd", CONTAINERD
    ),
    "v1-kubernetes-systemd-docker__unknown__1": CgroupOwner(
        K8S, "b5b6f2da8008be266864f896f93789762b2ce50792114a5c5f2cc3315af0bc70", "045b1e35-7f13-11e7-ac42-0050568ffca0", DOCKER
    ),
    "v2-kubernetes-systemd-containerd__containerd-1.6.4__1": CgroupOwner(
        K8S, "25d057a4c6c9555f2a0eb106e8896968c28f1c44aca4754174851aca7f89ad26", "9493223b-520e-4a97-a45f-359dcf967006", CONTAINERD
    ),
    "v2-kubernetes-systemd-crio__crio-1.22__1": CgroupOwner(
        K8S, "f33f47b0db740bb647cb3e7ac62d96c74966dbb99cbfaf4563bfd42d387e8b44", "042efd86-1f3b-4f2f-8736-f31c58e95bbc", "crio"
    ),
    "v2-kubernetes-systemd-docker-cgroupns__docker-20.10.7__1": CgroupOwner(
        K8S, "2cc65c162ca1388b6b8d5ccfb701d22fc96675ccf8b2f1590c490c2c4039547f", "fd698699-eabf-4c23-92ef-cf0bbdb78261", DOCKER
    ),
    "v2-kubernetes-kind-in-docker__unknown__1": CgroupOwner(
        K8S, "99f3a16ea25b7724cb56a4f0c0df1113ad9474fbf5545bead97fd5c7f61c13f4", "eab5a334-93fe-48a8-b139-9e8079c1f163", CONTAINERD
    ),
    # Containers outside Kubernetes.
    "v1-docker-cgroupfs__unknown__1": CgroupOwner(DOCKER, "31cb02944da7a12196a193cf0e0f6c226d7c453a1db62e65ba98287593a2ee30"),
    "v1-docker-systemd__unknown__1": CgroupOwner(DOCKER, "9ec39b91f3d70e1beff50a308f77067065ea6be0d91a3378375056cd4422cf3d"),
    "v1-docker-in-docker__rancheros__1": CgroupOwner(DOCKER, "ec08435e04266c5ba381fccbb829f626d11d8ddf5f8f547263c7a2d79ab4787a"),
    "v2-docker-systemd-cgroupns__docker-20.10.0__1": CgroupOwner(
        DOCKER, "1f1d6e2d4940ddac13abd421a2617992bf89f0e0f9a902ed58278c5f843e9ae7"
    ),
    "v2-containerd-nerdctl-systemd__written": CgroupOwner(CONTAINERD, "4a8c7d2e9b1f06355e7d1c2b8a9f0e3d6c5b4a3928170f6e5d4c3b2a19087f6e"),
    "v1-containerd-cgroupfs__written": CgroupOwner(CONTAINERD, "4a8c7d2e9b1f06355e7d1c2b8a9f0e3d6c5b4a3928170f6e5d4c3b2a19087f6e"),
    "v2-podman-rootful__unknown__1": CgroupOwner(PODMAN, "06dc5f321aad8726aa26559f16ec203bc099245bc44894b14a89fc02b022d1d5"),
    "v2-podman-rootless__unknown__1": CgroupOwner(PODMAN, "3f05ee050f82c0145f1d88c94269c39dff0f07dbf8bba20aafd54b3a75dcaecc"),
    # Slurm: job, step and (v1) uid.
    "v1-slurm__slurm-21__1": CgroupOwner("slurm", job_id="748468", step="0", uid=7319),
    "v1-slurm-devices__unknown__1": CgroupOwner("slurm", job_id="280678", step="interactive", uid=2101171),
    "v2-slurm__unknown__1": CgroupOwner("slurm", job_id="1392969", step="0"),
    # systemd services and the host.
    "v2-systemd-service__written": CgroupOwner("systemd", unit="llm-serving.service"),
    "v2-systemd-user-service__unknown__1": CgroupOwner("systemd", unit="gnome-terminal-server.service"),
    "v1-host__unknown__1": CgroupOwner(),
    "v1-host-session__unknown__1": CgroupOwner(),
    "v2-host-init__crio-1.22__1": CgroupOwner(),
}


def test_every_fixture_is_checked() -> None:
    names = {path.name for path in CGROUP_FIXTURES.iterdir() if path.suffix != ".src"}
    assert names == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_owner_of_a_real_cgroup_file(name: str) -> None:
    assert parse_cgroup(cgroup_text(name)) == EXPECTED[name]


def test_every_runtime_has_a_v1_and_a_v2_capture_or_layout() -> None:
    runtimes = {(name.split("-")[0], owner.runtime) for name, owner in EXPECTED.items()}
    for runtime in ("kubernetes", "docker", "containerd", "slurm", "host"):
        assert {("v1", runtime), ("v2", runtime)} <= runtimes, runtime
    assert ("v2", "podman") in runtimes and ("v2", "systemd") in runtimes


def test_a_reader_in_another_cgroup_namespace_and_a_deleted_cgroup() -> None:
    scope = "docker-" + "ab" * 32 + ".scope"
    assert classify_path(f"/../../{scope}") == CgroupOwner(DOCKER, "ab" * 32)
    assert classify_path(f"/system.slice/{scope} (deleted)") == CgroupOwner(DOCKER, "ab" * 32)
    assert classify_path("/../..") == CgroupOwner()


def test_the_monitors_and_the_pods_own_cgroup_are_not_containers() -> None:
    conmon = "/machine.slice/libpod-conmon-" + "24fce7291bc6d7f8a5965a5920740b0df25dda9bb4e84ffb889d8ea2927acec5" + ".scope"
    assert classify_path(conmon) == CgroupOwner()
    pod_only = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod042efd86_1f3b_4f2f_8736_f31c58e95bbc.slice"
    assert classify_path(pod_only) == CgroupOwner(K8S, pod_uid="042efd86-1f3b-4f2f-8736-f31c58e95bbc")


def test_slurm_needs_a_step_or_slurm_in_the_path() -> None:
    assert classify_path("/data/job_12") == CgroupOwner()
    assert classify_path("/slurm/uid_1000/job_12") == CgroupOwner("slurm", job_id="12", uid=1000)
    assert classify_path("/system.slice/node7_slurmstepd.scope/job_5/step_batch/user/task_0").job_id == "5"


@pytest.mark.parametrize(
    "text",
    ["", "random garbage\n", "/job_hello/\n", "\x00\x01\x02", "x:y:z\n", "0::relative/path\n", "1:cpu:/\n" * 65],
)
def test_what_is_not_a_cgroup_file_is_garbled(text: str) -> None:
    with pytest.raises(OwnerError) as raised:
        parse_cgroup(text)
    assert raised.value.reason == "garbled"


def test_a_path_longer_than_path_max_is_ignored() -> None:
    long = "0::/" + "a" * 5000 + "/docker-" + "cd" * 32 + ".scope\n"
    assert parse_cgroup(long + "1:cpu:/\n") == CgroupOwner()


STAT = "4242 (python3 (x) y) S 1 4242 4242 0 -1 4194304 1234 0 0 0 10 5 0 0 20 0 3 0 987654 123456789 4321"


def test_the_start_time_is_field_22_counted_after_the_command() -> None:
    assert parse_start_time(STAT + " 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n") == 987654
    for bad in ("", "4242 (python3) S 1 2 3", "no parenthesis at all " * 5, STAT.replace("987654", "98x654")):
        with pytest.raises(OwnerError):
            parse_start_time(bad)


def test_the_real_uid_of_a_status_file() -> None:
    assert parse_uid("Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t1000\t1000\t1000\t1000\nGid:\t100\n") == 1000
    assert parse_uid("Name:\tx\n") is None and parse_uid("Uid:\t\n") is None and parse_uid("Uid:\t99999999999\n") is None


def test_passwd_names_by_uid_the_first_wins() -> None:
    lines = ["root:x:0:0:root:/:/bin/sh", "alice:x:1000:1000::/home/alice:/bin/sh", "alias:x:1000:1000::/:/bin/sh", "bad", "::7:"]
    assert parse_passwd(lines) == {0: "root", 1000: "alice"}


def test_job_ids_of_a_mapping_file() -> None:
    assert parse_job_ids("1234\n5678_3\n") == ("1234", "5678_3")
    assert parse_job_ids("  \n") == () and parse_job_ids("") == ()
    assert parse_job_ids("12 12 oops ../etc 13") == ("12", "13")
    assert len(parse_job_ids(" ".join(str(n) for n in range(100)))) == 16
    assert (mapping_device("3"), mapping_device("MIG-1"), mapping_device("03")) == (3, None, 3)
