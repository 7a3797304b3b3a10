"""The Python API.

    from optiflow import Client

    with Client.from_env() as client:
        job = client.submit_file("examples/support-bot/job.yaml")
        result = job.wait(timeout=600)
        client.apply(result)

With no ``OPTIFLOW_*`` URL set the client runs an embedded Celery worker in this process (memory
broker, in-process results, SQLite, filesystem store). With ``OPTIFLOW_REDIS_URL`` set it only
enqueues; ``optiflow worker`` processes do the work.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from optiflow.admission import admit
from optiflow.core import kinds
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.drift.spec import REFERENCE_RUNS
from optiflow.core.kinds import AnySpec, parse_spec
from optiflow.core.measure.spec import MeasureSpec
from optiflow.core.overrides import STABLE, Applied, check_user_tag, merge_baseline_params
from optiflow.core.policy import ModelPolicy, PolicyError
from optiflow.core.progress import run_finished, status_changed
from optiflow.core.result import OptimizeResult
from optiflow.errors import JobError
from optiflow.persistence.jobs import JobRecord, JobStatus
from optiflow.settings import Settings

if TYPE_CHECKING:
    from celery import Celery

    from optiflow.distributed.embedded import EmbeddedWorker
    from optiflow.distributed.runtime import Runtime

log = logging.getLogger(__name__)
RUNS_ELSEWHERE = (
    "runs in the embedded worker of the process that submitted it; "
    "stop that process (Ctrl-C) and the job ends cancelled"
)


class JobHandle:
    """A submitted job: its id, its status, its result (the reply stored under ``id``)."""

    def __init__(self, client: Client, job_id: str) -> None:
        self.client = client
        self.id = job_id

    def __repr__(self) -> str:
        return f"JobHandle({self.id!r})"

    def record(self) -> JobRecord:
        return self.client.runtime.jobs.get(self.id)

    def status(self) -> JobStatus:
        return self.record().status

    def wait(self, timeout: float | None = None) -> OptimizeResult:
        """Block until the job has finished; JobError when ``timeout`` seconds pass first.

        The job's row in the database is the one source of its completion: this waits on the
        job's events (Redis pub/sub, or in this process when embedded) as a wake-up, and reads the
        row after each one, and at least once a second in case a wake-up was lost (a Redis
        restart, a client that subscribed late)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.client.runtime.listen(self.id) as events:
            while True:
                done = self.result()
                if done is not None:
                    return done
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise JobError(f"job {self.id} did not finish within {timeout}s", field="timeout")
                events.wait(1.0 if left is None else min(1.0, left))

    def result(self) -> OptimizeResult | None:
        """The result if the job has finished (read from the database), else None."""
        rec = self.record()
        return OptimizeResult.model_validate(rec.result) if rec.result else None

    def runs_elsewhere(self, status: JobStatus) -> bool:
        """Embedded, a running job's worker (and the cancel signal it reads) lives in the process
        that submitted or resumed it: True when that is not this client's process."""
        return (
            self.client.runtime.embedded and status == "running" and self.id not in self.client._embedded_jobs
        )

    def cancel(self) -> None:
        from optiflow.distributed import driver

        driver.cancel(self.client.app, self.client.runtime, self.id)

    def resume(self, *, force: bool = False) -> str:
        """Launch the job's pending action again (its messages were lost: a killed worker, a
        Redis restart). Evaluations that finished come from the eval cache. ConflictError for a
        finished job, or for one still making progress unless ``force``. Returns what was done."""
        from optiflow.distributed import recovery

        recovery.resumable(self.client.runtime, self.id, force=force)
        self.client._ensure_worker()
        if self.client.runtime.embedded and self.id not in self.client._embedded_jobs:
            self.client._embedded_jobs.append(self.id)  # it runs in this process from now on
        return recovery.resume(self.client.app, self.client.runtime, self.id, force=force).what


