"""A toy source: one number read from a file every interval (e.g. a fan sensor's sysfs file).

The smallest complete source package, as docs/architecture.md's "Adding a source" lists it:
tests/node/test_adding_a_source.py copies it into a copy of `exporter/` as `exporter/toy/`,
adds its one line to the table, and checks it is served, switched off by its flag, described by
check-config and listed on the landing page. It is never imported from here.
"""
