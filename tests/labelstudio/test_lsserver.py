"""The harness's Label Studio listens on loopback only (no Label Studio: a stand-in executable).

The stand-in takes ``label-studio start``'s arguments as Label Studio 1.23.2 does, with the same
default for ``--internal-host`` (``0.0.0.0``, every interface), and, like it, serves ``/health`` from
a process it starts: what it listens on is what the harness asks for, and a harness that does not
say ``--internal-host`` exposes it. The slow test in ``test_real_server.py`` checks the real one.
"""
import socket
import sys
import textwrap

import httpx
import pytest
from lsserver import Server

psutil = pytest.importorskip("psutil")

STAND_IN = textwrap.dedent('''\
    #!{python}
    import argparse, http.server, subprocess, sys
    parser = argparse.ArgumentParser()
    parser.add_argument("command")
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument("--internal-host", default="0.0.0.0")   # Label Studio 1.23.2's default
    parser.add_argument("--host", default="")
    parser.add_argument("-p", "--port", type=int, default=8080)
    args = parser.parse_args()
    if args.command == "start":                                   # the server runs in a child, as a tree
        sys.exit(subprocess.call([sys.executable, __file__, "serve", "--internal-host", args.internal_host,
                                  "--port", str(args.port)]))

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()
            self.wfile.write(b'{{"status": "UP"}}')

        def log_message(self, *args):
            pass

    http.server.HTTPServer((args.internal_host, args.port), Health).serve_forever()
    ''')


def refused(ip, port):
    """Whether a TCP connection to ``ip:port`` (loopback only) is refused (or cannot be made)."""
    assert ip.startswith("127."), "the tests connect to loopback only"
    try:
        socket.create_connection((ip, port), timeout=2).close()
    except OSError:
        return True
    return False


@pytest.fixture
def stand_in(tmp_path):
    path = tmp_path / "label-studio"
    path.write_text(STAND_IN.format(python=sys.executable))
    path.chmod(0o700)
    return path


def test_the_harness_binds_label_studio_to_loopback_only(stand_in, tmp_path):
    server = Server(stand_in, tmp_path).start(timeout=30)
    try:
        assert len(psutil.Process(server.process.pid).children(recursive=True)) == 1
        assert server.listening() == [("127.0.0.1", server.port)]          # the child's socket, and no other
        assert httpx.get(server.url + "/health", timeout=5).status_code == 200
    finally:
        server.stop()


def test_stop_ends_every_process_the_harness_started(stand_in, tmp_path):
    server = Server(stand_in, tmp_path).start(timeout=30)
    root = psutil.Process(server.process.pid)
    tree = [root, *root.children(recursive=True)]
    assert len(tree) == 2
    server.stop()
    _, alive = psutil.wait_procs(tree, timeout=10)     # the child, signalled with its group, ends just after
    assert alive == []
    assert refused("127.0.0.1", server.port)
