"""A local model endpoint for the evaluation scripts: an HTTP server on 127.0.0.1 (a free port,
a daemon thread) whose every POST is answered by a function of the request's body."""
import http.server
import threading


def serve(respond):
    """Starts a server answering each POST with `respond(body, headers, path)` -> (status, bytes
    or None); returns its OpenAI-style base URL (http://127.0.0.1:PORT/v1)."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            status, reply = respond(body, self.headers, self.path)
            self.send_response(status)
            if reply is not None:
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            if reply is not None:
                self.wfile.write(reply)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1"
