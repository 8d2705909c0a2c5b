"""A local HTTP endpoint that fails the way AWS and the networks in front of it do: 5xx with an HTML
page, throttling in each protocol's own error shape, a garbage body, and a hang. Reached through
AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_<SERVICE>), so botocore's real HTTP, retry and parser paths run."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HTML_PAGE = b"<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center>" \
            b"<hr><center>nginx</center></body></html>"


class FakeAws:
    """mode: 'error500' | 'throttle' | 'garbage' | 'html' | 'hang'. Counts requests."""

    def __init__(self, mode: str):
        self.mode, self.requests, self.released = mode, 0, threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                fake.requests += 1
                json_protocol = "json" in (self.headers.get("Content-Type") or "")
                if fake.mode == "hang":
                    fake.released.wait(60)
                    return
                if fake.mode == "throttle":
                    if json_protocol:
                        self._send(400, json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"}).encode(),
                                   "application/x-amz-json-1.1", {"x-amzn-ErrorType": "ThrottlingException"})
                    else:
                        self._send(503, b"<?xml version=\"1.0\"?><Response><Errors><Error><Code>RequestLimitExceeded"
                                        b"</Code><Message>Request limit exceeded.</Message></Error></Errors>"
                                        b"<RequestID>r-1</RequestID></Response>", "text/xml")
                elif fake.mode == "error500":
                    self._send(500, b"Internal Server Error", "text/plain")
                elif fake.mode == "html":
                    self._send(502, HTML_PAGE, "text/html")
                else:  # garbage: a 200 whose body no parser reads
                    self._send(200, b"\x00\x01garbage{{<not-xml", "application/octet-stream")

            do_GET = do_POST

            def _send(self, status: int, body: bytes, content_type: str, headers: dict | None = None):
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()
