"""Layer: client. The Python API, for notebooks and scripts: plain calls, DataFrames in and out.

    from mpcnet.client import api

    with api.connect("deploy/local.toml", "hospital-a") as owner:
        owner.share(frame, dataset="study", label="outcome")   # a DataFrame or a CSV path
    with api.connect("deploy/local.toml", "analyst") as analyst:
        analyst.select("study", k=10, result="top10")
        reduced = analyst.fetch("top10")                       # a DataFrame f1..f10

Every call blocks until done and raises the product's typed errors (re-exported here:
``InputError`` for a refusal or bad input, ``AccessDenied``, ``PeerError`` for a server that
is down or failed, ``CheatingDetected``). The sessions live on an event loop of their own in
a background thread, so the API works the same in a script and inside Jupyter, whose own loop
is already running. pandas is optional (``pip install -e '.[api]'``): without it, pass CSV
paths and use ``fetch(..., frame=False)``.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import threading
from collections.abc import Coroutine
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from mpcnet import config
from mpcnet.client.results import Reduced, reconstruct_encoded, reconstruct_model
from mpcnet.client.session import Client
from mpcnet.client.uploads import ShareSummary
from mpcnet.errors import AccessDenied, CheatingDetected, InputError, MPCError, PeerError
from mpcnet.plain.logreg import Model

__all__ = ["AccessDenied", "CheatingDetected", "InputError", "MPCError", "Model", "PeerError",
           "Session", "connect"]

T = TypeVar("T")


def connect(deployment: str | Path, identity: str) -> Session:
    """A session as ``identity`` (a client, or a server for ``status``) of the deployment
    described by the TOML file ``deployment``."""
    return Session(config.load(Path(deployment)), identity)


class Session:
    """One identity's sessions with the servers; close it (or use ``with``) when done."""

    def __init__(self, dep: config.Deployment, identity: str) -> None:
        self.identity = identity
        self._loop = _new_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name=f"mpcnet-{identity}")
        self._thread.start()
        self._client = Client(dep, identity)

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    # -- owners ---------------------------------------------------------------------------------
    def share(self, data: Any, dataset: str, *, label: str | None = None, **options: Any
              ) -> ShareSummary:
        """Share a CSV file or a pandas DataFrame as one contribution to ``dataset``; options
        as ``mpc-client share`` (``layout``, ``categorical``, ``missing``, ``drop``,
        ``ordinal``, ``security``, ``schema``; ``id_column`` and ``id_key`` for columns keyed
        by record IDs)."""
        if isinstance(data, str | Path):
            return self._call(self._client.share(data, dataset, label=label, **options))
        with tempfile.TemporaryDirectory(prefix="mpcnet-") as folder:
            path = Path(folder) / "frame.csv"  # read by the same rules as a file: one code path
            with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w",
                           newline="") as f:
                data.to_csv(f, index=False)
            return self._call(self._client.share(path, dataset, label=label, **options))

    def schema(self, dataset: str) -> str:
        """The dataset's schema as TOML (``mpc-client schema``)."""
        return self._call(self._client.schema_toml(dataset))

    # -- analysts -------------------------------------------------------------------------------
    def select(self, dataset: str, k: int | str, result: str, **options: Any
               ) -> dict[str, Any]:
        """Run a selection and wait for it; its job record (figures included). Options as
        ``mpc-client select`` (``score``, ``security``, ``share_with``, ``valid_for``, and
        ``candidates`` with ``k="auto"``: the servers choose k privately, the record's
        ``figures["plan"]["k"]`` says which)."""
        return self._call(self._client.select(dataset, k, result, **options))

    def fetch(self, result: str, owner: str | None = None, frame: bool = True) -> Any:
        """D' of ``result`` (of ``owner``, if another analyst shared it with you): a DataFrame
        with columns f1..fk, or the ``Reduced`` fixed-point values if not ``frame``."""
        reduced: Reduced = reconstruct_encoded(self._call(self._client.fetch(result, owner)))
        if not frame:
            return reduced
        try:
            import pandas as pd
        except ImportError:
            raise InputError("fetch as a DataFrame needs pandas (pip install -e '.[api]'); "
                             "or pass frame=False") from None
        k = reduced.encoded.shape[1]
        return pd.DataFrame(reduced.values, columns=[f"f{i + 1}" for i in range(k)])

    def train(self, result: str, model: str, owner: str, **options: Any) -> dict[str, Any]:
        """Train a logistic regression on your selection ``result`` privately and store the
        model ``model`` for ``owner`` alone; its job record. Options as ``mpc-client train``
        (``epochs``, ``learning_rate``, ``l2``, ``valid_for``)."""
        return self._call(self._client.train(result, model, owner, **options))

    # -- model owners ---------------------------------------------------------------------------
    def model(self, model: str, analyst: str | None = None) -> Model:
        """The model trained for you (``mpc-client model``; refused unless ``analyst``
        trained it, if given): ``Model.predict`` applies it to rows of D',
        ``Model.as_json()`` is what ``--out`` writes."""
        return reconstruct_model(self._call(self._client.fetch(model)), analyst)

    # -- everyone -------------------------------------------------------------------------------
    def status(self) -> list[dict[str, Any]]:
        return self._call(self._client.status())

    def datasets(self) -> dict[str, list[dict[str, Any]]]:
        return self._listing("datasets")

    def results(self) -> dict[str, list[dict[str, Any]]]:
        return self._listing("results")

    def jobs(self) -> dict[str, list[dict[str, Any]]]:
        return self._listing("jobs")

    def _listing(self, what: str) -> dict[str, list[dict[str, Any]]]:
        answered, missing = self._call(self._client.listing(what))
        if missing:
            raise PeerError("not every server answered: "
                            + "; ".join(f"{k}: {v}" for k, v in missing.items()))
        return answered

    def close(self) -> None:
        self._client.close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: tuple[type[BaseException], BaseException, TracebackType] | None
                 ) -> None:
        self.close()


def _new_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop where it is installed (as ``mpcnet.net.tls.run`` uses), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()  # type: ignore[no-any-return]
