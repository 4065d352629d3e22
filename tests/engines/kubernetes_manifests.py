"""Offline checks of the Kubernetes manifests in examples/kubernetes (no cluster here).

Checks what a typo would break: apiVersion/kind pairs, the required fields of each kind
(Service, Job, MPIJob v2beta1) with their types, DNS-1123 names, that a headless Service
selects the Job's pods and is their subdomain, and that every tuttirun command line is one
that tuttirun's own option parser accepts, with -np matching the pods and slots and -H
naming the pods by their DNS names. check(documents) returns a list of problems.
"""

import re
import shlex

from tutti.runner import hosts, options
from tutti.runner.errors import UsageError

KNOWN_KINDS = {("v1", "Service"), ("batch/v1", "Job"), ("kubeflow.org/v2beta1", "MPIJob")}
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def _get(document, path):
    value = document
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def _require(document, where, problems, path, kind):
    value = _get(document, path)
    if value is None:
        problems.append("%s: %s is missing" % (where, path))
    elif not isinstance(value, kind):
        problems.append("%s: %s must be a %s, not %r" % (where, path, kind.__name__, value))
    return value


def tuttirun_arguments(container):
    """tuttirun's argv (without the program name) from a container's command/args, or None.

    A shell script (`sh -c SCRIPT`) is searched line by line for `[exec] tuttirun ...`.
    """
    argv = list(container.get("command") or []) + list(container.get("args") or [])
    if argv and argv[0] == "tuttirun":
        return argv[1:]
    if len(argv) >= 3 and argv[0] in ("/bin/sh", "sh", "/bin/bash", "bash") and argv[1] == "-c":
        for line in argv[2].splitlines():
            words = shlex.split(line)
            if words and words[0] == "exec":
                words = words[1:]
            if words and words[0] == "tuttirun":
                return words[1:]
    return None


def check_tuttirun(argv, where, expected_np, expected_hosts=None):
    """Problems with one tuttirun command line (parsed by tuttirun's own parser)."""
    try:
        settings = options.parse(argv)
    except (UsageError, SystemExit) as exc:
        return ["%s: not a valid tuttirun command line (%s): %s"
                % (where, exc, shlex.join(argv))]
    problems = []
    if not settings.command:
        problems.append("%s: tuttirun is given no command to run" % where)
    if settings.np != expected_np:
        problems.append("%s: tuttirun -np %s, but the manifest provides %d slots"
                        % (where, settings.np, expected_np))
    if expected_hosts is not None:
        try:
            listed = [host.name for host in hosts.parse_hosts_argument(settings.hosts or "")]
        except UsageError as exc:
            return problems + ["%s: %s" % (where, exc)]
        if listed != expected_hosts:
            problems.append("%s: tuttirun -H names %s, but the pods are %s"
                            % (where, listed, expected_hosts))
    return problems


def _containers(template, where, problems):
    containers = _require(template, where, problems, "spec.containers", list) or []
    if not containers:
        problems.append("%s: spec.containers is empty" % where)
    for index, container in enumerate(containers):
        here = "%s container %d" % (where, index)
        name = _require(container, here, problems, "name", str)
        if name is not None and not _DNS_LABEL.match(name):
            problems.append("%s: name %r is not a DNS-1123 label" % (here, name))
        _require(container, here, problems, "image", str)
        if not container.get("command") and not container.get("args"):
            problems.append("%s: neither command nor args is given" % here)
    return containers


def _check_pod_template(template, where, problems):
    restart = _get(template, "spec.restartPolicy")
    if restart not in ("Never", "OnFailure"):
        problems.append("%s: spec.restartPolicy must be Never or OnFailure for a job, not %r"
                        % (where, restart))
    return _containers(template, where, problems)


def _check_service(document, where, problems):
    _require(document, where, problems, "spec.selector", dict)
    ports = _require(document, where, problems, "spec.ports", list) or []
    for port in ports:
        if not isinstance(port.get("port"), int):
            problems.append("%s: every port needs an integer port, not %r" % (where, port))


