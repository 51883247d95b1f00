"""The affinity sparkline (issue 35): scaled to the series' own range so small changes show."""

from __future__ import annotations

from zcord.transport.affinity import sparkline, sparkline_scale


def test_small_changes_show():
    assert sparkline([0, -20, 75]) == "▂▁█"  # was ▄▄▇ on the fixed −100..100 scale
    assert sparkline_scale([0, -20, 75]) == "-20 ▁ … █ +75"
    assert sparkline([10, 12, 11]) == "▁█▅"
    assert sparkline_scale([0, 3]) == "0 ▁ … █ +3"


def test_flat_series_gaps_and_the_fixed_scale():
    assert sparkline([5, 5]) == "▅▅" and sparkline_scale([5, 5]) == "-100 ▁ … █ +100"
    assert sparkline([0, None, 3]) == "▁ █"
    assert sparkline([]) == "" and sparkline([None]) == " "
    assert sparkline([-500, 500]) == "▁█"  # out-of-range values are clamped
