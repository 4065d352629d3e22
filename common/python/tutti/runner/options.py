"""tuttirun's command line and config file, merged into one settings namespace.

Precedence: command-line flags, then the --config-file, then the defaults below.
horovodrun's spellings are accepted too (-p, -i, -cb, -hostfile, -v, the --no-* switches,
--network-interfaces, Horovod's sectioned config file); docs/tuttirun.md lists them.
"""

import argparse
import os
import shlex

from . import config_sections, tuning
from .elastic import options as elastic_options
from .errors import UsageError

DEFAULT_START_TIMEOUT_SECONDS = 30

DEFAULT_STOP_GRACE_SECONDS = 3.0

# Launcher settings that are not core tuning: dest -> default.
_DEFAULTS = {
    "np": None,
    "hosts": None,
    "hostfile": None,
    "gloo": False,
    "mpi": False,
    "network_interface": None,  # one name, or several joined by commas
    "master_host": None,
    "master_port": None,
    "cluster_master": None,  # the config file's first cluster master: Gloo's default -hm
    "short_port": None,  # -p: the master port with a master host, else the ssh port
    "start_timeout": None,
    "tcp": False,
    "prefix_output_with_timestamp": False,
    "disable_cache": False,
    "output_filename": None,
    "verbose": False,
    "check_build": False,
    "config_file": None,
    "ssh_port": None,
    "ssh_identity_file": None,
    "mpi_args": None,
    "stop_grace_seconds": DEFAULT_STOP_GRACE_SECONDS,
    "command": [],
}
_DEFAULTS.update(elastic_options.DEFAULTS)

