"""The one backoff policy and `Retry-After` reader (`ci_evals.backoff`)."""

from __future__ import annotations

import email.message
from email.utils import formatdate

import pytest

from ci_evals.backoff import (
    RetryPolicy,
    parse_retry_after,
    parse_retry_after_ms,
    requested_wait,
)

NOW = 1_800_000_000.0


def test_retry_after_in_seconds() -> None:
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after(" 120 ") == 120.0
    assert parse_retry_after("0.5") == 0.5
    assert parse_retry_after("0") == 0.0


def test_retry_after_as_an_http_date() -> None:
    assert parse_retry_after(formatdate(NOW + 10, usegmt=True), now=NOW) == 10.0
    assert parse_retry_after(formatdate(NOW - 10, usegmt=True), now=NOW) == 0.0  # past: now
    # RFC 850 and asctime forms are obsolete but still HTTP dates (RFC 9110 §5.6.7)
    assert parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now=784111777.0) == 0.0
    assert parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now=784111777.0) == 10.0


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "soon",
        "-5",
        "+5",
        "1e3",
        "inf",
        "nan",
        "Infinity",
        "5s",
        "1,5",
        "0x10",
        "Sun, 99 Nov 1994 08:49:37 GMT",
        "9" * 40,
    ],
)
def test_garbage_and_negative_values_are_no_wait(value: str | None) -> None:
    assert parse_retry_after(value, now=NOW) is None


def test_a_huge_wait_is_read_as_is_and_capped_by_the_policy() -> None:
    huge = parse_retry_after("999999999999")
    assert huge == 999999999999.0
    policy = RetryPolicy(cap_s=30.0)
    assert policy.exceeds_cap(huge)
    assert policy.wait(1, huge) == 30.0
    far = parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", now=NOW)
    assert far is not None and policy.wait(1, far) == 30.0


def test_retry_after_ms_comes_first_and_is_milliseconds() -> None:
    assert parse_retry_after_ms("1500") == 1.5
    assert parse_retry_after_ms("-1") is None
    headers = email.message.Message()
    headers["Retry-After"] = "7"
    assert requested_wait(headers) == 7.0
    headers["retry-after-ms"] = "250"
    assert requested_wait(headers) == 0.25
    headers.replace_header("retry-after-ms", "garbage")  # unreadable: fall back to retry-after
    assert requested_wait(headers) == 7.0
    assert requested_wait({}) is None


def test_backoff_grows_exponentially_up_to_the_cap() -> None:
    policy = RetryPolicy(attempts=6, first_s=2.0, factor=3.0, cap_s=30.0)
    assert [policy.wait(n) for n in range(1, 7)] == [2.0, 6.0, 18.0, 30.0, 30.0, 30.0]
    assert policy.wait(10_000) == 30.0  # no float overflow however many tries
    assert policy.wait(1, 4.0) == 4.0  # the server's wait wins over the backoff
    assert policy.wait(1, -3.0) == 0.0


def test_jitter_draws_from_the_upper_half_of_the_backoff() -> None:
    policy = RetryPolicy(attempts=9, first_s=1.0, cap_s=8.0, jitter=True)
    waits = [policy.wait(3) for _ in range(200)]
    assert all(2.0 <= w <= 4.0 for w in waits)
    assert len(set(waits)) > 1
    assert all(4.0 <= policy.wait(7) <= 8.0 for _ in range(50))  # capped before the draw
    assert policy.wait(3, 1.25) == 1.25  # a server's wait is not jittered


def test_attempts_count_the_first_try() -> None:
    policy = RetryPolicy(attempts=3)
    assert [policy.retries_left(n) for n in (1, 2, 3)] == [True, True, False]
    with pytest.raises(ValueError, match="attempts"):
        RetryPolicy(attempts=0)
    with pytest.raises(ValueError, match="negative"):
        RetryPolicy(first_s=-1.0)


def test_a_deadline_counts_from_its_start_on_the_policys_clock() -> None:
    now = [100.0]
    policy = RetryPolicy(total_s=10.0, clock=lambda: now[0])
    deadline = policy.deadline()
    now[0] += 4.0
    assert deadline.left() == 6.0
    assert deadline.bounded(30.0) == 6.0 and deadline.cuts(30.0)
    assert deadline.bounded(2.0) == 2.0 and not deadline.cuts(2.0)
    now[0] += 7.0
    assert deadline.left() == 0.0 and deadline.passed()


def test_without_total_s_there_is_no_deadline() -> None:
    deadline = RetryPolicy().deadline()
    assert deadline.left() == float("inf") and not deadline.passed()
    assert deadline.bounded(30.0) == 30.0


def test_a_total_that_is_not_positive_is_refused() -> None:
    with pytest.raises(ValueError, match="total_s"):
        RetryPolicy(total_s=0.0)
