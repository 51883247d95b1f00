"""The daemon's cap on unread output of all clients together (connections.MAX_TOTAL_OUTPUT): the
selection rule, on connections whose transports report chosen buffer sizes (filling 128 MiB
of real socket buffers would cost the suite more than it proves; the per-connection cap is
tested over real sockets in tests/fault/test_limits.py)."""

from __future__ import annotations

from zcord.transport import connections


class Transport:
    def __init__(self, size: int):
        self.size, self.aborted = size, False

    def get_write_buffer_size(self) -> int:
        return 0 if self.aborted else self.size

    def abort(self) -> None:
        self.aborted = True


class Writer:
    def __init__(self, size: int):
        self.transport = Transport(size)

    def is_closing(self) -> bool:
        return self.transport.aborted


class Conn:
    def __init__(self, conn_id: int, mib: int):
        self.id, self.writer = conn_id, Writer(mib << 20)


def daemon_with(*mibs: int) -> tuple[connections.ConnectionServer, list[Conn]]:
    d = connections.ConnectionServer.__new__(connections.ConnectionServer)
    conns = [Conn(i, m) for i, m in enumerate(mibs)]
    d.conns = set(conns)
    return d, conns


def test_under_the_total_nobody_is_cut():
    d, conns = daemon_with(30, 30, 30, 30)  # 120 MiB < 128
    d.check_total_output()
    assert not any(c.writer.transport.aborted for c in conns)


def test_over_the_total_the_slowest_readers_go_first_until_under():
    d, conns = daemon_with(20, 31, 25, 30, 28)  # 134 MiB
    d.check_total_output()
    assert [c.writer.transport.aborted for c in conns] == [False, True, False, False, False]
    d, conns = daemon_with(31, 31, 31, 31, 31, 31)  # 186 MiB: two must go
    d.check_total_output()
    assert sum(c.writer.transport.aborted for c in conns) == 2


def test_closing_connections_do_not_count():
    d, conns = daemon_with(31, 31, 31, 31, 31)
    conns[0].writer.transport.abort()  # already cut off: 124 MiB left
    d.check_total_output()
    assert [c.writer.transport.aborted for c in conns[1:]] == [False] * 4
