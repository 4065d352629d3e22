"""room(): the cc_library of one room of the core (common/src/<room>), wired from rooms.bzl."""

load("@rules_cc//cc:defs.bzl", "cc_library")
load(":rooms.bzl", "ROOM_DEPS")

# The core's symbols stay hidden (the shared library exports only the C ABI). The dynamic
# cost model lets -O2 vectorise the reduction loops (3x on float32 sums; elementwise, so
# results do not change). setup.py uses the same flags.
CORE_COPTS = [
    "-fvisibility=hidden",
    "-fvect-cost-model=dynamic",
]

def room(name, deps = [], copts = CORE_COPTS, visible_to = [], **kwargs):
    """One room: its sources and headers, included as "<room>/<file>.h".

    Args:
      name: the room, a key of ROOM_DEPS and the name of its directory.
      deps: libraries outside the core (MPI, Gloo); the rooms it uses come from ROOM_DEPS.
      copts: compiler options.
      visible_to: packages outside the core that may use this room directly (tools).
      **kwargs: passed through to cc_library.
    """
    users = [room for room, used in ROOM_DEPS.items() if name in used]
    cc_library(
        name = name,
        srcs = native.glob(["*.cc"]),
        hdrs = native.glob(["*.h"]),
        strip_include_prefix = "/common/src",
        copts = copts,
        deps = ["//common/src/%s" % room for room in ROOM_DEPS[name]] + ["//common:c_api"] + deps,
        # The rooms that use this one, the shared library and the core's unit tests: nothing else.
        visibility = ["//common/src/%s:__pkg__" % room for room in users] + ["//common:__pkg__"] + visible_to,
        alwayslink = 1,
        **kwargs
    )
    native.filegroup(
        name = "sources",
        srcs = native.glob(["*.cc", "*.h"]),
        visibility = ["//tests/core:__pkg__"],
    )
