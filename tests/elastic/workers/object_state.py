"""ObjectState in a fixed job: restore() returns to the last commit; sync() gives every rank
the state of the rank holding the most commits (the lowest such rank), agreed by a
collective. argv[1]: the rank that commits once more than the others. Prints one JSON line
per rank: {rank, restored, epoch, history, commits, after_sync_restore}."""

import json
import sys

import tutti.numpy as hvd
from tutti.common.elastic import ObjectState

hvd.init()
rank = hvd.rank()
ahead = int(sys.argv[1])
state = ObjectState(epoch=rank * 10, history=[rank])
state.commit()
if rank == ahead:
    state.commit()
state.epoch += 1
state.history.append("uncommitted")
state.restore()
restored = (state.epoch, state.history)
state.sync()
synced = (state.epoch, state.history, state._commits)
state.epoch = -1
state.restore()  # sync() saved the synced state
print(json.dumps({"rank": rank, "restored": restored, "epoch": synced[0],
                  "history": synced[1], "commits": synced[2],
                  "after_sync_restore": state.epoch}), flush=True)
hvd.shutdown()
