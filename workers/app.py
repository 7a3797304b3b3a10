"""The Celery app for ``celery -A workers.app ...``, configured from ``OPTIFLOW_*`` variables.

celery -A workers.app worker -Q optiflow.eval -P threads -c 32     # eval workers: scale these
celery -A workers.app worker -Q optiflow.control -c 2              # control worker
celery -A workers.app flower                                       # monitoring
"""

import sys

from optiflow.distributed.app import create_app
from optiflow.errors import ConfigError
from optiflow.settings import load_settings

try:
    app = create_app(load_settings(), embedded=False)
except ConfigError as exc:  # a bad OPTIFLOW_* value: one line naming it, not a traceback
    sys.stderr.write(f"optiflow: error[{exc.code}]: {exc}\n")
    raise SystemExit(2) from None
