"""Regenerate api_pb2.py / api_pb2.pyi from api.proto (a development tool, not run by the exporter).

    pip install 'grpcio-tools==1.62.3'   # protoc 25: gencode without a runtime version pin
    python -m exporter.pods.podresources_pb.regenerate

Run from the repository root: the proto's path relative to the root becomes its name in the
protobuf descriptor pool (``exporter/pods/podresources_pb/api.proto``), which keeps it
from clashing with any other ``api.proto`` loaded in the same process.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

PROTO = "exporter/pods/podresources_pb/api.proto"
TESTED_GENERATOR = "1.62.3"


def main() -> int:
    try:
        protoc = importlib.import_module("grpc_tools.protoc")  # untyped: a module object, no stub needed
    except ImportError:
        print(f"grpcio-tools is not installed: pip install 'grpcio-tools=={TESTED_GENERATOR}'", file=sys.stderr)
        return 2
    root = Path(__file__).resolve().parents[3]
    if not (root / PROTO).exists():
        print(f"{PROTO} not found under {root}", file=sys.stderr)
        return 2
    try:
        from importlib.metadata import version

        found = version("grpcio-tools")
    except Exception:  # pragma: no cover - metadata missing
        found = "unknown"
    if found != TESTED_GENERATOR:
        print(
            f"warning: grpcio-tools {found}, not {TESTED_GENERATOR}: newer generators pin the protobuf "
            "runtime to their own version; check the generated header before committing",
            file=sys.stderr,
        )
    status = protoc.main(["protoc", f"-I{root}", f"--python_out={root}", f"--pyi_out={root}", str(root / PROTO)])
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