# Settings the config file may not hold (they only make sense on a command line).
_COMMAND_LINE_ONLY = {"command", "config_file", "check_build", "short_port", "version"}


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises UsageError instead of printing usage and exiting."""

    def error(self, message):
        raise UsageError(message)


def _checked(converter, flag):
    """Wraps a converter so argparse reports its UsageError text against `flag`."""
    def convert(text):
        try:
            return converter(text)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = flag
    return convert


def positive_int(text):
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise UsageError("%r is not an integer" % (text,)) from None
    if value < 1:
        raise UsageError("must be at least 1, not %d" % value)
    return value


def port(text):
    value = positive_int(text)
    if value > 65535:
        raise UsageError("%d is not a TCP port" % value)
    return value


class _InterfacesAction(argparse.Action):
    """--network-interface(s): a comma list, may be repeated; keeps first-seen order."""

    def __call__(self, parser, namespace, values, option_string=None):
        names = [n for n in (getattr(namespace, self.dest, None) or "").split(",") if n]
        for name in values.split(","):
            name = name.strip()
            if not name:
                raise UsageError("%s %r: empty interface name" % (option_string, values))
            if name not in names:
                names.append(name)
        setattr(namespace, self.dest, ",".join(names))


def _version():
    from .check_build import core_version

    return "tutti v%s" % core_version()


def build_parser():
    parser = _Parser(
        prog="tuttirun",
        usage="tuttirun -np N [-H host1:slots,host2:slots | --hostfile FILE] [--gloo | --mpi] "
              "[options] COMMAND [ARGS...]",
        description="Launch a tutti job: COMMAND runs once per rank, under Gloo (default; "
                    "tuttirun hosts the rendezvous store and starts the workers) or MPI "
                    "(tuttirun builds and runs mpirun).",
        argument_default=argparse.SUPPRESS,
        allow_abbrev=False,
    )
    parser.add_argument("-v", "--version", action="version", version=_version(),
                        help="show tutti's version and exit")
    job = parser.add_argument_group("job")
    job.add_argument("-np", "--num-proc", dest="np", type=_checked(positive_int, "-np"),
                     metavar="N", help="number of processes (default: all slots of -H)")
    hosts = job.add_mutually_exclusive_group()
    hosts.add_argument("-H", "--hosts", dest="hosts", metavar="HOST:SLOTS,...",
                       help="hosts and their slots, e.g. host1:4,host2:4 (default: this host)")
    hosts.add_argument("-hostfile", "--hostfile", dest="hostfile", metavar="FILE",
                       help="file with one `host slots=N` per line")
    mode = job.add_mutually_exclusive_group()
    mode.add_argument("--gloo", action="store_true", help="Gloo controller (the default)")
    mode.add_argument("--mpi", action="store_true", help="MPI controller: run through mpirun")
    job.add_argument("-hm", "--master-host", metavar="HOST",
                     help="Gloo: the master host, an address of this machine where the "
                          "rendezvous store listens (default: chosen by tuttirun)")
    job.add_argument("--master-port", type=_checked(port, "--master-port"), metavar="PORT",
                     help="Gloo: the rendezvous store's port on the master host (default: "
                          "a free one)")
    job.add_argument("-p", dest="short_port", type=_checked(port, "-p"), metavar="PORT",
                     help="--master-port when a master host is given, else --ssh-port "
                          "(horovodrun's -p)")
    job.add_argument("--network-interface", "--network-interfaces", dest="network_interface",
                     action=_InterfacesAction, metavar="IFACE[,IFACE...]",
                     help="interfaces for the store and Gloo traffic (sets TUTTI_GLOO_IFACE "
                          "to the first this host has); may be repeated")
    job.add_argument("--output-filename", metavar="DIR",
                     help="also write each rank's output to DIR/rank.<r>/stdout and stderr")
    job.add_argument("-prefix-timestamp", "--prefix-output-with-timestamp",
                     dest="prefix_output_with_timestamp", action="store_true",
                     help="start each line of the ranks' output with the time")
    job.add_argument("--config-file", metavar="FILE",
                     help="YAML file with settings: long flag names, or horovodrun's sections")
    job.add_argument("--verbose", action="store_true",
                     help="show the commands run and the variables set (secrets masked)")
    job.add_argument("-cb", "--check-build", action="store_true",
                     help="show available frameworks, controllers and tensor operations")
    job.add_argument("--ssh-port", type=_checked(port, "--ssh-port"), metavar="PORT",
                     help="ssh port of the remote hosts")
    job.add_argument("-i", "--ssh-identity-file", metavar="FILE", help="ssh private key")
    job.add_argument("--start-timeout", type=_checked(positive_int, "--start-timeout"),
                     metavar="S", help="bound on looking up the hosts and on each ssh "
                                       "connection (default: $HOROVOD_START_TIMEOUT or %d)"
                                       % DEFAULT_START_TIMEOUT_SECONDS)
    job.add_argument("--disable-cache", action="store_true",
                     help="accepted for horovodrun: tuttirun keeps no cache of start-up "
                          "checks (see --disable-response-cache for the core's cache)")
    job.add_argument("--tcp", action="store_true",
                     help="TCP only: sets NCCL_IB_DISABLE=1 for every rank")
    job.add_argument("--mpi-args", metavar="'ARGS'", help="extra arguments for mpirun")
    job.add_argument("--stop-grace-seconds", metavar="S",
                     type=_checked(tuning.non_negative_float, "--stop-grace-seconds"),
                     help="time between SIGTERM and SIGKILL when stopping ranks (default %g)"
                          % DEFAULT_STOP_GRACE_SECONDS)
    elastic_options.add_arguments(parser, _checked, positive_int)
    core = parser.add_argument_group("core tuning (each sets a TUTTI_* variable)")
    spellings = {}
    for flag, (name, value) in tuning.SWITCH_SPELLINGS.items():
        spellings.setdefault(name, []).append((flag, value))
    for item in tuning.TUNINGS:
        help_text = "%s [%s]" % (item.help, item.variable)
        if item.kind is None:
            # A switch and its other spellings exclude each other on one command line.
            group = core.add_mutually_exclusive_group()
            group.add_argument(item.flag, action="store_true", help=help_text)
            for flag, value in spellings.get(tuning.dest(item.flag), ()):
                group.add_argument(flag, dest=tuning.dest(item.flag), action="store_const",
                                   const=value, help=argparse.SUPPRESS)
        else:
            core.add_argument(item.flag, type=_checked(item.kind, item.flag), help=help_text,
                              metavar=item.metavar)
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="COMMAND",
                        help="the program each rank runs, with its arguments")
    return parser


def _config_actions(parser):
    """dest -> argparse action for every setting a config file may hold."""
    actions = {}
    for action in parser._actions:
        if action.dest in _COMMAND_LINE_ONLY or action.dest == "help":
            continue
        if type(action) is argparse._StoreConstAction:
            continue  # --no-autotune and the like: the file says `autotune: false`
        actions[action.dest] = action
        for option in action.option_strings:
            if option.startswith("--"):
                actions[tuning.dest(option)] = action
    return actions


def _load_yaml(path):
    import yaml

    try:
        with open(path) as handle:
            data = yaml.safe_load(handle)
    except OSError as exc:
        raise UsageError("cannot read config file %s: %s" % (path, exc.strerror or exc)) from None
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise UsageError("config file %s is not valid YAML: %s" % (path, detail)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError("config file %s must hold a mapping of settings, not %s"
                         % (path, type(data).__name__))
    return data


def _config_value(action, key, value, path):
    where = "config file %s: %s" % (path, key)
    if isinstance(action, argparse._StoreTrueAction):
        if not isinstance(value, bool):
            raise UsageError("%s must be true or false, not %r" % (where, value))
        return value
    if action.dest in ("hosts", "network_interface") and isinstance(value, list):
        value = ",".join(str(item) for item in value)
    if isinstance(value, (dict, list, bool)) or value is None:
        raise UsageError("%s: %r is not a valid value" % (where, value))
    if action.type is None:
        return str(value)
    try:
        return action.type(str(value))
    except argparse.ArgumentTypeError as exc:
        raise UsageError("%s: %s" % (where, exc)) from None


def read_config_file(parser, path):
    """Settings from a YAML config file, keyed by settings attribute."""
    actions = _config_actions(parser)
    settings = {}
    flat = config_sections.flatten(_load_yaml(path), path)
    if config_sections.CLUSTER_MASTER in flat:
        settings[config_sections.CLUSTER_MASTER] = flat.pop(config_sections.CLUSTER_MASTER)
    for key, value in flat.items():
        name = str(key).replace("-", "_").lstrip("_")
        action = actions.get(name)
        if action is None:
            raise UsageError("config file %s: unknown setting %r" % (path, key))
        settings[action.dest] = _config_value(action, key, value, path)
    if settings.get("gloo") and settings.get("mpi"):
        raise UsageError("config file %s: gloo and mpi cannot both be true" % path)
    return settings


def _resolve_ports(merged):
    """Gives -p its meaning and checks the master host's settings."""
    if not merged["master_host"] and not merged["mpi"]:
        merged["master_host"] = merged["cluster_master"]
    if merged["short_port"] is not None:
        target = "master_port" if merged["master_host"] else "ssh_port"
        if merged[target] not in (None, merged["short_port"]):
            raise UsageError("-p %d and --%s %d disagree"
                             % (merged["short_port"], target.replace("_", "-"), merged[target]))
        merged[target] = merged["short_port"]
    if merged["master_port"] is not None and not merged["master_host"]:
        raise UsageError("--master-port needs a master host (-hm HOST)")
    if merged["master_host"] and merged["mpi"]:
        raise UsageError("-hm/--master-host places the rendezvous store of Gloo mode; with "
                         "--mpi, mpirun does the rendezvous (drop -hm or use --gloo)")