def _check_job(document, where, problems, services):
    spec = _require(document, where, problems, "spec", dict) or {}
    if spec.get("completionMode") != "Indexed":
        problems.append("%s: spec.completionMode must be Indexed (rank = pod index)" % where)
    completions = _require(document, where, problems, "spec.completions", int)
    if spec.get("parallelism") != completions:
        problems.append("%s: spec.parallelism (%r) must equal spec.completions (%r): every "
                        "rank runs at once" % (where, spec.get("parallelism"), completions))
    template = _require(document, where, problems, "spec.template", dict) or {}
    containers = _check_pod_template(template, where + " pod template", problems)
    name = _get(document, "metadata.name")
    subdomain = _get(template, "spec.subdomain")
    service = services.get(subdomain)
    if service is None:
        problems.append("%s: spec.template.spec.subdomain %r names no headless Service in "
                        "this file" % (where, subdomain))
    else:
        labels = _get(template, "metadata.labels") or {}
        selector = _get(service, "spec.selector") or {}
        if any(labels.get(key) != value for key, value in selector.items()):
            problems.append("%s: Service %r selects %r, which the pod labels %r do not match"
                            % (where, subdomain, selector, labels))
    if not isinstance(completions, int) or not isinstance(name, str):
        return
    pods = ["%s-%d.%s" % (name, index, subdomain) for index in range(completions)]
    found = False
    for index, container in enumerate(containers):
        argv = tuttirun_arguments(container)
        if argv is not None:
            found = True
            problems.extend(check_tuttirun(argv, "%s container %d" % (where, index),
                                           completions, pods))
    if not found:
        problems.append("%s: no container runs tuttirun" % where)


def _check_mpijob(document, where, problems):
    slots = _require(document, where, problems, "spec.slotsPerWorker", int)
    implementation = _get(document, "spec.mpiImplementation")
    if implementation not in (None, "OpenMPI", "Intel", "MPICH"):
        problems.append("%s: spec.mpiImplementation %r is not OpenMPI, Intel or MPICH"
                        % (where, implementation))
    replicas = _require(document, where, problems, "spec.mpiReplicaSpecs", dict) or {}
    unknown = set(replicas) - {"Launcher", "Worker"}
    if unknown:
        problems.append("%s: unknown replica types %s" % (where, sorted(unknown)))
    launcher = replicas.get("Launcher") or {}
    worker = replicas.get("Worker") or {}
    if launcher.get("replicas") != 1:
        problems.append("%s: the Launcher needs replicas: 1" % where)
    workers = worker.get("replicas")
    if not isinstance(workers, int) or workers < 1:
        problems.append("%s: the Worker needs replicas >= 1" % where)
    for role, spec in (("Launcher", launcher), ("Worker", worker)):
        template = spec.get("template")
        if not isinstance(template, dict):
            problems.append("%s: mpiReplicaSpecs.%s.template is missing" % (where, role))
            continue
        containers = _check_pod_template(template, "%s %s" % (where, role), problems)
        if role != "Launcher":
            continue
        argvs = [tuttirun_arguments(c) for c in containers]
        if not any(argv is not None for argv in argvs):
            problems.append("%s Launcher: no container runs tuttirun" % where)
        for index, argv in enumerate(argvs):
            if argv is None or not isinstance(slots, int) or not isinstance(workers, int):
                continue
            problems.extend(check_tuttirun(argv, "%s Launcher container %d" % (where, index),
                                           slots * workers))
            if "--mpi" not in argv:
                problems.append("%s Launcher container %d: tuttirun needs --mpi under the "
                                "MPI Operator" % (where, index))


def check(documents, source="manifest"):
    """Every problem found in `documents` (parsed YAML documents of one file)."""
    problems = []
    documents = [document for document in documents if document is not None]
    if not documents:
        return ["%s: no documents" % source]
    services = {}
    for number, document in enumerate(documents):
        where = "%s document %d" % (source, number)
        if not isinstance(document, dict):
            problems.append("%s: not a mapping" % where)
            continue
        pair = (document.get("apiVersion"), document.get("kind"))
        if pair not in KNOWN_KINDS:
            problems.append("%s: unknown apiVersion/kind %s/%s (expected one of %s)"
                            % (where, pair[0], pair[1],
                               ", ".join("%s %s" % known for known in sorted(KNOWN_KINDS))))
            continue
        name = _require(document, where, problems, "metadata.name", str)
        if name is not None and not _DNS_LABEL.match(name):
            problems.append("%s: metadata.name %r is not a DNS-1123 label" % (where, name))
        where = "%s (%s %s)" % (where, pair[1], name)
        if pair[1] == "Service":
            _check_service(document, where, problems)
            if _get(document, "spec.clusterIP") == "None":
                services[name] = document
    for number, document in enumerate(documents):
        if not isinstance(document, dict):
            continue
        where = "%s document %d (%s %s)" % (source, number, document.get("kind"),
                                            _get(document, "metadata.name"))
        if document.get("kind") == "Job" and document.get("apiVersion") == "batch/v1":
            _check_job(document, where, problems, services)
        elif document.get("kind") == "MPIJob":
            _check_mpijob(document, where, problems)
    return problems
