"""tuttirun's elastic mode: jobs that re-form when hosts come and go or a worker fails.

discovery.py finds the hosts (the user's script) and keeps failing ones out for a while;
driver.py decides each membership generation and publishes it in the job's rendezvous
store, where the workers (tutti.common.elastic) read it; it starts and stops the workers
through the launcher's ProcessGroup (processes.py), as a fixed job does.
"""
