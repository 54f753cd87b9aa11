"""Joining a Ray cluster, or starting a local one: every failure is one clear line."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
from typing import Any, Iterator

from coral_core.errors import UserError

log = logging.getLogger(__name__)

CONNECT_SECONDS = 10.0  # to reach a cluster's address before Ray's own (long) retries
# A local Ray's raylet connects to its own object store, started on another thread, at
# once, and when that thread is not listening yet it tries again a second later (Ray's
# defaults: 10 tries, 1000 ms apart; the "timeout" is the pause), a whole second of about a
# third of starts here. The same 10 s in 20 ms steps, as Ray's `_system_config` (documented
# for testing; every process of that Ray reads it from the GCS; Ray refuses it when joining
# a cluster, and its C++ side refuses a key it does not know: both are in Ray 2.40-2.60).
LOCAL_RAY_CONFIG = {"raylet_client_connect_timeout_milliseconds": 20,
                    "raylet_client_num_connect_attempts": 500}
TOKEN_NOTICE_LOGGER = "ray._private.authentication.authentication_token_setup"


def _token_auth() -> None:
    """Ray (2.52 on) starts clusters with token authentication, but a driver joining one
    sends its token only in token mode: where a token is at hand (RAY_AUTH_TOKEN,
    RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token) and the user set no mode, use it."""
    if "RAY_AUTH_MODE" in os.environ:
        return
    at_hand = (os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH")
               or os.path.exists(os.path.expanduser("~/.ray/auth_token")))
    if not at_hand:
        return
    try:  # sets the mode and refreshes an already imported Ray's configuration
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available)
    except ImportError:  # no Ray (the caller says so), or an older one without tokens
        return
    try:
        maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    except Exception as error:  # a private API: never worse than joining without a token
        log.debug("could not enable Ray token authentication: %s", error)


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UserError("--executor ray needs Ray: pip install 'coral-engine[ray]' (on the "
                        "driver and on every node of the cluster)") from None
    except Exception as error:  # Ray reads its settings (RAY_*) from the environment on import
        settings = sorted(name for name in os.environ if name.startswith("RAY_"))
        hint = f" (check {', '.join(settings)})" if settings else ""
        said = (str(error).strip().splitlines() or [""])[-1]
        raise UserError(f"Ray could not be imported: {type(error).__name__}: {said}"
                        f"{hint}") from None
    return ray


def check_address(address: str) -> None:
    """An address that cannot be one, refused without the network (by `--dry-run` too)."""
    blank = any(c.isspace() for c in address)
    if address in ("auto", "local") or (
            "://" in address and address.split("://", 1)[1] and not blank):
        return
    host, port = split_address(address)
    inner = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if (not inner or "[" in inner or "]" in inner or (":" in inner and inner == host)
            or blank or not port.isascii() or not port.isdigit() or len(port) > 5
            or not 0 < int(port) < 65536):  # an IPv6 host in brackets: [::1]:6379
        raise UserError(f"--ray-address '{address}' is not HOST:PORT (a port from 1 to "
                        "65535), ray://HOST:PORT or auto")


def split_address(address: str) -> tuple[str, str]:
    """(HOST, PORT) of HOST:PORT, the host as written ([::1] keeps its brackets)."""
    host, _, port = address.rpartition(":")
    return host, port


def _reachable(address: str) -> None:
    """A host:port address that nothing answers on fails now, in seconds, with its cause."""
    check_address(address)
    if address in ("auto", "local") or "://" in address:
        return
    host, port = split_address(address)
    try:
        with socket.create_connection((host.removeprefix("[").removesuffix("]"), int(port)),
                                      timeout=CONNECT_SECONDS) as probe:  # [::1]:6379 too
            speaks = _speaks_grpc(probe)
    except OSError as error:
        raise UserError(f"cannot reach the Ray cluster at {address}: "
                        f"{error.strerror or error}") from None
    if not speaks:  # else ray.init retries it for minutes, logging each try
        raise UserError(f"{address} answers, but not as a Ray cluster (its GCS speaks gRPC; "
                        "this port does not): is it the head node's GCS port (6379 by "
                        "default)?")


def _auto_address() -> str | None:
    """The HOST:PORT `--ray-address auto` means (RAY_ADDRESS, or the cluster the last
    `ray start` on this machine recorded), or None where Ray finds none (it says so)."""
    from ray._private.services import canonicalize_bootstrap_address

    try:
        found = canonicalize_bootstrap_address("auto")
    except Exception:  # Ray's own error, raised again by ray.init, is clearer
        return None
    return bracketed(found) if found else None


def bracketed(address: str) -> str:
    """HOST:PORT with an IPv6 host in its brackets, as `check_address` reads it (Ray
    writes the one a `ray start` recorded without them: ::1:6379)."""
    host, port = split_address(address)
    if ":" in host and not host.startswith("["):
        return f"[{host}]:{port}"
    return address


# An HTTP/2 client's opening (the preface and an empty SETTINGS frame): a gRPC server
# answers with a SETTINGS frame of its own (frame type 4, the fourth byte of its header).
_H2_OPENING = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def _speaks_grpc(connection: socket.socket) -> bool:
    try:
        connection.sendall(_H2_OPENING)
        header = b""
        while len(header) < 9:
            part = connection.recv(9 - len(header))
            if not part:
                return False
            header += part
    except (socket.timeout, OSError):
        return False
    return header[3] == 4


def coral_environment() -> dict[str, str]:
    """What Coral's own settings are on the driver (CORAL_*), for every actor: a node of a
    cluster does not share the driver's environment. Each actor is given them (`adopt`),
    not the job's runtime environment: Ray starts a fresh worker process for an actor of a
    job with environment variables of its own instead of taking one it has started ahead,
    0.55 s of every run here. The driver's test key goes with them (hosted/draws.py):
    a check's test draws the same inputs on every node."""
    from coral_core.hosted.draws import KEY_VARIABLE, key

    found = {k: v for k, v in os.environ.items() if k.startswith("CORAL_")}
    found.setdefault(KEY_VARIABLE, key())
    return found


