"""Layer: server. The server's log lines: text for people, JSON lines for log collectors.

Every line names this server. A line about a job or a peer carries an event name and its
fields (``event``): ``log.info("job %s done", job_id, extra=event("job.done", job=job_id))``.
The text format shows the message only; the JSON format (``mpc-party --log-format json``)
writes one object per line::

    {"time": "2026-12-03T12:00:00.000Z", "server": "alice", "level": "INFO",
     "logger": "mpcnet.party", "event": "job.done", "job": "1f2e...", "message": "..."}

What a server logs is names, shapes, counts, times and errors: never a share, a key or a
value (docs/operations.md). As a second line of defence the JSON format writes only plain
JSON scalars and lists or mappings of them as fields: an array or bytes given as a field is
replaced by a note of its type, never written.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from typing import Any

FORMATS = ("text", "json")
_MAX_ITEMS = 64  # of a list or mapping field: a field is a summary, not a dump
_MAX_DEPTH = 3


def event(name: str, **fields: Any) -> dict[str, Any]:
    """The ``extra`` of a log call that records event ``name`` with ``fields``."""
    return {"mpc_event": name, "mpc_fields": fields}


def plain(value: Any, depth: int = 0) -> Any:
    """``value`` if it is plain JSON (scalars, and short lists or mappings of them), else a
    note of its type: a field never carries an array, bytes or an arbitrary object."""
    if value is None or isinstance(value, bool | str):
        return value
    if type(value) is int:
        return value
    if type(value) is float:
        return value if math.isfinite(value) else str(value)
    if depth < _MAX_DEPTH and isinstance(value, list | tuple):
        return [plain(v, depth + 1) for v in value[:_MAX_ITEMS]]
    if depth < _MAX_DEPTH and isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: plain(v, depth + 1) for k, v in list(value.items())[:_MAX_ITEMS]}
    return f"<not logged: {type(value).__name__}>"


class JsonLines(logging.Formatter):
    """One JSON object per record: time (UTC), server, level, logger, event and its fields,
    message, and the traceback of an exception (code locations, no values)."""

    def __init__(self, server: str) -> None:
        super().__init__()
        self.server = server

    def format(self, record: logging.LogRecord) -> str:
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        out: dict[str, Any] = {"time": f"{when}.{int(record.msecs):03d}Z",
                               "server": self.server, "level": record.levelname,
                               "logger": record.name}
        name = getattr(record, "mpc_event", None)
        if isinstance(name, str):
            out["event"] = name
            fields = getattr(record, "mpc_fields", {})
            for key, value in (fields.items() if isinstance(fields, dict) else ()):
                if key not in out:
                    out[key] = plain(value)
        out["message"] = record.getMessage()
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, allow_nan=False)


def setup_logging(name: str, level: str, fmt: str = "text") -> None:
    """Log to standard error at ``level`` in format ``fmt`` (``FORMATS``), every line naming
    server ``name``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines(name) if fmt == "json" else logging.Formatter(
        f"%(asctime)s {name} %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO),
                        handlers=[handler], force=True)
