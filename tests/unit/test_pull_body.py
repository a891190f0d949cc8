"""The pull request body formatted at once is what the API struct encodes."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from jetstream.api import PullRequest, encode, encode_pull

seconds = st.floats(min_value=0.001, max_value=86_400.0, allow_nan=False)


@settings(deadline=None)  # a loaded machine may hold an example up
@given(st.integers(min_value=1, max_value=1_000_000), seconds, st.none() | seconds)
def test_encode_pull_is_the_struct_encoding(
    batch: int, expires: float, heartbeat: float | None
) -> None:
    req = PullRequest(batch=batch, expires=expires)
    if heartbeat:
        req.idle_heartbeat = heartbeat
    assert encode_pull(batch, expires, heartbeat) == encode(req)
    body = json.loads(encode_pull(batch, expires, heartbeat))
    assert body["batch"] == batch
    assert body["expires"] == round(expires * 1_000_000_000)
