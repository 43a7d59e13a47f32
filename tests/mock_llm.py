#!/usr/bin/env python3
"""A scripted OpenAI-compatible server on 127.0.0.1 for nl2sql's tests.

POST /v1/chat/completions answers by the first rule whose "match" strings all occur in the
conversation (every message's content joined). Rules are stateless, so a correction round is
scripted by a rule that also matches the correction prompt, placed before the first-round rule.

Rule fields (besides "match"):
  content      answer text, returned as an OpenAI chat completion; "{authorization}" in it is
               replaced by the Authorization header received (a model that echoes a secret)
  sequence     answers in turn to the requests this rule matches, cycling: each item a string
               (the content) or an object with content/status/body/delay_ms; for the n
               identical candidate requests of one question
  status/body  answer with this HTTP status and body instead; "{authorization}" in the body is
               replaced by the Authorization header received (as some APIs echo a bad key)
  raw          answer HTTP 200 with this raw body (garbage or truncated JSON)
  delay_ms     wait this long before answering
  fail_times   answer the first N matching requests with "status" (default 503), then normally
  repeat       {"text": ..., "times": N}: append text N times to the content (huge answers)
  suffix       appended after the repeated text
  n            true: a request for several answers (OpenAI's "n") gets that many choices, each
               the next item of "sequence" (or "content"), as OpenAI and vLLM answer; false:
               only its first answer (a server that ignores n). Without it, such a request is
               refused with HTTP 400 as llama.cpp's server refuses it.
  grammar      "refuse": a request carrying a grammar ("grammar" or "structured_outputs") is
               refused with HTTP 400, as OpenAI refuses a field it does not know; otherwise a
               grammar is accepted (and, the answer being scripted, changes nothing)
  logprob      a request asking for "logprobs" gets them: every word of the answer this log
               probability, with itself as its only alternative (as llama.cpp's server answers);
               without it, a request asking for them gets none (an endpoint that ignores them)

POST /v1/embeddings answers every input with a deterministic 64-dimensional vector (signed
hashed character trigrams, normalised), so similar strings get similar vectors. An input
containing "[embed-slow]" delays the answer 30 s; "[embed-500]" makes it fail with HTTP 500.

GET /requests   every request seen so far (JSON list: path, authorization, body, received, and
                answered and status: when the answer was sent, and its HTTP status)
POST /reset     forget requests, fail counters and sequence positions
GET /health     200
"""
import argparse
import hashlib
import json
import math
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.RLock()
SEEN = []
FAILS = {}
SEQ = {}


