"""Alerting rules, recording rules and Grafana dashboards from the health-threshold table
(exporter/thresholds/, or ``--thresholds FILE``).

rules.py (alerts, with one *_rules.py module
per rule group: chip, interconnect, training, network, exporter), recording.py (recording rules,
energy_rules.py their energy group) and dashboards.py with one *_board.py module per dashboard
(Grafana) are pure generators returning plain data; writer.py serialises them with a
"generated, do not edit" header. `cann-exporter generate` (commands/generate.py) writes them
under ``--out``:

    alerts/cann-exporter.alerts.yml      alerting rules (every contract alert)
    alerts/cann-exporter.rules.yml       recording rules (capacity planning)
    alertmanager/cann-exporter.inhibit.yml  Alertmanager inhibit rules (inhibit.py)
    grafana/dashboards/*.json            Grafana 10+ dashboards
    grafana/provisioning/...             datasource and dashboard-provider files

alerts/tests/ (promtool unit tests) is written by hand and left alone.
"""
