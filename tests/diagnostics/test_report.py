"""`cann-exporter report`: the 30-day capacity report from the generated history. The numbers
are the known ones; the HTML opens in headless Chromium without errors; every chart is a
non-empty image."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from exporter.diagnostics.charts import CHARTS
from tests.support import history as h
from tests.support.cli import run_report
from tests.support.history import PRICE_PER_KWH as PRICE
from tests.support.ports import free_port
from tests.support.prometheus import Prometheus
from tests.support.tools import tool

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]
HOURS = 30 * 24


def numbers(directory: Path) -> dict:
    return json.loads((directory / "capacity.json").read_text())


def test_totals_are_the_known_ones(capacity_report: Path) -> None:
    doc = numbers(capacity_report)
    t = doc["totals"]
    assert (t["chips"], t["nodes"], t["chip_hours"]) == (12, 3, 12 * HOURS)
    # idle: node-c chip 0 all month, node-b chips 2 and 3 for the first 15 of the 30 days
    assert t["idle_chip_hours"] == pytest.approx(HOURS + 2 * HOURS / 2, abs=3)
    # in-use time below 60%: node-b's chips (2 x 30 days + 2 x 15 days) of all in-use chip time
    in_use_hours = 12 * HOURS - t["idle_chip_hours"]
    assert t["below_share"] == pytest.approx((2 * HOURS + 2 * HOURS / 2) / in_use_hours, abs=0.002)
    expected = (sum(h.NODE_A_UTIL) * HOURS + h.NODE_B_UTIL * 3 * HOURS + sum(h.SAW) / 2 * HOURS + 2 * h.NODE_C_BUSY * HOURS) / in_use_hours
    assert t["mean_utilization_in_use"] == pytest.approx(expected, abs=0.002)
    assert doc["verdict"] == "warning" and doc["step"] == 3600


def test_nodes_namespaces_and_hbm(capacity_report: Path) -> None:
    doc = numbers(capacity_report)
    nodes = {n["instance"]: n for n in doc["nodes"]}
    assert nodes["node-a:9435"]["mean_utilization"] == pytest.approx(0.90) and nodes["node-a:9435"]["verdict"] == "healthy"
    assert nodes["node-b:9435"]["mean_utilization"] == pytest.approx(0.40, abs=1e-3) and nodes["node-b:9435"]["verdict"] == "abnormal"
    assert nodes["node-b:9435"]["below_share"] == pytest.approx(1.0)
    assert nodes["node-c:9435"]["idle_chip_hours"] == HOURS and nodes["node-a:9435"]["idle_chip_hours"] == 0
    assert nodes["node-a:9435"]["hbm_peak_ratio"] == pytest.approx(h.HBM_FILL[1], abs=0.01)
    assert nodes["node-b:9435"]["hbm_peak_ratio"] == pytest.approx(h.HBM_OTHER)
    assert nodes["node-c:9435"]["hbm_peak_ratio"] is None  # no HBM series
    assert "no npu_hbm_used_bytes / npu_hbm_total_bytes series from node-c:9435: not in the HBM headroom" in doc["notes"]
    spaces = {n["namespace"]: n for n in doc["namespaces"]}
    assert set(spaces) == {"team-a", "team-b", "team-c"}
    assert spaces["team-b"]["verdict"] == "abnormal" and spaces["team-b"]["chips"] == 4
    assert spaces["team-c"]["mean_utilization"] == pytest.approx((sum(h.SAW) / 2 + 2 * h.NODE_C_BUSY) / 3, abs=1e-3)


def test_chip_hours_and_allocated_but_idle_hours_per_owner_on_every_runtime(capacity_report: Path) -> None:
    """A Kubernetes pod, a Docker container and a Slurm job on three chips (h.OWNERS), each its
    own row: chip-hours over the time it held the chip, allocated-but-idle the part at 0%."""
    doc = numbers(capacity_report)
    owners = {(o["runtime"], o["owner"]): o for o in doc["owners"]}
    pod, container, job = h.OWNERS
    assert set(owners) == {(o.runtime, o.owner) for o in h.OWNERS}  # chips without an owner series: no row
    slurm_hours = h.SLURM_SINCE / 3600
    idle_until_growth = HOURS - h.NODE_B_GROWTH_AGO / 3600  # node-b chip 3 at 0% until its growth
    expected = {
        pod: (HOURS, 0.0, h.NODE_A_UTIL[pod.npu]),
        container: (HOURS, idle_until_growth, h.NODE_B_UTIL * (HOURS - idle_until_growth) / HOURS),
        job: (slurm_hours, slurm_hours, 0.0),  # node-c chip 0: nothing runs on it
    }
    for o, (hours, idle, mean) in expected.items():
        row = owners[(o.runtime, o.owner)]
        assert (row["chips"], row["chip_hours"], row["idle_chip_hours"]) == (1, hours, idle), o.owner
        assert row["mean_utilization"] == pytest.approx(mean, abs=1e-6), o.owner
        assert row["name"] == f"{o.runtime} · {o.owner}"
    assert [o["runtime"] for o in doc["owners"]] == ["docker", "kubernetes", "slurm"]  # most chip-hours first, then by name
    assert owners[("slurm", job.owner)]["idle_share"] == 1.0 and owners[("docker", container.owner)]["idle_share"] == 0.5
    summary = [f for f in doc["findings"] if f.startswith(("Chip-hours per owner: ", "Allocated but idle"))]
    assert summary == [
        f"Chip-hours per owner: docker · llm-serve (720), kubernetes · team-a/team-a-trainer (720), slurm · {job.owner} (240).",
        f"Allocated but idle (held, AI Cores below 1%), chip-hours: docker · llm-serve (360 of 720, 50.0%), slurm · {job.owner} "
        "(240 of 240, 100.0%).",
    ]
    html = (capacity_report / "index.html").read_text()
    assert "<h2>Chip-hours per owner</h2>" in html and "<th>allocated but idle</th>" in html
    assert f"<td>slurm · {job.owner}</td><td>1</td><td>240</td><td>240</td><td>100.0%</td>" in html


def test_energy_per_node_namespace_and_job_with_cost(capacity_report: Path) -> None:
    """Watts x hours of the history: idle energy is node-b's (in use at 40%, and idle chips 2 and
    3 for the first 15 days) and node-c chip 0's (nothing on it); the saw-tooth chip's 65% is not."""
    energy = numbers(capacity_report)["energy"]
    kwh = {n: sum(h.WATTS[n]) * HOURS / 1000 for n in h.WATTS}
    grown = 2 * (h.IDLE_WATTS + 200.0) * HOURS / 2 / 1000  # node-b chips 2, 3: idle, then in use
    kwh["node-b:9435"] = 2 * 200.0 * HOURS / 1000 + grown
    nodes = {n["name"]: n for n in energy["nodes"]}
    for node, expected in kwh.items():
        assert nodes[node]["kwh"] == pytest.approx(expected, abs=0.5), node
        assert nodes[node]["cost"] == pytest.approx(nodes[node]["kwh"] * PRICE)
    assert nodes["node-a:9435"]["idle_kwh"] == pytest.approx(0, abs=1e-6)
    assert nodes["node-b:9435"]["idle_kwh"] == pytest.approx(kwh["node-b:9435"], abs=0.5)
    assert nodes["node-c:9435"]["idle_kwh"] == pytest.approx(h.IDLE_WATTS * HOURS / 1000, abs=0.1)
    assert energy["kwh"] == pytest.approx(sum(kwh.values()), abs=1.5) and energy["price_per_kwh"] == PRICE
    assert energy["idle_cost"] == pytest.approx(energy["idle_kwh"] * PRICE)
    spaces = {n["name"]: n["kwh"] for n in energy["namespaces"]}
    assert spaces == pytest.approx(
        {
            "team-a": kwh["node-a:9435"],
            "team-b": 2 * 200.0 * HOURS / 1000 + 2 * 200.0 * HOURS / 2 / 1000,
            "team-c": (250.0 + 2 * 350.0) * HOURS / 1000,
        },
        abs=0.5,
    )
    jobs = {j["name"]: j["kwh"] for j in energy["jobs"]}  # the jobs' last 3 days, on the chips npu_job_info names
    assert jobs == pytest.approx({"bert": 2 * 300.0 * 72 / 1000, "slow": 200.0 * 72 / 1000, "stuck": 350.0 * 72 / 1000}, abs=0.1)
    html = (capacity_report / "index.html").read_text()
    assert "<h2>Energy</h2>" in html and "<th>kWh</th><th>cost</th>" in html and "<th>training job</th>" in html
    assert any(f.startswith("Energy: ") and ", cost " in f for f in numbers(capacity_report)["findings"])


def test_goodput_per_job_and_namespace_in_npu_hours(capacity_report: Path) -> None:
    """The jobs' last 3 days (stuck's 71 hours), one NPU per rank, split as the history's shares;
    namespaces through the pods on the chips npu_job_info names; the restart slow had."""
    goodput = numbers(capacity_report)["goodput"]
    hours = {"bert": 2 * 72.0, "slow": 72.0, "stuck": 71.0}
    jobs = {j["name"]: j for j in goodput["jobs"]}
    assert set(jobs) == set(hours)
    for job in h.JOBS:
        row = jobs[job.name]
        assert row["ranks"] == len(job.ranks)
        assert row["npu_hours"] == pytest.approx(hours[job.name], rel=0.01), job.name
        assert row["goodput_share"] == pytest.approx(job.goodput, abs=0.005), job.name
        assert row["goodput_hours"] == pytest.approx(job.goodput * hours[job.name], rel=0.01), job.name
        for kind in h.BADPUT_KINDS:
            assert row["badput_shares"][kind] == pytest.approx(job.badput.get(kind, 0.0), abs=0.005), (job.name, kind)
        assert row["disruptions"] == pytest.approx(len(job.restarts_ago), abs=0.05), job.name
    assert jobs["slow"]["largest_badput"] == "checkpoint_save" and jobs["bert"]["largest_badput"] == "data_wait"
    spaces = {n["name"]: n["npu_hours"] for n in goodput["namespaces"]}
    assert spaces == pytest.approx({"team-a": hours["bert"], "team-b": hours["slow"], "team-c": hours["stuck"]}, rel=0.01)
    assert goodput["npu_hours"] == pytest.approx(sum(hours.values()), rel=0.01) and goodput["disruptions"] == pytest.approx(1, abs=0.05)
    html = (capacity_report / "index.html").read_text()
    assert "<h2>Goodput</h2>" in html and "<th>training job</th><th>NPU-hours</th><th>goodput</th>" in html
    assert "<th>checkpoint_save</th>" in html and "<th>checkpoint_restore</th>" not in html  # kinds no job had are left out
    summary = next(f for f in numbers(capacity_report)["findings"] if f.startswith("Goodput: "))
    assert "NPU-hours of training jobs" in summary and "the largest badput: data_wait" in summary and "1 restart(s)" in summary


def test_forecasts(capacity_report: Path) -> None:
    forecasts = {f["name"]: f for f in numbers(capacity_report)["forecasts"]}
    hbm = forecasts["HBM used on node-a:9435"]
    per_day = (h.HBM_FILL[1] - h.HBM_FILL[0]) / h.HISTORY_DAYS
    assert hbm["slope_per_day"] == pytest.approx(per_day, rel=0.02)
    # from 80% to the 95% of NPUHBMAlmostFull at ~1.9 points a day (daily peaks: half a day earlier)
    assert hbm["days_to_limit"] == pytest.approx((0.95 - h.HBM_FILL[1]) / per_day - 0.5, abs=0.5)
    assert "HBM used on node-b:9435" not in forecasts  # flat: not forecast
    assert forecasts["chips in use"]["slope_per_day"] > 0  # node-b grew by two chips


def test_written_summary(capacity_report: Path) -> None:
    findings = numbers(capacity_report)["findings"]
    text = "\n".join(findings)
    assert "12 chips on 3 nodes" in text
    assert "Nodes below the low-utilization bound: node-b:9435 (40.0%)." in text
    # each of node-b's chips in use is named, with its average
    assert "Chips in use averaging below 60%: device 0 (NPU 0, chip 0) on node-b:9435 (40.0%), " in text
    assert re.search(r"Idle chip-hours: 1,44\d of 8,640", text)
    assert re.search(r"Forecast, HBM used on node-a:9435: \+1[34]\.\d points/week; reaches 95% in about 7\.\d days", text)


def test_charts_are_non_empty_images(capacity_report: Path) -> None:
    from PIL import Image, ImageStat

    names = {
        "utilization_nodes.png",
        "utilization_namespaces.png",
        "utilization_distribution.png",
        "idle_chip_hours.png",
        "below_threshold.png",
        "hbm_headroom.png",
        "allocation_vs_use.png",
        "forecast.png",
    }
    assert {p.name for p in capacity_report.glob("*.png")} == names and len(CHARTS) == len(names)
    for path in capacity_report.glob("*.png"):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        with Image.open(path) as image:
            assert image.width >= 600 and image.height >= 200, path.name
            stat = ImageStat.Stat(image.convert("L"))
            assert stat.stddev[0] > 10, f"{path.name} looks blank"
            colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
            assert colours is None or len(colours) > 20, path.name


def _chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    binary = tool("chromium")
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-extensions",
        "--disable-default-apps",
        f"--user-data-dir={profile}",
    ]
    return subprocess.run(
        [binary, *flags, *args], check=False, capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(profile)}
    )


def test_html_opens_in_chromium(capacity_report: Path, tmp_path: Path) -> None:
    index = capacity_report / "index.html"
    dom = _chromium(["--virtual-time-budget=3000", "--dump-dom", index.as_uri()], tmp_path / "profile-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<h1>NPU capacity report</h1>" in dom.stdout
    srcs = re.findall(r'<img src="([^"]+)"', dom.stdout)
    assert sorted(srcs) == sorted(p.name for p in capacity_report.glob("*.png"))
    # every <img> decoded: a page script would need JS; instead render it and check the shot is large
    shot = tmp_path / "page.png"
    result = _chromium(["--window-size=1100,2400", f"--screenshot={shot}", index.as_uri()], tmp_path / "profile-shot")
    assert result.returncode == 0 and shot.exists(), result.stderr[-2000:]
    from PIL import Image, ImageStat

    with Image.open(shot) as image:
        assert image.size == (1100, 2400)
        assert ImageStat.Stat(image.convert("L")).stddev[0] > 10
    assert "ERROR:CONSOLE" not in result.stderr


def test_images_load_in_chromium(capacity_report: Path, tmp_path: Path) -> None:
    """A page that reports each image's decoded size proves Chromium loaded every chart."""
    probe = capacity_report / "probe.html"
    images = "".join(f'<img src="{p.name}">' for p in sorted(capacity_report.glob("*.png")))
    probe.write_text(
        "<!DOCTYPE html><html><body>" + images + "<pre id=out></pre><script>"
        "window.onload=()=>{document.getElementById('out').textContent=[...document.images]"
        ".map(i=>i.complete&&i.naturalWidth>0?'ok':'broken:'+i.src).join(' ')}</script></body></html>"
    )
    try:
        dom = _chromium(["--virtual-time-budget=5000", "--dump-dom", probe.as_uri()], tmp_path / "profile")
    finally:
        probe.unlink()
    found = re.search(r'<pre id="out">([^<]*)</pre>', dom.stdout)
    assert found, dom.stdout[-1000:]
    assert found.group(1).split() == ["ok"] * 8


