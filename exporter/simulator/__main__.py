"""`python -m exporter.simulator [sim options] [--] <npu-smi args>`."""

import sys

from exporter.simulator.npusmi import main

sys.exit(main())
