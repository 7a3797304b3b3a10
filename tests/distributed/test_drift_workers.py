"""The nightly drift check on real Celery worker processes and the real Redis (issue 30).

A reference (``Client.set_reference``) and a quiet night run on the workers; then the provider
behind the model name drops samples and ``optiflow cron`` (a process of its own, as cron starts it)
exits 4 with the drift in its end line and in its one stderr line; ``optiflow report`` exits 4 too,
``optiflow replay`` re-decides every night from the jobs database, and the measures API the page
reads marks the reference and the night the drop was shown.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from optiflow.core.measure.report import MeasureDocument
from optiflow.core.measure.spec import MeasureSpec
from optiflow.interfaces.client import Client
from optiflow.interfaces.http.views import measure_point
from optiflow.jobfile import load_job
from optiflow.settings import Settings
from tests.cli.test_drift_cli import AFTER, nightly
from tests.support.workers import running_workers, worker_env

pytestmark = [pytest.mark.redis, pytest.mark.workers]


def optiflow(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "optiflow.interfaces.cli", *args],
        check=False,
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_cron_exits_4_on_a_drop_shown_by_the_workers_and_replay_agrees(
    redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    (tmp_path / "home").mkdir()
    env = worker_env(redis_url, redis_prefix, tmp_path / "home")
    settings = Settings(
        redis_url=env["OPTIFLOW_REDIS_URL"],
        key_prefix=env["OPTIFLOW_KEY_PREFIX"],
        home=tmp_path / "home",
        database_url=env["OPTIFLOW_DATABASE_URL"],
    )
    measure = nightly(tmp_path / "jobs" / "support-bot")
    with running_workers(env, tmp_path, eval_workers=1), Client(settings, embedded=False) as client:
        spec = load_job(measure, store=client.runtime.store)
        assert isinstance(spec, MeasureSpec)
        reference = client.set_reference(spec).wait(180).raise_for_error()
        quiet = client.submit(spec).wait(180).raise_for_error()
        assert isinstance(quiet.report, MeasureDocument) and quiet.report.drift is not None
        assert quiet.report.drift.status == "compared" and quiet.report.drift.night == 1
        assert quiet.report.first_run == 12  # the night's runs continue the reference's indices

        nightly(tmp_path / "jobs" / "support-bot", AFTER)
        log = tmp_path / "cron.log"
        for _ in range(4):
            run = optiflow(env, "cron", str(measure), "--log-file", str(log), cwd=tmp_path)
            if run.returncode != 0:
                break
        assert run.returncode == 4, (run.stderr, log.read_text())
        end = log.read_text().strip().splitlines()[-1]
        assert re.search(
            r"job (\w+): exit 4 \(a drop since the reference is shown\); drift: \u2212\d+\.\d% \[", end
        ), end
        assert run.stderr.startswith(
            "optiflow cron support-bot-nightly: exit 4 (a drop since the reference is shown); drift: \u2212"
        )
        job = re.findall(r"job (\w+): exit 4", end)[0]

        report = optiflow(env, "report", job, cwd=tmp_path)
        assert report.returncode == 4 and "a drop shown tonight" in report.stdout, report.stderr
        replay = optiflow(env, "replay", job, cwd=tmp_path)
        assert replay.returncode == 0, replay.stdout + replay.stderr
        assert re.search(r"night\(s\) replayed; a drop first shown on night \d, 0 differ", replay.stdout)

        points = [measure_point(client.runtime.jobs.get(i)) for i in (reference.job_id, quiet.job_id, job)]
        marks = [(p or {}).get("drift") or {} for p in points]
        assert [m.get("status") for m in marks] == ["reference", "compared", "compared"]
        assert marks[1]["drop_shown"] is False and marks[2]["drop_shown"] is True
        assert marks[2]["first_shown"] == marks[2]["night"] and marks[2]["estimate"] < 0
        assert marks[2]["headline"].startswith("drift: \u2212")