# --- bad input ------------------------------------------------------------------------------------------


def test_unreachable_prometheus_exits_2(tmp_path: Path) -> None:
    result = run_report("--prometheus", f"http://127.0.0.1:{free_port()}", "--out", str(tmp_path / "r"), "--timeout", "3s")
    assert (result.code, result.out) == (2, "")
    assert "cannot reach Prometheus" in result.err and "Traceback" not in result.err
    assert not (tmp_path / "r" / "index.html").exists()


def test_empty_window_exits_2(prometheus: Prometheus, tmp_path: Path) -> None:
    result = run_report(
        "--prometheus", prometheus.url, "--end", str(prometheus.now - 120 * 86400), "--range", "7d", "--out", str(tmp_path / "r")
    )
    assert result.code == 2 and "has no npu_aicore_utilization_ratio series" in result.err


def test_missing_series_are_noted_and_the_rest_reported(prometheus: Prometheus, tmp_path: Path) -> None:
    # node-c reports no HBM at all: no HBM chart or forecast, a note naming the series, the rest as usual
    out = tmp_path / "r"
    result = run_report(
        "--prometheus",
        prometheus.url,
        "--end",
        str(prometheus.now),
        "--range",
        "2d",
        "--selector",
        '{instance="node-c:9435"}',
        "--out",
        str(out),
    )
    assert result.code == 0, result.err
    doc = numbers(out)
    assert doc["step"] == 300 and doc["totals"]["chips"] == 4
    assert "no npu_hbm_used_bytes / npu_hbm_total_bytes series: HBM headroom not shown" in doc["notes"]
    assert "hbm_headroom" not in doc["charts"] and not (out / "hbm_headroom.png").exists()
    html = (out / "index.html").read_text()
    assert 'HBM headroom</h2>\n<p class="note">Prometheus has no npu_hbm_used_bytes / npu_hbm_total_bytes series' in html
    # no --price-per-kwh: no cost anywhere (the energy of the last 2 hours only: older samples are 15 minutes
    # apart, and a 5m step's increase needs two samples)
    nodes = doc["energy"]["nodes"]
    assert [n["name"] for n in nodes] == ["node-c:9435"] and "cost" not in nodes[0] and "cost" not in doc["energy"]
    assert nodes[0]["kwh"] == pytest.approx(sum(h.WATTS["node-c:9435"]) * 2 / 1000, rel=0.05)
    assert "<th>cost</th>" not in html and "cost" not in " ".join(doc["findings"])


