"""searchlab's web app served from a thread on a fixed port, which a test can take down and bring back (the web
process restarted, or unreachable, while a trainer reports to it)."""

from __future__ import annotations

import socket
import threading
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from django.core.wsgi import get_wsgi_application
from django.db import connections


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def _app():  # type: ignore[no-untyped-def]
    django_app = get_wsgi_application()

    def app(environ, start_response):  # type: ignore[no-untyped-def]
        try:
            return django_app(environ, start_response)
        finally:
            connections.close_all()  # each request thread closes its own database connection

    return app


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RestartableServer:
    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._server = make_server("127.0.0.1", self.port, _app(), server_class=_Server, handler_class=_Quiet)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})
        self._thread.daemon = True
        self._thread.start()

    def stop(self) -> None:
        """Down: the port refuses connections until :meth:`start`."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            assert self._thread is not None
            self._thread.join(timeout=5)
        self._server = None
