"""detect_error / check_output on npu-smi's error outputs, and no false alarms on good ones."""

from __future__ import annotations

import pytest

from exporter.npusmi.parse.errors import check_output, detect_error
from exporter.npusmi.parse.records import NpuSmiError
from tests.support.paths import NPU_SMI_FIXTURES

FIXTURES = NPU_SMI_FIXTURES


def load(name: str) -> str:
    return (FIXTURES / f"{name}.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "reason", "code", "message"),
    [
        ("error-dcmi-init-8005__container__unknown__1", "dcmi_init_failed", -8005, "dcmi module initialize failed. ret is -8005"),
        (
            "error-dcmi-init-8005-nonroot__unknown__25.5.2__1__mangled",
            "dcmi_init_failed",
            -8005,
            "dcmi module initialize failed. ret is -8005",
        ),
        (
            "error-dcmi-init-8020__container__unknown__1",
            "device_busy",
            -8020,
            "dcmi model initialized failed, because the device is used. ret is -8020",
        ),
        ("error-invalid-card-id__910A__23.0.7__1", "invalid_card_id", None, "Invalid card id."),
    ],
)
def test_error_fixtures(name: str, reason: str, code: int | None, message: str) -> None:
    error = detect_error(load(name))
    assert error is not None
    assert (error.reason, error.code, error.message) == (reason, code, message)
    with pytest.raises(NpuSmiError) as raised:
        check_output(load(name))
    assert (raised.value.reason, raised.value.code) == (reason, code)


@pytest.mark.parametrize("name", sorted(p.stem for p in FIXTURES.glob("info*.txt") if not p.stem.endswith("__unsupported")))
def test_good_outputs_are_not_errors(name: str) -> None:
    assert detect_error(load(name)) is None


@pytest.mark.parametrize("name", sorted(p.stem for p in FIXTURES.glob("info*__unsupported.txt")))
def test_unsupported_answers(name: str) -> None:
    # A product without the query: reason not_supported, the answer line as the message.
    error = detect_error(load(name))
    assert error is not None and error.reason == "not_supported"
    assert error.message == load(name).strip()
