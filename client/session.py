"""Layer: client. ``Client``: one identity of a deployment, as a Python API and for the CLI.

    from mpcnet import config
    from mpcnet.client.session import Client
    from mpcnet.client.results import reconstruct

    cl = Client(config.load("deploy/local.toml"), "analyst")
    job = await cl.select("study", k=10, result="top10", security="active3")
    reduced = reconstruct(await cl.fetch("top10"))

Owners share (``client.uploads``), analysts select (``client.jobs``) and fetch
(``client.results``); every identity has ``status`` and the listings (``client.connection``).
"""

from __future__ import annotations

from mpcnet.client.jobs import Selecting
from mpcnet.client.results import Fetching
from mpcnet.client.uploads import Sharing


class Client(Sharing, Selecting, Fetching):
    """The identity ``identity`` of deployment ``dep``: its sessions and its operations."""
