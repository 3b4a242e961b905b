"""Watching streams in the API tests: a stream read in the background, and the server's reads counted."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import pytest

from service.store import EventStore
from uno_audit_client.gen.uno.audit.v1 import game_pb2 as pb


class CountedReads:
    """Every ``read_stream`` the server makes from now on: the ``limit`` of each, and how many finished."""

    def __init__(self, store: EventStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.limits: list[int | None] = []
        self.finished = 0
        real = store.read_stream

        async def counted(game_id: str, after_version: int = 0, limit: int | None = None) -> Any:
            self.limits.append(limit)
            try:
                return await real(game_id, after_version, limit)
            finally:
                self.finished += 1

        monkeypatch.setattr(store, "read_stream", counted)


class Reader:
    """Reads a stream in the background, keeping what arrives."""

    def __init__(self, call: Any) -> None:
        self.call = call
        self.events: list[pb.Event] = []
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for event in self.call:
            self.events.append(event)

    async def has(self, count: int) -> list[pb.Event]:
        await until(lambda: len(self.events) >= count, f"{count} events")
        return self.events

    async def close(self) -> None:
        self.call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


async def until(condition: Callable[[], bool], what: str) -> None:
    """Wait for ``condition``, ``what`` the test waits for. No deadline of its own: the test's timeout
    bounds the wait (pytest-timeout then shows this line), so a busy machine is slow, never failed."""
    while not condition():
        await asyncio.sleep(0.02)
