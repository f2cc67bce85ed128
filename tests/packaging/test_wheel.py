"""The wheel, built from a copy of the tree and installed in a fresh venv, stands alone: it
carries every data file the package reads, and `cann-exporter once --simulate` and
`cann-exporter generate` work with the source tree out of reach."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.support.exposition import samples, values
from tests.support.paths import ROOT

pytestmark = pytest.mark.e2e

# Read at run time from beside the module that uses them (Path(__file__).with_name).
DATA_FILES = (
    "exporter/thresholds/thresholds.yaml",
    "exporter/jobs/openapi.yaml",
    "exporter/npusmi/faultcodes.json",
    "exporter/npusmi/faultcodes.NOTICE",
    "exporter/simulator/sysfs/910b3/bus/pci/devices/0000:c1:00.0/device",  # found by path (node/simulate.py)
    "exporter/simulator/procfs/910b3/2235514/status",  # found by path (node/simulate.py)
    "exporter/simulator/passwd",
)
# Under exporter/ but read only from a checkout (regenerate.py, a development tool).
DEV_ONLY = frozenset({"exporter/pods/podresources_pb/api.proto"})
TIMEOUT = 60


def run(argv: list[str | Path], cwd: Path | None = None) -> str:
    """stdout of a command that must succeed; PYTHONPATH unset so nothing leaks in from here."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, f"{argv} exited {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done.stdout


def source_files() -> list[str] | None:
    """The tree as the developer has it: tracked files plus new ones git does not ignore."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [name for name in listed.split("\0") if name]


def copy_source(dest: Path) -> Path:
    """A copy to build from: the build writes build/ and *.egg-info there, not into the tree."""
    files = source_files()
    if files is None:
        ignore = shutil.ignore_patterns(".venv", ".git", "build", "dist", "*.egg-info", "__pycache__")
        shutil.copytree(ROOT, dest, ignore=ignore, dirs_exist_ok=True)
        return dest
    for name in files:
        if (ROOT / name).is_file():  # a tracked file deleted in the working tree is skipped
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    return dest


def can_build_offline() -> bool:
    """setuptools >= 70.1 builds wheels itself; older ones need the `wheel` package."""
    found = importlib.util.find_spec
    return found("setuptools") is not None and (found("setuptools.command.bdist_wheel") is not None or found("wheel") is not None)


def borrow_dependencies(venv: Path) -> None:
    # Plain directory lines in a .pth only append that directory to sys.path: the .pth files
    # inside it are not processed. So the dependencies (aiohttp, prometheus_client, pyyaml, ...)
    # become importable without a download, while the editable install's finder (an `import`
    # line in a .pth of that same site-packages) stays off: `exporter` can only be the wheel's.
    purelib = run([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).strip()
    lines = [path for path in site.getsitepackages() if Path(path).is_dir()]
    (Path(purelib) / "borrowed-dependencies.pth").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_source(tmp_path_factory.mktemp("source"))


@pytest.fixture(scope="module")
def wheel(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not can_build_offline():
        pytest.skip("setuptools with bdist_wheel is not importable: no offline build")
    out = tmp_path_factory.mktemp("dist")
    # --no-build-isolation and --no-index: the build uses this venv's setuptools, no network.
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", out, source])
    (built,) = out.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", "--without-pip", venv])
    run([sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "--no-deps", "--no-index", wheel])
    borrow_dependencies(venv)
    return venv


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A working directory with no source tree in it or above it."""
    assert not tmp_path.resolve().is_relative_to(ROOT.resolve())
    return tmp_path


def test_the_wheel_carries_the_data_files_the_package_reads(wheel: Path):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert set(DATA_FILES) <= names, set(DATA_FILES) - names


def test_every_non_python_file_of_the_package_is_shipped(source: Path, wheel: Path):
    """A data file added under exporter/ without a package-data glob fails here, not in production."""
    names = set(zipfile.ZipFile(wheel).namelist())
    data = {p.relative_to(source).as_posix() for p in (source / "exporter").rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")}
    assert set(DATA_FILES) <= data  # the list above still names real files
    assert data - DEV_ONLY <= names, (data - DEV_ONLY) - names


def test_exporter_is_imported_from_the_new_venv(venv: Path, outside: Path):
    found = Path(run([venv / "bin" / "python", "-c", "import exporter; print(exporter.__file__)"], outside).strip())
    assert found.resolve().is_relative_to(venv.resolve())
    assert not found.resolve().is_relative_to(ROOT.resolve())


def test_once_on_the_simulator_prints_chip_series(venv: Path, outside: Path):
    found = samples(run([venv / "bin" / "cann-exporter", "once", "--simulate"], outside))
    up = values(found, "npu_up", "device")
    assert up and set(up.values()) == {1.0}, up
    assert values(found, "npu_expected_devices", "source") == {"pci": 8.0}  # the simulated model's sysfs tree
    assert values(found, "npu_chip_owner_info", "runtime")["slurm"] == 1.0  # the simulated model's procfs tree
    assert any(name.startswith("npu_") and name != "npu_up" for name, _ in found)


def test_generate_writes_rules_and_dashboards(venv: Path, outside: Path):
    out = outside / "generated"
    run([venv / "bin" / "cann-exporter", "generate", "--out", out], outside)
    for name in ("cann-exporter.alerts.yml", "cann-exporter.rules.yml"):
        groups = yaml.safe_load((out / "alerts" / name).read_text(encoding="utf-8"))["groups"]
        assert groups and all(group["rules"] for group in groups), name
    boards = sorted((out / "grafana" / "dashboards").glob("*.json"))
    assert {p.name for p in boards} == {p.name for p in (ROOT / "grafana" / "dashboards").glob("*.json")}
    assert all(json.loads(p.read_text(encoding="utf-8"))["panels"] for p in boards)
    assert sorted(p.name for p in (out / "grafana" / "provisioning").glob("*/*.yml")) == ["cann-exporter.yml"] * 2


def test_the_openapi_document_is_served_from_the_installed_package(venv: Path, outside: Path):
    # The handler ignores its request: calling it shows what GET /api/v1/openapi.yaml returns.
    script = (
        "import asyncio\nfrom exporter.jobs import http\nprint(http.OPENAPI_PATH)\nprint(asyncio.run(http.openapi_handler()(None)).text)"
    )
    path, _, text = run([venv / "bin" / "python", "-c", script], outside).partition("\n")
    assert Path(path).resolve().is_relative_to(venv.resolve())
    document = yaml.safe_load(text)
    assert document["openapi"].startswith("3.") and "/api/v1/steps" in document["paths"]
