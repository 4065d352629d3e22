"""tuttirun's command line and config file, merged into one settings namespace.

Precedence: command-line flags, then the --config-file, then the defaults below.
"""

import argparse
import shlex

from . import tuning
from .elastic import options as elastic_options
from .errors import UsageError

DEFAULT_STOP_GRACE_SECONDS = 3.0

# Launcher settings that are not core tuning: dest -> default.
_DEFAULTS = {
    "np": None,
    "hosts": None,
    "hostfile": None,
    "gloo": False,
    "mpi": False,
    "network_interface": None,
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
_COMMAND_LINE_ONLY = {"command", "config_file", "check_build"}


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
    job = parser.add_argument_group("job")
    job.add_argument("-np", "--num-proc", dest="np", type=_checked(positive_int, "-np"),
                     metavar="N", help="number of processes (default: all slots of -H)")
    hosts = job.add_mutually_exclusive_group()
    hosts.add_argument("-H", "--hosts", dest="hosts", metavar="HOST:SLOTS,...",
                       help="hosts and their slots, e.g. host1:4,host2:4 (default: this host)")
    hosts.add_argument("--hostfile", dest="hostfile", metavar="FILE",
                       help="file with one `host slots=N` per line")
    mode = job.add_mutually_exclusive_group()
    mode.add_argument("--gloo", action="store_true", help="Gloo controller (the default)")
    mode.add_argument("--mpi", action="store_true", help="MPI controller: run through mpirun")
    job.add_argument("--network-interface", metavar="IFACE",
                     help="interface for the store and Gloo traffic (sets TUTTI_GLOO_IFACE)")
    job.add_argument("--output-filename", metavar="DIR",
                     help="also write each rank's output to DIR/rank.<r>/stdout and stderr")
    job.add_argument("--config-file", metavar="FILE",
                     help="YAML file with settings; keys are long flag names")
    job.add_argument("--verbose", action="store_true",
                     help="show the commands run and the variables set (secrets masked)")
    job.add_argument("--check-build", action="store_true",
                     help="show available frameworks, controllers and tensor operations")
    job.add_argument("--ssh-port", type=_checked(port, "--ssh-port"), metavar="PORT",
                     help="ssh port of the remote hosts")
    job.add_argument("--ssh-identity-file", metavar="FILE", help="ssh private key")
    job.add_argument("--mpi-args", metavar="'ARGS'", help="extra arguments for mpirun")
    job.add_argument("--stop-grace-seconds", metavar="S",
                     type=_checked(tuning.non_negative_float, "--stop-grace-seconds"),
                     help="time between SIGTERM and SIGKILL when stopping ranks (default %g)"
                          % DEFAULT_STOP_GRACE_SECONDS)
    elastic_options.add_arguments(parser, _checked, positive_int)
    core = parser.add_argument_group("core tuning (each sets a TUTTI_* variable)")
    for item in tuning.TUNINGS:
        help_text = "%s [%s]" % (item.help, item.variable)
        if item.kind is None:
            core.add_argument(item.flag, action="store_true", help=help_text)
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
    if action.dest == "hosts" and isinstance(value, list):
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
    for key, value in _load_yaml(path).items():
        name = str(key).replace("-", "_").lstrip("_")
        action = actions.get(name)
        if action is None:
            raise UsageError("config file %s: unknown setting %r" % (path, key))
        settings[action.dest] = _config_value(action, key, value, path)
    if settings.get("gloo") and settings.get("mpi"):
        raise UsageError("config file %s: gloo and mpi cannot both be true" % path)
    return settings


def parse(argv):
    """Parses tuttirun's arguments (and its config file) into one namespace."""
    parser = build_parser()
    given = vars(parser.parse_args(argv))
    merged = dict(_DEFAULTS)
    for item in tuning.TUNINGS:
        merged[tuning.dest(item.flag)] = None if item.kind else False
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
    return argparse.Namespace(**merged)
