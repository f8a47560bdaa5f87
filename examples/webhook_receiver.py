"""A webhook receiver for the gateway's signed events (docs/teams.md, docs/deploying.md#webhooks).

    GATEWAY_WEBHOOK_SECRET=whsec_... python examples/webhook_receiver.py [PORT]

It listens on http://127.0.0.1:PORT/ (9000 unless given), checks each delivery's signature with the
same secret as the gateway's ``GATEWAY_WEBHOOK_SECRET``, answers a bad one with 400, and prints one
line per event:

    question.asked que_… to group:oncall
    question.replied que_… by carol
"""

import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook, WebhookVerificationError

webhook = Webhook(os.environ["GATEWAY_WEBHOOK_SECRET"])


def describe(event: dict) -> str:
    """One line: the event's type, its question, and whom it is for or who answered."""
    data = event["data"]
    if event["type"] == "question.asked":
        return f"question.asked {data['id']} to {','.join(data.get('to') or ['everyone'])}"
    return f"{event['type']} {data['requestID']} by {data.get('answeredBy') or 'someone'}"


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            event = webhook.verify(body, dict(self.headers))  # raises if forged, edited or stale
        except WebhookVerificationError:
            self.send_response(400)
            self.end_headers()
            return
        print(describe(event), flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the events are the output."""


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 9000
    server = ThreadingHTTPServer(("127.0.0.1", port), Receiver)
    print(f"receiving on http://127.0.0.1:{port}/", flush=True)
    server.serve_forever()
