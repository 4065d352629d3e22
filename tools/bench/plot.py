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
