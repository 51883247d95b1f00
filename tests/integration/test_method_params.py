"""Operator methods' params have one error shape (issue 28): params that do not fit the
method's model (zcord.transport.params, declared in the method table) are refused as a
tool's bad arguments are — -32000, `invalid_argument` naming the field — and nothing runs."""

from __future__ import annotations

from tests.fault.wire import Wire
from zcord.core import protocol as P
from zcord.transport.methods import TABLE
from zcord.transport.params import Params


def _bad_params(model: type) -> tuple[dict, str]:
    """Params the model refuses, and the field the refusal must name."""
    required = [f.alias or name for name, f in model.model_fields.items() if f.is_required()]
    if required:
        return {}, required[0]
    if not issubclass(model, Params):  # unknown parameters are refused
        return {"bogus": 1}, "bogus"
    return {}, ""


def test_bad_params_of_every_checked_operator_method_get_one_shape(daemon):
    with daemon.client("operator") as op:
        op.call_tool("zcor_memory_write", {"title": "生日", "content": "三月三日"})
    state = (daemon.memdir / "memory-state.json").read_bytes()
    checked = [m for m in TABLE if m.params is not None and m.operator_only]
    assert {"zcor/backups/preview", "zcor/recall/explain", "zcor/config/set", "zcor/history/at",
            "zcor/history/versions", "zcor/trust/get"} <= {m.name for m in checked}
    op = Wire(daemon.sock, "operator")
    refused = 0
    for method in checked:
        params, field = _bad_params(method.params)
        if not field:
            continue
        reply = op.call(method.name, params)
        error = reply["error"]
        assert error["code"] == P.ZCOR_ERROR, (method.name, reply)
        assert error["data"]["code"] == "invalid_argument" and error["data"]["field"] == field, (method.name, reply)
        assert field in error["message"], (method.name, reply)
        refused += 1
    assert refused >= 6
    op.close()
    assert (daemon.memdir / "memory-state.json").read_bytes() == state
