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

import argparse
import asyncio
import os
import tempfile
import threading
from collections.abc import Coroutine
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from mpcnet import config
from mpcnet.client.offline import release
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
        """Share a CSV or Parquet file (a path) or a pandas DataFrame as one contribution to
        ``dataset`` (``mpc-client share``); returns what it did (``ShareSummary``: rows, the
        classes and categories it added). Options, by the CLI's names:

        - ``label``: the label column (every owner by rows; one owner by columns).
        - ``rows=True`` (default) or ``columns=True``: records or attributes of the same
          records (``layout="rows"|"columns"`` says the same).
        - ``categorical``: ``"refuse"`` (default) or ``"ordinal"``; ``ordinal``: columns coded
          as categories whatever they hold; ``drop``: columns left out (a name or a list).
        - ``missing``: ``"refuse"`` (default), ``"zero"`` or ``"mean"``;
          ``missing_categorical``: ``"category"`` (default) or ``"mode"``.
        - ``delimiter``, ``quote``: the CSV dialect (default ``,`` and ``"``).
        - ``security``: ``"passive3"``, ``"active3"`` or ``"active4"``; ``schema``: a declared
          schema's TOML file; ``release``: ``"shares"`` or some of ``"values"``, ``"label"``,
          ``"names"`` (a word or a list; default values).
        - ``id_column`` and ``id_key`` (by columns): the rows are keyed by that column's record
          IDs, hashed here with the owners' key in the file ``id_key`` (``mpc-client share
          --id COL --id-key FILE``).

        An unknown option or a wrong value raises ``InputError``."""
        how = _share_options(options)
        if isinstance(data, str | Path):
            return self._call(self._client.share(data, dataset, label=label, **how))
        with tempfile.TemporaryDirectory(prefix="mpcnet-") as folder:
            path = Path(folder) / "frame.csv"  # read by the same rules as a file: one code path
            with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w",
                           newline="") as f:
                data.to_csv(f, index=False, sep=how.get("delimiter", ","),
                            quotechar=how.get("quotechar", '"'))
            return self._call(self._client.share(path, dataset, label=label, **how))

    def withdraw(self, dataset: str) -> dict[str, Any]:
        """Withdraw your contribution to ``dataset`` from every server (``mpc-client
        withdraw``): the servers it was withdrawn from, the contribution ids, whether the
        dataset is gone (no contribution left) and ``still_held``, the servers that may still
        hold it and why (call again to finish there)."""
        return self._call(self._client.withdraw(dataset))

    def schema(self, dataset: str) -> str:
        """The dataset's schema as TOML (``mpc-client schema``)."""
        return self._call(self._client.schema_toml(dataset))

    # -- analysts -------------------------------------------------------------------------------
    def select(self, dataset: str, k: int | str, result: str, **options: Any
               ) -> dict[str, Any]:
        """Select the ``k`` best features of ``dataset`` into the result ``result`` and wait
        for the job (``mpc-client select``); its job record, figures included. Options:
        ``score`` (``"ms-gini"``, default, ``"chi2"``, ``"mi"``, ``"pcc"``, ``"gini"``),
        ``security`` (default: the setting the owners shared for if active, else as the
        deployment's servers say), ``share_with`` (analysts who may fetch it: a name or a
        list), ``valid_for`` (seconds within which it must start; default 3600), and
        ``candidates`` with ``k="auto"`` (the servers choose k privately among them; the
        record's ``figures["plan"]["k"]`` says which). An unknown option raises
        ``InputError``."""
        how = _checked("select", options,
                       ("score", "security", "share_with", "valid_for", "candidates"))
        if isinstance(how.get("share_with"), str):
            how["share_with"] = (how["share_with"],)
        return self._call(self._client.select(dataset, k, result, **how))

    def fetch(self, result: str, owner: str | None = None, frame: bool = True) -> Any:
        """D' of ``result`` (of the analyst ``owner``, if it shared it with you) as ``fetch
        --out`` writes it: a DataFrame whose columns are the selected columns' names (f1..fk
        unless the owners release the names), followed by the label column (its name, each
        row's class) if they release the label. Not ``frame``: the ``Reduced`` fixed-point
        values (no pandas needed)."""
        reduced: Reduced = reconstruct_encoded(self._call(self._client.fetch(result, owner)))
        if not frame:
            return reduced
        try:
            import pandas as pd
        except ImportError:
            raise InputError("fetch as a DataFrame needs pandas (pip install -e '.[api]'); "
                             "or pass frame=False") from None
        out = pd.DataFrame(reduced.values, columns=reduced.header[:reduced.encoded.shape[1]])
        if reduced.classes is not None:
            out[reduced.header[-1]] = reduced.classes
        return out

    def train(self, result: str, model: str, owner: str, **options: Any) -> dict[str, Any]:
        """Train a logistic regression on your selection ``result`` privately and store the
        model ``model`` for ``owner`` alone (``mpc-client train``); its job record. Options:
        ``epochs`` (default 200), ``learning_rate`` (1.0), ``l2`` (1.0), ``valid_for``
        (3600 s). An unknown option raises ``InputError``."""
        how = _checked("train", options, ("epochs", "learning_rate", "l2", "valid_for"))
        return self._call(self._client.train(result, model, owner, **how))

    # -- model owners ---------------------------------------------------------------------------
    def model(self, model: str, analyst: str | None = None) -> Model:
        """The model trained for you (``mpc-client model``; refused unless ``analyst``
        trained it, if given): ``Model.predict`` applies it to rows of D',
        ``Model.as_json()`` is what ``--out`` writes."""
        return reconstruct_model(self._call(self._client.fetch(model, what="model")),
                                 analyst)

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


SHARE_OPTIONS = ("rows", "columns", "layout", "categorical", "ordinal", "missing",
                 "missing_categorical", "drop", "delimiter", "quote", "quotechar", "security",
                 "schema", "release", "id_column", "id_key")
"""What ``Session.share`` takes besides the data, the dataset and the label."""


def _checked(call: str, options: dict[str, Any], known: tuple[str, ...]) -> dict[str, Any]:
    """``options`` with the CLI's dashes as underscores, refusing one ``call`` does not take."""
    how = {name.replace("-", "_"): value for name, value in options.items()}
    unknown = sorted(set(how) - set(known))
    if unknown:
        raise InputError(f"{call}() takes no option {', '.join(map(repr, unknown))}; its "
                         f"options are {', '.join(known)}")
    return how


def _words(value: Any) -> tuple[str, ...]:
    """A name or a sequence of names as a tuple."""
    return (value,) if isinstance(value, str) else tuple(value)


def _share_options(options: dict[str, Any]) -> dict[str, Any]:
    """``share``'s options by the CLI's names as ``Sharing.share`` takes them."""
    how = _checked("share", options, SHARE_OPTIONS)
    rows, columns = bool(how.pop("rows", False)), bool(how.pop("columns", False))
    if rows and columns or (rows or columns) and how.get("layout") not in (
            None, "rows" if rows else "columns"):
        raise InputError("share: rows and columns (or layout) contradict each other; choose "
                         "one layout")
    if rows or columns:
        how["layout"] = "rows" if rows else "columns"
    if "quote" in how:
        if "quotechar" in how:
            raise InputError("share: give quote or quotechar, not both")
        how["quotechar"] = how.pop("quote")
    for name in ("drop", "ordinal"):
        if name in how:
            how[name] = _words(how[name])
    if "release" in how:
        how["release"] = release(argparse.Namespace(release=_words(how["release"])))
    return how


def _new_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop where it is installed (as ``mpcnet.net.tls.run`` uses), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()  # type: ignore[no-any-return]
