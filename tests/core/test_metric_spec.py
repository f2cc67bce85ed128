"""MetricSpec admits classic Prometheus names only: the exposition encodes them without escaping."""

from __future__ import annotations

import pytest

from exporter.core.metric import MetricSpec, spec


@pytest.mark.parametrize(
    ("name", "labels"),
    [
        ("npu:utilization", ()),
        ("npu-power", ()),
        ("9npu", ()),
        ("npu_up", ("__name",)),
        ("npu_up", ("chip.id",)),
        ("", ()),
    ],
)
def test_names_that_are_not_classic_are_refused_where_they_are_defined(name, labels):
    with pytest.raises(ValueError, match="classic Prometheus name"):
        MetricSpec(name, "gauge", "help", labels)


def test_classic_names_are_accepted():
    assert spec("npu_up", "gauge", "help", ("npu", "chip", "_private"), field="up").labels == ("npu", "chip", "_private")
