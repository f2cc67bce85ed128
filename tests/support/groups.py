"""How `make test` shares the suite out between its pytest-xdist workers (`-n 2 --dist loadscope`,
with the scopes below instead of xdist's per-module ones).

A test file is one unit, so a module-scoped fixture (a wheel and its venv, a Prometheus) is set
up once, as in a serial run; a package with package-scoped servers is one unit for the same
reason. The end-to-end stacks, where a real Prometheus scrapes simulated exporters every second
and alerts are judged on windows of seconds, are one unit: they never run two at once, and they
are handed out first, since together they are the longest unit (the other worker takes the rest).

Only the scheduler's two extension points are replaced (xdist's own schedulers override
``_split_scope`` the same way); tests/test_suite_groups.py fails if an xdist release drops them.
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling
from xdist.workermanage import WorkerController

STACKS = "e2e-stacks"
STACK_FILES = frozenset(
    {
        "tests/generate/test_e2e_prometheus.py",
        "tests/generate/test_e2e_jobs.py",
        "tests/deploy/test_deploy_victoriametrics.py",
    }
)
PACKAGES = ("tests/diagnostics/",)  # a real Prometheus on a month of generated history, per package


def unit_of(nodeid: str) -> str:
    """The unit a test belongs to, from its node id (a path relative to the repository)."""
    path = nodeid.split("::", 1)[0]
    if path in STACK_FILES:
        return STACKS
    return next((package for package in PACKAGES if path.startswith(package)), path)


class SuiteScheduling(LoadScopeScheduling):
    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)

    def _assign_work_unit(self, node: WorkerController) -> None:
        if STACKS in self.workqueue:
            self.workqueue.move_to_end(STACKS, last=False)
        super()._assign_work_unit(node)
