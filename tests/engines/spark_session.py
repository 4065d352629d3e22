"""One local Spark session per test module, listening on 127.0.0.1 only, and its teardown
down to the last JVM process."""

import contextlib
import os
import sys

import engine_checks

LOCAL_ONLY = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}


def start(master, app_name):
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    # Executors run this Python (the project venv), not whatever `python3` is on PATH.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in LOCAL_ONLY.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def stop(session):
    """Stops the session and the JVM that PySpark started for it."""
    from pyspark import SparkContext

    session.stop()
    gateway = SparkContext._gateway
    if gateway is not None:
        gateway.shutdown()
        process = getattr(gateway, "proc", None)
        if process is not None:
            if process.stdin:
                process.stdin.close()  # the JVM exits when its stdin closes
            try:
                process.wait(30)
            except Exception:
                process.kill()
                process.wait()
        SparkContext._gateway = None
        SparkContext._jvm = None


@contextlib.contextmanager
def running(master, app_name):
    """A session for a test module; afterwards no process at all is left below the test."""
    session = start(master, app_name)
    yield session
    stop(session)
    left = engine_checks.wait_for_no_descendants(timeout=30)
    assert not left, "left running after the session stopped: %s" % left
