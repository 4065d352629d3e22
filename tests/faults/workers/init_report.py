"""init(), then report: "init ok" (and with `timeline PATH`, start and stop a timeline there),
or "init failed: <Class>: <message>". Exits 0 either way."""

import sys

import tutti.numpy as hvd


def main(args):
    try:
        hvd.init()
    except Exception as exc:  # the message a user sees is what the test checks
        print("init failed: %s: %s" % (type(exc).__name__, exc), flush=True)
        return 0
    print("rank %d: init ok" % hvd.rank(), flush=True)
    if args[:1] == ["timeline"]:
        hvd.start_timeline(args[1])
        hvd.allreduce(hvd_array(), name="traced")
        hvd.stop_timeline()
    hvd.shutdown()
    return 0


def hvd_array():
    import numpy as np

    return np.ones(4, np.float32)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
