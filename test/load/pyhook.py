"""A Workspace hook written the way Metacontroller's Python examples are:
http.server and json from the standard library, one request at a time.

It is the comparison point `go run ./test/load -compare` measures the hook
server against (make bench): it decodes each request and answers the golden
response of the fixture named by the X-Fixture header, with no logic.

    python3 test/load/pyhook.py PORT FIXTURES MATCH
"""
import glob
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


def load(fixtures, match):
    answers = []
    for path in sorted(glob.glob(os.path.join(fixtures, "*", "*", "*", "request.json"))):
        case = os.path.dirname(path)
        if match not in os.path.relpath(case, fixtures):
            continue
        with open(os.path.join(case, "response.json")) as f:
            answers.append(json.load(f))
    return answers


class Hook(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        json.loads(body)
        answer = ANSWERS[int(self.headers.get("X-Fixture", "0")) % len(ANSWERS)]
        out = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


class Server(HTTPServer):
    def handle_error(self, request, client_address):
        # The load tool cancels requests in flight when a round ends; a
        # broken pipe then is expected, not worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


if __name__ == "__main__":
    ANSWERS = load(sys.argv[2], sys.argv[3])
    Server(("127.0.0.1", int(sys.argv[1])), Hook).serve_forever()
