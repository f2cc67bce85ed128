"""The health-threshold table and what its alerts mean, read alike by the rule and dashboard
generators (generate/) and by the verdicts of `diagnose`, `report` and `profile` (diagnostics/).

table.py loads and validates thresholds.yaml (beside it, or ``--thresholds FILE``) and judges
values by it; alert_facts.py reads the params of a few alerts that more than rules use (isolated
pages, optical power, profile freshness); records.py names the recording rules `report` reads.
"""