class Handler(BaseHTTPRequestHandler):
    rules = []
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # keep test output quiet
        pass

    def _send(self, status, body, content_type="application/json"):
        entry = getattr(self, "entry", None)  # this request's record in SEEN (POSTs only)
        if entry is not None:
            with LOCK:
                entry.setdefault("status", status)
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout or cancel): expected in tests

    def do_GET(self):
        self.entry = None
        if self.path == "/health":
            self._send(200, "{}")
        elif self.path == "/requests":
            with LOCK:
                self._send(200, json.dumps(SEEN))
        else:
            self._send(404, '{"error": "not found"}')

    def do_POST(self):
        self.entry = None
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode("utf-8", "replace")
        if self.path == "/reset":
            with LOCK:
                SEEN.clear()
                FAILS.clear()
                SEQ.clear()
            return self._send(200, "{}")
        try:
            body = json.loads(raw)
        except ValueError:
            return self._send(400, '{"error": "request body is not JSON"}')
        self.entry = {"path": self.path, "authorization": self.headers.get("Authorization"), "body": body,
                      "received": time.time()}
        with LOCK:
            SEEN.append(self.entry)
        if self.path.endswith("/embeddings"):
            return self._embeddings(body)
        if not self.path.endswith("/chat/completions"):
            return self._send(404, '{"error": "unknown path"}')
        text = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        for i, rule in enumerate(self.rules):
            if all(m in text for m in rule.get("match", [])):
                return self._answer(i, rule, body)
        return self._answer(-1, {"content": "-- mock: no scripted answer for this conversation"}, body)

    def _embeddings(self, body):
        inputs = body.get("input", [])
        if isinstance(inputs, str):
            inputs = [inputs]
        joined = "\n".join(inputs)
        if "[embed-500]" in joined:
            return self._send(500, json.dumps({"error": "scripted embedding failure"}))
        if "[embed-slow]" in joined:
            time.sleep(30)
        data = [{"object": "embedding", "index": i, "embedding": embed(t)} for i, t in enumerate(inputs)]
        return self._send(200, json.dumps({"object": "list", "data": data, "model": body.get("model", "mock"),
                                           "usage": {"prompt_tokens": len(joined) // 4, "total_tokens": len(joined) // 4}}))

    def _answer(self, idx, rule, body):
        if rule.get("grammar") == "refuse" and ("grammar" in body or "structured_outputs" in body):
            msg = "Unrecognized request argument supplied: grammar"
            return self._send(400, json.dumps({"error": {"code": 400, "message": msg, "type": "invalid_request_error"}}))
        wanted = int(body.get("n") or 1)
        if wanted > 1 and "n" not in rule:
            msg = "Field 'n': Value must be between 1 <= value <= 1, but got %d" % wanted
            return self._send(400, json.dumps({"error": {"code": 400, "message": msg, "type": "invalid_request_error"}}))
        choices = wanted if rule.get("n") else 1
        contents = []
        for _ in range(choices):
            one = rule
            if "sequence" in rule:
                with LOCK:
                    n = SEQ.get(idx, 0)
                    SEQ[idx] = n + 1
                item = rule["sequence"][n % len(rule["sequence"])]
                base = {k: v for k, v in rule.items() if k not in ("sequence", "match")}
                one = {**base, **(item if isinstance(item, dict) else {"content": item})}
            contents.append(one)
        rule = contents[0]
        if rule.get("delay_ms"):
            time.sleep(rule["delay_ms"] / 1000.0)
        if rule.get("fail_times"):
            with LOCK:
                n = FAILS.get(idx, 0)
                FAILS[idx] = n + 1
            if n < rule["fail_times"]:
                return self._send(rule.get("status", 503), json.dumps({"error": "scripted failure"}))
        elif "status" in rule:
            body_text = rule.get("body", "").replace("{authorization}", self.headers.get("Authorization") or "")
            return self._send(rule["status"], body_text)
        if "raw" in rule:
            return self._send(200, rule["raw"])
        texts, scores = [], []
        for one in contents:
            scores.append(one.get("logprob") if body.get("logprobs") else None)
            content = one.get("content", "").replace("{authorization}", self.headers.get("Authorization") or "")
            if "repeat" in one:
                content += one["repeat"]["text"] * int(one["repeat"]["times"]) + one.get("suffix", "")
            texts.append(content)
        prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
        completion = sum(max(1, len(t) // 4) for t in texts)
        reply = {
            "id": "mock-%d" % idx,
            "object": "chat.completion",
            "model": body.get("model", "mock"),
            "choices": [{"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop",
                         **({"logprobs": {"content": tokens(t, lp)}} if lp is not None else {})}
                        for i, (t, lp) in enumerate(zip(texts, scores))],
            "usage": {"prompt_tokens": prompt_chars // 4, "completion_tokens": completion,
                      "total_tokens": prompt_chars // 4 + completion},
        }
        self._send(200, json.dumps(reply))
        with LOCK:
            self.entry["answered"] = time.time()


def tokens(text, logprob):
    """The answer's words, each with its leading whitespace, as log-probability entries."""
    words = re.findall(r"\s*\S+", text)
    return [{"token": w, "logprob": logprob, "top_logprobs": [{"token": w, "logprob": logprob}]} for w in words]


def embed(text, dims=64):
    """Signed hashed character trigrams, L2-normalised."""
    padded = " " + text.lower() + " "
    v = [0.0] * dims
    for i in range(len(padded) - 2):
        h = int(hashlib.md5(padded[i:i + 3].encode()).hexdigest(), 16)
        v[h % dims] += 1.0 if (h >> 8) & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [round(x / norm, 6) for x in v]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", required=True, action="append",
                    help="JSON file: {\"rules\": [...]}; repeat it to add files (earlier files' rules first)")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", help="write the chosen port here once listening")
    args = ap.parse_args()
    Handler.rules = []
    for path in args.scenarios:
        with open(path) as f:
            Handler.rules.extend(json.load(f)["rules"])
    # A listen backlog for many concurrent clients (the load bench: 20 backends x 2 candidates);
    # the default of 5 resets connections beyond it.
    ThreadingHTTPServer.request_queue_size = 256
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(str(server.server_address[1]))
        import os
        os.replace(args.port_file + ".tmp", args.port_file)
    print("mock LLM on http://127.0.0.1:%d/v1" % server.server_address[1], file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
