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


def choose(network_interface, remote_addresses):
    """(listen address, Gloo interface name or None) for the store and the workers.

    `remote_addresses` holds one resolved address per remote host; empty for a local job.
    """
    if network_interface:
        if network_interface not in interface_names():
            raise UsageError("--network-interface %s: no such interface (this host has: %s)"
                             % (network_interface, ", ".join(interface_names())))
        if not remote_addresses:
            return LOOPBACK_ADDRESS, network_interface
        address = interface_ipv4(network_interface)
        if address is None:
            raise UsageError("--network-interface %s has no IPv4 address" % network_interface)
        return address, network_interface
    if not remote_addresses:
        return LOOPBACK_ADDRESS, interface_of(LOOPBACK_ADDRESS) or "lo"
    address = _route_source_address(remote_addresses[0])
    return address, interface_of(address)
