"""tutti.runner: the `tuttirun` launcher and its Python API.

    tuttirun -np 4 python train.py            # Gloo: tuttirun starts the ranks
    tuttirun --mpi -np 4 python train.py      # MPI: tuttirun runs mpirun

    from tutti.runner import run
    results = run(fn, args=(1,), np=2)        # fn on 2 ranks, results in rank order

`tutti` is a namespace package shared by several distributions, so there is no
`tutti.run`; use `tutti.runner.run`.
"""

from .api import WorkerError, run

__all__ = ["run", "WorkerError"]