class Client:
    def __init__(self, settings: Settings | None = None, *, embedded: bool | None = None) -> None:
        from optiflow.distributed.app import create_app, runtime_of

        self.settings = settings or Settings()
        self.app: Celery = create_app(self.settings, embedded=embedded)
        self.runtime: Runtime = runtime_of(self.app)
        self._worker: EmbeddedWorker | None = None
        self._embedded_jobs: list[str] = []
        self.reference_jobs: list[JobHandle] = []
        """The reference measures the last :meth:`apply` queued."""

    @classmethod
    def from_env(cls) -> Client:
        return cls(Settings())

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object | TracebackType) -> None:
        self.close()

    def close(self) -> None:
        """Stop the embedded worker. An embedded job runs only in this process, so one still
        unfinished now could never finish: it is ended ``cancelled`` instead of staying
        ``running`` forever."""
        if self._worker is not None:
            self._end_unfinished_embedded_jobs()
            self._worker.stop()
            self._worker = None

    # -- submission ---------------------------------------------------------------------------
    def submit(self, spec: AnySpec, *, policy: ModelPolicy | None = None) -> JobHandle:
        """Validate, snapshot the baseline tag's overrides into the spec, persist, enqueue.

        ``policy`` (the HTTP server's): the job is checked against it as it will run, after the
        snapshot adds the tag's stored model params (a tag an operator wrote may name another
        model or an endpoint): :class:`~optiflow.core.policy.PolicyError` naming the tag."""
        field, tag = kinds.base_tag(spec)
        check_user_tag(tag, field)
        if policy is not None:
            policy.check(spec)  # the document as sent: errors name its fields
        snapshot = self._with_baseline_snapshot(spec)
        if policy is not None and snapshot is not spec:
            try:
                policy.check(snapshot)  # the effective configuration
            except PolicyError as exc:
                raise PolicyError(
                    f"the baseline tag {tag!r} of {spec.prompt.ns}/{spec.prompt.key} stores model params "
                    f"this server's policy refuses ({exc.field}: {exc.message})",
                    field=field,
                ) from None
        spec = self._drift_prepared(snapshot)
        admit(spec, self.settings)  # everything a job needs, checked before anything is written
        job_id = uuid.uuid4().hex
        created = self.runtime.jobs.create(
            job_id,
            spec.kind,
            spec.name,
            spec.model_dump(mode="json"),
            dataset=spec.dataset.samples,
            events=[status_changed("queued")],
        )
        self.runtime.publish(job_id, created.events)
        if self.runtime.embedded:
            self._embedded_jobs.append(job_id)
        self._ensure_worker()
        try:
            self.app.tasks["optiflow.start"].apply_async(args=[job_id], task_id=f"{job_id}-start")
        except Exception as exc:  # never leave a job 'queued' that nobody will start
            error = f"could not enqueue: {exc}"
            ended = [status_changed("failed", error=error), run_finished("failed", error=error)]
            self.runtime.jobs.finish(job_id, "failed", error=error, events=ended)
            raise JobError(f"could not enqueue job {job_id}: {exc}", field="broker") from exc
        return JobHandle(self, job_id)

    def submit_compress(self, **fields: Any) -> JobHandle:
        """Submit a compress job from keyword fields of :class:`CompressSpec`."""
        from optiflow.files import parse_model

        fields.setdefault("strategy", {"type": "llm", "model": fields.get("model")})
        return self.submit(parse_model(CompressSpec, fields, "compress job"))

    def submit_file(self, path: str | Path, **overrides: Any) -> JobHandle:
        from optiflow.jobfile import load_job

        return self.submit(load_job(path, store=self.runtime.store, overrides=overrides))

    def job(self, job_id: str) -> JobHandle:
        self.runtime.jobs.get(job_id)  # NotFoundError for an unknown id
        return JobHandle(self, job_id)

    # -- applying -----------------------------------------------------------------------------
    def apply(
        self,
        result: OptimizeResult | str,
        *,
        tag: str = STABLE,
        description: str | None = None,
        force: bool = False,
    ) -> Applied | None:
        """Write a finished job's accepted modifications to ``tag`` as a new version.

        A compare-and-set against what the job read: the overrides are written guarded by the
        section hashes they were made against, and only while the stored prompt is the job's
        (a prompt not in the store is registered with the write). When it changed since the job,
        :class:`~optiflow.errors.PromptChangedError` names the sections and nothing is written.
        Everything (the tag, the job's state, the held-out confirmation) is checked first.

        None when the job accepted nothing. ``Applied.status`` is ``"unchanged"`` (and nothing is
        written) when the tag already holds exactly these changes, e.g. the same job applied
        twice. A tag's first apply also records what it rendered before (``Applied.original``),
        the version a rollback returns to. An optimize job whose best held-out data did not
        confirm (or, with splits, could not) applies nothing (None) unless ``force``."""
        check_user_tag(tag)
        result = self._finished(result)
        changes = kinds.changes(result.report, force=force) if result.report is not None else None
        if changes is None or changes.empty:
            return None
        spec = parse_spec(self.runtime.jobs.get(result.job_id).spec)
        applied = self.runtime.store.apply(
            spec.prompt,
            changes.sections,
            tag=tag,
            source=f"job:{result.job_id}",
            description=description or changes.description,
            model_params=changes.model_params or None,
        )
        self.measure_reference(spec, applied, tag)
        return applied

    def _finished(self, result: OptimizeResult | str) -> OptimizeResult:
        """The result of a job that completed (by id: loaded); JobError for one that has not
        finished, and the job's own error for one that failed or was cancelled."""
        if isinstance(result, str):
            job = self.job(result)
            loaded = job.result()
            if loaded is None:
                raise JobError(f"job {result} has not finished ({job.status()})", field="job")
            result = loaded
        return result.raise_for_error()

    # -- drift references -----------------------------------------------------------------------
    reference_runs: int = REFERENCE_RUNS
    """Runs of the reference measure an apply records (0: none)."""

    def measure_reference(self, job_spec: AnySpec, applied: Applied | None, tag: str) -> list[JobHandle]:
        """After an apply wrote a version: measure the tag as accepted, as the drift reference of
        each measure configuration compared with it (:func:`optiflow.distributed.drift.
        reference_specs`). The jobs are queued (:attr:`reference_jobs`); on the embedded default
        they run here, so this waits for them (an embedded job cannot outlive its process).

        A fresh measure, not the runs the applied job made of this state: those were selected for
        looking good (the winner's curse), so a reference drawn from them would be lucky by
        construction and every later night would look like a drop."""
        self.reference_jobs = []
        if applied is None or applied.unchanged or applied.version is None or not self.reference_runs:
            return []
        from optiflow.distributed import drift

        v = applied.version
        note = f"applied {v.ns}/{v.key} {v.tag} {v.version}"
        try:  # the apply is written and stands: a reference that cannot be measured is only logged
            for spec in drift.reference_specs(
                self.runtime, job_spec, tag, runs=self.reference_runs, note=note
            ):
                self.reference_jobs.append(self.submit(spec))
            if self.runtime.embedded:
                for job in self.reference_jobs:
                    job.wait(self.settings.job_timeout_s)
        except Exception:
            log.warning("the reference of %s was not measured", note, exc_info=True)
        return self.reference_jobs

    def set_reference(self, spec: MeasureSpec, *, runs: int | None = None, note: str = "") -> JobHandle:
        """Measure ``spec``'s tag as the drift reference from now on (``optiflow measure
        --set-reference``): ``runs`` default :data:`REFERENCE_RUNS`."""
        drift = spec.drift.model_copy(
            update={
                "set_reference": True,
                "against": "reference",
                "note": note or "set by measure --set-reference",
            }
        )
        return self.submit(spec.model_copy(update={"drift": drift, "runs": runs or REFERENCE_RUNS}))

    def _drift_prepared(self, spec: AnySpec) -> AnySpec:
        from optiflow.distributed import drift

        return drift.prepare(self.runtime, spec)

    # -- internals ----------------------------------------------------------------------------
    def _end_unfinished_embedded_jobs(self) -> None:
        from optiflow.distributed import driver

        for job_id in self._embedded_jobs:
            try:
                if self.runtime.jobs.get(job_id).finished:
                    continue
                self.runtime.scratch.cancel(job_id)  # pending evaluations skip the model
                driver.complete(
                    self.app,
                    self.runtime,
                    self.runtime.jobs.get(job_id),
                    "cancelled",
                    error="cancelled: the client running it (embedded worker) closed before it finished",
                )
            except Exception:
                log.warning("could not end embedded job %s", job_id, exc_info=True)
        self._embedded_jobs.clear()

    def _ensure_worker(self) -> None:
        if self.runtime.embedded and self._worker is None:
            from optiflow.distributed.app import QUEUES
            from optiflow.distributed.embedded import EmbeddedWorker

            self._worker = EmbeddedWorker(
                self.app, concurrency=self.settings.eval_concurrency, queues=list(QUEUES)
            ).start()
            # litellm's import takes seconds: start it now, while the job is persisted and started.
            from optiflow.llm.runtime import preload

            threading.Thread(target=preload, name="optiflow-litellm-import", daemon=True).start()

    def _with_baseline_snapshot(self, spec: AnySpec) -> AnySpec:
        """The spec as the job will run it: the baseline tag's stored overrides (the fresh ones)
        and model params added. A document that sets ``baseline_overrides`` names its baseline
        itself and the tag is not read. Model params merge by
        :func:`~optiflow.core.overrides.merge_baseline_params`: a key both set to different
        values is refused naming both."""
        if spec.baseline_overrides:
            return spec
        tag = kinds.base_tag(spec)[1]
        current = self.runtime.store.resolve(spec.prompt.ns, spec.prompt.key, tag)
        if current is None:
            return spec
        fresh = spec.prompt.fresh_overrides(current)  # stale ones are skipped with a warning
        params = merge_baseline_params(spec.baseline_model_params, current.model_params, tag=tag)
        return spec.model_copy(update={"baseline_overrides": fresh, "baseline_model_params": params})
