"""The recording rules `report` reads, by name (generate/recording.py and energy_rules.py write
them), and the least history its forecasts and the capacity dashboard's are made on."""

from __future__ import annotations

# The hourly per-chip records: one sample per chip-hour at a 30-day report's 1-hour step, where
# the raw series hold 120.
REPORT_UTIL = "chip:npu_aicore_utilization_ratio:avg1h"
REPORT_IN_USE = "chip:npu_in_use:max1h"
REPORT_OBSERVED = "chip:npu_observed_seconds:sum1h"
REPORT_UNHEALTHY = "chip:npu_unhealthy:max1h"
REPORT_NAMESPACE = "chip:npu_pod_info:max1h"
REPORT_OWNER = "chip:npu_chip_owner_info:max1h"
REPORT_HBM_USED = "instance:npu_hbm_used_bytes:avg1h"
REPORT_HBM_TOTAL = "instance:npu_hbm_total_bytes:avg1h"

# The energy over each hour, per node (node-sized answers: --selector still matches job and
# instance), in kWh.
JOULES_PER_KWH = 3.6e6
NODE_KWH = "instance:npu_energy_kwh:sum1h"
NODE_IDLE_KWH = "instance:npu_energy_idle_kwh:sum1h"
NODE_NAMESPACE_KWH = "instance_namespace:npu_energy_kwh:sum1h"
NODE_JOB_KWH = "instance_job_name:npu_energy_kwh:sum1h"

# The least history a forecast is made on, in days: `report` (daily values) and the capacity
# dashboard's projections (the recording rule they project) alike.
MIN_FORECAST_DAYS = 3
