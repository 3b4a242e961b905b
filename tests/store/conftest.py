"""The store tests' own fixture: the PostgreSQL store without group commit, beside the default one."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from service.store import EventStore, apply_migrations


@pytest.fixture
async def alone_store(database_url: str, service_login: object) -> AsyncIterator[EventStore]:
    """As the ``store`` fixture (a fresh database, the service's login), with ``group_commit=False``:
    every append one statement of its own."""
    await apply_migrations(database_url)
    url = await service_login.url(database_url)  # type: ignore[attr-defined]
    event_store = await EventStore.open(url, max_size=20, group_commit=False)
    try:
        yield event_store
    finally:
        await event_store.close()
