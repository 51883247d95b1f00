"""Shared fixtures: a Service on a fresh Memory directory, with a clock tests can steer."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from zcord.service import Service

TZ = timezone(timedelta(hours=8))


class FakeClock:
    """Each reading moves one second forward unless frozen; set() jumps anywhere (even back)."""

    def __init__(self, start: datetime = datetime(2026, 1, 1, 9, 0, tzinfo=TZ)):
        self.t = start
        self.step = timedelta(seconds=1)

    def __call__(self) -> datetime:
        t = self.t
        self.t = self.t + self.step
        return t

    def set(self, t: datetime) -> None:
        self.t = t


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def memdir(tmp_path):
    """A Memory directory that does not exist yet (zcord creates it)."""
    return tmp_path / "memory"


@pytest.fixture
def svc(memdir, clock):
    """An open Service on a fresh Memory directory; closed (lock released) after the test."""
    s = Service(memdir, clock=clock).open()
    yield s
    s.close()


class Caller:
    """Shorthand: svc.call with actor operator, returning the result dict."""

    def __init__(self, svc: Service):
        self.svc = svc

    def __getattr__(self, short: str):
        name = short if short.startswith("zcor_") else (
            f"zcor_{short}" if short.startswith(("relationship_", "synonyms_")) else f"zcor_memory_{short}")
        return lambda **params: self.svc.call(name, params)


@pytest.fixture
def t(svc) -> Caller:
    """Call tools as t.write(title=..., content=...), t.relationship_read(personId=...)."""
    return Caller(svc)
