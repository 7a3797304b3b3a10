"""The Celery app for ``celery -A workers.app ...``, configured from ``OPTIFLOW_*`` variables.

celery -A workers.app worker -Q optiflow.eval -P threads -c 32     # eval workers: scale these
celery -A workers.app worker -Q optiflow.control -c 2              # control worker
celery -A workers.app flower                                       # monitoring
"""

import atexit
import gc
import sys

from optiflow.distributed.app import create_app
from optiflow.errors import ConfigError
from optiflow.settings import load_settings

# A worker stopped in 6.2 s instead of 1.4 s while the interpreter's last garbage collections
# walked litellm's objects at exit: they are frozen instead (registered first, so it runs after
# every other exit handler; see optiflow.interfaces.cli.exit_without_collecting).
atexit.register(gc.freeze)

try:
    app = create_app(load_settings(), embedded=False)
except ConfigError as exc:  # a bad OPTIFLOW_* value: one line naming it, not a traceback
    sys.stderr.write(f"optiflow: error[{exc.code}]: {exc}\n")
    raise SystemExit(2) from None
