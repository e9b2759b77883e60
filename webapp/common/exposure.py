"""Start-up checks for a process reachable beyond the machine: no ``DEBUG``, no development secret.

Read by ``webapp/settings.py`` before Django starts (standard library only). A development process without
``SECRET_KEY`` uses a random key made once and kept in ``VAR_DIR/secret_key`` (:func:`stored_secret_key`), so no
two installations share a signing key and an ingest token cannot be forged with a key read off the source.

A process refuses to start (:func:`exposure_problem`) when it is a deployment (``SEARCHLAB_ENV=production``) or
is bound beyond loopback — the address of ``manage.py runserver|demo ADDR:PORT``, gunicorn's ``--bind``,
``DEMO_ADDR`` or ``SEARCHLAB_BIND`` is not 127.x, ``localhost`` or ``::1`` — while ``DEBUG`` is on or
``SECRET_KEY`` is the development key that older versions hard-coded.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

# The key older versions used when SECRET_KEY was unset: public, so anything signed with it can be forged.
DEVELOPMENT_SECRET_KEY = "insecure-development-key-never-use-in-production"
_SERVING_COMMANDS = ("runserver", "demo")


def stored_secret_key(path: Path) -> str:
    """The key kept in ``path``, made (random, 64 URL-safe characters, readable by the owner only) on first use."""
    try:
        key = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        key = ""
    if key:
        return key
    path.parent.mkdir(parents=True, exist_ok=True)
    candidate = secrets.token_urlsafe(48)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process of the same start made it first: use theirs
        return path.read_text(encoding="ascii").strip() or stored_secret_key(path)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(candidate + "\n")
    return candidate


def is_loopback(address: str) -> bool:
    """Whether ``address`` (``host``, ``host:port``, ``[v6]:port`` or a bare port) is reachable from this machine
    only. A bare port (``8000``) or ``:8000`` is runserver's default host, 127.0.0.1.

    >>> [is_loopback(a) for a in ("127.0.0.1:8000", "localhost:80", "[::1]:8000", "8000", "0.0.0.0:8080", "::")]
    [True, True, True, True, False, False]
    """
    address = address.strip()
    if address.startswith("unix:"):
        return True  # a socket file: reachable through the file system only
    if address.startswith("["):
        host = address[1 : address.find("]")] if "]" in address else address[1:]
    elif address.count(":") == 1:
        host = address.rsplit(":", 1)[0]
    elif address.isdigit():
        host = ""
    else:
        host = address
    if not host:
        return True
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name other than localhost: it resolves to who knows what


def _gunicorn_binds(args: Sequence[str]) -> list[str]:
    binds = []
    for i, arg in enumerate(args):
        if arg in ("--bind", "-b") and i + 1 < len(args):
            binds.append(args[i + 1])
        elif arg.startswith("--bind="):
            binds.append(arg.split("=", 1)[1])
        elif arg.startswith("-b") and len(arg) > 2:
            binds.append(arg[2:])
    return binds


def bind_addresses(argv: Sequence[str], environ: Mapping[str, str]) -> list[str]:
    """The addresses this process serves on, as far as they can be told at start-up."""
    addresses = [environ[name] for name in ("DEMO_ADDR", "SEARCHLAB_BIND") if environ.get(name, "").strip()]
    args = list(argv[1:])
    if args and args[0] in _SERVING_COMMANDS:  # manage.py runserver|demo [ADDR:PORT]
        rest = [a for a in args[1:] if not a.startswith("-")]
        addresses.append(rest[0] if rest else "127.0.0.1:8000")
    if argv and "gunicorn" in Path(argv[0]).parts[-2:]:  # .../bin/gunicorn, or python -m gunicorn
        addresses += _gunicorn_binds(args) or ["127.0.0.1:8000"]
    addresses += _gunicorn_binds(shlex.split(environ.get("GUNICORN_CMD_ARGS", "")))
    return addresses


def exposure_problem(
    *, production: bool, debug: bool, secret_key: str, addresses: Sequence[str]
) -> str | None:
    """Why this process must not start (a message saying what to set), or ``None``."""
    exposed = [a for a in addresses if not is_loopback(a)]
    if not production and not exposed:
        return None
    where = (
        f"bound to {', '.join(exposed)} (beyond loopback)"
        if exposed
        else "a deployment (SEARCHLAB_ENV=production)"
    )
    if secret_key == DEVELOPMENT_SECRET_KEY:
        return (
            f"searchlab refuses to start {where} with the development SECRET_KEY, which is public: anyone could "
            "forge its ingest tokens and sessions. Set SECRET_KEY to a long random value (python -c 'import "
            "secrets; print(secrets.token_urlsafe(48))'), or bind to 127.0.0.1."
        )
    if debug:
        return (
            f"searchlab refuses to start {where} with DEBUG on, which shows settings and code to any visitor. "
            "Set DEBUG=0 (and ALLOWED_HOSTS to the host names it is reached by), or bind to 127.0.0.1."
        )
    return None
