"""tuttirun's elastic mode: jobs that re-form when hosts come and go or a worker fails.

discovery.py finds the hosts (the user's script) and keeps failing ones out for a while;
workers.py starts and stops worker processes one at a time; driver.py decides each
membership generation and publishes it in the job's rendezvous store, where the workers
(tutti.common.elastic) read it.
"""
