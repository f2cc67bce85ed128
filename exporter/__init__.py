"""cann-exporter: Prometheus exporter for Huawei Ascend NPU nodes (CANN stack)."""

__version__ = "0.1.0"
