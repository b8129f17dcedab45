"""``produce --delivery-timeout``: the acknowledgement bound (Kafka's ``delivery.timeout.ms``) is
checked before any file is read or any broker is asked, and a bad one is one line with exit 2.
The bound at work against a cluster that cannot acknowledge is in ``tests/streams/test_kafka_cluster.py``
(two brokers down)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hivestream.cli.app import app
from streams.produce.producer import ACK_TIMEOUT_S, MAX_DELIVERY_TIMEOUT_S, MIN_DELIVERY_TIMEOUT_S, checked_delivery_timeout, parse_seconds


def test_the_default_is_the_java_producers_and_a_given_bound_is_kept() -> None:
    assert checked_delivery_timeout(None) == ACK_TIMEOUT_S == 120.0
    assert checked_delivery_timeout(15) == 15.0
    assert checked_delivery_timeout(0.5) == 0.5
    assert checked_delivery_timeout(MAX_DELIVERY_TIMEOUT_S) == MAX_DELIVERY_TIMEOUT_S
    assert checked_delivery_timeout(MIN_DELIVERY_TIMEOUT_S) == 0.001
    assert parse_seconds(" 1e3 ") == 1000.0


@pytest.mark.parametrize("bad", [0.0, 0.0005, 1e-300, -1.0, math.nan, math.inf, -math.inf, MAX_DELIVERY_TIMEOUT_S + 1])
def test_a_bound_outside_a_millisecond_to_a_day_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match=r"the delivery timeout must be a number of seconds from 0\.001 to 86400"):
        checked_delivery_timeout(bad)


@pytest.mark.parametrize("bad", ["0", "-3", "nan", "inf", "1e9", "1e-300", "", "abc", "0x10", "15s"])
def test_produce_refuses_a_bad_bound_in_one_line_before_the_input_or_the_broker(bad: str, tmp_path: Path) -> None:
    """The input does not exist and the bootstrap server is a closed port: the bound is what is reported."""
    res = CliRunner().invoke(app, ["produce", str(tmp_path / "no-such.jsonl"), "--bootstrap", "127.0.0.1:1",
                                   "--delivery-timeout", bad])
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: the delivery timeout must be a number of seconds"), res.output
