"""Layer: client. An analyst runs a job: sign the request, start it, watch it, check it.

Jobs are selections (``select``) and trainings of a model on a selection's result for a model
owner (``train``).

The client signs every request (``mpcnet.jobrequest``) with the analyst's key and sends it to
the coordinator, then long-polls the job. When it ends, it reads every server's own record of
it: a failure is reported with every server's reason (a cheating coordinator cannot hide that
an honest member detected cheating), and a job reported done counts only if every server of
its setting recorded it done on exactly the request that was signed (``job record`` check).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from mpcnet.client.connection import Connections, default_security
from mpcnet.config import ServerConfig
from mpcnet.errors import CheatingDetected, InputError, MPCError, PeerError
from mpcnet.jobrequest import CLOCK_SKEW, DEFAULT_VALIDITY, JobRequest, SignedRequest


class Selecting(Connections):
    """What an analyst does: run a selection, train a model."""

    async def select(self, dataset: str, k: int | str, result: str, *, score: str = "ms-gini",
                     security: str | None = None, share_with: tuple[str, ...] = (),
                     candidates: tuple[int, ...] = (), valid_for: float = DEFAULT_VALIDITY,
                     poll: float = 0.5, progress: Callable[[dict[str, Any]], None] | None = None
                     ) -> dict[str, Any]:
        """Sign a request for a selection (its job must start within ``valid_for`` seconds),
        start it on the coordinator and wait for it; returns the job record once every
        server's record shows the job that was asked for. ``k="auto"`` with ``candidates``:
        the servers choose k among them privately (``mpcnet.train.choose``) and the record's
        ``figures["plan"]["k"]`` is the chosen k, the same on every server."""
        security = security or await self._required_security(dataset) or \
            default_security(self.dep)
        if (k == "auto") != bool(candidates):
            raise InputError("--k auto goes with --candidates K1,K2,... (and candidates with "
                             "--k auto)")
        request = JobRequest.new(self.identity, dataset,
                                 max(candidates) if candidates else int(k), score, security,
                                 result, share_with, valid_for, tuple(candidates))
        return await self._run_job(request, "select", valid_for, poll, progress)

    async def _required_security(self, dataset: str) -> str | None:
        """The active setting that the dataset's owners shared it for, as the coordinator
        lists it (the servers check it again against the signed request)."""
        listed = (await (await self.session(self.dep.leader)).request("datasets"))["datasets"]
        return next((d.get("requires") for d in listed if d["name"] == dataset), None)

    async def train(self, result: str, model: str, owner: str, *, epochs: int = 200,
                    learning_rate: float = 1.0, l2: float = 1.0,
                    valid_for: float = DEFAULT_VALIDITY, poll: float = 0.5,
                    progress: Callable[[dict[str, Any]], None] | None = None
                    ) -> dict[str, Any]:
        """Sign a request to train a logistic regression on this analyst's selection
        ``result`` (Fig. 1, step 2B) and reveal the model ``model`` to ``owner`` only (a
        model owner of the deployment, or this analyst); run it as ``select`` does. The
        setting is the result's own."""
        leader = await self.session(self.dep.leader)
        listed = {(r["owner"], r["name"]): r
                  for r in (await leader.request("results"))["results"]}
        entry = listed.get((self.identity, result))
        if entry is None or entry.get("kind", "select") != "select":
            raise InputError(f"no selection result {result!r} of yours on "
                             f"{self.dep.leader.name}; see mpc-client results")
        request = JobRequest.training(self.identity, result, str(entry["security"]), model,
                                      owner, epochs, learning_rate, l2, valid_for)
        return await self._run_job(request, "train", valid_for, poll, progress)

    async def _run_job(self, request: JobRequest, op: str, valid_for: float, poll: float,
                       progress: Callable[[dict[str, Any]], None] | None) -> dict[str, Any]:
        """Sign ``request``, start it with ``op`` on the coordinator and wait for it; the job
        record once every server's record shows the job that was asked for."""
        from mpcnet.schemes import registry

        n = registry.get(request.security).n_parties
        cert, key = self.dep.identity(self.identity)
        wire = SignedRequest.sign(request, key, cert).to_wire()
        await self._check_mesh(self.dep.servers[:n])
        leader = await self.session(self.dep.leader)
        job = (await leader.request(op, request=wire))["job"]
        while job["state"] in ("queued", "running"):
            if job["state"] == "queued" and time.time() > request.expires + CLOCK_SKEW:
                raise PeerError(f"job {job['id']} did not start before its request expired "
                                f"(valid for {valid_for:g} s); no server may start it now")
            if progress is not None:
                progress(job)
            try:
                job = (await leader.request("job", id=job["id"], wait=poll))["job"]
            except PeerError as exc:
                raise PeerError(f"lost the coordinator during job {job['id']}: {exc}"
                                + await self._members_report(job["id"])) from None
        if progress is not None:
            progress(job)
        records = dict(await self._member_records(job["id"]))
        if job["state"] == "failed":
            # the coordinator alone could misreport why (it may be the server that deviated):
            # every member's own record goes into the message, and cheating seen by any wins
            errors = [str(job["error"])] + [
                f"{name}: {rec['error']}" for name, rec in records.items()
                if not isinstance(rec, MPCError) and rec.get("error")]
            message = f"job {job['id']} failed: {errors[0]}" + "".join(
                f"; {e}" for e in errors[1:])
            if any("CheatingDetected" in e for e in errors):
                raise CheatingDetected("job", message=message)
            kind = PeerError if errors[0].startswith(("PeerError", "HandshakeError")) else MPCError
            raise kind(message)
        self._check_records(job, wire, {s.name: records[s.name]
                                        for s in self.dep.servers[1:n]})
        return job  # type: ignore[no-any-return]

    async def _check_mesh(self, servers: tuple[ServerConfig, ...]) -> None:
        """Refuse at once (``PeerError`` naming them) if one of the job's servers cannot be
        reached, by this client or by the coordinator, rather than queue a job that would
        fail after the servers' connect timeout."""
        await self.sessions_for(list(servers))
        leader = await self.session(self.dep.leader)
        mesh = (await leader.request("status", mesh=True,
                                     timeout=self.dep.timeouts.probe + 1))["mesh"]
        cut = {s.name: mesh.get(s.name) for s in servers[1:] if mesh.get(s.name) != "ok"}
        if cut:
            raise PeerError(f"the coordinator {self.dep.leader.name} cannot reach "
                            + "; ".join(f"{name} ({why})" for name, why in cut.items())
                            + "; no job was started")

    def _check_records(self, job: dict[str, Any], wire: dict[str, Any],
                       members: dict[str, dict[str, Any] | MPCError]) -> None:
        """A job the coordinator reports done is done on every server of its setting, each
        record holding exactly the request this client signed; ``CheatingDetected`` else."""
        def refuse(why: str) -> CheatingDetected:
            return CheatingDetected("job record", f"job {job['id']}: {why}; its result "
                                                  "cannot be trusted")

        if job.get("request") != wire:
            raise refuse(f"the coordinator {self.dep.leader.name} ran it on another request "
                         "than the one you signed")
        for name, rec in members.items():
            if isinstance(rec, MPCError):
                raise refuse(f"the coordinator reports it done, but {name} has no record of "
                             f"it ({rec})")
            if rec.get("request") != wire:
                raise refuse(f"{name} ran it on another request than the one you signed")
            if rec.get("state") != "done":
                raise refuse(f"the coordinator reports it done, but {name} says "
                             f"{rec.get('state')}" + (f" ({rec['error']})" if rec.get("error")
                                                      else ""))
            if wire.get("candidates") and chosen_k(rec) != chosen_k(job):
                raise refuse(f"the coordinator says k = {chosen_k(job)} was chosen, {name} "
                             f"says {chosen_k(rec)}")

    async def _member_records(self, job_id: str) -> list[tuple[str, dict[str, Any] | MPCError]]:
        """Every other server's own record of the job, or why it could not be read; the
        servers are asked at once."""
        async def one(s: ServerConfig) -> tuple[str, dict[str, Any] | MPCError]:
            try:
                sess = await self.probe_session(s)
                try:
                    return s.name, (await sess.request("job", id=job_id))["job"]
                finally:
                    sess.close()
            except MPCError as exc:
                return s.name, exc

        return list(await asyncio.gather(*(one(s) for s in self.dep.servers[1:])))

    async def _members_report(self, job_id: str) -> str:
        """'; name: state (error)' for every other server, for a lost coordinator."""
        notes = [f"{name}: {rec}" if isinstance(rec, MPCError) else
                 f"{name}: {rec['state']}" + (f" ({rec['error']})" if rec.get("error") else "")
                 for name, rec in await self._member_records(job_id)]
        return "; " + "; ".join(notes) if notes else ""


def chosen_k(job: dict[str, Any]) -> int | None:
    """The k a server's record of a ``--k auto`` job says was chosen (None if none)."""
    plan = (job.get("figures") or {}).get("plan") or {}
    return plan.get("k") if isinstance(plan.get("k"), int) else None
