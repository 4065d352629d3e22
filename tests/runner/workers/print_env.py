"""Prints this rank's place in the job as the launcher described it, one line per stream."""

import os
import sys
import urllib.parse

env = os.environ
rank = env.get("TUTTI_RANK") or env.get("OMPI_COMM_WORLD_RANK") or env.get("PMI_RANK")
fields = ["rank=%s" % rank]
for name in ("SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE"):
    fields.append("%s=%s" % (name.lower(), env.get("TUTTI_" + name)))
for name in ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_CROSS_SIZE",
             "TUTTI_CONTROLLER", "TUTTI_GLOO_RENDEZVOUS_ADDR", "TUTTI_GLOO_IFACE",
             "TUTTI_FUSION_THRESHOLD", "TUTTI_CYCLE_TIME"):
    fields.append("%s=%s" % (name, env.get(name)))
fields.append("secret_set=%s" % bool(env.get("TUTTI_GLOO_SECRET")))
# Where the rank runs: its network namespace, and the ssh server that started it if any.
fields.append("netns=%s" % os.readlink("/proc/self/ns/net"))
fields.append("ssh_connection=%s" % urllib.parse.quote(env.get("SSH_CONNECTION", "")))
# Quoted, so that arguments with spaces stay one field.
fields.append("args=%s" % urllib.parse.quote(",".join(sys.argv[1:])))
print(" ".join(fields), flush=True)
print("to stderr from rank %s" % rank, file=sys.stderr, flush=True)
