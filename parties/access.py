"""Layer: server. Who may do what: every access rule of a server in one place.

Roles come from the deployment file (``owner``, ``analyst``, ``model-owner``) or from a
server's certificate (``server``, for healthchecks). An operation is allowed to roles
(``OPERATIONS``); beyond the role, owners contribute only to their datasets and read only their
schemas (the per-column scale exponents, which would tell an analyst which columns its D'
holds), and a result or a job belongs to the analyst whose signed request made it and to those
it named (``Job.may_read``); a model belongs to the model owner its training request named, and
to nobody else (not to the analyst who trained it, unless it named itself).
"""

from __future__ import annotations

from typing import Any

from mpcnet.config import Deployment
from mpcnet.errors import AccessDenied, InputError

# operation -> (roles that may use it, the command a user types for it)
OPERATIONS: dict[str, tuple[frozenset[str], str]] = {
    "status": (frozenset({"owner", "analyst", "server"}), "status"),
    "datasets": (frozenset({"owner", "analyst"}), "datasets"),
    "schema": (frozenset({"owner"}), "share"),
    "upload": (frozenset({"owner"}), "share"),
    "commit": (frozenset({"owner"}), "share"),
    "abort": (frozenset({"owner"}), "share"),
    "withdraw": (frozenset({"owner"}), "withdraw"),
    "select": (frozenset({"analyst"}), "select"),
    "train": (frozenset({"analyst"}), "train"),
    "job": (frozenset({"analyst"}), "select"),
    "jobs": (frozenset({"analyst"}), "jobs"),
    "results": (frozenset({"analyst", "model-owner"}), "results"),
    "fetch": (frozenset({"analyst", "model-owner"}), "fetch"),
    "inventory": (frozenset({"server"}), "mpc-party --rebuild"),
    "component": (frozenset({"server"}), "mpc-party --rebuild"),
}


def check_operation(name: str, role: str, op: Any) -> str:
    """``op`` if ``role`` may use it; ``InputError`` for an unknown operation and
    ``AccessDenied`` naming the command and the roles that may."""
    if not isinstance(op, str) or op not in OPERATIONS:
        raise InputError(f"unknown request {op!r}")
    roles, command = OPERATIONS[op]
    if role not in roles:
        command = command if command.startswith("mpc-") else f"mpc-client {command}"
        raise AccessDenied(f"{name} (role {role}) may not use `{command}`; it needs the role "
                           f"{' or '.join(sorted(roles))}")
    return op


def check_contributor(dep: Deployment, name: str, dataset: str) -> None:
    """An owner contributes only to the datasets the deployment lists for it."""
    client = dep.client(name)
    if not client.may_upload(dataset):
        raise AccessDenied(f"{name} may not contribute to dataset {dataset!r} (allowed: "
                           f"{', '.join(client.datasets)})")


def check_withdrawer(dep: Deployment, name: str) -> None:
    """Any owner may withdraw what it contributed (only the contributions recorded as its own
    are removed), even after its permission to upload was narrowed or revoked: an operator
    cannot keep an owner's data by no longer letting it contribute."""
    role = dep.client(name).role
    if role != "owner":
        raise AccessDenied(f"{name} (role {role}) may not withdraw; it needs the role owner")


def check_schema_reader(dep: Deployment, name: str, role: str, dataset: str) -> None:
    """A dataset's schema holds every column's scale exponent: only its owners read it."""
    if role != "owner" or not dep.client(name).may_upload(dataset):
        raise AccessDenied(f"{name} may not contribute to dataset {dataset!r}, so it may not "
                           "read its schema")


SERVER_ONLY = ("files", "class_names", "label_name", "statements")
"""Manifest keys a client never receives: the files, what a training job needs that the
data owners may not release (the class names, the label's name), and the servers' signed
statements of their components (kept for a rebuild, ``parties.rebuild``)."""
SERVER_ONLY_PARTS = ("training_labels",)
"""Share arrays that never leave the servers: the one-hot labels a training job reads."""


def may_read_result(name: str, manifest: dict[str, Any]) -> bool:
    """A result belongs to the analyst whose request made it and to those it named; a model
    to its owner (stored as the manifest's owner, with no one named)."""
    return name == manifest.get("owner") or name in manifest.get("share_with", [])
