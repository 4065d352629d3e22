"""The core's rooms and, for each, the rooms its sources may include (its direct dependencies).

This table is the one record of the core's layering. room.bzl turns it into Bazel deps and
visibility (a room can depend only on the rooms listed here), and //tests/core:rooms_test
checks that every #include in common/src stays within the room or the rooms listed here.
Data flows down the list: a request enters through api, the cycle negotiates it and hands
it to execution, which moves bytes through gpu / transport / shm.
"""

ROOM_DEPS = {
    "base": [],
    "kernels": ["base"],
    "requests": ["base", "kernels"],
    "negotiation": ["base", "requests"],
    "shm": ["base", "kernels"],
    "transport": ["base", "kernels", "shm"],
    "tuning": ["base"],
    "gpu": ["base", "requests", "transport"],
    "execution": ["base", "gpu", "kernels", "requests", "transport"],
    "cycle": ["base", "execution", "negotiation", "requests", "transport", "tuning"],
    "api": ["base", "cycle", "gpu", "requests", "transport"],
}
