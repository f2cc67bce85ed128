"""Readers of the files in a profiler export, one kind each (docs/formats/profiler-exports.md):
CSV tables (csvtable.py, tables.py), the JSON timeline streamed event by event (jsonstream.py,
trace.py) and small JSON files (info.py). Only ProfileParseError escapes; problems that leave
part of a file usable are returned as Issue records beside the data (common.py)."""
