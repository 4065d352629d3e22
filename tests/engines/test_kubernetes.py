"""The manifests in examples/kubernetes pass the offline checks, and the checks catch the
mistakes they are for (each broken copy below must be reported, with its reason)."""

import glob
import os

import pytest
import yaml

from kubernetes_manifests import check

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir,
                        "examples", "kubernetes")


def _load(name):
    with open(os.path.join(EXAMPLES, name)) as stream:
        return list(yaml.safe_load_all(stream))


def test_every_manifest_passes():
    paths = sorted(glob.glob(os.path.join(EXAMPLES, "*.yaml")))
    assert [os.path.basename(path) for path in paths] == ["indexed-job.yaml", "mpijob.yaml"]
    for path in paths:
        with open(path) as stream:
            assert check(list(yaml.safe_load_all(stream)), os.path.basename(path)) == []


def _launcher(documents):
    return documents[0]["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"][
        "containers"][0]


def _script(documents):
    return documents[1]["spec"]["template"]["spec"]["containers"][0]["command"]


def _broken_mpijob(change):
    documents = _load("mpijob.yaml")
    change(documents)
    return check(documents, "mpijob.yaml")


def _broken_indexed_job(change):
    documents = _load("indexed-job.yaml")
    change(documents)
    return check(documents, "indexed-job.yaml")


@pytest.mark.parametrize("change, message", [
    (lambda d: d[0].update(apiVersion="kubeflow.org/v1"), "unknown apiVersion/kind"),
    (lambda d: _launcher(d)["command"].__setitem__(3, "4"),
     "tuttirun -np 4, but the manifest provides 2 slots"),
    (lambda d: _launcher(d)["command"].insert(1, "--no-such-flag"),
     "not a valid tuttirun command line"),
    (lambda d: _launcher(d)["command"].remove("--mpi"), "tuttirun needs --mpi"),
    (lambda d: _launcher(d).pop("image"), "container 0: image is missing"),
    (lambda d: d[0]["spec"].update(slotsPerWorker="1"), "slotsPerWorker must be a int"),
    (lambda d: d[0]["metadata"].update(name="Tutti_Digits"), "is not a DNS-1123 label"),
])
def test_a_broken_mpijob_is_reported(change, message):
    problems = _broken_mpijob(change)
    assert any(message in problem for problem in problems), problems


@pytest.mark.parametrize("change, message", [
    (lambda d: d[1]["spec"].update(completions=3), "spec.parallelism (2) must equal"),
    (lambda d: d[1]["spec"]["template"]["spec"].update(subdomain="other"),
     "subdomain 'other' names no headless Service"),
    (lambda d: d[0]["spec"].update(selector={"job-name": "else"}), "do not match"),
    (lambda d: _script(d).__setitem__(2, _script(d)[2].replace(
        "tutti-digits-1.tutti-digits:1", "tutti-digits-2.tutti-digits:1")),
     "but the pods are"),
    (lambda d: _script(d).__setitem__(2, _script(d)[2].replace("-np 2", "-np two")),
     "not a valid tuttirun command line"),
    (lambda d: d[1]["spec"].pop("completionMode"), "completionMode must be Indexed"),
    (lambda d: d[1]["spec"]["template"]["spec"].update(restartPolicy="Always"),
     "restartPolicy must be Never or OnFailure"),
])
def test_a_broken_indexed_job_is_reported(change, message):
    problems = _broken_indexed_job(change)
    assert any(message in problem for problem in problems), problems
