"""The standalone Search-R1-compatible retrieval server: ``python -m retrieval.server --index PATH``.

Training scripts of Search-R1, HiPRAG and AutoSearch point their ``retriever.url`` at
``http://127.0.0.1:8000/retrieve``. Requests are read as Search-R1's FastAPI server reads them and a batch of any
size is answered (:func:`retrieval.api.handle_retrieve`); a body that is not JSON, or fails validation, gets 422. Standard library only on the HTTP side: a ThreadingHTTPServer, one thread per
connection, HTTP/1.1 keep-alive, and concurrent requests batched into one encode + search
(:class:`~retrieval.batching.BatchingSearcher`). ``GET /health`` describes the loaded index.
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
from dataclasses import asdict
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from retrieval.api import error_reply, handle_retrieve, retrieve_status
from retrieval.batching import BatchingSearcher
from retrieval.searcher import Searcher
from scoring.observations import RETRIEVE_DEFAULT_TOPK, RETRIEVE_PATH

logger = logging.getLogger(__name__)
MAX_BODY_BYTES = 16 << 20
HEALTH_PATH = "/health"


class RetrievalServer(ThreadingHTTPServer):
    daemon_threads = True  # a stuck client never blocks shutdown
    request_queue_size = 128

    def __init__(
        self,
        address: tuple[str, int],
        searcher: Searcher,
        *,
        default_topk: int = RETRIEVE_DEFAULT_TOPK,
        info: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(address, _Handler)
        self.searcher = searcher
        self.default_topk = default_topk
        self.info = info or {}

    def server_close(self) -> None:
        super().server_close()
        if isinstance(self.searcher, BatchingSearcher):
            self.searcher.close()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: RetrievalServer

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] == HEALTH_PATH:
            self._reply(HTTPStatus.OK, {"status": "ok", **self.server.info})
        else:
            self._reply(HTTPStatus.NOT_FOUND, error_reply(f"no such path {self.path}", status=404))

    def do_POST(self) -> None:
        if self.path.split("?", 1)[0] != RETRIEVE_PATH:
            self._reply(HTTPStatus.NOT_FOUND, error_reply(f"no such path {self.path}", status=404))
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            self._reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, error_reply("body too large", status=413))
            return
        try:
            payload = json.loads(self.rfile.read(length) or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError) as error:  # FastAPI's json_invalid: 422
            self._reply(HTTPStatus.UNPROCESSABLE_ENTITY, error_reply(f"the body is not JSON: {error}"))
            return
        try:
            reply = handle_retrieve(self.server.searcher, payload, default_topk=self.server.default_topk)
        except Exception as error:
            logger.exception("retrieval failed")
            self._reply(
                HTTPStatus.INTERNAL_SERVER_ERROR, error_reply(f"retrieval failed: {error}", status=500)
            )
            return
        self._reply(retrieve_status(reply), reply)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s " + format, self.address_string(), *args)


def serve_in_thread(
    searcher: Searcher,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    default_topk: int = RETRIEVE_DEFAULT_TOPK,
    batching: bool = True,
) -> RetrievalServer:
    """Start a server on a background thread (port 0: a free one, see ``.url``); stop it with ``.shutdown()``."""
    wrapped: Searcher = BatchingSearcher(searcher) if batching else searcher
    server = RetrievalServer((host, port), wrapped, default_topk=default_topk)
    threading.Thread(target=server.serve_forever, name="retrieval-server", daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> None:
    from retrieval.index import load_index

    parser = argparse.ArgumentParser(prog="python -m retrieval.server", description=__doc__.split("\n")[0])
    parser.add_argument("--index", type=Path, required=True, help="an index folder made by build_index")
    parser.add_argument("--host", default="127.0.0.1", help="0.0.0.0 to serve other machines")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--topk", type=int, default=RETRIEVE_DEFAULT_TOPK, help="for requests whose topk is null"
    )
    parser.add_argument("--corpus", type=Path, help="the corpus file, if it moved since the build")
    parser.add_argument("--faiss-threads", type=int, default=1)
    parser.add_argument("--gpu", action="store_true", help="move a flat/IVF index to all GPUs (faiss-gpu)")
    parser.add_argument("--no-batching", action="store_true", help="search each request on its own thread")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("faiss.loader").setLevel(logging.WARNING)  # it logs every CPU-feature build it probes

    index = load_index(
        args.index, corpus_path=args.corpus, faiss_threads=args.faiss_threads, use_gpu=args.gpu
    )
    searcher: Searcher = index if args.no_batching else BatchingSearcher(index)
    info = {"index": str(args.index), **asdict(index.metadata)}
    server = RetrievalServer((args.host, args.port), searcher, default_topk=args.topk, info=info)
    logger.info(
        "serving %s index of %d passages (%s) on %s%s",
        index.kind, index.metadata.n_passages, index.metadata.encoder, server.url, RETRIEVE_PATH,
    )  # fmt: skip
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
