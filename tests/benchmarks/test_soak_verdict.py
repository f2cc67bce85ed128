"""The soak's growth verdict (benchmarks/soak.py), on made-up samples: flat passes, a leak fails."""

from __future__ import annotations

from benchmarks.soak import Sample, slope, verdicts


def series(fds=lambda t: 17, children=lambda t: 0, settled=True) -> list[Sample]:
    return [Sample(float(t), 45.0 + 0.001 * (t % 3), fds(t), 1, children(t), settled) for t in range(0, 1200, 30)]


def test_slope_is_least_squares():
    assert abs(slope([(0, 1.0), (1, 3.0), (2, 5.0)]) - 2.0) < 1e-9
    assert slope([(0, 1.0)]) == 0.0


def test_flat_resources_pass_and_noise_is_not_growth():
    result = verdicts(series(fds=lambda t: 17 + (t // 30) % 2))
    assert all(v["flat"] for v in result.values()), result


def test_an_fd_leak_fails():
    result = verdicts(series(fds=lambda t: 17 + t // 60))  # one fd a minute
    assert not result["fds"]["flat"] and result["rss_mib"]["flat"]


def test_no_quiet_moment_in_the_second_half_fails():
    samples = [s if s.t < 600 else Sample(s.t, s.rss_mib, s.fds, s.threads, 1, False) for s in series()]
    assert not any(v["flat"] for v in verdicts(samples).values())
