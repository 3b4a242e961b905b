"""An event's ``recorded_at`` on the wire: the same Timestamp protobuf's own conversion gives."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from google.protobuf import timestamp_pb2
from hypothesis import given
from hypothesis import strategies as st

from service.api.messages import timestamp

moments = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)


@given(moments)
def test_a_moment_converts_as_from_datetime_converts_it(moment: datetime) -> None:
    expected = timestamp_pb2.Timestamp()
    expected.FromDatetime(moment)
    assert timestamp(moment) == expected
    assert timestamp(moment).ToDatetime(tzinfo=UTC) == moment


@given(moments, st.integers(-14 * 60, 14 * 60))
def test_the_offset_of_a_moment_does_not_change_its_timestamp(moment: datetime, minutes: int) -> None:
    elsewhere = moment.astimezone(timezone(timedelta(minutes=minutes)))
    assert timestamp(elsewhere) == timestamp(moment)
