"""Serve an ASGI app with uvicorn in a background thread, on a free 127.0.0.1 port (browser tests).

The listening socket is bound here (port 0: the OS picks a free port) and handed to uvicorn, so
there is no window in which another process could take the port between choosing and binding it.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from types import TracebackType

import uvicorn
from starlette.types import ASGIApp


class BackgroundServer:
    """`with BackgroundServer(app) as server:` serves `app` at `server.url` until the block ends.

    The app's lifespan runs (models load) before `__enter__` returns; a startup failure raises.
    """

    def __init__(self, app: ASGIApp, host: str = "127.0.0.1", startup_timeout: float = 60.0):
        self.app = app
        self.host = host
        self.startup_timeout = startup_timeout
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> BackgroundServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, lifespan="on", log_level="warning", access_log=False)
        self._server = server = uvicorn.Server(config)

        def run() -> None:
            try:
                # Not the main thread: uvicorn leaves signal handlers alone here.
                asyncio.run(server.serve(sockets=[sock]))
            except BaseException as e:  # reported to the test thread by __enter__
                self._error = e
            finally:
                sock.close()

        self._thread = threading.Thread(target=run, name=f"uvicorn-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self.startup_timeout
        while not server.started:
            if self._error is not None or not self._thread.is_alive():
                raise RuntimeError(f"test server failed to start: {self._error!r}")
            if time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise TimeoutError(f"test server not up after {self.startup_timeout} s")
            time.sleep(0.02)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
