"""Asks the kubelet which pod holds which chip, on the sampler's schedule.

Each call is bounded (``podresources.timeout``) and recorded under the source name
``podresources``. The latest good answer is served for ``ttl`` seconds, after which
attribution degrades to none rather than going stale. Device ids that cannot be attributed
are counted by reason and logged once each.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType

from exporter.core import clock
from exporter.core.clock import Clock
from exporter.core.health import Failure, HealthRegistry
from exporter.core.sampler import Task
from exporter.npusmi.part import ChipSample
from exporter.pods.kubelet import (
    SKIP_REASONS,
    ParsedResources,
    PodAttribution,
    PodResourcesError,
    attributions_from_response,
    list_pod_resources,
)
from exporter.pods.options import MATCH_ON, PodsOptions
from exporter.pods.part import PodsPart, match

log = logging.getLogger("exporter.pods")

SOURCE_NAME = "podresources"
_LOGGED_CAP = 4096  # distinct ids remembered for log-once (bounded under pod churn)

Fetch = Callable[[str, float, int], Awaitable[object]]


def in_kubernetes(env: Mapping[str, str] | None = None) -> bool:
    """True inside a Kubernetes pod (the kubelet sets KUBERNETES_SERVICE_HOST in every container).

    For an `auto` default of ``podresources.enabled``: on in a pod, off outside Kubernetes.
    """
    env = os.environ if env is None else env
    return bool(env.get("KUBERNETES_SERVICE_HOST"))


class PodResourcesSource:
    """The latest kubelet answer within its TTL; ``part(chips)`` matches it to npu-smi's chips."""

    def __init__(
        self,
        options: PodsOptions,
        health: HealthRegistry,
        *,
        fetch: Fetch = list_pod_resources,
        clock: Clock = clock.monotonic,
        name: str = SOURCE_NAME,
    ) -> None:
        if options.device_id not in MATCH_ON:
            raise ValueError(f"device_id must be one of {', '.join(MATCH_ON)}, got {options.device_id!r}")
        self.options = options
        self.health = health
        self.name = name
        self._fetch = fetch
        self._clock = clock
        self._parsed = ParsedResources((), ())
        self._fetched_at: float | None = None
        self._logged: set[tuple[str, ...]] = set()

    def tasks(self) -> list[Task]:
        return [Task(self.name, self.options.interval, self.refresh)]

    async def refresh(self) -> None:
        """One List call; never raises (except cancellation). Failures go to HealthRegistry."""
        start = time.monotonic()
        failures: list[Failure] = []
        try:
            response = await self._fetch(self.options.socket, self.options.timeout, self.options.max_message_bytes)
            parsed = attributions_from_response(response, self.options.resources)
        except PodResourcesError as exc:
            failures.append(Failure(self.options.socket, exc.reason, str(exc)))
        except Exception as exc:  # a malformed answer must not stop sampling
            failures.append(Failure(self.options.socket, "garbled", repr(exc)))
        else:
            self._parsed = parsed
            self._fetched_at = self._clock()
            for reason, resource, device_id in parsed.skipped:
                self._log_once(
                    "kubelet device not attributed to a chip",
                    (reason, resource, device_id),
                    source=self.name,
                    reason=reason,
                    resource=resource,
                    device_id=device_id,
                )
        self.health[self.name].record(time.monotonic() - start, failures, [self.options.socket])

    def fresh(self) -> bool:
        return self._fetched_at is not None and self._clock() - self._fetched_at <= self.options.ttl

    def attributions(self) -> tuple[PodAttribution, ...]:
        """The latest good answer while it is younger than the TTL, else nothing."""
        return self._parsed.attributions if self.fresh() else ()

    def skipped(self) -> Mapping[str, int]:
        """Device ids of the latest good answer that were not attributed, by reason."""
        counts: Counter[str] = Counter({reason: 0 for reason in SKIP_REASONS})
        if self.fresh():
            counts.update(reason for reason, _, _ in self._parsed.skipped)
        return MappingProxyType(dict(counts))

    def part(self, chips: Sequence[ChipSample]) -> PodsPart:
        matched = match(self.attributions(), chips, self.options.device_id, self.skipped())
        # Without any chip (npu-smi not read yet, or failing) every device is unmatched: that
        # is npu-smi's failure, already logged and counted by its own source.
        if chips:
            for att in matched.no_chip:
                device_id = att.device_id or str(att.device)
                self._log_once(
                    "kubelet device matches no chip on this node",
                    ("no_chip", att.resource_name, device_id),
                    resource=att.resource_name,
                    device_id=device_id,
                    chip_id=att.device,
                    match_on=self.options.device_id,
                    namespace=att.namespace,
                    pod=att.pod,
                    container=att.container,
                )
        return matched.part

    def _log_once(self, message: str, key: tuple[str, ...], **fields: object) -> None:
        if key in self._logged:
            return
        if len(self._logged) >= _LOGGED_CAP:
            self._logged.clear()
        self._logged.add(key)
        log.warning(message, extra=fields)
