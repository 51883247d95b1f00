"""The daemon's warm-up lets calls in often (a short switch interval while it builds
indexes on the interpreter), and gives the interpreter's setting back afterwards."""

from __future__ import annotations

import sys

import pytest

from zcord.transport import server


class FakeService:
    def __init__(self, fail: bool = False):
        self.fail, self.seen = fail, None

    def warm(self) -> None:
        self.seen = sys.getswitchinterval()
        if self.fail:
            raise RuntimeError("disk gone")


@pytest.mark.parametrize("fail", [False, True])
def test_the_warm_up_runs_with_a_short_switch_interval_and_restores_it(fail):
    before = sys.getswitchinterval()
    svc = FakeService(fail)
    server._warm_up(svc)  # a failure is logged, not raised: the first real call retries
    assert svc.seen is not None and svc.seen <= server.WARM_UP_SWITCH_INTERVAL < before
    assert sys.getswitchinterval() == before
