"""One node's exporter put together: settings from every package's options (settings.py), the
simulator standing in for the tools (simulate.py), the sources, sampler and registry
(assembly.py), the snapshot they publish (snapshot.py) and its rendering (exposition.py)."""
