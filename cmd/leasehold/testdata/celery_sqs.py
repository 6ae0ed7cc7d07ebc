"""A Celery application whose broker is leasehold serve, through kombu's
SQS transport (the query protocol in kombu before 5.3.4).

    celery_sqs.py worker   runs a worker until it is killed
    celery_sqs.py send ARG sends one task, add_line(ARG)

The environment names the server (LEASEHOLD_ENDPOINT, host:port), the
credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) and the file each
task appends its line to (CELERY_OUT).
"""

import os
import sys
from urllib.parse import quote

from celery import Celery

key = quote(os.environ["AWS_ACCESS_KEY_ID"], safe="")
secret = quote(os.environ["AWS_SECRET_ACCESS_KEY"], safe="")
app = Celery("leasehold_celery", broker=f"sqs://{key}:{secret}@{os.environ['LEASEHOLD_ENDPOINT']}")
app.conf.update(
    broker_transport_options={
        "region": "us-east-1",
        "is_secure": False,
        "wait_time_seconds": 1,
        "polling_interval": 0.1,
        "visibility_timeout": 60,
    },
    task_default_queue="leasehold-celery",
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)


@app.task(name="add_line")
def add_line(text):
    with open(os.environ["CELERY_OUT"], "a") as f:
        f.write(text + "\n")
    return text


if __name__ == "__main__":
    if sys.argv[1] == "worker":
        app.worker_main(["worker", "--pool=solo", "--concurrency=1", "--without-heartbeat",
                         "--without-gossip", "--without-mingle", "--loglevel=INFO"])
    elif sys.argv[1] == "send":
        result = add_line.delay(sys.argv[2])
        print(result.id)
    else:
        sys.exit("usage: celery_sqs.py worker | send ARG")
