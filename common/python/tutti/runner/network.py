"""Where the rendezvous store listens and which interface Gloo uses.

The store must be reachable by every worker and by nothing else that need not reach it:
a job on this host alone uses loopback; a multi-host job uses the address of the chosen
--network-interface, or else the address this host uses to reach the first remote host.
"""

import fcntl
import socket
import struct

from .errors import UsageError

LOOPBACK_ADDRESS = "127.0.0.1"
_SIOCGIFADDR = 0x8915


def interface_ipv4(name):
    """The IPv4 address of network interface `name`, or None when it has none."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("256s", name.encode()[:15])
        try:
            answer = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, request)
        except OSError:
            return None
    return socket.inet_ntoa(answer[20:24])


def interface_names():
    return [name for _, name in socket.if_nameindex()]


def interface_of(address):
    """Name of the interface that holds IPv4 `address`, or None."""
    for name in interface_names():
        if interface_ipv4(name) == address:
            return name
    return None


def _route_source_address(remote_address):
    """The local address the kernel would use to talk to `remote_address` (no packet sent)."""
    family = socket.AF_INET6 if ":" in remote_address else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((remote_address, 9))
        except OSError as exc:
            raise UsageError("no route to host address %s: %s" % (remote_address, exc.strerror))
        return probe.getsockname()[0]


def _first_present(network_interfaces):
    """The first of the comma-separated interface names that this host has."""
    present = interface_names()
    wanted = network_interfaces.split(",")
    for name in wanted:
        if name in present:
            return name
    raise UsageError("--network-interface %s: no such interface (this host has: %s)"
                     % (network_interfaces, ", ".join(present)))


def choose(network_interface, remote_addresses, master_address=None):
    """(listen address, Gloo interface name or None) for the store and the workers.

    `network_interface` holds one or more interface names joined by commas (the first
    that this host has is used); `remote_addresses` one resolved address per remote host,
    empty for a local job; `master_address`, when given, is where the store must listen.
    """
    interface = _first_present(network_interface) if network_interface else None
    if master_address:
        return master_address, interface or interface_of(master_address)
    if interface:
        if not remote_addresses:
            return LOOPBACK_ADDRESS, interface
        address = interface_ipv4(interface)
        if address is None:
            raise UsageError("--network-interface %s has no IPv4 address" % interface)
        return address, interface
    if not remote_addresses:
        return LOOPBACK_ADDRESS, interface_of(LOOPBACK_ADDRESS) or "lo"
    address = _route_source_address(remote_addresses[0])
    return address, interface_of(address)
