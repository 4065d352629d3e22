"""Draws the synthetic CNN runs side by side: total images per second of every library in
each run's JSON (`--json` of the torch and MXNet synthetic benchmarks), one group of bars
per run, torch runs as medians with their quartiles, MXNet runs as means with one standard
deviation.

    python tools/bench/plot_training.py OUT.png LABEL=RUN.json [LABEL=RUN.json ...]
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt  # noqa: E402

# Library keys of the two benchmarks' JSON, in the order they are drawn.
ORDER = ("tutti", "ddp", "local-kvstore", "horovod-mpi", "horovod-gloo", "compute-only",
         "compute-only-job")
NAMES = {"tutti": "tutti", "ddp": "torch DDP", "local-kvstore": "MXNet kvstore (1 process)",
         "horovod-mpi": "Horovod 0.28.1 (MPI)", "horovod-gloo": "Horovod 0.28.1 (Gloo)",
         "compute-only": "compute-only bound", "compute-only-job": "compute-only job"}


def totals(run):
    """library -> (total img/s, low, high) of one run's JSON."""
    ranks = run.get("ranks", 2)
    out = {}
    if "results" in run:  # torch: per-rank medians and quartiles, and the total
        for key, r in run["results"].items():
            low, high = r["quartiles"]
            out[key] = (r["total"], low * ranks, high * ranks)
    else:  # MXNet: totals over the ranks as mean and standard deviation
        for key, r in run["images_per_s"].items():
            if key in ("one-rank",):
                continue
            out[key] = (r["mean"], r["mean"] - r["sd"], r["mean"] + r["sd"])
    return out


def main(argv):
    if len(argv) < 2 or any("=" not in a for a in argv[1:]):
        sys.exit(__doc__)
    runs = []
    for arg in argv[1:]:
        label, path = arg.split("=", 1)
        with open(path) as stream:
            runs.append((label, totals(json.load(stream))))
    keys = [k for k in ORDER if any(k in t for _, t in runs)]
    width = 0.8 / len(keys)
    fig, ax = plt.subplots(figsize=(4.2 + 1.6 * len(runs), 4.5))
    for i, key in enumerate(keys):
        xs, ys, errs = [], [], [[], []]
        for x, (_, t) in enumerate(runs):
            if key in t:
                value, low, high = t[key]
                xs.append(x - 0.4 + (i + 0.5) * width)
                ys.append(value)
                errs[0].append(max(0.0, value - low))
                errs[1].append(max(0.0, high - value))
        ax.bar(xs, ys, width, yerr=errs, capsize=2, label=NAMES.get(key, key))
    ax.set_xticks(range(len(runs)))
    ax.set_xticklabels([label for label, _ in runs])
    ax.set_ylabel("images per second, 2 ranks in all")
    ax.set_title("synthetic CNN, 2 ranks on one host")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(argv[0], dpi=110)


if __name__ == "__main__":
    main(sys.argv[1:])