def _start_timeout(merged):
    if merged["start_timeout"] is not None:
        return merged["start_timeout"]
    for name in ("TUTTI_START_TIMEOUT", "HOROVOD_START_TIMEOUT"):
        text = os.environ.get(name)
        if text:
            try:
                return positive_int(text)
            except UsageError as exc:
                raise UsageError("environment variable %s=%r: %s" % (name, text, exc)) from None
    return DEFAULT_START_TIMEOUT_SECONDS


def parse(argv):
    """Parses tuttirun's arguments (and its config file) into one namespace."""
    parser = build_parser()
    given = vars(parser.parse_args(argv))
    merged = dict(_DEFAULTS)
    for item in tuning.TUNINGS:
        merged[tuning.dest(item.flag)] = None
    if given.get("config_file"):
        from_file = read_config_file(parser, given["config_file"])
        # A mode chosen on the command line replaces the file's, whichever it was.
        if "gloo" in given or "mpi" in given:
            from_file.pop("gloo", None)
            from_file.pop("mpi", None)
        if "hosts" in given or "hostfile" in given:
            from_file.pop("hosts", None)
            from_file.pop("hostfile", None)
        merged.update(from_file)
    merged.update(given)
    if merged["hosts"] and merged["hostfile"]:
        raise UsageError("use either -H or --hostfile, not both")
    if merged["command"] and merged["command"][0] == "--":
        merged["command"] = merged["command"][1:]
    elastic_options.check(merged)
    if merged["mpi_args"]:
        try:
            merged["mpi_args"] = shlex.split(merged["mpi_args"])
        except ValueError as exc:
            raise UsageError("--mpi-args: %s" % exc) from None
    _resolve_ports(merged)
    merged["start_timeout"] = _start_timeout(merged)
    settings = argparse.Namespace(**merged)
    tuning.check_supported(settings)
    return settings
