"""A rank that starts a grandchild and then sleeps: prints "pid P child C" (and its parent's
pid) so a test can check that all of them go when the launcher is killed."""

import os
import subprocess
import sys
import time

child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
print("pid %d child %d parent %d" % (os.getpid(), child.pid, os.getppid()), flush=True)
time.sleep(300)