def adopt(environment: dict[str, str] | None) -> None:
    """In an actor, first: the driver's Coral settings (coral_environment), for all that
    it runs and starts."""
    os.environ.update(environment or {})


@contextlib.contextmanager
def _own_sigterm() -> Iterator[None]:
    """Coral's SIGTERM handler (cli/app.py: a stop ends a run as Ctrl-C does, resumable)
    back after `ray.init`, whose core installs its own below Python's: a `kill` of the
    driver aborted with Ray's stack dump, exit status 134, and no resume line."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    ours = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        if callable(ours):
            signal.signal(signal.SIGTERM, ours)


def connect(address: str) -> bool:
    """Join the cluster at `address`, or start a local Ray with this machine's CPUs when
    it is empty. True when this process started Ray (and must shut it down)."""
    # Ray's "Token authentication is enabled..." on every start, twice on a terminal, and
    # on joining a cluster: what it says is in docs/ray.md, and a failure to authenticate
    # is an error of its own.
    logging.getLogger(TOKEN_NOTICE_LOGGER).setLevel(logging.ERROR)
    if address:
        _reachable(address)
        _token_auth()
    ray = import_ray()
    if ray.is_initialized():
        return False
    if address == "auto":  # the cluster Ray would join: one `ray start` left may be gone
        _reachable(_auto_address() or "auto")
    options: dict[str, Any] = {
        "include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING,
    }
    if address in ("", "local"):  # Ray writes into its config: a copy
        options["num_cpus"] = os.cpu_count() or 1
        options["_system_config"] = dict(LOCAL_RAY_CONFIG)
    try:
        # "local": a Ray of our own, as documented, even where `ray start` left a cluster
        # running on this machine or RAY_ADDRESS names one (Ray would join that, and then
        # refuse num_cpus); joining one is `--ray-address auto` or HOST:PORT
        with _own_sigterm():
            ray.init(address=address or "local", **options)
    except Exception as error:  # Ray raises many kinds here; each is one line for the user
        where = f"the Ray cluster at {address}" if address else "a local Ray"
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        hint = (" (a cluster with token authentication needs its token here: RAY_AUTH_TOKEN "
                "or ~/.ray/auth_token; see docs/ray.md)" if address else "")
        raise UserError(f"cannot start or join {where}: {first}{hint}") from None
    log.info("Ray %s: %s", ray.__version__, ray.cluster_resources())
    return True


def shutdown(ray: Any) -> None:
    """Stop the local Ray this process started. Ray stops its processes one at a time and
    gives each a second to end on SIGTERM; its autoscaler monitor, which a local Ray starts
    and nothing here uses, always takes the whole second: it is killed first."""
    try:
        node = ray._private.worker._global_node
        for info in (node.all_processes.get("monitor") or []) if node is not None else []:
            info.process.kill()
            info.process.wait(timeout=CONNECT_SECONDS)
    except Exception as error:  # a private API: never worse than Ray's own shutdown
        log.debug("could not stop Ray's monitor first: %s", error)
    ray.shutdown()
