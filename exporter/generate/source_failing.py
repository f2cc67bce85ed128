"""CANNExporterSourceFailing's description: a partial failure (some subjects of a source, such
as `usages -i 3`, failing while the others succeed) names the failing subjects from the
exporter's own series and says the rest of the source is fresh; a whole failure says its
metrics are stale. Prometheus template queries, at each evaluation."""

from __future__ import annotations

from exporter.core.selfmetrics import (
    MAX_FAILING_SUBJECTS,
    SOURCE_FAILED_SUBJECTS,
    SOURCE_SUBJECT_FAILING,
    SOURCE_SUBJECTS,
)


def _of(name: str) -> str:
    """The alert's source's series ``name``, as a template query."""
    return f'printf "%s{{job=\\"%s\\",instance=\\"%s\\",source=\\"%s\\"}}" "{name}" $labels.job $labels.instance $labels.source | query'


def source_failing_description(window: str) -> str:
    cap = f"{MAX_FAILING_SUBJECTS}.0"
    return (
        "{{ $failed := 0.0 }}{{ $tried := 0.0 }}"
        f"{{{{ with {_of(SOURCE_FAILED_SUBJECTS.name)} }}}}{{{{ $failed = . | first | value }}}}{{{{ end }}}}"
        f"{{{{ with {_of(SOURCE_SUBJECTS.name)} }}}}{{{{ $tried = . | first | value }}}}{{{{ end }}}}"
        "{{ if and (gt $failed 0.0) (lt $failed $tried) }}"
        "{{ $failed }} of the {{ $tried }} subjects of the {{ $labels.source }} source of the exporter on "
        f"{{{{ $labels.instance }}}} have failed for {window}: "
        f'{{{{ range $i, $s := {_of(SOURCE_SUBJECT_FAILING.name)} | sortByLabel "subject" }}}}{{{{ if $i }}}}, {{{{ end }}}}'
        "{{ $s.Labels.subject }} ({{ $s.Labels.reason }}){{ end }}"
        f"{{{{ if gt $failed {cap} }}}} (the first {MAX_FAILING_SUBJECTS}){{{{ end }}}}. "
        "Only their metrics are stale or missing; the rest of the source is fresh."
        "{{ else }}"
        "The {{ $labels.source }} source of the exporter on {{ $labels.instance }} has failed for "
        f"{window}{{{{ if gt $tried 0.0 }}}} (all of its {{{{ $tried }}}} subjects){{{{ end }}}}; its metrics are "
        "stale or missing (see cann_exporter_source_errors_total by reason)."
        "{{ end }}"
    )
