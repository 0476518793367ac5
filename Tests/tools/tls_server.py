"""What the test servers share: a threading HTTP server over TLS on a free loopback port."""
import ssl
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def serve(handler: type[BaseHTTPRequestHandler], cert: str, key: str) -> None:
    """Listens, prints the port as the first line of output, and serves until killed."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    # Each connection shakes hands in its own thread, not in the one that accepts them all.
    server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    print(server.server_address[1], flush=True)
    server.serve_forever()
