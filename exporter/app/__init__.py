"""The exporter put together: the settings of every package (settings.py), the node's sources
with the web server's own parts (sources.py) and every metric either can serve (catalogue.py).
The node and the web layer know nothing of each other; they meet here and in the commands."""
