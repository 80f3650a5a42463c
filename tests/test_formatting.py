import math

from app.formatting import delta, money, signed_money, span


def test_money_whole_dollars_and_not_finite():
    assert money(1234.4) == "$1,234"
    assert money(math.nan) == "n/a"
    assert money(math.inf) == "n/a"
    assert money(0.12345, 3) == "$0.123"


def test_payback_is_unknown_without_a_price_and_never_without_a_saving():
    from simulator.model.economics import get_payback_months

    months = get_payback_months(20_000.0, [10_000.0, 0.0, -5.0, math.nan])
    assert months[0] == 2.0 and math.isinf(months[1]) and math.isinf(months[2])
    assert math.isnan(months[3])


def test_signed_money_sign_and_zero():
    assert signed_money(-56.2) == "-$56"
    assert signed_money(1234.6) == "+$1,235"
    assert signed_money(0.4) is None  # shows as $0: no arrow
    assert signed_money(-0.4) is None
    assert signed_money(math.nan) is None  # no arrow: the value itself says n/a
    assert signed_money(-math.inf) is None


def test_delta_none_where_it_shows_as_zero():
    assert delta(0.04, "+,.1f") is None
    assert delta(-0.0004, "+.1%") is None
    assert delta(1234.0, "+,.0f") == "+1,234"
    assert delta(-0.25, "+.1%") == "-25.0%"
    assert delta(math.nan, "+.1f") is None
    assert delta(math.inf, "+,.0f") is None


def test_a_negative_amount_puts_its_sign_before_the_dollar():
    """The ROI range read '$-14-$1,449 a month' for a fractional saving whose low end is a
    loss."""
    assert money(-14.2) == "-$14"
    assert money(-0.0004, 3) == "$0.000"


def test_ranges_read_as_ranges_with_a_negative_end_and_collapse_when_equal():
    from app.views.roi import _months

    assert span([-14.0, 1449.0], money) == "-$14 to $1,449"
    assert span([92.0, 1562.0], money) == "$92-$1,562"
    assert span([5.0, 5.0], money) == "$5"
    assert _months([1.0, 1.04]) == "1.0 months"  # was '1.0-1.0 months'
    assert _months([12.8, 218.2]) == "12.8-218.2 months"
    assert _months([13.8, math.inf]) == "13.8 months to never"
    assert _months([math.inf, math.inf]) == "never"
