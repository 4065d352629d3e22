"""The PNG: bus bandwidth against message size, one line per implementation, one panel per
collective, one row of panels per rank count."""

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt  # noqa: E402

from report import format_size  # noqa: E402

COLLECTIVES = ("allreduce", "allgather", "broadcast")
# Baselines dashed; tutti modes share a colour per mode, solid for numpy, dotted for torch.
STYLES = {"mpi4py": ("black", "--", "o"), "torch-gloo": ("tab:gray", "--", "s"),
          # --peers horovod: dash-dotted, in the colour of the tutti mode it matches.
          "horovod-mpi-torch": ("tab:purple", "-.", "D"),
          "horovod-gloo-torch": ("tab:olive", "-.", "P")}
MODE_COLOURS = {"mpi": "tab:blue", "gloo": "tab:orange", "mpi-shm": "tab:green",
                "gloo-shm": "tab:red", "mpi-noshm": "tab:cyan", "gloo-noshm": "tab:brown"}


def _style(impl):
    if impl in STYLES:
        return STYLES[impl]
    body, api = impl[len("tutti-"):].rsplit("-", 1)
    numpy_api = api == "np"
    return (MODE_COLOURS.get(body, "tab:purple"), "-" if numpy_api else ":",
            "^" if numpy_api else "v")


def draw(doc, path):
    runs = [run for run in doc["runs"] if run.get("sweep")]
    columns = [c for c in COLLECTIVES if any(r["collective"] == c for run in runs
                                             for r in run["sweep"])]
    if not runs or not columns:
        return
    figure, axes = plt.subplots(len(runs), len(columns), squeeze=False,
                                figsize=(5.2 * len(columns), 4.2 * len(runs)))
    for row, run in enumerate(runs):
        for col, collective in enumerate(columns):
            ax = axes[row][col]
            for impl in run["impls"]:
                points = sorted((r["bytes"], r["busbw_GBps"]) for r in run["sweep"]
                                if r["collective"] == collective and r["impl"] == impl)
                if not points:
                    continue
                colour, line, marker = _style(impl)
                ax.plot([p[0] for p in points], [p[1] for p in points], label=impl,
                        color=colour, linestyle=line, marker=marker, markersize=4)
            sizes = sorted({r["bytes"] for r in run["sweep"]})
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(sizes)
            ax.set_xticklabels([format_size(s).replace(" ", "") for s in sizes],
                               rotation=60, fontsize=7)
            ax.minorticks_off()
            ax.set_title("%s, %d ranks" % (collective, run["np"]))
            ax.set_xlabel("message size per rank")
            ax.set_ylabel("bus bandwidth (GB/s, median)")
            ax.grid(True, which="major", alpha=0.3)
            if row == 0 and col == 0:
                ax.legend(fontsize=7)
    figure.suptitle("%s (%s)" % (doc["benchmark"], doc["started"]), fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


# ---- training benchmarks (the synthetic benchmarks' --json) ----

TRAINING_ORDER = ["tutti", "ddp", "horovod-mpi", "horovod-gloo", "compute-only",
                  "compute-only-job"]
TRAINING_COLOURS = {"tutti": "tab:blue", "ddp": "tab:gray", "horovod-mpi": "tab:purple",
                    "horovod-gloo": "tab:olive", "compute-only": "dimgray",
                    "compute-only-job": "black"}


def _training_totals(doc):
    """{label: total images/s} of a torch (results) or MXNet (images_per_s) document."""
    if "results" in doc:
        return {label: r["total"] for label, r in doc["results"].items()}
    return {label: v["mean"] for label, v in doc["images_per_s"].items()
            if label in TRAINING_COLOURS}


def draw_training(docs, titles, path):
    """One panel per launch: the job's images/s per implementation, as a share of the
    compute-only bound of the same launch (the compute-only job where there is one; bar
    labels give images/s)."""
    figure, axes = plt.subplots(1, len(docs), squeeze=False, figsize=(4.6 * len(docs), 3.6))
    for ax, doc, title in zip(axes[0], docs, titles):
        totals = _training_totals(doc)
        bound = totals.get("compute-only-job") or totals.get("compute-only")
        labels = [label for label in TRAINING_ORDER if label in totals]
        shares = [totals[label] / bound if bound else totals[label] for label in labels]
        bars = ax.bar(range(len(labels)), shares,
                      color=[TRAINING_COLOURS[label] for label in labels])
        for bar, label in zip(bars, labels):
            ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(),
                    "%.0f" % totals[label], ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=30, fontsize=8)
        ax.set_ylabel("share of the compute-only bound" if bound else "images/s")
        ax.set_title(title, fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv):
    """python tools/bench/plot.py OUT.png TITLE=FILE.json ...: redraws a collectives JSON
    (tools/bench/run), or draws training JSONs (the synthetic benchmarks' --json) side by
    side."""
    import json

    out, specs = argv[0], argv[1:]
    titles, docs = [], []
    for spec in specs:
        title, _, path = spec.rpartition("=")
        with open(path) as stream:
            docs.append(json.load(stream))
        titles.append(title or path)
    if len(docs) == 1 and "runs" in docs[0]:
        draw(docs[0], out)
    else:
        draw_training(docs, titles, out)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
