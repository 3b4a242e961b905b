"""The service's log: structlog lines on standard output, the libraries' records included.

Every module names its logger ``uno_audit.<area>`` through :func:`logger`. psycopg, psycopg_pool and grpc
log through the standard library; its root handler renders their records with the same processors, so
an operator's log is one format line by line, whoever wrote it.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import orjson
import structlog

#: The name of the root handler a call with a format or a level installs (a bare call then keeps it).
_CHOSEN = "uno-audit: chosen"


def logger(area: str) -> Any:
    """The structlog logger of ``area`` (``"server"``, ``"api"``...), named ``uno_audit.<area>``."""
    return structlog.get_logger(f"uno_audit.{area}")


def configure_logging(
    log_format: str | None = None, level: str | None = None, *, worker: int | None = None
) -> None:
    """Log JSON objects (``log_format`` ``"json"``, for a collector) or aligned, coloured text
    (``"console"``, for a person) at ``level`` (``"debug"``, ``"info"``...) and above; ``worker`` adds
    that field to every line.

    Called with neither argument it configures JSON at ``"info"``, unless an earlier call chose a format or
    a level (the command line's ``--log-format``/``--log-level``), which it then keeps: ``serve`` calls it
    bare, for servers started from code, after ``uno-audit serve`` has called it with the flags.
    """
    root = logging.getLogger()
    if log_format is None and level is None and any(h.get_name() == _CHOSEN for h in root.handlers):
        return
    console = log_format == "console"
    threshold = logging.getLevelNamesMapping()[(level or "info").upper()]
    shared: list[structlog.types.Processor] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if worker is not None:
        shared.append(_WorkerField(worker))
    if not console:  # the console renderer lays a traceback out itself
        shared.append(structlog.processors.format_exc_info)  # an internal error's traceback, as a string
    renderer: structlog.types.Processor = (
        structlog.dev.ConsoleRenderer(colors=sys.stdout.isatty())
        if console
        else structlog.processors.JSONRenderer(serializer=json_line)
    )
    structlog.configure(
        processors=[*shared, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        # One write per line (message and newline together): the workers of `serve --workers` share
        # standard output, and a line written in two parts can be cut by another worker's line.
        logger_factory=structlog.WriteLoggerFactory(sys.stdout),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stdout)
    handler.set_name(_CHOSEN if log_format is not None or level is not None else "uno-audit")
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root.handlers = [handler]
    root.setLevel(threshold)


def json_line(value: Any, **options: Any) -> str:
    """A log line's JSON, by orjson (a tenth of the CPU of a command went to ``json.dumps`` of its log
    line); what orjson refuses (an integer beyond 64 bits, a key that is not a string) by the standard
    library. Log lines are read, never hashed, so their bytes need not be canonical."""
    try:
        return orjson.dumps(value, default=options.get("default")).decode()
    except TypeError:
        return json.dumps(value, **options)


class _WorkerField:
    """A structlog processor: the worker process's index on every line."""

    def __init__(self, worker: int) -> None:
        self.worker = worker

    def __call__(
        self, logger: Any, method: str, event: structlog.types.EventDict
    ) -> structlog.types.EventDict:
        event.setdefault("worker", self.worker)
        return event
