"""The commands of `cann-exporter`, one module each; cli.py dispatches to them."""
