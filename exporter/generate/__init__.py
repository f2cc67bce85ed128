"""Alerting rules, recording rules and Grafana dashboards from the health-threshold table
(exporter/thresholds/, or ``--thresholds FILE``).

rules.py (alerts, with one *_rules.py module per rule group: chip, interconnect, training,
network, exporter), recording.py (recording rules, energy_rules.py their energy group) and
dashboards.py (Grafana) are pure generators returning plain data. A dashboard is one *_board.py
module: a function of rows, each row a function returning its panels, made by the builders of
panels.py (one per kind of panel) and put together by board.py. writer.py serialises them with
a "generated, do not edit" header. `cann-exporter generate` (commands/generate.py) writes them
under ``--out``:

    alerts/cann-exporter.alerts.yml      alerting rules (every contract alert)
    alerts/cann-exporter.rules.yml       recording rules (capacity planning)
    alertmanager/cann-exporter.inhibit.yml  Alertmanager inhibit rules (inhibit.py)
    grafana/dashboards/*.json            Grafana 10+ dashboards
    grafana/provisioning/...             datasource and dashboard-provider files

alerts/tests/ (promtool unit tests) is written by hand and left alone.
"""
