"""The three levels of docs/tuning.md as pure functions, after a hardware level that asks
whether the chip itself is sound: observations + threshold table in, findings out. No I/O, no
clock (the readers already turned timestamps into ages).

Where the table has a row for an indicator, its bounds give the verdict and its causes and
levers the advice. Where a check is an alert without a row (saw-tooth, stall), the alert's
threshold from the same table gives the verdict, so `diagnose` and the alerts agree.
"""

from __future__ import annotations

from exporter.diagnostics import hardware, job_ranks
from exporter.diagnostics.chip_checks import chip_findings, page_findings
from exporter.diagnostics.hardware_base import by_subject
from exporter.diagnostics.job_checks import job_findings, mfu_notes
from exporter.diagnostics.model import Observations, Report
from exporter.diagnostics.profile_checks import profile_findings
from exporter.thresholds.table import Thresholds


def analyse(obs: Observations, table: Thresholds) -> Report:
    sound = by_subject([*hardware.hardware_findings(obs.hardware, table), *page_findings(obs.chips, table)])
    findings = [
        *sound,
        *chip_findings(obs.chips, table, hardware.faulty_chips(sound)),
        *job_findings(obs.jobs, table),
        *job_ranks.straggler_findings(obs.jobs, table),
        *profile_findings(obs.profiles, table, job_ranks.cpu_ranks(obs.jobs)),
    ]
    return Report(obs.source, obs.window, tuple(findings), (*obs.notes, *mfu_notes(obs.jobs)))
