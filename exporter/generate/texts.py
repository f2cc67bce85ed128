"""The words of every alert text, in one place: a chip is "device D (NPU N, chip C) on
INSTANCE" (D the logic id, label `device`; N the npu-smi NPU id, `npu`; C the chip's index
on the card, `chip`), a training rank "job J rank R, device D (NPU N, chip C) on INSTANCE"
(docs/runbooks.md says the same). Go templates of Prometheus alert annotations."""

from __future__ import annotations

# One vocabulary in every alert text: "device D (NPU N, chip C) on INSTANCE", where D is the
# chip's logic id (npu-smi info -m, what frameworks call the device), N the npu-smi NPU id
# (card) and C the chip's index on that card.
CHIP_TEXT = "device {{ $labels.device }} (NPU {{ $labels.npu }}, chip {{ $labels.chip }}) on {{ $labels.instance }}"
CHIP_SHORT = "device {{ $labels.device }} on {{ $labels.instance }}"
# A training rank's device (joined from npu_job_info, see on_device); its NPU and chip looked up
# in npu_device_info of the same exporter. Nothing when the rank reports no device.
_NPU_CHIP_OF_DEVICE = (
    "{{ with printf `npu_device_info{instance=%q, device=%q}` $labels.instance $labels.device | query }}"
    "{{ with first . }} (NPU {{ .Labels.npu }}, chip {{ .Labels.chip }}){{ end }}{{ end }}"
)

JOB_SHORT = "job {{ $labels.job_name }} rank {{ $labels.rank }}{{ with $labels.device }}, device {{ . }}{{ end }} on {{ $labels.instance }}"
# Who holds the chip (npu_chip_owner_info, the owner source): one phrase per owner, in the words
# of its runtime. Looked up at notification time, so an alert fires the same with no owner known
# (no owner series: nothing is said).
_OWNER = (
    '{{ if eq $o.Labels.runtime "docker" "containerd" "podman" }}{{ $o.Labels.runtime }} container {{ $o.Labels.owner }}'
    '{{ else if eq $o.Labels.runtime "systemd" }}unit {{ $o.Labels.owner }}'
    "{{ else if $o.Labels.pod }}pod {{ $o.Labels.namespace }}/{{ $o.Labels.pod }}"
    '{{ else if eq $o.Labels.runtime "host" }}a host process'
    "{{ else }}{{ $o.Labels.owner }}{{ end }}"
)


def owners_of(selector: str, args: str, opening: str, closing: str = "") -> str:
    """A Go template: ``opening`` and every owner of the chips ``selector`` finds (a printf
    format over ``args``), then ``closing``; nothing when npu_chip_owner_info has none."""
    return (
        f"{{{{ with printf `npu_chip_owner_info{{{selector}}}` {args} | query | sortByLabel `owner` }}}}{opening}"
        f"{{{{ range $i, $o := . }}}}{{{{ if $i }}}},{{{{ end }}}} {_OWNER}{{{{ end }}}}{closing}{{{{ end }}}}"
    )


_CHIP_SELECTOR = ("instance=%q, npu=%q, chip=%q", "$labels.instance $labels.npu $labels.chip")
# `Held by slurm job 4242 (alice).`, `Held by pod train/bert-0.`: a sentence for descriptions.
CHIP_OWNER = owners_of(*_CHIP_SELECTOR, " Held by", ".")
# ` by docker container trainer`: for a summary's "in use by ...".
CHIP_OWNER_SHORT = owners_of(*_CHIP_SELECTOR, " by")
# A training rank's chip's owners, by its device (inside JOB_TEXT's `with $labels.device`).
_JOB_OWNER = owners_of("instance=%q, device=%q", "$labels.instance $labels.device", ", held by", ",")
JOB_TEXT = (
    "job {{ $labels.job_name }} rank {{ $labels.rank }}{{ with $labels.device }}, device {{ . }}"
    f"{_NPU_CHIP_OF_DEVICE}{_JOB_OWNER}{{{{ end }}}} on {{{{ $labels.instance }}}}"
)

# Network series add `port` ("" = absent on chips with one port; "<udie>/<port>" on A5).
PORT = "{{ with $labels.port }} port {{ . }}{{ end }}"
PORT_TEXT = f"device {{{{ $labels.device }}}} (NPU {{{{ $labels.npu }}}}, chip {{{{ $labels.chip }}}}){PORT} on {{{{ $labels.instance }}}}"
PORT_SHORT = f"device {{{{ $labels.device }}}}{PORT} on {{{{ $labels.instance }}}}"


# The chip's npu_health_error_info codes with their handling levels, when the exporter read any
# (nothing otherwise).
ERROR_CODES = (
    "{{ with printf `npu_health_error_info{instance=%q, npu=%q, chip=%q}` $labels.instance $labels.npu $labels.chip"
    " | query | sortByLabel `code` }} Error codes:{{ range . }} {{ .Labels.code }}{{ with .Labels.level }} ({{ . }}){{ end }}{{ end }}.{{ end }}"
)


# The chip's isolated pages by memory and type, as npu-smi prints them (nothing when none).
ISOLATED_NOW = (
    "{{ with printf `npu_ecc_isolated_pages{instance=%q, npu=%q, chip=%q} > 0` $labels.instance $labels.npu $labels.chip"
    " | query | sortByLabel `type` | sortByLabel `memory` }} Isolated now:{{ range . }} {{ .Labels.memory }} {{ .Labels.type }}"
    " {{ .Value }}{{ end }}.{{ end }}"
)


# The alert's value as its texts print it: as is, as a percentage, as a whole count.
VALUE = "{{ $value }}"
SHARE = "{{ $value | humanizePercentage }}"
COUNT = '{{ $value | printf "%.0f" }}'


def upper_first(text: str) -> str:
    """``text`` opening a sentence."""
    return text[0].upper() + text[1:]
