"""The Celery app for ``celery -A workers.app ...``, configured from ``OPTIFLOW_*`` variables.

celery -A workers.app worker -Q optiflow.eval -P threads -c 32     # eval workers: scale these
celery -A workers.app worker -Q optiflow.control -c 2              # control worker
celery -A workers.app flower                                       # monitoring
"""

from optiflow.distributed.app import create_app
from optiflow.settings import Settings

app = create_app(Settings(), embedded=False)
