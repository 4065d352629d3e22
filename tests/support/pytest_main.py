"""Entry point of every pytest_test target: runs pytest on the files given as arguments.

pytest's exit code 5 (no tests collected) is turned into a failure, so a target whose
tests silently vanished cannot pass.
"""

import os
import sys

import pytest

NO_TESTS_COLLECTED = 5


def main(files):
    args = ["-v", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning"]
    xml_output = os.environ.get("XML_OUTPUT_FILE")
    if xml_output:
        args.append("--junitxml=" + xml_output)
    code = pytest.main(args + files)
    if code == NO_TESTS_COLLECTED:
        print("pytest_main: no tests were collected from %s" % files, file=sys.stderr)
        return 1
    return int(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
