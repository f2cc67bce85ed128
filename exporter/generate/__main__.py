"""`python -m exporter.generate [--thresholds FILE] [--out DIR]` (same as `cann-exporter generate`)."""

import argparse
import sys

from exporter.generate import add_arguments, run

parser = argparse.ArgumentParser(prog="cann-exporter generate", description="alerts/ and grafana/ from the threshold table")
add_arguments(parser)
sys.exit(run(parser.parse_args()))