def test_unwritable_output_exits_2(prometheus: Prometheus, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = run_report("--prometheus", prometheus.url, "--end", str(prometheus.now), "--range", "1d", "--out", str(blocker / "sub"))
    assert result.code == 2 and "cannot write the report" in result.err


@pytest.mark.parametrize("problem", ["no matplotlib", "unwritable"])
def test_what_the_report_needs_is_checked_before_any_query(problem: str, tmp_path: Path) -> None:
    """Without matplotlib, or with an output it cannot write, the report says so at once: a
    listening Prometheus stand-in sees no connection."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out = blocker / "sub" if problem == "unwritable" else tmp_path / "r"
    hide = "sys.modules['matplotlib'] = None; " if problem == "no matplotlib" else ""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(0)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                f"import sys; {hide}from exporter.cli import main; sys.exit(main())",
                "report",
                "--prometheus",
                url,
                "--range",
                "1d",
                "--out",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert proc.returncode == 2, proc.stderr
    expected = "the report needs matplotlib" if problem == "no matplotlib" else "cannot write the report"
    assert expected in proc.stderr and "querying" not in proc.stderr


@pytest.mark.parametrize("price", ["0", "-1", "nan", "inf", "1e400", "cheap"])
def test_a_bad_price_is_a_usage_error(price: str, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from exporter.commands import report

    parser = argparse.ArgumentParser(prog="cann-exporter report")
    report.add_arguments(parser)
    with pytest.raises(SystemExit) as exit:
        parser.parse_args(["--prometheus", "http://127.0.0.1:1", "--out", "x", "--price-per-kwh", price])
    assert exit.value.code == 2
    assert "argument --price-per-kwh: expected a positive" in capsys.readouterr().err


def test_progress_shows_on_a_terminal_only(prometheus: Prometheus, tmp_path: Path) -> None:
    import argparse
    import io

    from exporter.commands import report

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    parser = argparse.ArgumentParser()
    report.add_arguments(parser)
    args = parser.parse_args(["--prometheus", prometheus.url, "--range", "1d", "--end", str(prometheus.now), "--out", str(tmp_path / "r")])
    err = Tty()
    assert report.run(args, out=io.StringIO(), err=err) == 0
    text = err.getvalue()
    assert "\rquerying Prometheus: 1/21 history held" in text and "2/21 chip utilization" in text and "9/21 owners" in text
    assert "12/21 HBM total" in text and "16/21 energy per job" in text and "17/21 goodput" in text and "21/21 chips' pods" in text
    assert text.endswith("\r") and text.rstrip("\r ").count("\r") >= 7  # the line is cleared at the end
    quiet = io.StringIO()
    assert report.run(args, out=io.StringIO(), err=quiet) == 0 and quiet.getvalue() == ""
