"""PySpark is optional for tutti-core: import it only when tutti.spark is used."""

_MESSAGE = ("tutti.spark needs PySpark (and Java 17 or newer): pip install pyspark "
            "(tested with pyspark==4.3.0)")


def pyspark_modules():
    """(pyspark, pyspark.taskcontext); ImportError naming the pip package when missing."""
    try:
        import pyspark
        from pyspark import taskcontext
    except ImportError as exc:
        raise ImportError("%s (%s)" % (_MESSAGE, exc)) from exc
    return pyspark, taskcontext
