"""tutti.spark: run a tutti job as Spark barrier tasks (Horovod's horovod.spark.run API).

    import tutti.spark

    def train(lr):
        import tutti.torch as hvd
        hvd.init()
        ...
        return hvd.rank()

    results = tutti.spark.run(train, args=(0.1,), num_proc=2)   # one result per rank

run_elastic(fn, num_proc=..., min_np=..., max_np=...) runs an elastic job (hvd.elastic.run)
whose slots are long-running Spark tasks. Needs an active SparkSession and PySpark (`pip install pyspark`, Java 17+). See
docs/engines.md.
"""

from ._imports import pyspark_modules

pyspark_modules()  # fail at import time, with the package to install, when PySpark is missing

from tutti.runner.api import WorkerError  # noqa: E402

from .elastic import run_elastic  # noqa: E402
from .runner import run, task_slots  # noqa: E402

__all__ = ["run", "run_elastic", "task_slots", "WorkerError"]
